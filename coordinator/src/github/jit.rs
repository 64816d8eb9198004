//! Just-in-time runners (GitHub Actions on demand): a configuration minted
//! for one ephemeral runner, and a runner removed by its id.

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use super::{GithubApp, GithubRunner, Host, Removal, Target, github_error};
use crate::error::Result;
use crate::ids::Secret;

/// An ephemeral runner to mint a just-in-time configuration for.
pub struct JitRunner<'a> {
    pub name: &'a str,
    /// GitHub's default group is 1 (repositories have only that one).
    pub runner_group_id: i64,
    pub labels: &'a [String],
}

impl GithubApp {
    /// A just-in-time configuration for one ephemeral runner called `name`
    /// on `target` (GitHub registers the runner at once; it takes one job
    /// and is gone): the runner's id and the encoded config (a secret).
    pub async fn jit_config(
        &self,
        host: &Host,
        installation: i64,
        target: &Target,
        jit: &JitRunner<'_>,
    ) -> Result<(i64, Secret)> {
        let path = format!("{}/actions/runners/generate-jitconfig", target.api_prefix());
        let what = format!("POST {path}");
        let body = serde_json::json!({
            "name": jit.name,
            "runner_group_id": jit.runner_group_id,
            "labels": jit.labels,
            "work_folder": "_work",
        });
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &target.token_scope(),
                Method::POST,
                &path,
                Some(&body),
                &what,
            )
            .await?;
        if status != StatusCode::CREATED {
            return Err(github_error(&what, status, &body));
        }
        #[derive(Deserialize)]
        struct Minted {
            runner: GithubRunner,
            encoded_jit_config: String,
        }
        let m: Minted = serde_json::from_slice(&body)
            .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
        Ok((m.runner.id, Secret::new(m.encoded_jit_config)))
    }

    /// Removes the runner with GitHub's id `id` from `target`.
    pub async fn remove_runner_id(
        &self,
        host: &Host,
        installation: i64,
        target: &Target,
        id: i64,
    ) -> Result<Removal> {
        let path = format!("{}/actions/runners/{id}", target.api_prefix());
        let what = format!("DELETE {}/actions/runners/{{id}}", target.api_prefix());
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &target.token_scope(),
                Method::DELETE,
                &path,
                None,
                &what,
            )
            .await?;
        match status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => Ok(Removal::Removed),
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::CONFLICT => Ok(Removal::Busy),
            _ => Err(github_error(&what, status, &body)),
        }
    }
}
