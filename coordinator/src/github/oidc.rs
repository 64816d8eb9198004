//! GitHub Actions OIDC tokens as a CI principal: RS256 JWTs from the
//! configured issuer, checked against the issuer's JWKS (found through its
//! OpenID configuration, cached, fetched again on an unknown `kid`), for
//! our audience, unexpired, naming a repository.
//!
//! The JWKS is fetched at most once a second, whatever the issuer answers
//! (a failure counts): a flood of made-up `kid`s cannot make the
//! coordinator hammer the issuer. The fetch runs as its own task with no
//! lock held: a token whose key is cached never waits on it, and tokens
//! that wait for it share the one fetch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
use serde::Deserialize;

use crate::clock::Clock;

/// Clock skew allowed on `nbf` and `iat` (not on `exp`).
const LEEWAY_S: i64 = 60;

/// The JWKS is fetched at most this often (a failed fetch counts).
const REFRESH_EVERY_MS: i64 = 1000;

/// Longest token accepted.
pub const MAX_TOKEN_LEN: usize = 8192;

#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The `iss` tokens must carry; its `/.well-known/openid-configuration` names the JWKS.
    pub issuer: String,
    /// The `aud` tokens must carry.
    pub audience: String,
}

/// What a valid token says.
#[derive(Debug, Clone)]
pub struct CiClaims {
    /// `owner/name`.
    pub repository: String,
    pub repository_id: i64,
    /// `ref`: the branch or tag the run is for (`refs/heads/main`,
    /// `refs/pull/7/merge`).
    pub git_ref: Option<String>,
    /// `event_name`: what started the run (`push`, `pull_request`, …).
    pub event_name: Option<String>,
}

/// An RSA public key: (n, e).
type Key = (Vec<u8>, Vec<u8>);

/// One JWKS fetch, awaited by every token that waits for it.
type Fetch = Shared<BoxFuture<'static, Result<(), Refusal>>>;

struct Keys {
    by_kid: HashMap<String, Key>,
    /// When the last fetch started (Unix ms), whatever it got.
    fetched_at: Option<i64>,
    /// The fetch under way, if one is.
    fetching: Option<Fetch>,
}

pub struct Oidc {
    pub config: OidcConfig,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    /// Never held across an await.
    keys: Arc<Mutex<Keys>>,
}

/// Why a token was refused: a sentence for the 401's message.
pub type Refusal = String;

/// Whether `token` has the shape of a JWT (and so is not one of ours).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|b| *b == b'.').count() == 2
}

fn decode_json<T: for<'de> Deserialize<'de>>(part: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    aud: Audience,
    exp: i64,
    nbf: Option<i64>,
    iat: Option<i64>,
    repository: Option<String>,
    /// GitHub sends it as a string.
    repository_id: Option<serde_json::Value>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    event_name: Option<String>,
}

impl Oidc {
    pub fn new(
        config: OidcConfig,
        clock: Arc<dyn Clock>,
        roots: &crate::tls::OutboundRoots,
    ) -> anyhow::Result<Self> {
        let http = roots
            .builder()
            .user_agent(concat!("drover-coordinator/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            config,
            http,
            clock,
            keys: Arc::new(Mutex::new(Keys {
                by_kid: HashMap::new(),
                fetched_at: None,
                fetching: None,
            })),
        })
    }

    async fn fetch_keys(
        http: reqwest::Client,
        issuer: String,
    ) -> Result<HashMap<String, Key>, Refusal> {
        #[derive(Deserialize)]
        struct Discovery {
            jwks_uri: String,
        }
        #[derive(Deserialize)]
        struct Jwk {
            kid: Option<String>,
            kty: String,
            n: Option<String>,
            e: Option<String>,
        }
        #[derive(Deserialize)]
        struct Jwks {
            keys: Vec<Jwk>,
        }
        let url = format!("{issuer}/.well-known/openid-configuration");
        let discovery: Discovery = get_json(&http, &url, "OpenID configuration").await?;
        let jwks: Jwks = get_json(&http, &discovery.jwks_uri, "JWKS").await?;
        Ok(jwks
            .keys
            .into_iter()
            .filter(|k| k.kty == "RSA")
            .filter_map(|k| {
                let n = URL_SAFE_NO_PAD.decode(k.n?).ok()?;
                let e = URL_SAFE_NO_PAD.decode(k.e?).ok()?;
                Some((k.kid.unwrap_or_default(), (n, e)))
            })
            .collect())
    }

