//! `Application::build(config)` binds the listener (port 0 works) and wires
//! the store, the hub and the lease reaper together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::dispatch::Hub;
use crate::http::{self, AppState};
use crate::store::{Durability, Store};

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub database_url: String,
    pub durability: Durability,
    /// A lease ends this long after its last heartbeat.
    pub lease_ttl: Duration,
}

pub struct Application {
    listener: TcpListener,
    state: AppState,
    stop: watch::Sender<bool>,
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let store = Store::open(&config.database_url, config.durability)
            .await
            .with_context(|| format!("opening the database {}", config.database_url))?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ttl_ms = config.lease_ttl.as_millis() as u64;
        let extended = store.extend_live_leases(clock.now_ms(), ttl_ms).await?;
        if extended > 0 {
            tracing::info!(
                leases = extended,
                "gave live leases a fresh TTL after start-up"
            );
        }
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let (stop, shutdown) = watch::channel(false);
        let state = AppState {
            store,
            hub: Arc::new(Hub::default()),
            clock,
            lease_ttl: config.lease_ttl,
            shutdown,
        };
        Ok(Self {
            listener,
            state,
            stop,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests end
    /// (long-polls answer at once) and closes the database.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            listener,
            state,
            stop,
        } = self;
        let reaper = tokio::spawn(reap_expired_leases(state.clone()));
        let app = http::router(state.clone());
        let stop_for_signal = stop.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                let _ = stop_for_signal.send(true);
            })
            .await?;
        let _ = stop.send(true);
        let _ = reaper.await;
        state.store.close().await;
        Ok(())
    }
}

/// Re-queues jobs whose runner stopped heartbeating. Sleeps until the next
/// lease could expire (at most a second), so expiry is prompt but cheap.
async fn reap_expired_leases(st: AppState) {
    loop {
        let now = st.now();
        match st.store.expire_leases(now).await {
            Ok(expired) => {
                for (job, wake) in expired {
                    tracing::info!(job = %job, requeued = wake.is_some(), "lease expired");
                    st.hub.job_changed(job.as_str());
                    if let Some(wake) = wake {
                        st.hub.wake(&wake);
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "expiring leases failed"),
        }
        let next = st.store.next_expiry().await.ok().flatten();
        let sleep_ms = next.map_or(1000, |at| (at - st.now() + 1).clamp(10, 1000));
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(sleep_ms as u64)) => {}
            _ = st.shutting_down() => return,
        }
    }
}
