// The workspace tab's GitHub dialog, over a mocked IPC.

import { afterEach, describe, expect, it } from "vitest";
import { $, $all, admin, appState, click, has, start, stop, type, wsPool, wsRunner } from "./helpers";
import { matches, targets } from "../src/views/github";
import type { GithubOverview } from "../src/types";

afterEach(() => stop());

const signedIn = () => appState({ status: "idle", account: admin });

const overview: GithubOverview = {
  installations: [
    { host: "github.com", installationId: 1, account: "octo", accountType: "Organization", linkedAt: 1 },
    { host: "github.com", installationId: 2, account: "ann", accountType: "User", linkedAt: 2 },
    { host: "ghe.acme.test", installationId: 3, account: "platform", accountType: "Organization", linkedAt: 3 },
  ],
  repos: [
    { host: "github.com", owner: "octo", name: "hello", fullName: "octo/hello", private: false, installationId: 1 },
    { host: "github.com", owner: "ann", name: "dotfiles", fullName: "ann/dotfiles", private: true, installationId: 2 },
    { host: "ghe.acme.test", owner: "platform", name: "infra", fullName: "platform/infra", private: true, installationId: 3 },
  ],
  truncated: false,
};

const install = {
  runner: { ...wsRunner, id: "rn_gh1", name: "gh-box" },
  github: { host: "github.com", url: "https://github.com/octo", name: "drover-rn_gh1", labels: ["self-hosted", "drover-rn_gh1", "gpu"], runnerGroup: "builds", ephemeral: true },
  script: "#!/bin/sh\nGH_TOKEN='AREG'\n",
  workflowHint: { runsOn: ["self-hosted", "drover-rn_gh1"], runtime: "self:ws:rt_ws", yaml: "runs-on: [self-hosted, drover-rn_gh1]" },
};

/** The picker's rows the search leaves shown. */
const shown = () => $all("gh-target").filter((t) => !t.hidden);
const names = () => shown().map((t) => `${t.dataset.kind}:${t.dataset.name}`);

