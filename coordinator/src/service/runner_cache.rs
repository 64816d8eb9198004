//! Runner credentials seen recently, so the runner protocol's hot path
//! (lease, heartbeat, complete: several calls per job) does not read the
//! token table on every call.
//!
//! Keyed by the token's hash, never the token. Revocation stays exact where
//! it matters: the lease, heartbeat, log and complete writes all check the
//! runner and its lease in the database. The cache only saves the lookup;
//! an entry goes when its runner is revoked or says hello with new
//! capabilities (here, or on another replica through their signals), when
//! the replica link breaks, and after `TTL_MS` in any case.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::RunnerAuth;

const TTL_MS: i64 = 60_000;

#[derive(Default)]
pub struct RunnerCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_hash: HashMap<String, (RunnerAuth, i64)>,
    /// Entries at the last sweep of expired ones; sweep again at twice that.
    swept_at: usize,
}

impl RunnerCache {
    pub fn get(&self, hash: &str, now: i64) -> Option<RunnerAuth> {
        let inner = self.inner.lock().expect("runner cache lock");
        inner
            .by_hash
            .get(hash)
            .filter(|(_, at)| now - at < TTL_MS)
            .map(|(auth, _)| auth.clone())
    }

    pub fn put(&self, hash: String, auth: RunnerAuth, now: i64) {
        let mut inner = self.inner.lock().expect("runner cache lock");
        if inner.by_hash.len() >= 2 * inner.swept_at.max(512) {
            inner.by_hash.retain(|_, (_, at)| now - *at < TTL_MS);
            inner.swept_at = inner.by_hash.len();
        }
        inner.by_hash.insert(hash, (auth, now));
    }

    pub fn forget_runner(&self, runner: &str) {
        let mut inner = self.inner.lock().expect("runner cache lock");
        inner
            .by_hash
            .retain(|_, (auth, _)| auth.runner_id.as_str() != runner);
    }

    pub fn clear(&self) {
        self.inner
            .lock()
            .expect("runner cache lock")
            .by_hash
            .clear();
    }
}
