//! GitHub's webhook deliveries to the App: the signature
//! (`X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the body
//! under the App's webhook secret), and the `workflow_job` events that
//! on-demand pools act on.

use ring::hmac;
use serde::Deserialize;

use crate::ids::Secret;

/// The App's webhook secret, as an HMAC key.
pub struct WebhookKey(hmac::Key);

impl WebhookKey {
    pub fn new(secret: &Secret) -> Self {
        Self(hmac::Key::new(
            hmac::HMAC_SHA256,
            secret.expose().as_bytes(),
        ))
    }

    /// Whether `signature` (the header's value) signs `body`; compared in
    /// constant time.
    pub fn verifies(&self, body: &[u8], signature: &str) -> bool {
        let Some(hex) = signature.strip_prefix("sha256=") else {
            return false;
        };
        let Some(tag) = unhex(hex) else {
            return false;
        };
        hmac::verify(&self.0, body, &tag).is_ok()
    }

    /// The header value GitHub would send for `body` (tests, the bench).
    pub fn sign(&self, body: &[u8]) -> String {
        let tag = hmac::sign(&self.0, body);
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256={hex}")
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A `workflow_job` event, as much of it as on-demand pools read.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkflowJobEvent {
    /// `queued`, `waiting`, `in_progress`, `completed`.
    pub action: String,
    pub workflow_job: WorkflowJob,
    pub repository: Repository,
}

#[derive(Debug, Clone, Deserialize)]
pub struct WorkflowJob {
    pub id: i64,
    /// Its workflow run (cancelled whole when a budget refuses the job).
    #[serde(default)]
    pub run_id: i64,
    /// The commit it runs on (where a refusal's check run goes).
    #[serde(default)]
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`, … (the REST API's jobs).
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The runner that took it (`in_progress`, `completed`), if any.
    #[serde(default)]
    pub runner_name: Option<String>,
    /// `success`, `failure`, `cancelled`, … once completed.
    #[serde(default)]
    pub conclusion: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Repository {
    pub name: String,
    pub owner: Account,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Account {
    pub login: String,
}

/// Whether a runner with `runner` labels may take a job asking for `job`
/// labels, as GitHub decides it: every label the job asks for, ignoring
/// case.
pub fn labels_match(job: &[String], runner: &[String]) -> bool {
    !job.is_empty()
        && job
            .iter()
            .all(|j| runner.iter().any(|r| r.eq_ignore_ascii_case(j)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_nothing_else_does() {
        let key = WebhookKey::new(&Secret::new("It's a Secret to Everybody".into()));
        // GitHub's own example (docs: validating webhook deliveries).
        let body = b"Hello, World!";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(key.sign(body), good);
        assert!(key.verifies(body, good));
        assert!(!key.verifies(b"Hello, World?", good));
        assert!(!key.verifies(body, &good.replace("sha256=", "sha1=")));
        assert!(!key.verifies(body, "sha256=zz"));
        assert!(!key.verifies(body, &good[..good.len() - 2]));
        let other = WebhookKey::new(&Secret::new("another".into()));
        assert!(!other.verifies(body, good));
    }

    #[test]
    fn a_runner_takes_a_job_whose_labels_it_all_has() {
        let l = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let runner = l(&["self-hosted", "drover-ci", "linux"]);
        assert!(labels_match(&l(&["self-hosted", "drover-ci"]), &runner));
        assert!(labels_match(
            &l(&["Self-Hosted", "DROVER-ci", "linux"]),
            &runner
        ));
        assert!(!labels_match(&l(&["self-hosted", "gpu"]), &runner));
        assert!(!labels_match(&l(&["ubuntu-latest"]), &runner));
        assert!(!labels_match(&[], &runner));
    }
}
