//! Job env at rest: sealed with XChaCha20-Poly1305 under a key ring.
//!
//! A key ring is text, one key an entry (lines or commas), `id:key` or just
//! `key` (its id is then derived from the key); a key is 32 bytes as base64
//! or 64 hex digits; `#` starts a comment. The first key seals; every key
//! opens. So a rotation adds the new key first and keeps the old ones until
//! `drover-coordinator admin rotate-secrets` has re-sealed what they sealed.
//!
//! A sealed value is `v1:<key id>:<base64(nonce ‖ ciphertext)>`, with a
//! random 192-bit nonce, and the job id as associated data: a value copied
//! to another job's row does not open.
//!
//! Sealing and opening are pure; [`load`] reads (or on the embedded default
//! first writes) the key ring.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest as _, Sha256};

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const VERSION: &str = "v1";
const MAX_ID_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// The key ring text is malformed. The message never holds key material.
    #[error("secret keys: {0}")]
    Keys(String),
    #[error("sealed with key {0:?}, which the key ring does not hold")]
    UnknownKey(String),
    #[error("a sealed value is malformed")]
    Malformed,
    #[error("a sealed value does not open (another key with the same id, or another job's value)")]
    DoesNotOpen,
}

struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

/// The coordinator's secret keys; the first one seals. `Debug` shows ids only.
pub struct KeyRing {
    keys: Vec<Key>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("ids", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

fn valid_id(id: &str) -> bool {
    // No `_` or `%`: ids appear in SQL LIKE patterns.
    (1..=MAX_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn decode_key(text: &str) -> Option<[u8; KEY_LEN]> {
    let bytes = if text.len() == 2 * KEY_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..KEY_LEN)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()?
    } else {
        STANDARD
            .decode(text)
            .or_else(|_| STANDARD_NO_PAD.decode(text))
            .ok()?
    };
    bytes.try_into().ok()
}

/// The id of a key given without one: a short digest of the key (it
/// reveals nothing of a random 256-bit key), so the same key always has the
/// same id however it is given.
fn derived_id(key: &[u8; KEY_LEN]) -> String {
    let digest = Sha256::digest(key);
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

fn random<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    buf
}

fn associated_data(key_id: &str, context: &str) -> String {
    format!("drover-env:{VERSION}:{key_id}:{context}")
}

impl KeyRing {
    /// Parses key ring text (see the module docs).
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let mut keys: Vec<Key> = Vec::new();
        let entries = text
            .lines()
            .map(|line| line.split_once('#').map_or(line, |(before, _)| before))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty());
        for (n, entry) in entries.enumerate() {
            let n = n + 1;
            let (id, key) = match entry.split_once(':') {
                Some((id, key)) => (Some(id.trim()), key.trim()),
                None => (None, entry),
            };
            let key = decode_key(key).ok_or_else(|| {
                SecretError::Keys(format!(
                    "key {n} is not 32 bytes as base64 or 64 hex digits"
                ))
            })?;
            let id = match id {
                Some(id) if valid_id(id) => id.to_owned(),
                Some(_) => {
                    return Err(SecretError::Keys(format!(
                        "key {n}: an id is 1 to {MAX_ID_LEN} of A-Z, a-z, 0-9 and -"
                    )));
                }
                None => derived_id(&key),
            };
            // SQLite's LIKE ignores ASCII case: so do ids.
            if keys.iter().any(|k| k.id.eq_ignore_ascii_case(&id)) {
                return Err(SecretError::Keys(format!("key id {id:?} appears twice")));
            }
            keys.push(Key {
                id,
                cipher: XChaCha20Poly1305::new(&key.into()),
            });
        }
        if keys.is_empty() {
            return Err(SecretError::Keys("no key given".into()));
        }
        Ok(Self { keys })
    }

    /// A new random key: the ring, and its text for a key file.
    pub fn generate() -> (Self, String) {
        let key: [u8; KEY_LEN] = random();
        let text = format!(
            "# Drover secret keys: one `id:base64` a line. The first seals job env; all open it.\n\
             # To rotate, add a new key on top, restart, then run `drover-coordinator admin rotate-secrets`.\n\
             {}:{}\n",
            derived_id(&key),
            STANDARD.encode(key)
        );
        let ring = Self::parse(&text).expect("a generated key parses");
        (ring, text)
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.keys[0].id
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    /// Seals `plaintext` for `context` (a job id) with the current key.
    pub fn seal(&self, context: &str, plaintext: &[u8]) -> String {
        let key = &self.keys[0];
        let nonce: [u8; NONCE_LEN] = random();
        let aad = associated_data(&key.id, context);
        let ciphertext = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: aad.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 seals any message that fits in memory");
        let mut blob = nonce.to_vec();
        blob.extend(ciphertext);
        format!("{VERSION}:{}:{}", key.id, STANDARD_NO_PAD.encode(blob))
    }

    /// Opens a value [`seal`](Self::seal)ed for `context` under any key of the ring.
    pub fn open(&self, context: &str, sealed: &str) -> Result<Vec<u8>, SecretError> {
        let id = key_id(sealed).ok_or(SecretError::Malformed)?;
        let blob = sealed
            .rsplit_once(':')
            .and_then(|(_, b64)| STANDARD_NO_PAD.decode(b64).ok())
            .filter(|b| b.len() >= NONCE_LEN)
            .ok_or(SecretError::Malformed)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| SecretError::UnknownKey(id.to_owned()))?;
        let (nonce, ciphertext) = blob.split_at(NONCE_LEN);
        let aad = associated_data(id, context);
        key.cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SecretError::DoesNotOpen)
    }
}

