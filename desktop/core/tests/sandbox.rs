//! Other people's jobs on a laptop: a workspace pool's runner runs them
//! under bubblewrap, away from the member's home, the app's settings and
//! keyrings, `XDG_RUNTIME_DIR` and the app's processes; where no sandbox
//! works the app refuses to lend to a workspace pool unless the member
//! opts out for it, and the runner then announces `sandbox=none`. Personal
//! pools run as the member, as before.

use crate::support;

use std::path::Path;

use drover_desktop_core::supervisor::{AppState, Supervisor};
use drover_tests::runner_core::client::{RunnerListing, Scope};
use drover_tests::runner_core::wire::{JobState, Runner, SubmitJob};
use drover_tests::*;
use support::{SecretService, runtime, supervisor};

async fn paired(sup: &Supervisor, member: &Member) -> AppState {
    let code = member.client.pairing_code().await.unwrap();
    sup.open_link(&code.link).await.unwrap();
    sup.confirm_link().await.unwrap()
}

/// A workspace pool of `admin`'s and its join link.
async fn workspace_pool(admin: &Member) -> (String, String) {
    let pool = admin
        .client
        .create_runtime(Scope::Workspace, "build")
        .await
        .unwrap();
    let join = admin
        .client
        .join_token(Scope::Workspace, &pool.id)
        .await
        .unwrap();
    (pool.reference, join.link.expect("a join link"))
}

/// Runs `script` on `pool` to its end; its state and log.
async fn run(member: &Member, pool: &str, script: &str) -> (JobState, String) {
    let job = member
        .client
        .submit(&SubmitJob {
            runtime: pool.into(),
            script: Some(script.into()),
            ..SubmitJob::default()
        })
        .await
        .unwrap()
        .id;
    let state = eventually(&format!("{job} to end"), DEADLINE, || async {
        let state = member.client.job(&job).await.ok()?.state;
        state.is_terminal().then_some(state)
    })
    .await;
    (state, member.client.logs(&job).await.unwrap())
}

/// The roster's runner online in `pool` once it has announced its sandbox.
async fn announced(member: &Member, pool: &str) -> Runner {
    eventually(&format!("a runner of {pool} online"), DEADLINE, || async {
        let roster = member
            .client
            .runners(RunnerListing::Roster)
            .await
            .ok()?
            .runners;
        roster.into_iter().find(|r| {
            r.online
                && pool.ends_with(&format!(":{}", r.runtime_name))
                && r.capabilities.iter().any(|c| c.starts_with("sandbox="))
        })
    })
    .await
}

/// A job that tries what a job of someone else's must not: each success
/// prints `LEAK <what>`; then an ordinary build in its own directory.
fn probes(home_file: &Path, config: &Path, runtime_dir: &Path) -> String {
    format!(
        "cat {home} && echo LEAK home\n\
         cat {config} && echo LEAK settings\n\
         ls -A {runtime} | grep -q . && echo LEAK runtime-dir\n\
         test -e /proc/{pid} && echo LEAK app-process\n\
         printf 'int main(void) {{ return 0; }}\\n' > m.c && cc -o m m.c && ./m && echo built\n",
        home = home_file.display(),
        config = config.display(),
        runtime = runtime_dir.display(),
        pid = std::process::id(),
    )
}

#[test]
fn a_workspace_pools_jobs_run_sandboxed_and_a_personal_pools_as_the_member() {
    // Everything of this test (the app's settings, the keyring's files,
    // XDG_RUNTIME_DIR, the "home") outside /tmp, so only the sandbox's
    // hidden paths, not its private /tmp, keep them from the job.
    let base = std::path::PathBuf::from("/var/tmp");
    // SAFETY: no thread has started yet.
    unsafe { std::env::set_var("TMPDIR", &base) };
    let service = SecretService::start();
    let home = TempDir::new("home");
    let home_file = home.path().join("diary.txt");
    std::fs::write(&home_file, "dear diary").unwrap();
    // SAFETY: SecretService::start starts processes, not threads.
    unsafe { std::env::set_var("HOME", home.path()) };
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;
        assert!(dir.path().starts_with(&base));
        let config = support::config_path(&dir);
        let script = probes(&home_file, &config, &service.dir.path().join("run"));

        // Personal: the member's own jobs, as the member (every probe works).
        let personal = paired(&sup, &ann).await.pools[0].reference.clone();
        let (state, log) = run(&ann, &personal, &script).await;
        assert_eq!(state, JobState::Succeeded, "{log}");
        for leak in ["home", "settings", "runtime-dir", "app-process"] {
            assert!(log.contains(&format!("LEAK {leak}")), "{leak}: {log}");
        }
        assert!(
            announced(&ann, &personal)
                .await
                .capabilities
                .contains(&"sandbox=none".to_owned())
        );

        // Workspace: other people's jobs, sandboxed.
        let (pool, link) = workspace_pool(&ann).await;
        sup.open_link(&link).await.unwrap();
        let state = sup.confirm_link().await.unwrap();
        let lent = state.pools.iter().find(|p| p.reference == pool).unwrap();
        assert_eq!(
            (lent.sandboxed, lent.refused.as_deref()),
            (Some(true), None)
        );
        let runner = announced(&ann, &pool).await;
        assert!(
            runner.capabilities.contains(&"sandbox=bwrap".to_owned())
                && !runner.capabilities.contains(&"sandbox=none".to_owned()),
            "{runner:?}"
        );
        // It serves GitHub Actions on demand where a release is pinned
        // (linux-x64); a personal pool's runner does not.
        assert_eq!(
            runner.capabilities.contains(&"github-actions".to_owned()),
            cfg!(target_arch = "x86_64"),
            "{runner:?}"
        );
        assert!(
            !announced(&ann, &personal)
                .await
                .capabilities
                .contains(&"github-actions".to_owned())
        );
        let (state, log) = run(&ann, &pool, &script).await;
        assert_eq!(state, JobState::Succeeded, "{log}");
        assert!(!log.contains("LEAK"), "{log}");
        assert!(log.contains("built"), "{log}");
        assert!(!log.contains("dear diary"), "{log}");
    });
}

