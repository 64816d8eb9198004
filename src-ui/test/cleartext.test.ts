// Plain http:// to another machine: the link dialog warns before anything is
// sent, and a notice stays on every tab while the app talks to it.

import { afterEach, describe, expect, it } from "vitest";
import { isCleartext } from "../src/cleartext";
import { $, appState, click, has, member, pool, start, stop } from "./helpers";

afterEach(() => stop());

describe("cleartext coordinators", () => {
  it("http:// to another machine is cleartext; https:// and loopback are not", () => {
    for (const url of ["http://ci.example.com", "http://ci.example.com:7700/drover", "http://10.0.0.2:7700", "http://[fd00::1]:80", "HTTP://Ci.Example.Com"]) {
      expect(isCleartext(url), url).toBe(true);
    }
    for (const url of [
      "https://ci.example.com",
      "http://127.0.0.1:7700",
      "http://127.1.2.3",
      "http://127.1",
      "http://localhost:7700",
      "http://drover.localhost",
      "http://[::1]:7700",
      "not a url",
    ]) {
      expect(isCleartext(url), url).toBe(false);
    }
  });

  it("the pairing dialog warns that the device token would travel in clear text", async () => {
    const pending = { kind: "pair" as const, coordinator: "http://ci.example.com:7700", pool: "your personal pool", linkPool: null };
    await start(appState({ pending }));
    expect($("link-cleartext").textContent).toContain("clear text");
    expect($("link-cleartext").textContent).toContain("this device's token");
    expect(has("link-confirm")).toBe(true);
  });

  it("the join dialog warns too; an https:// or loopback link gets no warning", async () => {
    const join = { kind: "join" as const, coordinator: "http://10.0.0.2:7700", pool: "ws:acme:builders", linkPool: null };
    await start(appState({ pending: join }));
    expect($("link-cleartext").textContent).toContain("runner credentials");
    stop();
    await start(appState({ pending: { ...join, coordinator: "https://ci.example.com" } }));
    expect(has("link-dialog")).toBe(true);
    expect(has("link-cleartext")).toBe(false);
    stop();
    await start(appState({ pending: { ...join, coordinator: "http://127.0.0.1:7700" } }));
    expect(has("link-cleartext")).toBe(false);
  });

  it("signed in over plain http, a notice stays on every tab; over https there is none", async () => {
    const insecure = { ...member, coordinator: "http://ci.example.com" };
    await start(appState({ status: "idle", account: insecure, pools: [{ ...pool, coordinator: insecure.coordinator }] }));
    const notice = () => $("cleartext-notice").textContent ?? "";
    expect(notice()).toContain("http://ci.example.com");
    expect(notice()).toContain("clear text");
    // Once, though the account and the pool name the same coordinator.
    expect(notice().split("http://ci.example.com").length).toBe(2);
    for (const tab of ["machine", "pools", "account"]) {
      await click(`tab-${tab}`);
      expect(has("cleartext-notice"), tab).toBe(true);
    }
    stop();
    await start(appState({ status: "idle", account: member, pools: [pool] }));
    expect(has("cleartext-notice")).toBe(false);
  });

  it("a pool lent over plain http without an account gets the notice too", async () => {
    const lent = { ...pool, coordinator: "http://10.0.0.2:7700", kind: "workspace" as const };
    await start(appState({ status: "idle", pools: [lent] }));
    expect($("cleartext-notice").textContent).toContain("http://10.0.0.2:7700");
  });
});