/// The id of the key that sealed `sealed`, if it is a sealed value.
pub fn key_id(sealed: &str) -> Option<&str> {
    let mut parts = sealed.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(VERSION), Some(id), Some(_)) if valid_id(id) => Some(id),
        _ => None,
    }
}

/// The `LIKE` pattern matching values sealed under key `id`.
pub fn sealed_with(id: &str) -> String {
    format!("{VERSION}:{id}:%")
}

/// Where the coordinator's keys come from.
#[derive(Clone, Default)]
pub enum KeySource {
    /// A key ring file (`--secret-key-file`).
    File(PathBuf),
    /// Key ring text (`DROVER_SECRET_KEY`).
    Value(String),
    /// On SQLite, a key file beside the database, written on first start;
    /// on PostgreSQL, an error (replicas must share one key ring).
    #[default]
    Default,
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Value(_) => f.write_str("Value(***)"),
            Self::Default => f.write_str("Default"),
        }
    }
}

/// The file of `sqlite://PATH[?…]` (`None`: not a SQLite URL, or in memory).
/// The default key file sits beside it; `admin backup` copies it.
pub fn sqlite_file(database_url: &str) -> Option<PathBuf> {
    let rest = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || query.split('&').any(|p| p == "mode=memory") {
        return None;
    }
    Some(PathBuf::from(path))
}

/// The key file of the embedded default: `PATH.key` beside `sqlite://PATH.db`,
/// or `None` for an in-memory database (whose env dies with it).
pub fn default_key_file(database_url: &str) -> Option<PathBuf> {
    sqlite_file(database_url).map(|path| path.with_extension("key"))
}

/// The key ring for `database_url` from `source`.
pub fn load(source: &KeySource, database_url: &str) -> anyhow::Result<KeyRing> {
    use anyhow::{Context as _, bail};
    match source {
        KeySource::File(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the secret key file {}", path.display()))?;
            warn_if_shared(path);
            KeyRing::parse(&text).with_context(|| path.display().to_string())
        }
        KeySource::Value(text) => Ok(KeyRing::parse(text).context("DROVER_SECRET_KEY")?),
        KeySource::Default if !database_url.starts_with("sqlite:") => bail!(
            "PostgreSQL needs a secret key to seal job env: give --secret-key-file PATH or \
             DROVER_SECRET_KEY (32 bytes as base64 or hex, e.g. `openssl rand -base64 32`), \
             the same on every replica"
        ),
        KeySource::Default => match default_key_file(database_url) {
            None => Ok(KeyRing::generate().0),
            Some(path) => read_or_create(&path),
        },
    }
}

/// Reads the key file at `path`, or writes a new one (0600) if there is none.
/// Two processes starting at once agree: the file appears whole, once.
fn read_or_create(path: &Path) -> anyhow::Result<KeyRing> {
    use anyhow::Context as _;
    if !path.exists() {
        let (_, text) = KeyRing::generate();
        let tmp = path.with_extension(format!("key.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.sync_all()
            });
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => tracing::info!(path = %path.display(), "wrote a new secret key file"),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("writing the secret key file {}", path.display()));
            }
        }
    }
    load(&KeySource::File(path.to_owned()), "")
}

