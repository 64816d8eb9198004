// Workspace (admins): the GitHub dialog. It registers a build server as
// both a GitHub Actions runner and a Drover runner: pick a repository or an
// organization the workspace's GitHub App reaches (searchable, GHE hosts
// badged), set the runner group and labels, and copy the install script.
// Where the App is not installed yet, it offers the App's install link.

import type { App } from "../app";
import * as api from "../api";
import { copy, h, splitList, when } from "../h";
import type { ApiError, GithubInstall, GithubInstallLink, GithubInstallRequest, GithubOverview } from "../types";

/** A repository (repo-level runner) or an organization (org-level). */
export interface Target {
  kind: "repo" | "org";
  name: string;
  host: string;
  private?: boolean;
}

/** The dialog's state, in `app.remote.github` while it is open. */
export interface GithubDialog {
  overview: GithubOverview | null;
  /** Why there is nothing to pick (e.g. GITHUB_NOT_CONFIGURED). */
  unavailable: ApiError | null;
  target: Target | null;
  ephemeral: boolean;
  installLink: GithubInstallLink | null;
  result: GithubInstall | null;
}

const GITHUB_COM = "github.com";

/** Every target the App reaches: organizations it is installed on, then repositories. */
export function targets(overview: GithubOverview): Target[] {
  const orgs = overview.installations
    .filter((i) => i.accountType === "Organization")
    .map((i): Target => ({ kind: "org", name: i.account, host: i.host }));
  const repos = overview.repos.map((r): Target => ({ kind: "repo", name: r.fullName, host: r.host, private: r.private }));
  return [...orgs, ...repos];
}

/** Whether the target's name or host contains every word of `query` (any case). */
export function matches(t: Pick<Target, "name" | "host">, query: string): boolean {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return words.every((w) => t.name.toLowerCase().includes(w) || t.host.toLowerCase().includes(w));
}

/**
 * Shows only the picker's rows that match the search, in place: typing
 * does not rebuild the window.
 */
function filterPicker(input: HTMLInputElement) {
  const list = input.closest("form")?.querySelector<HTMLElement>('[data-testid="gh-targets"]');
  if (!list) return;
  let shown = 0;
  for (const li of list.querySelectorAll<HTMLElement>('[data-testid="gh-target"]')) {
    li.hidden = !matches({ name: li.dataset.name ?? "", host: li.dataset.host ?? "" }, input.value);
    if (!li.hidden) shown++;
  }
  const none = list.querySelector<HTMLElement>('[data-testid="gh-no-match"]');
  if (none) none.hidden = shown > 0;
}

const same = (a: Target | null, b: Target) => !!a && a.kind === b.kind && a.name === b.name && a.host === b.host;

export async function openGithubDialog(app: App) {
  app.remote.github = { overview: null, unavailable: null, target: null, ephemeral: false, installLink: null, result: null };
  app.forget("gh-search", "gh-runner-group", "gh-labels", "gh-install-host");
  await loadOverview(app);
}

/** Reads what the App reaches; a refusal shows in the dialog, not the error line. */
async function loadOverview(app: App) {
  const dialog = app.remote.github;
  if (!dialog) return;
  app.busy.add("gh-load");
  app.render();
  try {
    dialog.overview = await api.wsGithubOverview();
    dialog.unavailable = null;
  } catch (e) {
    dialog.unavailable = api.toApiError(e);
  } finally {
    app.busy.delete("gh-load");
    app.render();
  }
}

function close(app: App) {
  app.remote.github = null;
  app.render();
}

function installLink(app: App, dialog: GithubDialog) {
  const host = app.value("gh-install-host") || undefined;
  void app.act("gh-link", () => api.wsGithubInstallLink(host), (link) => (dialog.installLink = link));
}

