//! `drover-retention-bench`: does a day's history at 200 jobs/s keep the
//! database bounded and the lease cost flat? For each scale (hours of
//! retention H), it seeds H·25/24 hours of finished jobs at the open-loop
//! rate (finish times spread evenly up to now, one log chunk each) straight
//! into a fresh database before the coordinator starts, then serves with
//! `--retain-finished Hh` while protocol-level runners take an open loop of
//! arrivals at that rate. The hour past H is the purge's backlog; after it,
//! each purge (every 60 s, the default) takes what aged past H meanwhile.
//! It reports the database's size before, after the backlog and at the end,
//! the backlog's purge rate, and enqueue→lease during the backlog's purge,
//! after it, and in the same open loop on an empty database.
//!
//! Environment: `BENCH_RETENTION_BACKENDS` (`sqlite`, `pg`; default `sqlite`),
//! `BENCH_RETAIN_HOURS` (default `1,6,24`), `BENCH_RETENTION_RATE` (200),
//! `BENCH_RETENTION_SECONDS` (180), `BENCH_OPEN_RUNNERS` (8), `BENCH_SQLITE_SYNC`
//! (`normal`). PostgreSQL comes from `DROVER_TEST_PG_URL` (an admin URL).
//! Run it through `bench/run.sh` (release build).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::*;
use serde_json::{Value, json};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn list(name: &str, default: &str) -> Vec<String> {
    env_or(name, default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// p50 and p99 in milliseconds (zeros when there are no samples).
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort();
    let at = |p: f64| {
        samples[((samples.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

fn unix_ms() -> i64 {
    (unix_ns() / 1_000_000) as i64
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Inserts `n` finished jobs (with a log chunk each) whose finish times
/// are spread evenly over the `span_ms` before `now`, a million at a time.
async fn seed_history(c: &Coordinator, n: u64, span_ms: i64, now: i64) {
    const CHUNK: u64 = 1_000_000;
    let sqlite = c.options.backend == Backend::Sqlite;
    if sqlite {
        // Bench setup, not the product: no journal while nothing else runs.
        c.execute_sql("PRAGMA journal_mode = DELETE").await;
    }
    let mut from = 1;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        let series = if sqlite {
            format!(
                "(WITH RECURSIVE s(x) AS (SELECT {from} UNION ALL SELECT x + 1 FROM s WHERE x < {to}) SELECT x FROM s)"
            )
        } else {
            format!("(SELECT x FROM generate_series({from}, {to}) AS x)")
        };
        let finished = format!("({now} - {span_ms} + CAST(h.x AS BIGINT) * {span_ms} / {n})");
        let pad = if sqlite {
            "printf('%012d', h.x)"
        } else {
            "lpad(CAST(h.x AS TEXT), 12, '0')"
        };
        let sql = format!(
            "BEGIN;
             INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority,
                               requires, spec, attempt, max_attempts, exit_code, ran_by, ran_by_owner,
                               created_at, started_at, finished_at)
             SELECT 'job_hist' || {pad}, w.id, m.id, 'self:ws', r.id, 'succeeded', 0,
                    '[]', '{{\"script\":\"true\"}}', 1, 3, 0, 'rn_hist', 'ws:bench',
                    {finished} - 40, {finished} - 20, {finished}
             FROM {series} h, (SELECT id FROM workspaces) w, (SELECT id FROM members) m,
                  (SELECT id FROM runtimes WHERE owner_member_id IS NULL) r;
             INSERT INTO job_logs (job_id, attempt, seq, stream, data, created_at)
             SELECT 'job_hist' || {pad}, 1, 0, 'stdout', 'a line the job printed, as most jobs print a few', {finished}
             FROM {series} h;
             COMMIT;"
        );
        c.execute_sql(&sql).await;
        eprintln!("  seeded {to} of {n} finished jobs");
        from = to + 1;
    }
    c.execute_sql(if sqlite { "ANALYZE" } else { "VACUUM ANALYZE" })
        .await;
}

/// `n` protocol-level runners of the workspace pool.
async fn runners(c: &Coordinator, admin: &Member, n: usize) -> Vec<Client> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let paired = pair(admin, Scope::Workspace, None, &format!("open-{i}"), &[]).await;
        clients.push(c.client(&paired.token));
    }
    clients
}

/// A sample a second: since start, database bytes (file, WAL), and whether
/// jobs that finished before the backlog's end are left.
#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    file: u64,
    wal: u64,
    backlog_left: bool,
}

type Samples = Arc<Mutex<Vec<Sample>>>;

/// Open-loop arrivals at `rate` for `secs`; protocol runners lease and
/// complete. Returns (submit time since start, enqueue→lease) per job, and
/// the samples taken meanwhile.
async fn open_loop(
    c: &Coordinator,
    admin: &Member,
    clients: Vec<Client>,
    rate: u64,
    secs: u64,
    backlog_before: Option<i64>,
) -> (Vec<(Duration, Duration)>, Vec<Sample>) {
    let submitted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let leased: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for client in clients {
        client.hello(&[]).await.unwrap();
        let (leased, stop) = (leased.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut pending = None;
            while !stop.load(Ordering::Relaxed) {
                let lease = match pending.take() {
                    Some(lease) => lease,
                    None => match client.lease(Duration::from_secs(1)).await.unwrap() {
                        Some(lease) => {
                            leased
                                .lock()
                                .unwrap()
                                .push((lease.job.id.clone(), Instant::now()));
                            lease
                        }
                        None => continue,
                    },
                };
                let next = drover_tests::runner_core::wire::Complete {
                    next: Some(drover_tests::runner_core::wire::LeaseRequest {
                        wait_ms: 0,
                        held: None,
                    }),
                    ..succeeded()
                };
                let done = client.complete(&lease.lease_id, &next).await.unwrap();
                pending = done.next.and_then(|n| n.lease);
                if let Some(l) = &pending {
                    leased
                        .lock()
                        .unwrap()
                        .push((l.job.id.clone(), Instant::now()));
                }
            }
        }));
    }
    let start = Instant::now();
    let samples: Samples = Arc::default();
    let sampler = {
        let (samples, stop) = (samples.clone(), stop.clone());
        let probe = Probe::of(c);
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let (file, wal) = probe.bytes().await;
                let backlog_left = match backlog_before {
                    Some(at) => probe.any_finished_before(at).await,
                    None => false,
                };
                samples.lock().unwrap().push(Sample {
                    secs: start.elapsed().as_secs_f64(),
                    file,
                    wal,
                    backlog_left,
                });
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let total = (rate * secs) as usize;
    let job = script_job("self:ws", "true");
    let mut pending = Vec::with_capacity(total);
    for n in 0..total {
        tokio::time::sleep_until((start + Duration::from_secs_f64(n as f64 / rate as f64)).into())
            .await;
        let (client, job, submitted) = (admin.client.clone(), job.clone(), submitted.clone());
        pending.push(tokio::spawn(async move {
            let t = Instant::now();
            let id = client.submit(&job).await.unwrap().id;
            submitted.lock().unwrap().insert(id, t);
        }));
    }
    for p in pending {
        p.await.unwrap();
    }
    eventually("the open-loop jobs", Duration::from_secs(600), || {
        let n = leased.lock().unwrap().len();
        async move { (n >= total).then_some(()) }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    sampler.await.unwrap();
    let submitted = submitted.lock().unwrap();
    let out = leased
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(id, at)| {
            let t0 = submitted.get(id)?;
            Some((*t0 - start, at.saturating_duration_since(*t0)))
        })
        .collect();
    let samples = samples.lock().unwrap().clone();
    (out, samples)
}

/// Reads the database from outside the coordinator, for the sampler.
struct Probe {
    backend: Backend,
    database: String,
    dir: std::path::PathBuf,
}

impl Probe {
    fn of(c: &Coordinator) -> Self {
        Self {
            backend: c.options.backend,
            database: c.database.clone(),
            dir: c.dir.path().to_owned(),
        }
    }

    /// The database's size on disk in bytes: (the SQLite file, its WAL),
    /// or (PostgreSQL's `pg_database_size`, 0).
    async fn bytes(&self) -> (u64, u64) {
        let size = |f: &str| std::fs::metadata(self.dir.join(f)).map_or(0, |m| m.len());
        match self.backend {
            Backend::Sqlite => (size("drover.db"), size("drover.db-wal")),
            Backend::Postgres => {
                let n: i64 = self
                    .scalar("SELECT pg_database_size(current_database())")
                    .await;
                (n as u64, 0)
            }
        }
    }

    /// Whether any job finished before `at` is left (an index probe).
    async fn any_finished_before(&self, at: i64) -> bool {
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE finished_at IS NOT NULL AND finished_at < {at} LIMIT 1) t"
        );
        self.scalar(&sql).await > 0
    }

    async fn scalar(&self, sql: &str) -> i64 {
        use sqlx::Connection as _;
        match self.backend {
            Backend::Sqlite => {
                let url = format!("{}?mode=ro", self.database);
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.database).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
            }
        }
    }
}

