//! The App as `serve --github-…` configures it: its hosts (github.com and
//! GitHub Enterprise Server) and its key and OAuth client.

use std::sync::Arc;

use super::{AppKey, GITHUB_COM};
use crate::ids::Secret;

/// One GitHub: github.com or a GitHub Enterprise Server host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `github.com`, or the GHE host name (`ghe.example.com`).
    pub name: String,
    /// The REST API base, without a trailing `/`.
    pub api: String,
    /// The web base (install pages, OAuth, repository URLs).
    pub web: String,
}

impl Host {
    /// `HOST=API_BASE` (`--github-host`); the web base is the API base
    /// without its trailing `/api/v3`.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let (name, api) = s
            .split_once('=')
            .ok_or("give HOST=API_BASE, e.g. ghe.example.com=https://ghe.example.com/api/v3")?;
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty()
            || name == GITHUB_COM
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
        {
            return Err(format!(
                "{name:?} is not a GitHub Enterprise Server host name"
            ));
        }
        let api = base_url(api)?;
        let web = api.strip_suffix("/api/v3").unwrap_or(&api).to_owned();
        Ok(Self { name, api, web })
    }

    /// Whether install pages live under `/github-apps/` (GHE) or `/apps/`.
    pub(super) fn apps_path(&self) -> &'static str {
        if self.name == GITHUB_COM {
            "apps"
        } else {
            "github-apps"
        }
    }
}

/// An `http(s)://` base URL, without its trailing `/`.
pub fn base_url(s: &str) -> std::result::Result<String, String> {
    let s = s.trim();
    if !(s.starts_with("https://") || s.starts_with("http://"))
        || s.contains(['?', '#', ' '])
        || s.chars().any(char::is_control)
    {
        return Err(format!("{s:?} is not an http(s) base URL"));
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// The App, as `serve --github-…` configures it.
#[derive(Clone)]
pub struct AppConfig {
    pub app_id: u64,
    pub slug: String,
    pub key: Arc<AppKey>,
    pub client_id: String,
    pub client_secret: Secret,
    /// github.com first, then the GHE hosts.
    pub hosts: Vec<Host>,
    /// The App's webhook secret (`--github-webhook-secret-file`): without
    /// it, webhook deliveries are refused.
    pub webhook_secret: Option<Secret>,
}

impl std::fmt::Debug for AppConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppConfig")
            .field("app_id", &self.app_id)
            .field("slug", &self.slug)
            .field("client_id", &self.client_id)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ghe_hosts_parse() {
        let h = Host::parse("GHE.example.com=https://ghe.example.com/api/v3/").unwrap();
        assert_eq!(h.name, "ghe.example.com");
        assert_eq!(h.api, "https://ghe.example.com/api/v3");
        assert_eq!(h.web, "https://ghe.example.com");
        assert!(Host::parse("github.com=https://x").is_err());
        assert!(Host::parse("ghe.example.com").is_err());
        assert!(Host::parse("a b=https://x").is_err());
        assert!(Host::parse("ghe=ftp://x").is_err());
    }
}
