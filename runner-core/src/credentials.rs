//! Where runner credentials live between runs. The headless runner keeps
//! them in files (0600, in a 0700 directory); the desktop app plugs in the
//! OS keychain through the same trait.

use std::io;
use std::path::PathBuf;

use drover_wire::JoinRequest;
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
    pub token: String,
}

impl std::fmt::Debug for StoredCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredCredential")
            .field("url", &self.url)
            .field("runner_id", &self.runner_id)
            .finish_non_exhaustive()
    }
}

pub trait CredentialStore: Send + Sync {
    fn load(&self, key: &str) -> io::Result<Option<StoredCredential>>;
    fn save(&self, key: &str, credential: &StoredCredential) -> io::Result<()>;
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
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let path = self.path(key);
        let dir = path.parent().expect("a file under runners/");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(credential).map_err(io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
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
}

/// The credential of runner number `index` joined to `reference`: reused
/// from `store` when present for this coordinator, else obtained with the
/// join token and saved.
pub async fn join_or_load(
    store: &dyn CredentialStore,
    client: &Client,
    join_token: &Token,
    reference: &str,
    name: &str,
    index: usize,
    capabilities: &[String],
) -> Result<Credential, JoinError> {
    let key = format!("{reference}-{index}");
    let place = store.describe(&key);
    let stored = store.load(&key).map_err(|source| JoinError::Store {
        place: place.clone(),
        source,
    })?;
    if let Some(c) = stored.filter(|c| c.url == client.base_url() && c.reference == reference) {
        return Ok(Credential {
            runner_id: c.runner_id,
            token: Token::new(c.token),
        });
    }
    let joined = client
        .with_token(join_token.clone())
        .join(&JoinRequest {
            reference: reference.to_owned(),
            name: name.to_owned(),
            capabilities: capabilities.to_vec(),
        })
        .await
        .map_err(|source| JoinError::Join {
            reference: reference.to_owned(),
            source,
        })?;
    let stored = StoredCredential {
        url: client.base_url().to_owned(),
        reference: reference.to_owned(),
        runner_id: joined.runner_id.clone(),
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
