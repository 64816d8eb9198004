// The settings window: one App object holds the app's state (from Rust), what
// this window loaded from the coordinator, and the user's unsaved input. Every
// change re-renders the whole window; input values and focus survive it.

import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import * as api from "./api";
import { isConnection } from "./errors";
import { h, refreshTimes, type Attrs } from "./h";
import type {
  ApiError,
  ApiToken,
  AppState,
  AuditPage,
  Invite,
  Job,
  JoinToken,
  JoinTokenSummary,
  Member,
  PairedWorkspaceRunner,
  PendingLink,
  Runner,
  Runtime,
  Usage,
  UsageReport,
} from "./types";
import { header, errorLine, activity, linkDialog, linkRefusedDialog, cleartextNotice, versionBanner } from "./views/frame";
import { accountPanel } from "./views/account";
import { machinePanel } from "./views/machine";
import { poolsPanel } from "./views/pools";
import { workspacePanel } from "./views/workspace";
import type { GithubDialog } from "./views/github";
import type { OnDemandDialog } from "./views/on_demand";

export type Tab = "account" | "machine" | "pools" | "workspace";

/**
 * The coordinator's refusals of a client of another version (426): this app
 * is older than the coordinator serves, or newer than it knows.
 */
export const VERSION_SKEW = ["UPGRADE_REQUIRED", "COORDINATOR_TOO_OLD"];

const EMPTY: AppState = {
  status: "signedOut",
  paused: false,
  onBattery: false,
  metered: false,
  quiet: false,
  held: null,
  quitting: false,
  account: null,
  pools: [],
  settings: { autostart: false, pauseOnBattery: false, pauseOnMetered: false, quietHours: null, keepAwake: false },
  pending: null,
  linkRefused: null,
  activity: [],
  signedOut: null,
};

/** What this window fetched from the coordinator (through the app). */
interface Remote {
  devices: ApiToken[] | null;
  myPools: Runtime[] | null;
  myRunners: Runner[] | null;
  jobs: Job[] | null;
  selectedJob: string | null;
  logs: string | null;
  wsPools: Runtime[] | null;
  roster: Runner[] | null;
  usage: Usage | null;
  paired: PairedWorkspaceRunner | null;
  joinToken: JoinToken | null;
  /** The workspace pools' join tokens (never the tokens themselves). */
  joinTokens: JoinTokenSummary[] | null;
  members: Member[] | null;
  invite: Invite | null;
  report: UsageReport | null;
  audit: AuditPage | null;
  /** The GitHub dialog, while it is open. */
  github: GithubDialog | null;
  /** The GitHub Actions on demand dialog, while it is open. */
  onDemand: OnDemandDialog | null;
  /** What revoking a runner did on GitHub. */
  revokeNotice: string | null;
}

const NOTHING: Remote = {
  devices: null,
  myPools: null,
  myRunners: null,
  jobs: null,
  selectedJob: null,
  logs: null,
  wsPools: null,
  roster: null,
  usage: null,
  paired: null,
  joinToken: null,
  joinTokens: null,
  members: null,
  invite: null,
  report: null,
  audit: null,
  github: null,
  onDemand: null,
  revokeNotice: null,
};

