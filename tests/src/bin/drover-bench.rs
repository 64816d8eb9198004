//! `drover-bench`: dispatch latency, drain throughput, lease cost against
//! a big history, and idle footprint, measured against real processes on
//! loopback, for SQLite and PostgreSQL in one run. Run it through
//! `bench/run.sh` (release build). Prints Markdown tables and one JSON line.
//!
//! Environment: `BENCH_BACKENDS` (default `sqlite-full,sqlite-normal,pg-1,pg-3`),
//! `BENCH_ITERATIONS`, `BENCH_DRAIN_JOBS`, `BENCH_HISTORY`, `BENCH_IDLE_SECONDS`;
//! PostgreSQL comes from `DROVER_TEST_PG_URL` (an admin URL; see tests/run.sh).
//! `BENCH_SECTION=fleet`: drains (`BENCH_DRAIN_RUNNERS`), open loops
//! (`BENCH_OPEN_RATES`), idle fleets (`BENCH_FLEETS`) and reconnect storms
//! (`BENCH_RECONNECT`, `BENCH_OUTAGE_SECONDS`); an empty list skips a row.
//! `BENCH_DUMP_METRICS=1` prints the coordinator's batch and call totals
//! (`/metrics`) after each open loop, on stderr: where its time went.
//!
//! (Over 500 lines: one binary for every figure of the README's table, sharing its process setup and report.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::SubmitJob;
use drover_tests::*;
use serde_json::{Value, json};

/// A comma-separated list from the environment (empty: none).
fn list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    env_or(name, default.to_string())
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect()
}

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

/// A fresh coordinator for a measurement (20 s lease TTL).
async fn coordinator(backend: Backend, sqlite_sync: &'static str) -> Coordinator {
    Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        backend,
        sqlite_sync,
        ..Default::default()
    })
    .await
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

/// CPU seconds the whole machine has spent (all cores, not idle), from /proc/stat.
fn machine_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let busy: u64 = stat
        .lines()
        .next()
        .expect("cpu line")
        .split_whitespace()
        .skip(1)
        .enumerate()
        // user nice system idle iowait irq softirq steal: all but idle and iowait.
        .filter(|(i, _)| ![3, 4].contains(i) && *i < 8)
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf has no preconditions.
    busy as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The whole machine's ticks from /proc/stat: (steal, all). Steal is time
/// the hypervisor gave to other guests; a run with much of it is slower for
/// reasons of its own, and "whole machine" CPU counts it (as the peers' do).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let v: Vec<u64> = stat
        .lines()
        .next()
        .expect("cpu line")
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    (v.get(7).copied().unwrap_or(0), v.iter().sum())
}