/// The first "purged old history" line of the coordinator's log: (jobs, ms).
fn first_purge(log: &str) -> Option<(u64, u64)> {
    let line = log.lines().find(|l| l.contains("purged old history"))?;
    // Without the terminal colours (`ESC [ … m`).
    let mut plain = String::with_capacity(line.len());
    let mut in_escape = false;
    for ch in line.chars() {
        match (in_escape, ch) {
            (false, '\x1b') => in_escape = true,
            (false, _) => plain.push(ch),
            (true, 'm') => in_escape = false,
            (true, _) => {}
        }
    }
    let line = plain;
    let field = |name: &str| -> Option<u64> {
        let rest = line.split(&format!(" {name}=")).nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((field("jobs")?, field("ms")?))
}

async fn coordinator(backend: Backend, retain: &str) -> Coordinator {
    let sync: &'static str = match env_or("BENCH_SQLITE_SYNC", "normal".to_owned()).as_str() {
        "full" => "full",
        _ => "normal",
    };
    Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        backend,
        sqlite_sync: sync,
        serve_args: vec!["--retain-finished".into(), retain.into()],
        ..Default::default()
    })
    .await
}

/// The same open loop on an empty database: enqueue→lease (p50, p99), and
/// the largest WAL seen.
async fn baseline(backend: Backend, rate: u64, secs: u64) -> ((f64, f64), u64) {
    let c = coordinator(backend, "24h").await;
    let admin = c.bootstrap("bench", "bench@bench.test");
    let clients = runners(&c, &admin, env_or("BENCH_OPEN_RUNNERS", 8)).await;
    let (jobs, samples) = open_loop(&c, &admin, clients, rate, secs, None).await;
    let max_wal = samples.iter().map(|s| s.wal).max().unwrap_or(0);
    (
        percentiles(jobs.into_iter().map(|(_, d)| d).collect()),
        max_wal,
    )
}

