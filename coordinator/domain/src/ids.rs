//! Identifiers and credentials: prefixed, random, parsed once.

use std::fmt;

use sha2::{Digest, Sha256};

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    buf
}

/// Lower-case Crockford base32 of `bytes`.
fn base32(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// A new identifier with `prefix`, e.g. `job_01jd…`: 48 bits of Unix
/// milliseconds, then 48 random bits. Ids made later sort later, so a big
/// table's unique index grows at its right edge (cache-friendly) instead of
/// at random pages.
pub fn new_id(prefix: &str) -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    id_at(prefix, millis, random_bytes::<6>())
}

fn id_at(prefix: &str, millis: u64, random: [u8; 6]) -> String {
    let mut bytes = [0u8; 12];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6..].copy_from_slice(&random);
    format!("{prefix}_{}", base32(&bytes))
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            pub fn generate() -> Self {
                Self(new_id($prefix))
            }

            /// Accepts only well-formed ids of this kind.
            pub fn parse(s: &str) -> Option<Self> {
                let rest = s.strip_prefix($prefix)?.strip_prefix('_')?;
                (!rest.is_empty()
                    && rest.len() <= 32
                    && rest.bytes().all(|b| ALPHABET.contains(&b)))
                .then(|| Self(s.to_owned()))
            }

            /// For values read back from our own database.
            pub fn from_db(s: String) -> Self {
                Self(s)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(WorkspaceId, "ws");
id_type!(
    /// A member of a workspace; the `<subject>` of personal refs.
    MemberId,
    "usr"
);
id_type!(
    /// A pool.
    RuntimeId,
    "rt"
);
id_type!(RunnerId, "rn");
id_type!(JobId, "job");
id_type!(LeaseId, "lse");
id_type!(
    /// A member's API token, as listed and revoked (never the token itself).
    TokenId,
    "tok"
);
id_type!(
    /// A join token, as listed and revoked (never the token itself).
    JoinTokenId,
    "jt"
);
/// A coordinator replica's id (`co_…`).
pub const REPLICA_PREFIX: &str = "co";

/// The kinds of bearer credential, told apart by prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    User,
    Runner,
    Join,
    /// A one-time pairing code: never a bearer, only redeemed for a token.
    Pairing,
}

impl TokenKind {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::User => "drv_",
            Self::Runner => "rnr_",
            Self::Join => "djt_",
            Self::Pairing => "dpc_",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Runner => "runner",
            Self::Join => "join",
            Self::Pairing => "pairing",
        }
    }

    pub fn of(token: &str) -> Option<Self> {
        [Self::User, Self::Runner, Self::Join, Self::Pairing]
            .into_iter()
            .find(|k| token.starts_with(k.prefix()))
    }
}

/// A bearer credential in plain text. Only ever shown once to its owner; the
/// database keeps [`Secret::hash`]. `Debug` never prints the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// 256 bits of entropy behind the kind's prefix.
    pub fn generate(kind: TokenKind) -> Self {
        Self(format!(
            "{}{}",
            kind.prefix(),
            base32(&random_bytes::<32>())
        ))
    }

    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// `value` if it has the shape [`Secret::generate`] gives `kind`; a
    /// malformed one is refused before any lookup.
    pub fn parse(kind: TokenKind, value: &str) -> Option<Self> {
        let rest = value.strip_prefix(kind.prefix())?;
        (rest.len() == 52 && rest.bytes().all(|b| ALPHABET.contains(&b)))
            .then(|| Self(value.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// SHA-256, hex. Tokens are high-entropy, so a fast hash is the right one.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        let mut out = String::with_capacity(64);
        for b in digest {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_other_kinds() {
        let id = JobId::generate();
        assert_eq!(JobId::parse(id.as_str()), Some(id.clone()));
        assert_eq!(RunnerId::parse(id.as_str()), None);
        assert_eq!(JobId::parse("job_"), None);
        assert_eq!(JobId::parse("job_ABC"), None);
        assert_eq!(JobId::parse("job_../../etc"), None);
    }

    #[test]
    fn ids_made_later_sort_later_and_do_not_collide() {
        let ids: Vec<String> = (0..2000).map(|_| new_id("job")).collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        let now = 1_800_000_000_000;
        assert!(
            id_at("job", now + 1, [0; 6]) > id_at("job", now, [0xff; 6]),
            "a later id sorts after an earlier one"
        );
        assert!(JobId::parse(&id_at("job", now, [7; 6])).is_some());
    }

    #[test]
    fn tokens_are_prefixed_distinct_and_hidden_from_debug() {
        let a = Secret::generate(TokenKind::Runner);
        let b = Secret::generate(TokenKind::Runner);
        assert!(a.expose().starts_with("rnr_"));
        assert_ne!(a, b);
        assert_eq!(TokenKind::of(a.expose()), Some(TokenKind::Runner));
        assert_eq!(format!("{a:?}"), "Secret(***)");
        assert_eq!(a.hash().len(), 64);
        assert_ne!(a.hash(), a.expose());
        let code = Secret::generate(TokenKind::Pairing);
        assert_eq!(
            Secret::parse(TokenKind::Pairing, code.expose()),
            Some(code.clone())
        );
        assert_eq!(Secret::parse(TokenKind::User, code.expose()), None);
        assert_eq!(Secret::parse(TokenKind::Pairing, "dpc_short"), None);
    }

    #[test]
    fn base32_is_stable() {
        assert_eq!(base32(&[0, 0]), "0000");
        assert_eq!(base32(&[0xff]), "zw");
    }
}