    /// The public key `kid`, from the cache or a fresh JWKS: the fetch
    /// under way, or a new one when none started in the last second.
    async fn key(&self, kid: &str) -> Result<Key, Refusal> {
        let no_key = || format!("no key {kid:?} in the OIDC issuer's JWKS");
        let fetch = {
            let mut keys = self.keys.lock().expect("OIDC keys");
            if let Some(k) = keys.by_kid.get(kid) {
                return Ok(k.clone());
            }
            match &keys.fetching {
                Some(fetch) => fetch.clone(),
                None => {
                    let now = self.clock.now_ms();
                    if keys
                        .fetched_at
                        .is_some_and(|at| (0..REFRESH_EVERY_MS).contains(&(now - at)))
                    {
                        return Err(no_key());
                    }
                    keys.fetched_at = Some(now);
                    let fetch = self.spawn_fetch();
                    keys.fetching = Some(fetch.clone());
                    fetch
                }
            }
        };
        fetch.await?;
        let keys = self.keys.lock().expect("OIDC keys");
        keys.by_kid.get(kid).cloned().ok_or_else(no_key)
    }

    /// A fetch of the JWKS as its own task (a caller that goes away does
    /// not stop it): it stores what it got and clears `fetching`.
    fn spawn_fetch(&self) -> Fetch {
        let (http, issuer, keys) = (
            self.http.clone(),
            self.config.issuer.clone(),
            self.keys.clone(),
        );
        let task = tokio::spawn(async move {
            let got = Self::fetch_keys(http, issuer).await;
            let mut keys = keys.lock().expect("OIDC keys");
            keys.fetching = None;
            got.map(|fresh| keys.by_kid = fresh)
        });
        task.map(|done| done.unwrap_or_else(|_| Err("the OIDC issuer's JWKS fetch failed".into())))
            .boxed()
            .shared()
    }

    /// The repository a token speaks for, once its signature, issuer,
    /// audience and times hold.
    pub async fn verify(&self, token: &str) -> Result<CiClaims, Refusal> {
        if token.len() > MAX_TOKEN_LEN {
            return Err("the OIDC token is too long".into());
        }
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".into());
        };
        let header: Header = decode_json(h).ok_or("the OIDC token's header is not JSON")?;
        if header.alg != "RS256" {
            return Err(format!("OIDC tokens must be RS256, not {}", header.alg));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| "the OIDC token's signature is not base64url")?;
        let (n, e) = self.key(header.kid.as_deref().unwrap_or("")).await?;
        RsaPublicKeyComponents { n: &n, e: &e }
            .verify(
                &RSA_PKCS1_2048_8192_SHA256,
                &token.as_bytes()[..h.len() + 1 + c.len()],
                &signature,
            )
            .map_err(|_| "the OIDC token's signature does not verify")?;
        let claims: Claims = decode_json(c).ok_or("the OIDC token's claims are not JSON")?;
        if claims.iss != self.config.issuer {
            return Err(format!(
                "the OIDC token's issuer is not {}",
                self.config.issuer
            ));
        }
        let audience_ok = match &claims.aud {
            Audience::One(a) => *a == self.config.audience,
            Audience::Many(all) => all.contains(&self.config.audience),
        };
        if !audience_ok {
            return Err(format!(
                "the OIDC token's audience is not {} (request it with that audience)",
                self.config.audience
            ));
        }
        let now = self.clock.now_ms() / 1000;
        if claims.exp <= now {
            return Err("the OIDC token has expired".into());
        }
        if claims.nbf.is_some_and(|t| t > now + LEEWAY_S)
            || claims.iat.is_some_and(|t| t > now + LEEWAY_S)
        {
            return Err("the OIDC token is not valid yet".into());
        }
        let repository = claims
            .repository
            .ok_or("the OIDC token names no repository")?;
        let repository_id = match claims.repository_id {
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            Some(serde_json::Value::Number(n)) => n.as_i64(),
            _ => None,
        }
        .ok_or("the OIDC token names no repository_id")?;
        Ok(CiClaims {
            repository,
            repository_id,
            git_ref: claims.git_ref,
            event_name: claims.event_name,
        })
    }
}

/// A JSON document of the issuer's; `what` names it in the refusal.
async fn get_json<T: for<'de> Deserialize<'de>>(
    http: &reqwest::Client,
    url: &str,
    what: &str,
) -> Result<T, Refusal> {
    let read = async { http.get(url).send().await?.error_for_status()?.json().await };
    read.await
        .map_err(|_: reqwest::Error| format!("the OIDC issuer's {what} could not be read"))
}
