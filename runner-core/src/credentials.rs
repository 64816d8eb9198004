//! Where runner credentials live between runs. The headless runner keeps
//! them in files (0600, in a 0700 directory); the desktop app plugs in the
//! OS keychain through the same trait.

use std::io;
use std::path::PathBuf;

use drover_wire::{ErrorCode, JoinRequest, JoinTokenInfo};
use serde::{Deserialize, Serialize};

use crate::client::{Client, ClientError, Token};
use crate::runner::Credential;

#[derive(Serialize, Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct StoredCredential {
    pub url: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub runner_id: String,
    /// The runner's pool; absent in files saved by older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<String>,
    pub token: String,
}

impl std::fmt::Debug for StoredCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredCredential")
            .field("url", &self.url)
            .field("runner_id", &self.runner_id)
            .field("runtime_id", &self.runtime_id)
            .finish_non_exhaustive()
    }
}

pub trait CredentialStore: Send + Sync {
    fn load(&self, key: &str) -> io::Result<Option<StoredCredential>>;
    fn save(&self, key: &str, credential: &StoredCredential) -> io::Result<()>;
    /// Forgets a credential; forgetting one that is not there is no error.
    fn delete(&self, key: &str) -> io::Result<()>;
    /// Where a credential is kept, for messages (never its content).
    fn describe(&self, key: &str) -> String;
}

/// One JSON file per runner under a directory only the user can read.
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// `$XDG_STATE_HOME/drover` (or the platform's equivalent).
    pub fn default_dir() -> Option<PathBuf> {
        dirs::state_dir()
            .or_else(dirs::data_local_dir)
            .map(|d| d.join("drover"))
    }

    fn path(&self, key: &str) -> PathBuf {
        let safe: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join("runners").join(format!("{safe}.json"))
    }
}

impl CredentialStore for FileStore {
    fn load(&self, key: &str) -> io::Result<Option<StoredCredential>> {
        match std::fs::read(self.path(key)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn save(&self, key: &str, credential: &StoredCredential) -> io::Result<()> {
        use std::io::Write as _;
        let path = self.path(key);
        let dir = path.parent().expect("a file under runners/");
        #[cfg_attr(windows, allow(unused_mut))]
        let mut dirs = std::fs::DirBuilder::new();
        #[cfg_attr(windows, allow(unused_mut))]
        let mut options = std::fs::OpenOptions::new();
        // Its user's only (on Windows, a profile's directories are).
        #[cfg(unix)]
        {
            use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
            dirs.mode(0o700);
            options.mode(0o600);
        }
        dirs.recursive(true).create(dir)?;
        let tmp = path.with_extension("tmp");
        let mut file = options.write(true).create(true).truncate(true).open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(credential).map_err(io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    }

    fn delete(&self, key: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(key)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn describe(&self, key: &str) -> String {
        self.path(key).display().to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("joining {reference}: {source}")]
    Join {
        reference: String,
        source: ClientError,
    },
    #[error("credential store {place}: {source}")]
    Store { place: String, source: io::Error },
    /// The saved credential is of another coordinator or pool than the
    /// join token given: using it would run another tenant's jobs.
    #[error(
        "{place} holds runner {runner_id} of {saved}, but {given}. Pass another --state-dir for this pool, or delete {place} to join anew"
    )]
    Mismatch {
        place: String,
        runner_id: String,
        saved: String,
        given: String,
    },
    /// The saved credential was refused (the runner was revoked), and the
    /// join token that could replace it was refused too.
    #[error(
        "runner {runner_id} saved in {place} was refused ({source}), and the join token was refused too: pass a fresh join token (the runner then replaces {place}), or delete {place}"
    )]
    Revoked {
        place: String,
        runner_id: String,
        source: ClientError,
    },
}