fn warn_if_shared(path: &Path) {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "the secret key file is readable by other users: chmod 600 it"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn b64(byte: u8) -> String {
        STANDARD.encode([byte; KEY_LEN])
    }

    #[test]
    fn seals_and_opens_for_the_same_job_only() {
        let ring = KeyRing::parse(&format!("a:{}", b64(1))).unwrap();
        let sealed = ring.seal("job_1", b"{\"K\":\"v\"}");
        assert!(sealed.starts_with("v1:a:"), "{sealed}");
        assert!(!sealed.contains("\"K\""));
        assert_eq!(ring.open("job_1", &sealed).unwrap(), b"{\"K\":\"v\"}");
        assert_eq!(ring.open("job_2", &sealed), Err(SecretError::DoesNotOpen));
        // Fresh nonces: the same plaintext seals differently each time.
        assert_ne!(ring.seal("job_1", b"x"), ring.seal("job_1", b"x"));
    }

    #[test]
    fn tampering_is_detected() {
        let ring = KeyRing::parse(&format!("a:{}", b64(1))).unwrap();
        let sealed = ring.seal("job_1", b"secret");
        let mut bytes = sealed.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert_eq!(ring.open("job_1", &tampered), Err(SecretError::DoesNotOpen));
        for bad in [
            "",
            "v1:a",
            "v2:a:AAAA",
            "v1:a:!!!",
            "v1:a:AAAA",
            "v1:a_b:AAAA",
        ] {
            assert_eq!(
                ring.open("job_1", bad),
                Err(SecretError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_rotated_ring_opens_old_values_and_seals_with_the_first_key() {
        let old = KeyRing::parse(&format!("old:{}", b64(1))).unwrap();
        let sealed = old.seal("job_1", b"secret");
        let rotated = KeyRing::parse(&format!("new:{}\nold:{}\n", b64(2), b64(1))).unwrap();
        assert_eq!(rotated.current_id(), "new");
        assert_eq!(rotated.open("job_1", &sealed).unwrap(), b"secret");
        assert_eq!(key_id(&rotated.seal("job_1", b"x")), Some("new"));
        let without_old = KeyRing::parse(&format!("new:{}", b64(2))).unwrap();
        assert_eq!(
            without_old.open("job_1", &sealed),
            Err(SecretError::UnknownKey("old".into()))
        );
        // The same id with another key does not open either.
        let impostor = KeyRing::parse(&format!("old:{}", b64(3))).unwrap();
        assert_eq!(
            impostor.open("job_1", &sealed),
            Err(SecretError::DoesNotOpen)
        );
    }

    #[test]
    fn parses_hex_base64_ids_comments_and_commas() {
        let ring = KeyRing::parse(&format!(
            "# comment\n\n{HEX}  # trailing\nk-2:{}, {}\n",
            b64(2),
            STANDARD_NO_PAD.encode([3u8; KEY_LEN])
        ))
        .unwrap();
        let ids: Vec<&str> = ring.ids().collect();
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[1], "k-2");
        // A key given without an id always gets the same id.
        let again = KeyRing::parse(HEX).unwrap();
        assert_eq!(again.current_id(), ids[0]);
        assert_eq!(again.current_id().len(), 8);
    }

    #[test]
    fn bad_key_rings_are_refused_without_echoing_keys() {
        let short = STANDARD.encode([1u8; 16]);
        for (text, expect) in [
            ("", "no key"),
            ("# only a comment", "no key"),
            (short.as_str(), "not 32 bytes"),
            ("a:not-base64!", "not 32 bytes"),
            (&format!("a_b:{HEX}"), "an id is"),
            (&format!("a:{HEX}\nA:{}", b64(1)), "twice"),
        ] {
            let err = KeyRing::parse(text).unwrap_err().to_string();
            assert!(err.contains(expect), "{text:?}: {err}");
            assert!(!err.contains(&short) && !err.contains(HEX), "{err}");
        }
        let ring = KeyRing::parse(&format!("a:{HEX}")).unwrap();
        assert_eq!(format!("{ring:?}"), "KeyRing { ids: [\"a\"] }");
        assert_eq!(format!("{:?}", KeySource::Value(HEX.into())), "Value(***)");
    }

    #[test]
    fn generated_rings_parse_and_differ() {
        let (a, text) = KeyRing::generate();
        let b = KeyRing::parse(&text).unwrap();
        assert_eq!(a.current_id(), b.current_id());
        let sealed = a.seal("job_1", b"x");
        assert_eq!(b.open("job_1", &sealed).unwrap(), b"x");
        assert_ne!(KeyRing::generate().1, text);
    }

    #[test]
    fn the_file_of_a_sqlite_url() {
        assert_eq!(
            sqlite_file("sqlite:///data/drover/coordinator.db?mode=rwc"),
            Some(PathBuf::from("/data/drover/coordinator.db"))
        );
        assert_eq!(sqlite_file("sqlite:rel.db"), Some(PathBuf::from("rel.db")));
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://u:p@h/db"), None);
    }

    #[test]
    fn the_default_key_file_sits_beside_the_database() {
        assert_eq!(
            default_key_file("sqlite:///data/drover/coordinator.db"),
            Some(PathBuf::from("/data/drover/coordinator.key"))
        );
        assert_eq!(
            default_key_file("sqlite://rel/x.db?mode=rwc"),
            Some(PathBuf::from("rel/x.key"))
        );
        assert_eq!(default_key_file("sqlite::memory:"), None);
        assert_eq!(default_key_file("sqlite://x.db?mode=memory"), None);
        assert_eq!(default_key_file("postgres://u:p@h/db"), None);
    }

    #[test]
    fn the_default_key_is_written_once_with_mode_0600() {
        let dir = std::env::temp_dir().join(format!("drover-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("d.db").display());
        let first = load(&KeySource::Default, &url).unwrap();
        let second = load(&KeySource::Default, &url).unwrap();
        assert_eq!(first.current_id(), second.current_id());
        let mode = std::fs::metadata(dir.join("d.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let err = load(&KeySource::Default, "postgres://u@h/db").unwrap_err();
        assert!(err.to_string().contains("--secret-key-file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
