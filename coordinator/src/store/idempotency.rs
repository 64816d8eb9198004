//! `Idempotency-Key` on `POST /v1/jobs`, as payment APIs have it: the same
//! key from the same member within 24 hours answers the job the first
//! request made; the same key with a different request is a conflict.
//!
//! A key is written in the same transaction as its job (see
//! `Store::submit_batch`), so neither exists without the other, whenever a
//! coordinator dies. Only hashes are stored: of the key, and of the key with
//! the request (so the request, env values included, cannot be guessed from
//! the table without the key, which only its client knows).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use drover_domain::submit::Stored;

use super::placeholders;
use crate::store::error::{Error, Result};

/// How long a key names its job.
pub const KEY_TTL_MS: i64 = 24 * 3600 * 1000;
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// A submit's idempotency key, hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub(super) key_hash: String,
    pub(super) request_hash: String,
}

fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl IdempotencyKey {
    /// `key`: 1..=255 printable ASCII characters. `request`: the body, as
    /// parsed (so spacing and field order do not make it a different one).
    pub fn new(key: &str, request: &impl serde::Serialize) -> Result<Self> {
        if key.is_empty()
            || key.len() > MAX_KEY_LEN
            || !key.bytes().all(|b| (b' '..=b'~').contains(&b))
        {
            return Err(Error::bad_request(format!(
                "Idempotency-Key must be 1-{MAX_KEY_LEN} printable ASCII characters"
            )));
        }
        let body = serde_json::to_vec(request).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(Self {
            key_hash: sha256_hex(&[key.as_bytes()]),
            request_hash: sha256_hex(&[key.as_bytes(), b"\n", &body]),
        })
    }
}

/// The message when another request with the same key was written at the
/// same moment (replicas on PostgreSQL).
pub(super) fn in_flight() -> String {
    "another request with this Idempotency-Key was being submitted at the same moment; \
     retry it to get its job"
        .into()
}

/// The keys stored since `$1` among `n` key hashes (from `$2`).
pub(super) fn find_sql(n: usize) -> String {
    format!(
        "SELECT member_id, key_hash, request_hash, job_id FROM idempotency_keys
         WHERE created_at >= $1 AND key_hash IN ({})",
        placeholders(2, n)
    )
}

/// Of the rows [`find_sql`] read, those of `keys` (key hash, member id), by
/// (member, key hash).
pub(super) fn found(
    rows: Vec<(String, String, String, String)>,
    keys: &[(&str, &str)],
) -> HashMap<(String, String), Stored> {
    rows.into_iter()
        .filter(|(member, key_hash, ..)| keys.contains(&(key_hash.as_str(), member.as_str())))
        .map(|(member, key_hash, request_hash, job_id)| {
            (
                (member, key_hash),
                Stored {
                    request_hash,
                    job_id,
                },
            )
        })
        .collect()
}

/// The live keys among `keys` (key hash, member id), by (member, key hash).
pub(super) async fn find(
    conn: &mut sqlx::AnyConnection,
    keys: &[(&str, &str)],
    now: i64,
) -> Result<HashMap<(String, String), Stored>> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = find_sql(keys.len());
    let mut q = sqlx::query_as::<_, (String, String, String, String)>(&sql).bind(now - KEY_TTL_MS);
    for (key_hash, _) in keys {
        q = q.bind(*key_hash);
    }
    Ok(found(q.fetch_all(conn).await?, keys))
}

/// Forgets keys older than [`KEY_TTL_MS`]; parameter `$first`: now.
pub(super) fn purge_sql(first: usize) -> String {
    format!("DELETE FROM idempotency_keys WHERE created_at < ${first} - {KEY_TTL_MS}")
}

/// Stores `n` keys; parameters from `$first`, five per key, see [`bind`].
pub(super) fn insert_sql(first: usize, n: usize) -> String {
    let rows = (0..n)
        .map(|k| format!("({})", placeholders(first + 5 * k, 5)))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO idempotency_keys (member_id, key_hash, request_hash, job_id, created_at) VALUES {rows}"
    )
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds the rows of [`insert_sql`]: (member, key, job, now) each.
pub(super) fn bind<'q>(
    mut q: AnyQuery<'q>,
    rows: &'q [(&'q str, &'q IdempotencyKey, &'q str, i64)],
) -> AnyQuery<'q> {
    for (member, key, job, now) in rows {
        q = q
            .bind(*member)
            .bind(key.key_hash.as_str())
            .bind(key.request_hash.as_str())
            .bind(*job)
            .bind(*now);
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_wire as wire;

    fn job(script: &str) -> wire::SubmitJob {
        wire::SubmitJob {
            runtime: "self:ws".into(),
            script: Some(script.into()),
            ..Default::default()
        }
    }

    #[test]
    fn keys_are_bounded_printable_ascii() {
        let ok = IdempotencyKey::new("order-42 retry#1", &job("true")).unwrap();
        assert_eq!(ok.key_hash.len(), 64);
        assert!(IdempotencyKey::new(&"k".repeat(MAX_KEY_LEN), &job("true")).is_ok());
        for bad in ["", "tab\there", "é", "nul\0"] {
            let e = IdempotencyKey::new(bad, &job("true")).unwrap_err();
            assert_eq!(
                e.kind(),
                Some(crate::store::error::Kind::Invalid),
                "{bad:?}"
            );
        }
        assert!(IdempotencyKey::new(&"k".repeat(MAX_KEY_LEN + 1), &job("true")).is_err());
    }

    #[test]
    fn the_same_key_with_another_request_hashes_differently() {
        let a = IdempotencyKey::new("k1", &job("true")).unwrap();
        let again = IdempotencyKey::new("k1", &job("true")).unwrap();
        let other = IdempotencyKey::new("k1", &job("false")).unwrap();
        assert_eq!(a, again);
        assert_eq!(a.key_hash, other.key_hash);
        assert_ne!(a.request_hash, other.request_hash);
        assert_ne!(
            a.key_hash,
            IdempotencyKey::new("k2", &job("true")).unwrap().key_hash
        );
    }
}
