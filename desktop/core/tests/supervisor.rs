//! The desktop app's engine, without a display: a real coordinator, real
//! runners in this process (runner-core's Fleet), and a real keychain
//! (GNOME Keyring on a private bus). Pairing by link, lending to a
//! workspace pool by link, adding and removing runners (with drain),
//! pausing, restarting, signing out.

use crate::support;
use std::time::Duration;

use drover_desktop_core::keychain::Keychain;
use drover_desktop_core::supervisor::{ActivityKind, AppState, Status, Supervisor};
use drover_tests::runner_core::client::{RunnerListing, Scope};
use drover_tests::runner_core::credentials::CredentialStore;
use drover_tests::runner_core::wire::{ErrorCode, JobState};
use drover_tests::*;
use support::{SecretService, runtime, submit, supervisor, supervisor_ticking, wait_state};

/// Pairs a fresh supervisor with `member` through a `drover://pair` link.
async fn paired(sup: &Supervisor, member: &Member) -> AppState {
    let code = member.client.pairing_code().await.unwrap();
    let pending = sup.open_link(&code.link).await.unwrap();
    assert_eq!(pending.kind, "pair");
    assert_eq!(pending.coordinator, member.client.base_url());
    sup.confirm_link().await.unwrap()
}

/// Waits until the supervisor shows `n` runners online in its one pool.
async fn online(sup: &Supervisor, n: usize) -> AppState {
    eventually(&format!("{n} runners online"), DEADLINE, || async {
        let state = sup.state().await;
        let live = &state.pools.first()?.live;
        (live.len() == n && live.iter().all(|r| r.online)).then_some(state)
    })
    .await
}

fn file_contains(path: &std::path::Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle))
}

#[test]
fn a_pairing_link_signs_in_lends_a_runner_and_keeps_secrets_in_the_keychain_only() {
    let service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, notes) = supervisor(&dir).await;
        assert_eq!(sup.state().await.status, Status::SignedOut);

        let state = paired(&sup, &ann).await;
        let account = state.account.clone().expect("signed in");
        assert_eq!(
            (account.email.as_str(), account.role.as_str()),
            ("ann@acme.test", "admin")
        );
        assert_eq!(account.device_name.as_deref(), Some("laptop"));
        assert_eq!(state.pools.len(), 1);
        let pool = state.pools[0].clone();
        assert_eq!(pool.runners, 1);
        online(&sup, 1).await;
        assert!(
            notes.lock().unwrap().iter().any(|n| n.contains("paired")),
            "a notification says so"
        );

        // The runner runs the member's jobs on their personal pool.
        let job = submit(&ann, &pool.reference, "echo hello from the laptop").await;
        wait_state(&ann, &job, JobState::Succeeded).await;
        assert!(
            ann.client
                .logs(&job)
                .await
                .unwrap()
                .contains("hello from the laptop")
        );

        // The device token is a member token named after the device.
        let tokens = ann.client.tokens().await.unwrap().tokens;
        assert!(tokens.iter().any(|t| t.name == "laptop"), "{tokens:?}");

        // Secrets: in the keychain, never in the settings file.
        let items = service.items();
        assert!(items.contains("username = account"), "{items}");
        assert!(
            items.contains(&format!("username = runner:{}-0", pool.reference)),
            "{items}"
        );
        let saved = Keychain
            .load(&format!("{}-0", pool.reference))
            .unwrap()
            .unwrap();
        let config = support::config_path(&dir);
        assert!(
            file_contains(&config, &pool.reference),
            "the pool is in the settings"
        );
        assert!(
            !file_contains(&config, &saved.token),
            "no runner token in the settings"
        );
        assert!(
            !file_contains(&config, "drv_"),
            "no member token in the settings"
        );

        // A pairing link while signed in says so at once, before any
        // dialog asks to confirm it.
        let code = ann.client.pairing_code().await.unwrap();
        let e = sup.open_link(&code.link).await.unwrap_err();
        assert_eq!(e.code, "ALREADY_SIGNED_IN", "{e:?}");
        assert!(e.message.contains("ann@acme.test"), "{e:?}");
        let state = sup.state().await;
        assert_eq!(state.pending, None, "no dialog is held");
        assert_eq!(state.link_refused.as_deref(), Some(e.message.as_str()));
        assert_eq!(sup.dismiss_link().await.unwrap().link_refused, None);

        // A used code is refused, and says so.
        ann.client
            .redeem_pairing_code(&code.code, "other")
            .await
            .unwrap();
        sup.sign_out().await.unwrap();
        sup.open_link(&code.link).await.unwrap();
        let e = sup.confirm_link().await.unwrap_err();
        assert_eq!(e.code, "PAIRING_CODE_USED", "{e:?}");
        assert_eq!(
            sup.state().await.pending,
            None,
            "a refused code is not kept"
        );
    });
}

