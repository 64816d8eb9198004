//! What `/metrics` shows, in the Prometheus text format (the `prometheus`
//! crate renders it; see `http::health` for the route).
//!
//! One registry for the process. Every handle is made and registered once,
//! and the hot paths hold the resolved handle (no label lookup, no string
//! formatting per request): an observation is a few atomic adds.
//!
//! - Latencies are the coordinator's own work on a request. A lease is
//!   measured from when it could be served: from its arrival if it found a
//!   job at once (`wait="immediate"`), else from the wake-up that led to its
//!   job (`wait="woken"`); a long-poll's idle wait is not latency, and one
//!   that ends empty is only counted (`drover_lease_empty_total`). A
//!   complete is measured without the next lease it may carry (that one is
//!   a lease like any other).
//! - Per-pool gauges (queue depth, oldest queued job, runners online) are
//!   read from the database at scrape time, labelled by pool id only (never
//!   a name), for at most [`MAX_POOL_SERIES`] pools: the busiest; the rest
//!   add up under `pool="other"`.

use std::sync::LazyLock;
use std::time::Duration;

use crate::store::{self, PoolReading};
use prometheus::{
    Encoder as _, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Pools shown by name (id) at most; more pools add up under `other`.
pub const MAX_POOL_SERIES: usize = 200;

/// Seconds, from half a millisecond to ten seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Requests per batch (batches hold at most 64).
const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

pub struct Metrics {
    registry: Registry,
    pub lease_immediate: Histogram,
    pub lease_woken: Histogram,
    pub lease_empty: IntCounter,
    pub connections: IntCounter,
    pub submit: Histogram,
    pub complete: Histogram,
    batch_size: HistogramVec,
    batch_seconds: HistogramVec,
    /// The handles of each kind of batch the store writes, made at start
    /// (so each series shows from the first scrape).
    batches: Vec<(&'static str, BatchMetrics)>,
    pub signal_lag: Histogram,
    pub signal_reconnects: IntCounter,
    pub signals_sent: IntCounter,
    pub lease_waiting: IntGauge,
    queue_depth: IntGaugeVec,
    queue_oldest: prometheus::GaugeVec,
    runners_online: IntGaugeVec,
    scrape_errors: IntCounterVec,
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// Makes these metrics the store's observer (batches written, signals sent).
pub fn install() {
    store::observe::set(get());
}

impl store::observe::Observer for Metrics {
    fn batch_written(&self, kind: &str, size: usize, took: Duration) {
        match self.batches.iter().find(|(k, _)| *k == kind) {
            Some((_, handles)) => handles.written(size, took),
            None => self.batch(kind).written(size, took),
        }
    }

    fn signal_sent(&self) {
        self.signals_sent.inc();
    }
}

fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
        .expect("a valid histogram")
}

impl Metrics {
    fn new() -> Self {
        let lease = HistogramVec::new(
            HistogramOpts::new(
                "drover_lease_seconds",
                "Time to serve a lease that got a job: from the request's arrival (wait=immediate) or from the wake-up that found its job (wait=woken)",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["wait"],
        )
        .expect("a valid histogram");
        let batch_size = HistogramVec::new(
            HistogramOpts::new("drover_batch_size", "Requests per written batch, per kind")
                .buckets(BATCH_SIZE_BUCKETS.to_vec()),
            &["kind"],
        )
        .expect("a valid histogram");
        let batch_seconds = HistogramVec::new(
            HistogramOpts::new(
                "drover_batch_seconds",
                "Time to write a batch (one transaction), per kind",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["kind"],
        )
        .expect("a valid histogram");
        let m = Self {
            registry: Registry::new(),
            lease_immediate: lease.with_label_values(&["immediate"]),
            lease_woken: lease.with_label_values(&["woken"]),
            lease_empty: IntCounter::new(
                "drover_lease_empty_total",
                "Lease requests answered with no job (nothing queued, the wait ran out, or shutdown)",
            )
            .expect("a valid counter"),
            connections: IntCounter::new(
                "drover_http_connections_total",
                "TCP connections accepted (clients that keep theirs open add few)",
            )
            .expect("a valid counter"),
            submit: histogram(
                "drover_submit_seconds",
                "Time to place and write a job submit",
                LATENCY_BUCKETS,
            ),
            complete: histogram(
                "drover_complete_seconds",
                "Time to record a job's completion (without a next lease it asks for)",
                LATENCY_BUCKETS,
            ),
            batches: store::observe::BATCH_KINDS
                .iter()
                .map(|&kind| {
                    let handles = BatchMetrics {
                        size: batch_size.with_label_values(&[kind]),
                        seconds: batch_seconds.with_label_values(&[kind]),
                    };
                    (kind, handles)
                })
                .collect(),
            batch_size,
            batch_seconds,
            signal_lag: histogram(
                "drover_replica_signal_lag_seconds",
                "PostgreSQL: from another replica sending a signal (NOTIFY) to this one receiving it, by the database's clock",
                LATENCY_BUCKETS,
            ),
            signal_reconnects: IntCounter::new(
                "drover_replica_signal_reconnects_total",
                "PostgreSQL: times the link that receives other replicas' signals was re-established",
            )
            .expect("a valid counter"),
            signals_sent: IntCounter::new(
                "drover_replica_signals_sent_total",
                "PostgreSQL: notifications this replica sent to the others (none while it is alone)",
            )
            .expect("a valid counter"),
            lease_waiting: IntGauge::new(
                "drover_lease_waiting",
                "Lease long-polls waiting for a job in this coordinator",
            )
            .expect("a valid gauge"),
            queue_depth: IntGaugeVec::new(
                Opts::new("drover_queue_depth", "Jobs queued, per pool"),
                &["pool"],
            )
            .expect("a valid gauge"),
            queue_oldest: prometheus::GaugeVec::new(
                Opts::new(
                    "drover_queue_oldest_age_seconds",
                    "Age of the oldest queued job (since it was submitted), per pool",
                ),
                &["pool"],
            )
            .expect("a valid gauge"),
            runners_online: IntGaugeVec::new(
                Opts::new(
                    "drover_runners_online",
                    "Runners not revoked that talked to the coordinator in the last 40 s, per pool",
                ),
                &["pool"],
            )
            .expect("a valid gauge"),
            scrape_errors: IntCounterVec::new(
                Opts::new(
                    "drover_metrics_scrape_errors_total",
                    "Scrapes whose database part failed (the per-pool gauges are then left out)",
                ),
                &["part"],
            )
            .expect("a valid counter"),
        };
        let r = &m.registry;
        let all: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(lease),
            Box::new(m.lease_empty.clone()),
            Box::new(m.connections.clone()),
            Box::new(m.submit.clone()),
            Box::new(m.complete.clone()),
            Box::new(m.batch_size.clone()),
            Box::new(m.batch_seconds.clone()),
            Box::new(m.signal_lag.clone()),
            Box::new(m.signal_reconnects.clone()),
            Box::new(m.signals_sent.clone()),
            Box::new(m.lease_waiting.clone()),
            Box::new(m.queue_depth.clone()),
            Box::new(m.queue_oldest.clone()),
            Box::new(m.runners_online.clone()),
            Box::new(m.scrape_errors.clone()),
        ];
        for c in all {
            r.register(c).expect("metric names are unique");
        }
        m
    }

    /// The handles for one kind of batch (`submit`, `lease`, …), to keep.
    pub fn batch(&self, kind: &str) -> BatchMetrics {
        BatchMetrics {
            size: self.batch_size.with_label_values(&[kind]),
            seconds: self.batch_seconds.with_label_values(&[kind]),
        }
    }

    /// Sets the per-pool gauges from a fresh reading (replacing the last).
    pub fn set_pools(&self, pools: Vec<PoolReading>) {
        self.queue_depth.reset();
        self.queue_oldest.reset();
        self.runners_online.reset();
        for p in bounded(pools) {
            self.queue_depth.with_label_values(&[&p.pool]).set(p.queued);
            if let Some(age) = p.oldest_age_ms {
                self.queue_oldest
                    .with_label_values(&[&p.pool])
                    .set(age as f64 / 1000.0);
            }
            self.runners_online
                .with_label_values(&[&p.pool])
                .set(p.runners_online);
        }
    }

    /// The per-pool gauges could not be read: leave them out of this scrape.
    pub fn pools_unknown(&self) {
        self.queue_depth.reset();
        self.queue_oldest.reset();
        self.runners_online.reset();
        self.scrape_errors.with_label_values(&["pools"]).inc();
    }

    /// Everything, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "rendering metrics failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// At most [`MAX_POOL_SERIES`] pools: those with the most queued, then the
/// most runners; the rest summed (and their oldest job) as `other`.
fn bounded(mut pools: Vec<PoolReading>) -> Vec<PoolReading> {
    if pools.len() <= MAX_POOL_SERIES {
        return pools;
    }
    pools.sort_by(|a, b| {
        (b.queued, b.runners_online, &a.pool).cmp(&(a.queued, a.runners_online, &b.pool))
    });
    let rest = pools.split_off(MAX_POOL_SERIES - 1);
    pools.push(PoolReading {
        pool: "other".into(),
        queued: rest.iter().map(|p| p.queued).sum(),
        oldest_age_ms: rest.iter().filter_map(|p| p.oldest_age_ms).max(),
        runners_online: rest.iter().map(|p| p.runners_online).sum(),
    });
    pools
}

/// One kind of batch's handles.
#[derive(Clone)]
pub struct BatchMetrics {
    size: Histogram,
    seconds: Histogram,
}

impl BatchMetrics {
    pub fn written(&self, size: usize, took: Duration) {
        self.size.observe(size as f64);
        self.seconds.observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, queued: i64, age: Option<i64>, runners: i64) -> PoolReading {
        PoolReading {
            pool: name.into(),
            queued,
            oldest_age_ms: age,
            runners_online: runners,
        }
    }

    #[test]
    fn pools_past_the_limit_add_up_under_other() {
        let few = vec![pool("a", 1, Some(5), 0)];
        assert_eq!(bounded(few.clone()), few);
        let many: Vec<PoolReading> = (0..MAX_POOL_SERIES as i64 + 10)
            .map(|i| pool(&format!("rt_{i:04}"), i, Some(i * 10), 1))
            .collect();
        let shown = bounded(many);
        assert_eq!(shown.len(), MAX_POOL_SERIES);
        let top = &shown[0];
        assert_eq!(top.pool, format!("rt_{:04}", MAX_POOL_SERIES + 9));
        let other = shown.last().unwrap();
        assert_eq!(other.pool, "other");
        // The 11 smallest: 0..=10.
        assert_eq!(other.queued, (0..=10).sum::<i64>());
        assert_eq!(other.runners_online, 11);
        assert_eq!(other.oldest_age_ms, Some(100));
    }

    #[test]
    fn renders_the_text_format() {
        let m = Metrics::new();
        m.submit.observe(0.002);
        use store::observe::Observer as _;
        m.batch_written("lease", 3, Duration::from_millis(1));
        m.set_pools(vec![pool("rt_1", 2, Some(1500), 1)]);
        let text = m.render();
        assert!(
            text.contains("# TYPE drover_submit_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("drover_submit_seconds_count 1"), "{text}");
        assert!(
            text.contains(r#"drover_batch_size_sum{kind="lease"} 3"#),
            "{text}"
        );
        // Every kind the store writes shows before its first batch.
        for kind in store::observe::BATCH_KINDS
            .iter()
            .filter(|k| **k != "lease")
        {
            let never = format!("drover_batch_size_count{{kind=\"{kind}\"}} 0");
            assert!(text.contains(&never), "{never}: {text}");
        }
        assert!(
            text.contains(r#"drover_queue_depth{pool="rt_1"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"drover_queue_oldest_age_seconds{pool="rt_1"} 1.5"#),
            "{text}"
        );
        m.set_pools(Vec::new());
        assert!(!m.render().contains("rt_1"), "a pool gone is gone");
    }
}
