//! Job env at rest: sealed into `jobs.env_sealed` at submit, opened only
//! into a lease, erased when the job ends (a trigger, migration 0004), and
//! re-sealed under the current key by `rotate_secrets`.

use std::sync::Arc;

use drover_domain::env::Env;
use serde::Deserialize;

use super::Store;
use crate::secrets::{self, KeyRing};
use crate::store::error::{Error, Result};

/// Rows read per round by the start-up and rotation scans.
const PAGE: i64 = 256;

/// A job spec written before migration 0004, with env in plain text.
#[derive(Deserialize)]
struct PlainEnv {
    #[serde(default)]
    env: Env,
}

fn corrupt_env(job: &str) -> Error {
    // Never the parser's message: it may quote a value.
    Error::Corrupt(format!("job {job}: unreadable env"))
}

impl Store {
    /// The keys that seal and open job env (the coordinator sets them once,
    /// before serving; admin commands that touch no env need none).
    pub fn set_secrets(&self, keys: KeyRing) {
        if self.secrets.set(Arc::new(keys)).is_err() {
            tracing::warn!("the secret keys were already set; keeping the first");
        }
    }

    fn keys(&self) -> Result<&KeyRing> {
        self.secrets.get().map(|k| &**k).ok_or(Error::Internal(
            "no secret keys: the store cannot seal job env",
        ))
    }

    /// The sealed form of `env` for job `job` (`None` when there is none).
    pub(super) fn seal_env(&self, job: &str, env: &Env) -> Result<Option<String>> {
        if env.is_empty() {
            return Ok(None);
        }
        let json = serde_json::to_vec(env).expect("a string map serializes");
        Ok(Some(self.keys()?.seal(job, &json)))
    }

    /// The env a lease hands over: opened from `sealed`, or (a row written
    /// before env was sealed) read from the spec.
    pub(super) fn open_env(&self, job: &str, spec: &str, sealed: Option<&str>) -> Result<Env> {
        match sealed {
            Some(sealed) => {
                let json = self
                    .keys()?
                    .open(job, sealed)
                    .map_err(|e| Error::Corrupt(format!("job {job}: {e}")))?;
                serde_json::from_slice(&json).map_err(|_| corrupt_env(job))
            }
            None => serde_json::from_str::<PlainEnv>(spec)
                .map(|p| p.env)
                .map_err(|_| corrupt_env(job)),
        }
    }

    /// A job whose env is sealed under a key the ring lacks: (job, key id).
    pub async fn env_sealed_with_unknown_key(&self) -> Result<Option<(String, String)>> {
        let ids: Vec<String> = self.keys()?.ids().map(secrets::sealed_with).collect();
        let filter: String = (1..=ids.len())
            .map(|i| format!(" AND env_sealed NOT LIKE ${i}"))
            .collect();
        let sql =
            format!("SELECT id, env_sealed FROM jobs WHERE env_sealed IS NOT NULL{filter} LIMIT 1");
        let mut q = sqlx::query_as::<_, (String, String)>(&sql);
        for id in &ids {
            q = q.bind(id.as_str());
        }
        Ok(q.fetch_optional(&self.reader).await?.map(|(job, sealed)| {
            let id = secrets::key_id(&sealed).unwrap_or("(malformed)").to_owned();
            (job, id)
        }))
    }

    /// Moves env written in plain text into the spec by earlier versions
    /// into `env_sealed` (live jobs; migration 0004 erased finished jobs').
    /// Returns how many jobs changed.
    pub async fn seal_plain_env(&self) -> Result<u64> {
        let mut changed = 0;
        let mut after = 0i64;
        loop {
            let rows: Vec<(i64, String, String)> = sqlx::query_as(
                "SELECT seq, id, spec FROM jobs
                 WHERE state IN ('queued', 'leased', 'running') AND seq > $1 AND spec LIKE '%\"env\"%'
                 ORDER BY seq LIMIT $2",
            )
            .bind(after)
            .bind(PAGE)
            .fetch_all(&self.reader)
            .await?;
            let Some(last) = rows.last() else {
                return Ok(changed);
            };
            after = last.0;
            let mut tx = self.writer.begin().await?;
            for (_, job, spec) in &rows {
                let mut value: serde_json::Value =
                    serde_json::from_str(spec).map_err(|_| corrupt_env(job))?;
                let Some(plain) = value.as_object_mut().and_then(|o| o.remove("env")) else {
                    continue; // "env" was in a command, not a field
                };
                let env: Env = serde_json::from_value(plain).map_err(|_| corrupt_env(job))?;
                let done = sqlx::query(
                    "UPDATE jobs SET spec = $1, env_sealed = COALESCE(env_sealed, $2)
                     WHERE id = $3 AND spec = $4",
                )
                .bind(value.to_string())
                .bind(self.seal_env(job, &env)?)
                .bind(job.as_str())
                .bind(spec.as_str())
                .execute(&mut *tx)
                .await?;
                changed += done.rows_affected();
            }
            tx.commit().await?;
        }
    }

    /// Re-seals every stored env under the current key, so older keys can
    /// leave the ring. Fails, naming the job, on env no key of the ring opens.
    /// Returns how many jobs changed.
    pub async fn rotate_secrets(&self) -> Result<u64> {
        let keys = self.keys()?;
        let current = secrets::sealed_with(keys.current_id());
        let mut changed = self.seal_plain_env().await?;
        let mut after = 0i64;
        loop {
            let rows: Vec<(i64, String, String)> = sqlx::query_as(
                "SELECT seq, id, env_sealed FROM jobs
                 WHERE env_sealed IS NOT NULL AND env_sealed NOT LIKE $1 AND seq > $2
                 ORDER BY seq LIMIT $3",
            )
            .bind(current.as_str())
            .bind(after)
            .bind(PAGE)
            .fetch_all(&self.reader)
            .await?;
            let Some(last) = rows.last() else {
                return Ok(changed);
            };
            after = last.0;
            let mut tx = self.writer.begin().await?;
            for (_, job, sealed) in &rows {
                let plain = keys
                    .open(job, sealed)
                    .map_err(|e| Error::Corrupt(format!("job {job}: {e}")))?;
                // Unchanged if the job ended (its env erased) meanwhile.
                let done = sqlx::query(
                    "UPDATE jobs SET env_sealed = $1 WHERE id = $2 AND env_sealed = $3",
                )
                .bind(keys.seal(job, &plain))
                .bind(job.as_str())
                .bind(sealed.as_str())
                .execute(&mut *tx)
                .await?;
                changed += done.rows_affected();
            }
            tx.commit().await?;
        }
    }
}
