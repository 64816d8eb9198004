//! SPEC §2: refs, owner-only personal pools, tenant from the job, no
//! silent fallthrough, capability routing.

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{ErrorCode, JobState, SubmitJob};
use drover_tests::*;

#[tokio::test]
async fn every_ref_form_reaches_its_pool_and_records_provenance() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let laptop_rt = bob
        .client
        .create_runtime(Scope::Me, "laptop")
        .await
        .unwrap();
    let builders_rt = admin
        .client
        .create_runtime(Scope::Workspace, "builders")
        .await
        .unwrap();
    let bob_default = pair(&bob, Scope::Me, None, "bob-default", &[]).await;
    let bob_laptop = pair(&bob, Scope::Me, Some("laptop"), "bob-laptop", &[]).await;
    let ws_default = pair(&admin, Scope::Workspace, None, "ws-default", &[]).await;
    let ws_builders = pair(
        &admin,
        Scope::Workspace,
        Some("builders"),
        "ws-builders",
        &[],
    )
    .await;
    let _procs: Vec<RunnerProcess> = [&bob_default, &bob_laptop, &ws_default, &ws_builders]
        .iter()
        .map(|p| RunnerProcess::paired(&c.url, &p.token, &[]))
        .collect();

    let personal = format!("user:{}", bob.subject);
    let ws = "ws:acme".to_owned();
    let cases = [
        ("self".to_owned(), &bob_default, &personal),
        ("self:default".to_owned(), &bob_default, &personal),
        ("self:laptop".to_owned(), &bob_laptop, &personal),
        (format!("self:{}", laptop_rt.id), &bob_laptop, &personal),
        (
            format!("self:{}:laptop", bob.subject),
            &bob_laptop,
            &personal,
        ),
        (
            format!("self:{}", bob_laptop.runner.id),
            &bob_laptop,
            &personal,
        ),
        ("self:ws".to_owned(), &ws_default, &ws),
        ("self:ws:builders".to_owned(), &ws_builders, &ws),
        (format!("self:ws:{}", builders_rt.id), &ws_builders, &ws),
        ("ws:acme:builders".to_owned(), &ws_builders, &ws),
        ("ws:acme:default".to_owned(), &ws_default, &ws),
        (
            format!("self:ws:{}", ws_builders.runner.id),
            &ws_builders,
            &ws,
        ),
    ];
    for (reference, runner, by) in cases {
        let job = bob
            .client
            .submit(&script_job(&reference, "echo hi"))
            .await
            .unwrap();
        assert_eq!(job.runtime, reference);
        let done = wait_done(&bob.client, &job.id).await;
        assert_eq!(done.state, JobState::Succeeded, "{reference}");
        let p = done.provenance.expect("provenance");
        assert_eq!(p.ran_by, runner.runner.id, "{reference}");
        assert_eq!(&p.by, by, "{reference}");
        assert_eq!(p.ran_on, "self-hosted");
        assert_eq!(p.attempt, 1);
    }
}

#[tokio::test]
async fn only_the_owner_may_target_a_personal_pool_or_runner() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let alice = c.add_member("acme", "alice@acme.test", "member");
    bob.client
        .create_runtime(Scope::Me, "laptop")
        .await
        .unwrap();
    let laptop = pair(&bob, Scope::Me, Some("laptop"), "bob-laptop", &[]).await;
    let refs = [
        format!("self:{}:laptop", bob.subject),
        format!("self:{}:default", bob.subject),
        format!("self:{}", laptop.runner.id),
        "self:laptop".to_owned(),
    ];
    for other in [&alice, &admin] {
        for r in &refs {
            assert_eq!(
                code(other.client.submit(&script_job(r, "true")).await),
                ErrorCode::NotFound,
                "{} -> {r}",
                other.email
            );
        }
    }
    // Bob's personal job is invisible to others too, admins included.
    let job = bob
        .client
        .submit(&script_job("self:laptop", "true"))
        .await
        .unwrap();
    for other in [&alice, &admin] {
        assert_eq!(code(other.client.job(&job.id).await), ErrorCode::NotFound);
        assert_eq!(
            code(other.client.cancel(&job.id).await),
            ErrorCode::NotFound
        );
    }
    assert_eq!(
        bob.client.job(&job.id).await.unwrap().state,
        JobState::Queued
    );
}

#[tokio::test]
async fn another_workspace_is_not_found_never_forbidden() {
    let c = Coordinator::start().await;
    let acme = c.bootstrap("acme", "admin@acme.test");
    let globex = c.bootstrap("globex", "admin@globex.test");
    acme.client
        .create_runtime(Scope::Workspace, "builders")
        .await
        .unwrap();
    let acme_runner = pair(&acme, Scope::Workspace, Some("builders"), "b1", &[]).await;
    pair(&globex, Scope::Workspace, None, "g1", &[]).await;
    let acme_job = acme
        .client
        .submit(&script_job("self:ws:builders", "true"))
        .await
        .unwrap();
    for r in [
        "ws:acme:builders".to_owned(),
        "ws:acme:default".to_owned(),
        format!("self:ws:{}", acme_runner.runner.id),
        format!("self:ws:{}", acme_runner.runner.runtime_id),
        "self:ws:builders".to_owned(),
    ] {
        assert_eq!(
            code(globex.client.submit(&script_job(&r, "true")).await),
            ErrorCode::NotFound,
            "{r}"
        );
    }
    assert_eq!(
        code(globex.client.job(&acme_job.id).await),
        ErrorCode::NotFound
    );
    assert_eq!(
        code(globex.client.cancel(&acme_job.id).await),
        ErrorCode::NotFound
    );
    assert_eq!(
        code(
            globex
                .client
                .revoke_runner(Scope::Workspace, &acme_runner.runner.id)
                .await
        ),
        ErrorCode::NotFound
    );
    assert_eq!(
        code(globex.client.join_token(Scope::Workspace, "builders").await),
        ErrorCode::NotFound
    );
    // Globex's own canonical ref works (its pool has a runner).
    globex
        .client
        .submit(&script_job("ws:globex:default", "true"))
        .await
        .unwrap();
    assert_eq!(
        acme.client.job(&acme_job.id).await.unwrap().state,
        JobState::Queued
    );
}

