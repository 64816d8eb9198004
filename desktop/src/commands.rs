//! The settings window's commands. Each one delegates: to the supervisor
//! (this machine's runners and secrets) or to the coordinator's API with
//! the signed-in member's token. All fail with `{code, message}`.
//!
//! They run in the tray process, which owns the runners and the keychain;
//! the window, a process of its own (`window.rs`), forwards each `invoke`
//! here by name with its JSON arguments, and [`call`] answers it.

use std::sync::Arc;

use drover_wire::{
    ApiToken, AuditPage, GithubInstall, GithubInstallLink, GithubInstallRequest,
    GithubInstallation, GithubOnDemand, GithubOnDemandList, GithubOnDemandRequest, GithubRepo,
    Invite, Job, JoinToken, JoinTokenSummary, Member, PairRunner, RevokedRunner, Runner, Runtime,
    Usage, UsageReport, op,
};
use runner_core::client::{RunnerListing, Scope};
use serde::Serialize;
use serde_json::Value;
use tauri_plugin_autostart::ManagerExt as _;

use crate::error::{AppError, AppResult};
use crate::supervisor::{AppState, PendingLink, Settings, Supervisor};

/// What a command runs with: the supervisor, and the app (start at login).
pub struct Ctx {
    pub sup: Arc<Supervisor>,
    pub app: tauri::AppHandle,
}

