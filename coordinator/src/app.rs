//! `Application::build(config)` binds the listener (port 0 works) and wires
//! the store, the hub, the lease reaper, the purge of old history and (on
//! PostgreSQL) the replica signal listener together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::dispatch::Hub;
use crate::http::rate_limit::RateLimiter;
use crate::http::{self, AppState, Probes, RequestLimits};
use crate::ids::new_id;
use crate::retention::{self, Retention};
use crate::secrets::{self, KeySource};
use crate::server::{self, ServeLimits};
use crate::service::Services;
use crate::store::{self, Backend, Durability, Envelope, Store};
use crate::wake::Signal;

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// `sqlite://PATH` or `postgres://…`.
    pub database_url: String,
    pub durability: Durability,
    /// A lease ends this long after its last heartbeat.
    pub lease_ttl: Duration,
    /// The keys that seal job env at rest.
    pub secrets: KeySource,
    /// Connections, timeouts, body memory, load shedding, shutdown deadline.
    pub serve: ServeLimits,
    /// If set, `/metrics` wants this bearer token.
    pub metrics_token: Option<String>,
    /// How long finished jobs are kept (see `retention`).
    pub retention: Retention,
    /// How the coordinator names itself in links (checked by
    /// [`parse_public_url`]); `None`: from the bound listen address.
    pub public_url: Option<String>,
    /// The workspace GitHub App (`serve --github-…`), if any.
    pub github: Option<crate::github::AppConfig>,
    /// How often GitHub runners GitHub refused to remove (busy) are retried.
    pub github_retry: Duration,
    /// How often on-demand pools look for workflow jobs to serve (a
    /// webhook wakes them at once).
    pub github_on_demand: Duration,
    /// How often on-demand pools ask GitHub for queued workflow jobs
    /// (webhooks cannot reach every coordinator); `None`: never.
    pub github_poll: Option<Duration>,
    /// The GitHub Actions OIDC issuer CI tokens come from.
    pub oidc_issuer: String,
    /// The audience CI tokens must name; `None`: the public URL.
    pub oidc_audience: Option<String>,
    /// Serve HTTPS with this certificate and key (`--tls-cert`/`--tls-key`);
    /// `None`: plain HTTP (e.g. behind a reverse proxy that holds TLS).
    pub tls: Option<crate::tls::TlsFiles>,
    /// CA certificates (PEM) the coordinator's own HTTPS calls trust
    /// besides the system's (`--ca-file`).
    pub ca_file: Option<std::path::PathBuf>,
}

/// A public URL as given to `serve --public-url`: `http://` or `https://`,
/// a host, no query, fragment, whitespace or control characters. Returned
/// without a trailing `/`.
pub fn parse_public_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or("it must start with http:// or https://")?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return Err("it must name a host (and no user), e.g. https://ci.example.com".into());
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it must not hold whitespace or control characters".into());
    }
    if s.contains(['?', '#']) {
        return Err("it must not have a query or a fragment".into());
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// The URL links name when `--public-url` is not given: the address bound,
/// with a loopback host for an unspecified one (`0.0.0.0`, `::`), and
/// `https://` when serving TLS.
fn default_public_url(bound: SocketAddr, https: bool) -> String {
    let mut addr = bound;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
        tracing::warn!(
            "listening on every address: links will name {addr}; set --public-url to name this coordinator"
        );
    }
    let scheme = if https { "https" } else { "http" };
    format!("{scheme}://{addr}")
}

