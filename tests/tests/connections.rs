//! The connection cap and shutdown: the last connections are kept for
//! runners, silent connections at the cap give way to a runner, and SIGTERM
//! ends the process within its deadline whatever the clients are doing.

use std::time::{Duration, Instant};

use drover_tests::raw::{addr, raw, read_to_close};
use drover_tests::runner_core::client::Scope;
use drover_tests::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

async fn start(serve_args: &[&str]) -> Coordinator {
    Coordinator::start_with(CoordinatorOptions {
        serve_args: serve_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .await
}

fn is_overloaded(answer: &str) -> bool {
    answer.starts_with("HTTP/1.1 503")
        && answer.to_ascii_lowercase().contains("\r\nretry-after: ")
        && answer.contains("OVERLOADED")
}

#[tokio::test]
async fn the_last_connections_are_kept_for_runners() {
    // 20 connections; the last 2 serve only the runner protocol.
    let c = start(&["--max-connections", "20", "--header-timeout-ms", "60000"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let read = format!(
        "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        admin.token
    );
    // Member clients take the other 18 (the harness's client may hold one),
    // each kept alive after a read; then a member read is answered 503.
    let mut members = Vec::new();
    loop {
        let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
        s.write_all(read.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let n = s.read(&mut buf).await.unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
        if answer.starts_with("HTTP/1.1 200") {
            members.push(s);
            assert!(members.len() <= 18, "past the cap's reserve");
            continue;
        }
        assert!(is_overloaded(&answer), "{answer}");
        break;
    }
    assert!(
        members.len() >= 16,
        "only {} member connections",
        members.len()
    );
    // A runner still gets through, on a fresh connection.
    let lease = format!(
        "POST /v1/runner/lease HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{{\"waitMs\":0}}",
        runner.token
    );
    let answer = raw(&c, lease.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(r#"{"lease":null}"#), "{answer}");
    drop(members);
}

#[tokio::test]
async fn sigterm_exits_within_the_deadline_with_clients_connected() {
    let mut c = start(&[
        "--shutdown-timeout-ms",
        "2000",
        "--header-timeout-ms",
        "60000",
    ])
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(TcpStream::connect(addr(&c)).await.expect("idle"));
    }
    let mut slow = TcpStream::connect(addr(&c)).await.expect("slow");
    slow.write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut upload = TcpStream::connect(addr(&c)).await.expect("upload");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
        admin.token
    );
    upload.write_all(head.as_bytes()).await.unwrap();
    // A lease long-poll, waiting for a job that never comes.
    let poll = {
        let client = c.client(&runner.token);
        tokio::spawn(async move { client.lease(Duration::from_secs(30)).await })
    };
    eventually("the long-poll to wait", Duration::from_secs(10), || async {
        (c.waiting_leases().await == 1).then_some(())
    })
    .await;
    let t = Instant::now();
    let status = c.stop().await;
    let took = t.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(8),
        "took {took:?} to exit with a 2 s deadline"
    );
    let leased = poll
        .await
        .expect("poll task")
        .expect("the long-poll answers");
    assert!(leased.is_none());
    drop((held, slow, upload));
}

/// SIGTERM closes connections that sent only part of a request head at
/// once: there is no request to finish, so they do not hold the process
/// until its shutdown deadline (10 s here).
#[tokio::test]
async fn sigterm_closes_half_sent_heads_at_once() {
    let mut c = start(&[
        "--shutdown-timeout-ms",
        "10000",
        "--header-timeout-ms",
        "60000",
    ])
    .await;
    let mut half = Vec::new();
    for head in [
        &b"GET /hea"[..],
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\n",
        b"",
    ] {
        let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
        s.write_all(head).await.unwrap();
        half.push(s);
    }
    // Served after them, so they were accepted before it.
    let health = raw(
        &c,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let t = Instant::now();
    let status = c.stop().await;
    let took = t.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} to exit with only half-sent heads open"
    );
    for s in &mut half {
        assert!(
            read_to_close(s, Duration::from_secs(1)).await.is_some(),
            "a half-sent head left open"
        );
    }
}

/// With every connection taken by clients that never send a request head,
/// a runner still gets its lease: the oldest silent connection gives up
/// its slot (once it has been silent for a second).
#[tokio::test]
async fn silent_connections_at_the_cap_do_not_keep_runners_out() {
    let c = start(&["--max-connections", "20", "--header-timeout-ms", "60000"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(TcpStream::connect(addr(&c)).await.expect("connect"));
    }
    let filled = Instant::now();
    let lease = format!(
        "POST /v1/runner/lease HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 12\r\nConnection: close\r\n\r\n{{\"waitMs\":0}}",
        runner.token
    );
    let answer = eventually("a runner's lease", Duration::from_secs(5), || async {
        let answer = raw(&c, lease.as_bytes()).await;
        answer.starts_with("HTTP/1.1 200").then_some(answer)
    })
    .await;
    let took = filled.elapsed();
    assert!(answer.ends_with(r#"{"lease":null}"#), "{answer}");
    assert!(
        took < Duration::from_secs(3),
        "the lease took {took:?} with the cap full of silent connections"
    );
    // The oldest silent connection was closed to make room.
    let oldest = read_to_close(&mut silent[0], Duration::from_secs(1)).await;
    assert_eq!(oldest.as_deref(), Some(""), "the oldest silent connection");
}
