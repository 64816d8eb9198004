//! (Over 500 lines: one fixture shared by cases that each need a real database and several requests in one batch.)
//!
//! The store against a real database, below the HTTP layer: batches of
//! several requests (the HTTP path only forms them under load, so their
//! rules are pinned here) and the background WAL checkpoint.
//!
//! On SQLite by default; with `DROVER_TEST_DATABASE=postgres` each test gets
//! a fresh database on the server `DROVER_TEST_PG_URL` names (tests/run.sh
//! sets both, as for the end-to-end tests).

use drover_wire::{self as wire, JobState, Outcome};

use super::error::Kind;

use super::{
    Backend, CompleteNextRequest, CompleteRequest, Durability, LeaseAttempt, LeaseRequest, Member,
    NewJob, Owner, Store, SubmitRequest,
};
use crate::ids::{RunnerId, RuntimeId};
use crate::wake::Wake;

const TTL: u64 = 20_000;

struct Fixture {
    store: Store,
    admin: Member,
    db: TestDatabase,
    /// Each runner's pool.
    pools: std::sync::Mutex<std::collections::HashMap<RunnerId, RuntimeId>>,
}

/// A test's own database: a SQLite file in a scratch directory, or a fresh
/// PostgreSQL database; removed when the test ends.
pub(super) enum TestDatabase {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

/// `DROVER_TEST_DATABASE=postgres`: the store tests run on PostgreSQL.
pub(super) fn on_postgres() -> bool {
    match std::env::var("DROVER_TEST_DATABASE").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("DROVER_TEST_DATABASE={other:?}: use sqlite or postgres"),
    }
}

/// A test that needs one backend has a name ending in `_on_postgres` or
/// `_on_sqlite`, and tests/run.sh runs it only in that backend's pass.
/// Run anywhere else it fails, rather than passing without looking.
pub(super) fn needs(postgres: bool) {
    let pass = std::env::var("DROVER_TEST_DATABASE").unwrap_or_default();
    assert_eq!(
        on_postgres(),
        postgres,
        "this test needs {}: DROVER_TEST_DATABASE={pass:?} (tests/run.sh runs it in that pass)",
        if postgres { "PostgreSQL" } else { "SQLite" }
    );
}

/// The PostgreSQL server's admin URL; loud when missing.
pub(super) fn postgres_admin_url() -> String {
    std::env::var("DROVER_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "DROVER_TEST_DATABASE=postgres but DROVER_TEST_PG_URL is not set (tests/run.sh sets it)"
        )
    })
}

/// Runs one statement on the admin connection, on a thread of its own (so
/// `Drop` can use it).
pub(super) fn postgres_admin(sql: String) {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async move {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(&postgres_admin_url())
                    .await
                    .unwrap_or_else(|e| panic!("cannot reach the test PostgreSQL: {e}"));
                sqlx::Executor::execute(&mut conn, sql.as_str())
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            })
    })
    .join()
    .expect("admin statement");
}

