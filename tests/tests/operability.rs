//! Operating the coordinator: `/metrics` (Prometheus text), `/readyz`
//! (database reachable, migrations current) and a graceful shutdown (long-
//! polls answer at once, writes in flight finish).
//!
//! (Over 500 lines: the three share the text-format reader and the probe
//! helpers, and each test is one story best read whole.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drover_tests::runner_core::client::Scope;
use drover_tests::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// One sample of the Prometheus text format: name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A small reader of the text format (what our exporter writes: no escapes
/// inside label values, no timestamps).
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("a number: {line:?}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let inner = rest.strip_suffix('}').expect("labels end with }");
                let labels = inner
                    .split(',')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').expect("k=v");
                        let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                        (k.to_owned(), v.expect("a quoted value").to_owned())
                    })
                    .collect();
                (name, labels)
            }
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line:?}"
        );
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

/// The value of the sample `name` with exactly these labels.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

async fn scrape(c: &Coordinator, token: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(format!("{}/metrics", c.url));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.expect("GET /metrics")
}

async fn metrics(c: &Coordinator, token: &str) -> (String, Vec<Sample>) {
    let resp = scrape(c, Some(token)).await;
    assert_eq!(resp.status(), 200);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = resp.text().await.unwrap();
    let samples = parse(&text);
    (text, samples)
}

/// Scrapes until the per-pool gauges show `pool` with this queue depth
/// (`None`: not shown) and runners online: they are read at most once a
/// second.
async fn metrics_when(
    c: &Coordinator,
    token: &str,
    pool: &str,
    queued: Option<f64>,
    online: Option<f64>,
) -> (String, Vec<Sample>) {
    eventually(
        &format!("/metrics to show {queued:?} queued and {online:?} runners in {pool}"),
        DEADLINE,
        || async {
            let (text, samples) = metrics(c, token).await;
            let labels = [("pool", pool)];
            let shown = (
                value(&samples, "drover_queue_depth", &labels),
                value(&samples, "drover_runners_online", &labels),
            );
            (shown == (queued, online)).then_some((text, samples))
        },
    )
    .await
}

fn start_options(dir: &TempDir, token: &str) -> CoordinatorOptions {
    let file = dir.path().join("metrics.token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    CoordinatorOptions {
        serve_args: vec!["--metrics-token-file".into(), file.display().to_string()],
        ..Default::default()
    }
}

#[tokio::test]
async fn metrics_show_queues_runners_latencies_and_batches() {
    let dir = TempDir::new("metrics");
    let token = "scrape-me-0123456789";
    let c = Coordinator::start_with(start_options(&dir, token)).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r1", &[]).await;
    let pool = runner.runner.runtime_id.clone();

    // Only with the token of --metrics-token-file.
    assert_eq!(scrape(&c, None).await.status(), 401);
    assert_eq!(scrape(&c, Some("wrong")).await.status(), 401);

    let (_, before) = metrics(&c, token).await;
    assert_eq!(
        value(&before, "drover_queue_depth", &[("pool", &pool)]),
        None
    );
    assert_eq!(
        value(&before, "drover_submit_seconds_count", &[]),
        Some(0.0)
    );

    for _ in 0..3 {
        admin
            .client
            .submit(&script_job("self:ws", "true"))
            .await
            .unwrap();
    }
    let (_, queued) = metrics_when(&c, token, &pool, Some(3.0), Some(0.0)).await;
    let age = value(
        &queued,
        "drover_queue_oldest_age_seconds",
        &[("pool", &pool)],
    )
    .expect("the oldest job's age");
    assert!((0.0..60.0).contains(&age), "{age}");
    assert_eq!(
        value(&queued, "drover_submit_seconds_count", &[]),
        Some(3.0)
    );
    assert_eq!(
        value(&queued, "drover_batch_size_sum", &[("kind", "submit")]),
        Some(3.0)
    );

    // A runner takes and completes them, each found at once.
    let client = c.client(&runner.token);
    for _ in 0..3 {
        let lease = client
            .lease(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a job");
        client
            .complete(&lease.lease_id, &succeeded())
            .await
            .unwrap();
    }
    // Then one that waits, and is woken by a submit.
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.lease(Duration::from_secs(30)).await })
    };
    c.wait_for_waiting(1).await;
    let (_, polling) = metrics(&c, token).await;
    assert_eq!(value(&polling, "drover_lease_waiting", &[]), Some(1.0));
    admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let lease = waiting.await.unwrap().unwrap().expect("woken with a job");
    client
        .complete(&lease.lease_id, &succeeded())
        .await
        .unwrap();
    assert!(client.lease(Duration::ZERO).await.unwrap().is_none());

    // A pool with runners online shows its empty queue, and no oldest job.
    let (text, after) = metrics_when(&c, token, &pool, Some(0.0), Some(1.0)).await;
    assert_eq!(
        value(
            &after,
            "drover_queue_oldest_age_seconds",
            &[("pool", &pool)]
        ),
        None
    );
    assert_eq!(
        value(&after, "drover_runners_online", &[("pool", &pool)]),
        Some(1.0)
    );
    let count = |name: &str, labels: &[(&str, &str)]| value(&after, name, labels).unwrap_or(0.0);
    assert_eq!(
        count("drover_lease_seconds_count", &[("wait", "immediate")]),
        3.0
    );
    assert_eq!(
        count("drover_lease_seconds_count", &[("wait", "woken")]),
        1.0
    );
    assert_eq!(count("drover_lease_empty_total", &[]), 1.0);
    assert_eq!(count("drover_complete_seconds_count", &[]), 4.0);
    assert_eq!(count("drover_submit_seconds_count", &[]), 4.0);
    for kind in ["submit", "lease", "complete"] {
        let batches = count("drover_batch_size_count", &[("kind", kind)]);
        let requests = count("drover_batch_size_sum", &[("kind", kind)]);
        assert!(
            batches >= 1.0 && requests >= 4.0 && requests >= batches,
            "{kind}: {batches} batches of {requests} requests"
        );
        assert_eq!(
            count("drover_batch_seconds_count", &[("kind", kind)]),
            batches
        );
    }
    // The histogram's buckets are cumulative and end with +Inf = count.
    assert_eq!(
        count(
            "drover_lease_seconds_bucket",
            &[("wait", "immediate"), ("le", "+Inf")]
        ),
        3.0
    );
    // No member data and no secrets: pool ids, not names; no tokens.
    for secret in [
        "acme",
        "admin@acme.test",
        admin.token.as_str(),
        runner.token.as_str(),
        token,
    ] {
        assert!(!text.contains(secret), "/metrics shows {secret:?}");
    }
}

