//! Large answers: job lists carry previews and end at a byte
//! budget, with a cursor that loses nothing; large answers are capped per
//! principal; stalled readers of the largest answer one member can make
//! keep the coordinator's memory bounded, and it comes back after them.

use std::time::Duration;

use drover_tests::raw::{addr, status_and_code};
use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode, JobList};
use drover_tests::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// A command of 1 MiB with its JSON around it: just under the body limit.
const COMMAND_BYTES: usize = 1024 * 1024 - 200;

/// The preview's bound (`store::preview::PREVIEW_BYTES`).
const PREVIEW_BYTES: usize = 512;

/// A list page's bound (`service::jobs::LIST_BUDGET_BYTES`).
const PAGE_BYTES: usize = 512 * 1024;

async fn start(serve_args: &[&str]) -> Coordinator {
    Coordinator::start_with(CoordinatorOptions {
        serve_args: serve_args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .await
}

/// A workspace runner that said hello, so that `self:ws` takes jobs.
async fn runner(c: &Coordinator, admin: &Member) -> Client {
    let paired = pair(admin, Scope::Workspace, None, "r1", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello_with_slots(&[], 1).await.expect("hello");
    runner
}

fn big_command(i: usize) -> wire::SubmitJob {
    wire::SubmitJob {
        command: vec!["echo".into(), format!("{i}{}", "x".repeat(COMMAND_BYTES))],
        script: None,
        ..script_job("self:ws", "unused")
    }
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// Submits `jobs` from `n` clients at once; their ids.
async fn submit_all(member: &Member, jobs: Vec<wire::SubmitJob>, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for batch in jobs.chunks(n) {
        let mut set = JoinSet::new();
        for job in batch {
            let (client, job) = (member.client.clone(), job.clone());
            set.spawn(async move { client.submit(&job).await.expect("submit").id });
        }
        ids.extend(set.join_all().await);
    }
    ids
}

/// A GET on a raw socket with a small receive buffer: the first 64 bytes of
/// its answer, and the socket, which is then left unread.
async fn stalled_get(c: &Coordinator, token: &str, path: &str) -> (String, TcpStream) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let mut s = socket
        .connect(addr(c).parse().expect("addr"))
        .await
        .expect("connect");
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut head = [0u8; 64];
    let n = tokio::time::timeout(DEADLINE, s.read(&mut head))
        .await
        .expect("an answer begins")
        .expect("read");
    (String::from_utf8_lossy(&head[..n]).into_owned(), s)
}

#[tokio::test]
async fn stalled_readers_of_the_largest_list_keep_memory_bounded_and_it_comes_back() {
    // The attack as it was found: 64 jobs with a 1 MiB command each, then
    // 100 readers of GET /v1/jobs?limit=1000 that read 64 bytes and stop.
    // Each used to hold its 64 MiB answer: 30 of them took 2 GiB.
    let c = start(&[]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let other = c.add_member("acme", "other@acme.test", "member");
    let _runner = runner(&c, &admin).await;
    let ids = submit_all(&admin, (0..64).map(big_command).collect(), 4).await;

    // The list carries previews; the job itself, its whole command.
    let list = admin
        .client
        .jobs_page(None, 1000, None)
        .await
        .expect("list");
    assert_eq!(list.jobs.len(), 64);
    assert_eq!(list.next_before, None);
    for job in &list.jobs {
        assert!(job.truncated, "{}", job.id);
        let shown: usize = job.command.iter().map(|a| a.len() + 1).sum();
        assert!(shown <= PREVIEW_BYTES, "{shown}");
        assert_eq!(job.command[0], "echo");
    }
    let whole = admin.client.job(&ids[0]).await.expect("job");
    assert_eq!(whole.command[1].len(), COMMAND_BYTES + 1);
    assert!(!whole.truncated);

    // Warm up as ordinary use would (every database connection).
    let mut warm = JoinSet::new();
    for _ in 0..16 {
        let client = admin.client.clone();
        warm.spawn(async move {
            for _ in 0..3 {
                let _ = client.jobs_page(None, 1000, None).await;
            }
        });
    }
    warm.join_all().await;
    let baseline = settled_rss(c.pid()).await;

    let mut stalled = Vec::new();
    let mut answered = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..100 {
        let (head, s) = stalled_get(&c, &admin.token, "/v1/jobs?limit=1000").await;
        let status = head.split(' ').nth(1).unwrap_or("none").to_owned();
        *answered.entry(status).or_default() += 1;
        stalled.push(s);
    }
    let mut peak = rss_mib(c.pid());
    // Others are served meanwhile.
    let theirs = other
        .client
        .jobs_page(None, 1000, None)
        .await
        .expect("list");
    assert_eq!(theirs.jobs.len(), 64);
    for _ in 0..10 {
        peak = peak.max(rss_mib(c.pid()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("stalled readers: {answered:?}; RSS baseline {baseline:.0} MiB, peak {peak:.0} MiB");
    assert!(
        answered
            .keys()
            .all(|s| ["200", "429", "503"].contains(&s.as_str())),
        "{answered:?}"
    );
    assert!(answered.get("200").is_some_and(|n| *n > 0), "{answered:?}");
    assert!(peak < 256.0, "RSS {peak:.0} MiB with 100 stalled readers");

    drop(stalled);
    let back = tokio::time::Instant::now();
    let after = eventually(
        "RSS back within 20 % of its baseline",
        Duration::from_secs(10),
        || async {
            let now = rss_mib(c.pid());
            (now <= baseline * 1.2).then_some(now)
        },
    )
    .await;
    eprintln!(
        "RSS {after:.0} MiB {:?} after the readers closed",
        back.elapsed()
    );
}

/// RSS once it holds still (two readings a second apart within 1 MiB).
async fn settled_rss(pid: u32) -> f64 {
    let last = std::cell::Cell::new(rss_mib(pid));
    eventually("RSS to settle", Duration::from_secs(20), || {
        let before = last.get();
        let last = &last;
        async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = rss_mib(pid);
            last.set(now);
            ((now - before).abs() < 1.0).then_some(now)
        }
    })
    .await
}

#[tokio::test]
async fn a_principal_past_its_large_answers_is_refused_429_and_others_are_served() {
    let c = start(&["--max-reads-per-member", "2"]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let other = c.add_member("acme", "other@acme.test", "member");
    let _runner = runner(&c, &admin).await;
    let id = admin
        .client
        .submit(&big_command(0))
        .await
        .expect("submit")
        .id;
    // Two connections ask for the 1 MiB job 16 times each and read nothing:
    // socket buffers fill, then each holds an answer, and its turn.
    let one = format!(
        "GET /v1/jobs/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        admin.token
    );
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr(&c)).await.expect("connect");
        s.write_all(one.repeat(16).as_bytes()).await.expect("write");
        stalled.push(s);
    }
    let refused = eventually("a large read to be refused", DEADLINE, || {
        let client = admin.client.clone();
        let id = id.clone();
        async move { client.job(&id).await.err() }
    })
    .await;
    assert_eq!(refused.code(), Some(ErrorCode::RateLimited), "{refused}");
    // The same on the wire: 429 with Retry-After, in the envelope.
    let answer = drover_tests::raw::raw(
        &c,
        format!(
            "GET /v1/jobs?limit=5 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            admin.token
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(status_and_code(&answer), (429, "RATE_LIMITED".into()));
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 1\r\n")
    );
    // Another member is served, and so are this one's small answers.
    let theirs = other.client.job(&id).await.expect("another member's read");
    assert_eq!(theirs.command[1].len(), COMMAND_BYTES + 1);
    admin.client.me().await.expect("a small answer");
    // Once the stalled connections close, its turns come back.
    drop(stalled);
    eventually("large reads to be served again", DEADLINE, || {
        let client = admin.client.clone();
        let id = id.clone();
        async move { client.job(&id).await.ok() }
    })
    .await;
}

#[tokio::test]
async fn job_lists_end_at_a_byte_budget_and_their_pages_lose_nothing() {
    let c = start(&[]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let _runner = runner(&c, &admin).await;
    // 1,000 jobs with a 2,000-byte script: their previews take about 900 KB.
    let script = |i: usize| script_job("self:ws", &format!("# {i:04}\n{}", "y".repeat(2000)));
    let mut ids = submit_all(&admin, (0..1000).map(script).collect(), 16).await;
    ids.sort();

    let url = |q: &str| format!("{}/v1/jobs?{q}", c.url);
    let http = reqwest::Client::new();
    let get = |q: String| {
        let http = http.clone();
        let token = admin.token.clone();
        async move {
            let resp = http.get(q).bearer_auth(token).send().await.expect("GET");
            let status = resp.status().as_u16();
            (status, resp.bytes().await.expect("body"))
        }
    };
    let (status, first) = get(url("limit=1000")).await;
    assert_eq!(status, 200);
    assert!(first.len() <= PAGE_BYTES, "{} bytes", first.len());
    let page: JobList = serde_json::from_slice(&first).expect("a JobList");
    assert!(
        page.jobs.len() < 1000 && page.jobs.len() > 100,
        "{}",
        page.jobs.len()
    );
    assert!(page.next_before.is_some());
    for job in &page.jobs {
        let shown = job.script.as_deref().expect("a script");
        assert!(job.truncated && shown.len() <= PREVIEW_BYTES && shown.starts_with("# "));
    }

    // Page by page: every job once (in submit order: concurrent submits'
    // `createdAt` may differ from it by a millisecond).
    let (mut seen, mut before) = (Vec::new(), None::<String>);
    loop {
        let page = admin
            .client
            .jobs_page(None, 1000, before.as_deref())
            .await
            .expect("page");
        seen.extend(page.jobs.into_iter().map(|j| j.id));
        match page.next_before {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    let mut listed = seen;
    listed.sort();
    assert_eq!(listed, ids);
    // The client, the CLI and the desktop follow the pages themselves.
    assert_eq!(
        admin
            .client
            .jobs(None, 1000)
            .await
            .expect("jobs")
            .jobs
            .len(),
        1000
    );
    let cli = stdout_ok(&c.drover(&admin.token, &["jobs", "list", "--limit", "1000", "--json"]));
    let cli: JobList = serde_json::from_str(&cli).expect("JSON");
    assert_eq!(cli.jobs.len(), 1000);
    let small = admin.client.jobs(None, 10).await.expect("jobs");
    assert_eq!(small.jobs.len(), 10);
    assert!(small.next_before.is_some());

    // The whole script stays available.
    let whole = admin.client.job(&ids[0]).await.expect("job");
    assert!(!whole.truncated && whole.script.expect("script").len() > 2000);
    // A cursor that no page gave is refused.
    for bad in ["before=abc", "before=0", "before=-5"] {
        let (status, body) = get(url(bad)).await;
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("BAD_REQUEST"))
        );
    }
    // Jobs submitted before summaries were stored: their spec's start.
    c.execute_sql("UPDATE jobs SET summary = NULL").await;
    let (_, again) = get(url("limit=1000")).await;
    let again: JobList = serde_json::from_slice(&again).expect("a JobList");
    assert!(again.jobs.len() > 100);
    for job in &again.jobs {
        let shown = job.script.as_deref().expect("a script");
        assert!(job.truncated && shown.len() <= PREVIEW_BYTES && shown.starts_with("# "));
    }
}

#[tokio::test]
async fn a_log_larger_than_a_batch_comes_whole_and_in_order() {
    let c = start(&[]).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = runner(&c, &admin).await;
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .expect("submit");
    let lease = runner
        .lease(Duration::from_secs(5))
        .await
        .expect("lease")
        .expect("a lease");
    // Six chunks of 600,000 characters: a batch is about 256 K of them.
    let mut expected = String::new();
    for seq in 0..6u8 {
        let data = char::from(b'a' + seq).to_string().repeat(600_000);
        let chunk = wire::LogChunk {
            seq: u64::from(seq),
            stream: wire::LogStream::Stdout,
            data: data.clone(),
        };
        runner.log(&lease.lease_id, &chunk).await.expect("log");
        expected.push_str(&data);
    }
    runner
        .complete(&lease.lease_id, &succeeded())
        .await
        .expect("complete");
    let log = admin.client.logs(&job.id).await.expect("logs");
    assert!(
        log == expected,
        "{} bytes, not {}",
        log.len(),
        expected.len()
    );
    let mut followed = Vec::new();
    admin
        .client
        .follow_logs(&job.id, |b| followed.extend_from_slice(b))
        .await
        .expect("follow");
    assert!(followed == expected.as_bytes());
}
