//! A repository's id on GitHub, read with an installation token: what a
//! CI link pins, so that a repository deleted and made again under the same
//! name is not the one that was linked.

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use super::target::TokenScope;
use super::{GithubApp, Host, github_error};
use crate::error::Result;

impl GithubApp {
    /// GitHub's id of `owner/repo`, when `installation` reaches it (`None`:
    /// GitHub answers 404, the repository is not there or not the
    /// installation's).
    pub async fn repository_id(
        &self,
        host: &Host,
        installation: i64,
        owner: &str,
        repo: &str,
    ) -> Result<Option<i64>> {
        let path = format!("/repos/{owner}/{repo}");
        let what = format!("GET {path}");
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &TokenScope::METADATA,
                Method::GET,
                &path,
                None,
                &what,
            )
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status != StatusCode::OK {
            return Err(github_error(&what, status, &body));
        }
        #[derive(Deserialize)]
        struct R {
            id: i64,
        }
        let r: R = serde_json::from_slice(&body)
            .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
        Ok(Some(r.id))
    }
}