async fn scale(name: &str, backend: Backend, hours: u64, rate: u64, secs: u64) -> Value {
    let mut c = coordinator(backend, &format!("{hours}h")).await;
    let admin = c.bootstrap("bench", "bench@bench.test");
    let clients = runners(&c, &admin, env_or("BENCH_OPEN_RUNNERS", 8)).await;
    c.stop().await;
    let retain_ms = (hours * 3600 * 1000) as i64;
    let span_ms = retain_ms * 25 / 24;
    let n = rate * hours * 3600 * 25 / 24;
    let backlog = n / 25;
    let seeding = Instant::now();
    let now = unix_ms();
    seed_history(&c, n, span_ms, now).await;
    let seed_secs = seeding.elapsed().as_secs_f64();
    let (before, _) = Probe::of(&c).bytes().await;
    eprintln!(
        "{name}, {hours} h: seeded {n} jobs in {seed_secs:.0} s, {:.0} MiB",
        mib(before)
    );

    // Everything that finished before this is past the age when the
    // coordinator starts (its first purge takes it all).
    let backlog_before = unix_ms() - retain_ms;
    c.restart().await;
    let (jobs, samples) = open_loop(&c, &admin, clients, rate, secs, Some(backlog_before)).await;
    let purged = samples.iter().find(|s| !s.backlog_left).copied();
    let purged_at = purged.map(|s| s.secs);
    let purge = first_purge(&c.log_text());
    let (during, after): (Vec<_>, Vec<_>) = jobs
        .iter()
        .partition(|(t, _)| purged_at.is_none_or(|p| t.as_secs_f64() < p));
    let latency = |v: Vec<&(Duration, Duration)>| percentiles(v.iter().map(|(_, d)| *d).collect());
    let ((d50, d99), (a50, a99)) = (latency(during), latency(after));
    let (end, end_wal) = Probe::of(&c).bytes().await;
    let max_wal = samples.iter().map(|s| s.wal).max().unwrap_or(0);
    let rows_end: i64 = Probe::of(&c).scalar("SELECT COUNT(*) FROM jobs").await;
    let rate_purged = purge.map(|(jobs, ms)| jobs as f64 / (ms.max(1) as f64 / 1000.0));
    println!(
        "| {name} | {hours} h: {n} jobs, {backlog} past H | {seed_secs:.0} s | {:.0} MiB | {} | {:.0} MiB, {rows_end} jobs | WAL max {:.0}, end {:.0} MiB | {} | {d50:.2} / {d99:.2} ms | {a50:.2} / {a99:.2} ms |",
        mib(before),
        purged.map_or("not reached".into(), |s| format!(
            "{:.0} MiB at {:.0} s",
            mib(s.file),
            s.secs
        )),
        mib(end),
        mib(max_wal),
        mib(end_wal),
        match (purge, rate_purged) {
            (Some((jobs, ms)), Some(r)) =>
                format!("{jobs} jobs in {:.1} s: {r:.0} jobs/s", ms as f64 / 1000.0),
            _ => "no purge logged".into(),
        },
    );
    json!({
        "backend": name,
        "retainHours": hours,
        "seededJobs": n,
        "backlogJobs": backlog,
        "seedSeconds": seed_secs,
        "bytesBefore": before,
        "bytesWhenBacklogPurged": purged.map(|s| s.file),
        "secondsToPurgeBacklog": purged_at,
        "bytesAtEnd": end,
        "walBytesAtEnd": end_wal,
        "walBytesMax": max_wal,
        "jobsAtEnd": rows_end,
        "firstPurge": purge.map(|(jobs, ms)| json!({"jobs": jobs, "ms": ms})),
        "purgedJobsPerSecond": rate_purged,
        "enqueueToLeaseDuringPurgeMs": {"p50": d50, "p99": d99},
        "enqueueToLeaseAfterPurgeMs": {"p50": a50, "p99": a99},
        "sizeSamples": samples.iter().map(|s| json!([s.secs, s.file, s.wal])).collect::<Vec<_>>(),
    })
}