/// PostgreSQL: a signal from one replica to another is timed, and a broken
/// link to the database is counted when it is made again.
#[tokio::test]
async fn replica_signal_lag_and_reconnects_are_measured_on_postgres() {
    let dir = TempDir::new("lag");
    let token = "scrape-me-0123456789";
    let options = start_options(&dir, token);
    // SQLite has one coordinator: no replicas, no signals between them.
    assert!(
        options.backend == Backend::Postgres,
        "replicas share a PostgreSQL database: this test runs in the PostgreSQL pass"
    );
    let a = Coordinator::start_with(options.clone()).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r1", &[]).await;
    // The runner waits on B; the submit on A reaches it as a signal.
    let waiting = {
        let client = b.client(&runner.token);
        tokio::spawn(async move { client.lease(Duration::from_secs(30)).await })
    };
    b.wait_for_waiting(1).await;
    admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    waiting.await.unwrap().unwrap().expect("a job");
    let (_, samples) = metrics(&b, token).await;
    let lag = value(&samples, "drover_replica_signal_lag_seconds_count", &[]).unwrap();
    assert!(lag >= 1.0, "{lag} signals timed");
    let sum = value(&samples, "drover_replica_signal_lag_seconds_sum", &[]).unwrap();
    assert!((0.0..10.0).contains(&sum), "lag sum {sum} s");
    assert_eq!(
        value(&samples, "drover_replica_signal_reconnects_total", &[]),
        Some(0.0)
    );

    // Cut B's connections: its signal link comes back, and says so.
    terminate_connections(&b, "").await;
    eventually("the signal link to reconnect", DEADLINE, || async {
        let (_, s) = metrics(&b, token).await;
        (value(&s, "drover_replica_signal_reconnects_total", &[]) >= Some(1.0)).then_some(())
    })
    .await;
}

async fn get_json(url: String) -> (u16, serde_json::Value) {
    let resp = reqwest::get(url).await.expect("GET");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a JSON body"))
}

async fn readyz(c: &Coordinator) -> (u16, serde_json::Value) {
    get_json(format!("{}/readyz", c.url)).await
}

/// Waits until `/readyz` answers `status`; returns its body.
async fn wait_ready(c: &Coordinator, status: u16) -> serde_json::Value {
    eventually(
        &format!("/readyz to answer {status}"),
        DEADLINE,
        || async move {
            let (s, body) = readyz(c).await;
            (s == status).then_some(body)
        },
    )
    .await
}

