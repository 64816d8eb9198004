//! The settings window's commands. Each one delegates: to the supervisor
//! (this machine's runners and secrets) or to the coordinator's API with
//! the signed-in member's token. All fail with `{code, message}`.

use std::sync::Arc;

use drover_wire::{
    ApiToken, AuditPage, GithubInstall, GithubInstallLink, GithubInstallRequest,
    GithubInstallation, GithubRepo, Invite, Job, JoinToken, JoinTokenSummary, Member, PairRunner,
    RevokedRunner, Runner, Runtime, Usage, UsageReport,
};
use runner_core::client::{RunnerListing, Scope};
use serde::Serialize;
use tauri::State;
use tauri_plugin_autostart::ManagerExt as _;

use crate::error::{AppError, AppResult};
use crate::supervisor::{AppState, PendingLink, Settings, Supervisor};

type Sup<'a> = State<'a, Arc<Supervisor>>;

#[tauri::command]
pub async fn get_state(sup: Sup<'_>) -> AppResult<AppState> {
    Ok(sup.state().await)
}

#[tauri::command]
pub async fn sign_in(sup: Sup<'_>, url: String, token: String) -> AppResult<AppState> {
    sup.sign_in(&url, &token).await
}

#[tauri::command]
pub async fn sign_out(sup: Sup<'_>) -> AppResult<AppState> {
    sup.sign_out().await
}

#[tauri::command]
pub async fn open_link(sup: Sup<'_>, link: String) -> AppResult<PendingLink> {
    sup.open_link(&link).await
}

#[tauri::command]
pub async fn confirm_link(sup: Sup<'_>) -> AppResult<AppState> {
    sup.confirm_link().await
}

#[tauri::command]
pub async fn dismiss_link(sup: Sup<'_>) -> AppResult<AppState> {
    sup.dismiss_link().await
}

#[tauri::command]
pub async fn set_runner_count(sup: Sup<'_>, pool: String, count: usize) -> AppResult<AppState> {
    sup.set_runner_count(&pool, count).await
}

#[tauri::command]
pub async fn set_pool_settings(
    sup: Sup<'_>,
    pool: String,
    slots: usize,
    labels: Vec<String>,
) -> AppResult<AppState> {
    sup.set_pool_settings(&pool, slots, labels).await
}

#[tauri::command]
pub async fn set_allow_unsandboxed(sup: Sup<'_>, pool: String, allow: bool) -> AppResult<AppState> {
    sup.set_allow_unsandboxed(&pool, allow).await
}

#[tauri::command]
pub async fn set_paused(sup: Sup<'_>, paused: bool) -> AppResult<AppState> {
    sup.set_paused(paused).await
}

#[tauri::command]
pub async fn set_settings(
    app: tauri::AppHandle,
    sup: Sup<'_>,
    autostart: bool,
    pause_on_battery: bool,
) -> AppResult<AppState> {
    let launcher = app.autolaunch();
    let result = if autostart {
        launcher.enable()
    } else {
        launcher.disable()
    };
    result.map_err(|e| AppError::new("INTERNAL", format!("start at login: {e}")))?;
    sup.set_settings(Settings {
        autostart,
        pause_on_battery,
    })
    .await
}

// ------------------------------------------------------------ account and own pools

#[tauri::command]
pub async fn list_devices(sup: Sup<'_>) -> AppResult<Vec<ApiToken>> {
    Ok(sup.account_client().await?.tokens().await?.tokens)
}

#[tauri::command]
pub async fn revoke_device(sup: Sup<'_>, id: String) -> AppResult<Vec<ApiToken>> {
    let member = sup.account_client().await?;
    member.revoke_token(&id).await?;
    Ok(member.tokens().await?.tokens)
}

#[tauri::command]
pub async fn list_my_pools(sup: Sup<'_>) -> AppResult<Vec<Runtime>> {
    Ok(sup
        .account_client()
        .await?
        .runtimes(Scope::Me)
        .await?
        .runtimes)
}

