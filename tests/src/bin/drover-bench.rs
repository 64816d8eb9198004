//! `drover-bench`: dispatch latency, drain throughput, lease cost against
//! a big history, and idle footprint, measured against real processes on
//! loopback, for SQLite and PostgreSQL in one run. Run it through
//! `bench/run.sh` (release build). Prints Markdown tables and one JSON line.
//!
//! Environment: `BENCH_BACKENDS` (default `sqlite-full,sqlite-normal,pg-1,pg-3`),
//! `BENCH_ITERATIONS`, `BENCH_DRAIN_JOBS`, `BENCH_HISTORY`, `BENCH_IDLE_SECONDS`;
//! PostgreSQL comes from `DROVER_TEST_PG_URL` (an admin URL; see tests/run.sh).

use std::time::{Duration, Instant};

use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{Complete, Outcome, SubmitJob};
use drover_tests::*;
use serde_json::{Value, json};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy)]
struct Stats {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let at = |p: f64| {
            samples[((samples.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
        };
        Self {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }

    fn json(self) -> Value {
        json!({"p50": self.p50, "p99": self.p99, "max": self.max})
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.p50, self.p99, self.max
        )
    }
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

/// A protocol-level runner pinned target: jobs for it, and a client speaking as it.
async fn manual_runner(admin: &Member, via: &Coordinator, name: &str) -> (Client, SubmitJob) {
    let paired = pair(admin, Scope::Workspace, None, name, &[]).await;
    let runner = via.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    let job = SubmitJob {
        command: vec!["true".into()],
        ..SubmitJob {
            runtime: format!("self:ws:{}", paired.runner.id),
            ..SubmitJob::default()
        }
    };
    (runner, job)
}

/// Enqueue → lease while the runner waits (long-polling `poll_via`; the job
/// is submitted to `submit_via`). Dispatch alone: no process is started.
async fn enqueue_to_lease(
    admin: &Member,
    submit_via: &Coordinator,
    poll_via: &Coordinator,
    n: usize,
) -> Stats {
    let (runner, job) = manual_runner(admin, poll_via, "latency").await;
    let submitter = submit_via.client(&admin.token);
    let done = Complete {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        error: None,
    };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let r = runner.clone();
        let poll = tokio::spawn(async move {
            let lease = r
                .lease(Duration::from_secs(30))
                .await
                .unwrap()
                .expect("lease");
            (Instant::now(), lease)
        });
        poll_via.wait_for_waiting(1).await;
        let t0 = Instant::now();
        submitter.submit(&job).await.unwrap();
        let (t1, lease) = poll.await.unwrap();
        samples.push(t1 - t0);
        runner.complete(&lease.lease_id, &done).await.unwrap();
    }
    Stats::of(samples)
}

/// A lease call while a job is already queued: the cost of the lease itself.
async fn lease_cost(admin: &Member, c: &Coordinator, n: usize) -> Stats {
    let (runner, job) = manual_runner(admin, c, &format!("cost{}", n)).await;
    let done = Complete {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        error: None,
    };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        admin.client.submit(&job).await.unwrap();
        let t0 = Instant::now();
        let lease = runner
            .lease(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a queued job");
        samples.push(t0.elapsed());
        runner.complete(&lease.lease_id, &done).await.unwrap();
    }
    Stats::of(samples)
}

/// Adds `count` finished jobs to the database directly.
async fn add_history(c: &Coordinator, count: u64) {
    let insert = "INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority, requires, spec,
                                    attempt, max_attempts, created_at, finished_at)
                  SELECT 'job_h' || CAST(x AS TEXT), (SELECT id FROM workspaces LIMIT 1), (SELECT id FROM members LIMIT 1),
                         'self:ws', (SELECT id FROM runtimes WHERE owner_member_id IS NULL LIMIT 1), 'succeeded', 0, '[]',
                         '{\"command\":[\"true\"]}', 1, 3, 0, 0";
    match c.options.backend {
        Backend::Postgres => {
            use sqlx::Connection as _;
            let mut conn = sqlx::PgConnection::connect(&c.database).await.unwrap();
            sqlx::query(&format!("{insert} FROM generate_series(1, $1) AS x"))
                .bind(count as i64)
                .execute(&mut conn)
                .await
                .unwrap();
            sqlx::query("ANALYZE jobs")
                .execute(&mut conn)
                .await
                .unwrap();
        }
        Backend::Sqlite => {
            use sqlx::Connection as _;
            let mut conn = sqlx::SqliteConnection::connect(&c.database).await.unwrap();
            sqlx::query(&format!(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < $1) {insert} FROM n"
            ))
            .bind(count as i64)
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
        }
    }
}