fn database_name(c: &Coordinator) -> String {
    c.database.rsplit('/').next().unwrap().to_owned()
}

/// Ends every connection to `c`'s PostgreSQL database; `then` runs first,
/// in the same session (e.g. to refuse new connections).
async fn terminate_connections(c: &Coordinator, then: &str) {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("connect as admin");
    let name = database_name(c);
    if !then.is_empty() {
        sqlx::query(then).execute(&mut conn).await.expect(then);
    }
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&name)
    .execute(&mut conn)
    .await
    .expect("terminate");
}

#[tokio::test]
async fn readyz_is_503_while_the_migrations_are_not_this_builds() {
    let c = Coordinator::start().await;
    let (status, body) = readyz(&c).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ready")));
    let (status, body) = get_json(format!("{}/healthz", c.url)).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")));

    // A newer coordinator migrated the database.
    c.execute_sql(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990001, 'from a newer coordinator', TRUE, CAST('x' AS BLOB), 0)"
            .replace(
                "BLOB",
                match c.options.backend {
                    Backend::Sqlite => "BLOB",
                    Backend::Postgres => "BYTEA",
                },
            )
            .as_str(),
    )
    .await;
    let body = wait_ready(&c, 503).await;
    assert_eq!(body["error"]["code"], "NOT_READY", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("99990001"), "{message}");
    // Alive all the same.
    assert_eq!(get_json(format!("{}/healthz", c.url)).await.0, 200);

    c.execute_sql("DELETE FROM _sqlx_migrations WHERE version = 99990001")
        .await;
    wait_ready(&c, 200).await;
}

#[tokio::test]
async fn readyz_is_503_while_the_database_cannot_be_reached() {
    let c = Coordinator::start().await;
    wait_ready(&c, 200).await;
    let t = Instant::now();
    match c.options.backend {
        Backend::Postgres => {
            let name = database_name(&c);
            terminate_connections(
                &c,
                &format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false"),
            )
            .await;
        }
        Backend::Sqlite => {
            // The database file is moved away (its open connections still
            // hold it, but nothing new can open it).
            let db = c.dir.path().join("drover.db");
            std::fs::rename(&db, c.dir.path().join("moved.db")).unwrap();
        }
    }
    let body = wait_ready(&c, 503).await;
    assert_eq!(body["error"]["code"], "NOT_READY", "{body}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?} to notice",
        t.elapsed()
    );
    match c.options.backend {
        Backend::Postgres => {
            let name = database_name(&c);
            terminate_connections(
                &c,
                &format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true"),
            )
            .await;
        }
        Backend::Sqlite => {
            let db = c.dir.path().join("drover.db");
            std::fs::rename(c.dir.path().join("moved.db"), &db).unwrap();
        }
    }
    wait_ready(&c, 200).await;
}

/// Long-polls of each kind waiting in the coordinator: (leases, heartbeats, log follows).
async fn waiting(c: &Coordinator) -> (u64, u64, u64) {
    let (_, v) = get_json(format!("{}/healthz", c.url)).await;
    let n = |k: &str| v[k].as_u64().expect(k);
    (
        n("waitingLeases"),
        n("waitingHeartbeats"),
        n("followedLogs"),
    )
}

