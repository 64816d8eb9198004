//! Secrets in the OS keychain, through the keyring crate: the Secret
//! Service on Linux (GNOME Keyring, KWallet), the Keychain on macOS, the
//! Credential Manager on Windows. Every item has `service=drover`, and the
//! key as its user name: `account`, `runner:<ref>-<i>`, `join:<ref>`.
//!
//! Calls block on the OS (D-Bus here): async code calls them through
//! `spawn_blocking`.

use std::io;

use runner_core::credentials::{CredentialStore, StoredCredential};

pub const SERVICE: &str = "drover";
pub const ACCOUNT: &str = "account";

#[derive(Clone, Copy, Default)]
pub struct Keychain;

fn entry(key: &str) -> io::Result<keyring::Entry> {
    keyring::Entry::new(SERVICE, key).map_err(to_io)
}

fn to_io(e: keyring::Error) -> io::Error {
    // keyring's messages name the platform's failure, never the secret.
    io::Error::other(e.to_string())
}

impl Keychain {
    pub fn get(&self, key: &str) -> io::Result<Option<String>> {
        match entry(key)?.get_password() {
            Ok(secret) => Ok(Some(secret)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    pub fn set(&self, key: &str, secret: &str) -> io::Result<()> {
        entry(key)?.set_password(secret).map_err(to_io)
    }

    /// Deleting what is not there is no error.
    pub fn remove(&self, key: &str) -> io::Result<()> {
        match entry(key)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(to_io(e)),
        }
    }

    pub fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> io::Result<Option<T>> {
        self.get(key)?
            .map(|text| {
                serde_json::from_str(&text).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("keychain item {key}: {e}"),
                    )
                })
            })
            .transpose()
    }

    pub fn set_json<T: serde::Serialize>(&self, key: &str, value: &T) -> io::Result<()> {
        self.set(
            key,
            &serde_json::to_string(value).map_err(io::Error::other)?,
        )
    }
}

/// The keychain key of a runner credential (runner-core's key, prefixed).
pub fn runner_key(credential_key: &str) -> String {
    format!("runner:{credential_key}")
}

pub fn join_key(reference: &str) -> String {
    format!("join:{reference}")
}

/// Runner credentials, for runner-core's `join_or_load`.
impl CredentialStore for Keychain {
    fn load(&self, key: &str) -> io::Result<Option<StoredCredential>> {
        self.get_json(&runner_key(key))
    }

    fn save(&self, key: &str, credential: &StoredCredential) -> io::Result<()> {
        self.set_json(&runner_key(key), credential)
    }

    fn delete(&self, key: &str) -> io::Result<()> {
        self.remove(&runner_key(key))
    }

    fn describe(&self, key: &str) -> String {
        format!(
            "the keychain item service={SERVICE} username={}",
            runner_key(key)
        )
    }
}