#[tokio::main]
async fn main() {
    let rate = env_or("BENCH_RETENTION_RATE", 200u64);
    let secs = env_or("BENCH_RETENTION_SECONDS", 180u64);
    let mut all = Vec::new();
    println!(
        "Open loop at {rate} jobs/s for {secs} s, {} protocol-level runners; retention = H, history seeded over H·25/24 at {rate} jobs/s.\n",
        env_or("BENCH_OPEN_RUNNERS", 8usize)
    );
    println!(
        "| backend | retention H: seeded | seeding | DB file before | when the backlog is gone | at the end | WAL | first purge (the backlog) | enqueue→lease p50 / p99 during it | after it |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut baselines = Vec::new();
    for b in list("BENCH_RETENTION_BACKENDS", "sqlite") {
        let (name, backend) = match b.as_str() {
            "sqlite" => ("SQLite", Backend::Sqlite),
            "pg" => ("PostgreSQL", Backend::Postgres),
            other => panic!("unknown backend {other:?}"),
        };
        let empty = baseline(backend, rate, secs.min(60)).await;
        baselines.push((name, empty));
        for hours in list("BENCH_RETAIN_HOURS", "1,6,24") {
            let hours: u64 = hours.parse().expect("hours");
            all.push(scale(name, backend, hours, rate, secs).await);
        }
    }
    println!("\n| backend | same open loop, empty database: enqueue→lease p50 / p99 | WAL max |");
    println!("|---|---|---|");
    for (name, ((p50, p99), wal)) in &baselines {
        println!("| {name} | {p50:.2} / {p99:.2} ms | {:.0} MiB |", mib(*wal));
    }
    let baselines: Vec<Value> = baselines
        .iter()
        .map(|(name, ((p50, p99), wal))| json!({"backend": name, "p50": p50, "p99": p99, "walBytesMax": wal}))
        .collect();
    println!(
        "\n{}",
        json!({"retention": all, "emptyDatabase": baselines, "rate": rate, "seconds": secs})
    );
}
