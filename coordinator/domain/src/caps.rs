//! Capabilities and requirements: `docker`, `gpu`, `os=linux`, `arch=x86_64`, custom labels.
//!
//! A requirement `key=value` is met by the capability `key=value`; a bare
//! requirement `key` is met by `key` or by any `key=<value>`.

use crate::error::{Error, Result};

pub const MAX_ITEMS: usize = 32;

fn valid_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

/// Checks one capability or requirement string.
pub fn valid(item: &str) -> bool {
    match item.split_once('=') {
        Some((k, v)) => valid_part(k) && valid_part(v),
        None => valid_part(item),
    }
}

/// Validates, trims and sorts a list (deduplicated), naming `what` in errors.
pub fn normalize(items: &[String], what: &str) -> Result<Vec<String>> {
    if items.len() > MAX_ITEMS {
        return Err(Error::invalid(format!("at most {MAX_ITEMS} {what}")));
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let item = item.trim();
        if !valid(item) {
            return Err(Error::invalid(format!(
                "invalid {what} entry {item:?}: use name or key=value of [A-Za-z0-9._/-]"
            )));
        }
        out.push(item.to_owned());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Does a runner with `capabilities` meet every one of `requires`?
pub fn satisfies(capabilities: &[String], requires: &[String]) -> bool {
    requires.iter().all(|req| {
        capabilities.iter().any(|cap| {
            cap == req || (!req.contains('=') && cap.split_once('=').is_some_and(|(k, _)| k == req))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn requirements_match_capabilities() {
        let caps = v(&["arch=x86_64", "docker", "gpu=a100", "os=linux"]);
        assert!(satisfies(&caps, &[]));
        assert!(satisfies(&caps, &v(&["docker"])));
        assert!(satisfies(&caps, &v(&["gpu"])));
        assert!(satisfies(&caps, &v(&["gpu=a100", "os=linux"])));
        assert!(!satisfies(&caps, &v(&["gpu=h100"])));
        assert!(!satisfies(&caps, &v(&["os=macos"])));
        assert!(!satisfies(&v(&["os=linux"]), &v(&["docker"])));
        assert!(!satisfies(&v(&["docker=no"]), &v(&["docker=yes"])));
    }

    #[test]
    fn normalize_sorts_dedups_and_refuses_junk() {
        assert_eq!(
            normalize(&v(&["b", " a", "b"]), "labels").unwrap(),
            v(&["a", "b"])
        );
        assert!(normalize(&v(&[""]), "labels").is_err());
        assert!(normalize(&v(&["a=b=c"]), "labels").is_err());
        assert!(normalize(&v(&["x y"]), "labels").is_err());
        let many: Vec<String> = (0..33).map(|i| format!("l{i}")).collect();
        assert!(normalize(&many, "labels").is_err());
    }
}
