//! Runtime refs: how a job names where it runs (SPEC §2). Parsed once, here.
//!
//! | ref                      | parsed as                                      |
//! |--------------------------|------------------------------------------------|
//! | `self`                   | personal, submitter's default pool             |
//! | `self:<name>`            | personal pool `<name>`, or a runner by id       |
//! | `self:<subject>:<name>`  | canonical personal; `<subject>` must be caller |
//! | `self:ws`                | the tenant's default workspace pool            |
//! | `self:ws:<name>`         | workspace pool `<name>`, or a runner by id      |
//! | `ws:<workspace>:<name>`  | canonical workspace; must be the job's tenant  |
//!
//! Parsing knows nothing about who asks; resolving against the caller's
//! identity (and answering 404 across tenants) happens in `store::placement`.

use std::fmt;

/// The pool name a bare `self` or `self:ws` means.
pub const DEFAULT_POOL: &str = "default";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeRef {
    Personal {
        /// Present in the canonical form; must be the submitter.
        subject: Option<String>,
        /// Pool name, pool id or runner id; `None` is the default pool.
        target: Option<String>,
    },
    Workspace {
        /// Present in the canonical form; must be the job's tenant.
        workspace: Option<String>,
        target: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError(pub String);

impl fmt::Display for RefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A pool name, workspace name, subject or id inside a ref.
pub fn valid_segment(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl RuntimeRef {
    pub fn parse(input: &str) -> Result<Self, RefError> {
        let bad = |why: &str| {
            Err(RefError(format!(
                "invalid runtime ref {input:?}: {why}; expected self, self:<name>, \
                 self:ws, self:ws:<name>, ws:<workspace>:<name> or self:<subject>:<name>"
            )))
        };
        let parts: Vec<&str> = input.split(':').collect();
        if let Some(p) = parts.iter().find(|p| !valid_segment(p)) {
            return if p.is_empty() {
                bad("empty segment")
            } else {
                bad("segments are 1-64 of [A-Za-z0-9._-], starting alphanumeric")
            };
        }
        let some = |s: &str| Some(s.to_owned());
        Ok(match parts.as_slice() {
            ["self"] => Self::Personal {
                subject: None,
                target: None,
            },
            ["self", "ws"] => Self::Workspace {
                workspace: None,
                target: None,
            },
            ["self", "ws", name] => Self::Workspace {
                workspace: None,
                target: some(name),
            },
            ["self", name] => Self::Personal {
                subject: None,
                target: some(name),
            },
            ["self", subject, name] => Self::Personal {
                subject: some(subject),
                target: some(name),
            },
            ["ws", workspace, name] => Self::Workspace {
                workspace: some(workspace),
                target: some(name),
            },
            ["ws"] | ["ws", _] => return bad("the workspace form is ws:<workspace>:<name>"),
            [_, _, _, _, ..] => return bad("too many segments"),
            _ => return bad("it must start with self or ws"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn personal(subject: Option<&str>, target: Option<&str>) -> RuntimeRef {
        RuntimeRef::Personal {
            subject: subject.map(str::to_owned),
            target: target.map(str::to_owned),
        }
    }

    fn workspace(ws: Option<&str>, target: Option<&str>) -> RuntimeRef {
        RuntimeRef::Workspace {
            workspace: ws.map(str::to_owned),
            target: target.map(str::to_owned),
        }
    }

    #[test]
    fn every_form_of_the_grammar_parses() {
        let cases = [
            ("self", personal(None, None)),
            ("self:laptop", personal(None, Some("laptop"))),
            ("self:rn_abc", personal(None, Some("rn_abc"))),
            ("self:usr_1:laptop", personal(Some("usr_1"), Some("laptop"))),
            ("self:ws", workspace(None, None)),
            ("self:ws:builders", workspace(None, Some("builders"))),
            ("self:ws:rn_x9", workspace(None, Some("rn_x9"))),
            (
                "ws:acme:builders",
                workspace(Some("acme"), Some("builders")),
            ),
            ("ws:acme:default", workspace(Some("acme"), Some("default"))),
            ("self:ws:a.b-c_d", workspace(None, Some("a.b-c_d"))),
        ];
        for (input, want) in cases {
            assert_eq!(RuntimeRef::parse(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn malformed_refs_are_refused_with_a_reason() {
        let cases = [
            ("", "empty segment"),
            ("self:", "empty segment"),
            (":self", "empty segment"),
            ("self::x", "empty segment"),
            ("ws", "ws:<workspace>:<name>"),
            ("ws:acme", "ws:<workspace>:<name>"),
            ("ws:acme:b:c", "too many segments"),
            ("self:ws:a:b", "too many segments"),
            ("cloud", "must start with self or ws"),
            ("nomad:pool:x", "must start with self or ws"),
            ("self:-x", "segments are"),
            ("self:a b", "segments are"),
            ("self:ünï", "segments are"),
            ("self:../etc", "segments are"),
        ];
        for (input, why) in cases {
            let err = RuntimeRef::parse(input).expect_err(input);
            assert!(err.0.contains(why), "{input}: {}", err.0);
        }
        let long = format!("self:{}", "a".repeat(65));
        assert!(RuntimeRef::parse(&long).is_err());
        assert!(RuntimeRef::parse(&format!("self:{}", "a".repeat(64))).is_ok());
    }
}