#[test]
fn a_removed_runner_finishes_its_job_then_is_revoked_and_forgotten() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        let state = sup.set_runner_count(&reference, 2).await.unwrap();
        assert_eq!(state.pools[0].runners, 2);
        let state = online(&sup, 2).await;
        let newest = state.pools[0].live[1].id.clone();

        // A job on the newest runner that runs until the test lets it end.
        let gate = dir.path().join("gate");
        let job = submit(
            &ann,
            &format!("self:{newest}"),
            &format!(
                "while [ ! -e {} ]; do sleep 0.05; done; echo done",
                gate.display()
            ),
        )
        .await;
        wait_state(&ann, &job, JobState::Running).await;

        let state = sup.set_runner_count(&reference, 1).await.unwrap();
        assert_eq!(state.pools[0].runners, 1);
        let leaving = state.pools[0]
            .live
            .iter()
            .find(|r| r.id == newest)
            .expect("still draining");
        assert!(
            leaving.draining && leaving.current_jobs == [job.clone()],
            "{leaving:?}"
        );
        // Still running, so still a runner at the coordinator.
        let mine = ann
            .client
            .runners(RunnerListing::Mine)
            .await
            .unwrap()
            .runners;
        assert!(mine.iter().any(|r| r.id == newest));

        std::fs::write(&gate, "").unwrap();
        wait_state(&ann, &job, JobState::Succeeded).await;
        eventually("the removed runner revoked", DEADLINE, || async {
            let mine = ann.client.runners(RunnerListing::Mine).await.ok()?.runners;
            (!mine.iter().any(|r| r.id == newest)).then_some(())
        })
        .await;
        eventually(
            "its credential gone from the keychain",
            DEADLINE,
            || async {
                let k = Keychain;
                let gone = k.load(&format!("{reference}-1")).ok()?.is_none()
                    && k.get(&format!("departing:{newest}")).ok()?.is_none();
                let state = sup.state().await;
                (gone && state.pools[0].live.len() == 1).then_some(())
            },
        )
        .await;
        // The kept runner still works.
        let job = submit(&ann, &reference, "true").await;
        wait_state(&ann, &job, JobState::Succeeded).await;
    });
}

#[test]
fn pause_holds_new_leases_until_resumed_and_battery_power_pauses_too() {
    let service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        online(&sup, 1).await;
        c.wait_for_waiting(1).await;

        let client = &ann.client;
        let listed = |paused: bool| async move {
            let runners = client.runners(RunnerListing::Mine).await.ok()?.runners;
            let [r] = runners.as_slice() else { return None };
            (r.online && r.paused == paused).then(|| r.clone())
        };
        let state = sup.set_paused(true).await.unwrap();
        assert_eq!(state.status, Status::Paused);
        // A paused runner gives up its long-poll and asks for nothing;
        // the coordinator lists it online and paused, by the name the app shows.
        eventually("no lease long-poll waiting", DEADLINE, || async {
            (c.waiting_leases().await == 0).then_some(())
        })
        .await;
        let runner = eventually("listed paused", DEADLINE, || listed(true)).await;
        let local = sup.state().await.pools[0].live[0].clone();
        assert_eq!(
            (local.id, local.name),
            (runner.id.to_string(), runner.name.clone())
        );
        assert!(runner.name.starts_with("laptop-"), "{}", runner.name);
        let job = submit(&ann, &reference, "true").await;
        assert_eq!(ann.client.job(&job).await.unwrap().state, JobState::Queued);

        sup.set_paused(false).await.unwrap();
        eventually("listed not paused", DEADLINE, || listed(false)).await;
        wait_state(&ann, &job, JobState::Succeeded).await;
        // Quitting says so: offline in the listing at once, not 40 s later.
        sup.begin_quit().await;
        sup.wait_stopped().await;
        let runners = ann
            .client
            .runners(RunnerListing::Mine)
            .await
            .unwrap()
            .runners;
        assert!(!runners[0].online, "a runner that quit is listed online");
        drop(sup);

        // On battery, with "pause on battery" (the default), a new start is paused.
        let power = service.dir.path().join("power");
        for (name, files) in [
            ("BAT0", [("type", "Battery"), ("status", "Discharging")]),
            ("AC", [("type", "Mains"), ("online", "0")]),
        ] {
            std::fs::create_dir_all(power.join(name)).unwrap();
            for (file, text) in files {
                std::fs::write(power.join(name).join(file), text).unwrap();
            }
        }
        let (sup, _) = supervisor(&dir).await;
        let state = sup.state().await;
        assert!(state.on_battery && state.settings.pause_on_battery);
        assert_eq!(state.status, Status::Paused);
        let state = sup
            .set_settings(drover_desktop_core::supervisor::Settings {
                pause_on_battery: false,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_ne!(state.status, Status::Paused);
    });
}