/// The share of all CPU time that was steal between two `cpu_ticks`.
fn steal_share(before: (u64, u64), after: (u64, u64)) -> f64 {
    (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64
}

/// What a drain cost, per 1,000 jobs and at its end.
#[derive(Clone, Copy, Default)]
struct Footprint {
    coordinator_cpu_per_1000: f64,
    coordinator_rss_mib: f64,
    runner_cpu_per_1000: f64,
    runner_rss_mib: f64,
    machine_cpu_per_1000: f64,
}

impl Footprint {
    fn json(self) -> Value {
        json!({
            "coordinatorCpuSecondsPer1000": self.coordinator_cpu_per_1000,
            "coordinatorRssMiB": self.coordinator_rss_mib,
            "runnerCpuSecondsPer1000": self.runner_cpu_per_1000,
            "runnerRssMiB": self.runner_rss_mib,
            "machineCpuSecondsPer1000": self.machine_cpu_per_1000,
        })
    }
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
    let done = succeeded();
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
    let done = succeeded();
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
/// `coords`: jobs/s from the first runner start to the last completion, and
/// what it cost the first coordinator, the runners and the machine.
async fn drain(
    admin: &Member,
    coords: &[&Coordinator],
    jobs: usize,
    runners: usize,
) -> (f64, Footprint) {
    let join = admin
        .client
        .join_token(Scope::Workspace, "default")
        .await
        .unwrap();
    let before = admin.client.usage().await.unwrap().jobs_charged as usize;
    prequeue(admin, jobs).await;
    let state = TempDir::new("bench-drain");
    let (coordinator_cpu0, _) = usage_of(coords[0].pid());
    let machine0 = machine_cpu();
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
    let per_1000 = |cpu: f64| cpu / jobs as f64 * 1000.0;
    let (coordinator_cpu1, coordinator_rss) = usage_of(coords[0].pid());
    let mut footprint = Footprint {
        coordinator_cpu_per_1000: per_1000(coordinator_cpu1 - coordinator_cpu0),
        coordinator_rss_mib: coordinator_rss as f64 / 1024.0,
        machine_cpu_per_1000: per_1000(machine_cpu() - machine0),
        ..Footprint::default()
    };
    let mut runner_cpu = 0.0;
    for p in &procs {
        let (cpu, rss) = usage_of(p.pid());
        runner_cpu += cpu;
        footprint.runner_rss_mib = footprint.runner_rss_mib.max(rss as f64 / 1024.0);
    }
    // All runners together per 1,000 jobs: what one runner costs per 1,000 it runs.
    footprint.runner_cpu_per_1000 = per_1000(runner_cpu);
    drop(procs);
    (jobs as f64 / secs, footprint)
}

/// Queues `jobs` no-op jobs on the workspace pool, from 8 submitters.
async fn prequeue(admin: &Member, jobs: usize) {
    let noop = script_job("self:ws", "true");
    let submits: Vec<_> = (0..8)
        .map(|s| {
            let (client, noop) = (admin.client.clone(), noop.clone());
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
}

/// A successful result that also asks for the next queued job (no wait).
fn and_next() -> drover_tests::runner_core::wire::Complete {
    drover_tests::runner_core::wire::Complete {
        next: Some(drover_tests::runner_core::wire::LeaseRequest {
            wait_ms: 0,
            held: None,
        }),
        ..succeeded()
    }
}

/// `n` workspace runners spoken for at the protocol level (no process).
async fn protocol_runners(c: &Coordinator, admin: &Member, prefix: &str, n: usize) -> Vec<Client> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let paired = pair(admin, Scope::Workspace, None, &format!("{prefix}-{i}"), &[]).await;
        let client = c.client(&paired.token);
        client.hello(&[]).await.unwrap();
        clients.push(client);
    }
    clients
}

/// What PostgreSQL executed for a measurement, from `pg_stat_statements`
/// (bench/run.sh loads it, `track = all`): top-level statements' calls
/// and execution time, and the statements that took most, nested ones too.
struct Statements {
    calls: u64,
    exec_ms: f64,
    /// (calls, mean ms, the statement's first words), most total time first.
    top: Vec<(u64, f64, String)>,
}

/// A connection to the server's `postgres` database, where
/// `pg_stat_statements` is (tests/postgres.sh), and the name of this
/// coordinator's database, whose statements it reads there.
async fn pg_conn(c: &Coordinator) -> Option<(sqlx::PgConnection, String)> {
    use sqlx::Connection as _;
    if c.options.backend != Backend::Postgres {
        return None;
    }
    let name = c.database.rsplit_once('/')?.1.to_owned();
    let admin = std::env::var("DROVER_TEST_PG_URL").ok()?;
    Some((sqlx::PgConnection::connect(&admin).await.ok()?, name))
}

/// Empties this database's `pg_stat_statements`; false where it is not loaded.
async fn pg_statements_reset(c: &Coordinator) -> bool {
    let Some((mut conn, name)) = pg_conn(c).await else {
        return false;
    };
    sqlx::query(
        "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = $1), 0)",
    )
    .bind(name)
    .execute(&mut conn)
    .await
    .is_ok()
}

async fn pg_statements(c: &Coordinator) -> Option<Statements> {
    let (mut conn, name) = pg_conn(c).await?;
    let rows: Vec<(bool, i64, f64, String)> = sqlx::query_as(
        "SELECT toplevel, calls, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g')
         FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
           AND query NOT LIKE '%pg_stat_statements%'
         ORDER BY total_exec_time DESC",
    )
    .bind(name)
    .fetch_all(&mut conn)
    .await
    .ok()?;
    let top_level = rows.iter().filter(|r| r.0);
    Some(Statements {
        calls: top_level.clone().map(|r| r.1 as u64).sum(),
        exec_ms: top_level.map(|r| r.2).sum(),
        top: rows
            .iter()
            .take(8)
            .map(|(top, calls, total, text)| {
                let words: String = text.chars().take(90).collect();
                let nested = if *top { "" } else { "(nested) " };
                (
                    *calls as u64,
                    total / (*calls).max(1) as f64,
                    format!("{nested}{words}"),
                )
            })
            .collect(),
    })
}

/// Updates and HOT updates of the hot tables over the coordinator's life,
/// read once it has stopped (its backends' counters flushed as they exit).
/// The coordinator is not started again.
async fn pg_hot(c: &mut Coordinator) -> Option<(String, Value)> {
    use sqlx::Connection as _;
    if c.options.backend != Backend::Postgres {
        return None;
    }
    c.stop().await;
    let mut conn = sqlx::PgConnection::connect(&c.database).await.ok()?;
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
         WHERE relname IN ('jobs', 'runners', 'workspace_spend') ORDER BY relname",
    )
    .fetch_all(&mut conn)
    .await
    .ok()?;
    let text = rows
        .iter()
        .map(|(t, u, h)| format!("{t}: {u} updates, {h} HOT"))
        .collect::<Vec<_>>()
        .join("; ");
    let json = rows
        .iter()
        .map(|(t, u, h)| (t.clone(), json!({"updates": u, "hot": h})))
        .collect::<serde_json::Map<_, _>>();
    Some((text, Value::Object(json)))
}

/// CPU seconds PostgreSQL's processes on this machine have spent: each
/// live one's, and the postmaster's exited children's (backends, autovacuum
/// workers). None when none runs here.
fn postgres_cpu() -> Option<f64> {
    let stat_of = |pid: &str| -> Option<(String, Vec<u64>)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (head, rest) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_owned();
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        // After the name: state ppid … utime(11) stime(12) cutime(13) cstime(14).
        Some((comm, f))
    };
    let mut ticks = 0u64;
    let mut any = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Some((comm, f)) = stat_of(pid).filter(|(comm, f)| comm == "postgres" && f.len() > 14)
        else {
            continue;
        };
        any = true;
        ticks += f[11] + f[12];
        let parent = stat_of(&f[1].to_string()).map(|p| p.0);
        if parent.as_deref() != Some(comm.as_str()) {
            ticks += f[13] + f[14];
        }
    }
    // SAFETY: sysconf has no preconditions.
    any.then(|| ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64)
}

