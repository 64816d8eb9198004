// Workspace (admins): GitHub Actions on demand. A workspace pool serves a
// repository's or an organization's workflow jobs with just-in-time,
// ephemeral Actions runners, one per queued workflow job. The dialog lists
// what is on (each with the `runs-on` line its workflows use, and a way to
// turn it off) and turns a pool on for a target the App reaches: labels, a
// runner group (organizations) and a cap on Actions runners at once.

import type { App } from "../app";
import * as api from "../api";
import { h, splitList } from "../h";
import type { ApiError, GithubOnDemand, GithubOnDemandRequest, GithubOverview } from "../types";
import { type Target, targets } from "./github";

/** The dialog's state, in `app.remote.onDemand` while it is open. */
export interface OnDemandDialog {
  overview: GithubOverview | null;
  /** Why it cannot be used (e.g. GITHUB_NOT_CONFIGURED). */
  unavailable: ApiError | null;
  pools: GithubOnDemand[] | null;
  /** The last one turned on, with its workflow hint. */
  saved: GithubOnDemand | null;
}

const key = (t: Target) => `${t.kind}|${t.host}|${t.name}`;

export async function openOnDemandDialog(app: App) {
  app.remote.onDemand = { overview: null, unavailable: null, pools: null, saved: null };
  app.forget("od-target", "od-pool", "od-labels", "od-group", "od-max");
  await load(app);
}

/** Reads what the App reaches and what is on; a refusal shows in the dialog. */
async function load(app: App) {
  const dialog = app.remote.onDemand;
  if (!dialog) return;
  app.busy.add("od-load");
  app.render();
  try {
    const [overview, list] = await Promise.all([api.wsGithubOverview(), api.wsGithubOnDemand()]);
    dialog.overview = overview;
    dialog.pools = list.pools;
    dialog.unavailable = null;
  } catch (e) {
    dialog.unavailable = api.toApiError(e);
  } finally {
    app.busy.delete("od-load");
    app.render();
  }
}

function save(app: App, dialog: OnDemandDialog, all: Target[], ev: Event) {
  ev.preventDefault();
  const target = all.find((t) => key(t) === app.value("od-target"));
  if (!target) return app.fail("INVALID_INPUT", "pick a repository or an organization");
  const pool = app.value("od-pool");
  if (!pool) return app.fail("INVALID_INPUT", "pick a workspace pool");
  const group = app.value("od-group");
  const max = app.value("od-max");
  const labels = splitList(app.value("od-labels"));
  const request: GithubOnDemandRequest = {
    pool,
    target: target.name,
    host: target.host,
    ...(labels.length ? { labels } : {}),
    ...(target.kind === "org" && group ? { runnerGroupId: Number(group) } : {}),
    ...(max ? { maxRunners: Number(max) } : {}),
  };
  void app.act("od-save", () => api.wsGithubOnDemandSet(request), (saved) => {
    dialog.saved = saved;
    dialog.pools = [...(dialog.pools ?? []).filter((p) => p.id !== saved.id), saved];
    app.forget("od-labels", "od-group", "od-max");
  });
}

function remove(app: App, dialog: OnDemandDialog, id: string) {
  void app.act("od-remove", () => api.wsGithubOnDemandRemove(id), () => {
    dialog.pools = (dialog.pools ?? []).filter((p) => p.id !== id);
    if (dialog.saved?.id === id) dialog.saved = null;
  });
}

function close(app: App) {
  app.remote.onDemand = null;
  app.render();
}

/** The GitHub section's on-demand row: the button that opens the dialog. */
export function onDemandRow(app: App) {
  return [
    h(
      "div",
      { class: "card row" },
      h(
        "p",
        { class: "grow muted small" },
        "Serve workflow jobs on demand: each queued job gets a just-in-time Actions runner on a pool's runner, gone when it ends.",
      ),
      h("button", { testid: "od-open", onclick: () => void openOnDemandDialog(app) }, "On demand…"),
    ),
    app.remote.onDemand ? dialogView(app, app.remote.onDemand) : null,
  ];
}

