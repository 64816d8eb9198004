//! In-memory wake-ups, so dispatch is event-driven rather than polled.
//!
//! The database is the truth; this only tells the right waiter to look.
//! - Lease long-polls register a [`Waiter`] with their runner's pool and
//!   capabilities. A new or re-queued job wakes exactly one waiter whose
//!   runner can take it, the one that has waited longest (round-robin).
//! - Heartbeats wait on their lease's [`Notify`], so a cancel reaches the
//!   runner at once.
//! - Log followers wait on their job's [`Notify`].
//!
//! Knows nothing about HTTP or SQL.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::caps;
use crate::ids::{RunnerId, RuntimeId};
use crate::wake::{Signal, Wake};

/// One lease request waiting for a job.
pub struct Waiter {
    key: u64,
    runtime: RuntimeId,
    runner: RunnerId,
    capabilities: Vec<String>,
    notify: Notify,
    /// Set (under the hub lock) when chosen for a wake; the wake is then
    /// this waiter's to use or to pass on.
    woken: AtomicBool,
    /// The wake it was chosen for, to pass on if it leaves without leasing.
    wake: Mutex<Option<Wake>>,
    /// It looked at the queue once since it registered and found nothing:
    /// it is parked (what [`Hub::waiting`] counts).
    looked: AtomicBool,
    /// Its runner was paused: the request ends without looking again.
    ended: AtomicBool,
}

impl Waiter {
    pub async fn notified(&self) {
        self.notify.notified().await
    }
}

#[derive(Default)]
struct Waiters {
    next_key: u64,
    /// Per pool, waiters in arrival order.
    by_pool: HashMap<RuntimeId, BTreeMap<u64, Arc<Waiter>>>,
    /// Per runner, how many of its lease requests wait (bounded by its slots).
    by_runner: HashMap<RunnerId, usize>,
}

#[derive(Default)]
pub struct Hub {
    waiters: Mutex<Waiters>,
    leases: Mutex<HashMap<String, Arc<Notify>>>,
    jobs: Mutex<HashMap<String, Arc<Notify>>>,
    /// When each runner's `last_seen_at` was last written, to write it rarely.
    presence: Mutex<HashMap<RunnerId, i64>>,
}

/// `last_seen_at` is written at most this often per runner.
const PRESENCE_WRITE_MS: i64 = 10_000;

#[derive(Clone, Copy)]
enum Topic {
    Lease,
    Job,
}

/// Interest in a lease's or a job's signals; unsubscribes when dropped.
pub struct Subscription {
    hub: Arc<Hub>,
    topic: Topic,
    key: String,
    notify: Arc<Notify>,
}

impl Subscription {
    fn new(hub: &Arc<Hub>, topic: Topic, key: &str) -> Self {
        let notify = hub
            .topic(topic)
            .lock()
            .expect("hub lock")
            .entry(key.to_owned())
            .or_default()
            .clone();
        Self {
            hub: hub.clone(),
            topic,
            key: key.to_owned(),
            notify,
        }
    }

    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self.hub.topic(self.topic).lock().expect("hub lock");
        // The map's reference and ours: no one else is listening.
        if Arc::strong_count(&self.notify) <= 2 {
            map.remove(&self.key);
        }
    }
}

/// Deregisters its waiter when dropped (the long-poll ended or its client
/// went away); an unused wake is passed to the next waiter.
pub struct WaiterGuard<'a> {
    hub: &'a Hub,
    pub waiter: Arc<Waiter>,
    consumed: bool,
}

