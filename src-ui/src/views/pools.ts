// My pools: create a personal pool, lend this machine to one, its runners,
// the recent jobs and their logs.

import type { App } from "../app";
import * as api from "../api";
import { h, shortId, when } from "../h";
import type { Job, Runner, Runtime } from "../types";

/** A runner's dot: online, paused (online, taking no job), or offline. */
export function runnerDot(r: Pick<Runner, "online" | "paused">): string {
  return !r.online ? "dot off" : r.paused ? "dot paused" : "dot on";
}

export function poolsPanel(app: App) {
  if (!app.state.account) {
    return h("section", { testid: "panel-pools", class: "panel" }, h("h2", null, "My pools"), h("p", { class: "card muted" }, "Sign in to see your pools and jobs."));
  }
  const { myPools, jobs, selectedJob, logs } = app.remote;
  const create = (ev: Event) => {
    ev.preventDefault();
    const name = app.value("create-pool-name");
    if (!name) return app.fail("INVALID_INPUT", "give the pool a name");
    void app.change("create-pool", () => api.createMyPool(name), () => {
      app.forget("create-pool-name");
      void app.load();
    });
  };
  return h(
    "section",
    { testid: "panel-pools", class: "panel" },
    h("h2", null, "My pools"),
    h("p", { class: "muted" }, "Personal pools run your own jobs on your own machines, never charged to the workspace."),
    h(
      "form",
      { class: "row", onsubmit: create },
      app.input("create-pool-name", { testid: "create-pool-name", placeholder: "New pool name, e.g. laptop", class: "grow", autocomplete: "off" }),
      h("button", { testid: "create-pool-submit", type: "submit", disabled: app.busy.has("create-pool") }, "Create pool"),
    ),
    h(
      "ul",
      { testid: "my-pools", class: "card list" },
      (myPools ?? []).map((p) => poolRow(app, p)),
      myPools === null ? h("li", { class: "row muted" }, app.busy.has("myPools") ? "Loading…" : "Could not load the pools.") : null,
      myPools?.length === 0 ? h("li", { class: "row muted" }, "No personal pool yet.") : null,
    ),
    h(
      "h3",
      { class: "row" },
      h("span", { class: "grow" }, "Recent jobs"),
      h("button", { testid: "jobs-refresh", class: "small", disabled: app.busy.has("jobs"), onclick: () => app.loadJobs() }, "Refresh"),
    ),
    h(
      "table",
      { testid: "jobs", class: "card jobs" },
      jobs?.length
        ? h(
            "thead",
            null,
            h("tr", null, ["Job", "Pool", "State", "Exit", "Command", "Submitted"].map((t) => h("th", { scope: "col" }, t))),
          )
        : null,
      h("tbody", null, (jobs ?? []).map((j) => jobRow(app, j, j.id === selectedJob, poolName(app, j)))),
    ),
    jobs?.length === 0 ? h("p", { class: "muted" }, "No jobs yet.") : null,
    selectedJob
      ? [h("h3", null, "Log of ", h("code", null, selectedJob)), h("pre", { testid: "job-logs", class: "logs" }, logs ?? "Loading…")]
      : null,
  );
}

function poolRow(app: App, p: Runtime) {
  const local = app.state.pools.find((l) => l.runtimeId === p.id || l.ref === p.ref);
  const runners = (app.remote.myRunners ?? []).filter((r) => r.runtimeId === p.id);
  return h(
    "li",
    { testid: "my-pool-row", "data-ref": p.ref, class: "row" },
    h(
      "div",
      { class: "grow" },
      h("strong", { title: p.ref }, p.name),
      h("span", { class: "tag tag-personal" }, "personal"),
      h(
        "div",
        { class: "chips" },
        runners.length
          ? runners.map((r) =>
              h(
                "span",
                { class: "chip", title: r.currentJobs.length ? `running ${r.currentJobs.join(", ")}` : "idle" },
                h("span", { class: runnerDot(r) }),
                r.name,
                r.paused ? h("span", { class: "muted" }, " · paused") : null,
              ),
            )
          : h("span", { class: "muted small" }, "no runner"),
      ),
    ),
    local
      ? h("span", { class: "muted small" }, `${local.runners} on this machine`)
      : h(
          "button",
          {
            testid: "my-pool-lend",
            disabled: app.busy.has(`count:${p.ref}`),
            title: "Run this pool's jobs on this machine",
            onclick: () => app.change(`count:${p.ref}`, () => api.setRunnerCount(p.ref, 1), () => void app.load()),
          },
          "Lend this machine",
        ),
  );
}

/** A job's pool by its name, as the pool list shows it; its ref until that has loaded. */
function poolName(app: App, j: Job): string {
  const mine = (app.remote.myPools ?? []).find((p) => p.id === j.runtimeId);
  const local = app.state.pools.find((l) => l.runtimeId === j.runtimeId);
  return mine?.name ?? local?.name ?? j.runtime;
}

function jobRow(app: App, j: Job, selected: boolean, pool: string) {
  const what = j.command.length ? j.command.join(" ") : (j.script ?? "");
  const open = () => {
    app.remote.selectedJob = j.id;
    app.remote.logs = null;
    void app.act(`logs`, () => api.jobLogs(j.id), (logs) => {
      if (app.remote.selectedJob === j.id) app.remote.logs = logs || "(no output)";
    });
  };
  return h(
    "tr",
    { testid: "job-row", "data-id": j.id, class: selected ? "clickable selected" : "clickable", onclick: open, title: "Show the log" },
    // The id's head (the log below names it whole; the tooltip too).
    h("td", { class: "nowrap", title: j.id }, h("code", { class: "small" }, shortId(j.id))),
    h("td", { class: "nowrap", title: j.runtime }, pool),
    h("td", null, h("span", { class: `state state-${j.state}` }, j.state)),
    h("td", { class: "small nowrap" }, j.exitCode === undefined ? "" : String(j.exitCode)),
    h("td", { class: "cmd" }, h("code", { title: what }, what)),
    h("td", { class: "muted small nowrap" }, when(j.createdAt)),
  );
}
