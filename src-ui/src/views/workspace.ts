// Workspace (admins): pools, the roster, pairing and revoking workspace
// runners, join tokens and links (minted, listed, revoked), usage and the
// budget; then (people.ts)
// usage by month, members and the audit log.

import type { App } from "../app";
import * as api from "../api";
import { copy, duration, h, shortId, unsandboxed, when } from "../h";
import type { JoinTokenSummary, Runner } from "../types";
import { githubSection } from "./github";
import { onDemandRow } from "./on_demand";
import { auditSection, membersSection, usageSection } from "./people";

export function workspacePanel(app: App) {
  const { wsPools, roster, usage, paired, joinToken, joinTokens } = app.remote;
  const pools = wsPools ?? [];
  const options = pools.map((p): [string, string] => [p.id, p.name]);
  const workspace = app.state.account?.workspace ?? "";

  const createPool = (ev: Event) => {
    ev.preventDefault();
    const name = app.value("ws-create-pool-name");
    if (!name) return app.fail("INVALID_INPUT", "give the pool a name");
    void app.act("ws-create", () => api.wsCreatePool(name), (p) => {
      app.forget("ws-create-pool-name");
      app.remote.wsPools = [...pools, p];
    });
  };
  const pair = (ev: Event) => {
    ev.preventDefault();
    const pool = app.value("ws-pair-pool");
    if (!pool) return app.fail("INVALID_INPUT", "create a pool first");
    const name = app.value("ws-pair-name") || undefined;
    void app.act("ws-pair", () => api.wsPairRunner(pool, name), (result) => {
      app.forget("ws-pair-name");
      app.remote.paired = result;
      app.remote.roster = [...(roster ?? []), result.runner];
    });
  };
  const join = (ev: Event) => {
    ev.preventDefault();
    const pool = app.value("ws-join-pool");
    if (!pool) return app.fail("INVALID_INPUT", "create a pool first");
    void app.act("ws-join", () => api.wsJoinToken(pool), (token) => {
      app.remote.joinToken = token;
      void app.act("joinTokens", api.wsJoinTokens, (list) => (app.remote.joinTokens = list));
    });
  };
  const saveBudget = (ev: Event) => {
    ev.preventDefault();
    const text = app.value("ws-budget-input");
    const minutes = Number(text);
    if (text && !(Number.isInteger(minutes) && minutes >= 0)) {
      return app.fail("INVALID_INPUT", "the budget is whole runner-minutes a month, or empty for no limit");
    }
    const limit = text ? minutes : null;
    void app.act("ws-budget", () => api.wsSetBudget(limit), (u) => {
      app.remote.usage = u;
      app.forget("ws-budget-input");
    });
  };

  return h(
    "section",
    { testid: "panel-workspace", class: "panel" },
    h(
      "h2",
      { class: "row" },
      h("span", { class: "grow" }, "Workspace ", h("span", { class: "muted" }, workspace)),
      h("button", { testid: "ws-refresh", class: "small", onclick: () => app.load() }, "Refresh"),
    ),

    h("h3", null, "Pools"),
    h(
      "ul",
      { testid: "ws-pools", class: "card list" },
      pools.map((p) =>
        h(
          "li",
          { testid: "ws-pool-row", "data-id": p.id, class: "row" },
          h("span", { class: "grow", title: p.ref }, h("strong", null, p.name), h("span", { class: "tag tag-workspace" }, "workspace")),
          h("span", { class: "muted small" }, `${p.runners} ${p.runners === 1 ? "runner" : "runners"}`),
        ),
      ),
      wsPools?.length === 0 ? h("li", { class: "row muted" }, "No pool yet.") : null,
    ),
    h(
      "form",
      { class: "row", onsubmit: createPool },
      app.input("ws-create-pool-name", { testid: "ws-create-pool-name", placeholder: "New pool name", class: "grow", autocomplete: "off" }),
      h("button", { testid: "ws-create-pool-submit", type: "submit", disabled: app.busy.has("ws-create") }, "Create pool"),
    ),

    h("h3", null, "Runners"),
    h(
      "table",
      { testid: "ws-roster", class: "card roster" },
      h("tbody", null, (roster ?? []).map((r) => rosterRow(app, r))),
    ),
    roster?.length === 0 ? h("p", { class: "muted" }, "No runner yet.") : null,
    app.remote.revokeNotice ? h("p", { testid: "ws-revoke-notice", class: "small" }, app.remote.revokeNotice) : null,

    h(
      "div",
      { class: "columns" },
      h(
        "form",
        { class: "card form", onsubmit: pair },
        h("h4", null, "Pair a workspace runner"),
        h("label", null, "Pool", app.select("ws-pair-pool", { testid: "ws-pair-pool" }, options)),
        h("label", null, "Name", app.input("ws-pair-name", { testid: "ws-pair-name", placeholder: "optional, e.g. build-box-1", autocomplete: "off" })),
        h("div", { class: "actions" }, h("button", { testid: "ws-pair-submit", type: "submit", class: "primary", disabled: app.busy.has("ws-pair") || !pools.length }, "Pair runner")),
        paired
          ? h(
              "div",
              { class: "secret" },
              h("p", { class: "small" }, `Runner ${paired.runner.name} paired. Its token is shown once: copy it now.`),
              h("code", { testid: "ws-pair-token", class: "block" }, paired.token),
              h("code", { testid: "ws-pair-command", class: "block" }, paired.command),
              h("button", { testid: "ws-pair-copy", type: "button", class: "small", onclick: (ev: Event) => copy(paired.command, ev.currentTarget as HTMLButtonElement) }, "Copy"),
            )
          : null,
      ),
      h(
        "form",
        { class: "card form", onsubmit: join },
        h("h4", null, "Join token"),
        h("p", { class: "muted small" }, "A link that lends a machine to a pool in one click, valid for a day."),
        h("label", null, "Pool", app.select("ws-join-pool", { testid: "ws-join-pool" }, options)),
        h("div", { class: "actions" }, h("button", { testid: "ws-join-submit", type: "submit", disabled: app.busy.has("ws-join") || !pools.length }, "Create join token")),
        joinToken
          ? h(
              "div",
              { class: "secret" },
              h("p", { class: "small" }, `For ${joinToken.runtime.name}, expires `, when(joinToken.expiresAt), ". Shown once."),
              h("code", { testid: "ws-join-token", class: "block" }, joinToken.token),
              h("code", { testid: "ws-join-link", class: "block" }, joinToken.link ?? ""),
              h("button", { testid: "ws-join-copy", type: "button", class: "small", onclick: (ev: Event) => copy(joinToken.link ?? joinToken.token, ev.currentTarget as HTMLButtonElement) }, "Copy"),
            )
          : null,
      ),
    ),

    h("h3", null, "Join tokens"),
    h(
      "table",
      { testid: "ws-join-tokens", class: "card roster" },
      h("tbody", null, (joinTokens ?? []).map((t) => joinTokenRow(app, t))),
    ),
    joinTokens?.length === 0 ? h("p", { testid: "ws-join-tokens-empty", class: "muted" }, "No join token in use.") : null,

    githubSection(app),
    onDemandRow(app),

    h("h3", null, usage ? `Usage and budget, ${usage.month} (UTC)` : "Usage and budget"),
    h(
      "form",
      { class: "card row", onsubmit: saveBudget },
      h(
        "div",
        { testid: "ws-usage", class: "grow" },
        usage
          ? `Charged ${duration(usage.chargedMs)} (${usage.jobsCharged} jobs) · members' own runners ${duration(usage.ownPaysMs)} (${usage.jobsOwnPays} jobs) · budget ${usage.monthlyMinutes === null ? "no limit" : `${usage.monthlyMinutes} min a month`}`
          : "…",
      ),
      h(
        "label",
        { class: "inline" },
        "Budget",
        app.input(
          "ws-budget-input",
          { testid: "ws-budget-input", type: "number", min: "0", step: "1", placeholder: "no limit", class: "narrow" },
          usage?.monthlyMinutes != null ? String(usage.monthlyMinutes) : "",
        ),
        "min / month",
      ),
      h("button", { testid: "ws-budget-save", type: "submit", disabled: app.busy.has("ws-budget") }, "Save"),
    ),
    usageSection(app),
    membersSection(app),
    auditSection(app),
  );
}