#[tokio::test]
async fn no_silent_fallthrough_to_another_pool() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    admin
        .client
        .create_runtime(Scope::Workspace, "empty")
        .await
        .unwrap();
    admin
        .client
        .create_runtime(Scope::Workspace, "nightly")
        .await
        .unwrap();
    let default_runner = pair(&admin, Scope::Workspace, None, "always-on", &[]).await;
    let nightly_runner = pair(&admin, Scope::Workspace, Some("nightly"), "nightly", &[]).await;

    // A pool no runner ever joined: refused at submit with a clear message.
    match bob
        .client
        .submit(&script_job("self:ws:empty", "true"))
        .await
    {
        Err(drover_tests::runner_core::client::ClientError::Api {
            status: 404,
            code: ErrorCode::NoRunners,
            message,
        }) => {
            assert!(message.contains("no runner"), "{message}")
        }
        other => panic!("expected NO_RUNNERS, got {other:?}"),
    }
    // No personal pool at all.
    assert_eq!(
        code(bob.client.submit(&script_job("self", "true")).await),
        ErrorCode::NotFound
    );

    // A pool whose runners are offline queues the job; a busy-free runner
    // of another pool never takes it.
    let _always = RunnerProcess::paired(&c.url, &default_runner.token, &[]);
    let parked = bob
        .client
        .submit(&script_job("self:ws:nightly", "true"))
        .await
        .unwrap();
    let later = bob
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let later = wait_done(&bob.client, &later.id).await;
    assert_eq!(later.provenance.unwrap().ran_by, default_runner.runner.id);
    assert_eq!(
        bob.client.job(&parked.id).await.unwrap().state,
        JobState::Queued
    );

    let _nightly = RunnerProcess::paired(&c.url, &nightly_runner.token, &[]);
    let parked = wait_done(&bob.client, &parked.id).await;
    assert_eq!(parked.provenance.unwrap().ran_by, nightly_runner.runner.id);
}

#[tokio::test]
async fn capabilities_route_jobs_to_runners_that_have_them() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let plain = pair(&admin, Scope::Workspace, None, "plain", &[]).await;
    let gpu = pair(
        &admin,
        Scope::Workspace,
        None,
        "gpu",
        &["gpu=a100", "zone=eu"],
    )
    .await;

    // A pinned runner that lacks a requirement is refused at submit.
    let pinned = SubmitJob {
        requires: vec!["gpu".into()],
        ..script_job(&format!("self:ws:{}", plain.runner.id), "true")
    };
    assert_eq!(
        code(admin.client.submit(&pinned).await),
        ErrorCode::CapabilityMismatch
    );
    let pinned_ok = SubmitJob {
        requires: vec!["gpu=a100".into()],
        ..script_job(&format!("self:ws:{}", gpu.runner.id), "true")
    };
    let pinned_ok = admin.client.submit(&pinned_ok).await.unwrap();

    // On the pool, a runner lacking them skips the job; it waits for a capable one.
    let _plain = RunnerProcess::paired(&c.url, &plain.token, &[]);
    let gpu_job = admin
        .client
        .submit(&SubmitJob {
            requires: vec!["gpu".into(), "zone=eu".into()],
            ..script_job("self:ws", "true")
        })
        .await
        .unwrap();
    let detected = admin
        .client
        .submit(&SubmitJob {
            requires: vec!["os=linux".into()],
            ..script_job("self:ws", "true")
        })
        .await
        .unwrap();
    let detected = wait_done(&admin.client, &detected.id).await;
    assert_eq!(
        detected.provenance.unwrap().ran_by,
        plain.runner.id,
        "os=linux is detected by the runner itself"
    );
    assert_eq!(
        admin.client.job(&gpu_job.id).await.unwrap().state,
        JobState::Queued
    );

    // A container job needs docker; no runner here has it, so it waits.
    let container = admin
        .client
        .submit(&SubmitJob {
            image: Some("alpine:3".into()),
            ..script_job("self:ws", "true")
        })
        .await
        .unwrap();
    assert!(container.requires.contains(&"docker".to_owned()));

    let _gpu = RunnerProcess::paired(&c.url, &gpu.token, &[]);
    for id in [&gpu_job.id, &pinned_ok.id] {
        let done = wait_done(&admin.client, id).await;
        assert_eq!(done.provenance.unwrap().ran_by, gpu.runner.id);
    }
    assert_eq!(
        admin.client.job(&container.id).await.unwrap().state,
        JobState::Queued
    );
    assert_eq!(
        admin.client.cancel(&container.id).await.unwrap().state,
        JobState::Cancelled
    );
}

#[tokio::test]
async fn malformed_refs_are_invalid_ref_and_change_nothing() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    for r in [
        "",
        "self:",
        "ws",
        "ws:acme",
        "ws:acme:a:b",
        "cloud",
        "self:a b",
        "self::x",
        "self:ws:a:b",
    ] {
        assert_eq!(
            code(admin.client.submit(&script_job(r, "true")).await),
            ErrorCode::InvalidRef,
            "{r:?}"
        );
    }
    assert!(admin.client.jobs(None, 10).await.unwrap().jobs.is_empty());
}
