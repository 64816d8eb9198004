//! The reads of a lease batch, as typed rows: who is asking, the jobs
//! pinned to them, and the head of each of their pools' queues.

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, FromRow, Row};

use super::LeaseRequest;
use super::plan::{LiveRunner, QueuedJob};
use crate::error::{Error, Result};
use crate::store::runners::capabilities;
use crate::store::{Dialect, LeaseReads as ReadsIn, bind_all_query, json_list, placeholders};

/// What a lease batch reads before it plans.
pub(super) struct LeaseReads {
    /// The runners asking, but revoked ones.
    pub runners: HashMap<String, LiveRunner>,
    /// The queued jobs pinned to them, in lease order.
    pub pinned: Vec<QueuedJob>,
    /// The first page of each pool asked from: (pool, rows asked, rows).
    pub heads: Vec<(String, i64, Vec<QueuedJob>)>,
}

/// A page of a pool's queue, as rows `('q', id, requires, runtime_id, NULL,
/// NULL)`; parameters `$first` (pool), `$first+1` (limit), `$first+2` (offset).
fn queue_page_sql(d: &Dialect, first: usize) -> String {
    format!(
        "SELECT 'q', id, requires, runtime_id, CAST(NULL AS TEXT), CAST(NULL AS BIGINT) FROM jobs
         WHERE state = 'queued' AND runtime_id = ${first} AND pinned_runner_id IS NULL
         ORDER BY priority DESC, queue_pos, seq LIMIT ${} OFFSET ${} {}",
        first + 1,
        first + 2,
        d.lock_skip_locked
    )
}

/// A page of `runtime`'s queue, `limit` rows from `offset`, in lease order.
pub(super) async fn queue_page(
    conn: &mut AnyConnection,
    d: &Dialect,
    runtime: &str,
    limit: i64,
    offset: i64,
) -> Result<Vec<QueuedJob>> {
    let rows = sqlx::query(&queue_page_sql(d, 1))
        .bind(runtime)
        .bind(limit)
        .bind(offset)
        .fetch_all(conn)
        .await?;
    rows.iter().map(queued_job).collect()
}

/// One row of the reads: every statement tags its rows with a kind.
enum ReadRow {
    /// `('r', id, runtime_id, labels, detected, revoked_at, slots)`
    Runner(String, Option<LiveRunner>),
    /// `('c', runner, '', '', '', leases held)`
    Held(String, i64),
    /// `('p', id, requires, pinned_runner_id, NULL, NULL)`
    Pinned(QueuedJob),
    /// `('q', id, requires, runtime_id, NULL, NULL)`
    Queued(String, QueuedJob),
}

fn queued_job(row: &AnyRow) -> Result<QueuedJob> {
    Ok(QueuedJob {
        id: row.try_get(1)?,
        requires: json_list(row.try_get(2)?)?,
        pinned_runner: None,
    })
}

fn decode(row: &AnyRow) -> Result<ReadRow> {
    let kind: &str = row.try_get(0)?;
    Ok(match kind {
        "r" => {
            let id: String = row.try_get(1)?;
            let revoked = row.try_get::<Option<i64>, _>(5)?.is_some();
            let live = match revoked {
                true => None,
                false => Some(LiveRunner {
                    runtime: row.try_get(2)?,
                    capabilities: capabilities(row.try_get(3)?, row.try_get(4)?)?,
                    slots: row.try_get(6)?,
                    held: 0,
                }),
            };
            ReadRow::Runner(id, live)
        }
        "c" => ReadRow::Held(row.try_get(1)?, row.try_get(5)?),
        "p" => ReadRow::Pinned(QueuedJob {
            pinned_runner: Some(row.try_get(3)?),
            ..queued_job(row)?
        }),
        "q" => ReadRow::Queued(row.try_get(3)?, queued_job(row)?),
        other => return Err(Error::Corrupt(format!("lease read row kind {other}"))),
    })
}