pub struct Application {
    listener: TcpListener,
    tls: Option<Arc<crate::tls::Tls>>,
    state: AppState,
    stop: watch::Sender<bool>,
    limits: ServeLimits,
    retention: Retention,
    github_retry: Duration,
    github_on_demand: Duration,
    github_poll: Option<Duration>,
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        crate::metrics::install();
        // The URL may hold a password: name only its scheme.
        let store = Store::open(&config.database_url, config.durability)
            .await
            .with_context(|| {
                format!(
                    "opening the {} database",
                    store::scheme(&config.database_url)
                )
            })?;
        open_secrets(&store, &config).await?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        if store.backend() == Backend::Sqlite {
            // One coordinator: while it was down no runner could heartbeat,
            // so live leases get a fresh TTL instead of expiring at once.
            // (Replicas on PostgreSQL keep serving while one restarts.)
            let extended = store
                .extend_live_leases(clock.now_ms(), config.lease_ttl.as_millis() as u64)
                .await?;
            if extended > 0 {
                tracing::info!(
                    leases = extended,
                    "gave live leases a fresh TTL after start-up"
                );
            }
        }
        let tls = match &config.tls {
            Some(files) => Some(Arc::new(crate::tls::Tls::load(files.clone())?)),
            None => None,
        };
        let roots = crate::tls::OutboundRoots::load(config.ca_file.as_deref())?;
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let public_url = match &config.public_url {
            Some(url) => parse_public_url(url)
                .map_err(|e| anyhow::anyhow!("invalid public URL {url:?}: {e}"))?,
            None => default_public_url(listener.local_addr()?, tls.is_some()),
        };
        let (stop, shutdown) = watch::channel(false);
        let svc = Services {
            store,
            hub: Arc::new(Hub::default()),
            clock: clock.clone(),
            lease_ttl: config.lease_ttl,
            shutdown,
            replica: new_id("co").into(),
            runners: Arc::default(),
            public_url: public_url.clone().into(),
            on_demand: Arc::default(),
            oidc: Arc::new(crate::github::oidc::Oidc::new(
                crate::github::oidc::OidcConfig {
                    issuer: config.oidc_issuer.clone(),
                    audience: config
                        .oidc_audience
                        .clone()
                        .unwrap_or_else(|| public_url.clone()),
                },
                clock.clone(),
                &roots,
            )?),
            github: match config.github {
                Some(app) => Some(Arc::new(crate::github::GithubApp::new(
                    app,
                    clock.clone(),
                    &roots,
                )?)),
                None => None,
            },
        };
        let state = AppState {
            svc,
            limits: Arc::new(RequestLimits::new(
                config.serve.body_memory,
                config.serve.body_timeout,
                config.serve.max_reads,
                config.serve.read_wait,
                config.serve.max_reads_per_member,
            )),
            probes: Arc::new(Probes::new(config.metrics_token.as_deref())),
            redeem_limit: Arc::new(RateLimiter::for_redeems()),
        };
        Ok(Self {
            listener,
            tls,
            state,
            stop,
            limits: config.serve,
            retention: config.retention,
            github_retry: config.github_retry,
            github_on_demand: config.github_on_demand,
            github_poll: config.github_poll,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests end
    /// (long-polls answer at once) within the shutdown deadline, and closes
    /// the database.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            listener,
            tls,
            state,
            stop,
            limits,
            retention,
            github_retry,
            github_on_demand,
            github_poll,
        } = self;
        let reaper = tokio::spawn(reap_expired_leases(state.svc.clone()));
        let purger = tokio::spawn(retention::purge_in_background(state.svc.clone(), retention));
        let signals = tokio::spawn(listen_to_replicas(state.svc.clone()));
        let replicas = tokio::spawn(look_for_replicas(state.svc.clone()));
        let github = tokio::spawn(retry_github_removals(state.svc.clone(), github_retry));
        let on_demand = tokio::spawn(crate::service::on_demand::serve_in_background(
            state.svc.clone(),
            github_on_demand,
        ));
        let poller = github_poll.map(|every| {
            tokio::spawn(crate::service::on_demand::poll_in_background(
                state.svc.clone(),
                every,
            ))
        });
        let routers = server::Routers {
            all: http::router(state.clone()),
            runners_only: http::runner_router(state.clone()),
        };
        let stopping = server::serve(listener, routers, &limits, tls, shutdown, &stop).await;
        let _ = stop.send(true);
        let _ = reaper.await;
        let _ = purger.await;
        let _ = signals.await;
        let _ = replicas.await;
        let _ = github.await;
        let _ = on_demand.await;
        if let Some(poller) = poller {
            let _ = poller.await;
        }
        // Requests still running past the deadline may hold connections:
        // closing waits for them only as long as the deadline has left.
        let left = limits.shutdown_timeout.saturating_sub(stopping.elapsed());
        // What the last requests announced goes out to the other replicas.
        let _ = tokio::time::timeout(left, state.store.flush_signals(&state.replica)).await;
        // What `serve` left of the deadline (`server::closing_reserve`):
        // the process exits within the deadline, closed or not.
        let left = limits.shutdown_timeout.saturating_sub(stopping.elapsed());
        if tokio::time::timeout(left, state.store.close())
            .await
            .is_err()
        {
            tracing::warn!("the database did not close in time; exiting anyway");
        }
        Ok(())
    }
}