#[test]
fn runners_pools_and_settings_survive_a_restart() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        sup.set_runner_count(&reference, 2).await.unwrap();
        sup.set_pool_settings(&reference, 2, vec!["gpu".into(), " ".into()])
            .await
            .unwrap();
        let before: Vec<String> = online(&sup, 2).await.pools[0]
            .live
            .iter()
            .map(|r| r.id.clone())
            .collect();
        let bad = sup
            .set_pool_settings(&reference, 0, vec![])
            .await
            .unwrap_err();
        assert_eq!(bad.code, "INVALID_INPUT");
        let bad = sup
            .set_pool_settings(&reference, 1, vec!["no spaces".into()])
            .await
            .unwrap_err();
        assert_eq!(bad.code, "INVALID_INPUT");
        sup.set_paused(true).await.unwrap();
        // Paused runners give up their long-polls; until the coordinator
        // has seen them go, a job submitted now could be leased to one (and
        // wait, leased, for its TTL): the same wait as the pause test's.
        c.wait_for_waiting(0).await;
        let job = submit(&ann, &reference, "true").await;
        sup.begin_quit().await;
        sup.wait_stopped().await;
        let activity = sup.state().await.activity;
        assert!(!activity.is_empty());
        drop(sup);

        let (sup, _) = supervisor(&dir).await;
        let state = sup.state().await;
        assert!(state.paused && state.account.is_some());
        assert!(
            state.activity.ends_with(&activity),
            "the activity list is kept across a restart: {:?}",
            state.activity
        );
        let pool = &state.pools[0];
        assert_eq!(
            (pool.runners, pool.slots, pool.labels.clone()),
            (2, 2, vec!["gpu".to_owned()])
        );
        let after: Vec<String> = online(&sup, 2).await.pools[0]
            .live
            .iter()
            .map(|r| r.id.clone())
            .collect();
        assert_eq!(before, after, "the same runners, from the keychain");
        let mine = ann
            .client
            .runners(RunnerListing::Mine)
            .await
            .unwrap()
            .runners;
        assert_eq!(mine.len(), 2, "no runner paired twice: {mine:?}");
        assert!(
            mine.iter()
                .all(|r| r.capabilities.contains(&"gpu".to_owned())),
            "{mine:?}"
        );
        // Restarted paused: online, yet leasing nothing until resumed.
        assert_eq!(ann.client.job(&job).await.unwrap().state, JobState::Queued);
        assert_eq!(c.waiting_leases().await, 0);
        sup.set_paused(false).await.unwrap();
        wait_state(&ann, &job, JobState::Succeeded).await;
    });
}

#[test]
fn signing_out_revokes_this_devices_tokens_and_empties_the_keychain() {
    let service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        online(&sup, 1).await;
        let runner = Keychain.load(&format!("{reference}-0")).unwrap().unwrap();
        let device = sup.account_client().await.unwrap();

        let state = sup.sign_out().await.unwrap();
        assert_eq!(state.status, Status::SignedOut);
        assert!(state.pools.is_empty() && state.account.is_none());
        let e = device.tokens().await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(ErrorCode::Unauthorized),
            "the device token is revoked"
        );
        let e = c.client(&runner.token).hello(&[]).await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(ErrorCode::Unauthorized),
            "the runner is revoked"
        );
        let items = service.items();
        assert!(
            !items.contains("username ="),
            "the keychain still holds: {items}"
        );
        assert!(
            ann.client
                .runners(RunnerListing::Mine)
                .await
                .unwrap()
                .runners
                .is_empty()
        );
        // Commands needing the account now say so.
        let e = sup.account_client().await.unwrap_err();
        assert_eq!(e.code, "NOT_SIGNED_IN");
    });
}

