//! How a client reaches its coordinator: which roots it trusts (the
//! operating system's, plus a private CA's PEM bundle), which URLs it
//! accepts, and errors that name their cause (connection refused, a TLS
//! failure in plain words, an answer that is not a Drover coordinator's).

use std::error::Error as _;
use std::io;
use std::path::{Path, PathBuf};

use reqwest::{StatusCode, Url};

use super::ClientError;

/// How a [`Client`](crate::client::Client) connects. The operating
/// system's trusted roots (its CA store, where a company CA is installed)
/// are trusted for an `https://` coordinator (a plain-HTTP one loads none);
/// `ca_file` adds more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOptions {
    /// A PEM file of CA certificates trusted besides the system's roots
    /// (`--ca-file` / `DROVER_CA_FILE`): for a coordinator whose
    /// certificate a private CA signed.
    pub ca_file: Option<PathBuf>,
}

impl ClientOptions {
    /// A reqwest client builder trusting these roots, for an embedder's
    /// own HTTPS calls to the coordinator. Fails (before any request) if
    /// the CA file cannot be read or holds no certificate.
    pub fn http_builder(&self) -> Result<reqwest::ClientBuilder, ClientError> {
        let mut builder = reqwest::Client::builder();
        if let Some(path) = &self.ca_file {
            for cert in read_ca_file(path)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(builder)
    }
}

/// The certificates of a PEM bundle; errors name the file.
fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let pem = std::fs::read(path).map_err(|e| {
        ClientError::Config(format!("cannot read the CA file {}: {e}", path.display()))
    })?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
        ClientError::Config(format!(
            "the CA file {} is not a PEM bundle: {}",
            path.display(),
            e.source().map_or_else(|| e.to_string(), |s| s.to_string())
        ))
    })?;
    if certs.is_empty() {
        return Err(ClientError::Config(format!(
            "the CA file {} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

/// A coordinator URL, checked before any request: `http://` or
/// `https://`, a host, no user, query or fragment. Returned without a
/// trailing `/`.
pub(crate) fn check_url(url: &str) -> Result<String, ClientError> {
    let bad = |why: &str| {
        ClientError::Config(format!(
            "the coordinator URL {url:?} is malformed: {why} (expected e.g. https://ci.example.com)"
        ))
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it holds whitespace or control characters"));
    }
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(bad("it must start with http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("it must not hold a user or password"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("it must not have a query or a fragment"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The warning to show for a plain `http://` URL to another machine
/// (tokens would cross the network in clear text); `None` for `https://`
/// and for loopback (`localhost`, `127.0.0.0/8`, `::1`).
pub fn cleartext_warning(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    if parsed.scheme() != "http" {
        return None;
    }
    let host = parsed.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    };
    (!loopback).then(|| {
        format!(
            "warning: {url} is plain http:// to another machine: tokens and job env would travel in clear text; use https://"
        )
    })
}

/// `scheme://host:port` of a request's URL, for messages (never a path,
/// which may hold an id, nor a query).
fn origin(url: Option<&Url>) -> String {
    url.map_or_else(
        || "the coordinator".to_owned(),
        |u| u.origin().ascii_serialization(),
    )
}

/// A failed request as an error that names its cause.
pub(crate) fn classify(e: reqwest::Error) -> ClientError {
    let url = origin(e.url());
    let plain_http = e.url().is_some_and(|u| u.scheme() == "http");
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    let mut chain = Vec::new();
    while let Some(c) = cause {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return ClientError::Tls {
                url,
                reason: tls_reason(tls),
            };
        }
        let text = c.to_string();
        if !chain.iter().any(|t: &String| t.contains(&text)) {
            chain.push(text);
        }
        cause = match c.downcast_ref::<io::Error>() {
            Some(io) => {
                match io.kind() {
                    io::ErrorKind::ConnectionRefused => {
                        return ClientError::Transport(format!(
                            "{url}: connection refused (is the coordinator running there, and is the URL right?)"
                        ));
                    }
                    io::ErrorKind::ConnectionReset if !plain_http => {
                        return ClientError::Transport(format!(
                            "{url}: the connection was reset (during the TLS handshake: does it serve https, or does a firewall cut it?)"
                        ));
                    }
                    _ => {}
                }
                // `io::Error::source` skips the error it wraps (where
                // tokio-rustls puts rustls's): look at that one itself.
                match io.get_ref() {
                    Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                    None => c.source(),
                }
            }
            None => c.source(),
        };
    }
    if e.is_timeout() {
        return ClientError::Transport(format!("{url}: no answer in time (timed out)"));
    }
    let mut message = format!("{url}: {}", chain.join(": "));
    if plain_http && !e.is_connect() {
        message.push_str(" (if the coordinator serves TLS, use an https:// URL)");
    }
    ClientError::Transport(message)
}

/// Why a handshake failed, in plain words.
fn tls_reason(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "the server's certificate is signed by an unknown authority (unknown issuer): trust its CA with --ca-file FILE (DROVER_CA_FILE) or in the system's CA store".into(),
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired (renew it)".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet (check the clocks)".into(),
            C::NotValidForName => "the server's certificate is not valid for the host name in the URL (name mismatch)".into(),
            C::NotValidForNameContext { expected, presented } => format!(
                "the server's certificate is not valid for the host name in the URL (name mismatch): the URL names {}, the certificate {}",
                expected.to_str(),
                if presented.is_empty() {
                    "no name".to_owned()
                } else {
                    presented.iter().map(|p| presented_name(p)).collect::<Vec<_>>().join(", ")
                }
            ),
            C::Revoked => "the server's certificate has been revoked".into(),
            C::BadSignature => "the server's certificate has a bad signature".into(),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "the server's certificate is not for a TLS server (its extended key usage)".into()
            }
            other => format!("the server's certificate is invalid: {other}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the server did not answer with TLS (is it plain http://? then use an http:// URL, or give the coordinator --tls-cert and --tls-key)".into()
        }
        rustls::Error::AlertReceived(alert) => {
            format!("the server refused the TLS handshake (alert: {alert:?})")
        }
        other => format!("the TLS handshake failed: {other}"),
    }
}

/// `localhost` for webpki's `DnsName("localhost")`, `10.0.0.1` for
/// `IpAddress(10.0.0.1)`; anything else as it is.
fn presented_name(p: &str) -> &str {
    p.strip_prefix("DnsName(\"")
        .and_then(|r| r.strip_suffix("\")"))
        .or_else(|| {
            p.strip_prefix("IpAddress(")
                .and_then(|r| r.strip_suffix(')'))
        })
        .unwrap_or(p)
}

/// What a non-Drover answer was, for [`ClientError::NotDrover`].
pub(crate) fn describe_answer(status: StatusCode, html: bool, body: &[u8]) -> String {
    let status = match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    };
    if html {
        let text = String::from_utf8_lossy(body);
        let title = text
            .split_once("<title>")
            .and_then(|(_, rest)| rest.split_once("</title>"))
            .map(|(t, _)| t.trim().chars().take(80).collect::<String>())
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => format!("{status} and an HTML page ({t:?})"),
            None => format!("{status} and an HTML page"),
        };
    }
    if body.is_empty() {
        return format!("{status} and no body");
    }
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(120)
        .collect();
    format!("{status} and {text:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_before_any_request() {
        assert_eq!(
            check_url("https://ci.example.com/").unwrap(),
            "https://ci.example.com"
        );
        assert_eq!(
            check_url("http://127.0.0.1:7700/drover").unwrap(),
            "http://127.0.0.1:7700/drover"
        );
        for bad in [
            "ci.example.com",
            "ftp://ci.example.com",
            "https://",
            "https:// ci.example.com",
            "https://user:pw@ci.example.com",
            "https://ci.example.com/?x=1",
            "http://[::1",
            "https://ci.example.com:99999",
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(matches!(e, ClientError::Config(_)), "{bad}: {e:?}");
            assert!(e.to_string().contains("malformed"), "{bad}: {e}");
        }
    }

    #[test]
    fn plain_http_warns_unless_loopback() {
        for quiet in [
            "https://ci.example.com",
            "http://127.0.0.1:7700",
            "http://127.1.2.3",
            "http://localhost:7700",
            "http://[::1]:7700",
        ] {
            assert_eq!(cleartext_warning(quiet), None, "{quiet}");
        }
        for loud in ["http://ci.example.com", "http://10.0.0.2:7700"] {
            let w = cleartext_warning(loud).expect(loud);
            assert!(w.contains("clear text") && w.contains("https://"), "{w}");
        }
    }

    #[test]
    fn answers_are_described_without_their_whole_body() {
        let page = b"<html><head><title>501 Not Implemented</title></head><body>...</body></html>";
        assert_eq!(
            describe_answer(StatusCode::NOT_IMPLEMENTED, true, page),
            "501 Not Implemented and an HTML page (\"501 Not Implemented\")"
        );
        assert_eq!(
            describe_answer(StatusCode::BAD_GATEWAY, false, b""),
            "502 Bad Gateway and no body"
        );
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = std::env::temp_dir().join(format!("drover-ca-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = ClientOptions {
            ca_file: Some(dir.join("missing.pem")),
        };
        let e = missing.http_builder().unwrap_err().to_string();
        assert!(
            e.contains("cannot read the CA file") && e.contains("missing.pem"),
            "{e}"
        );
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = ClientOptions {
            ca_file: Some(empty),
        }
        .http_builder()
        .unwrap_err()
        .to_string();
        assert!(e.contains("holds no certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
