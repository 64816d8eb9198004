//! Hostile and heavy load: idle and slow connections, stalled uploads, a
//! storm of reads while a runner works, and
//! requests that the schema and the code must judge alike.

use std::time::{Duration, Instant};

use drover_tests::raw::{addr, raw, read_to_close, status_and_code};
use drover_tests::runner_core::client::Scope;
use drover_tests::*;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

async fn start(serve_args: &[&str]) -> Coordinator {
    Coordinator::start_with(CoordinatorOptions {
        serve_args: serve_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .await
}

/// This test process opens more sockets than a common soft limit allows.
fn raise_own_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(
        limit.rlim_cur >= 2048,
        "need 2048 open files, have {limit:?}"
    );
}

/// Resident memory of a process, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024
}

fn is_overloaded(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 503")
        && answer.to_ascii_lowercase().contains("\r\nretry-after: ")
        && answer.contains("OVERLOADED")
}

#[tokio::test]
async fn idle_and_slow_connections_do_not_lock_clients_out() {
    raise_own_open_files_limit();
    // 256 open files: room for 128 connections. 1,200 idle sockets used to
    // exhaust the descriptors ("Too many open files") and lock everyone out.
    let c = start(&["--max-open-files", "256", "--header-timeout-ms", "1000"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let mut held = Vec::new();
    for i in 0..1200 {
        let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
        if i % 10 == 0 {
            // Slow: half a request head, never finished.
            let _ = s
                .write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await;
        }
        held.push(s);
    }
    // Served while every one of those sockets is still open on our side:
    // the connections past the cap were shed, the others timed out.
    eventually("a client to be served", Duration::from_secs(30), || async {
        admin.client.jobs(None, 10).await.ok()
    })
    .await;
    let mut shed = 0;
    for s in &mut held {
        let answer = read_to_close(s, Duration::from_secs(10))
            .await
            .expect("the coordinator closes every idle or slow connection");
        if !answer.is_empty() {
            assert!(is_overloaded(&answer), "{answer}");
            shed += 1;
        }
    }
    assert!(shed > 0, "no connection was answered 503 past the cap");
    assert!(!c.log_text().contains("Too many open files"));
    drop(held);
    // A new connection: the client's pooled one idled past the 1 s timeout.
    c.client(&admin.token).jobs(None, 10).await.expect("served");
}

#[tokio::test]
async fn stalled_uploads_are_bounded_and_their_memory_comes_back() {
    // 16 MiB of bodies at once; each upload announces 1 MiB.
    let c = start(&["--body-memory-mib", "16", "--body-timeout-ms", "60000"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let _runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    admin.client.jobs(None, 10).await.expect("warm up");
    let baseline = rss_mib(c.pid());
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{{\"runtime\": \"self:ws\", \"script\": \"",
        admin.token
    );
    let part = vec![b'x'; 512 * 1024];
    let mut stalled = Vec::new();
    for _ in 0..300 {
        let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
        s.write_all(head.as_bytes()).await.expect("head");
        // Half the body, then nothing: the server may refuse it meanwhile.
        let _ = tokio::time::timeout(Duration::from_millis(200), s.write_all(&part)).await;
        stalled.push(s);
    }
    // Others are still served, reads and writes.
    admin.client.jobs(None, 10).await.expect("a read is served");
    admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .expect("a submit is served");
    let peak = rss_mib(c.pid());
    // Past the budget, uploads are refused at once.
    let mut refused = 0;
    for s in &mut stalled {
        let mut buf = [0u8; 512];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
            let answer = String::from_utf8_lossy(&buf[..n]);
            if n > 0 {
                assert!(is_overloaded(&answer), "{answer}");
                refused += 1;
            }
        }
    }
    assert!(refused >= 250, "only {refused} of 300 uploads were refused");
    drop(stalled);
    let after = eventually(
        "memory to come back after the uploads closed",
        Duration::from_secs(20),
        || async {
            let now = rss_mib(c.pid());
            (now <= baseline + 48).then_some(now)
        },
    )
    .await;
    eprintln!("RSS: baseline {baseline} MiB, peak {peak} MiB, after {after} MiB");
    admin.client.jobs(None, 10).await.expect("still served");
}

#[tokio::test]
async fn a_read_storm_answers_503_and_the_runner_keeps_working() {
    // One member read at a time, and no wait for a turn: the storm below
    // is far past it however fast each read is.
    let c = start(&["--max-reads", "1", "--read-wait-ms", "0"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        let job = admin
            .client
            .submit(&script_job("self:ws", "true"))
            .await
            .expect("submit");
        ids.push(job.id);
    }
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let shed = Arc::new(AtomicU32::new(0));
    let mut storm = Vec::new();
    for _ in 0..200 {
        let (stop, shed, url, token) = (
            stop.clone(),
            shed.clone(),
            c.url.clone(),
            admin.token.clone(),
        );
        storm.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut other = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let Ok(resp) = http
                    .get(format!("{url}/v1/jobs?limit=100"))
                    .bearer_auth(&token)
                    .send()
                    .await
                else {
                    continue;
                };
                match resp.status().as_u16() {
                    200 => {}
                    503 => {
                        assert!(resp.headers().contains_key("retry-after"));
                        let body: serde_json::Value = resp.json().await.expect("JSON");
                        assert_eq!(body["error"]["code"], "OVERLOADED");
                        shed.fetch_add(1, Ordering::Relaxed);
                    }
                    s => other.push(s),
                }
            }
            other
        }));
    }
    // The storm is on (reads are being shed) before the runner starts, so
    // the runner works through all of it.
    eventually("the storm to be shed", DEADLINE, || {
        let shed = shed.clone();
        async move { (shed.load(Ordering::Relaxed) > 0).then_some(()) }
    })
    .await;
    let shed_before = shed.load(Ordering::Relaxed);
    // The runner leases and completes every job meanwhile.
    let started = Instant::now();
    let r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    r.wait_for_lines("succeeded", ids.len()).await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut other = Vec::new();
    for task in storm {
        other.extend(task.await.expect("storm task"));
    }
    let shed = shed.load(Ordering::Relaxed);
    eprintln!(
        "20 jobs ran in {took:?} during the storm; {shed} reads answered 503 ({shed_before} before the runner started)"
    );
    assert!(other.is_empty(), "unexpected statuses: {other:?}");
    for id in &ids {
        let job = admin.client.job(id).await.expect("job");
        assert_eq!(
            job.state,
            drover_tests::runner_core::wire::JobState::Succeeded
        );
    }
}

#[tokio::test]
async fn requests_are_judged_as_the_schema_says_and_errors_are_enveloped() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let post = |path: &str, token: &str, body: serde_json::Value| {
        http.post(format!("{}{path}", c.url))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let code_of = |v: serde_json::Value| v["error"]["code"].as_str().unwrap_or("").to_owned();

    // Integral numbers are integers, as in JSON Schema; fractions are not.
    let resp = post(
        "/v1/jobs",
        &admin.token,
        json!({"runtime": "self:ws", "script": "true", "timeoutSeconds": 891.0, "priority": 2.0, "maxAttempts": 3.0}),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
    for field in ["timeoutSeconds", "priority", "maxAttempts"] {
        let mut body = json!({"runtime": "self:ws", "script": "true"});
        body[field] = json!(2.5);
        let resp = post("/v1/jobs", &admin.token, body).await.unwrap();
        assert_eq!(resp.status(), 400, "{field}");
        assert_eq!(code_of(resp.json().await.unwrap()), "BAD_REQUEST");
    }
    let resp = http
        .put(format!("{}/v1/workspace/budget", c.url))
        .bearer_auth(&admin.token)
        .json(&json!({"monthlyMinutes": 60.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let resp = post("/v1/runner/lease", &runner.token, json!({"waitMs": 0.0}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    // A body is a JSON object, never an array standing for one.
    for (path, body) in [
        ("/v1/me/runners", json!([null, null])),
        ("/v1/workspace/runners", json!([null, null, []])),
        ("/v1/jobs", json!(["self:ws", [], "true"])),
        ("/v1/me/runtimes", json!("name")),
    ] {
        let resp = post(path, &admin.token, body).await.unwrap();
        assert_eq!(resp.status(), 400, "{path}");
        assert_eq!(code_of(resp.json().await.unwrap()), "BAD_REQUEST", "{path}");
    }
    let mine: serde_json::Value = http
        .get(format!("{}/v1/me/runners", c.url))
        .bearer_auth(&admin.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine["runners"], json!([]), "a refused body paired a runner");

    // Neither a command nor a script: refused, as the schema says.
    let resp = post(
        "/v1/jobs",
        &admin.token,
        json!({"runtime": "self:ws", "command": [], "script": null}),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 400);
    let spec: serde_json::Value = http
        .get(format!("{}/openapi.json", c.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let submit = &spec["components"]["schemas"]["SubmitJob"];
    assert!(submit["oneOf"].is_array(), "{submit}");

    // Errors from below the handlers come in the envelope too.
    let answer = raw(
        &c,
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    )
    .await;
    assert_eq!(status_and_code(&answer), (400, "BAD_REQUEST".into()));
    let answer = raw(
        &c,
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    )
    .await;
    assert_eq!(status_and_code(&answer), (400, "BAD_REQUEST".into()));
    let answer = raw(&c, b"GET /v1/jobs/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status_and_code(&answer), (400, "BAD_REQUEST".into()));
    let request = format!(
        "GET /v1/jobs/%FF%FE HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        admin.token
    );
    let answer = raw(&c, request.as_bytes()).await;
    assert_eq!(status_and_code(&answer), (400, "BAD_REQUEST".into()));
    let answer = raw(
        &c,
        b"DELETE /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_and_code(&answer), (405, "METHOD_NOT_ALLOWED".into()));
    let big_head = format!(
        "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "x".repeat(200 * 1024)
    );
    let answer = raw(&c, big_head.as_bytes()).await;
    assert_eq!(status_and_code(&answer), (431, "PAYLOAD_TOO_LARGE".into()));
}

#[tokio::test]
async fn a_client_that_stops_reading_its_answers_is_disconnected() {
    let c = start(&["--body-timeout-ms", "1000"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    // Many pipelined requests for a large document, and no reading: the
    // answers fill the socket buffers and the coordinator's writes stall.
    let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
    let one = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
    s.write_all(&one.repeat(200)).await.expect("write");
    eventually(
        "the stalled connection to be closed",
        Duration::from_secs(30),
        || {
            let log = c.log_text();
            async move {
                log.contains("the client stopped taking its answer")
                    .then_some(())
            }
        },
    )
    .await;
    // What was sent before comes out, then the end.
    read_to_close(&mut s, Duration::from_secs(10))
        .await
        .expect("closed by the coordinator");
    admin
        .client
        .jobs(None, 10)
        .await
        .expect("others are served");
}