function register(app: App, dialog: GithubDialog, ev: Event) {
  ev.preventDefault();
  const target = dialog.target;
  if (!target) return app.fail("INVALID_INPUT", "pick a repository or an organization");
  const group = app.value("gh-runner-group");
  const labels = splitList(app.value("gh-labels"));
  const pool = app.value("gh-pool");
  const request: GithubInstallRequest = {
    ...(target.kind === "repo" ? { repository: target.name } : { org: target.name }),
    host: target.host,
    ...(target.kind === "org" && group ? { runnerGroup: group } : {}),
    ...(labels.length ? { labels } : {}),
    ephemeral: dialog.ephemeral,
    ...(pool ? { pool } : {}),
  };
  void app.act("gh-install", () => api.wsGithubInstall(request), (result) => {
    dialog.result = result;
    app.remote.roster = [...(app.remote.roster ?? []), result.runner];
  });
}

/** The workspace tab's GitHub section: the button that opens the dialog. */
export function githubSection(app: App) {
  return [
    h("h3", null, "GitHub Actions"),
    h(
      "div",
      { class: "card row" },
      h(
        "p",
        { class: "grow muted small" },
        "Stand up a build server that is both a GitHub Actions runner and a Drover runner, with one script.",
      ),
      h("button", { testid: "gh-open", onclick: () => void openGithubDialog(app) }, "Add a GitHub runner…"),
    ),
    app.remote.github ? githubDialog(app, app.remote.github) : null,
  ];
}

function githubDialog(app: App, dialog: GithubDialog) {
  return h(
    "div",
    { class: "overlay" },
    h(
      "div",
      { testid: "gh-dialog", class: "dialog wide", role: "dialog", "aria-modal": "true" },
      h("h2", null, "Add a GitHub Actions runner"),
      body(app, dialog),
      h(
        "div",
        { class: "actions" },
        h("button", { testid: "gh-reload", disabled: app.busy.has("gh-load"), onclick: () => void loadOverview(app) }, "Refresh"),
        h("button", { testid: "gh-close", onclick: () => close(app) }, "Close"),
      ),
    ),
  );
}

