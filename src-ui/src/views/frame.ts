// What every tab shares: the header with the status and the tabs, the
// activity list, the error line and the link-confirmation dialog.

import type { App, Tab } from "../app";
import * as api from "../api";
import { cleartextOf, isCleartext } from "../cleartext";
import { sentence } from "../errors";
import { h, when } from "../h";
import type { PendingLink } from "../types";

const TAB_NAMES: Record<Tab, string> = {
  account: "Account",
  machine: "This machine",
  pools: "My pools",
  workspace: "Workspace",
};

const STATUS_LABELS: Record<string, string> = {
  signedOut: "Signed out",
  idle: "Idle",
  busy: "Busy",
  offline: "Offline",
  paused: "Paused",
};

const STATUS_HINTS: Record<string, string> = {
  signedOut: "Not signed in",
  idle: "Connected, waiting for jobs",
  busy: "Running jobs",
  offline: "Cannot reach the coordinator",
  paused: "Paused: no new jobs start",
};

export function header(app: App) {
  const { status, account } = app.state;
  return h(
    "header",
    { class: "top" },
    h("div", { class: "brand" }, h("span", { class: "mark" }), "Drover"),
    h(
      "nav",
      { class: "tabs", role: "tablist" },
      app.tabs().map((tab) =>
        h(
          "button",
          {
            testid: `tab-${tab}`,
            role: "tab",
            class: tab === app.tab ? "tab active" : "tab",
            "aria-selected": String(tab === app.tab),
            onclick: () => app.show(tab),
          },
          TAB_NAMES[tab],
        ),
      ),
    ),
    h(
      "div",
      { class: "who" },
      account ? h("span", { class: "muted", title: account.coordinator }, account.workspace) : null,
      h(
        "span",
        { testid: "status", "data-status": status, class: `status status-${status}`, title: STATUS_HINTS[status] },
        STATUS_LABELS[status] ?? status,
      ),
    ),
  );
}

/**
 * Shown on every tab while the app talks to a coordinator over plain
 * http:// to another machine (the account's, or a lent pool's).
 */
export function cleartextNotice(app: App) {
  const { account, pools } = app.state;
  const urls = cleartextOf([account?.coordinator, ...pools.map((p) => p.coordinator)]);
  if (!urls.length) return null;
  return h(
    "div",
    { testid: "cleartext-notice", class: "notice warning", role: "status" },
    h("strong", null, "Not encrypted: "),
    "this app talks to ",
    urls.map((u, i) => [i ? ", " : "", h("code", null, u)]),
    " over plain http://. Its tokens, and your jobs' env and logs, travel in clear text: anyone on the network path can read them. Ask your admin for an https:// URL.",
  );
}

export function activity(app: App) {
  const items = app.state.activity;
  return h(
    "aside",
    { class: "side" },
    h("h3", null, "Activity"),
    h(
      "ul",
      { testid: "activity", class: "activity" },
      items.map((a) =>
        h(
          "li",
          { testid: "activity-item", class: `activity-item kind-${a.kind}` },
          h("div", null, a.message),
          a.detail ? h("details", { testid: "activity-detail" }, h("summary", null, "Details"), h("code", null, a.detail)) : null,
          when(a.at),
        ),
      ),
    ),
    items.length ? null : h("p", { class: "muted" }, "Nothing yet."),
  );
}

export function errorLine(app: App) {
  const e = app.error;
  return h(
    "div",
    { class: e ? "errorbar shown" : "errorbar", role: "alert" },
    h(
      "span",
      null,
      h("span", { testid: "error" }, e ? sentence(e, app.state.account?.coordinator) : ""),
      e
        ? h(
            "details",
            { class: "error-detail" },
            h("summary", null, "Details"),
            h("code", { testid: "error-detail" }, `${e.code}: ${e.message}`),
          )
        : null,
    ),
    e
      ? h("button", { class: "plain", title: "Dismiss", onclick: () => ((app.error = null), app.render()) }, "×")
      : null,
  );
}

/**
 * The coordinator refused this app's version: what to upgrade, in the
 * coordinator's own words (as `drover` prints them). Nothing when it did not.
 */
export function versionBanner(app: App) {
  const e = app.skew;
  if (!e) return null;
  const title =
    e.code === "COORDINATOR_TOO_OLD"
      ? "The coordinator is older than this app"
      : "This app is too old for the coordinator";
  return h(
    "div",
    { testid: "version-banner", class: "banner", role: "alert", "data-code": e.code },
    h("strong", null, title),
    h("span", { testid: "version-banner-message" }, e.message),
  );
}

/** A link refused before anything was asked: why, and Close. */
export function linkRefusedDialog(app: App, why: string) {
  return h(
    "div",
    { class: "overlay" },
    h(
      "div",
      { testid: "link-refused", class: "dialog", role: "alertdialog", "aria-modal": "true" },
      h("h2", null, "Link not opened"),
      h("p", { testid: "link-refused-message" }, why.charAt(0).toUpperCase() + why.slice(1) + (/[.!?]$/.test(why) ? "" : ".")),
      h(
        "div",
        { class: "actions" },
        h("button", { testid: "link-refused-close", class: "primary", disabled: app.busy.has("link"), onclick: () => app.change("link", api.dismissLink) }, "Close"),
      ),
    ),
  );
}

export function linkDialog(app: App, link: PendingLink) {
  const pair = link.kind === "pair";
  return h(
    "div",
    { class: "overlay" },
    h(
      "div",
      { testid: "link-dialog", class: "dialog", role: "dialog", "aria-modal": "true" },
      h("h2", null, pair ? "Pair this device?" : "Lend this machine to a pool?"),
      h(
        "p",
        null,
        pair
          ? "Drover will sign this device in to your account and run your jobs here."
          : "This machine will join a workspace pool and run its jobs.",
      ),
      h(
        "dl",
        { class: "facts" },
        h("dt", null, "Coordinator"),
        h("dd", null, h("code", { testid: "link-coordinator" }, link.coordinator)),
        h("dt", null, "Pool"),
        h("dd", null, h("code", { testid: "link-pool" }, link.pool)),
      ),
      isCleartext(link.coordinator)
        ? h(
            "p",
            { testid: "link-cleartext", class: "warning" },
            h("strong", null, "Not encrypted: "),
            "this coordinator is plain http:// on another machine. Tokens would travel in clear text: ",
            pair ? "this device's token" : "this machine's runner credentials",
            " and your jobs' env and logs, readable by anyone on the network path. Prefer an https:// link.",
          )
        : null,
      link.linkPool
        ? h(
            "p",
            { testid: "link-pool-differs", class: "warning" },
            "The link's own text named another pool, ",
            h("code", null, link.linkPool),
            ": the pool above is the one the coordinator says this token joins.",
          )
        : null,
      h("p", { class: "muted" }, "Confirm only a link you asked for."),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          { testid: "link-cancel", disabled: app.busy.has("link"), onclick: () => app.change("link", api.dismissLink) },
          "Cancel",
        ),
        h(
          "button",
          {
            testid: "link-confirm",
            class: "primary",
            disabled: app.busy.has("link"),
            onclick: () => app.change("link", api.confirmLink),
          },
          app.busy.has("link") ? "Connecting…" : "Confirm",
        ),
      ),
    ),
  );
}