function dialogView(app: App, dialog: OnDemandDialog) {
  return h(
    "div",
    { class: "overlay" },
    h(
      "div",
      { testid: "od-dialog", class: "dialog wide", role: "dialog", "aria-modal": "true" },
      h("h2", null, "GitHub Actions on demand"),
      body(app, dialog),
      h(
        "div",
        { class: "actions" },
        h("button", { testid: "od-reload", disabled: app.busy.has("od-load"), onclick: () => void load(app) }, "Refresh"),
        h("button", { testid: "od-close", onclick: () => close(app) }, "Close"),
      ),
    ),
  );
}

function body(app: App, dialog: OnDemandDialog) {
  if (dialog.unavailable) {
    return h(
      "p",
      { testid: "od-unavailable", class: "error" },
      dialog.unavailable.code === "GITHUB_NOT_CONFIGURED"
        ? "This coordinator has no GitHub App configured (see drover-coordinator serve --help, --github-app-id)."
        : `${dialog.unavailable.code}: ${dialog.unavailable.message}`,
    );
  }
  const overview = dialog.overview;
  if (!overview || !dialog.pools) return h("p", { class: "muted" }, "Reading what the GitHub App reaches…");
  return [list(app, dialog, dialog.pools), form(app, dialog, overview)];
}

function list(app: App, dialog: OnDemandDialog, pools: GithubOnDemand[]) {
  return h(
    "ul",
    { testid: "od-list", class: "card list" },
    pools.length
      ? pools.map((p) =>
          h(
            "li",
            { testid: "od-row", "data-id": p.id, "data-target": p.target, class: "row" },
            h(
              "div",
              { class: "grow" },
              h("strong", null, `${p.target}`),
              h("span", { class: "muted small" }, ` on ${p.host} → pool ${p.pool}, at most ${p.maxRunners} at once`),
              h("div", null, h("code", { testid: "od-hint" }, p.workflowHint)),
            ),
            h(
              "button",
              { testid: "od-remove", class: "danger", disabled: app.busy.has("od-remove"), onclick: () => remove(app, dialog, p.id) },
              "Turn off",
            ),
          ),
        )
      : h("li", { testid: "od-none", class: "row muted" }, "No pool serves workflow jobs on demand yet."),
  );
}

function form(app: App, dialog: OnDemandDialog, overview: GithubOverview) {
  const all = targets(overview);
  const pools = (app.remote.wsPools ?? []).map((p): [string, string] => [p.name, p.name]);
  if (!all.length) {
    return h("p", { testid: "od-no-target", class: "muted" }, "The App reaches no repository yet: install it first (Add a GitHub runner…).");
  }
  if (!pools.length) return h("p", { testid: "od-no-pool", class: "muted" }, "Create a workspace pool first.");
  const options = all.map((t): [string, string] => [
    key(t),
    `${t.kind === "org" ? "Organization" : "Repository"} ${t.name}${t.host === "github.com" ? "" : ` (${t.host})`}`,
  ]);
  const picked = all.find((t) => key(t) === app.value("od-target")) ?? all[0];
  return h(
    "form",
    { class: "form", onsubmit: (ev: Event) => save(app, dialog, all, ev) },
    h("label", null, "Serve", app.select("od-target", { testid: "od-target", onchange: () => app.render() }, options)),
    h("label", null, "On pool", app.select("od-pool", { testid: "od-pool" }, pools)),
    h(
      "label",
      null,
      "More labels",
      app.input("od-labels", { testid: "od-labels", placeholder: "optional, comma separated, e.g. linux,big", autocomplete: "off" }),
    ),
    h(
      "label",
      null,
      "Runner group id",
      app.input("od-group", {
        testid: "od-group",
        type: "number",
        min: "1",
        placeholder: picked.kind === "org" ? "1, the default group" : "organizations only",
        disabled: picked.kind !== "org",
      }),
    ),
    h("label", null, "Actions runners at once", app.input("od-max", { testid: "od-max", type: "number", min: "1", max: "1000", placeholder: "10" })),
    h(
      "div",
      { class: "actions" },
      h("button", { testid: "od-submit", type: "submit", class: "primary", disabled: app.busy.has("od-save") }, "Turn on"),
    ),
    dialog.saved
      ? h(
          "p",
          { testid: "od-saved", class: "small" },
          `${dialog.saved.pool} serves ${dialog.saved.target}. In a workflow: `,
          h("code", { testid: "od-saved-hint" }, dialog.saved.workflowHint),
          ". Start the pool's runners with drover runner --github-actions.",
        )
      : null,
  );
}
