// The workspace tab's GitHub Actions on demand dialog, over a mocked IPC.

import { afterEach, describe, expect, it } from "vitest";
import { $, $all, admin, appState, choose, click, has, start, stop, type, wsPool } from "./helpers";
import type { GithubOnDemand, GithubOverview } from "../src/types";

afterEach(() => stop());

const signedIn = () => appState({ status: "idle", account: admin });

const overview: GithubOverview = {
  installations: [{ host: "github.com", installationId: 1, account: "octo", accountType: "Organization", linkedAt: 1 }],
  repos: [{ host: "github.com", owner: "octo", name: "hello", fullName: "octo/hello", private: false, installationId: 1 }],
  truncated: false,
};

const on = (over: Partial<GithubOnDemand>): GithubOnDemand => ({
  id: "god_1",
  pool: "builders",
  poolId: "rt_ws",
  host: "github.com",
  target: "octo/hello",
  labels: ["self-hosted", "drover-builders"],
  maxRunners: 10,
  workflowHint: "runs-on: [self-hosted, drover-builders]",
  principal: "actions:octo/hello",
  createdBy: "admin@acme.test",
  createdAt: 1,
  ...over,
});

describe("the on-demand dialog", () => {
  it("turns a pool on for an organization with a group, labels and a cap, lists it, and turns it off", async () => {
    const saved = on({ id: "god_2", target: "octo", labels: ["self-hosted", "drover-builders", "linux"], runnerGroupId: 4, maxRunners: 3, workflowHint: "runs-on: [self-hosted, drover-builders, linux]" });
    const { called } = await start(signedIn(), {
      ws_list_pools: () => [wsPool],
      ws_github_overview: () => overview,
      ws_github_on_demand: () => ({ pools: [on({})] }),
      ws_github_on_demand_set: () => saved,
      ws_github_on_demand_remove: () => null,
    });
    await click("tab-workspace");
    await click("od-open");
    expect(has("od-dialog")).toBe(true);
    expect($all("od-row").map((r) => r.dataset.target)).toEqual(["octo/hello"]);
    expect($("od-hint").textContent).toBe("runs-on: [self-hosted, drover-builders]");

    // A repository has no runner group; an organization does.
    choose("od-target", "repo|github.com|octo/hello");
    expect(($("od-group") as HTMLInputElement).disabled).toBe(true);
    choose("od-target", "org|github.com|octo");
    expect(($("od-group") as HTMLInputElement).disabled).toBe(false);
    type("od-group", "4");
    type("od-labels", "linux");
    type("od-max", "3");
    await click("od-submit");
    expect(called("ws_github_on_demand_set")).toEqual([
      { request: { pool: "builders", target: "octo", host: "github.com", labels: ["linux"], runnerGroupId: 4, maxRunners: 3 } },
    ]);
    expect($("od-saved-hint").textContent).toBe("runs-on: [self-hosted, drover-builders, linux]");
    expect($("od-saved").textContent).toContain("drover runner --github-actions");
    expect($all("od-row").map((r) => r.dataset.target)).toEqual(["octo/hello", "octo"]);

    await click("od-remove", $all("od-row")[0]);
    expect(called("ws_github_on_demand_remove")).toEqual([{ id: "god_1" }]);
    expect($all("od-row").map((r) => r.dataset.target)).toEqual(["octo"]);
    await click("od-close");
    expect(has("od-dialog")).toBe(false);
  });

  it("a refusal shows on the error line, and nothing is listed twice", async () => {
    await start(signedIn(), {
      ws_list_pools: () => [wsPool],
      ws_github_overview: () => overview,
      ws_github_on_demand: () => ({ pools: [] }),
      ws_github_on_demand_set: () => {
        throw { code: "BAD_REQUEST", message: 'label "no good!" must be 1-64 of letters, digits, \'.\', \'_\', \'-\'' };
      },
    });
    await click("tab-workspace");
    await click("od-open");
    expect(has("od-none")).toBe(true);
    type("od-labels", "no good!");
    await click("od-submit");
    expect($("error-detail").textContent).toContain('BAD_REQUEST: label "no good!"');
    expect(has("od-row")).toBe(false);
  });

  it("a coordinator without the App says so in the dialog", async () => {
    await start(signedIn(), {
      ws_github_overview: () => {
        throw { code: "GITHUB_NOT_CONFIGURED", message: "no GitHub App" };
      },
      ws_github_on_demand: () => ({ pools: [] }),
    });
    await click("tab-workspace");
    await click("od-open");
    expect($("od-unavailable").textContent).toContain("no GitHub App configured");
  });
});