/// Reads what `plan` needs for `reqs`. The first page of each pool has
/// twice as many rows as requests for it (usually the head fits, and the
/// plan sees how many wait behind). In one round trip (`Dialect::lease_reads`).
pub(super) async fn lease_reads(
    conn: &mut AnyConnection,
    d: &Dialect,
    reqs: &[LeaseRequest],
) -> Result<LeaseReads> {
    let mut ids: Vec<&str> = reqs.iter().map(|r| r.runner.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut heads: Vec<(&str, i64)> = Vec::new();
    for r in reqs {
        match heads.iter_mut().find(|(rt, _)| *rt == r.runtime.as_str()) {
            Some((_, limit)) => *limit += 2,
            None => heads.push((r.runtime.as_str(), 2)),
        }
    }
    let (k, lock) = (ids.len(), d.lock_skip_locked);
    let rows: Vec<AnyRow> = match d.lease_reads {
        ReadsIn::MultiStatement => {
            let who = format!(
                "SELECT 'r', id, runtime_id, labels, detected, revoked_at, slots
                 FROM runners WHERE id IN ({}) ORDER BY id {}",
                placeholders(1, k),
                d.lock_runners
            );
            // The leases they hold, in a statement after the lock above (so
            // that, where rows are locked, it sees what a batch that held
            // these runners before us committed).
            let held_sql = format!(
                "SELECT 'c', lease_runner_id, CAST('' AS TEXT), CAST('' AS TEXT), CAST('' AS TEXT), CAST(COUNT(*) AS BIGINT)
                 FROM jobs WHERE lease_runner_id IN ({}) AND state IN ('leased', 'running') GROUP BY lease_runner_id",
                placeholders(1, k)
            );
            let pinned_sql = format!(
                "SELECT 'p', id, requires, pinned_runner_id, CAST(NULL AS TEXT), CAST(NULL AS BIGINT) FROM jobs
                 WHERE state = 'queued' AND pinned_runner_id IN ({})
                 ORDER BY priority DESC, queue_pos, seq LIMIT {} {lock}",
                placeholders(1, k),
                d.lease_page
            );
            let mut sql = format!("{who}; {held_sql}; {pinned_sql}");
            for j in 0..heads.len() {
                sql.push_str("; ");
                sql.push_str(&queue_page_sql(d, k + 1 + 3 * j));
            }
            let mut q = bind_all_query(sqlx::query(&sql), &ids);
            for (runtime, limit) in &heads {
                q = q.bind(*runtime).bind(*limit).bind(0i64);
            }
            q.fetch_all(&mut *conn).await?
        }
        // The same statements, in the same order (migration 0013); the
        // `Any` driver binds no arrays, so the lists go as JSON.
        ReadsIn::Function => {
            let pools: Vec<&str> = heads.iter().map(|(rt, _)| *rt).collect();
            let limits: Vec<i64> = heads.iter().map(|(_, limit)| *limit).collect();
            sqlx::query("SELECT * FROM drover_lease_reads($1, $2, $3, $4)")
                .bind(serde_json::to_string(&ids)?)
                .bind(serde_json::to_string(&pools)?)
                .bind(serde_json::to_string(&limits)?)
                .bind(d.lease_page)
                .fetch_all(&mut *conn)
                .await?
        }
    };

    let mut out = LeaseReads {
        runners: HashMap::with_capacity(k),
        pinned: Vec::new(),
        heads: heads
            .iter()
            .map(|(rt, limit)| (rt.to_string(), *limit, Vec::new()))
            .collect(),
    };
    let mut held: Vec<(String, i64)> = Vec::new();
    for row in &rows {
        match decode(row)? {
            ReadRow::Runner(id, Some(live)) => {
                out.runners.insert(id, live);
            }
            ReadRow::Runner(_, None) => {}
            ReadRow::Held(id, n) => held.push((id, n)),
            ReadRow::Pinned(job) => out.pinned.push(job),
            ReadRow::Queued(runtime, job) => {
                if let Some((_, _, page)) = out.heads.iter_mut().find(|(rt, ..)| *rt == runtime) {
                    page.push(job);
                }
            }
        }
    }
    for (id, n) in held {
        if let Some(r) = out.runners.get_mut(&id) {
            r.held = n;
        }
    }

    // Pinned jobs, usually none. Per runner only if that page came back full.
    if out.pinned.len() as i64 == d.lease_page {
        #[derive(FromRow)]
        struct Pinned {
            id: String,
            requires: String,
            pinned_runner_id: String,
        }
        out.pinned.clear();
        for id in &ids {
            let rows = sqlx::query_as::<_, Pinned>(&format!(
                "SELECT id, requires, pinned_runner_id FROM jobs WHERE state = 'queued' AND pinned_runner_id = $1
                 ORDER BY priority DESC, queue_pos, seq LIMIT $2 {lock}"
            ))
            .bind(*id)
            .bind(reqs.len() as i64 + 1)
            .fetch_all(&mut *conn)
            .await?;
            for p in rows {
                out.pinned.push(QueuedJob {
                    id: p.id,
                    requires: json_list(&p.requires)?,
                    pinned_runner: Some(p.pinned_runner_id),
                });
            }
        }
    }
    Ok(out)
}
