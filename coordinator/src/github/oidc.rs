//! GitHub Actions OIDC tokens as a CI principal: RS256 JWTs from the
//! configured issuer, checked against the issuer's JWKS (found through its
//! OpenID configuration, cached, fetched again on an unknown `kid`), for
//! our audience, unexpired, naming a repository.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::clock::Clock;

/// Clock skew allowed on `nbf` and `iat` (not on `exp`).
const LEEWAY_S: i64 = 60;

/// The JWKS is fetched again on an unknown `kid` at most this often.
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
}

struct Keys {
    by_kid: HashMap<String, (Vec<u8>, Vec<u8>)>,
    fetched_at: Option<i64>,
}

pub struct Oidc {
    pub config: OidcConfig,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    keys: Mutex<Keys>,
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
}

impl Oidc {
    pub fn new(config: OidcConfig, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("drover-coordinator/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            config,
            http,
            clock,
            keys: Mutex::new(Keys {
                by_kid: HashMap::new(),
                fetched_at: None,
            }),
        })
    }

    async fn fetch_keys(&self) -> Result<HashMap<String, (Vec<u8>, Vec<u8>)>, Refusal> {
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
        let url = format!("{}/.well-known/openid-configuration", self.config.issuer);
        let discovery: Discovery = self.get_json(&url, "OpenID configuration").await?;
        let jwks: Jwks = self.get_json(&discovery.jwks_uri, "JWKS").await?;
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

    /// A JSON document of the issuer's; `what` names it in the refusal.
    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        what: &str,
    ) -> Result<T, Refusal> {
        let read = async {
            self.http
                .get(url)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await
        };
        read.await
            .map_err(|_: reqwest::Error| format!("the OIDC issuer's {what} could not be read"))
    }

    /// The public key `kid`, from the cache or a fresh JWKS.
    async fn key(&self, kid: &str) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
        let mut keys = self.keys.lock().await;
        if let Some(k) = keys.by_kid.get(kid) {
            return Ok(k.clone());
        }
        let now = self.clock.now_ms();
        if keys
            .fetched_at
            .is_some_and(|at| now - at < REFRESH_EVERY_MS)
        {
            return Err(format!("no key {kid:?} in the OIDC issuer's JWKS"));
        }
        let fresh = self.fetch_keys().await?;
        keys.by_kid = fresh;
        keys.fetched_at = Some(now);
        keys.by_kid
            .get(kid)
            .cloned()
            .ok_or_else(|| format!("no key {kid:?} in the OIDC issuer's JWKS"))
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
        })
    }
}