/// What a drain measured.
struct Drain {
    jobs_per_second: f64,
    /// CPU-seconds per 1,000 jobs: the coordinator's, the whole machine's,
    /// and PostgreSQL's (its processes here, on PostgreSQL).
    coordinator_cpu: f64,
    machine_cpu: f64,
    postgres_cpu: Option<f64>,
    statements: Option<Statements>,
    steal: f64,
}

/// Pre-queues `jobs` no-op jobs, then `runners` protocol-level runners
/// (lease → complete, nothing executed) drain them.
async fn protocol_drain(c: &Coordinator, admin: &Member, jobs: usize, runners: usize) -> Drain {
    let clients = protocol_runners(c, admin, &format!("drain{runners}"), runners).await;
    prequeue(admin, jobs).await;
    let counted = pg_statements_reset(c).await;
    let left = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(jobs as i64));
    let (cpu0, _) = usage_of(c.pid());
    let machine0 = machine_cpu();
    let pg0 = postgres_cpu().filter(|_| c.options.backend == Backend::Postgres);
    let ticks0 = cpu_ticks();
    let t0 = Instant::now();
    // When the last job completed: the others' long-polls for more, which
    // end up to 200 ms later, are not part of the drain.
    let ended = Arc::new(std::sync::OnceLock::<Duration>::new());
    let workers: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let (left, ended) = (left.clone(), ended.clone());
            tokio::spawn(async move {
                // As `drover runner` does: each complete also asks for the next job.
                let mut pending = None;
                while left.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                    let lease = match pending.take() {
                        Some(lease) => lease,
                        None => match client.lease(Duration::from_millis(200)).await.unwrap() {
                            Some(lease) => lease,
                            None => continue,
                        },
                    };
                    let done = client.complete(&lease.lease_id, &and_next()).await.unwrap();
                    if left.fetch_sub(1, std::sync::atomic::Ordering::Relaxed) == 1 {
                        let _ = ended.set(t0.elapsed());
                    }
                    pending = done.next.and_then(|n| n.lease);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let secs = ended
        .get()
        .copied()
        .unwrap_or_else(|| t0.elapsed())
        .as_secs_f64();
    let (cpu1, _) = usage_of(c.pid());
    let machine = machine_cpu() - machine0;
    let pg = pg0.and_then(|pg0| Some(postgres_cpu()? - pg0));
    let steal = steal_share(ticks0, cpu_ticks());
    let statements = if counted {
        pg_statements(c).await
    } else {
        None
    };
    let per_1000 = |cpu: f64| cpu / jobs as f64 * 1000.0;
    Drain {
        jobs_per_second: jobs as f64 / secs,
        coordinator_cpu: per_1000(cpu1 - cpu0),
        machine_cpu: per_1000(machine),
        postgres_cpu: pg.map(per_1000),
        statements,
        steal,
    }
}

/// Open-loop arrivals at `rate` jobs/s for `secs` seconds, 8 protocol-level
/// runners: (enqueue→lease, enqueue→complete).
async fn open_loop(c: &Coordinator, admin: &Member, rate: u64, secs: u64) -> (Stats, Stats, Stats) {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    // Job → (when its submit was due, how long the submit call took). As
    // for the peers, latency counts from the schedule (or the send, if the
    // timer fired early), so a sender that falls behind shows in it.
    let submitted: Arc<Mutex<HashMap<String, (Instant, Duration)>>> = Arc::default();
    let leased: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
    let total = (rate * secs) as usize;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for client in protocol_runners(
        c,
        admin,
        &format!("open{rate}"),
        env_or("BENCH_OPEN_RUNNERS", 8),
    )
    .await
    {
        let (leased, stop) = (leased.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut pending = None;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (lease, at_lease) = match pending.take() {
                    Some(leased) => leased,
                    None => match client.lease(Duration::from_secs(2)).await.unwrap() {
                        Some(lease) => (lease, Instant::now()),
                        None => continue,
                    },
                };
                let done = client.complete(&lease.lease_id, &and_next()).await.unwrap();
                let at_done = Instant::now();
                leased
                    .lock()
                    .unwrap()
                    .push((lease.job.id, at_lease, at_done));
                pending = done.next.and_then(|n| n.lease).map(|l| (l, at_done));
            }
        }));
    }
    let noop = script_job("self:ws", "true");
    // The schedule is kept by a thread of its own: an OS sleep wakes within
    // tens of microseconds, tokio's timer only to the millisecond (which
    // would count up to 1 ms of the sender's lateness against every job).
    let (handle, client) = (tokio::runtime::Handle::current(), admin.client.clone());
    let record = submitted.clone();
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        let mut pending = Vec::with_capacity(total);
        for n in 0..total {
            let due = start + Duration::from_secs_f64(n as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let (client, noop, submitted) = (client.clone(), noop.clone(), record.clone());
            pending.push(handle.spawn(async move {
                let t = Instant::now();
                let id = client.submit(&noop).await.unwrap().id;
                submitted
                    .lock()
                    .unwrap()
                    .insert(id, (due.min(t), t.elapsed()));
            }));
        }
        pending
    });
    let pending = tokio::task::spawn_blocking(move || sender.join().expect("the sender"))
        .await
        .unwrap();
    for p in pending {
        p.await.unwrap();
    }
    eventually("the open-loop jobs", Duration::from_secs(600), || {
        let n = leased.lock().unwrap().len();
        async move { (n >= total).then_some(()) }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    if std::env::var_os("BENCH_DUMP_METRICS").is_some() {
        let m = reqwest::get(format!("{}/metrics", c.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for l in m
            .lines()
            .filter(|l| l.contains("_sum") || l.contains("_count"))
        {
            eprintln!("{l}");
        }
    }
    let submitted = submitted.lock().unwrap();
    let (mut to_lease, mut to_complete) = (Vec::new(), Vec::new());
    for (id, at_lease, at_done) in leased.lock().unwrap().iter() {
        let (t0, _) = submitted[id];
        to_lease.push(at_lease.saturating_duration_since(t0));
        to_complete.push(at_done.saturating_duration_since(t0));
    }
    let submits = submitted.values().map(|(_, d)| *d).collect();
    (
        Stats::of(submits),
        Stats::of(to_lease),
        Stats::of(to_complete),
    )
}

/// `k` runners long-polling one coordinator, idle: (coordinator RSS MiB,
/// coordinator % of a core over `secs`, first job's enqueue→lease).
async fn idle_fleet(c: &Coordinator, admin: &Member, k: usize, secs: u64) -> (f64, f64, Duration) {
    let mut clients = Vec::with_capacity(k);
    for chunk in (0..k).collect::<Vec<_>>().chunks(64) {
        let pairs: Vec<_> = chunk
            .iter()
            .map(|i| {
                let admin = admin.clone();
                let name = format!("idle{k}-{i}");
                tokio::spawn(async move { pair(&admin, Scope::Workspace, None, &name, &[]).await })
            })
            .collect();
        for p in pairs {
            // One HTTP client (and connection pool) per runner, as separate machines would have.
            clients.push(c.client(&p.await.unwrap().token));
        }
    }
    let first = Arc::new(tokio::sync::Mutex::new(None::<Instant>));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let (first, stop) = (first.clone(), stop.clone());
            tokio::spawn(async move {
                let done = succeeded();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match client.lease(Duration::from_secs(25)).await {
                        Ok(Some(lease)) => {
                            first.lock().await.get_or_insert(Instant::now());
                            let _ = client.complete(&lease.lease_id, &done).await;
                        }
                        Ok(None) => {}
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    c.wait_for_waiting(k as u64).await;
    let (cpu0, _) = usage_of(c.pid());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (cpu1, rss) = usage_of(c.pid());
    let t0 = Instant::now();
    admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let at = eventually("the first job after idling", DEADLINE, || {
        let first = first.clone();
        async move { *first.lock().await }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    (
        rss as f64 / 1024.0,
        (cpu1 - cpu0) / secs as f64 * 100.0,
        at - t0,
    )
}

/// What a reconnect storm measured.
struct Storm {
    /// Each runner's time from the coordinator answering `/readyz` again
    /// to its first call that succeeded.
    back: Stats,
    /// Coordinator CPU-seconds from its restart until every runner was back.
    cpu_s: f64,
    rss_mib: f64,
    /// Runners that stopped instead of retrying (must be 0).
    gave_up: usize,
}

/// `k` real runner-core runners (one Fleet, as `drover runner` and the
/// desktop app run them, with their default capped and jittered backoff)
/// long-polling a coordinator that is stopped for `outage`, then started
/// again on the same address: how long until each is back, and what the
/// storm of reconnects costs the coordinator.
async fn reconnect_storm(c: &mut Coordinator, admin: &Member, k: usize, outage: Duration) -> Storm {
    use drover_tests::runner_core::fleet::Fleet;
    use drover_tests::runner_core::runner::{Credential, EventKind, RunnerSettings};
    let work = TempDir::new("storm");
    let settings = RunnerSettings {
        work_root: work.path().to_owned(),
        ..RunnerSettings::default()
    };
    let (mut fleet, mut events) = Fleet::new(c.client(""), settings).expect("a fleet");
    for chunk in (0..k).collect::<Vec<_>>().chunks(64) {
        let pairs: Vec<_> = chunk
            .iter()
            .map(|i| {
                let admin = admin.clone();
                let name = format!("storm{k}-{i}");
                tokio::spawn(async move { pair(&admin, Scope::Workspace, None, &name, &[]).await })
            })
            .collect();
        for p in pairs {
            let paired = p.await.unwrap();
            fleet.add(Credential {
                runner_id: paired.runner.id.to_string(),
                token: drover_tests::runner_core::client::Token::new(paired.token),
            });
        }
    }
    c.wait_for_waiting(k as u64).await;
    c.stop().await;
    // Every runner finds out: its long-poll's connection closed.
    let mut down = std::collections::HashSet::new();
    let mut gave_up = 0;
    while down.len() < k {
        let event = tokio::time::timeout(DEADLINE, events.recv())
            .await
            .expect("every runner to see the coordinator gone")
            .expect("events");
        match event.kind {
            EventKind::Disconnected { .. } => {
                down.insert(event.runner);
            }
            EventKind::Stopped { .. } => gave_up += 1,
            _ => {}
        }
    }
    tokio::time::sleep(outage).await;
    c.restart().await;
    let ready = Instant::now();
    let (cpu0, _) = usage_of(c.pid());
    let mut back = Vec::with_capacity(k);
    while !down.is_empty() {
        let event = tokio::time::timeout(DEADLINE, events.recv())
            .await
            .expect("every runner back")
            .expect("events");
        match event.kind {
            EventKind::Reconnected if down.remove(&event.runner) => back.push(ready.elapsed()),
            EventKind::Stopped { .. } => {
                gave_up += 1;
                down.remove(&event.runner);
            }
            _ => {}
        }
    }
    let (cpu1, rss) = usage_of(c.pid());
    fleet.kill();
    Storm {
        back: Stats::of(back),
        cpu_s: cpu1 - cpu0,
        rss_mib: rss as f64 / 1024.0,
        gave_up,
    }
}

/// Raises the open-files limit to the hard limit (an idle fleet holds a
/// socket per runner on each side).
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// The fleet section: drain with 1, 8 and 64 runners, open-loop latency,
/// idle fleets and footprint, per backend.
async fn fleet_section(name: &str, backend: Backend, sqlite_sync: &'static str) -> Value {
    let drain_jobs = env_or("BENCH_DRAIN_JOBS", 5000usize);
    let mut out = json!({"backend": name});
    let mut lines = Vec::new();
    for runners in list("BENCH_DRAIN_RUNNERS", "1,8,64") {
        let mut c = coordinator(backend, sqlite_sync).await;
        let admin = c.bootstrap("drain", "bench@bench.test");
        let Drain {
            jobs_per_second: jps,
            coordinator_cpu: cpu_per_1000,
            machine_cpu: machine_per_1000,
            postgres_cpu,
            statements,
            steal,
        } = protocol_drain(&c, &admin, drain_jobs, runners).await;
        let per_job = statements.as_ref().map(|s| {
            (
                s.exec_ms / drain_jobs as f64,
                s.calls as f64 / drain_jobs as f64,
            )
        });
        let sql = match (per_job, postgres_cpu) {
            (Some((ms, calls)), Some(pg)) => format!(
                "; PostgreSQL {pg:.2} CPU-s per 1,000 jobs, of which {ms:.3} ms per job executing statements ({calls:.1} a job)"
            ),
            (Some((ms, calls)), None) => {
                format!("; PostgreSQL {ms:.3} ms of execution per job ({calls:.1} statements)")
            }
            (None, _) => String::new(),
        };
        lines.push(format!("| {name} | drain {drain_jobs} jobs, {runners} runners | {jps:.0} jobs/s; coordinator {cpu_per_1000:.2} CPU-s per 1,000 jobs, whole machine {machine_per_1000:.2} (steal {:.0} % of all CPU time){sql} |", steal * 100.0));
        if let Some(s) = &statements {
            for (calls, mean, text) in &s.top {
                lines.push(format!(
                    "| {name} | drain, {runners} runners: `{}` | {calls} calls, mean {mean:.3} ms |",
                    text.replace('|', "\\|")
                ));
            }
        }
        let hot = pg_hot(&mut c).await;
        if let Some((text, _)) = &hot {
            lines.push(format!(
                "| {name} | drain, {runners} runners: table updates (pg_stat_user_tables) | {text} |"
            ));
        }
        out[format!("drain{runners}")] = json!({
            "pgTableUpdates": hot.map(|h| h.1),
            "jobsPerSecond": jps,
            "coordinatorCpuSecondsPer1000": cpu_per_1000,
            "machineCpuSecondsPer1000": machine_per_1000,
            "stealShare": steal,
            "pgExecMsPerJob": per_job.map(|p| p.0),
            "pgCpuSecondsPer1000": postgres_cpu,
            "pgStatementsPerJob": per_job.map(|p| p.1),
        });
    }
    for rate in list("BENCH_OPEN_RATES", "200,1000") {
        let c = coordinator(backend, sqlite_sync).await;
        let admin = c.bootstrap("open", "bench@bench.test");
        let (submit, lease, complete) =
            open_loop(&c, &admin, rate, env_or("BENCH_OPEN_SECONDS", 10u64)).await;
        lines.push(format!(
            "| {name} | open loop {rate} jobs/s: submit call | {submit} |"
        ));
        lines.push(format!(
            "| {name} | open loop {rate} jobs/s: enqueue→lease | {lease} |"
        ));
        lines.push(format!(
            "| {name} | open loop {rate} jobs/s: enqueue→complete | {complete} |"
        ));
        out[format!("open{rate}")] = json!({"submitMs": submit.json(), "enqueueToLeaseMs": lease.json(), "enqueueToCompleteMs": complete.json()});
    }
    for k in list::<usize>("BENCH_FLEETS", "1000,10000") {
        // Room for every runner's long-poll and the bench's own calls
        // below the cap's last tenth (which serves runners only): at the
        // default cap (10,000) the bench's /healthz and submit were refused.
        // The coordinator lowers it to fit its open-files limit.
        let c = Coordinator::start_with(CoordinatorOptions {
            lease_ttl_ms: 20_000,
            backend,
            sqlite_sync,
            serve_args: vec!["--max-connections".into(), (2 * k + 1_000).to_string()],
            ..Default::default()
        })
        .await;
        let admin = c.bootstrap("fleet", "bench@bench.test");
        let (rss, cpu, first) =
            idle_fleet(&c, &admin, k, env_or("BENCH_IDLE_SECONDS", 10u64)).await;
        lines.push(format!(
            "| {name} | {k} idle runners long-polling | coordinator RSS {rss:.0} MiB, {cpu:.1} % of a core; first job leased {:.2} ms after submit |",
            first.as_secs_f64() * 1000.0
        ));
        out[format!("fleet{k}")] = json!({"coordinatorRssMiB": rss, "coordinatorCpuPercent": cpu, "firstJobMs": first.as_secs_f64() * 1000.0});
    }
    for k in list("BENCH_RECONNECT", "1000") {
        let mut c = coordinator(backend, sqlite_sync).await;
        let admin = c.bootstrap("storm", "bench@bench.test");
        let outage = Duration::from_secs(env_or("BENCH_OUTAGE_SECONDS", 10u64));
        let storm = reconnect_storm(&mut c, &admin, k, outage).await;
        lines.push(format!(
            "| {name} | {k} runners reconnecting after a {}-s outage | back after /readyz: {}; coordinator {:.2} CPU-s until all were back, RSS {:.0} MiB; {} gave up |",
            outage.as_secs(),
            storm.back,
            storm.cpu_s,
            storm.rss_mib,
            storm.gave_up,
        ));
        out[format!("reconnect{k}")] = json!({
            "backMs": storm.back.json(),
            "coordinatorCpuSeconds": storm.cpu_s,
            "coordinatorRssMiB": storm.rss_mib,
            "gaveUp": storm.gave_up,
        });
    }
    for l in lines {
        println!("{l}");
    }
    out
}

struct Row {
    name: &'static str,
    latency: Stats,
    jobs_per_s: f64,
    footprint: Footprint,
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
    let primary = coordinator(backend, sqlite_sync).await;
    let mut others = Vec::new();
    for _ in 1..replicas {
        others.push(primary.replica().await);
    }
    let admin = primary.bootstrap("bench", "bench@bench.test");
    let poll_via = others.first().unwrap_or(&primary);
    let latency = enqueue_to_lease(&admin, &primary, poll_via, iterations).await;
    let coords: Vec<&Coordinator> = std::iter::once(&primary).chain(others.iter()).collect();
    let (jobs_per_s, footprint) = drain(&admin, &coords, drain_jobs, 8).await;
    let (lease_empty, lease_history) = if replicas == 1 && sqlite_sync == "full" && history > 0 {
        let fresh = coordinator(backend, sqlite_sync).await;
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
        footprint,
        lease_empty,
        lease_history,
    }
}

#[tokio::main]
async fn main() {
    raise_fd_limit();
    if std::env::var("BENCH_SECTION").as_deref() == Ok("fleet") {
        let backends = std::env::var("BENCH_BACKENDS")
            .unwrap_or_else(|_| "sqlite-normal,sqlite-full,pg".into());
        println!("| backend | measure | value |");
        println!("|---|---|---|");
        let mut all = Vec::new();
        for b in backends.split(',') {
            all.push(match b {
                "sqlite-full" => fleet_section("SQLite FULL", Backend::Sqlite, "full").await,
                "sqlite-normal" => fleet_section("SQLite NORMAL", Backend::Sqlite, "normal").await,
                "pg" => fleet_section("PostgreSQL", Backend::Postgres, "full").await,
                other => panic!("unknown backend {other:?}"),
            });
        }
        println!("\n{}", json!({"fleet": all}));
        return;
    }
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
    let c = coordinator(Backend::Sqlite, "full").await;
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
        "| backend | enqueue→lease, runner waiting | drain {drain_jobs} no-op jobs, 8 runner processes | CPU-s per 1,000 jobs: coordinator / runners / machine | RSS at the end: coordinator / largest runner |"
    );
    println!("|---|---|---|---|---|");
    for r in &rows {
        let f = r.footprint;
        println!(
            "| {} | {} | {:.0} jobs/s | {:.2} / {:.2} / {:.2} | {:.1} / {:.1} MiB |",
            r.name,
            r.latency,
            r.jobs_per_s,
            f.coordinator_cpu_per_1000,
            f.runner_cpu_per_1000,
            f.machine_cpu_per_1000,
            f.coordinator_rss_mib,
            f.runner_rss_mib
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
                "drainFootprint": r.footprint.json(),
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