/// Gives the store its keys, refusing to start if stored env is sealed under
/// a key they lack; seals env that earlier versions stored in plain text.
async fn open_secrets(store: &Store, config: &Config) -> anyhow::Result<()> {
    let keys = secrets::load(&config.secrets, &config.database_url)?;
    let current = keys.current_id().to_owned();
    store.set_secrets(keys);
    if let Some((job, key)) = store.env_sealed_with_unknown_key().await? {
        anyhow::bail!(
            "job {job}'s env is sealed with secret key {key:?}, which the given keys lack: \
             add that key (after the current one) to the key file or DROVER_SECRET_KEY"
        );
    }
    let sealed = store.seal_plain_env().await?;
    if sealed > 0 {
        tracing::info!(
            jobs = sealed,
            "sealed job env stored in plain text by an earlier version"
        );
    }
    tracing::info!(key = %current, "job env is sealed with this secret key");
    Ok(())
}

/// Re-queues jobs whose runner stopped heartbeating. Sleeps until the next
/// lease could expire (at most a second), so expiry is prompt but cheap.
/// Removes, now and then, the GitHub runners of revoked runners that
/// GitHub kept (busy) or could not be reached for.
async fn retry_github_removals(st: Services, every: Duration) {
    if st.github.is_none() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = st.shutting_down() => return,
        }
        crate::service::github::retry_removals(&st).await;
    }
}

async fn reap_expired_leases(st: Services) {
    loop {
        let now = st.now();
        match st.store.expire_leases(now).await {
            Ok(expired) => {
                let mut signals = Vec::new();
                for (job, wake) in expired {
                    tracing::info!(job = %job, requeued = wake.is_some(), "lease expired");
                    signals.push(Signal::Job {
                        job: job.to_string(),
                    });
                    signals.extend(wake.map(Signal::from));
                }
                st.announce(signals);
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

/// On PostgreSQL: applies the other replicas' signals to this hub. When the
/// link breaks, signals sent meanwhile are lost; so once a new `LISTEN` is in
/// place, every local waiter and follower looks at the database again (what
/// committed before is found there, what commits after is signalled).
async fn listen_to_replicas(st: Services) {
    let mut first = true;
    loop {
        let Some(mut listener) = connect_listener(&st).await else {
            return;
        };
        if !std::mem::take(&mut first) {
            crate::metrics::get().signal_reconnects.inc();
            st.look_again();
        }
        loop {
            let received = tokio::select! {
                r = listener.try_recv() => r,
                _ = st.shutting_down() => return,
            };
            match received {
                Ok(Some(n)) => match serde_json::from_str::<Envelope>(n.payload()) {
                    Ok(envelope) if *envelope.origin != *st.replica => {
                        if let Some(ms) = st.store.signal_age_ms(&envelope, st.now()) {
                            crate::metrics::get().signal_lag.observe(ms as f64 / 1000.0);
                        }
                        for signal in &envelope.signals {
                            st.apply(signal);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "unreadable replica signal"),
                },
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "replica signal link failed; reconnecting");
                    break;
                }
            }
        }
    }
}

/// On PostgreSQL: looks for other replicas a few times a second. While none
/// listens, this one sends no signals; when one appears, it is first told to
/// look again (what this one did not signal meanwhile is in the database).
async fn look_for_replicas(st: Services) {
    if !st.store.has_replicas() {
        return;
    }
    loop {
        match st.store.look_for_replicas().await {
            Ok(true) => {
                if let Err(e) = st.store.publish(&st.replica, &[Signal::LookAgain]).await {
                    tracing::warn!(error = %e, "could not tell a new replica to look again");
                }
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not look for other replicas"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = st.shutting_down() => return,
        }
    }
}

/// A listener on the signal channel, retried until it works; `None` on
/// SQLite or at shutdown.
async fn connect_listener(st: &Services) -> Option<sqlx::postgres::PgListener> {
    loop {
        match st.store.listener().await {
            Ok(listener) => return listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other replicas yet");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = st.shutting_down() => return None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{default_public_url, parse_public_url};

    #[test]
    fn public_urls_are_http_with_a_host() {
        assert_eq!(
            parse_public_url("https://ci.example.com/drover/").unwrap(),
            "https://ci.example.com/drover"
        );
        assert_eq!(
            parse_public_url("http://10.0.0.2:7700").unwrap(),
            "http://10.0.0.2:7700"
        );
        for bad in [
            "ci.example.com",
            "ftp://x",
            "https://",
            "https:///path",
            "http://a b",
            "http://x/?q",
            "http://u@x",
        ] {
            assert!(parse_public_url(bad).is_err(), "{bad}");
        }
        assert_eq!(
            default_public_url("0.0.0.0:7700".parse().unwrap(), false),
            "http://127.0.0.1:7700"
        );
        assert_eq!(
            default_public_url("[::1]:80".parse().unwrap(), false),
            "http://[::1]:80"
        );
        assert_eq!(
            default_public_url("127.0.0.1:7443".parse().unwrap(), true),
            "https://127.0.0.1:7443"
        );
    }
}
