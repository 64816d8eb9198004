// This machine: the pools it lends runners to (count, slots, labels, the live
// runners), pause all, and its manners: start at login, pause on battery or
// a metered network, quiet hours, awake while a job runs.

import type { App } from "../app";
import * as api from "../api";
import { h, splitList } from "../h";
import type { LocalPool, Settings } from "../types";

export function machinePanel(app: App) {
  const { pools, paused, settings, onBattery, metered, held, account } = app.state;
  const set = (key: string, patch: Partial<Settings>) => app.change(key, () => api.setSettings({ ...settings, ...patch }));
  const toggle = (testid: string, checked: boolean, label: string, hint: string, set: (on: boolean) => void) =>
    h(
      "label",
      { class: "toggle" },
      h("input", {
        type: "checkbox",
        testid,
        checked,
        disabled: app.busy.has(testid),
        onchange: (ev: Event) => set((ev.target as HTMLInputElement).checked),
      }),
      h("span", null, label, hint ? h("small", { class: "muted" }, hint) : null),
    );
  return h(
    "section",
    { testid: "panel-machine", class: "panel" },
    h(
      "div",
      { class: "row heading" },
      h("h2", { class: "grow" }, "This machine"),
      toggle("pause-all", paused, "Pause all", "", (on) => app.change("pause-all", () => api.setPaused(on))),
    ),
    held && !paused ? h("p", { testid: "held-notice", class: "notice info" }, `${held}: new jobs wait; running jobs go on.`) : null,
    pools.length
      ? pools.map((p) => poolRow(app, p))
      : h(
          "p",
          { class: "card muted" },
          account
            ? "This machine runs no pool yet. Lend it to one of your pools under My pools, or open a join link from a workspace admin."
            : "Sign in or open a pairing link to run jobs on this machine.",
        ),
    h("h3", null, "Settings"),
    h(
      "div",
      { class: "card toggles" },
      toggle("autostart", settings.autostart, "Start at login", "Drover starts in the tray when you log in.", (on) =>
        set("autostart", { autostart: on }),
      ),
      toggle(
        "pause-on-battery",
        settings.pauseOnBattery,
        "Pause on battery",
        onBattery ? "On battery now: new jobs wait; running jobs go on." : "Holds new jobs on battery power; running jobs go on.",
        (on) => set("pause-on-battery", { pauseOnBattery: on }),
      ),
      toggle(
        "pause-on-metered",
        settings.pauseOnMetered,
        "Pause on a metered network",
        metered ? "On a metered network now: new jobs wait." : "Holds new jobs on a phone's hotspot or a capped plan (as NetworkManager marks it).",
        (on) => set("pause-on-metered", { pauseOnMetered: on }),
      ),
      toggle(
        "keep-awake",
        settings.keepAwake,
        "Stay awake while a job runs",
        "The machine does not sleep on its own mid-job; closing the lid still sleeps it.",
        (on) => set("keep-awake", { keepAwake: on }),
      ),
      quietHours(app, settings, set),
    ),
  );
}

/** Quiet hours: a daily window of local time in which new jobs wait. */
function quietHours(app: App, settings: Settings, set: (key: string, patch: Partial<Settings>) => Promise<void>) {
  const hours = settings.quietHours;
  const time = (which: "from" | "to") =>
    h("input", {
      type: "time",
      testid: `quiet-${which}`,
      value: hours?.[which] ?? "",
      disabled: !hours || app.busy.has("quiet-hours"),
      onchange: (ev: Event) => {
        const value = (ev.target as HTMLInputElement).value;
        if (hours && value) void set("quiet-hours", { quietHours: { ...hours, [which]: value } });
      },
    });
  return h(
    "div",
    { class: "toggle quiet" },
    h("input", {
      type: "checkbox",
      testid: "quiet-hours",
      checked: !!hours,
      disabled: app.busy.has("quiet-hours"),
      onchange: (ev: Event) =>
        set("quiet-hours", { quietHours: (ev.target as HTMLInputElement).checked ? { from: "22:00", to: "07:00" } : null }),
    }),
    h(
      "span",
      null,
      "Quiet hours",
      h("span", { class: "row times" }, "from", time("from"), "to", time("to")),
      h("small", { class: "muted" }, app.state.quiet ? "Quiet now: new jobs wait until it ends." : "Every day, this machine's time: new jobs wait; running jobs go on."),
    ),
  );
}

