// Shared fixtures: an AppState builder, a mocked Tauri IPC that records every
// command, and DOM shortcuts by data-testid.

import { vi } from "vitest";
import { clearMocks, mockIPC } from "@tauri-apps/api/mocks";
import { mount, type App } from "../src/app";
import type { Account, AppState, LocalPool, Runner, Runtime } from "../src/types";

export const member: Account = {
  coordinator: "https://drover.example.com",
  workspace: "acme",
  email: "ann@acme.test",
  subject: "usr_ann",
  role: "member",
  deviceName: "ann-laptop",
  tokenId: "tok_1",
};

export const admin: Account = { ...member, email: "boss@acme.test", subject: "usr_boss", role: "admin" };

export function appState(patch: Partial<AppState> = {}): AppState {
  return {
    status: "signedOut",
    paused: false,
    onBattery: false,
    metered: false,
    quiet: false,
    held: null,
    quitting: false,
    account: null,
    pools: [],
    settings: { autostart: false, pauseOnBattery: false, pauseOnMetered: true, quietHours: null, keepAwake: true },
    pending: null,
    linkRefused: null,
    activity: [],
    signedOut: null,
    ...patch,
  };
}

export const pool: LocalPool = {
  coordinator: "https://drover.example.com",
  ref: "self:usr_ann:laptop",
  runtimeId: "rt_1",
  name: "laptop",
  kind: "personal",
  runners: 2,
  slots: 1,
  labels: ["gpu"],
  live: [
    { id: "rn_a", name: "ann-laptop-1", online: true, draining: false, currentJobs: ["job_7"] },
    { id: "rn_b", name: "ann-laptop-2", online: true, draining: false, currentJobs: [] },
  ],
  allowUnsandboxed: false,
  sandboxed: false,
  refused: null,
};

export const wsPool: Runtime = {
  id: "rt_ws",
  name: "builders",
  owner: "ws:acme",
  ref: "ws:acme:builders",
  runners: 0,
  createdAt: 1_700_000_000,
};

export const wsRunner: Runner = {
  id: "rn_ws1",
  name: "build-box",
  owner: "ws:acme",
  runtimeId: "rt_ws",
  runtimeName: "builders",
  capabilities: ["docker", "os=linux"],
  online: true,
  paused: false,
  currentJobs: [],
  createdAt: 1_700_000_000,
};

type Handler = (args: Record<string, unknown>) => unknown;

/** What the app answers when a test does not say otherwise. */
const defaults = (state: AppState): Record<string, Handler> => ({
  get_state: () => state,
  list_devices: () => [],
  list_my_pools: () => [],
  list_my_runners: () => [],
  list_jobs: () => [],
  ws_list_pools: () => [],
  ws_roster: () => [],
  ws_join_tokens: () => [],
  ws_usage: () => ({ workspace: "acme", month: "2026-12", monthlyMinutes: null, chargedMs: 0, ownPaysMs: 0, jobsCharged: 0, jobsOwnPays: 0, resetsAt: 1798761600000 }),
  ws_members: () => [],
  ws_usage_report: () => ({ month: "2026-12", by: "pool", lines: [] }),
  ws_audit: () => ({ events: [], nextBefore: null }),
});

export interface Harness {
  app: App;
  /** Every command invoked, with its arguments (events excluded). */
  calls: [string, Record<string, unknown>][];
  called: (cmd: string) => Record<string, unknown>[];
}

let current: App | null = null;

/** Mounts the window over a mocked IPC whose `get_state` answers `state`. */
export async function start(state: AppState, handlers: Record<string, Handler> = {}): Promise<Harness> {
  const all = { ...defaults(state), ...handlers };
  const calls: [string, Record<string, unknown>][] = [];
  mockIPC(
    (cmd, args) => {
      const a = (args ?? {}) as Record<string, unknown>;
      calls.push([cmd, a]);
      const handler = all[cmd];
      if (!handler) throw { code: "INTERNAL", message: `unmocked ${cmd}` };
      return handler(a);
    },
    { shouldMockEvents: true },
  );
  document.body.innerHTML = '<div id="app"></div>';
  const app = await mount(document.getElementById("app")!);
  current = app;
  await settle();
  return { app, calls, called: (cmd) => calls.filter(([c]) => c === cmd).map(([, a]) => a) };
}

export function stop() {
  current?.stop();
  current = null;
  clearMocks();
}

/** Lets pending promises (commands, re-renders) run. */
export async function settle() {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
}

export function $(testid: string, within: ParentNode = document): HTMLElement {
  const el = within.querySelector<HTMLElement>(`[data-testid="${testid}"]`);
  if (!el) throw new Error(`no element with data-testid=${testid}`);
  return el;
}

export const $all = (testid: string, within: ParentNode = document) =>
  [...within.querySelectorAll<HTMLElement>(`[data-testid="${testid}"]`)];

export const has = (testid: string) => document.querySelector(`[data-testid="${testid}"]`) !== null;

/** Types into an input as a person would (value, then an input event). */
export function type(testid: string, value: string, within: ParentNode = document) {
  const el = $(testid, within) as HTMLInputElement;
  el.value = value;
  el.dispatchEvent(new Event("input", { bubbles: true }));
}

export function choose(testid: string, value: string) {
  const el = $(testid) as HTMLSelectElement;
  el.value = value;
  el.dispatchEvent(new Event("change", { bubbles: true }));
}

export async function click(testid: string, within: ParentNode = document) {
  $(testid, within).click();
  await settle();
}

export const waitFor = vi.waitFor;
