//! The PostgreSQL backend: its dialect, and opening it (one pool shared by
//! reads and writes; replicas share the database, see `signals`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sqlx::Connection as _;

use super::Engine;
use crate::store::error::Result;
use crate::store::{Backend, Dialect, Store};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

pub(in crate::store) const DIALECT: Dialect = Dialect {
    backend: Backend::Postgres,
    is: "IS NOT DISTINCT FROM",
    lock_skip_locked: "FOR UPDATE SKIP LOCKED",
    lease_page: 16,
    lock_for_update: "FOR UPDATE",
    db_clock: Some("CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"),
    replica_signals: true,
    migrations: &MIGRATIONS,
    readiness_reopens: false,
};

/// A pooled connection idle at least this long is pinged before it is used.
/// Under load connections come back within milliseconds; one that broke in
/// the last second is as likely as one breaking while in use.
pub(super) const CHECK_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// The pool's connections, all opened and warmed before the coordinator
/// serves, and never more. On this 2-core machine a pool of 24 opened
/// connections as bursts came (each a connect, a SCRAM exchange and a
/// warm-up on the request that asked) and held the open-loop p99 at
/// 20–40 ms; 12, all warm, at 5–7 ms (bench/results/pg-pool-2026-12-02.md).
/// A batch writes up to 64 requests, so 12 connections carry far more
/// than the database's cores can.
const CONNECTIONS: u32 = 12;

/// A new connection's first lease prepares the lease statements (alone,
/// and with a complete) and compiles `drover_lease` (their fallback) and
/// plans its statements: 8–35 ms, spent on the request that happened to
/// use it. Spent here instead,
/// on every connection, before the first request (for no runner: nothing
/// is locked or written).
async fn warm(pool: &sqlx::AnyPool) -> Result<()> {
    // Held together, so each is a different connection.
    futures_util::future::try_join_all((0..CONNECTIONS).map(|_| async {
        let mut conn = pool.acquire().await?;
        sqlx::query("SELECT COUNT(*) FROM drover_lease('{-}', '{-}', '{-}', 0, 0)")
            .execute(&mut *conn)
            .await?;
        sqlx::query(crate::store::leases::LEASE_STATEMENT)
            .bind("{-}")
            .bind("{-}")
            .bind("{-}")
            .bind(0i64)
            .bind(0i64)
            .execute(&mut *conn)
            .await?;
        crate::store::leases::complete_next_for_no_one()
            .execute(&mut *conn)
            .await?;
        Ok::<_, sqlx::Error>(conn)
    }))
    .await?;
    Ok(())
}

pub(in crate::store) async fn open(url: &str) -> Result<Store> {
    let pool = super::pool_options::<sqlx::Any>()
        .max_connections(CONNECTIONS)
        .min_connections(CONNECTIONS)
        .acquire_timeout(Duration::from_secs(30))
        // sqlx pings a connection before every use by default: a round trip
        // per batch on the hot path. A connection in steady use is
        // known to be alive; one idle a while is checked before use (the
        // server, or something between, may have dropped it), and one that
        // fails is closed and another taken.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= CHECK_IF_IDLE_FOR {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect(url)
        .await?;
    MIGRATIONS.run(&pool).await?;
    warm(&pool).await?;
    Ok(Store {
        writer: pool.clone(),
        reader: pool,
        dialect: &DIALECT,
        url: url.to_owned(),
        engine: Engine::Postgres(Default::default()),
        batches: None,
        alive: Arc::default(),
        secrets: Arc::default(),
        clock_offset: Arc::default(),
        others_listening: Arc::new(AtomicBool::new(true)),
    }
    // One batch of each kind at a time, as SQLite writes them. Two batches
    // of a kind at once read the same head of a pool's queue and lock the
    // same runners, so each skips the other's rows, waits on its locks or
    // hands its requests to drover_lease; one at a time, the calls that
    // arrive meanwhile make the next batch bigger instead. Drains, 8
    // runners, turn by turn: with up to 4 at once, PostgreSQL spent
    // 0.69-0.79 CPU-ms a job (0.87 statements a job); with 1, 0.29-0.34
    // (0.45), and the drain went from 1,535-1,781 to 1,904-2,304 jobs/s.
    .with_batches(1))
}
