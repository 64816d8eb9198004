// Account: sign in (a pasted token or a pairing link), who is signed in, the
// devices paired to the account, sign out.

import type { App } from "../app";
import * as api from "../api";
import { h, when } from "../h";
import type { Account } from "../types";

export function accountPanel(app: App) {
  const { account } = app.state;
  return h(
    "section",
    { testid: "panel-account", class: "panel" },
    account ? signedIn(app, account) : signedOut(app),
  );
}

function signedOut(app: App) {
  const signIn = (ev: Event) => {
    ev.preventDefault();
    const url = app.value("signin-url");
    const token = app.value("signin-token");
    if (!url || !token) return app.fail("INVALID_INPUT", "enter the coordinator URL and an API token");
    void app.change("signin", () => api.signIn(url, token), () => app.forget("signin-token"));
  };
  const openLink = (ev: Event) => {
    ev.preventDefault();
    const link = app.value("link-input");
    if (!link) return;
    void app.act("open-link", () => api.openLink(link), (pending) => {
      app.forget("link-input");
      app.state = { ...app.state, pending };
    });
  };
  const why = app.state.signedOut;
  return [
    why
      ? h(
        "div",
        { testid: "signed-out-notice", class: "card notice", role: "alert" },
        h("strong", null, "This device was signed out."),
        " ",
        // A sentence, unless it starts with someone's address.
        /^\S+@/.test(why) ? why : why.charAt(0).toUpperCase() + why.slice(1),
        ". Its runners were stopped and its keys removed from the keychain. To lend this machine again, open a new pairing link (",
        h("code", null, "drover pair-link"),
        ") below.",
      )
      : null,
    h("h2", null, "Sign in"),
    h(
      "p",
      { class: "muted" },
      "Open a pairing link from your coordinator (",
      h("code", null, "drover pair-link"),
      ") and confirm it here, or paste a member API token.",
    ),
    h(
      "form",
      { class: "card form", onsubmit: signIn },
      h("label", null, "Coordinator URL", app.input("signin-url", { testid: "signin-url", type: "url", placeholder: "https://drover.example.com", autocomplete: "off" })),
      h("label", null, "API token", app.input("signin-token", { testid: "signin-token", type: "password", placeholder: "drv_…", autocomplete: "off" })),
      h(
        "div",
        { class: "actions" },
        h("button", { testid: "signin-submit", type: "submit", class: "primary", disabled: app.busy.has("signin") }, app.busy.has("signin") ? "Signing in…" : "Sign in"),
      ),
    ),
    h(
      "form",
      { class: "card form", onsubmit: openLink },
      h("label", null, "Pairing or join link", app.input("link-input", { testid: "link-input", placeholder: "drover://pair?url=…&code=…", autocomplete: "off" })),
      h("div", { class: "actions" }, h("button", { testid: "link-open", type: "submit" }, "Open link")),
    ),
  ];
}

function signedIn(app: App, account: Account) {
  const devices = app.remote.devices;
  return [
    h("h2", null, "Account"),
    h(
      "dl",
      { class: "card facts" },
      h("dt", null, "Coordinator"),
      h("dd", null, h("code", { testid: "coordinator-url" }, account.coordinator)),
      h("dt", null, "Signed in as"),
      h("dd", null, h("span", { testid: "signed-in-as" }, account.email)),
      h("dt", null, "Workspace"),
      h("dd", null, account.workspace, " · ", h("span", { testid: "role" }, account.role)),
      h("dt", null, "This device"),
      h("dd", null, account.deviceName ?? "signed in with a pasted token"),
    ),
    h("h3", null, "Devices", h("small", { class: "muted" }, " — tokens that act as you; revoke one you no longer use")),
    h(
      "ul",
      { testid: "devices", class: "card list" },
      (devices ?? []).map((d) =>
        h(
          "li",
          { testid: "device-row", "data-id": d.id, class: "row" },
          h(
            "div",
            { class: "grow" },
            h("strong", null, d.name),
            d.current ? h("span", { class: "tag" }, "this device") : null,
            h(
              "div",
              { class: "muted small" },
              "added ",
              when(d.createdAt),
              " · ",
              d.lastUsedAt == null ? "never used" : ["last used ", when(d.lastUsedAt)],
            ),
          ),
          h(
            "button",
            {
              testid: "device-revoke",
              disabled: d.current || app.busy.has(`revoke:${d.id}`),
              title: d.current ? "This device: sign out instead" : "Revoke this token",
              onclick: () =>
                app.act(`revoke:${d.id}`, () => api.revokeDevice(d.id), (list) => (app.remote.devices = list)),
            },
            "Revoke",
          ),
        ),
      ),
      devices === null ? h("li", { class: "muted row" }, app.busy.has("devices") ? "Loading…" : "Could not load the devices.") : null,
    ),
    h(
      "div",
      { class: "card row" },
      h(
        "p",
        { class: "grow muted" },
        "Signing out lets running jobs finish, revokes this device's tokens and runners, and removes every Drover secret from the keychain.",
      ),
      h(
        "button",
        { testid: "sign-out", class: "danger", disabled: app.busy.has("signout"), onclick: () => app.change("signout", api.signOut) },
        app.busy.has("signout") ? "Signing out…" : "Sign out",
      ),
    ),
  ];
}