/// Defines each command as an async function and [`call`], which finds
/// one by its name and takes its arguments from the window's JSON object
/// (camelCase keys, as `invoke` sends them; a missing `Option` is `None`).
macro_rules! commands {
    ($(
        $(#[$meta:meta])*
        async fn $name:ident($cx:ident: &Ctx $(, $arg:ident: $ty:ty)* $(,)?) -> AppResult<$ret:ty> $body:block
    )*) => {
        $(
            $(#[$meta])*
            pub async fn $name($cx: &Ctx $(, $arg: $ty)*) -> AppResult<$ret> $body
        )*

        /// The command named `name`, with `args`, answered as JSON.
        pub async fn call(cx: &Ctx, name: &str, args: Value) -> AppResult<Value> {
            match name {
                $(stringify!($name) => {
                    #[derive(serde::Deserialize)]
                    #[serde(rename_all = "camelCase")]
                    struct Args { $($arg: $ty,)* }
                    let Args { $($arg,)* } = serde_json::from_value(args).map_err(|e| {
                        AppError::invalid(format!("{}: {e}", stringify!($name)))
                    })?;
                    let answer = $name(cx $(, $arg)*).await?;
                    serde_json::to_value(answer)
                        .map_err(|e| AppError::new("INTERNAL", format!("{}: {e}", stringify!($name))))
                })*
                _ => Err(AppError::new("UNKNOWN_COMMAND", format!("no command {name:?}"))),
            }
        }
    };
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairedWorkspaceRunner {
    runner: Runner,
    /// Shown once.
    token: String,
    /// How to start it on a server (the token in the environment, not on
    /// the command line, where other users could read it).
    command: String,
}

/// What the workspace's GitHub App is installed on, and every repository
/// it may reach, for the dialog's picker.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GithubOverview {
    installations: Vec<GithubInstallation>,
    repos: Vec<GithubRepo>,
    /// More repositories than the picker lists (it stops at `MAX_REPO_PAGES`).
    truncated: bool,
}

/// Pages of 100 repositories the picker reads at most.
const MAX_REPO_PAGES: u32 = 10;

commands! {
async fn get_state(cx: &Ctx) -> AppResult<AppState> {
    Ok(cx.sup.state().await)
}

async fn sign_in(cx: &Ctx, url: String, token: String) -> AppResult<AppState> {
    cx.sup.sign_in(&url, &token).await
}

async fn sign_out(cx: &Ctx) -> AppResult<AppState> {
    cx.sup.sign_out().await
}

async fn open_link(cx: &Ctx, link: String) -> AppResult<PendingLink> {
    cx.sup.open_link(&link).await
}

async fn confirm_link(cx: &Ctx) -> AppResult<AppState> {
    cx.sup.confirm_link().await
}

async fn dismiss_link(cx: &Ctx) -> AppResult<AppState> {
    cx.sup.dismiss_link().await
}

async fn set_runner_count(cx: &Ctx, pool: String, count: usize) -> AppResult<AppState> {
    cx.sup.set_runner_count(&pool, count).await
}

async fn set_pool_settings(
    cx: &Ctx,
    pool: String,
    slots: usize,
    labels: Vec<String>,
) -> AppResult<AppState> {
    cx.sup.set_pool_settings(&pool, slots, labels).await
}

async fn set_allow_unsandboxed(cx: &Ctx, pool: String, allow: bool) -> AppResult<AppState> {
    cx.sup.set_allow_unsandboxed(&pool, allow).await
}

async fn set_paused(cx: &Ctx, paused: bool) -> AppResult<AppState> {
    cx.sup.set_paused(paused).await
}

async fn set_settings(cx: &Ctx, settings: Settings) -> AppResult<AppState> {
    let launcher = cx.app.autolaunch();
    let result = if settings.autostart {
        launcher.enable()
    } else {
        launcher.disable()
    };
    result.map_err(|e| AppError::new("INTERNAL", format!("start at login: {e}")))?;
    cx.sup.set_settings(settings).await
}

// ------------------------------------------------------------ account and own pools

async fn list_devices(cx: &Ctx) -> AppResult<Vec<ApiToken>> {
    Ok(cx.sup.account_client().await?.tokens().await?.tokens)
}

async fn revoke_device(cx: &Ctx, id: String) -> AppResult<Vec<ApiToken>> {
    let member = cx.sup.account_client().await?;
    member.revoke_token(&id).await?;
    Ok(member.tokens().await?.tokens)
}

async fn list_my_pools(cx: &Ctx) -> AppResult<Vec<Runtime>> {
    Ok(cx.sup
        .account_client()
        .await?
        .runtimes(Scope::Me)
        .await?
        .runtimes)
}

async fn create_my_pool(cx: &Ctx, name: String) -> AppResult<AppState> {
    let pool = cx.sup
        .account_client()
        .await?
        .create_runtime(Scope::Me, name.trim())
        .await?;
    cx.sup.set_runner_count(&pool.reference, 1).await
}

async fn list_my_runners(cx: &Ctx) -> AppResult<Vec<Runner>> {
    Ok(cx.sup
        .account_client()
        .await?
        .runners(RunnerListing::Mine)
        .await?
        .runners)
}

/// The member's newest jobs; with `pool` (a ref, or a pool id), those of that pool.
async fn list_jobs(
    cx: &Ctx,
    pool: Option<String>,
    limit: Option<u32>,
) -> AppResult<Vec<Job>> {
    let limit = limit.unwrap_or(50).clamp(1, 500);
    let jobs = cx.sup.account_client().await?.jobs(None, limit).await?.jobs;
    let Some(pool) = pool else { return Ok(jobs) };
    let state = cx.sup.state().await;
    let id = state
        .pools
        .iter()
        .find(|p| p.reference == pool)
        .map(|p| p.runtime_id.clone());
    Ok(jobs
        .into_iter()
        .filter(|j| j.runtime == pool || j.runtime_id == pool || Some(&j.runtime_id) == id.as_ref())
        .collect())
}

async fn job_logs(cx: &Ctx, id: String) -> AppResult<String> {
    Ok(cx.sup.account_client().await?.logs(&id).await?)
}

// ------------------------------------------------------------ workspace (admins)

async fn ws_list_pools(cx: &Ctx) -> AppResult<Vec<Runtime>> {
    Ok(cx.sup
        .account_client()
        .await?
        .runtimes(Scope::Workspace)
        .await?
        .runtimes)
}

async fn ws_create_pool(cx: &Ctx, name: String) -> AppResult<Runtime> {
    Ok(cx.sup
        .account_client()
        .await?
        .create_runtime(Scope::Workspace, name.trim())
        .await?)
}

async fn ws_roster(cx: &Ctx) -> AppResult<Vec<Runner>> {
    Ok(cx.sup
        .account_client()
        .await?
        .runners(RunnerListing::Roster)
        .await?
        .runners)
}

async fn ws_pair_runner(
    cx: &Ctx,
    pool: String,
    name: Option<String>,
    labels: Option<Vec<String>>,
) -> AppResult<PairedWorkspaceRunner> {
    let admin = cx.sup.account_client().await?;
    let paired = admin
        .pair_runner(
            Scope::Workspace,
            &PairRunner {
                name: name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
                runtime: Some(pool),
                labels: labels.unwrap_or_default(),
            },
        )
        .await?;
    let command = format!(
        "DROVER_URL={} DROVER_TOKEN={} drover runner",
        admin.base_url(),
        paired.token
    );
    Ok(PairedWorkspaceRunner {
        runner: paired.runner,
        token: paired.token,
        command,
    })
}

/// Revokes a workspace runner; for one registered with GitHub, what
/// GitHub did with its GitHub runner (removed, or busy and retried).
async fn ws_revoke_runner(cx: &Ctx, id: String) -> AppResult<Option<RevokedRunner>> {
    Ok(cx.sup
        .account_client()
        .await?
        .revoke_workspace_runner(&id)
        .await?)
}

async fn ws_join_token(
    cx: &Ctx,
    pool: String,
    ttl_seconds: Option<u64>,
) -> AppResult<JoinToken> {
    Ok(cx.sup
        .account_client()
        .await?
        .join_token_for(Scope::Workspace, &pool, ttl_seconds)
        .await?)
}

/// The workspace pools' join tokens that have not expired (never the tokens).
async fn ws_join_tokens(cx: &Ctx) -> AppResult<Vec<JoinTokenSummary>> {
    Ok(cx.sup
        .account_client()
        .await?
        .join_tokens(Scope::Workspace)
        .await?
        .join_tokens)
}

/// Revokes one of the workspace pools' join tokens; answers the ones left.
async fn ws_revoke_join_token(cx: &Ctx, id: String) -> AppResult<Vec<JoinTokenSummary>> {
    let admin = cx.sup.account_client().await?;
    admin.revoke_join_token(Scope::Workspace, &id).await?;
    Ok(admin.join_tokens(Scope::Workspace).await?.join_tokens)
}

async fn ws_usage(cx: &Ctx) -> AppResult<Usage> {
    Ok(cx.sup.account_client().await?.usage().await?)
}

async fn ws_set_budget(cx: &Ctx, monthly_minutes: Option<u64>) -> AppResult<Usage> {
    Ok(cx.sup
        .account_client()
        .await?
        .set_budget(monthly_minutes)
        .await?)
}

async fn ws_members(cx: &Ctx) -> AppResult<Vec<Member>> {
    Ok(cx.sup.account_client().await?.members().await?.members)
}

async fn ws_invite_member(
    cx: &Ctx,
    email: String,
    role: Option<String>,
) -> AppResult<Invite> {
    Ok(cx.sup
        .account_client()
        .await?
        .invite_member(&email, role.as_deref())
        .await?)
}

async fn ws_update_member(cx: &Ctx, id: String, role: String) -> AppResult<Member> {
    Ok(cx.sup
        .account_client()
        .await?
        .update_member(&id, &role)
        .await?)
}

async fn ws_remove_member(cx: &Ctx, id: String) -> AppResult<()> {
    Ok(cx.sup.account_client().await?.remove_member(&id).await?)
}

async fn ws_usage_report(
    cx: &Ctx,
    month: Option<String>,
    by: Option<String>,
) -> AppResult<UsageReport> {
    Ok(cx.sup
        .account_client()
        .await?
        .usage_report(Scope::Workspace, month.as_deref(), by.as_deref())
        .await?)
}

/// A page of the audit log (50 entries), older than `before` if given.
async fn ws_audit(
    cx: &Ctx,
    action: Option<String>,
    before: Option<String>,
) -> AppResult<AuditPage> {
    let filter = drover_wire::AuditQuery {
        action,
        before,
        limit: Some(50),
        ..drover_wire::AuditQuery::default()
    };
    Ok(cx.sup.account_client().await?.audit(&filter).await?)
}

// ------------------------------------------------------------ GitHub (admins)

async fn ws_github_overview(cx: &Ctx) -> AppResult<GithubOverview> {
    let admin = cx.sup.account_client().await?;
    let installations = admin.github_installations().await?.installations;
    let mut repos = Vec::new();
    let mut page = Some(1);
    while let Some(n) = page.filter(|n| *n <= MAX_REPO_PAGES) {
        let list = admin.github_repos(n, 100).await?;
        repos.extend(list.repos);
        page = list.next_page;
    }
    Ok(GithubOverview {
        installations,
        repos,
        truncated: page.is_some(),
    })
}

async fn ws_github_install_link(
    cx: &Ctx,
    host: Option<String>,
) -> AppResult<GithubInstallLink> {
    Ok(cx.sup
        .account_client()
        .await?
        .github_install_link(host.as_deref())
        .await?)
}

/// Pairs a workspace runner and registers a GitHub runner beside it: the
/// install script (shown once) and the workflow hint.
async fn ws_github_install(
    cx: &Ctx,
    request: GithubInstallRequest,
) -> AppResult<GithubInstall> {
    Ok(cx.sup.account_client().await?.github_install(&request).await?)
}

/// The workspace pools that serve GitHub workflow jobs on demand.
async fn ws_github_on_demand(cx: &Ctx) -> AppResult<GithubOnDemandList> {
    let admin = cx.sup.account_client().await?;
    Ok(admin.call::<op::ListGithubOnDemand>(&[], &(), &()).await?)
}

/// Turns a workspace pool on for a repository or an organization.
async fn ws_github_on_demand_set(
    cx: &Ctx,
    request: GithubOnDemandRequest,
) -> AppResult<GithubOnDemand> {
    let admin = cx.sup.account_client().await?;
    Ok(admin.call::<op::SetGithubOnDemand>(&[], &(), &request).await?)
}

async fn ws_github_on_demand_remove(cx: &Ctx, id: String) -> AppResult<()> {
    let admin = cx.sup.account_client().await?;
    Ok(admin.call::<op::RemoveGithubOnDemand>(&[&id], &(), &()).await?)
}
}
