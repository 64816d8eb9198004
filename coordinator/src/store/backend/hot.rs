//! PostgreSQL: the hot writes' connections, the one used last first.
//!
//! sqlx's pool hands out the connection that has been idle longest. With
//! one runner, each complete then went to the next of the pool's 12
//! backends in turn, each a process cold in the CPU's caches (and its own
//! catalog and plan caches). The hot writes (submit, lease, complete, a
//! complete with the next lease, the heartbeat) take the connection
//! a hot write gave back last instead: a steady stream keeps one backend
//! busy, a burst takes as many as it needs, and the pool's other
//! connections serve everything else.
//!
//! Measured with drover-bench's protocol drains of 5,000 jobs, turn by
//! turn against the same code taking connections from the pool (0 % steal):
//! 1 runner 1,100-1,277 jobs/s against 731-809, PostgreSQL's CPU per job
//! 0.45-0.51 ms against 0.85-0.94; 8 runners 1,992-2,057 against
//! 1,390-1,543; 64 runners 3,224-3,883 against 2,959-3,594.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Connection as _};

use super::postgres::CHECK_IF_IDLE_FOR;

/// Most connections kept aside for hot writes; more go back to the pool.
/// A third of the pool: reads and the rest never wait on hot writes that
/// are not running.
const KEPT: usize = 4;

/// Connections kept aside by hot writes, the last given back on top;
/// `None` once released (the pool is closing: none is kept again).
#[derive(Clone)]
pub(in crate::store) struct HotConnections(Arc<Mutex<Option<Kept>>>);

type Kept = Vec<(PoolConnection<Any>, Instant)>;

impl Default for HotConnections {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Some(Vec::new()))))
    }
}

/// A connection for one hot write. [`Hot::done`] keeps it for the next;
/// dropped otherwise (an error), it goes back to the pool, which checks it
/// before its next use.
pub(in crate::store) struct Hot {
    conn: Option<PoolConnection<Any>>,
    home: HotConnections,
}

impl HotConnections {
    /// The connection given back last, or one from `pool`. One kept a
    /// while is pinged first, as the pool does (`before_acquire`).
    pub async fn acquire(&self, pool: &AnyPool) -> sqlx::Result<Hot> {
        loop {
            let kept = self.lock().as_mut().and_then(Vec::pop);
            let Some((mut conn, since)) = kept else {
                break;
            };
            if since.elapsed() < CHECK_IF_IDLE_FOR || conn.ping().await.is_ok() {
                return Ok(self.hot(conn));
            }
            // Broken: closed, and the pool opens another.
            conn.close_on_drop();
        }
        Ok(self.hot(pool.acquire().await?))
    }

    /// Gives every kept connection back to the pool (before it closes,
    /// which waits for them).
    pub fn release(&self) {
        self.lock().take();
    }

    fn hot(&self, conn: PoolConnection<Any>) -> Hot {
        Hot {
            conn: Some(conn),
            home: self.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Hot {
    /// The write went through: the connection is kept for the next one.
    pub fn done(mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if let Some(kept) = self.home.lock().as_mut()
            && kept.len() < KEPT
        {
            kept.push((conn, Instant::now()));
        }
        // Otherwise dropped: back to the pool.
    }
}

impl Deref for Hot {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        self.conn.as_ref().expect("taken only by done")
    }
}

impl DerefMut for Hot {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        self.conn.as_mut().expect("taken only by done")
    }
}