/// Pre-queued no-op jobs drained by `runners` runner processes spread over
/// `coords`: jobs/s from the first runner start to the last completion.
async fn drain(admin: &Member, coords: &[&Coordinator], jobs: usize, runners: usize) -> f64 {
    let join = admin
        .client
        .join_token(Scope::Workspace, "default")
        .await
        .unwrap();
    let noop = script_job("self:ws", "true");
    let before = admin.client.usage().await.unwrap().jobs_charged as usize;
    let submits: Vec<_> = (0..8)
        .map(|s| {
            let client = admin.client.clone();
            let noop = noop.clone();
            tokio::spawn(async move {
                for _ in (s..jobs).step_by(8) {
                    client.submit(&noop).await.unwrap();
                }
            })
        })
        .collect();
    for s in submits {
        s.await.unwrap();
    }
    let state = TempDir::new("bench-drain");
    let t0 = Instant::now();
    let procs: Vec<RunnerProcess> = (0..runners)
        .map(|i| {
            RunnerProcess::join(
                &coords[i % coords.len()].url,
                "self:ws",
                &join.token,
                1,
                &state.path().join(i.to_string()),
                &[],
            )
        })
        .collect();
    eventually("the drain", Duration::from_secs(3600), || {
        let client = admin.client.clone();
        async move { (client.usage().await.ok()?.jobs_charged as usize >= before + jobs).then_some(()) }
    })
    .await;
    let secs = t0.elapsed().as_secs_f64();
    drop(procs);
    jobs as f64 / secs
}

struct Row {
    name: &'static str,
    latency: Stats,
    jobs_per_s: f64,
    lease_empty: Option<Stats>,
    lease_history: Option<Stats>,
}

async fn bench_backend(
    name: &'static str,
    backend: Backend,
    sqlite_sync: &'static str,
    replicas: usize,
) -> Row {
    let iterations = env_or("BENCH_ITERATIONS", 1000usize);
    let drain_jobs = env_or("BENCH_DRAIN_JOBS", 2000usize);
    let history = env_or("BENCH_HISTORY", 1_000_000u64);
    let primary = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        backend,
        sqlite_sync,
    })
    .await;
    let mut others = Vec::new();
    for _ in 1..replicas {
        others.push(primary.replica().await);
    }
    let admin = primary.bootstrap("bench", "bench@bench.test");
    let poll_via = others.first().unwrap_or(&primary);
    let latency = enqueue_to_lease(&admin, &primary, poll_via, iterations).await;
    let coords: Vec<&Coordinator> = std::iter::once(&primary).chain(others.iter()).collect();
    let jobs_per_s = drain(&admin, &coords, drain_jobs, 8).await;
    let (lease_empty, lease_history) = if replicas == 1 && sqlite_sync == "full" && history > 0 {
        let fresh = Coordinator::start_with(CoordinatorOptions {
            lease_ttl_ms: 20_000,
            backend,
            sqlite_sync,
        })
        .await;
        let admin = fresh.bootstrap("history", "bench@bench.test");
        let empty = lease_cost(&admin, &fresh, iterations / 2).await;
        add_history(&fresh, history).await;
        let full = lease_cost(&admin, &fresh, iterations / 2).await;
        (Some(empty), Some(full))
    } else {
        (None, None)
    };
    Row {
        name,
        latency,
        jobs_per_s,
        lease_empty,
        lease_history,
    }
}

