//! The reads of a lease batch on SQLite, as typed rows: who is asking, the
//! jobs pinned to them, and the head of each of their pools' queues.
//! (PostgreSQL reads, plans and writes in one statement: `lease.sql`.)

use std::collections::HashMap;

use super::LeaseRequest;
use crate::store::backend::sqlite_writer::{self, Cols};
use crate::store::capabilities;
use crate::store::error::{Error, Result};
use crate::store::{Dialect, json_list, placeholders};
use drover_domain::lease::plan::{LiveRunner, QueuedJob};

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
/// NULL)`; parameters `$1` (pool), `$2` (limit), `$3` (offset).
const QUEUE_PAGE: &str = "SELECT 'q', id, requires, runtime_id, NULL, NULL FROM jobs
    WHERE state = 'queued' AND runtime_id = $1 AND pinned_runner_id IS NULL
    ORDER BY priority DESC, queue_pos, seq LIMIT $2 OFFSET $3";

/// A page of `runtime`'s queue, `limit` rows from `offset`, in lease order
/// (SQLite's writer).
pub(super) fn queue_page_sqlite(
    conn: &rusqlite::Connection,
    runtime: &str,
    limit: i64,
    offset: i64,
) -> Result<Vec<QueuedJob>> {
    sqlite_writer::rows(conn, QUEUE_PAGE, &[&runtime, &limit, &offset], |row| {
        queued_job(row)
    })
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

/// Reads what `plan` needs for `reqs`, on SQLite's writer (see
/// `sqlite_writer`). On PostgreSQL the reads, plan and write are one
/// statement (`lease.sql`).
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
    for (runtime, limit) in &heads {
        rows.extend(sqlite_writer::rows(
            conn,
            QUEUE_PAGE,
            &[runtime, limit, &0i64],
            |row| decode(row),
        )?);
    }
    let mut out = collect(rows.into_iter().map(Ok), &heads, k)?;
    if out.pinned.len() as i64 == d.lease_page {
        out.pinned.clear();
        let limit = reqs.len() as i64 + 1;
        for id in &ids {
            out.pinned
                .extend(sqlite_writer::rows(conn, PINNED, &[id, &limit], |row| {
                    pinned_job(row)
                })?);
        }
    }
    Ok(out)
}

/// One runner's pinned jobs, `$2` of them, when the batch's page of pinned
/// jobs came back full (usually there are none).
const PINNED: &str = "SELECT 'p', id, requires, pinned_runner_id FROM jobs
    WHERE state = 'queued' AND pinned_runner_id = $1
    ORDER BY priority DESC, queue_pos, seq LIMIT $2";

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