/// Revoked from elsewhere (here the CLI): the coordinator revokes the
/// runners this device paired, and the app hears it from them, stops,
/// empties the keychain and says who signed it out.
#[test]
fn a_device_token_revoked_elsewhere_signs_the_app_out_and_says_by_whom() {
    let service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        // Its runners hear of it: the periodic look at the account (which
        // could hear first, and stop them before they do) waits an hour.
        let (sup, notes) = supervisor_ticking(&dir, Duration::from_secs(3600)).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        sup.set_runner_count(&reference, 2).await.unwrap();
        online(&sup, 2).await;
        let device = sup.state().await.account.unwrap().token_id.unwrap();

        stdout_ok(&c.drover(&ann.token, &["tokens", "revoke", &device]));
        let state = eventually("the app signed out", DEADLINE, || async {
            let state = sup.state().await;
            (state.status == Status::SignedOut).then_some(state)
        })
        .await;
        let why = state
            .signed_out
            .expect("the app says why it was signed out");
        assert!(
            why.contains("the drover CLI") && why.contains("ann@acme.test"),
            "{why}"
        );
        assert!(state.pools.is_empty() && state.account.is_none());
        assert_eq!(state.activity[0].kind, ActivityKind::SignedOut);
        // Its runners' stops in words, the client's error behind them.
        let host = ann
            .client
            .base_url()
            .trim_start_matches("http://")
            .to_owned();
        let stopped: Vec<_> = state
            .activity
            .iter()
            .filter(|a| a.message.contains(" stopped: "))
            .collect();
        assert!(!stopped.is_empty(), "{:?}", state.activity);
        for a in stopped {
            let words = format!(
                "stopped: {host} no longer accepts it (its token was revoked, or its pool removed)."
            );
            assert!(
                a.message.starts_with("laptop-") && a.message.ends_with(&words),
                "{a:?}"
            );
            assert!(
                a.detail.as_deref().is_some_and(|d| d.contains("401")),
                "{a:?}"
            );
        }
        let items = service.items();
        assert!(
            !items.contains("username ="),
            "the keychain still holds: {items}"
        );
        assert!(
            notes
                .lock()
                .unwrap()
                .iter()
                .any(|n| n.contains("this device was signed out")),
            "no notification"
        );
        // Pairing again clears it.
        let state = paired(&sup, &ann).await;
        assert_eq!(state.signed_out, None);
    });
}

#[test]
fn a_join_link_lends_this_machine_to_a_workspace_pool() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let pool = ann
            .client
            .create_runtime(Scope::Workspace, "build")
            .await
            .unwrap();
        let join = ann
            .client
            .join_token(Scope::Workspace, &pool.id)
            .await
            .unwrap();
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;

        let bad = sup
            .open_link("drover://join?url=http://x&ref=ws:acme:build&token=rnr_x")
            .await;
        assert_eq!(bad.unwrap_err().code, "BAD_LINK");
        let pending = sup.open_link(join.link.as_deref().unwrap()).await.unwrap();
        assert_eq!(
            (pending.kind, pending.pool.as_str()),
            ("join", pool.reference.as_str())
        );
        let state = sup.confirm_link().await.unwrap();
        assert!(
            state.account.is_none(),
            "lending to a pool needs no sign-in"
        );
        assert_eq!(state.pools[0].reference, pool.reference);
        let id = online(&sup, 1).await.pools[0].live[0].id.clone();
        let roster = ann
            .client
            .runners(RunnerListing::Roster)
            .await
            .unwrap()
            .runners;
        assert!(
            roster.iter().any(|r| r.id == id && r.owner == "ws:acme"),
            "{roster:?}"
        );
        let job = submit(&ann, &pool.reference, "echo on the team pool").await;
        wait_state(&ann, &job, JobState::Succeeded).await;

        // Removing it revokes it with its own credential (no admin token here).
        sup.set_runner_count(&pool.reference, 0).await.unwrap();
        eventually("the runner gone from the roster", DEADLINE, || async {
            let roster = ann
                .client
                .runners(RunnerListing::Roster)
                .await
                .ok()?
                .runners;
            (!roster.iter().any(|r| r.id == id)).then_some(())
        })
        .await;
    });
}

