// The app's commands and events (desktop/src/commands.rs and events), and
// the coordinator's wire types, generated from its document (below).
// Every time is unix milliseconds (wire types and Activity.at alike).

import type { components } from "./wire";

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
  /** Its name at the coordinator (`<device>-<n>`), the same in every tab and the tray. */
  name: string;
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

export interface QuietHours {
  /** `HH:MM`, 24-hour, local time. */
  from: string;
  to: string;
}

export interface Settings {
  autostart: boolean;
  pauseOnBattery: boolean;
  /** Hold new jobs while NetworkManager calls the network metered. */
  pauseOnMetered: boolean;
  /** A daily window in which new jobs wait. */
  quietHours: QuietHours | null;
  /** Keep the machine from sleeping on its own while a job runs. */
  keepAwake: boolean;
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
  kind: "paired" | "jobFailed" | "unreachable" | "reconnected" | "signedOut" | "info";
  /** What happened and what to do, in a sentence. */
  message: string;
  /** The error behind it, in the client's or coordinator's own words. */
  detail?: string;
}

export interface AppState {
  status: Status;
  paused: boolean;
  onBattery: boolean;
  metered: boolean;
  /** Within the quiet hours now. */
  quiet: boolean;
  /** Why new jobs wait though not paused by hand ("On battery power"). */
  held: string | null;
  quitting: boolean;
  account: Account | null;
  pools: LocalPool[];
  settings: Settings;
  pending: PendingLink | null;
  /** Why a link just opened was refused, until dismissed. */
  linkRefused: string | null;
  /** Newest first, at most 200, kept across restarts. */
  activity: Activity[];
  /** Why the coordinator signed this device out (its token revoked: by
   * whom, from where, when), until it signs in again. */
  signedOut: string | null;
}

export interface PairedWorkspaceRunner {
  runner: Runner;
  token: string;
  /** `drover runner --url … --token …` */
  command: string;
}

// ---------------------------------------------------------------- wire

// The coordinator's shapes come from its /openapi.json (src-ui/src/wire.ts,
// made by openapi-typescript; tests/tests/typescript.rs fails when it is
// stale and `DROVER_UPDATE_TS=1` rewrites it). None is written by hand.
type Wire = components["schemas"];

export type Runtime = Wire["Runtime"];
export type Runner = Wire["Runner"];
export type JobState = Wire["JobState"];
export type Provenance = Wire["Provenance"];
export type Job = Wire["Job"];
export type JoinToken = Wire["JoinToken"];
export type JoinTokenSummary = Wire["JoinTokenSummary"];
export type Usage = Wire["Usage"];
export type ApiToken = Wire["ApiToken"];
export type MemberToken = Wire["MemberToken"];
export type Member = Wire["Member"];
export type Invite = Wire["Invite"];
export type UsageLine = Wire["UsageLine"];
export type UsageReport = Wire["UsageReport"];
export type AuditEvent = Wire["AuditEvent"];
export type AuditPage = Wire["AuditPage"];
export type GithubInstallation = Wire["GithubInstallation"];
export type GithubRepo = Wire["GithubRepo"];
export type GithubInstallLink = Wire["GithubInstallLink"];
export type GithubInstallRequest = Wire["GithubInstallRequest"];
export type GithubInstall = Wire["GithubInstall"];
export type GithubOnDemand = Wire["GithubOnDemand"];
export type GithubOnDemandList = Wire["GithubOnDemandList"];
export type GithubOnDemandRequest = Wire["GithubOnDemandRequest"];
export type RevokedRunner = Wire["RevokedRunner"];

/** `ws_github_overview`: what the App is installed on and may reach. */
export interface GithubOverview {
  installations: GithubInstallation[];
  repos: GithubRepo[];
  truncated: boolean;
}
