// One typed function per app command. Every rejection becomes an ApiError.

import { invoke } from "@tauri-apps/api/core";
import type {
  ApiError,
  ApiToken,
  AppState,
  AuditPage,
  GithubInstall,
  GithubInstallLink,
  GithubInstallRequest,
  GithubOnDemand,
  GithubOnDemandList,
  GithubOnDemandRequest,
  GithubOverview,
  Invite,
  Job,
  JoinToken,
  JoinTokenSummary,
  Member,
  PairedWorkspaceRunner,
  PendingLink,
  RevokedRunner,
  Runner,
  Runtime,
  Settings,
  Usage,
  UsageReport,
} from "./types";

/** What a failed command rejects with: always `{code, message}`. */
export function toApiError(e: unknown): ApiError {
  if (e && typeof e === "object") {
    const { code, message } = e as Record<string, unknown>;
    if (typeof code === "string" && code) {
      return { code, message: typeof message === "string" ? message : "" };
    }
    if (e instanceof Error) return { code: "INTERNAL", message: e.message };
  }
  return { code: "INTERNAL", message: typeof e === "string" ? e : String(e) };
}

export function isApiError(e: unknown): e is ApiError {
  return !!e && typeof e === "object" && typeof (e as ApiError).code === "string";
}

async function call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (e) {
    throw toApiError(e);
  }
}

export const getState = () => call<AppState>("get_state");
export const signIn = (url: string, token: string) => call<AppState>("sign_in", { url, token });
export const signOut = () => call<AppState>("sign_out");
export const openLink = (link: string) => call<PendingLink>("open_link", { link });
export const confirmLink = () => call<AppState>("confirm_link");
export const dismissLink = () => call<AppState>("dismiss_link");
export const setRunnerCount = (pool: string, count: number) =>
  call<AppState>("set_runner_count", { pool, count });
export const setPoolSettings = (pool: string, slots: number, labels: string[]) =>
  call<AppState>("set_pool_settings", { pool, slots, labels });
export const setAllowUnsandboxed = (pool: string, allow: boolean) =>
  call<AppState>("set_allow_unsandboxed", { pool, allow });
export const setPaused = (paused: boolean) => call<AppState>("set_paused", { paused });
export const setSettings = (settings: Settings) => call<AppState>("set_settings", { settings });

export const listDevices = () => call<ApiToken[]>("list_devices");
export const revokeDevice = (id: string) => call<ApiToken[]>("revoke_device", { id });
export const listMyPools = () => call<Runtime[]>("list_my_pools");
export const createMyPool = (name: string) => call<AppState>("create_my_pool", { name });
export const listMyRunners = () => call<Runner[]>("list_my_runners");
export const listJobs = (opts: { pool?: string; limit?: number } = {}) =>
  call<Job[]>("list_jobs", opts);
export const jobLogs = (id: string) => call<string>("job_logs", { id });

export const wsListPools = () => call<Runtime[]>("ws_list_pools");
export const wsCreatePool = (name: string) => call<Runtime>("ws_create_pool", { name });
export const wsRoster = () => call<Runner[]>("ws_roster");
export const wsPairRunner = (pool: string, name?: string, labels?: string[]) =>
  call<PairedWorkspaceRunner>("ws_pair_runner", { pool, name, labels });
export const wsRevokeRunner = (id: string) => call<RevokedRunner | null>("ws_revoke_runner", { id });
export const wsJoinToken = (pool: string, ttlSeconds?: number) =>
  call<JoinToken>("ws_join_token", { pool, ttlSeconds });
export const wsJoinTokens = () => call<JoinTokenSummary[]>("ws_join_tokens");
export const wsRevokeJoinToken = (id: string) => call<JoinTokenSummary[]>("ws_revoke_join_token", { id });
export const wsUsage = () => call<Usage>("ws_usage");
export const wsSetBudget = (monthlyMinutes: number | null) =>
  call<Usage>("ws_set_budget", { monthlyMinutes });
export const wsMembers = () => call<Member[]>("ws_members");
export const wsInviteMember = (email: string, role: Member["role"]) =>
  call<Invite>("ws_invite_member", { email, role });
export const wsUpdateMember = (id: string, role: Member["role"]) =>
  call<Member>("ws_update_member", { id, role });
export const wsRemoveMember = (id: string) => call<null>("ws_remove_member", { id });
export const wsUsageReport = (month: string | null, by: UsageReport["by"]) =>
  call<UsageReport>("ws_usage_report", { month, by });
export const wsAudit = (before?: string) => call<AuditPage>("ws_audit", { before });
export const wsGithubOverview = () => call<GithubOverview>("ws_github_overview");
export const wsGithubInstallLink = (host?: string) => call<GithubInstallLink>("ws_github_install_link", { host });
export const wsGithubInstall = (request: GithubInstallRequest) => call<GithubInstall>("ws_github_install", { request });
export const wsGithubOnDemand = () => call<GithubOnDemandList>("ws_github_on_demand");
export const wsGithubOnDemandSet = (request: GithubOnDemandRequest) =>
  call<GithubOnDemand>("ws_github_on_demand_set", { request });
export const wsGithubOnDemandRemove = (id: string) => call<null>("ws_github_on_demand_remove", { id });
