//! TLS: serving HTTPS with `serve --tls-cert FILE --tls-key FILE` (rustls),
//! and the roots the coordinator's own HTTPS calls trust.
//!
//! The certificate and key are PEM files, read at start (a bad file stops
//! the start with an error naming it) and again when they change: each
//! handshake looks at the files' metadata at most once a second, and a
//! changed pair is loaded for the connections that follow. A pair that
//! cannot be used (unreadable, not PEM, a key that does not match the
//! certificate, as while a renewal has written one file of two) is logged
//! once and the previous pair stays in service. A handshake must end within
//! the header timeout, so half-open handshakes cannot hold connections.
//!
//! Outbound (the GitHub API, the OIDC issuer's keys): the system's roots,
//! plus `--ca-file` (e.g. a GitHub Enterprise Server with a private CA).

use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How often, at most, the files are looked at for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// The certificate chain and private key files (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate first, then its intermediates.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The serving TLS configuration, reloaded when its files change.
pub struct Tls {
    files: TlsFiles,
    state: Mutex<State>,
}

struct State {
    config: Arc<ServerConfig>,
    /// The files' stamp last loaded or tried (a failed try is not retried,
    /// nor logged again, until the files change again).
    tried: Option<Stamp>,
    checked: Instant,
}

/// What tells that a file changed: its inode (a renewal that renames or
/// relinks), size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp([(u64, u64, i64, i64, u64); 2]);

fn stamp(files: &TlsFiles) -> Option<Stamp> {
    let one = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
    };
    Some(Stamp([one(&files.cert)?, one(&files.key)?]))
}

impl Tls {
    /// Reads the pair; the error names the file at fault.
    pub fn load(files: TlsFiles) -> anyhow::Result<Self> {
        let tried = stamp(&files);
        let config = server_config(&files).map_err(anyhow::Error::msg)?;
        Ok(Self {
            files,
            state: Mutex::new(State {
                config: Arc::new(config),
                tried,
                checked: Instant::now(),
            }),
        })
    }

    /// The configuration for the next handshake, reloaded first if the
    /// files changed (looked at once a second at most).
    fn current(&self) -> Arc<ServerConfig> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.checked.elapsed() >= RELOAD_CHECK {
            st.checked = Instant::now();
            let now = stamp(&self.files);
            if now.is_some() && now != st.tried {
                st.tried = now;
                match server_config(&self.files) {
                    Ok(config) => {
                        st.config = Arc::new(config);
                        tracing::info!(
                            cert = %self.files.cert.display(),
                            "loaded the changed TLS certificate and key"
                        );
                    }
                    Err(error) => tracing::error!(
                        %error,
                        "the changed TLS certificate or key cannot be used; still serving the previous pair"
                    ),
                }
            }
        }
        st.config.clone()
    }
}

/// A rustls server configuration from the pair; errors name the file.
fn server_config(files: &TlsFiles) -> Result<ServerConfig, String> {
    let (cert_path, key_path) = (files.cert.display(), files.key.display());
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| format!("the TLS certificate file {cert_path}: {}", pem_error(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the TLS certificate file {cert_path}: {}", pem_error(e)))?;
    if certs.is_empty() {
        return Err(format!(
            "the TLS certificate file {cert_path} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "the TLS key file {key_path} holds no private key (expected PEM: -----BEGIN PRIVATE KEY-----)"
        ),
        e => format!("the TLS key file {key_path}: {}", pem_error(e)),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "the TLS key file {key_path} is not the key of the certificate in {cert_path}"
            ),
            e => format!("the TLS certificate {cert_path} or key {key_path}: {e}"),
        })?;
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => format!("cannot read it: {e}"),
        e => format!("not valid PEM: {e:?}"),
    }
}

/// A client connection: plain TCP, or TLS over it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// `tcp` as served: as is without TLS; else after a handshake that
    /// must end within `timeout` and before a shutdown. `None`: the
    /// handshake failed, timed out or was cut short (logged at debug).
    pub async fn accept(
        tcp: TcpStream,
        tls: Option<&Tls>,
        timeout: Duration,
        stopping: &mut watch::Receiver<bool>,
    ) -> Option<Self> {
        let Some(tls) = tls else {
            return Some(Self::Plain(tcp));
        };
        let handshake = TlsAcceptor::from(tls.current()).accept(tcp);
        tokio::select! {
            done = tokio::time::timeout(timeout, handshake) => match done {
                Ok(Ok(stream)) => Some(Self::Tls(Box::new(stream))),
                Ok(Err(error)) => {
                    tracing::debug!(%error, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!("TLS handshake timed out");
                    None
                }
            },
            _ = stopping.wait_for(|s| *s) => None,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The roots the coordinator's own HTTPS calls trust: the system's, plus
/// the certificates of `--ca-file`.
#[derive(Clone, Default)]
pub struct OutboundRoots(Vec<reqwest::Certificate>);

impl OutboundRoots {
    /// Reads `--ca-file` (PEM); the error names the file.
    pub fn load(ca_file: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = ca_file else {
            return Ok(Self::default());
        };
        let pem = std::fs::read(path)
            .with_context(|| format!("reading the CA file {}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("the CA file {} is not a PEM bundle", path.display()))?;
        if certs.is_empty() {
            anyhow::bail!(
                "the CA file {} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
                path.display()
            );
        }
        Ok(Self(certs))
    }

    /// A client builder trusting these roots.
    pub fn builder(&self) -> reqwest::ClientBuilder {
        self.0
            .iter()
            .cloned()
            .fold(reqwest::Client::builder(), |b, cert| {
                b.add_root_certificate(cert)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_named() {
        let dir = std::env::temp_dir().join(format!("drover-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        let e = Tls::load(files.clone()).err().unwrap().to_string();
        assert!(e.contains("cert.pem") && e.contains("cannot read"), "{e}");
        std::fs::write(&cert, "hello\n").unwrap();
        let e = Tls::load(files.clone()).err().unwrap().to_string();
        assert!(
            e.contains("cert.pem") && e.contains("no certificate"),
            "{e}"
        );
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(&key, "no key here\n").unwrap();
        let e = Tls::load(files).err().unwrap().to_string();
        assert!(e.contains("key.pem") && e.contains("no private key"), "{e}");
        let e = OutboundRoots::load(Some(&key)).err().unwrap().to_string();
        assert!(e.contains("key.pem") && e.contains("no certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