/// SIGTERM with long-polls of every kind waiting (a lease, a heartbeat, a
/// log follow) and a submit in flight: the long-polls answer at once, the
/// submit is written and answered, the process exits 0; after a restart the
/// job is there.
#[tokio::test]
async fn sigterm_answers_long_polls_at_once_and_finishes_writes_in_flight() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 60_000,
        serve_args: vec!["--shutdown-timeout-ms".into(), "20000".into()],
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let busy = pair(&admin, Scope::Workspace, None, "busy", &[]).await;
    let idle = pair(&admin, Scope::Workspace, None, "idle", &[]).await;
    let addr = c.url.trim_start_matches("http://").to_owned();

    // One runner holds a job: its heartbeat waits for a cancel, and a
    // member follows the job's log.
    let running = admin
        .client
        .submit(&script_job("self:ws", "sleep 600"))
        .await
        .unwrap();
    let busy = c.client(&busy.token);
    let lease = busy
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the job");
    let heartbeat = {
        let lease = lease.lease_id.clone();
        tokio::spawn(async move {
            let r = busy.heartbeat(&lease, Duration::from_secs(30)).await;
            (r, Instant::now())
        })
    };
    let follow = {
        let (client, id) = (admin.client.clone(), running.id.clone());
        tokio::spawn(async move {
            let r = client.follow_logs(&id, |_| {}).await;
            (r, Instant::now())
        })
    };
    // The other runner waits for a job that does not come.
    let poll = {
        let client = c.client(&idle.token);
        tokio::spawn(async move {
            let r = client.lease(Duration::from_secs(30)).await;
            (r, Instant::now())
        })
    };
    eventually("every long-poll to wait", DEADLINE, || async {
        (waiting(&c).await == (1, 1, 1)).then_some(())
    })
    .await;
    // A submit that is being read when the signal comes: the coordinator
    // asks for its body (100 Continue), and the body follows the signal.
    let body = br#"{"runtime":"self:ws","script":"echo survived"}"#;
    let mut submit = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        admin.token,
        body.len()
    );
    submit.write_all(head.as_bytes()).await.unwrap();
    let mut go_on = [0u8; 25];
    tokio::time::timeout(DEADLINE, submit.read_exact(&mut go_on))
        .await
        .expect("100 Continue")
        .unwrap();
    assert!(go_on.starts_with(b"HTTP/1.1 100 Continue\r\n"));

    let signalled = Instant::now();
    // SAFETY: kill(2) on the coordinator this test started.
    unsafe {
        libc::kill(c.pid() as i32, libc::SIGTERM);
    }
    let prompt = |what: &str, answered: Instant| {
        let took = answered - signalled;
        assert!(
            took < Duration::from_secs(3),
            "the 30 s {what} answered {took:?} after SIGTERM"
        );
    };
    let (leased, answered) = tokio::time::timeout(DEADLINE, poll).await.unwrap().unwrap();
    assert!(leased.expect("an answer, not an error").is_none());
    prompt("lease long-poll", answered);
    let (beat, answered) = tokio::time::timeout(DEADLINE, heartbeat)
        .await
        .unwrap()
        .unwrap();
    assert!(!beat.expect("an answer, not an error").cancel);
    prompt("heartbeat", answered);
    let (followed, answered) = tokio::time::timeout(DEADLINE, follow)
        .await
        .unwrap()
        .unwrap();
    followed.expect("the log stream ends cleanly");
    prompt("log follow", answered);

    // New connections are refused: the coordinator is stopping.
    eventually("the listener to close", DEADLINE, || {
        let addr = addr.clone();
        async move { TcpStream::connect(&addr).await.is_err().then_some(()) }
    })
    .await;
    // The body: the submit is still served.
    submit.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(DEADLINE, submit.read_to_end(&mut answer))
        .await
        .expect("the submit is answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let job: serde_json::Value =
        serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    let id = job["id"].as_str().expect("the job's id").to_owned();

    let status = c.stop().await;
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(15),
        "exited {:?} after SIGTERM",
        signalled.elapsed()
    );
    c.restart().await;
    let job = admin.client.job(&id).await.expect("the job survived");
    assert_eq!(job.state, drover_tests::runner_core::wire::JobState::Queued);
}

/// A runner keeps its connections from job to job: the heartbeat waiting at
/// the coordinator when a job ends is answered once the complete is in, not
/// dropped (dropping a request in flight closes its connection, and the next
/// job's complete would open another).
#[tokio::test]
async fn a_runner_keeps_its_connections_from_job_to_job() {
    let dir = TempDir::new("connections");
    let token = "scrape-me-0123456789";
    let mut options = start_options(&dir, token);
    // An idle keep-alive connection is closed after the header timeout: on a
    // slow machine that must not count as a runner opening another.
    options
        .serve_args
        .extend(["--header-timeout-ms".into(), "120000".into()]);
    let c = Coordinator::start_with(options).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r1", &[]).await;
    let _r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let connections = || async {
        let (_, samples) = metrics(&c, token).await;
        value(&samples, "drover_http_connections_total", &[]).expect("the counter")
    };
    let run = |script: &'static str| {
        let admin = &admin;
        async move {
            let job = admin
                .client
                .submit(&script_job("self:ws", script))
                .await
                .unwrap();
            assert_eq!(
                wait_done(&admin.client, &job.id).await.state,
                drover_tests::runner_core::wire::JobState::Succeeded
            );
        }
    };
    // The runner's first connections, and the member's.
    run("true").await;
    let before = connections().await;
    const JOBS: usize = 40;
    for _ in 0..JOBS {
        run("true").await;
    }
    // Each scrape comes on a connection of its own: this one too. A few
    // more may open while requests overlap (a heartbeat, a log upload, the
    // lease long-poll); one per job is what dropped heartbeats cost.
    let opened = connections().await - before - 1.0;
    assert!(
        opened <= 4.0,
        "{JOBS} jobs in a row opened {opened} connections"
    );
}