/// The confirm dialog names the pool the coordinator says a join token
/// joins, not the link's own `ref=` text, and a link
/// whose token was revoked is refused before any dialog.
#[test]
fn a_join_link_is_shown_with_the_pool_its_token_really_joins() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        for name in ["prod", "sandbox"] {
            ann.client
                .create_runtime(Scope::Workspace, name)
                .await
                .unwrap();
        }
        let prod = ws_join_token(&ann, "prod").await;
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;

        // A link that says "sandbox" for a token of "prod".
        let lying = format!(
            "drover://join?url={}&ref=ws%3Aacme%3Asandbox&token={}",
            c.url, prod.token
        );
        let pending = sup.open_link(&lying).await.unwrap();
        assert_eq!(
            (
                pending.kind,
                pending.pool.as_str(),
                pending.link_pool.as_deref()
            ),
            ("join", "ws:acme:prod", Some("ws:acme:sandbox"))
        );
        assert_eq!(
            sup.state().await.pending.unwrap().pool,
            "ws:acme:prod",
            "the state the window renders says the same"
        );
        sup.dismiss_link().await.unwrap();

        // An honest link: nothing differs.
        let honest = sup.open_link(prod.link.as_deref().unwrap()).await.unwrap();
        assert_eq!(
            (honest.pool.as_str(), honest.link_pool),
            ("ws:acme:prod", None)
        );
        sup.dismiss_link().await.unwrap();

        // Revoked: refused at once, nothing held.
        ann.client
            .revoke_join_token(Scope::Workspace, prod.id.as_deref().unwrap())
            .await
            .unwrap();
        let e = sup.open_link(&lying).await.unwrap_err();
        assert_eq!(e.code, "UNAUTHORIZED", "{e:?}");
        assert!(e.message.contains("revoked or expired"), "{}", e.message);
        assert!(sup.state().await.pending.is_none());
        assert!(sup.state().await.pools.is_empty());
    });
}

#[test]
fn losing_the_coordinator_notifies_and_loses_no_result_already_run() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let mut c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, notes) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        online(&sup, 1).await;
        let gate = dir.path().join("gate");
        let job = submit(
            &ann,
            &reference,
            &format!(
                "while [ ! -e {} ]; do sleep 0.05; done; echo finished",
                gate.display()
            ),
        )
        .await;
        wait_state(&ann, &job, JobState::Running).await;

        c.stop().await;
        let noted = |what: &'static str| {
            let notes = notes.clone();
            move || {
                let seen = notes.lock().unwrap().iter().any(|n| n.contains(what));
                async move { seen.then_some(()) }
            }
        };
        eventually(
            "an unreachable notification",
            DEADLINE,
            noted("unreachable"),
        )
        .await;
        assert_eq!(sup.state().await.status, Status::Offline);
        // The job ends while the coordinator is away; its result waits.
        std::fs::write(&gate, "").unwrap();
        c.restart().await;
        wait_state(&ann, &job, JobState::Succeeded).await;
        assert!(ann.client.logs(&job).await.unwrap().contains("finished"));
        eventually("a back-online notification", DEADLINE, noted("back online")).await;
        let state = online(&sup, 1).await;
        assert_ne!(state.status, Status::Offline);
        let kinds: Vec<_> = state.activity.iter().map(|a| a.kind).collect();
        assert!(
            kinds.contains(&ActivityKind::Unreachable)
                && kinds.contains(&ActivityKind::Reconnected)
        );
    });
}

#[test]
fn a_failed_job_is_noted_and_notified() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, notes) = supervisor(&dir).await;
        let reference = paired(&sup, &ann).await.pools[0].reference.clone();
        let job = submit(&ann, &reference, "exit 3").await;
        wait_state(&ann, &job, JobState::Failed).await;
        eventually("a job-failed notification", DEADLINE, || {
            let seen = notes
                .lock()
                .unwrap()
                .iter()
                .any(|n| n.contains("failed") && n.contains(&job) && n.contains("exit 3"));
            async move { seen.then_some(()) }
        })
        .await;
        let state = sup.state().await;
        assert_eq!(state.activity[0].kind, ActivityKind::JobFailed);
    });
}

/// The tray and the window draw from `watch()`. After a restart, one
/// taken at once (runners still connecting) is brought to idle by the
/// runners coming online, with no other change to wake it: what a tray
/// made at start shows.
#[test]
fn the_watched_state_follows_a_restart_to_online_without_another_change() {
    let _service = SecretService::start();
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        paired(&sup, &ann).await;
        sup.set_runner_count(&sup.state().await.pools[0].reference, 2)
            .await
            .unwrap();
        online(&sup, 2).await;
        drop(sup);

        let (sup, _) = supervisor(&dir).await;
        let mut states = sup.watch();
        let first = states.borrow_and_update().clone();
        assert_eq!(
            first.pools[0].live.len(),
            2,
            "the restart launched both runners: {:?}",
            first.activity
        );
        let deadline = tokio::time::Instant::now() + DEADLINE;
        // Idle comes with the first runner online; wait for both.
        let all_online =
            |s: &AppState| s.status == Status::Idle && s.pools[0].live.iter().all(|r| r.online);
        while !all_online(&states.borrow_and_update()) {
            tokio::time::timeout_at(deadline, states.changed())
                .await
                .expect("the watched state had both runners online within the deadline")
                .expect("the supervisor is alive");
        }
        let watched = states.borrow().clone();
        assert_eq!(
            watched,
            sup.state().await,
            "the watch holds the current state"
        );
    });
}
