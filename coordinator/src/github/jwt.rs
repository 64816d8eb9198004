//! The App's private key and the RS256 JWTs it signs (RFC 7519, as GitHub
//! documents them for Apps: `iat` 60 s in the past for clock drift, `exp`
//! nine minutes on, under GitHub's ten, `iss` the App's id).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};

/// The App's private key. Its `Debug` shows nothing of it.
pub struct AppKey {
    pair: RsaKeyPair,
    rng: SystemRandom,
}

impl std::fmt::Debug for AppKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppKey(***)")
    }
}

impl AppKey {
    /// A PEM private key as GitHub gives it (PKCS#1, `RSA PRIVATE KEY`) or
    /// as PKCS#8 (`PRIVATE KEY`). Errors never quote the file.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let block = |label: &str| {
            let begin = format!("-----BEGIN {label}-----");
            let end = format!("-----END {label}-----");
            let start = pem.find(&begin)? + begin.len();
            let stop = start + pem[start..].find(&end)?;
            let body: String = pem[start..stop].split_whitespace().collect();
            Some(STANDARD.decode(body).ok())
        };
        let pair = if let Some(der) = block("RSA PRIVATE KEY") {
            let der = der.ok_or("the key's PEM body is not base64")?;
            RsaKeyPair::from_der(&der)
        } else if let Some(der) = block("PRIVATE KEY") {
            let der = der.ok_or("the key's PEM body is not base64")?;
            RsaKeyPair::from_pkcs8(&der)
        } else {
            return Err(
                "no PEM private key (BEGIN RSA PRIVATE KEY or BEGIN PRIVATE KEY) in it".into(),
            );
        }
        .map_err(|e| format!("not a usable RSA private key ({e})"))?;
        Ok(Self {
            pair,
            rng: SystemRandom::new(),
        })
    }

    /// A JWT for the App, valid from a minute ago for nine minutes.
    pub fn jwt(&self, app_id: u64, now_s: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iat": now_s - 60,
            "exp": now_s + 9 * 60,
            "iss": app_id.to_string(),
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let mut signature = vec![0; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &RSA_PKCS1_SHA256,
                &self.rng,
                signing_input.as_bytes(),
                &mut signature,
            )
            .expect("RSA signing with a valid key");
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}
