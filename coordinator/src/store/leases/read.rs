//! The reads of a lease batch, as typed rows: who is asking, the jobs
//! pinned to them, and the head of each of their pools' queues.

use std::collections::HashMap;

use sqlx::AnyConnection;

use super::LeaseRequest;
use super::plan::{LiveRunner, QueuedJob};
use crate::error::{Error, Result};
use crate::store::runners::capabilities;
use crate::store::sqlite_writer::{self, Cols};
use crate::store::{Dialect, json_list, placeholders};

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

/// As [`queue_page`], on SQLite's writer.
pub(super) fn queue_page_sqlite(
    conn: &rusqlite::Connection,
    d: &Dialect,
    runtime: &str,
    limit: i64,
    offset: i64,
) -> Result<Vec<QueuedJob>> {
    sqlite_writer::rows(
        conn,
        &queue_page_sql(d, 1),
        &[&runtime, &limit, &offset],
        |row| queued_job(row),
    )
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

fn queued_job(row: &impl Cols) -> Result<QueuedJob> {
    Ok(QueuedJob {
        id: row.col(1)?,
        requires: json_list(&row.col::<String>(2)?)?,
        pinned_runner: None,
    })
}

fn decode(row: &impl Cols) -> Result<ReadRow> {
    let kind: String = row.col(0)?;
    Ok(match kind.as_str() {
        "r" => {
            let id: String = row.col(1)?;
            let revoked = row.col::<Option<i64>>(5)?.is_some();
            let live = match revoked {
                true => None,
                false => Some(LiveRunner {
                    runtime: row.col(2)?,
                    capabilities: capabilities(&row.col::<String>(3)?, &row.col::<String>(4)?)?,
                    slots: row.col(6)?,
                    held: 0,
                }),
            };
            ReadRow::Runner(id, live)
        }
        "c" => ReadRow::Held(row.col(1)?, row.col(5)?),
        "p" => ReadRow::Pinned(pinned_job(row)?),
        "q" => ReadRow::Queued(row.col(3)?, queued_job(row)?),
        other => return Err(Error::Corrupt(format!("lease read row kind {other}"))),
    })
}

/// The runners asked for (sorted, once each), and each pool asked from
/// with the rows of its first page: twice as many as requests for it
/// (usually the head fits, and the plan sees how many wait behind).
fn asked(reqs: &[LeaseRequest]) -> (Vec<&str>, Vec<(&str, i64)>) {
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
    (ids, heads)
}

/// Reads what `plan` needs for `reqs`, in one round trip: the
/// `drover_lease_reads` function (migration 0013; the `Any` driver binds
/// no arrays, so the lists go as JSON). PostgreSQL.
pub(super) async fn lease_reads(
    conn: &mut AnyConnection,
    d: &Dialect,
    reqs: &[LeaseRequest],
) -> Result<LeaseReads> {
    let (ids, heads) = asked(reqs);
    let pools: Vec<&str> = heads.iter().map(|(rt, _)| *rt).collect();
    let limits: Vec<i64> = heads.iter().map(|(_, limit)| *limit).collect();
    let rows = sqlx::query("SELECT * FROM drover_lease_reads($1, $2, $3, $4)")
        .bind(serde_json::to_string(&ids)?)
        .bind(serde_json::to_string(&pools)?)
        .bind(serde_json::to_string(&limits)?)
        .bind(d.lease_page)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = collect(rows.iter().map(decode), &heads, ids.len())?;
    if out.pinned.len() as i64 == d.lease_page {
        out.pinned.clear();
        for id in &ids {
            let rows = sqlx::query(&pinned_sql(d))
                .bind(*id)
                .bind(reqs.len() as i64 + 1)
                .fetch_all(&mut *conn)
                .await?;
            for row in &rows {
                out.pinned.push(pinned_job(row)?);
            }
        }
    }
    Ok(out)
}

/// As [`lease_reads`], on SQLite's writer (see `sqlite_writer`): the same
/// statements as the PostgreSQL function, one after the other.
pub(super) fn lease_reads_sqlite(
    conn: &rusqlite::Connection,
    d: &Dialect,
    reqs: &[LeaseRequest],
) -> Result<LeaseReads> {
    use rusqlite::types::ToSql;
    let (ids, heads) = asked(reqs);
    let k = ids.len();
    let args: Vec<&dyn ToSql> = ids.iter().map(|id| id as &dyn ToSql).collect();
    let who = format!(
        "SELECT 'r', id, runtime_id, labels, detected, revoked_at, slots
         FROM runners WHERE id IN ({}) ORDER BY id",
        placeholders(1, k)
    );
    let held = format!(
        "SELECT 'c', lease_runner_id, '', '', '', COUNT(*)
         FROM jobs WHERE lease_runner_id IN ({}) AND state IN ('leased', 'running') GROUP BY lease_runner_id",
        placeholders(1, k)
    );
    let pinned = format!(
        "SELECT 'p', id, requires, pinned_runner_id, NULL, NULL FROM jobs
         WHERE state = 'queued' AND pinned_runner_id IN ({})
         ORDER BY priority DESC, queue_pos, seq LIMIT {}",
        placeholders(1, k),
        d.lease_page
    );
    let mut rows = Vec::new();
    for sql in [who, held, pinned] {
        rows.extend(sqlite_writer::rows(conn, &sql, &args, |row| decode(row))?);
    }
    let page = queue_page_sql(d, 1);
    for (runtime, limit) in &heads {
        rows.extend(sqlite_writer::rows(
            conn,
            &page,
            &[runtime, limit, &0i64],
            |row| decode(row),
        )?);
    }
    let mut out = collect(rows.into_iter().map(Ok), &heads, k)?;
    if out.pinned.len() as i64 == d.lease_page {
        out.pinned.clear();
        let limit = reqs.len() as i64 + 1;
        for id in &ids {
            out.pinned.extend(sqlite_writer::rows(
                conn,
                &pinned_sql(d),
                &[id, &limit],
                |row| pinned_job(row),
            )?);
        }
    }
    Ok(out)
}

/// One runner's pinned jobs, `$2` of them, when the batch's page of pinned
/// jobs came back full (usually there are none).
fn pinned_sql(d: &Dialect) -> String {
    format!(
        "SELECT 'p', id, requires, pinned_runner_id FROM jobs WHERE state = 'queued' AND pinned_runner_id = $1
         ORDER BY priority DESC, queue_pos, seq LIMIT $2 {}",
        d.lock_skip_locked
    )
}

fn pinned_job(row: &impl Cols) -> Result<QueuedJob> {
    Ok(QueuedJob {
        pinned_runner: Some(row.col(3)?),
        ..queued_job(row)?
    })
}

/// The rows read, decoded, into what the plan reads.
fn collect(
    rows: impl Iterator<Item = Result<ReadRow>>,
    heads: &[(&str, i64)],
    k: usize,
) -> Result<LeaseReads> {
    let mut out = LeaseReads {
        runners: HashMap::with_capacity(k),
        pinned: Vec::new(),
        heads: heads
            .iter()
            .map(|(rt, limit)| (rt.to_string(), *limit, Vec::new()))
            .collect(),
    };
    let mut held: Vec<(String, i64)> = Vec::new();
    for row in rows {
        match row? {
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

    Ok(out)
}
