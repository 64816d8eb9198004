//! GitHub's rules for the names a registration carries, checked before any
//! call, so that bad input is a clear `400` here rather than GitHub's `422`
//! (and never reaches the install script's shell).

/// A user or organization login: 1-39 letters, digits or single hyphens,
/// not starting or ending with a hyphen.
pub fn valid_login(s: &str) -> bool {
    (1..=39).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// A repository name: 1-100 of letters, digits, `.`, `-`, `_`; not `.` or `..`.
pub fn valid_repo_name(s: &str) -> bool {
    (1..=100).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && s != "."
        && s != ".."
}

/// `owner/name`, split.
pub fn repository(s: &str) -> Option<(&str, &str)> {
    let (owner, name) = s.split_once('/')?;
    (valid_login(owner) && valid_repo_name(name)).then_some((owner, name))
}

/// A runner label: 1-64 of letters, digits, `.`, `_`, `-` (GitHub labels
/// hold no comma or whitespace; `config.sh --labels` is comma separated).
pub fn valid_label(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A runner group name: 1-64 printable characters, no comma, quote or
/// backslash, not only spaces.
pub fn valid_runner_group(s: &str) -> bool {
    (1..=64).contains(&s.chars().count())
        && !s.trim().is_empty()
        && !s
            .chars()
            .any(|c| c.is_control() || matches!(c, ',' | '"' | '\'' | '\\' | '`' | '$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_githubs_rules() {
        assert!(valid_login("octo-org") && valid_login("a") && valid_login(&"a".repeat(39)));
        for bad in ["", "-a", "a-", "a--b", "a_b", "a.b", &"a".repeat(40)] {
            assert!(!valid_login(bad), "{bad}");
        }
        assert_eq!(
            repository("octo/hello.world_1"),
            Some(("octo", "hello.world_1"))
        );
        for bad in [
            "octo", "octo/", "/x", "octo/..", "octo/a b", "octo/a/b", "-o/x",
        ] {
            assert_eq!(repository(bad), None, "{bad}");
        }
        assert!(valid_label("gpu") && valid_label("zone.eu-1_a"));
        assert!(!valid_label("a,b") && !valid_label("a b") && !valid_label(""));
        assert!(valid_runner_group("Default") && valid_runner_group("Build servers (EU)"));
        assert!(
            !valid_runner_group("a'b") && !valid_runner_group("  ") && !valid_runner_group("$(x)")
        );
    }
}