impl WaiterGuard<'_> {
    /// The waiter leased (or looked and found nothing): its wake is used.
    pub fn consume(mut self) {
        self.consumed = true;
    }

    pub fn was_woken(&self) -> bool {
        self.waiter.woken.load(Ordering::Acquire)
    }

    /// Its look at the queue found nothing: from now it is parked.
    pub fn looked(&self) {
        self.waiter.looked.store(true, Ordering::Release);
    }

    /// Its runner was paused since it registered: it should answer, with
    /// nothing, rather than look again.
    pub fn ended(&self) -> bool {
        self.waiter.ended.load(Ordering::Acquire)
    }
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        let passed_on = {
            let mut w = self.hub.waiters.lock().expect("hub lock");
            if let Some(pool) = w.by_pool.get_mut(&self.waiter.runtime) {
                pool.remove(&self.waiter.key);
                if pool.is_empty() {
                    w.by_pool.remove(&self.waiter.runtime);
                }
            }
            if let Some(n) = w.by_runner.get_mut(&self.waiter.runner) {
                *n -= 1;
                if *n == 0 {
                    w.by_runner.remove(&self.waiter.runner);
                }
            }
            // After removal no one can choose this waiter, so `woken` is final.
            if self.consumed || !self.waiter.woken.load(Ordering::Acquire) {
                None
            } else {
                self.waiter.wake.lock().expect("wake lock").take()
            }
        };
        if let Some(wake) = passed_on {
            self.hub.wake(&wake);
        }
    }
}

impl Hub {
    fn topic(&self, topic: Topic) -> &Mutex<HashMap<String, Arc<Notify>>> {
        match topic {
            Topic::Lease => &self.leases,
            Topic::Job => &self.jobs,
        }
    }