#[tauri::command]
pub async fn create_my_pool(sup: Sup<'_>, name: String) -> AppResult<AppState> {
    let pool = sup
        .account_client()
        .await?
        .create_runtime(Scope::Me, name.trim())
        .await?;
    sup.set_runner_count(&pool.reference, 1).await
}

#[tauri::command]
pub async fn list_my_runners(sup: Sup<'_>) -> AppResult<Vec<Runner>> {
    Ok(sup
        .account_client()
        .await?
        .runners(RunnerListing::Mine)
        .await?
        .runners)
}

/// The member's newest jobs; with `pool` (a ref, or a pool id), those of that pool.
#[tauri::command]
pub async fn list_jobs(
    sup: Sup<'_>,
    pool: Option<String>,
    limit: Option<u32>,
) -> AppResult<Vec<Job>> {
    let limit = limit.unwrap_or(50).clamp(1, 500);
    let jobs = sup.account_client().await?.jobs(None, limit).await?.jobs;
    let Some(pool) = pool else { return Ok(jobs) };
    let state = sup.state().await;
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

#[tauri::command]
pub async fn job_logs(sup: Sup<'_>, id: String) -> AppResult<String> {
    Ok(sup.account_client().await?.logs(&id).await?)
}

// ------------------------------------------------------------ workspace (admins)

#[tauri::command]
pub async fn ws_list_pools(sup: Sup<'_>) -> AppResult<Vec<Runtime>> {
    Ok(sup
        .account_client()
        .await?
        .runtimes(Scope::Workspace)
        .await?
        .runtimes)
}

#[tauri::command]
pub async fn ws_create_pool(sup: Sup<'_>, name: String) -> AppResult<Runtime> {
    Ok(sup
        .account_client()
        .await?
        .create_runtime(Scope::Workspace, name.trim())
        .await?)
}

#[tauri::command]
pub async fn ws_roster(sup: Sup<'_>) -> AppResult<Vec<Runner>> {
    Ok(sup
        .account_client()
        .await?
        .runners(RunnerListing::Roster)
        .await?
        .runners)
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

#[tauri::command]
pub async fn ws_pair_runner(
    sup: Sup<'_>,
    pool: String,
    name: Option<String>,
    labels: Option<Vec<String>>,
) -> AppResult<PairedWorkspaceRunner> {
    let admin = sup.account_client().await?;
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
#[tauri::command]
pub async fn ws_revoke_runner(sup: Sup<'_>, id: String) -> AppResult<Option<RevokedRunner>> {
    Ok(sup
        .account_client()
        .await?
        .revoke_workspace_runner(&id)
        .await?)
}

#[tauri::command]
pub async fn ws_join_token(
    sup: Sup<'_>,
    pool: String,
    ttl_seconds: Option<u64>,
) -> AppResult<JoinToken> {
    Ok(sup
        .account_client()
        .await?
        .join_token_for(Scope::Workspace, &pool, ttl_seconds)
        .await?)
}

/// The workspace pools' join tokens that have not expired (never the tokens).
#[tauri::command]
pub async fn ws_join_tokens(sup: Sup<'_>) -> AppResult<Vec<JoinTokenSummary>> {
    Ok(sup
        .account_client()
        .await?
        .join_tokens(Scope::Workspace)
        .await?
        .join_tokens)
}

/// Revokes one of the workspace pools' join tokens; answers the ones left.
#[tauri::command]
pub async fn ws_revoke_join_token(sup: Sup<'_>, id: String) -> AppResult<Vec<JoinTokenSummary>> {
    let admin = sup.account_client().await?;
    admin.revoke_join_token(Scope::Workspace, &id).await?;
    Ok(admin.join_tokens(Scope::Workspace).await?.join_tokens)
}

#[tauri::command]
pub async fn ws_usage(sup: Sup<'_>) -> AppResult<Usage> {
    Ok(sup.account_client().await?.usage().await?)
}

#[tauri::command]
pub async fn ws_set_budget(sup: Sup<'_>, monthly_minutes: Option<u64>) -> AppResult<Usage> {
    Ok(sup
        .account_client()
        .await?
        .set_budget(monthly_minutes)
        .await?)
}

#[tauri::command]
pub async fn ws_members(sup: Sup<'_>) -> AppResult<Vec<Member>> {
    Ok(sup.account_client().await?.members().await?.members)
}

#[tauri::command]
pub async fn ws_invite_member(
    sup: Sup<'_>,
    email: String,
    role: Option<String>,
) -> AppResult<Invite> {
    Ok(sup
        .account_client()
        .await?
        .invite_member(&email, role.as_deref())
        .await?)
}

#[tauri::command]
pub async fn ws_update_member(sup: Sup<'_>, id: String, role: String) -> AppResult<Member> {
    Ok(sup
        .account_client()
        .await?
        .update_member(&id, &role)
        .await?)
}

#[tauri::command]
pub async fn ws_remove_member(sup: Sup<'_>, id: String) -> AppResult<()> {
    Ok(sup.account_client().await?.remove_member(&id).await?)
}

#[tauri::command]
pub async fn ws_usage_report(
    sup: Sup<'_>,
    month: Option<String>,
    by: Option<String>,
) -> AppResult<UsageReport> {
    Ok(sup
        .account_client()
        .await?
        .usage_report(Scope::Workspace, month.as_deref(), by.as_deref())
        .await?)
}

/// A page of the audit log (50 entries), older than `before` if given.
#[tauri::command]
pub async fn ws_audit(
    sup: Sup<'_>,
    action: Option<String>,
    before: Option<String>,
) -> AppResult<AuditPage> {
    let filter = drover_wire::AuditQuery {
        action,
        before,
        limit: Some(50),
        ..drover_wire::AuditQuery::default()
    };
    Ok(sup.account_client().await?.audit(&filter).await?)
}

// ------------------------------------------------------------ GitHub (admins)

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

#[tauri::command]
pub async fn ws_github_overview(sup: Sup<'_>) -> AppResult<GithubOverview> {
    let admin = sup.account_client().await?;
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

#[tauri::command]
pub async fn ws_github_install_link(
    sup: Sup<'_>,
    host: Option<String>,
) -> AppResult<GithubInstallLink> {
    Ok(sup
        .account_client()
        .await?
        .github_install_link(host.as_deref())
        .await?)
}

/// Pairs a workspace runner and registers a GitHub runner beside it: the
/// install script (shown once) and the workflow hint.
#[tauri::command]
pub async fn ws_github_install(
    sup: Sup<'_>,
    request: GithubInstallRequest,
) -> AppResult<GithubInstall> {
    Ok(sup.account_client().await?.github_install(&request).await?)
}

/// Every command, for the builder's invoke handler.
pub fn handler() -> impl Fn(tauri::ipc::Invoke<tauri::Wry>) -> bool + Send + Sync + 'static {
    tauri::generate_handler![
        get_state,
        sign_in,
        sign_out,
        open_link,
        confirm_link,
        dismiss_link,
        set_runner_count,
        set_pool_settings,
        set_allow_unsandboxed,
        set_paused,
        set_settings,
        list_devices,
        revoke_device,
        list_my_pools,
        create_my_pool,
        list_my_runners,
        list_jobs,
        job_logs,
        ws_list_pools,
        ws_create_pool,
        ws_roster,
        ws_pair_runner,
        ws_revoke_runner,
        ws_join_token,
        ws_join_tokens,
        ws_revoke_join_token,
        ws_usage,
        ws_set_budget,
        ws_members,
        ws_invite_member,
        ws_update_member,
        ws_remove_member,
        ws_usage_report,
        ws_audit,
        ws_github_overview,
        ws_github_install_link,
        ws_github_install,
    ]
}