impl TestDatabase {
    /// A new database for test `name`, and its URL.
    pub(super) fn create(name: &str) -> (Self, String) {
        if on_postgres() {
            let mut b = [0u8; 6];
            getrandom::fill(&mut b).expect("random");
            // `drover_t_`: tests/run.sh drops leftovers of interrupted runs.
            let db = format!(
                "drover_t_{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            );
            postgres_admin(format!("CREATE DATABASE {db}"));
            let admin = postgres_admin_url();
            let base = admin.rsplit_once('/').expect("admin URL with a database").0;
            let url = format!("{base}/{db}");
            (Self::Postgres(db), url)
        } else {
            let dir =
                std::env::temp_dir().join(format!("drover-store-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let url = format!("sqlite://{}", dir.join("db.sqlite").display());
            (Self::Sqlite(dir), url)
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        match self {
            Self::Sqlite(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Self::Postgres(db) => {
                postgres_admin(format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            }
        }
    }
}

async fn fixture(name: &str) -> Fixture {
    let (db, url) = TestDatabase::create(name);
    let store = Store::open(&url, Durability::Normal).await.unwrap();
    let (admin, _) = store
        .bootstrap_workspace("acme", "a@acme.test", 1)
        .await
        .unwrap();
    Fixture {
        store,
        admin,
        db,
        pools: Default::default(),
    }
}

impl Fixture {
    /// Expires the leases whose TTL ran out by `now`. On PostgreSQL lease
    /// times follow the database's clock (see `Dialect::now`), which the
    /// test cannot set: there every live lease is made to have run out by
    /// `now` in the coordinator's clock first.
    async fn expire_leases(&self, now: i64) -> Vec<(crate::ids::JobId, Option<Wake>)> {
        if self.store.backend() == Backend::Postgres {
            sqlx::query(
                "UPDATE jobs SET lease_expires_at = lease_expires_at - $1 WHERE state IN ('leased', 'running')",
            )
            .bind(3_600_000i64)
            .execute(&self.store.writer)
            .await
            .unwrap();
        }
        self.store.expire_leases(now).await.unwrap()
    }

    async fn runner(&self, name: &str, labels: &[&str]) -> RunnerId {
        let req = wire::PairRunner {
            name: Some(name.into()),
            runtime: None,
            labels: labels.iter().map(|l| l.to_string()).collect(),
        };
        let paired = self
            .store
            .pair_runner(&self.admin, &Owner::Workspace, &req.into(), 1)
            .await
            .unwrap();
        let id = paired.runner.id.clone();
        // Room to ask several times in one batch (one request per slot).
        self.store
            .runner_hello(&id, &[], 8, false, 1)
            .await
            .unwrap();
        let pool = paired.runner.runtime_id.clone();
        self.pools.lock().unwrap().insert(id.clone(), pool);
        id
    }

    async fn submit_request(&self, body: serde_json::Value) -> SubmitRequest {
        let job = NewJob::validate(
            serde_json::from_value::<wire::SubmitJob>(body)
                .unwrap()
                .into(),
        )
        .unwrap();
        let placement = self
            .store
            .place(&self.admin, &job.parsed_ref, &job.requires)
            .await
            .unwrap();
        SubmitRequest {
            member: self.admin.clone(),
            job,
            placement,
            now: 2,
            key: None,
        }
    }

    async fn submit(&self, requires: &[&str]) -> String {
        self.submit_to(
            serde_json::json!({"runtime": "self:ws", "script": "true", "requires": requires}),
        )
        .await
    }

    /// Submits one job (a batch of one); its id.
    async fn submit_to(&self, body: serde_json::Value) -> String {
        let req = self.submit_request(body).await;
        self.store
            .submit_batch(&[req])
            .await
            .unwrap()
            .pop()
            .unwrap()
            .unwrap()
            .job
            .id
            .to_string()
    }

    /// A lease request of `runner`, for its pool.
    fn lease_request(&self, runner: &RunnerId) -> LeaseRequest {
        LeaseRequest {
            runner: runner.clone(),
            runtime: self.pools.lock().unwrap()[runner].clone(),
            now: 3,
            ttl_ms: TTL,
        }
    }

    async fn lease(&self, runners: &[&RunnerId]) -> Vec<LeaseAttempt> {
        let reqs: Vec<LeaseRequest> = runners.iter().map(|r| self.lease_request(r)).collect();
        let out = self.store.lease_batch(&reqs).await.unwrap();
        out.into_iter().map(|r| r.unwrap()).collect()
    }
}

fn leased(a: &LeaseAttempt) -> (&str, &str, bool) {
    match a {
        LeaseAttempt::Leased { lease, next } => {
            (lease.job.id.as_str(), lease.id.as_str(), next.is_some())
        }
        other => panic!("expected a lease, got {other:?}"),
    }
}

#[tokio::test]
async fn one_batch_serves_requests_in_order_by_capability_and_never_twice() {
    let f = fixture("order").await;
    let plain = f.runner("plain", &[]).await;
    let gpu = f.runner("gpu", &["gpu"]).await;
    let gone = f.runner("gone", &[]).await;
    f.store
        .revoke_runner(&f.admin, &Owner::Workspace, gone.as_str(), 2)
        .await
        .unwrap();
    let j1 = f.submit(&["gpu"]).await;
    let j2 = f.submit(&[]).await;
    let j3 = f.submit(&[]).await;

    // `plain` asks three times (three slots); the head of the queue needs a GPU.
    let out = f.lease(&[&plain, &gpu, &gone, &plain, &plain]).await;
    assert_eq!(
        leased(&out[0]).0,
        j2,
        "the first request takes the head it can run"
    );
    assert_eq!(leased(&out[1]).0, j1, "the GPU job goes to the GPU runner");
    assert!(matches!(out[2], LeaseAttempt::Revoked), "{:?}", out[2]);
    assert_eq!(leased(&out[3]).0, j3);
    assert!(matches!(out[4], LeaseAttempt::Empty), "{:?}", out[4]);
    let leases: std::collections::HashSet<&str> = [&out[0], &out[1], &out[3]]
        .iter()
        .map(|a| leased(a).1)
        .collect();
    assert_eq!(leases.len(), 3, "every lease is its own");
    assert!(
        out.iter()
            .filter_map(|a| match a {
                LeaseAttempt::Leased { next, .. } => Some(next),
                _ => None,
            })
            .all(Option::is_none),
        "nothing waits behind, so no one is woken"
    );
    for job in [&j1, &j2, &j3] {
        assert_eq!(f.store.job_state(job).await.unwrap(), JobState::Leased);
    }
    // Nothing is left to take, by anyone.
    assert!(matches!(
        f.lease(&[&plain, &gpu]).await[..],
        [LeaseAttempt::Empty, LeaseAttempt::Empty]
    ));
}

#[tokio::test]
async fn jobs_waiting_behind_a_batch_wake_one_waiter_each() {
    let f = fixture("wake").await;
    let a = f.runner("a", &[]).await;
    let b = f.runner("b", &[]).await;
    for _ in 0..3 {
        f.submit(&[]).await;
    }
    let out = f.lease(&[&a, &b]).await;
    // Three queued, two taken: one job behind, so exactly one wake.
    assert_eq!(out.iter().filter(|o| leased(o).2).count(), 1);
    match &out[0] {
        LeaseAttempt::Leased {
            next: Some(Wake::Pool { requires, .. }),
            ..
        } => assert!(requires.is_empty()),
        other => panic!("the first lease wakes for the job behind: {other:?}"),
    }
}

#[tokio::test]
async fn pinned_jobs_come_first_within_a_batch() {
    let f = fixture("pinned").await;
    let a = f.runner("a", &[]).await;
    let b = f.runner("b", &[]).await;
    let pool_job = f.submit(&[]).await;
    let pinned = f
        .submit_to(serde_json::json!({"runtime": format!("self:ws:{b}"), "script": "true"}))
        .await;
    let out = f.lease(&[&a, &b]).await;
    assert_eq!(leased(&out[0]).0, pool_job);
    assert_eq!(leased(&out[1]).0, pinned, "b's pinned job, not the pool's");
}

#[tokio::test]
async fn completes_in_one_batch_finish_once_bill_once_and_refuse_strangers() {
    let f = fixture("complete").await;
    let a = f.runner("a", &[]).await;
    let b = f.runner("b", &[]).await;
    let job = f.submit(&[]).await;
    let out = f.lease(&[&a]).await;
    let (_, lease, _) = leased(&out[0]);
    let done = |outcome| wire::Complete {
        outcome,
        exit_code: Some(0),
        error: None,
        next: None,
    };
    let req = |runner: &RunnerId, lease: &str, outcome| CompleteRequest {
        runner: runner.clone(),
        lease: lease.to_owned(),
        done: (&done(outcome)).into(),
        now: 1_003,
    };
    let results = f
        .store
        .complete_batch(&[
            req(&a, lease, Outcome::Succeeded),
            req(&a, lease, Outcome::Failed),
            req(&b, lease, Outcome::Succeeded),
            req(&a, "ls_nope", Outcome::Succeeded),
        ])
        .await
        .unwrap();
    let first = results[0].as_ref().unwrap();
    assert_eq!((first.state, first.repeated), (JobState::Succeeded, false));
    let again = results[1].as_ref().unwrap();
    assert_eq!(
        (again.state, again.repeated),
        (JobState::Succeeded, true),
        "a repeat changes nothing"
    );
    for stranger in &results[2..] {
        assert_eq!(stranger.as_ref().unwrap_err().kind(), Some(Kind::LeaseLost));
    }
    assert_eq!(f.store.job_state(&job).await.unwrap(), JobState::Succeeded);
    let usage = f.store.usage(&f.admin, 1_003).await.unwrap();
    assert_eq!(
        (usage.jobs_charged, usage.charged_ms),
        (1, 1_000),
        "billed once, for the time leased"
    );
}

/// A complete with its runner's next lease, as a runner asks after each job
/// (on PostgreSQL one statement): the slot the finished job frees is taken
/// in the same write; each job is finished and billed once; a repeat, a
/// stranger's complete and a lost lease lease nothing; a job the statement
/// leaves to `drover_lease` (it requires a capability) is leased all the
/// same; with nothing queued the answer is no job.
#[tokio::test]
async fn a_complete_leases_the_runners_next_job_in_the_same_write() {
    let f = fixture("complete-next").await;
    let a = f.runner("a", &["gpu"]).await;
    let b = f.runner("b", &[]).await;
    let c = f.runner("c", &[]).await;
    // One slot each: the next lease fits only once the complete counts.
    for r in [&a, &b] {
        f.store.runner_hello(r, &[], 1, false, 2).await.unwrap();
    }
    let (first_a, first_b) = (f.submit(&[]).await, f.submit(&[]).await);
    let out = f.lease(&[&a, &b]).await;
    let ((ja, la, _), (jb, lb, _)) = (leased(&out[0]), leased(&out[1]));
    assert_eq!((ja, jb), (first_a.as_str(), first_b.as_str()));
    let (next_a, next_b, last) = (
        f.submit(&[]).await,
        f.submit(&[]).await,
        f.submit(&[]).await,
    );
    let req = |runner: &RunnerId, lease: &str| CompleteNextRequest {
        complete: succeeded(runner, lease, 1_003),
        lease: f.lease_request(runner),
    };
    let out = f
        .store
        .complete_next_batch(&[
            req(&a, la),
            req(&a, la),
            req(&c, lb),
            req(&b, lb),
            req(&b, "ls_nope"),
        ])
        .await
        .unwrap();
    for k in [0, 3] {
        let done = &out[k].as_ref().unwrap().completion;
        assert_eq!((done.state, done.repeated), (JobState::Succeeded, false));
    }
    let (got_a, la) = served_by(&out[0]);
    let (got_b, lb) = served_by(&out[3]);
    assert_eq!(
        (got_a, got_b),
        (next_a.clone(), next_b.clone()),
        "in order, FIFO"
    );
    let repeat = out[1].as_ref().unwrap();
    assert!(
        repeat.completion.repeated && repeat.next.is_none(),
        "{repeat:?}"
    );
    for lost in [&out[2], &out[4]] {
        assert_eq!(lost.as_ref().unwrap_err().kind(), Some(Kind::LeaseLost));
    }
    for job in [&first_a, &first_b] {
        assert_eq!(f.store.job_state(job).await.unwrap(), JobState::Succeeded);
    }
    for job in [&next_a, &next_b] {
        assert_eq!(f.store.job_state(job).await.unwrap(), JobState::Leased);
    }
    let usage = f.store.usage(&f.admin, 1_003).await.unwrap();
    assert_eq!(usage.jobs_charged, 2, "billed once each");

    // At the head of the queue, a job that requires a capability a has.
    let gpu = f
        .submit_to(serde_json::json!({
            "runtime": "self:ws", "script": "true", "requires": ["gpu"], "priority": 5
        }))
        .await;
    let out = f.store.complete_next_batch(&[req(&a, &la)]).await.unwrap();
    let (got, la) = served_by(&out[0]);
    assert_eq!(got, gpu);
    // A job pinned to b comes before the pool's (through the `again` path).
    let pinned = f
        .submit_to(serde_json::json!({"runtime": format!("self:ws:{b}"), "script": "true"}))
        .await;
    let out = f.store.complete_next_batch(&[req(&b, &lb)]).await.unwrap();
    let (got, lb) = served_by(&out[0]);
    assert_eq!(got, pinned);
    let out = f.store.complete_next_batch(&[req(&b, &lb)]).await.unwrap();
    assert_eq!(served_by(&out[0]).0, last);
    // Nothing left: no job, and the slot is free.
    let out = f.store.complete_next_batch(&[req(&a, &la)]).await.unwrap();
    let done = out[0].as_ref().unwrap();
    assert!(
        matches!(done.next, Some(Ok(LeaseAttempt::Empty))),
        "{done:?}"
    );
    assert_eq!(f.store.job_state(&gpu).await.unwrap(), JobState::Succeeded);

    // Alone (on PostgreSQL one statement), with a job queued: a repeat, a
    // stranger's complete and an unknown lease each lease nothing.
    let waiting = f.submit(&[]).await;
    let out = f.store.complete_next_batch(&[req(&a, &la)]).await.unwrap();
    let repeat = out[0].as_ref().unwrap();
    assert!(
        repeat.completion.repeated && repeat.next.is_none(),
        "{repeat:?}"
    );
    for (runner, lease) in [(&b, la.as_str()), (&a, "ls_nope")] {
        let out = f.store.complete_next_batch(&[req(runner, lease)]).await;
        let lost = &out.unwrap()[0];
        assert_eq!(lost.as_ref().unwrap_err().kind(), Some(Kind::LeaseLost));
    }
    assert_eq!(f.store.job_state(&waiting).await.unwrap(), JobState::Queued);
    let usage = f.store.usage(&f.admin, 1_003).await.unwrap();
    assert_eq!(usage.jobs_charged, 6);
}

/// `runner`'s complete of `lease` at `now`: succeeded, exit code 0.
fn succeeded(runner: &RunnerId, lease: &str, now: i64) -> CompleteRequest {
    CompleteRequest {
        runner: runner.clone(),
        lease: lease.to_owned(),
        done: (&wire::Complete {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            error: None,
            next: None,
        })
            .into(),
        now,
    }
}

/// The job and lease a complete's next lease took.
fn served_by(out: &super::error::Result<super::CompletedNext>) -> (String, String) {
    match out
        .as_ref()
        .unwrap()
        .next
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap()
    {
        LeaseAttempt::Leased { lease, .. } => (lease.job.id.to_string(), lease.id.to_string()),
        other => panic!("no lease: {other:?}"),
    }
}

/// A workspace's spend (what its budget is checked against) is its charged
/// usage, each line added once however it was written: a complete with its
/// next lease, a batch of completes with a repeat in it, an attempt lost
/// while running.
#[tokio::test]
async fn spend_adds_every_charged_line_once() {
    let f = fixture("spend").await;
    let (a, b) = (f.runner("a", &[]).await, f.runner("b", &[]).await);
    for _ in 0..3 {
        f.submit(&[]).await;
    }
    let out = f.lease(&[&a, &b]).await;
    let ((_, la, _), (_, lb, _)) = (leased(&out[0]), leased(&out[1]));
    f.store.heartbeat(&b, lb, 4, TTL).await.unwrap();
    let complete = |lease: &str, now| succeeded(&a, lease, now);
    let out = f
        .store
        .complete_next_batch(&[CompleteNextRequest {
            complete: complete(la, 1_003),
            lease: f.lease_request(&a),
        }])
        .await
        .unwrap();
    let (_, next) = served_by(&out[0]);
    let out = f
        .store
        .complete_batch(&[complete(&next, 3_003), complete(&next, 3_003)])
        .await
        .unwrap();
    assert!(out[1].as_ref().unwrap().repeated);
    f.expire_leases(4 + TTL as i64 + 500).await;

    let (lines, charged): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(SUM(runner_ms) AS BIGINT) FROM usage WHERE charged = 1",
    )
    .fetch_one(&f.store.reader)
    .await
    .unwrap();
    let spent: i64 =
        sqlx::query_scalar("SELECT CAST(SUM(spent_ms) AS BIGINT) FROM workspace_spend")
            .fetch_one(&f.store.reader)
            .await
            .unwrap();
    // 1,000 + 2,000 ms completed, and b's attempt until it was lost (on
    // PostgreSQL by the database's clock).
    assert_eq!(lines, 3);
    assert!(charged > 3_000 + TTL as i64, "{charged}");
    assert_eq!(spent, charged, "spend is the charged usage");
}

#[tokio::test]
async fn one_bad_submit_does_not_fail_its_batch_and_order_is_kept() {
    let f = fixture("submit").await;
    let a = f.runner("a", &[]).await;
    let gone = f.runner("gone", &[]).await;
    let first = f
        .submit_request(serde_json::json!({"runtime": "self:ws", "script": "true"}))
        .await;
    let pinned = f
        .submit_request(serde_json::json!({"runtime": format!("self:ws:{gone}"), "script": "true"}))
        .await;
    let last = f
        .submit_request(serde_json::json!({"runtime": "self:ws", "script": "true"}))
        .await;
    // Revoked after placement, before the batch is written.
    f.store
        .revoke_runner(&f.admin, &Owner::Workspace, gone.as_str(), 2)
        .await
        .unwrap();
    let out = f.store.submit_batch(&[first, pinned, last]).await.unwrap();
    let (j1, j3) = (
        out[0].as_ref().unwrap().job.id.to_string(),
        out[2].as_ref().unwrap().job.id.to_string(),
    );
    assert_eq!(out[1].as_ref().unwrap_err().kind(), Some(Kind::NotFound));
    assert_eq!(out[0].as_ref().unwrap().job.state, JobState::Queued);
    let leases = f.lease(&[&a]).await;
    assert_eq!(leased(&leases[0]).0, j1, "FIFO across the batch");
    assert_eq!(leased(&f.lease(&[&a]).await[0]).0, j3);
}

#[tokio::test]
async fn the_wal_is_checkpointed_into_the_database_in_the_background_on_sqlite() {
    // SQLite's write-ahead log; PostgreSQL checkpoints itself.
    needs(false);
    let f = fixture("checkpoint").await;
    let TestDatabase::Sqlite(dir) = &f.db else {
        unreachable!("a SQLite fixture");
    };
    let db = dir.join("db.sqlite");
    let size = || std::fs::metadata(&db).unwrap().len();
    // Automatic checkpoints are off, so everything so far is in the WAL
    // until the background task copies it.
    f.runner("r", &[]).await;
    let before = size();
    for _ in 0..20 {
        let mut reqs = Vec::new();
        for _ in 0..64 {
            reqs.push(
                f.submit_request(serde_json::json!({"runtime": "self:ws", "script": "true"}))
                    .await,
            );
        }
        for r in f.store.submit_batch(&reqs).await.unwrap() {
            r.unwrap();
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while size() <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint within 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn env_left_in_plain_text_by_an_earlier_version_is_sealed_and_still_leased() {
    let f = fixture("plain-env").await;
    f.store.set_secrets(crate::secrets::KeyRing::generate().0);
    let runner = f.runner("plain", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "true", "env": {"K": "v-plain"}});
    let sealed = f.submit_to(body.clone()).await;
    let (legacy, unconverted) = (f.submit_to(body.clone()).await, f.submit_to(body).await);
    // As an earlier version stored it: env in the spec, nothing sealed.
    let make_plain = |job: String| {
        let writer = f.store.writer.clone();
        let backend = f.store.backend();
        async move {
            sqlx::query(match backend {
                Backend::Sqlite => "UPDATE jobs SET spec = json_set(spec, '$.env', json('{\"K\":\"v-plain\"}')), env_sealed = NULL WHERE id = $1",
                Backend::Postgres => "UPDATE jobs SET spec = CAST(CAST(spec AS jsonb) || '{\"env\":{\"K\":\"v-plain\"}}' AS TEXT), env_sealed = NULL WHERE id = $1",
            })
            .bind(job)
            .execute(&writer)
            .await
            .unwrap();
        }
    };
    let spec_of = |job: String| {
        let reader = f.store.reader.clone();
        async move {
            sqlx::query_as::<_, (String, Option<String>)>(
                "SELECT spec, env_sealed FROM jobs WHERE id = $1",
            )
            .bind(job)
            .fetch_one(&reader)
            .await
            .unwrap()
        }
    };
    let (spec, env_sealed) = spec_of(sealed.clone()).await;
    assert!(!spec.contains("v-plain") && !spec.contains("env"), "{spec}");
    assert!(env_sealed.is_some_and(|s| !s.contains("v-plain")));

    make_plain(legacy.clone()).await;
    assert_eq!(f.store.seal_plain_env().await.unwrap(), 1);
    assert_eq!(f.store.seal_plain_env().await.unwrap(), 0, "once");
    let (spec, env_sealed) = spec_of(legacy.clone()).await;
    assert!(!spec.contains("v-plain") && !spec.contains("env"), "{spec}");
    assert!(env_sealed.is_some_and(|s| s.starts_with("v1:")));

    // A row still in plain text (say, written by an older replica) leases too.
    make_plain(unconverted.clone()).await;
    for job in [sealed, legacy, unconverted] {
        let out = f.lease(&[&runner]).await;
        let LeaseAttempt::Leased { lease, .. } = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(lease.job.id.as_str(), job);
        assert_eq!(lease.job.env.get("K").map(String::as_str), Some("v-plain"));
    }
}

#[tokio::test]
async fn a_job_lost_or_cancelled_at_expiry_keeps_no_env() {
    let f = fixture("expiry-env").await;
    f.store.set_secrets(crate::secrets::KeyRing::generate().0);
    let runner = f.runner("plain", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "true", "maxAttempts": 1, "env": {"K": "v"}});
    let (lost, cancelled) = (f.submit_to(body.clone()).await, f.submit_to(body).await);
    let sealed = |job: String| {
        let reader = f.store.reader.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>("SELECT env_sealed FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(&reader)
                .await
                .unwrap()
        }
    };
    for _ in 0..2 {
        let out = f.lease(&[&runner]).await;
        let (_, lease, _) = leased(&out[0]);
        f.store.heartbeat(&runner, lease, 4, TTL).await.unwrap();
    }
    sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = $1")
        .bind(&cancelled)
        .execute(&f.store.writer)
        .await
        .unwrap();
    assert!(sealed(lost.clone()).await.is_some());
    let expired = f.expire_leases(4 + TTL as i64 + 1).await;
    assert_eq!(expired.len(), 2);
    for (job, state) in [(lost, JobState::Lost), (cancelled, JobState::Cancelled)] {
        assert_eq!(f.store.job_state(&job).await.unwrap(), state);
        assert_eq!(sealed(job).await, None, "{state:?}");
    }
}

#[tokio::test]
async fn a_runner_leases_no_more_than_its_slots_within_a_batch() {
    let f = fixture("slots").await;
    let one = f.runner("one", &[]).await;
    f.store.runner_hello(&one, &[], 1, false, 2).await.unwrap();
    for _ in 0..3 {
        f.submit(&[]).await;
    }
    let req = f.lease_request(&one);
    let out = f
        .store
        .lease_batch(&[req.clone(), req.clone()])
        .await
        .unwrap();
    assert!(matches!(out[0], Ok(LeaseAttempt::Leased { .. })));
    assert_eq!(
        out[1].as_ref().unwrap_err().kind(),
        Some(Kind::LeaseLimit),
        "the second request of a one-slot runner"
    );
    // Holding its one lease, it gets no other, in a later batch either.
    let later = f.store.lease_batch(&[req]).await.unwrap();
    assert_eq!(
        later[0].as_ref().unwrap_err().kind(),
        Some(Kind::LeaseLimit)
    );
}

/// More expired leases than one chunk, with every ending: out of attempts
/// (`lost`), cancelled, re-queued after running (keeps its attempt), and
/// never started (gives it back). Re-queued jobs go before new ones.
#[tokio::test]
async fn expiry_releases_more_than_a_chunk_with_every_ending() {
    let f = fixture("expiry").await;
    let a = f.runner("a", &[]).await;
    let b = f.runner("b", &[]).await;
    for r in [&a, &b] {
        f.store.runner_hello(r, &[], 256, false, 2).await.unwrap();
    }
    let mut ids = vec![
        f.submit_to(serde_json::json!({"runtime": "self:ws", "script": "true", "maxAttempts": 1}))
            .await,
    ];
    for _ in 0..299 {
        ids.push(f.submit(&[]).await);
    }
    let mut asks = vec![&a; 256];
    asks.extend(vec![&b; 44]);
    let out = f.lease(&asks).await;
    let lease_of: std::collections::HashMap<&str, &str> = out
        .iter()
        .map(|o| {
            let (job, lease, _) = leased(o);
            (job, lease)
        })
        .collect();
    assert_eq!(lease_of.len(), 300);
    for job in &ids[..3] {
        f.store
            .heartbeat(&a, lease_of[job.as_str()], 4, TTL)
            .await
            .unwrap();
    }
    f.store.cancel_job(&f.admin, &ids[3], 4).await.unwrap();

    let expired = f.expire_leases(TTL as i64 + 100).await;
    assert_eq!(expired.len(), 300);
    assert_eq!(
        expired.iter().filter(|(_, wake)| wake.is_some()).count(),
        298
    );
    let job = |id: &str| {
        let (store, admin) = (f.store.clone(), f.admin.clone());
        let id = id.to_owned();
        async move { store.get_job(&admin, &id).await.unwrap() }
    };
    let lost = job(&ids[0]).await;
    assert_eq!((lost.state, lost.attempt), (JobState::Lost, 1));
    let cancelled = job(&ids[3]).await;
    assert_eq!(cancelled.state, JobState::Cancelled);
    for id in &ids[1..3] {
        let ran = job(id).await;
        assert_eq!((ran.state, ran.attempt), (JobState::Queued, 1), "ran once");
    }
    for id in &ids[4..] {
        let never = job(id).await;
        assert_eq!(
            (never.state, never.attempt),
            (JobState::Queued, 0),
            "never ran"
        );
    }
    assert!(f.expire_leases(TTL as i64 + 200).await.is_empty());

    // A new job queues behind the re-queued ones, which keep their order.
    let new = f.submit(&[]).await;
    let next = f.lease(&[&a]).await;
    assert_ne!(leased(&next[0]).0, new);
    if f.store.backend() == Backend::Sqlite {
        // One `now` for every chunk: the re-queued keep their submit order.
        // (On PostgreSQL each chunk is released at the database's time, a
        // later chunk ahead of an earlier one.)
        assert_eq!(leased(&next[0]).0, ids[1]);
    }
}

/// A job whose env does not open (a wrong key under a known id) fails when
/// leased, instead of being leased, refused and re-queued every TTL.
#[tokio::test]
async fn a_job_whose_env_does_not_open_fails_instead_of_cycling() {
    let f = fixture("unreadable-env").await;
    f.store.set_secrets(crate::secrets::KeyRing::generate().0);
    let runner = f.runner("plain", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "true", "env": {"K": "v"}});
    let job = f.submit_to(body).await;
    // Same key id, other bytes: what a wrong key would have sealed.
    sqlx::query(
        "UPDATE jobs SET env_sealed = substr(env_sealed, 1, length(env_sealed) - 8) || 'AAAAAAAA' WHERE id = $1",
    )
    .bind(&job)
    .execute(&f.store.writer)
    .await
    .unwrap();
    let out = f.lease(&[&runner]).await;
    assert!(matches!(out[0], LeaseAttempt::Empty), "{out:?}");
    assert_eq!(f.store.job_state(&job).await.unwrap(), JobState::Failed);
    let out = f.lease(&[&runner]).await;
    assert!(matches!(out[0], LeaseAttempt::Empty), "not leased again");
}

/// An in-memory database would be a different one on each connection (the
/// batch writer's, the readers'): it is refused with a clear error.
#[tokio::test]
async fn an_in_memory_sqlite_database_is_refused_clearly() {
    for url in ["sqlite::memory:", "sqlite://x.db?mode=memory"] {
        match Store::open(url, Durability::Full).await {
            Err(e) => {
                assert_eq!(e.kind(), Some(Kind::Invalid), "{url}: {e}");
                assert!(e.to_string().contains("in-memory"), "{url}: {e}");
            }
            Ok(_) => panic!("{url} opened"),
        }
    }
}

const TEXT_ARRAY_ITEMS: [&str; 6] = [
    "plain",
    "with \"quotes\"",
    "back\\slash",
    "a,b {c}",
    "",
    "NULL",
];

#[test]
fn text_array_literals_quote_what_postgresql_reads_specially() {
    assert_eq!(super::text_array(["a\"b", "c\\d"]), r#"{"a\"b","c\\d"}"#);
}

#[tokio::test]
async fn text_array_literals_read_back_as_the_same_strings_on_postgres() {
    needs(true);
    let items = TEXT_ARRAY_ITEMS;
    let f = fixture("text-array").await;
    let back: String = sqlx::query_scalar("SELECT CAST(array_to_json(CAST($1 AS TEXT[])) AS TEXT)")
        .bind(super::text_array(items))
        .fetch_one(&f.store.writer)
        .await
        .unwrap();
    let back: Vec<String> = serde_json::from_str(&back).unwrap();
    assert_eq!(back, items);
}

/// PostgreSQL: hot writes take the connection a hot write gave back last
/// (`backend::hot`), so a steady stream of them stays on one backend; two at
/// once take two; released (the store closing), none is kept, and the pool
/// closes without waiting on one.
#[tokio::test]
async fn hot_writes_take_the_connection_given_back_last_on_postgres() {
    needs(true);
    let f = fixture("hot-connections").await;
    // A hot connection, and the backend behind it.
    async fn take(store: &Store) -> (super::backend::hot::Hot, i32) {
        let mut conn = store.engine.hot(store).await.unwrap();
        let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        (conn, pid)
    }
    let one = f.runner("one", &[]).await;
    f.store.runner_hello(&one, &[], 1, false, 2).await.unwrap();
    f.submit(&[]).await;
    leased(&f.lease(&[&one]).await[0]);
    // The lease's connection is the one on top: the backend that ran it.
    let leasers: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()
             AND query LIKE '%A lease batch%' AND pid <> pg_backend_pid()",
    )
    .fetch_all(&f.store.reader)
    .await
    .unwrap();
    let [leaser] = leasers[..] else {
        panic!("backends whose last statement was a lease: {leasers:?}")
    };
    let (last, pid) = take(&f.store).await;
    assert_eq!(pid, leaser, "not the lease's connection");
    last.done();
    let (again, pid) = take(&f.store).await;
    assert_eq!(pid, leaser, "not the one given back last");

    let (other, second) = take(&f.store).await;
    assert_ne!(second, leaser, "two at once shared a connection");
    other.done();
    again.done();
    let (top, pid) = take(&f.store).await;
    assert_eq!(pid, leaser, "the last given back is taken first");
    top.done();

    // Dropped without `done` (its write failed): back to the pool, not kept.
    let (failed, pid) = take(&f.store).await;
    assert_eq!(pid, leaser);
    drop(failed);
    let (next, pid) = take(&f.store).await;
    assert_eq!(pid, second, "a connection whose write failed was kept");
    next.done();

    tokio::time::timeout(std::time::Duration::from_secs(10), f.store.close())
        .await
        .expect("the pool closed with connections still kept");
}

/// PostgreSQL: a look that finds nothing queued locks nothing (a row lock
/// is a write: the look's commit would wait for the WAL to reach the disk),
/// and still says what a locked look would (here: no room left).
#[tokio::test]
async fn a_lease_that_finds_nothing_locks_nothing_on_postgres() {
    needs(true);
    let f = fixture("quiet-lease").await;
    let one = f.runner("one", &[]).await;
    f.store.runner_hello(&one, &[], 1, false, 2).await.unwrap();
    // A row's xmin names the transaction that wrote this version of it, its
    // xmax the last that locked (or deleted) it.
    let touched = || async {
        let row: String = sqlx::query_scalar(
            "SELECT CAST(xmin AS TEXT) || '/' || CAST(xmax AS TEXT) FROM runners WHERE id = $1",
        )
        .bind(one.as_str())
        .fetch_one(&f.store.writer)
        .await
        .unwrap();
        row
    };
    let before = touched().await;
    assert!(matches!(f.lease(&[&one]).await[0], LeaseAttempt::Empty));
    assert_eq!(touched().await, before, "an empty look locked its runner");

    f.submit(&[]).await;
    leased(&f.lease(&[&one]).await[0]);
    assert_ne!(
        touched().await,
        before,
        "a lease that takes a job locks its runner"
    );
    let full = f.store.lease_batch(&[f.lease_request(&one)]).await.unwrap();
    assert_eq!(full[0].as_ref().unwrap_err().kind(), Some(Kind::LeaseLimit));
}

/// PostgreSQL: the lease statement (`leases/lease.sql`) leases the usual
/// batch itself and hands the rest to `drover_lease`, having leased nothing:
/// here a job at the head of the queue that requires a capability.
#[tokio::test]
async fn the_lease_statement_hands_back_what_it_does_not_plan_on_postgres() {
    needs(true);
    let f = fixture("lease-statement").await;
    let one = f.runner("one", &["gpu"]).await;
    // Each row's pick and job.
    let (writer, one_ids) = (&f.store.writer, super::text_array([one.as_str()]));
    let statement = |lease: &'static str| {
        let one_ids = one_ids.clone();
        async move {
            use sqlx::Row;
            let rows = sqlx::query(super::leases::LEASE_STATEMENT)
                .bind(one_ids.clone())
                .bind(super::text_array([lease]))
                .bind(one_ids)
                .bind(3i64)
                .bind(TTL as i64)
                .fetch_all(writer)
                .await
                .unwrap();
            rows.iter()
                .map(|r| (r.get::<String, _>(0), r.get::<Option<String>, _>(1)))
                .collect::<Vec<_>>()
        }
    };
    let plain = f.submit(&[]).await;
    let got = statement("ls_1").await;
    assert_eq!(got, vec![("job".to_owned(), Some(plain.clone()))]);

    let gpu = f.submit(&["gpu"]).await;
    let got = statement("ls_2").await;
    assert_eq!(got, vec![("again".to_owned(), None)]);
    // drover_lease plans it, through the store.
    let out = f.lease(&[&one]).await;
    assert_eq!(leased(&out[0]).0, gpu);
}

/// PostgreSQL: a batch that leased to a runner and committed after the
/// lease statement took its snapshot (the statement waited for that
/// runner's lock) is counted: the runner gets no more than its slots.
#[tokio::test]
async fn a_lease_that_waited_for_another_batch_counts_its_leases_on_postgres() {
    needs(true);
    let f = fixture("lease-race").await;
    let one = f.runner("one", &[]).await;
    f.store.runner_hello(&one, &[], 1, false, 2).await.unwrap();
    let first = f.submit(&[]).await;
    f.submit(&[]).await;
    // Another batch, mid-flight: it counted itself on the runner (as every
    // batch that may lease to it does) and leased it the first job.
    let mut other = f.store.writer.begin().await.unwrap();
    sqlx::query("UPDATE runners SET lease_seq = lease_seq + 1 WHERE id = $1")
        .bind(one.as_str())
        .execute(&mut *other)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE jobs SET state = 'leased', attempt = 1, lease_id = 'ls_other', lease_runner_id = $1,
                lease_expires_at = $2 WHERE id = $3",
    )
    .bind(one.as_str())
    .bind(i64::MAX / 2)
    .bind(first.as_str())
    .execute(&mut *other)
    .await
    .unwrap();
    let req = f.lease_request(&one);
    let store = f.store.clone();
    let ours = tokio::spawn(async move { store.lease_batch(&[req]).await.unwrap() });
    // Ours has its snapshot and waits for the runner's lock.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&f.store.reader)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never waited for the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    other.commit().await.unwrap();
    let out = ours.await.unwrap();
    assert_eq!(
        out[0].as_ref().unwrap_err().kind(),
        Some(Kind::LeaseLimit),
        "{out:?}"
    );
    let held: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM jobs WHERE lease_runner_id = $1 AND state IN ('leased', 'running')",
    )
    .bind(one.as_str())
    .fetch_one(&f.store.writer)
    .await
    .unwrap();
    assert_eq!(held, 1);
}

/// The lease rules' table (`leases::rules`), each case one batch on this
/// backend: on SQLite `plan()` between the reads and the write, on
/// PostgreSQL the lease statement or `drover_lease`. Each case has its own pools in one database.
#[tokio::test]
async fn every_lease_rule_holds_in_the_store() {
    use drover_domain::lease::rules::{CASES, wake_text};
    use std::collections::HashMap;

    let f = fixture("rules").await;
    for (n, case) in CASES.iter().enumerate() {
        // Ids of this case's runners and pools, and their names in the table.
        let mut runners: HashMap<&str, (RunnerId, RuntimeId)> = HashMap::new();
        let mut names: HashMap<String, String> = HashMap::new();
        for r in case.runners {
            let pool = format!("c{n}-{}", r.pool);
            if !names.values().any(|v| v == r.pool) {
                let rt = f
                    .store
                    .create_runtime(&f.admin, &Owner::Workspace, &pool, 1)
                    .await
                    .unwrap();
                names.insert(rt.id.to_string(), r.pool.to_owned());
            }
            let req = wire::PairRunner {
                name: Some(format!("c{n}-{}", r.name)),
                runtime: Some(pool),
                labels: r.caps.iter().map(|c| c.to_string()).collect(),
            };
            let paired = f
                .store
                .pair_runner(&f.admin, &Owner::Workspace, &req.into(), 1)
                .await
                .unwrap();
            let id = paired.runner.id.clone();
            let lost: Vec<String> = r.lost.iter().map(|c| c.to_string()).collect();
            f.store
                .runner_hello(&id, &lost, r.slots, false, 1)
                .await
                .unwrap();
            names.insert(id.to_string(), r.name.to_owned());
            runners.insert(r.name, (id.clone(), paired.runner.runtime_id.clone()));
            // The leases it holds: jobs pinned to it, leased before the case.
            for _ in 0..r.held {
                f.submit_to(
                    serde_json::json!({"runtime": format!("self:ws:{id}"), "script": "true"}),
                )
                .await;
                let req = LeaseRequest {
                    runner: id.clone(),
                    runtime: paired.runner.runtime_id.clone(),
                    now: 3,
                    ttl_ms: TTL,
                };
                let held = f.store.lease_batch(&[req]).await.unwrap();
                assert!(
                    matches!(held[..], [Ok(LeaseAttempt::Leased { .. })]),
                    "{}: {held:?}",
                    case.name
                );
            }
        }
        let mut jobs: HashMap<String, &str> = HashMap::new();
        for j in case.jobs {
            let runtime = match j.pinned {
                Some(runner) => format!("self:ws:{}", runners[runner].0),
                None => format!("self:ws:c{n}-{}", j.pool),
            };
            let id = f
                .submit_to(serde_json::json!({
                    "runtime": runtime,
                    "script": "true",
                    "requires": j.requires,
                    "priority": j.priority,
                }))
                .await;
            jobs.insert(id, j.name);
        }
        for r in case.runners {
            let id = &runners[r.name].0;
            if !r.lost.is_empty() {
                f.store
                    .runner_hello(id, &[], r.slots, false, 2)
                    .await
                    .unwrap();
            }
            if r.revoked {
                f.store
                    .revoke_runner(&f.admin, &Owner::Workspace, id.as_str(), 2)
                    .await
                    .unwrap();
            }
        }
        let reqs: Vec<LeaseRequest> = case
            .requests
            .iter()
            .map(|name| {
                let (runner, runtime) = runners[name].clone();
                LeaseRequest {
                    runner,
                    runtime,
                    now: 3,
                    ttl_ms: TTL,
                }
            })
            .collect();
        let out = f.store.lease_batch(&reqs).await.unwrap();
        let name = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_owned());
        let (mut picks, mut wakes) = (Vec::new(), Vec::new());
        for attempt in out {
            let (pick, wake) = match attempt {
                Ok(LeaseAttempt::Leased { lease, next }) => (
                    jobs.get(lease.job.id.as_str())
                        .copied()
                        .unwrap_or("?")
                        .to_owned(),
                    wake_text(next.as_ref(), name, name),
                ),
                Ok(LeaseAttempt::Empty) => ("-".to_owned(), String::new()),
                Ok(LeaseAttempt::Revoked) => ("revoked".to_owned(), String::new()),
                Err(e) if e.kind() == Some(Kind::LeaseLimit) => ("limit".to_owned(), String::new()),
                Err(e) => panic!("{}: {e}", case.name),
            };
            picks.push(pick);
            wakes.push(wake);
        }
        assert_eq!(picks, case.picks, "{}: picks", case.name);
        assert_eq!(wakes, case.wakes, "{}: wakes", case.name);
    }
}

/// sqlx's reaper is off on the store's pools (`backend::pool_options`):
/// sqlx 0.8.6's can spin a tokio worker forever.
#[tokio::test]
async fn the_pools_run_no_reaper() {
    let f = fixture("reaper").await;
    for pool in [&f.store.writer, &f.store.reader] {
        assert_eq!(pool.options().get_idle_timeout(), None);
        assert_eq!(pool.options().get_max_lifetime(), None);
    }
}