#[tokio::main]
async fn main() {
    let backends = std::env::var("BENCH_BACKENDS")
        .unwrap_or_else(|_| "sqlite-full,sqlite-normal,pg-1,pg-3".into());
    let mut rows = Vec::new();
    for b in backends.split(',') {
        let row = match b {
            "sqlite-full" => {
                bench_backend("SQLite, synchronous=FULL", Backend::Sqlite, "full", 1).await
            }
            "sqlite-normal" => {
                bench_backend("SQLite, synchronous=NORMAL", Backend::Sqlite, "normal", 1).await
            }
            "pg-1" => bench_backend("PostgreSQL, 1 replica", Backend::Postgres, "full", 1).await,
            "pg-3" => {
                bench_backend(
                    "PostgreSQL, 3 replicas (submit on A, runner on B)",
                    Backend::Postgres,
                    "full",
                    3,
                )
                .await
            }
            other => panic!("unknown backend {other:?}"),
        };
        eprintln!("{}: done", row.name);
        rows.push(row);
    }

    // Idle footprint: one headless runner process long-polling a coordinator.
    let idle_secs = env_or("BENCH_IDLE_SECONDS", 10u64);
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        backend: Backend::Sqlite,
        sqlite_sync: "full",
    })
    .await;
    let admin = c.bootstrap("idle", "bench@bench.test");
    let idle = pair(&admin, Scope::Workspace, None, "idle", &[]).await;
    let idle_proc = RunnerProcess::paired(&c.url, &idle.token, &[]);
    c.wait_for_waiting(1).await;
    let (r0, _) = usage_of(idle_proc.pid());
    let (c0, _) = usage_of(c.pid());
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let (r1, runner_rss) = usage_of(idle_proc.pid());
    let (c1, coord_rss) = usage_of(c.pid());
    let runner_pct = (r1 - r0) / idle_secs as f64 * 100.0;
    let coord_pct = (c1 - c0) / idle_secs as f64 * 100.0;

    let drain_jobs = env_or("BENCH_DRAIN_JOBS", 2000usize);
    println!(
        "| backend | enqueue→lease, runner waiting | drain {drain_jobs} no-op jobs, 8 runner processes |"
    );
    println!("|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} jobs/s |",
            r.name, r.latency, r.jobs_per_s
        );
    }
    let history = env_or("BENCH_HISTORY", 1_000_000u64);
    println!(
        "\n| backend | lease call, job queued, empty history | same with {history} finished jobs |"
    );
    println!("|---|---|---|");
    for r in rows.iter().filter(|r| r.lease_empty.is_some()) {
        println!(
            "| {} | {} | {} |",
            r.name,
            r.lease_empty.unwrap(),
            r.lease_history.unwrap()
        );
    }
    println!("\n| idle ({idle_secs} s) | CPU | RSS |");
    println!("|---|---|---|");
    println!(
        "| headless runner process | {runner_pct:.2} % of a core | {:.1} MiB |",
        runner_rss as f64 / 1024.0
    );
    println!(
        "| coordinator, one runner long-polling | {coord_pct:.2} % of a core | {:.1} MiB |",
        coord_rss as f64 / 1024.0
    );
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "backend": r.name,
                "enqueueToLeaseMs": r.latency.json(),
                "drainJobsPerSecond": r.jobs_per_s,
                "leaseEmptyHistoryMs": r.lease_empty.map(Stats::json),
                "leaseWithHistoryMs": r.lease_history.map(Stats::json),
            })
        })
        .collect();
    println!(
        "\n{}",
        json!({
            "backends": json_rows,
            "history": history,
            "idleRunner": {"cpuPercent": runner_pct, "rssKiB": runner_rss},
            "idleCoordinator": {"cpuPercent": coord_pct, "rssKiB": coord_rss},
        })
    );
}