    /// Registers a waiter; register *before* looking at the queue, so a job
    /// that arrives in between still wakes it. `None` if `runner` already
    /// has `limit` waiters here (one per slot).
    pub fn register(
        &self,
        runtime: &RuntimeId,
        runner: &RunnerId,
        capabilities: Vec<String>,
        limit: usize,
    ) -> Option<WaiterGuard<'_>> {
        let mut w = self.waiters.lock().expect("hub lock");
        let mine = w.by_runner.entry(runner.clone()).or_default();
        if *mine >= limit {
            if *mine == 0 {
                w.by_runner.remove(runner);
            }
            return None;
        }
        *mine += 1;
        w.next_key += 1;
        let waiter = Arc::new(Waiter {
            key: w.next_key,
            runtime: runtime.clone(),
            runner: runner.clone(),
            capabilities,
            notify: Notify::new(),
            woken: AtomicBool::new(false),
            wake: Mutex::new(None),
            looked: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        });
        w.by_pool
            .entry(runtime.clone())
            .or_default()
            .insert(waiter.key, waiter.clone());
        Some(WaiterGuard {
            hub: self,
            waiter,
            consumed: false,
        })
    }

    /// Wakes one waiter that can take a job described by `wake`: the one
    /// that has waited longest. Returns whether anyone was woken.
    pub fn wake(&self, wake: &Wake) -> bool {
        let mut w = self.waiters.lock().expect("hub lock");
        match wake {
            Wake::Pool { runtime, requires } => Self::wake_in(
                &mut w,
                runtime,
                &|x| caps::satisfies(&x.capabilities, requires),
                wake,
            ),
            Wake::Runner { runtime, runner } => {
                Self::wake_in(&mut w, runtime, &|x| &x.runner == runner, wake)
            }
        }
    }

    fn wake_in(
        w: &mut Waiters,
        runtime: &RuntimeId,
        fits: &dyn Fn(&Waiter) -> bool,
        wake: &Wake,
    ) -> bool {
        let Some(pool) = w.by_pool.get_mut(runtime) else {
            return false;
        };
        let Some(key) = pool.values().find(|x| fits(x)).map(|x| x.key) else {
            return false;
        };
        let waiter = pool.remove(&key).expect("key just found");
        if pool.is_empty() {
            w.by_pool.remove(runtime);
        }
        *waiter.wake.lock().expect("wake lock") = Some(wake.clone());
        waiter.woken.store(true, Ordering::Release);
        waiter.notify.notify_one();
        true
    }

    /// Acts on a signal, from this replica or another.
    pub fn apply(&self, signal: &Signal) {
        match signal {
            Signal::Pool { runtime, requires } => {
                self.wake(&Wake::Pool {
                    runtime: RuntimeId::from_db(runtime.clone()),
                    requires: requires.clone(),
                });
            }
            Signal::Runner { runtime, runner } => {
                self.wake(&Wake::Runner {
                    runtime: RuntimeId::from_db(runtime.clone()),
                    runner: RunnerId::from_db(runner.clone()),
                });
            }
            Signal::Revoked { runner } => self.wake_runner_all(&RunnerId::from_db(runner.clone())),
            Signal::Hello {
                runner,
                paused: true,
            } => self.end_runner_all(&RunnerId::from_db(runner.clone())),
            Signal::Hello { .. } => {}
            Signal::Cancel { lease } => self.signal_lease(lease),
            Signal::Job { job } => self.job_changed(job),
            Signal::LookAgain => self.wake_everyone(),
        }
    }

    /// Wakes every waiter and follower to look again: after missing
    /// signals (the link to the other replicas broke), nothing stays asleep.
    pub fn wake_everyone(&self) {
        let mut w = self.waiters.lock().expect("hub lock");
        for pool in std::mem::take(&mut w.by_pool).into_values() {
            for x in pool.into_values() {
                x.woken.store(true, Ordering::Release);
                x.notify.notify_one();
            }
        }
        drop(w);
        for n in self.jobs.lock().expect("hub lock").values() {
            n.notify_waiters();
        }
        for n in self.leases.lock().expect("hub lock").values() {
            n.notify_waiters();
        }
    }

    /// Wakes every waiter of `runner` (it was revoked: they should find out).
    pub fn wake_runner_all(&self, runner: &RunnerId) {
        self.wake_runner(runner, false);
    }

    /// Ends every waiting request of `runner`: it was paused, and its owner
    /// reads them to their end (a job leased to one before now still
    /// reaches it), so they answer at once, with nothing.
    pub fn end_runner_all(&self, runner: &RunnerId) {
        self.wake_runner(runner, true);
    }

    fn wake_runner(&self, runner: &RunnerId, end: bool) {
        let mut w = self.waiters.lock().expect("hub lock");
        for pool in w.by_pool.values_mut() {
            let keys: Vec<u64> = pool
                .values()
                .filter(|x| &x.runner == runner)
                .map(|x| x.key)
                .collect();
            for key in keys {
                if let Some(x) = pool.remove(&key) {
                    x.ended.store(end, Ordering::Release);
                    x.woken.store(true, Ordering::Release);
                    x.notify.notify_one();
                }
            }
        }
        w.by_pool.retain(|_, p| !p.is_empty());
    }

    /// Should `runner`'s `last_seen_at` be written now? Records that it was.
    pub fn should_touch(&self, runner: &RunnerId, now: i64) -> bool {
        let mut presence = self.presence.lock().expect("hub lock");
        let last = presence.entry(runner.clone()).or_insert(i64::MIN);
        if now.saturating_sub(*last) >= PRESENCE_WRITE_MS {
            *last = now;
            true
        } else {
            false
        }
    }

    /// Number of lease requests parked now, having looked at the queue and
    /// found nothing (for metrics and tests). One still looking is not
    /// counted: a job queued meanwhile may be its, out of turn.
    pub fn waiting(&self) -> usize {
        self.waiters
            .lock()
            .expect("hub lock")
            .by_pool
            .values()
            .flat_map(BTreeMap::values)
            .filter(|w| w.looked.load(Ordering::Acquire))
            .count()
    }

    /// Leases with a heartbeat waiting for a cancel, and jobs whose log is
    /// followed, right now (for `/healthz` and tests).
    pub fn subscribed(&self) -> (usize, usize) {
        let leases = self.leases.lock().expect("hub lock").len();
        let jobs = self.jobs.lock().expect("hub lock").len();
        (leases, jobs)
    }

    /// Subscribes to cancel signals for `lease` (a heartbeat waits on it).
    pub fn subscribe_lease(self: &Arc<Self>, lease: &str) -> Subscription {
        Subscription::new(self, Topic::Lease, lease)
    }

    pub fn signal_lease(&self, lease: &str) {
        if let Some(n) = self.leases.lock().expect("hub lock").get(lease) {
            n.notify_waiters();
            // Also leave a permit, for a heartbeat between its check and its wait.
            n.notify_one();
        }
    }

    /// Subscribes to changes of `job` (a log follower waits on it).
    pub fn subscribe_job(self: &Arc<Self>, job: &str) -> Subscription {
        Subscription::new(self, Topic::Job, job)
    }

    /// Something about `job` changed (a log chunk, its state).
    pub fn job_changed(&self, job: &str) {
        if let Some(n) = self.jobs.lock().expect("hub lock").get(job) {
            n.notify_waiters();
        }
    }
}