describe("the GitHub dialog", () => {
  it("targets: organizations (never user accounts), then repositories; search matches names and hosts", () => {
    const all = targets(overview);
    expect(all.map((t) => `${t.kind}:${t.name}@${t.host}`)).toEqual([
      "org:octo@github.com",
      "org:platform@ghe.acme.test",
      "repo:octo/hello@github.com",
      "repo:ann/dotfiles@github.com",
      "repo:platform/infra@ghe.acme.test",
    ]);
    const search = (q: string) => all.filter((t) => matches(t, q)).map((t) => t.name);
    expect(search("GHE.acme")).toEqual(["platform", "platform/infra"]);
    expect(search("octo hel")).toEqual(["octo/hello"]);
    expect(search("  ")).toHaveLength(5);
  });

  it("picks an organization with a runner group and labels, and shows the script to copy", async () => {
    const { called } = await start(signedIn(), {
      ws_list_pools: () => [wsPool],
      ws_github_overview: () => overview,
      ws_github_install: () => install,
    });
    await click("tab-workspace");
    await click("gh-open");
    expect(has("gh-dialog")).toBe(true);
    expect(names()).toEqual(["org:octo", "org:platform", "repo:octo/hello", "repo:ann/dotfiles", "repo:platform/infra"]);
    // GHE hosts are badged; github.com is not.
    const badged = $all("gh-target").filter((t) => t.querySelector('[data-testid="gh-host-badge"]'));
    expect(badged.map((t) => t.dataset.name)).toEqual(["platform", "platform/infra"]);
    expect($("gh-host-badge").textContent).toBe("GHE ghe.acme.test");

    // Nothing picked: nothing to submit; a repository has no runner group.
    expect(($("gh-submit") as HTMLButtonElement).disabled).toBe(true);
    $all("gh-target")[2].click();
    expect($("gh-selected").textContent).toBe("Repository octo/hello on github.com");
    expect(($("gh-runner-group") as HTMLInputElement).disabled).toBe(true);

    type("gh-search", "octo");
    expect(names()).toEqual(["org:octo", "repo:octo/hello"]);
    expect(has("gh-no-match") && $("gh-no-match").hidden).toBe(true);
    type("gh-search", "nothing-like-it");
    expect(names()).toEqual([]);
    expect($("gh-no-match").hidden).toBe(false);
    type("gh-search", "octo");
    shown()[0].click();
    expect($("gh-selected").textContent).toBe("Organization octo on github.com");
    expect(($("gh-search") as HTMLInputElement).value).toBe("octo");
    type("gh-runner-group", "builds");
    type("gh-labels", "gpu, big");
    ($("gh-ephemeral") as HTMLInputElement).click();
    await click("gh-submit");
    expect(called("ws_github_install")).toEqual([
      { request: { org: "octo", host: "github.com", runnerGroup: "builds", labels: ["gpu", "big"], ephemeral: true, pool: "rt_ws" } },
    ]);
    expect($("gh-script").textContent).toBe(install.script);
    expect($("gh-hint").textContent).toBe("runs-on: [self-hosted, drover-rn_gh1]");
    expect(has("gh-copy")).toBe(true);
    await click("gh-copy"); // no clipboard in jsdom: fails quietly
    // The new runner is in the roster behind the dialog.
    expect($all("ws-runner-row").map((r) => r.dataset.id)).toContain("rn_gh1");
    await click("gh-close");
    expect(has("gh-dialog")).toBe(false);
  });

  it("a repository on a GHE host is registered host-strict, without a runner group", async () => {
    const { called } = await start(signedIn(), {
      ws_github_overview: () => overview,
      ws_github_install: () => install,
    });
    await click("tab-workspace");
    await click("gh-open");
    type("gh-search", "infra");
    shown()[0].click();
    await click("gh-submit");
    expect(called("ws_github_install")).toEqual([{ request: { repository: "platform/infra", host: "ghe.acme.test", ephemeral: false } }]);
  });

  it("not installed yet: offers the install link, for a host if given", async () => {
    const { called } = await start(signedIn(), {
      ws_github_overview: () => ({ installations: [], repos: [], truncated: false }),
      ws_github_install_link: ({ host }) => ({ url: `https://${host ?? "github.com"}/apps/drover/installations/new?state=dpc_x`, host: host ?? "github.com", expiresAt: Date.now() + 600_000 }),
    });
    await click("tab-workspace");
    await click("gh-open");
    expect(has("gh-not-installed")).toBe(true);
    expect(has("gh-targets")).toBe(false);
    await click("gh-install-link");
    expect($("gh-install-url").textContent).toBe("https://github.com/apps/drover/installations/new?state=dpc_x");
    type("gh-install-host", "ghe.acme.test");
    await click("gh-install-link");
    expect(called("ws_github_install_link")).toEqual([{}, { host: "ghe.acme.test" }]);
    // Installed meanwhile: refresh reads it again.
    await click("gh-reload");
    expect(called("ws_github_overview")).toHaveLength(2);
  });

  it("a coordinator without the App says so in the dialog", async () => {
    await start(signedIn(), {
      ws_github_overview: () => {
        throw { code: "GITHUB_NOT_CONFIGURED", message: "no GitHub App" };
      },
    });
    await click("tab-workspace");
    await click("gh-open");
    expect($("gh-unavailable").textContent).toContain("no GitHub App configured");
  });

  it("revoking a GitHub runner says what GitHub did", async () => {
    await start(signedIn(), {
      ws_roster: () => [wsRunner],
      ws_revoke_runner: () => ({ github: { name: "drover-rn_ws1", removed: false, message: "it is running a job; removed once idle" } }),
    });
    await click("tab-workspace");
    await click("ws-revoke", $all("ws-runner-row")[0]);
    expect($("ws-revoke-notice").textContent).toBe(
      "Revoked build-box. GitHub runner drover-rn_ws1: it is running a job; removed once idle",
    );
  });
});