function poolRow(app: App, p: LocalPool) {
  const busy = app.busy.has(`count:${p.ref}`);
  const setCount = (count: number) => app.change(`count:${p.ref}`, () => api.setRunnerCount(p.ref, count));
  const slotsKey = `slots-input:${p.ref}`;
  const labelsKey = `labels-input:${p.ref}`;
  const save = (ev: Event) => {
    ev.preventDefault();
    const slots = Number(app.value(slotsKey));
    if (!Number.isInteger(slots) || slots < 1) return app.fail("INVALID_INPUT", "slots must be a whole number, at least 1");
    const labels = splitList(app.value(labelsKey));
    void app.change(`save:${p.ref}`, () => api.setPoolSettings(p.ref, slots, labels), () => {
      app.forget(slotsKey, labelsKey);
    });
  };
  return h(
    "div",
    { testid: "pool-row", "data-ref": p.ref, class: "card pool" },
    h(
      "div",
      { class: "row" },
      h(
        "div",
        { class: "grow" },
        h("strong", { title: p.ref }, p.name),
        h("span", { class: `tag tag-${p.kind}` }, p.kind),
        p.kind === "workspace" && p.sandboxed !== null
          ? h(
              "span",
              {
                testid: "pool-sandbox",
                class: `tag tag-${p.sandboxed ? "sandboxed" : "unsandboxed"}`,
                title: p.sandboxed ? "Its jobs run in a bubblewrap sandbox, away from your files and sessions" : "Its jobs run as you, with no sandbox",
              },
              p.sandboxed ? "sandboxed" : "unsandboxed",
            )
          : null,
      ),
      h(
        "div",
        { class: "stepper", title: "Runners on this machine" },
        h("button", { testid: "runner-remove", disabled: busy || p.runners < 1, title: "Remove a runner (it finishes its job first)", onclick: () => setCount(p.runners - 1) }, "−"),
        h("span", { testid: "runner-count", class: "count" }, String(p.runners)),
        h("button", { testid: "runner-add", disabled: busy, title: "Add a runner", onclick: () => setCount(p.runners + 1) }, "+"),
      ),
      h("span", { class: "muted small" }, p.runners === 1 ? "runner" : "runners"),
    ),
    h(
      "form",
      { class: "row settings", onsubmit: save },
      h("label", null, "Slots each", app.input(slotsKey, { testid: "slots-input", type: "number", min: "1", step: "1", class: "narrow" }, String(p.slots))),
      h("label", { class: "grow" }, "Labels", app.input(labelsKey, { testid: "labels-input", placeholder: "e.g. gpu, os=linux" }, p.labels.join(", "))),
      h("button", { testid: "pool-save", type: "submit", disabled: app.busy.has(`save:${p.ref}`) }, "Save"),
    ),
    p.refused ? h("p", { testid: "pool-refused", class: "warning" }, p.refused) : null,
    p.kind === "workspace" ? unsandboxedToggle(app, p) : null,
    p.live.length
      ? h(
          "ul",
          { class: "runners" },
          p.live.map((r) =>
            h(
              "li",
              { testid: "runner-row", "data-id": r.id },
              h("span", { class: !r.online ? "dot off" : app.state.status === "paused" ? "dot paused" : "dot on", title: r.online ? "online" : "offline" }),
              h("strong", { testid: "runner-name", title: r.id }, r.name || r.id),
              h(
                "span",
                { class: "muted" },
                r.draining ? "draining · " : "",
                !r.online ? "connecting" : r.currentJobs.length ? `running ${r.currentJobs.join(", ")}` : app.state.status === "paused" ? "paused" : "idle",
              ),
            ),
          ),
        )
      : null,
  );
}

/** A workspace pool's opt-out: lend it where no sandbox is available. */
function unsandboxedToggle(app: App, p: LocalPool) {
  const key = `unsandboxed:${p.ref}`;
  return h(
    "label",
    { class: "toggle" },
    h("input", {
      type: "checkbox",
      testid: "allow-unsandboxed",
      checked: p.allowUnsandboxed,
      disabled: app.busy.has(key),
      onchange: (ev: Event) => app.change(key, () => api.setAllowUnsandboxed(p.ref, (ev.target as HTMLInputElement).checked)),
    }),
    h(
      "span",
      null,
      "Run this pool's jobs without a sandbox when none is available",
      h(
        "small",
        { testid: "unsandboxed-warning", class: "muted" },
        "These jobs are other people's. Without a sandbox they run as you: they can read your files, reach your keychain and this app's tokens, and see what else you run. Where bubblewrap works, they always run in it, whatever this says.",
      ),
    ),
  );
}
