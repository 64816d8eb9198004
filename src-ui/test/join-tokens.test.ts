// Join tokens as a managed credential in the Workspace tab, and the link
// dialog naming the pool the coordinator says a join token joins.

import { afterEach, describe, expect, it } from "vitest";
import { $, $all, admin, appState, click, has, settle, start, stop, waitFor, wsPool } from "./helpers";
import type { JoinTokenSummary } from "../src/types";

afterEach(() => stop());

const token = (id: string, patch: Partial<JoinTokenSummary> = {}): JoinTokenSummary => ({
  id,
  runtimeId: "rt_ws",
  pool: "builders",
  ref: "ws:acme:builders",
  mintedBy: "usr_boss",
  mintedByEmail: "boss@acme.test",
  createdAt: Date.now() - 3_600_000,
  expiresAt: Date.now() + 82_800_000,
  lastUsedAt: null,
  uses: 0,
  ...patch,
});

describe("join tokens", () => {
  it("the workspace tab lists join tokens (pool, minter, use; never the token) and revokes one", async () => {
    let tokens = [token("jt_a", { uses: 3, lastUsedAt: Date.now() - 120_000 }), token("jt_b", { mintedBy: null, mintedByEmail: null })];
    const { called, app } = await start(appState({ status: "idle", account: admin }), {
      ws_list_pools: () => [wsPool],
      ws_join_tokens: () => tokens,
      ws_revoke_join_token: ({ id }) => (tokens = tokens.filter((t) => t.id !== id)),
    });
    app.show("workspace");
    await settle();
    const rows = $all("ws-join-token-row");
    expect(rows.map((r) => r.dataset.id)).toEqual(["jt_a", "jt_b"]);
    expect(rows[0].textContent).toContain("builders");
    expect(rows[0].textContent).toContain("boss@acme.test");
    expect(rows[0].textContent).toContain("3 runners joined");
    expect(rows[0].textContent).toContain("2 min ago");
    expect(rows[1].textContent).toContain("minted by unknown");
    expect($("ws-join-tokens").textContent).not.toContain("djt_");

    await click("ws-revoke-join-token", rows[0]);
    expect(called("ws_revoke_join_token")).toEqual([{ id: "jt_a" }]);
    expect($all("ws-join-token-row").map((r) => r.dataset.id)).toEqual(["jt_b"]);
    await click("ws-revoke-join-token", $all("ws-join-token-row")[0]);
    expect(has("ws-join-tokens-empty")).toBe(true);
  });

  it("minting a join token refreshes the list", async () => {
    let tokens: JoinTokenSummary[] = [];
    const { called } = await start(appState({ status: "idle", account: admin }), {
      ws_list_pools: () => [wsPool],
      ws_join_tokens: () => tokens,
      ws_join_token: () => {
        tokens = [token("jt_new")];
        return { id: "jt_new", token: "djt_x", runtime: wsPool, expiresAt: Date.now() + 86_400_000, link: "drover://join?url=u&ref=r&token=djt_x" };
      },
    });
    await click("tab-workspace");
    expect($all("ws-join-token-row")).toHaveLength(0);
    await click("ws-join-submit");
    await waitFor(() => expect($all("ws-join-token-row").map((r) => r.dataset.id)).toEqual(["jt_new"]));
    expect(called("ws_join_tokens").length).toBeGreaterThanOrEqual(2);
  });

  it("the link dialog names the coordinator's pool, and says when the link's text named another", async () => {
    const pending = { kind: "join" as const, coordinator: "https://c.example", pool: "ws:acme:prod", linkPool: "ws:acme:sandbox" };
    await start(appState({ pending }));
    expect($("link-pool").textContent).toBe("ws:acme:prod");
    expect($("link-pool-differs").textContent).toContain("ws:acme:sandbox");
    expect($("link-pool-differs").textContent).toContain("the coordinator says");
  });

  it("the link dialog says nothing more when the link's text and the coordinator agree", async () => {
    const pending = { kind: "join" as const, coordinator: "https://c.example", pool: "ws:acme:builders", linkPool: null };
    await start(appState({ pending }));
    expect($("link-pool").textContent).toBe("ws:acme:builders");
    expect(has("link-pool-differs")).toBe(false);
  });
});