/// The credential of runner number `index` joined to `reference`.
///
/// Saved credentials are kept per ref and index, and belong to one
/// coordinator and one pool: a saved credential is reused only when the
/// join token is for that same pool (asked with `GET /v1/runner/join-token`),
/// and one of another coordinator or pool is an error, never silently used.
/// A saved credential the coordinator refuses (its runner was revoked) is
/// replaced by joining again with the join token. Otherwise the join token
/// is exchanged for a new runner, which is saved.
pub async fn join_or_load(
    store: &dyn CredentialStore,
    client: &Client,
    join_token: &Token,
    reference: &str,
    name: &str,
    index: usize,
    capabilities: &[String],
) -> Result<Credential, JoinError> {
    let key = credential_key(reference, index);
    let place = store.describe(&key);
    let stored = store.load(&key).map_err(|source| JoinError::Store {
        place: place.clone(),
        source,
    })?;
    let joiner = client.with_token(join_token.clone());
    let join_failed = |source| JoinError::Join {
        reference: reference.to_owned(),
        source,
    };
    // The join token's pool. An expired token has none, yet a saved runner
    // may run on without it; so may one whose coordinator is unreachable
    // (the runner retries), or predates the call.
    let pool = match joiner.join_token_info().await {
        Ok(pool) => Some(pool),
        Err(e) if is_refused_or_unknown(&e) || (stored.is_some() && e.is_recoverable()) => None,
        Err(e) => return Err(join_failed(e)),
    };
    // A saved runner the coordinator refused, to name if joining fails too.
    let mut refused = None;
    if let Some(saved) = stored {
        let mismatch = |saved_pool: &str| JoinError::Mismatch {
            place: place.clone(),
            runner_id: saved.runner_id.clone(),
            saved: format!("pool {saved_pool} on {}", saved.url),
            given: match &pool {
                Some(p) => format!(
                    "this join token is for pool {} ({}) on {}",
                    p.reference,
                    p.runtime_id,
                    client.base_url()
                ),
                None => format!("the coordinator given is {}", client.base_url()),
            },
        };
        let saved_pool = saved.runtime_id.clone().unwrap_or_else(|| "?".into());
        if saved.url != client.base_url() || differs(&pool, saved.runtime_id.as_deref()) {
            return Err(mismatch(&saved_pool));
        }
        let credential = Credential {
            runner_id: saved.runner_id.clone(),
            token: Token::new(saved.token.clone()),
        };
        match client
            .with_token(credential.token.clone())
            .hello(capabilities)
            .await
        {
            Ok(me) => {
                if differs(&pool, Some(&me.runtime_id)) {
                    return Err(mismatch(&me.runtime_id));
                }
                if saved.runtime_id.is_none() {
                    // A file from an older version: remember the pool now.
                    let known = StoredCredential {
                        runtime_id: Some(me.runtime_id),
                        ..saved
                    };
                    store
                        .save(&key, &known)
                        .map_err(|source| JoinError::Store { place, source })?;
                }
                return Ok(credential);
            }
            // Revoked: join again below, replacing the saved credential.
            Err(e) if e.code() == Some(ErrorCode::Unauthorized) => {
                refused = Some((saved.runner_id, e));
            }
            // Unreachable for now: the runner says hello again, and retries.
            Err(_) => return Ok(credential),
        }
    }
    let joined = joiner
        .join(&JoinRequest {
            reference: reference.to_owned(),
            name: name.to_owned(),
            capabilities: capabilities.to_vec(),
        })
        .await
        .map_err(|e| match refused {
            Some((runner_id, source)) if is_refused_or_unknown(&e) => JoinError::Revoked {
                place: place.clone(),
                runner_id,
                source,
            },
            _ => join_failed(e),
        })?;
    let stored = StoredCredential {
        url: client.base_url().to_owned(),
        reference: reference.to_owned(),
        runner_id: joined.runner_id.clone(),
        runtime_id: Some(joined.runtime_id),
        token: joined.token.clone(),
    };
    store
        .save(&key, &stored)
        .map_err(|source| JoinError::Store { place, source })?;
    Ok(Credential {
        runner_id: joined.runner_id,
        token: Token::new(joined.token),
    })
}

/// Where runner number `index` joined to `reference` is saved.
pub fn credential_key(reference: &str, index: usize) -> String {
    format!("{reference}-{index}")
}

/// The join token's pool is known and is not `runtime_id` (when that is known).
fn differs(pool: &Option<JoinTokenInfo>, runtime_id: Option<&str>) -> bool {
    matches!((pool, runtime_id), (Some(p), Some(r)) if p.runtime_id != r)
}

/// A join token the coordinator refuses (expired, unknown, not a join
/// token), or a coordinator without `GET /v1/runner/join-token`.
fn is_refused_or_unknown(e: &ClientError) -> bool {
    matches!(
        e.code(),
        Some(ErrorCode::Unauthorized | ErrorCode::Forbidden | ErrorCode::NotFound)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_saved_before_the_pool_was_recorded_still_load() {
        let old = r#"{"url":"http://c","ref":"self:ws","runnerId":"rn_1","token":"rnr_x"}"#;
        let c: StoredCredential = serde_json::from_str(old).unwrap();
        assert_eq!((c.runner_id.as_str(), c.runtime_id), ("rn_1", None));
        let text = serde_json::to_string(&StoredCredential {
            runtime_id: Some("rt_1".into()),
            ..c
        })
        .unwrap();
        assert!(text.contains(r#""runtimeId":"rt_1""#), "{text}");
        assert!(
            !format!(
                "{:?}",
                serde_json::from_str::<StoredCredential>(&text).unwrap()
            )
            .contains("rnr_x")
        );
    }
}