function body(app: App, dialog: GithubDialog) {
  if (dialog.result) return scriptView(dialog.result);
  if (dialog.unavailable) {
    return h(
      "p",
      { testid: "gh-unavailable", class: "error" },
      dialog.unavailable.code === "GITHUB_NOT_CONFIGURED"
        ? "This coordinator has no GitHub App configured (see drover-coordinator serve --help, --github-app-id)."
        : `${dialog.unavailable.code}: ${dialog.unavailable.message}`,
    );
  }
  const overview = dialog.overview;
  if (!overview) return h("p", { class: "muted" }, "Reading what the GitHub App reaches…");
  if (!overview.installations.length) {
    return h(
      "div",
      { testid: "gh-not-installed" },
      h("p", null, "The workspace's GitHub App is not installed on any account yet. Install it where your repositories are, then refresh."),
      installForm(app, dialog),
    );
  }
  const all = targets(overview);
  const query = app.value("gh-search");
  const target = dialog.target;
  const pools = (app.remote.wsPools ?? []).map((p): [string, string] => [p.id, p.name]);
  return h(
    "form",
    { class: "form", onsubmit: (ev: Event) => register(app, dialog, ev) },
    app.input("gh-search", {
      testid: "gh-search",
      type: "search",
      placeholder: "Search repositories and organizations",
      autocomplete: "off",
      oninput: (ev: Event) => filterPicker(ev.currentTarget as HTMLInputElement),
    }),
    h(
      "ul",
      { testid: "gh-targets", class: "card list picker" },
      all.map((t) =>
        h(
          "li",
          {
            testid: "gh-target",
            hidden: !matches(t, query),
            "data-kind": t.kind,
            "data-name": t.name,
            "data-host": t.host,
            class: same(target, t) ? "row selected" : "row",
            onclick: () => {
              dialog.target = t;
              app.render();
            },
          },
          h("strong", { class: "grow" }, t.name),
          t.host !== GITHUB_COM ? h("span", { testid: "gh-host-badge", class: "chip ghe", title: "GitHub Enterprise Server" }, `GHE ${t.host}`) : null,
          t.private ? h("span", { class: "chip" }, "private") : null,
          h("span", { class: "muted small" }, t.kind === "org" ? "organization" : "repository"),
        ),
      ),
      h(
        "li",
        { testid: "gh-no-match", class: "row muted", hidden: all.some((t) => matches(t, query)) },
        all.length ? "Nothing matches." : "The App reaches no repository.",
      ),
    ),
    overview.truncated ? h("p", { class: "muted small" }, "Only the first 1,000 repositories are listed: search narrows them.") : null,
    h(
      "p",
      { testid: "gh-selected", class: "small" },
      target ? `${target.kind === "org" ? "Organization" : "Repository"} ${target.name} on ${target.host}` : "Pick a repository or an organization.",
    ),
    h(
      "label",
      null,
      "Runner group",
      app.input("gh-runner-group", {
        testid: "gh-runner-group",
        placeholder: target?.kind === "org" ? "optional, e.g. builds" : "organizations only",
        disabled: target?.kind !== "org",
        autocomplete: "off",
      }),
    ),
    h(
      "label",
      null,
      "Labels",
      app.input("gh-labels", { testid: "gh-labels", placeholder: "optional, comma separated, e.g. gpu,big", autocomplete: "off" }),
    ),
    pools.length ? h("label", null, "Pool", app.select("gh-pool", { testid: "gh-pool" }, pools)) : null,
    h(
      "label",
      { class: "inline" },
      h("input", {
        testid: "gh-ephemeral",
        type: "checkbox",
        checked: dialog.ephemeral,
        onchange: (ev: Event) => (dialog.ephemeral = (ev.currentTarget as HTMLInputElement).checked),
      }),
      "Ephemeral: the GitHub runner takes one job, then unregisters",
    ),
    h(
      "div",
      { class: "actions" },
      h("button", { testid: "gh-submit", type: "submit", class: "primary", disabled: app.busy.has("gh-install") || !target }, "Create runner and script"),
    ),
    h("details", null, h("summary", { class: "small" }, "Install the App on another account"), installForm(app, dialog)),
  );
}

function installForm(app: App, dialog: GithubDialog) {
  const link = dialog.installLink;
  return h(
    "div",
    { class: "row" },
    app.input("gh-install-host", { testid: "gh-install-host", placeholder: GITHUB_COM, class: "grow", autocomplete: "off" }),
    h(
      "button",
      { testid: "gh-install-link", type: "button", disabled: app.busy.has("gh-link"), onclick: () => installLink(app, dialog) },
      "Get the install link",
    ),
    link
      ? h(
          "div",
          { class: "secret" },
          h("p", { class: "small" }, `Open it in your browser and install the App on ${link.host}; it links to this workspace until `, when(link.expiresAt), "."),
          h("code", { testid: "gh-install-url", class: "block" }, link.url),
          copyButton("gh-install-copy", link.url),
        )
      : null,
  );
}

function scriptView(result: GithubInstall) {
  return h(
    "div",
    { testid: "gh-result" },
    h(
      "p",
      null,
      `Runner ${result.runner.name} is paired, and GitHub runner ${result.github.name} will register at ${result.github.url}. `,
      "Run this script as root on the build server. It holds tokens shown only now: copy it.",
    ),
    h("pre", { testid: "gh-script", class: "block script" }, result.script),
    copyButton("gh-copy", result.script),
    h("p", { class: "small" }, "In the workflow:"),
    h("pre", { testid: "gh-hint", class: "block" }, result.workflowHint.yaml),
  );
}

function copyButton(testid: string, text: string) {
  return h(
    "button",
    { testid, type: "button", class: "small", onclick: (ev: Event) => copy(text, ev.currentTarget as HTMLButtonElement) },
    "Copy",
  );
}