function rosterRow(app: App, r: Runner) {
  return h(
    "tr",
    { testid: "ws-runner-row", "data-id": r.id },
    h(
      "td",
      null,
      h(
        "span",
        { testid: "ws-runner-state", class: !r.online ? "badge-offline" : r.paused ? "badge-paused" : "badge-online" },
        !r.online ? "offline" : r.paused ? "paused" : "online",
      ),
      unsandboxed(r.capabilities)
        ? h(
            "div",
            null,
            h(
              "span",
              { testid: "ws-runner-unsandboxed", class: "badge-unsandboxed", title: "Its jobs run without a sandbox, as the user of the machine it runs on" },
              "unsandboxed",
            ),
          )
        : null,
    ),
    h("td", { class: "nowrap", title: r.id }, h("strong", null, r.name), h("div", null, h("code", { class: "muted small" }, shortId(r.id)))),
    h(
      "td",
      { class: "small nowrap" },
      r.runtimeName,
      h("div", null, h("span", { class: `tag tag-${r.owner.startsWith("ws:") ? "workspace" : "personal"}` }, r.owner.startsWith("ws:") ? "workspace" : "personal")),
    ),
    h("td", null, h("div", { class: "chips" }, r.capabilities.map((c) => h("span", { class: "chip" }, c)))),
    h(
      "td",
      { class: "small" },
      r.currentJobs.length ? `running ${r.currentJobs.join(", ")}` : r.paused ? "paused by its owner" : "idle",
      r.lastSeenAt ? h("div", { class: "muted nowrap" }, "seen ", when(r.lastSeenAt)) : null,
    ),
    h(
      "td",
      null,
      h(
        "button",
        {
          testid: "ws-revoke",
          class: "small danger",
          disabled: app.busy.has(`ws-revoke:${r.id}`),
          onclick: () =>
            app.act(`ws-revoke:${r.id}`, () => api.wsRevokeRunner(r.id), (revoked) => {
              app.remote.roster = (app.remote.roster ?? []).filter((x) => x.id !== r.id);
              app.remote.revokeNotice = revoked
                ? `Revoked ${r.name}. GitHub runner ${revoked.github.name}: ${revoked.github.message}`
                : null;
            }),
        },
        "Revoke",
      ),
    ),
  );
}

