//! Laptop manners: new jobs wait on a metered network (NetworkManager's
//! `Metered`) and in quiet hours, and the machine is kept awake (a logind
//! inhibitor) exactly while a job runs. NetworkManager and logind are
//! stand-ins on the test's private bus (`support::system`); the
//! coordinator, runners and keychain are real.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support;

use drover_desktop_core::supervisor::{AppState, QuietHours, Settings, Status, Supervisor};
use drover_tests::runner_core::client::RunnerListing;
use drover_tests::runner_core::wire::JobState;
use drover_tests::*;
use support::system::SystemServices;
use support::{SecretService, paired_idle, runtime, submit, supervisor, wait_state};

async fn state_where(sup: &Supervisor, what: &str, check: impl Fn(&AppState) -> bool) -> AppState {
    eventually(what, DEADLINE, || async {
        let state = sup.state().await;
        check(&state).then_some(state)
    })
    .await
}

/// The coordinator lists the one runner paused (or not), online.
async fn listed_paused(member: &Member, paused: bool) {
    eventually(&format!("listed paused={paused}"), DEADLINE, || async {
        let runners = member
            .client
            .runners(RunnerListing::Mine)
            .await
            .ok()?
            .runners;
        let [r] = runners.as_slice() else { return None };
        (r.online && r.paused == paused).then_some(())
    })
    .await;
}

/// `HH:MM`, `minutes` from now in UTC (the tests' TZ), wrapping at midnight.
fn utc_in(minutes: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        / 60;
    let m = (now + minutes).rem_euclid(24 * 60);
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[test]
fn a_metered_network_and_quiet_hours_hold_new_jobs_until_they_end() {
    let _service = SecretService::start();
    let system = SystemServices::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, reference) = paired_idle(&dir, &ann).await;

        // NetworkManager says metered (guessed: a phone's hotspot).
        system.set_metered(3);
        let state = state_where(&sup, "paused on a metered network", |s| {
            s.status == Status::Paused
        })
        .await;
        assert!(state.metered && !state.paused, "{state:?}");
        assert_eq!(state.held.as_deref(), Some("On a metered network"));
        assert!(
            state.activity[0].message.contains("on a metered network"),
            "{:?}",
            state.activity[0]
        );
        listed_paused(&ann, true).await;
        eventually("no lease long-poll waiting", DEADLINE, || async {
            (c.waiting_leases().await == 0).then_some(())
        })
        .await;
        let held = submit(&ann, &reference, "true").await;
        assert_eq!(ann.client.job(&held).await.unwrap().state, JobState::Queued);

        // Off the metered network: the job that waited runs.
        system.set_metered(2);
        state_where(&sup, "not paused", |s| s.status != Status::Paused).await;
        wait_state(&ann, &held, JobState::Succeeded).await;

        // With the setting off, a metered network holds nothing.
        let off = Settings {
            pause_on_metered: false,
            ..Settings::default()
        };
        sup.set_settings(off).await.unwrap();
        system.set_metered(1);
        state_where(&sup, "metered seen", |s| s.metered).await;
        assert_ne!(sup.state().await.status, Status::Paused);
        system.set_metered(4);
        state_where(&sup, "not metered", |s| !s.metered).await;

        // Quiet hours around now: new jobs wait, and the app says until when.
        let around_now = Settings {
            quiet_hours: Some(QuietHours::new(&utc_in(-1), &utc_in(3)).unwrap()),
            ..Settings::default()
        };
        let state = sup.set_settings(around_now).await.unwrap();
        assert_eq!(state.status, Status::Paused, "{state:?}");
        assert_eq!(
            state.held,
            Some(format!("Quiet hours until {}", utc_in(3))),
            "{state:?}"
        );
        listed_paused(&ann, true).await;
        eventually("no lease long-poll waiting", DEADLINE, || async {
            (c.waiting_leases().await == 0).then_some(())
        })
        .await;
        let quiet = submit(&ann, &reference, "true").await;
        assert_eq!(
            ann.client.job(&quiet).await.unwrap().state,
            JobState::Queued
        );
        // Bad times are refused with a stable code, and change nothing.
        let bad = Settings {
            quiet_hours: Some(QuietHours {
                from: "25:00".into(),
                to: "07:00".into(),
            }),
            ..Settings::default()
        };
        let e = sup.set_settings(bad).await.unwrap_err();
        assert_eq!(e.code, "INVALID_INPUT", "{e}");
        assert!(sup.state().await.quiet);

        // Quiet hours later today: the job runs now.
        let later = Settings {
            quiet_hours: Some(QuietHours::new(&utc_in(60), &utc_in(120)).unwrap()),
            ..Settings::default()
        };
        let state = sup.set_settings(later).await.unwrap();
        assert!(!state.quiet && state.held.is_none(), "{state:?}");
        listed_paused(&ann, false).await;
        wait_state(&ann, &quiet, JobState::Succeeded).await;
        // The settings survive a restart.
        drop(sup);
        let (sup, _) = supervisor(&dir).await;
        let settings = sup.state().await.settings;
        assert_eq!(settings.quiet_hours.unwrap().from, utc_in(60));
    });
}

#[test]
fn the_machine_is_kept_awake_while_a_job_runs_and_only_then() {
    let _service = SecretService::start();
    let system = SystemServices::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, reference) = paired_idle(&dir, &ann).await;
        assert_eq!(
            system.inhibit_calls(),
            0,
            "an idle app asked logind to stay awake"
        );

        let gate = dir.path().join("gate");
        let script = |gate: &std::path::Path| {
            format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display())
        };
        let job = submit(&ann, &reference, &script(&gate)).await;
        wait_state(&ann, &job, JobState::Running).await;
        let held = eventually("an inhibitor held", DEADLINE, || async {
            let held = system.held();
            (!held.is_empty()).then_some(held)
        })
        .await;
        assert_eq!(
            held,
            [(
                "sleep:idle".to_owned(),
                "Drover".to_owned(),
                "A job is running".to_owned(),
                "block".to_owned()
            )]
        );
        std::fs::write(&gate, "").unwrap();
        wait_state(&ann, &job, JobState::Succeeded).await;
        eventually("the inhibitor let go", DEADLINE, || async {
            system.held().is_empty().then_some(())
        })
        .await;
        assert_eq!(system.inhibit_calls(), 1);

        // Turned off: a running job takes no inhibitor.
        let off = Settings {
            keep_awake: false,
            ..Settings::default()
        };
        sup.set_settings(off).await.unwrap();
        let gate = dir.path().join("gate-2");
        let job = submit(&ann, &reference, &script(&gate)).await;
        state_where(&sup, "the job shown running", |s| {
            s.pools[0]
                .live
                .iter()
                .any(|r| r.current_jobs == [job.clone()])
        })
        .await;
        std::fs::write(&gate, "").unwrap();
        wait_state(&ann, &job, JobState::Succeeded).await;
        assert_eq!(
            system.inhibit_calls(),
            1,
            "keep awake off, yet logind was asked"
        );
        assert!(system.held().is_empty());
    });
}
