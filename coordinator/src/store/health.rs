//! What `/readyz` and `/metrics` read: whether the database answers and
//! its schema is the one this build expects, and each pool's queue and
//! runners in one cheap query.

use std::collections::{BTreeMap, BTreeSet};

use super::Store;
use super::backend::sqlite::with_param;
use crate::store::error::Result;
use drover_domain::model::ONLINE_WINDOW_MS;

/// Why the store is not ready to serve (safe to show anyone: versions only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Migrations this build has that the database lacks (or that failed).
    Missing(Vec<i64>),
    /// Migrations applied to the database that this build does not know (a
    /// newer coordinator migrated it).
    Unknown(Vec<i64>),
}

/// What one pool looks like now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReading {
    pub pool: String,
    pub queued: i64,
    /// Milliseconds since the oldest queued job was submitted.
    pub oldest_age_ms: Option<i64>,
    pub runners_online: i64,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing(v) => write!(f, "the database lacks migrations {v:?}"),
            Self::Unknown(v) => write!(
                f,
                "the database has migrations {v:?} that this coordinator does not know"
            ),
        }
    }
}

impl Store {
    /// `Ok(None)` when the database answers and its applied migrations are
    /// exactly this build's; `Ok(Some(why))` when they differ; `Err` when
    /// the database cannot be read. The caller bounds the time.
    ///
    /// On PostgreSQL it asks through the pool (which reconnects as needed).
    /// On SQLite the pool's connections hold the file open even if it was
    /// deleted or moved away, so it opens the file afresh, read-only.
    pub async fn readiness(&self) -> Result<Option<NotReady>> {
        // `success` is a boolean on both (an integer on SQLite).
        const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success";
        let applied = if self.dialect.readiness_reopens {
            use sqlx::Connection as _;
            let url = with_param(&self.url, "mode=ro");
            let mut conn = sqlx::AnyConnection::connect(&url).await?;
            let applied = sqlx::query_scalar::<_, i64>(APPLIED)
                .fetch_all(&mut conn)
                .await;
            let _ = conn.close().await;
            applied?
        } else {
            sqlx::query_scalar::<_, i64>(APPLIED)
                .fetch_all(&self.reader)
                .await?
        };
        let embedded: BTreeSet<i64> = self.dialect.migrations.iter().map(|m| m.version).collect();
        let applied: BTreeSet<i64> = applied.into_iter().collect();
        let missing: Vec<i64> = embedded.difference(&applied).copied().collect();
        let unknown: Vec<i64> = applied.difference(&embedded).copied().collect();
        Ok(if !missing.is_empty() {
            Some(NotReady::Missing(missing))
        } else if !unknown.is_empty() {
            Some(NotReady::Unknown(unknown))
        } else {
            None
        })
    }

    /// Each pool with queued jobs or online runners: how many jobs are
    /// queued, how long ago the oldest was submitted, how many runners are
    /// online. Each part reads only what a partial index or a small table
    /// holds (queued jobs, runners), however long the history.
    pub async fn pool_readings(&self, now: i64) -> Result<Vec<PoolReading>> {
        let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
            "SELECT runtime_id, COUNT(*), MIN(created_at), CAST(0 AS BIGINT) FROM jobs
               WHERE state = 'queued' AND pinned_runner_id IS NULL GROUP BY runtime_id
             UNION ALL
             SELECT runtime_id, COUNT(*), MIN(created_at), CAST(0 AS BIGINT) FROM jobs
               WHERE state = 'queued' AND pinned_runner_id IS NOT NULL GROUP BY runtime_id
             UNION ALL
             SELECT runtime_id, CAST(0 AS BIGINT), CAST(0 AS BIGINT), COUNT(*) FROM runners
               WHERE revoked_at IS NULL AND last_seen_at > $1 GROUP BY runtime_id",
        )
        .bind(now - ONLINE_WINDOW_MS)
        .fetch_all(&self.reader)
        .await?;
        let mut pools: BTreeMap<String, PoolReading> = BTreeMap::new();
        for (pool, queued, oldest, online) in rows {
            let p = pools.entry(pool.clone()).or_insert(PoolReading {
                pool,
                queued: 0,
                oldest_age_ms: None,
                runners_online: 0,
            });
            p.runners_online += online;
            if queued > 0 {
                p.queued += queued;
                let age = (now - oldest).max(0);
                p.oldest_age_ms = Some(p.oldest_age_ms.map_or(age, |a| a.max(age)));
            }
        }
        Ok(pools.into_values().collect())
    }
}
