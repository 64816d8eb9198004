// The app's commands and events (see /work/helpers/DESKTOP.md, mirrored in
// desktop/src) and the coordinator's wire types (runner-core/wire/src/lib.rs).
// Every time is unix milliseconds (wire types and Activity.at alike).

export type Status = "signedOut" | "idle" | "busy" | "offline" | "paused";

export interface ApiError {
  code: string;
  message: string;
}

export interface Account {
  coordinator: string;
  workspace: string;
  email: string;
  subject: string;
  role: "admin" | "member";
  deviceName: string | null;
  tokenId: string | null;
}

export interface LocalRunner {
  id: string;
  online: boolean;
  draining: boolean;
  currentJobs: string[];
}

export interface LocalPool {
  /** The coordinator this pool is lent to. */
  coordinator: string;
  ref: string;
  runtimeId: string;
  name: string;
  kind: "personal" | "workspace";
  runners: number;
  slots: number;
  labels: string[];
  live: LocalRunner[];
  /** The member's opt-out: lend this workspace pool where no sandbox is available. */
  allowUnsandboxed: boolean;
  /** While lent: whether its jobs run in a sandbox (bubblewrap). */
  sandboxed: boolean | null;
  /** Why the app refused to lend to it (no sandbox on this machine). */
  refused: string | null;
}

export interface Settings {
  autostart: boolean;
  pauseOnBattery: boolean;
}

export interface PendingLink {
  kind: "pair" | "join";
  coordinator: string;
  /** For a join link: the pool the coordinator says its token joins. */
  pool: string;
  /** A join link's own `ref=`, when it names another pool than `pool`. */
  linkPool: string | null;
}

export interface Activity {
  /** Unix milliseconds. */
  at: number;
  kind: "paired" | "jobFailed" | "unreachable" | "reconnected" | "info";
  message: string;
}

export interface AppState {
  status: Status;
  paused: boolean;
  onBattery: boolean;
  quitting: boolean;
  account: Account | null;
  pools: LocalPool[];
  settings: Settings;
  pending: PendingLink | null;
  /** Newest first, at most 50. */
  activity: Activity[];
}

export interface PairedWorkspaceRunner {
  runner: Runner;
  token: string;
  /** `drover runner --url … --token …` */
  command: string;
}

// ---------------------------------------------------------------- wire

export interface Runtime {
  id: string;
  name: string;
  /** `user:<subject>` or `ws:<workspace>`. */
  owner: string;
  /** The canonical ref that targets this pool. */
  ref: string;
  runners: number;
  createdAt: number;
}

export interface Runner {
  id: string;
  name: string;
  owner: string;
  runtimeId: string;
  runtimeName: string;
  capabilities: string[];
  online: boolean;
  lastSeenAt?: number;
  currentJobs: string[];
  createdAt: number;
}

export type JobState =
  | "queued"
  | "leased"
  | "running"
  | "succeeded"
  | "failed"
  | "cancelled"
  | "timed_out"
  | "lost"
  | "unknown";

export interface Provenance {
  ranBy: string;
  by: string;
  ranOn: string;
  attempt: number;
}

export interface Job {
  id: string;
  state: JobState;
  /** The ref as submitted. */
  runtime: string;
  runtimeId: string;
  pinnedRunner?: string;
  submittedBy: string;
  command: string[];
  script?: string;
  requires: string[];
  priority: number;
  attempt: number;
  maxAttempts: number;
  exitCode?: number;
  error?: string;
  cancelRequested: boolean;
  provenance?: Provenance;
  createdAt: number;
  /** When its latest attempt was leased (absent while queued). */
  startedAt?: number;
  finishedAt?: number;
  /** In a list, `command` and `script` are a preview: true when cut short. */
  truncated?: boolean;
}

export interface JoinToken {
  /** `jt_…`: how it is listed and revoked. */
  id?: string;
  /** Shown once. */
  token: string;
  runtime: Runtime;
  expiresAt: number;
  /** `drover://join?url=…&ref=…&token=…` */
  link?: string;
}

/** A join token as listed: never the token itself. */
export interface JoinTokenSummary {
  /** `jt_…` */
  id: string;
  runtimeId: string;
  pool: string;
  ref: string;
  /** Who minted it (`usr_…`) and their email; null when not recorded. */
  mintedBy: string | null;
  mintedByEmail: string | null;
  createdAt: number;
  expiresAt: number;
  lastUsedAt: number | null;
  /** Runners joined with it. */
  uses: number;
}

/** This month's (UTC) usage and the workspace's monthly budget. */
export interface Usage {
  workspace: string;
  /** `YYYY-MM` */
  month: string;
  /** Runner-minutes a month; `null`: no limit. */
  monthlyMinutes: number | null;
  chargedMs: number;
  ownPaysMs: number;
  jobsCharged: number;
  jobsOwnPays: number;
  /** When the month ends (Unix ms). */
  resetsAt: number;
}

export interface ApiToken {
  id: string;
  name: string;
  createdAt: number;
  lastUsedAt: number | null;
  /** Whether this is the token the request came with (this device). */
  current: boolean;
}

/** A member's token as an admin sees it (never the secret). */
export interface MemberToken {
  id: string;
  name: string;
  createdAt: number;
  lastUsedAt: number | null;
}

/** A member of the workspace (`GET /v1/workspace/members`). */
export interface Member {
  id: string;
  email: string;
  role: "admin" | "member";
  status: "invited" | "active";
  createdAt: number;
  tokens: MemberToken[];
}

/** An invite: its code and `drover://pair` link are shown once. */
export interface Invite {
  member: Member;
  code: string;
  link: string;
  expiresAt: number;
}

export interface UsageLine {
  id: string;
  name: string;
  runnerMs: number;
  chargedMs: number;
  attempts: number;
}

/** A month's usage by pool, member or runner. */
export interface UsageReport {
  month: string;
  by: "pool" | "member" | "runner";
  lines: UsageLine[];
}

export interface AuditEvent {
  id: string;
  at: number;
  actor: { kind: string; id: string; email: string | null };
  surface: string;
  action: string;
  target: string;
  detail: Record<string, unknown>;
}

/** Newest first; `nextBefore` fetches older entries. */
export interface AuditPage {
  events: AuditEvent[];
  nextBefore: string | null;
}

/** An installation of the workspace's GitHub App. */
export interface GithubInstallation {
  /** `github.com` or a GitHub Enterprise Server host. */
  host: string;
  installationId: number;
  account: string;
  accountType: "User" | "Organization" | string;
  linkedAt: number;
}

export interface GithubRepo {
  host: string;
  owner: string;
  name: string;
  fullName: string;
  private: boolean;
  installationId: number;
}

/** `ws_github_overview`: what the App is installed on and may reach. */
export interface GithubOverview {
  installations: GithubInstallation[];
  repos: GithubRepo[];
  truncated: boolean;
}

export interface GithubInstallLink {
  url: string;
  host: string;
  expiresAt: number;
}

/** Give exactly one of `repository` or `org`. */
export interface GithubInstallRequest {
  repository?: string;
  org?: string;
  host?: string;
  runnerGroup?: string;
  labels?: string[];
  ephemeral?: boolean;
  pool?: string;
}

export interface GithubInstall {
  runner: Runner;
  github: { host: string; url: string; name: string; labels: string[]; runnerGroup?: string | null; ephemeral: boolean };
  /** Holds a registration token and the runner's token: shown once. */
  script: string;
  workflowHint: { runsOn: string[]; runtime: string; yaml: string };
}

/** What revoking a workspace runner did to its GitHub runner. */
export interface RevokedRunner {
  github: { name: string; removed: boolean; message: string };
}