/** One join token: pool, who minted it, when, its use; never the token. */
function joinTokenRow(app: App, t: JoinTokenSummary) {
  const key = `ws-revoke-join:${t.id}`;
  return h(
    "tr",
    { testid: "ws-join-token-row", "data-id": t.id },
    h("td", { class: "nowrap" }, h("strong", null, t.pool), h("div", null, h("code", { class: "muted small" }, t.id))),
    h("td", { class: "small" }, "minted by ", t.mintedByEmail ?? t.mintedBy ?? "unknown", h("div", { class: "muted" }, "made ", when(t.createdAt))),
    h("td", { class: "small" }, "expires ", when(t.expiresAt)),
    h(
      "td",
      { class: "small" },
      `${t.uses} ${t.uses === 1 ? "runner" : "runners"} joined`,
      t.lastUsedAt ? h("div", { class: "muted" }, "last ", when(t.lastUsedAt)) : null,
    ),
    h(
      "td",
      null,
      h(
        "button",
        {
          testid: "ws-revoke-join-token",
          class: "small danger",
          disabled: app.busy.has(key),
          onclick: () => app.act(key, () => api.wsRevokeJoinToken(t.id), (left) => (app.remote.joinTokens = left)),
        },
        "Revoke",
      ),
    ),
  );
}