#[test]
fn without_a_sandbox_lending_to_a_workspace_pool_is_refused_unless_the_member_opts_out() {
    let _service = SecretService::start();
    // A bwrap that cannot make its namespaces, found first on PATH.
    let bin = TempDir::new("bin");
    let fake = bin.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_owned())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    // SAFETY: SecretService::start starts processes, not threads.
    unsafe { std::env::set_var("PATH", path) };
    runtime().block_on(async {
        let c = Coordinator::start().await;
        let ann = c.bootstrap("acme", "ann@acme.test");
        let dir = TempDir::new("desktop");
        let (sup, _) = supervisor(&dir).await;

        // Personal pools need no sandbox.
        let personal = paired(&sup, &ann).await.pools[0].reference.clone();
        let (state, log) = run(&ann, &personal, "echo mine").await;
        assert_eq!((state, log.as_str()), (JobState::Succeeded, "mine\n"));
        let e = sup
            .set_allow_unsandboxed(&personal, true)
            .await
            .unwrap_err();
        assert_eq!(e.code, "INVALID_INPUT", "{e:?}");

        // A workspace pool: refused, and told why.
        let (pool, link) = workspace_pool(&ann).await;
        sup.open_link(&link).await.unwrap();
        let e = sup.confirm_link().await.unwrap_err();
        assert_eq!(e.code, "NO_SANDBOX", "{e:?}");
        for said in [
            "unsandboxed",
            "No permissions to create new namespace",
            "apt-get install bubblewrap",
            "allow unsandboxed jobs in the pool's settings",
        ] {
            assert!(e.message.contains(said), "{said:?} in {}", e.message);
        }
        let state = sup.state().await;
        let refused = state.pools.iter().find(|p| p.reference == pool).unwrap();
        assert_eq!(refused.refused.as_deref(), Some(e.message.as_str()));
        assert!(refused.sandboxed.is_none() && refused.live.is_empty());
        let roster = ann.client.runners(RunnerListing::Roster).await.unwrap();
        assert!(
            roster.runners.iter().all(|r| r.runtime_name != "build"),
            "no runner joined: {roster:?}"
        );

        // The member opts out for this pool: it is lent, announced unsandboxed.
        let state = sup.set_allow_unsandboxed(&pool, true).await.unwrap();
        let lent = state.pools.iter().find(|p| p.reference == pool).unwrap();
        assert_eq!(
            (
                lent.allow_unsandboxed,
                lent.sandboxed,
                lent.refused.as_deref()
            ),
            (true, Some(false), None)
        );
        let runner = announced(&ann, &pool).await;
        assert!(
            runner.capabilities.contains(&"sandbox=none".to_owned()),
            "{runner:?}"
        );
        let (state, log) = run(&ann, &pool, "echo theirs").await;
        assert_eq!((state, log.as_str()), (JobState::Succeeded, "theirs\n"));
        assert!(
            std::fs::read_to_string(support::config_path(&dir))
                .unwrap()
                .contains("\"allowUnsandboxed\": true")
        );

        // Taking the opt-out back stops lending.
        let state = sup.set_allow_unsandboxed(&pool, false).await.unwrap();
        let back = state.pools.iter().find(|p| p.reference == pool).unwrap();
        assert!(back.refused.is_some() && back.sandboxed.is_none());
        eventually("the unsandboxed runner stopped", DEADLINE, || async {
            let state = sup.state().await;
            let p = state.pools.iter().find(|p| p.reference == pool)?;
            p.live.is_empty().then_some(())
        })
        .await;
    });
}
