//! `drover-bench`: dispatch latency, drain throughput and idle footprint,
//! measured against real processes on loopback. Run through `bench/run.sh`
//! (release build). Prints a Markdown table and a JSON line.

use std::time::{Duration, Instant};

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{Complete, Outcome, SubmitJob};
use drover_tests::*;
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// (CPU seconds used so far, RSS in KiB) of a process.
fn usage_of(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat format")
        .1
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (ticks as f64 / hz, rss)
}

fn coordinator_pid(c: &Coordinator) -> u32 {
    let port = c.url.rsplit(':').next().unwrap().to_owned();
    // Find the coordinator serving this port among our children.
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')').and_then(|(_, r)| {
                    r.split_whitespace()
                        .nth(1)
                        .and_then(|p| p.parse::<u32>().ok())
                })
            });
        if parent == Some(me) && cmd.contains("drover-coordinator") && cmd.contains("serve") {
            let _ = &port;
            return pid;
        }
    }
    panic!("coordinator process not found")
}

#[tokio::main]
async fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let drain_jobs: usize = std::env::var("BENCH_DRAIN_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("bench", "bench@bench.test");

    // 1. Enqueue → lease while a runner waits (protocol-level runner, so the
    //    figure is dispatch alone, not process spawning).
    let paired = pair(&admin, Scope::Workspace, None, "latency", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    let job = SubmitJob {
        command: vec!["true".into()],
        ..SubmitJob {
            runtime: format!("self:ws:{}", paired.runner.id),
            ..SubmitJob::default()
        }
    };
    let done = Complete {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        error: None,
    };
    let mut latencies = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let r = runner.clone();
        let poll = tokio::spawn(async move {
            let lease = r
                .lease(Duration::from_secs(30))
                .await
                .unwrap()
                .expect("lease");
            (Instant::now(), lease)
        });
        c.wait_for_waiting(1).await;
        let t0 = Instant::now();
        admin.client.submit(&job).await.unwrap();
        let (t1, lease) = poll.await.unwrap();
        latencies.push(t1 - t0);
        runner.complete(&lease.lease_id, &done).await.unwrap();
    }
    latencies.sort();
    let (p50, p99, max) = (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
    );

    // 2. Drain: jobs queued first, then 8 runner processes (1 slot each) run them all.
    let join = admin
        .client
        .join_token(Scope::Workspace, "default")
        .await
        .unwrap();
    let state = TempDir::new("bench-state");
    let noop = script_job("self:ws", "true");
    for _ in 0..drain_jobs {
        admin.client.submit(&noop).await.unwrap();
    }
    let before = admin.client.usage().await.unwrap().jobs_charged as usize;
    let t0 = Instant::now();
    let runners = RunnerProcess::join(&c.url, "self:ws", &join.token, 8, state.path(), &[]);
    eventually("the drain", Duration::from_secs(3600), || {
        let client = admin.client.clone();
        async move {
            (client.usage().await.unwrap().jobs_charged as usize >= before + drain_jobs)
                .then_some(())
        }
    })
    .await;
    let drain_secs = t0.elapsed().as_secs_f64();
    let jobs_per_s = drain_jobs as f64 / drain_secs;
    drop(runners);

    // 3. Idle footprint: one headless runner process long-polling, and the coordinator.
    let idle = pair(&admin, Scope::Workspace, Some("default"), "idle", &[]).await;
    let idle_proc = RunnerProcess::paired(&c.url, &idle.token, &[]);
    c.wait_for_waiting(1).await;
    let coord = coordinator_pid(&c);
    let (runner_cpu0, _) = usage_of(idle_proc.pid());
    let (coord_cpu0, _) = usage_of(coord);
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let (runner_cpu1, runner_rss) = usage_of(idle_proc.pid());
    let (coord_cpu1, coord_rss) = usage_of(coord);
    let runner_pct = (runner_cpu1 - runner_cpu0) / idle_secs as f64 * 100.0;
    let coord_pct = (coord_cpu1 - coord_cpu0) / idle_secs as f64 * 100.0;

    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| enqueue→lease, runner waiting (n={iterations}) | p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms |"
    );
    println!(
        "| drain {drain_jobs} no-op jobs, 8 runner processes | {jobs_per_s:.0} jobs/s ({drain_secs:.2} s) |"
    );
    println!(
        "| idle runner process ({idle_secs} s) | {runner_pct:.2} % of a core, RSS {:.1} MiB |",
        runner_rss as f64 / 1024.0
    );
    println!(
        "| idle coordinator ({idle_secs} s) | {coord_pct:.2} % of a core, RSS {:.1} MiB |",
        coord_rss as f64 / 1024.0
    );
    println!(
        "{}",
        json!({
            "enqueueToLeaseMs": {"p50": p50, "p99": p99, "max": max, "n": iterations},
            "drain": {"jobs": drain_jobs, "runners": 8, "jobsPerSecond": jobs_per_s},
            "idleRunner": {"cpuPercent": runner_pct, "rssKiB": runner_rss},
            "idleCoordinator": {"cpuPercent": coord_pct, "rssKiB": coord_rss},
        })
    );
}