export class App {
  state: AppState = EMPTY;
  tab: Tab = "account";
  error: ApiError | null = null;
  /** A version refusal from the coordinator: a banner until the account changes. */
  skew: ApiError | null = null;
  remote: Remote = { ...NOTHING };
  /** What was typed and not saved, by field key, so that a re-render keeps it. */
  drafts = new Map<string, string>();
  /** Actions in flight, by key: their buttons are disabled. */
  busy = new Set<string>();
  private unlisten: UnlistenFn[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(readonly root: HTMLElement) {}

  async start() {
    try {
      this.unlisten.push(
        await listen<AppState>("state-changed", (e) => this.setState(e.payload)),
        await listen<PendingLink>("pending-link", (e) => this.setState({ ...this.state, pending: e.payload })),
      );
    } catch (e) {
      this.error = api.toApiError(e);
    }
    // Keeps "3 min ago" true.
    this.timer = setInterval(() => refreshTimes(this.root), 20_000);
    this.render();
    await this.act("state", api.getState, (s) => this.setState(s));
  }

  stop() {
    this.unlisten.forEach((f) => f());
    clearInterval(this.timer);
  }

  /**
   * Takes a new AppState. A different account forgets what was fetched;
   * signing in shows this machine, signing out the sign-in form.
   */
  setState(next: AppState) {
    if (JSON.stringify(next) === JSON.stringify(this.state)) return;
    const who = (s: AppState) => (s.account ? `${s.account.coordinator} ${s.account.subject}` : "");
    const changed = who(next) !== who(this.state);
    if (!this.state.account !== !next.account) this.tab = next.account ? "machine" : "account";
    const back = next.status !== "offline" && this.state.status === "offline";
    this.state = next;
    // The connection is back: an error it caused is gone, and what failed to load loads.
    if (back && this.error && isConnection(this.error)) {
      this.error = null;
      if (!changed && next.account) void this.load();
    }
    if (changed) {
      this.remote = { ...NOTHING };
      this.skew = null;
    }
    if (!this.tabs().includes(this.tab)) this.tab = "machine";
    this.render();
    if (changed) void this.load();
  }

  tabs(): Tab[] {
    const tabs: Tab[] = ["account", "machine", "pools"];
    if (this.state.account?.role === "admin") tabs.push("workspace");
    return tabs;
  }

  show(tab: Tab) {
    this.tab = tab;
    this.render();
    void this.load();
  }

  /** Fetches what the current tab shows. */
  async load() {
    if (!this.state.account) return;
    const set = (patch: Partial<Remote>) => Object.assign(this.remote, patch);
    switch (this.tab) {
      case "account":
        await this.act("devices", api.listDevices, (devices) => set({ devices }));
        break;
      case "pools":
        await Promise.all([
          this.act("myPools", api.listMyPools, (myPools) => set({ myPools })),
          this.act("myRunners", api.listMyRunners, (myRunners) => set({ myRunners })),
          this.loadJobs(),
        ]);
        break;
      case "workspace":
        await Promise.all([
          this.act("wsPools", api.wsListPools, (wsPools) => set({ wsPools })),
          this.act("roster", api.wsRoster, (roster) => set({ roster })),
          this.act("joinTokens", api.wsJoinTokens, (joinTokens) => set({ joinTokens })),
          this.act("usage", api.wsUsage, (usage) => {
            set({ usage });
            this.forget("ws-budget-input");
          }),
          this.act("members", api.wsMembers, (members) => set({ members })),
          this.loadReport(),
          this.act("audit", () => api.wsAudit(), (audit) => set({ audit })),
        ]);
        break;
    }
  }

  /** The usage report for the month and grouping the workspace tab shows. */
  loadReport() {
    const month = this.value("ws-report-month") || null;
    const by = (this.value("ws-report-by") || "pool") as UsageReport["by"];
    return this.act("report", () => api.wsUsageReport(month, by), (report) => {
      this.remote.report = report;
    });
  }

  loadJobs() {
    return this.act("jobs", () => api.listJobs({ limit: 30 }), (jobs) => {
      this.remote.jobs = jobs;
    });
  }

  /**
   * Runs one command: marks `key` busy, clears the error line, shows the
   * command's error if it fails, and re-renders. Resolves once done.
   */
  async act<T>(key: string, run: () => Promise<T>, ok: (result: T) => void) {
    this.busy.add(key);
    this.error = null;
    this.render();
    try {
      ok(await run());
    } catch (e) {
      const error = api.toApiError(e);
      if (VERSION_SKEW.includes(error.code)) this.skew = error;
      else this.error = error;
    } finally {
      this.busy.delete(key);
      this.render();
    }
  }

  /** An action whose command answers with the new AppState. */
  change(key: string, run: () => Promise<AppState>, after?: () => void) {
    return this.act(key, run, (s) => {
      this.setState(s);
      after?.();
    });
  }

  /** Shows an error found in this window (bad input) without a command. */
  fail(code: string, message: string) {
    this.error = { code, message };
    this.render();
  }

  /**
   * A text input under `key`. `initial` is its saved value; what the user
   * typed over it survives re-renders (see `render`) until `forget(key)`.
   */
  input(key: string, attrs: Attrs, initial = ""): HTMLInputElement {
    const el = h("input", { ...attrs, "data-key": key });
    el.defaultValue = initial;
    el.value = this.drafts.get(key) ?? initial;
    return el;
  }

  /** A `<select>` of `[value, label]` options under `key`, kept like an input. */
  select(key: string, attrs: Attrs, options: [string, string][]): HTMLSelectElement {
    const el = h(
      "select",
      { ...attrs, "data-key": key },
      options.map(([value, label]) => h("option", { value }, label)),
    );
    const draft = this.drafts.get(key);
    if (draft !== undefined && options.some(([v]) => v === draft)) el.value = draft;
    return el;
  }

  /** The field under `key` in the window now. */
  field(key: string) {
    return [...this.root.querySelectorAll<HTMLInputElement | HTMLSelectElement>("[data-key]")].find(
      (e) => e.dataset.key === key,
    );
  }

  /** The current value of the field under `key`, trimmed ("" when absent). */
  value(key: string) {
    return (this.field(key)?.value ?? this.drafts.get(key) ?? "").trim();
  }

  /** Drops what was typed under these keys: the fields show their saved values again. */
  forget(...keys: string[]) {
    for (const key of keys) {
      this.drafts.delete(key);
      const el = this.field(key);
      if (el instanceof HTMLInputElement) el.value = el.defaultValue;
    }
  }

  render() {
    // Keep what was typed (inputs that differ from their saved value, and
    // selections), and the focus, across the rebuild.
    for (const el of this.root.querySelectorAll<HTMLInputElement | HTMLSelectElement>("[data-key]")) {
      const key = el.dataset.key!;
      if (el instanceof HTMLSelectElement || el.value !== el.defaultValue) this.drafts.set(key, el.value);
      else this.drafts.delete(key);
    }
    const focused = document.activeElement as HTMLInputElement | null;
    const focusKey = focused?.dataset?.key;
    const selection = focusKey ? [focused.selectionStart, focused.selectionEnd] : null;
    const scroll = this.root.querySelector(".content")?.scrollTop ?? 0;

    const panels = {
      account: accountPanel,
      machine: machinePanel,
      pools: poolsPanel,
      workspace: workspacePanel,
    };
    const notice = cleartextNotice(this);
    this.root.replaceChildren(
      ...[header(this), versionBanner(this), notice].filter((el) => el !== null),
      h(
        "div",
        { class: "body" },
        h("main", { class: "content" }, panels[this.tab](this)),
        activity(this),
      ),
      errorLine(this),
    );
    if (this.state.pending) this.root.append(linkDialog(this, this.state.pending));
    else if (this.state.linkRefused) this.root.append(linkRefusedDialog(this, this.state.linkRefused));

    const content = this.root.querySelector(".content");
    if (content) content.scrollTop = scroll;
    if (focusKey) {
      const el = this.field(focusKey);
      el?.focus();
      try {
        if (el instanceof HTMLInputElement && selection) el.setSelectionRange(selection[0], selection[1]);
      } catch {
        // Number inputs have no selection.
      }
    }
  }
}

/** Starts the window in `root`. */
export async function mount(root: HTMLElement): Promise<App> {
  const app = new App(root);
  await app.start();
  return app;
}
