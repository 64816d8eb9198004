import { afterEach, describe, expect, it } from "vitest";
import { emit } from "@tauri-apps/api/event";
import {
  $,
  $all,
  admin,
  appState,
  choose,
  click,
  has,
  member,
  pool,
  settle,
  start,
  stop,
  type,
  waitFor,
  wsPool,
  wsRunner,
} from "./helpers";

afterEach(() => stop());

const signedIn = (patch = {}) => appState({ status: "idle", account: member, ...patch });

describe("settings window", () => {
  it("signed out: shows the sign-in form, and submitting signs in with the url and token", async () => {
    const { called } = await start(appState(), {
      sign_in: () => signedIn(),
    });
    expect($("status").textContent).toBe("Signed out");
    expect($("status").dataset.status).toBe("signedOut");
    expect(has("panel-account")).toBe(true);
    expect(has("sign-out")).toBe(false);
    type("signin-url", "https://drover.example.com");
    type("signin-token", "drv_abc");
    await click("signin-submit");
    expect(called("sign_in")).toEqual([{ url: "https://drover.example.com", token: "drv_abc" }]);
    await waitFor(() => expect(has("panel-machine")).toBe(true));
    expect($("status").textContent).toBe("Idle");
    await click("tab-account");
    expect($("signed-in-as").textContent).toBe("ann@acme.test");
    expect($("role").textContent).toBe("member");
    expect($("coordinator-url").textContent).toBe("https://drover.example.com");
  });

  it("signed out by the coordinator: says so and why above the sign-in form; a plain sign-out does not", async () => {
    await start(appState({ signedOut: "bob@acme.test revoked its token from the drover CLI at 2026-12-05 17:42 UTC" }));
    expect($("signed-out-notice").textContent).toContain("This device was signed out.");
    expect($("signed-out-notice").textContent).toContain("bob@acme.test revoked its token from the drover CLI at 2026-12-05 17:42 UTC.");
    expect(has("signin-url")).toBe(true);
    stop();
    await start(appState());
    expect(has("signed-out-notice")).toBe(false);
  });

  it("signed in: lists the devices, revokes one, signs out", async () => {
    let devices = [
      { id: "tok_1", name: "ann-laptop", createdAt: 1_700_000_000_000, lastUsedAt: Date.now() - 180_000, current: true },
      { id: "tok_2", name: "old-desktop", createdAt: 1_700_000_000_000, lastUsedAt: null, current: false },
    ];
    const { called, app } = await start(signedIn(), {
      list_devices: () => devices,
      revoke_device: ({ id }) => (devices = devices.filter((d) => d.id !== id)),
      sign_out: () => appState(),
    });
    app.show("account");
    await settle();
    const rows = $all("device-row");
    expect(rows.map((r) => r.dataset.id)).toEqual(["tok_1", "tok_2"]);
    expect(rows[0].textContent).toContain("3 min ago");
    await click("device-revoke", rows[1]);
    expect(called("revoke_device")).toEqual([{ id: "tok_2" }]);
    expect($all("device-row").map((r) => r.dataset.id)).toEqual(["tok_1"]);
    await click("sign-out");
    expect(called("sign_out")).toHaveLength(1);
    expect(has("signin-url")).toBe(true);
    expect($("status").textContent).toBe("Signed out");
    expect($("status").dataset.status).toBe("signedOut");
  });

  it("a pending link shows the dialog naming coordinator and pool; confirm calls confirm_link", async () => {
    const pending = { kind: "pair" as const, coordinator: "https://drover.example.com", pool: "self:usr_ann:default", linkPool: null };
    const { called } = await start(appState({ pending }), {
      confirm_link: () => signedIn({ pools: [pool] }),
    });
    expect($("link-coordinator").textContent).toBe("https://drover.example.com");
    expect($("link-pool").textContent).toBe("self:usr_ann:default");
    await click("link-confirm");
    expect(called("confirm_link")).toEqual([{}]);
    await waitFor(() => expect(has("link-dialog")).toBe(false));
  });

  it("cancel dismisses the link; a pending-link event opens the dialog", async () => {
    const { called } = await start(appState(), { dismiss_link: () => appState() });
    expect(has("link-dialog")).toBe(false);
    await emit("pending-link", { kind: "join", coordinator: "https://c.example", pool: "ws:acme:builders", linkPool: null });
    await waitFor(() => expect(has("link-dialog")).toBe(true));
    expect($("link-pool").textContent).toBe("ws:acme:builders");
    await click("link-cancel");
    expect(called("dismiss_link")).toHaveLength(1);
    expect(has("link-dialog")).toBe(false);
  });

  it("this machine: one row per pool with its runners; add and remove set the count ±1", async () => {
    const { called } = await start(signedIn({ pools: [pool] }), {
      set_runner_count: ({ count }) => signedIn({ pools: [{ ...pool, runners: count as number }] }),
    });
    expect(has("panel-machine")).toBe(true);
    const row = $all("pool-row")[0];
    expect(row.dataset.ref).toBe("self:usr_ann:laptop");
    expect($("runner-count", row).textContent).toBe("2");
    const runners = $all("runner-row", row);
    expect(runners.map((r) => r.dataset.id)).toEqual(["rn_a", "rn_b"]);
    // Runners by the name the coordinator and the tray use; no ref on show.
    expect($all("runner-name", row).map((r) => r.textContent)).toEqual(["ann-laptop-1", "ann-laptop-2"]);
    expect(row.textContent).not.toContain("self:usr_ann");
    expect(runners[0].textContent).toContain("job_7");
    expect(runners[1].textContent).toContain("idle");

    await click("runner-add", row);
    expect(called("set_runner_count")).toEqual([{ pool: "self:usr_ann:laptop", count: 3 }]);
    expect($("runner-count").textContent).toBe("3");
    await click("runner-remove");
    expect(called("set_runner_count")[1]).toEqual({ pool: "self:usr_ann:laptop", count: 2 });
    expect($("runner-count").textContent).toBe("2");
  });

  it("this machine: saves slots and labels, and the toggles call their commands", async () => {
    const { called } = await start(signedIn({ pools: [pool] }), {
      set_pool_settings: () => signedIn({ pools: [pool] }),
      set_paused: ({ paused }) => signedIn({ pools: [pool], paused: paused as boolean, status: "paused" }),
      set_settings: ({ settings }) => signedIn({ pools: [pool], settings: settings as never }),
    });
    expect(($("labels-input") as HTMLInputElement).value).toBe("gpu");
    type("slots-input", "4");
    type("labels-input", "gpu, os=linux");
    await click("pool-save");
    expect(called("set_pool_settings")).toEqual([{ pool: "self:usr_ann:laptop", slots: 4, labels: ["gpu", "os=linux"] }]);

    await click("pause-all");
    expect(called("set_paused")).toEqual([{ paused: true }]);
    expect($("status").textContent).toBe("Paused");
    const base = { autostart: false, pauseOnBattery: false, pauseOnMetered: true, quietHours: null, keepAwake: true };
    await click("pause-on-battery");
    expect(called("set_settings")).toEqual([{ settings: { ...base, pauseOnBattery: true } }]);
    expect(($("pause-on-battery") as HTMLInputElement).checked).toBe(true);
  });

  it("this machine: quiet hours, a metered network and staying awake are settings; held says why jobs wait", async () => {
    const { called } = await start(signedIn({ pools: [pool] }), {
      set_settings: ({ settings }) => signedIn({ pools: [pool], settings: settings as never }),
    });
    expect(($("quiet-from") as HTMLInputElement).disabled).toBe(true);
    await click("quiet-hours");
    const base = { autostart: false, pauseOnBattery: false, pauseOnMetered: true, keepAwake: true };
    expect(called("set_settings")).toEqual([{ settings: { ...base, quietHours: { from: "22:00", to: "07:00" } } }]);
    const to = $("quiet-to") as HTMLInputElement;
    expect(to.value).toBe("07:00");
    to.value = "06:30";
    to.dispatchEvent(new Event("change"));
    await settle();
    expect(called("set_settings")[1]).toEqual({ settings: { ...base, quietHours: { from: "22:00", to: "06:30" } } });
    await click("pause-on-metered");
    await click("keep-awake");
    expect(called("set_settings").slice(2)).toEqual([
      { settings: { ...base, pauseOnMetered: false, quietHours: { from: "22:00", to: "06:30" } } },
      { settings: { ...base, pauseOnMetered: false, keepAwake: false, quietHours: { from: "22:00", to: "06:30" } } },
    ]);
    expect($all("held-notice")).toHaveLength(0);
  });

  it("this machine: paused on its own says why, and its runners show paused", async () => {
    const live = [{ id: "rn_1", name: "laptop-1", online: true, draining: false, currentJobs: [] }];
    await start(signedIn({ pools: [{ ...pool, live }], status: "paused", held: "On a metered network", metered: true }));
    expect($("held-notice").textContent).toBe("On a metered network: new jobs wait; running jobs go on.");
    expect($("runner-row").textContent).toContain("paused");
    expect(($("pause-all") as HTMLInputElement).checked).toBe(false);
  });

  it("this machine: a workspace pool refused for want of a sandbox says why; the opt-out warns, then lends it unsandboxed", async () => {
    const why = "not lending this machine to builders: its jobs are other people's, and they would run unsandboxed, as you (bubblewrap (bwrap) is not installed)";
    const ws = { ...pool, ref: "ws:acme:builders", name: "builders", kind: "workspace" as const, runners: 1, live: [], sandboxed: null, refused: why };
    const lent = { ...ws, allowUnsandboxed: true, refused: null, sandboxed: false, live: [{ id: "rn_w", online: true, draining: false, currentJobs: [] }] };
    const { called } = await start(signedIn({ pools: [pool, ws] }), {
      set_allow_unsandboxed: ({ allow }) => signedIn({ pools: [pool, allow ? lent : ws] }),
    });
    const [mine, theirs] = $all("pool-row");
    expect($all("allow-unsandboxed", mine)).toHaveLength(0);
    expect($all("pool-sandbox", mine)).toHaveLength(0);
    expect($("pool-refused", theirs).textContent).toBe(why);
    expect($all("pool-sandbox", theirs)).toHaveLength(0);
    expect(($("allow-unsandboxed", theirs) as HTMLInputElement).checked).toBe(false);
    expect($("unsandboxed-warning", theirs).textContent).toContain("they run as you: they can read your files, reach your keychain");

    await click("allow-unsandboxed", theirs);
    expect(called("set_allow_unsandboxed")).toEqual([{ pool: "ws:acme:builders", allow: true }]);
    const row = $all("pool-row")[1];
    expect($all("pool-refused", row)).toHaveLength(0);
    expect($("pool-sandbox", row).textContent).toBe("unsandboxed");
    expect(($("allow-unsandboxed", row) as HTMLInputElement).checked).toBe(true);
    stop();

    await start(signedIn({ pools: [{ ...ws, refused: null, sandboxed: true }] }));
    expect($("pool-sandbox").textContent).toBe("sandboxed");
  });

  it("workspace roster: online, paused by its owner, or offline, in words", async () => {
    const paused = { ...wsRunner, id: "rn_ws2", name: "ann-laptop-1", paused: true };
    const gone = { ...wsRunner, id: "rn_ws3", name: "old-box", online: false };
    await start(signedIn({ account: admin }), { ws_roster: () => [wsRunner, paused, gone] });
    await click("tab-workspace");
    expect($all("ws-runner-state").map((e) => e.textContent)).toEqual(["online", "paused", "offline"]);
    expect($all("ws-runner-row")[1].textContent).toContain("paused by its owner");
  });

  it("workspace roster: a runner that announced sandbox=none is marked unsandboxed", async () => {
    const sandboxed = { ...wsRunner, capabilities: ["os=linux", "sandbox=bwrap"] };
    const bare = { ...wsRunner, id: "rn_ws2", name: "laptop-1", capabilities: ["os=linux", "sandbox=none"] };
    const claimed = { ...wsRunner, id: "rn_ws3", name: "liar", capabilities: ["sandbox=bwrap", "sandbox=none"] };
    await start(signedIn({ account: admin }), { ws_roster: () => [sandboxed, bare, claimed, wsRunner] });
    await click("tab-workspace");
    const marked = $all("ws-runner-row")
      .filter((row) => $all("ws-runner-unsandboxed", row).length)
      .map((row) => row.dataset.id);
    expect(marked).toEqual(["rn_ws2", "rn_ws3"]);
    expect($all("ws-runner-unsandboxed")[0].textContent).toBe("unsandboxed");
  });

  it("the workspace tab is absent for members and present for admins", async () => {
    await start(signedIn());
    expect(has("tab-account") && has("tab-machine") && has("tab-pools")).toBe(true);
    expect(has("tab-workspace")).toBe(false);
    stop();
    await start(signedIn({ account: admin }));
    await click("tab-workspace");
    expect(has("panel-workspace")).toBe(true);
  });

  it("pairing a workspace runner shows its token once and the command to copy", async () => {
    const { called } = await start(signedIn({ account: admin }), {
      ws_list_pools: () => [wsPool],
      ws_roster: () => [],
      ws_pair_runner: () => ({ runner: wsRunner, token: "drt_secret", command: "drover runner --url https://drover.example.com --token drt_secret" }),
      ws_revoke_runner: () => null,
    });
    await click("tab-workspace");
    expect($all("ws-pool-row").map((r) => r.dataset.id)).toEqual(["rt_ws"]);
    choose("ws-pair-pool", "rt_ws");
    type("ws-pair-name", "build-box");
    await click("ws-pair-submit");
    expect(called("ws_pair_runner")).toEqual([{ pool: "rt_ws", name: "build-box" }]);
    expect($("ws-pair-token").textContent).toBe("drt_secret");
    expect($("ws-pair-command").textContent).toBe("drover runner --url https://drover.example.com --token drt_secret");
    expect(has("ws-pair-copy")).toBe(true);
    await click("ws-pair-copy"); // no clipboard in jsdom: fails quietly

    const row = $all("ws-runner-row")[0];
    expect(row.dataset.id).toBe("rn_ws1");
    expect(row.querySelector(".badge-online")).not.toBeNull();
    expect(row.textContent).toContain("docker");
    await click("ws-revoke", row);
    expect(called("ws_revoke_runner")).toEqual([{ id: "rn_ws1" }]);
    expect($all("ws-runner-row")).toHaveLength(0);
  });

  it("workspace: join token, usage and a budget in minutes", async () => {
    const usage = { workspace: "acme", month: "2026-12", monthlyMinutes: 60, chargedMs: 90_000, ownPaysMs: 0, jobsCharged: 2, jobsOwnPays: 0, resetsAt: 1798761600000 };
    const { called } = await start(signedIn({ account: admin }), {
      ws_list_pools: () => [wsPool],
      ws_usage: () => usage,
      ws_set_budget: ({ monthlyMinutes }) => ({ ...usage, monthlyMinutes }),
      ws_join_token: () => ({ token: "djt_x", runtime: wsPool, expiresAt: Date.now() + 86_400_000, link: "drover://join?url=u&ref=r&token=djt_x" }),
    });
    await click("tab-workspace");
    expect(($("ws-budget-input") as HTMLInputElement).value).toBe("60");
    expect($("ws-usage").textContent).toContain("2 jobs");
    type("ws-budget-input", "90");
    await click("ws-budget-save");
    type("ws-budget-input", "");
    await click("ws-budget-save");
    expect(called("ws_set_budget")).toEqual([{ monthlyMinutes: 90 }, { monthlyMinutes: null }]);
    expect($("ws-usage").textContent).toContain("no limit");

    await click("ws-join-submit");
    expect(called("ws_join_token")[0]).toMatchObject({ pool: "rt_ws" });
    expect($("ws-join-token").textContent).toBe("djt_x");
    expect($("ws-join-link").textContent).toBe("drover://join?url=u&ref=r&token=djt_x");
  });

  it("workspace: invite, re-role and remove members; usage by month; the audit log, older pages", async () => {
    const boss = { id: "usr_boss", email: "boss@acme.test", role: "admin", status: "active", createdAt: 1, tokens: [{ id: "tok_1", name: "laptop", createdAt: 1, lastUsedAt: Date.now() }] };
    const bob = { id: "usr_bob", email: "bob@acme.test", role: "member", status: "invited", createdAt: 2, tokens: [] };
    const event = (id: string, action: string) => ({ id, at: Date.now(), actor: { kind: "member", id: "usr_boss", email: "boss@acme.test" }, surface: "desktop", action, target: "usr_bob", detail: {} });
    const { called } = await start(signedIn({ account: admin }), {
      ws_members: () => [boss],
      ws_invite_member: ({ email }) => ({ member: { ...bob, email }, code: "dpc_x", link: "drover://pair?url=u&code=dpc_x", expiresAt: Date.now() + 7 * 86_400_000 }),
      ws_update_member: ({ id, role }) => ({ ...bob, id, role }),
      ws_remove_member: () => null,
      ws_usage_report: ({ month, by }) => ({ month: month ?? "2026-12", by: by ?? "pool", lines: [{ id: "rt_ws", name: "ws:acme:builders", runnerMs: 90_000, chargedMs: 90_000, attempts: 3 }] }),
      ws_audit: ({ before }) =>
        before ? { events: [event("1", "runner.paired")], nextBefore: null } : { events: [event("3", "member.invited"), event("2", "budget.set")], nextBefore: "2" },
    });
    await click("tab-workspace");
    const me = $all("ws-member-row")[0];
    expect(me.dataset.email).toBe("boss@acme.test");
    expect((me.querySelector('[data-testid="ws-member-remove"]') as HTMLButtonElement).disabled).toBe(true);

    type("ws-invite-email", "bob@acme.test");
    await click("ws-invite-submit");
    expect(called("ws_invite_member")).toEqual([{ email: "bob@acme.test", role: "member" }]);
    expect($("ws-invite-link").textContent).toBe("drover://pair?url=u&code=dpc_x");
    const row = $all("ws-member-row").find((r) => r.dataset.email === "bob@acme.test")!;
    expect(row.querySelector('[data-testid="ws-member-status"]')!.textContent).toBe("invited");
    await click("ws-member-role-toggle", row);
    expect(called("ws_update_member")).toEqual([{ id: "usr_bob", role: "admin" }]);
    const again = $all("ws-member-row").find((r) => r.dataset.email === "bob@acme.test")!;
    expect(again.querySelector('[data-testid="ws-member-role"]')!.textContent).toBe("admin");
    await click("ws-member-remove", again);
    expect(called("ws_remove_member")).toEqual([{ id: "usr_bob" }]);
    expect($all("ws-member-row").map((r) => r.dataset.email)).toEqual(["boss@acme.test"]);

    // By pool: the pool's name and its badge, the ref only as a tooltip.
    const line = $all("ws-report-row")[0];
    expect(line.textContent).toContain("buildersworkspace");
    expect(line.querySelector("[title]")!.getAttribute("title")).toBe("ws:acme:builders");
    type("ws-report-month", "2026-11");
    choose("ws-report-by", "member");
    await click("ws-report-submit");
    expect(called("ws_usage_report").slice(-1)[0]).toEqual({ month: "2026-11", by: "member" });

    expect($all("ws-audit-row").map((r) => r.dataset.action)).toEqual(["member.invited", "budget.set"]);
    await click("ws-audit-more");
    expect(called("ws_audit").slice(-1)[0]).toEqual({ before: "2" });
    expect($all("ws-audit-row").map((r) => r.dataset.action)).toEqual(["member.invited", "budget.set", "runner.paired"]);
    expect(has("ws-audit-more")).toBe(false);
  });

  it("my pools: create a pool, list jobs, show a job's log", async () => {
    const job = { id: "job_1", state: "failed", runtime: "self:usr_ann:laptop", runtimeId: "rt_1", submittedBy: "usr_ann", command: ["false"], requires: [], priority: 0, attempt: 1, maxAttempts: 1, exitCode: 1, cancelRequested: false, createdAt: 1_700_000_000_000 };
    const { called } = await start(signedIn(), {
      create_my_pool: () => signedIn(),
      list_my_pools: () => [{ ...wsPool, id: "rt_1", name: "Laptop builds", ref: "self:usr_ann:laptop" }],
      list_jobs: () => [job],
      job_logs: () => "it failed\n",
    });
    await click("tab-pools");
    expect($all("my-pool-row").map((r) => r.dataset.ref)).toEqual(["self:usr_ann:laptop"]);
    type("create-pool-name", "gpu-box");
    await click("create-pool-submit");
    expect(called("create_my_pool")).toEqual([{ name: "gpu-box" }]);
    const row = $all("job-row")[0];
    expect(row.dataset.id).toBe("job_1");
    expect(row.textContent).toContain("failed");
    // Headers over the columns; the pool by its name, not its ref.
    expect([...document.querySelectorAll("[data-testid=jobs] th")].map((t) => t.textContent)).toEqual(["Job", "Pool", "State", "Exit", "Command", "Submitted"]);
    expect([...row.querySelectorAll("td")].map((t) => t.textContent).slice(1, 4)).toEqual(["Laptop builds", "failed", "1"]);
    expect(row.textContent).not.toContain("self:usr_ann");
    // The pool row: its name and a badge, the ref only as a tooltip.
    const mine = $all("my-pool-row")[0];
    expect(mine.textContent).toContain("Laptop buildspersonal");
    expect(mine.textContent).not.toContain("self:usr_ann");
    await click("job-row");
    expect(called("job_logs")).toEqual([{ id: "job_1" }]);
    expect($("job-logs").tagName).toBe("PRE");
    expect($("job-logs").textContent).toBe("it failed\n");
    const before = called("list_jobs").length;
    await click("jobs-refresh");
    expect(called("list_jobs").length).toBe(before + 1);
  });

  it("an error from a command shows in the error line as a sentence, its CODE: message behind Details", async () => {
    let tries = 0;
    await start(appState(), {
      sign_in: () => {
        if (tries++ === 0) throw { code: "UNAUTHORIZED", message: "the token is not valid" };
        return signedIn();
      },
    });
    expect($("error").textContent).toBe("");
    type("signin-url", "https://drover.example.com");
    type("signin-token", "drv_bad");
    await click("signin-submit");
    expect($("error").textContent).toBe("The token is not valid.");
    expect($("error-detail").textContent).toBe("UNAUTHORIZED: the token is not valid");
    // The next command that succeeds clears it.
    await click("signin-submit");
    expect($("error").textContent).toBe("");
    expect(has("panel-machine")).toBe(true);
  });

  it("a bare-string rejection shows as INTERNAL", async () => {
    await start(signedIn({ pools: [pool] }), {
      set_runner_count: () => {
        throw "keychain locked";
      },
    });
    await click("runner-add");
    expect($("error").textContent).toContain("Something went wrong in the app.");
    expect($("error-detail").textContent).toBe("INTERNAL: keychain locked");
  });

  it("an unreachable coordinator is said for people, and the error goes once the runners are back online", async () => {
    await start(signedIn({ pools: [pool] }), {
      set_runner_count: () => {
        throw { code: "UNREACHABLE", message: "cannot reach the coordinator: error sending request for url (https://drover.example.com/v1/me)" };
      },
    });
    await click("runner-add");
    expect($("error").textContent).toBe("Can't reach drover.example.com — retrying. Your runners keep their jobs.");
    expect($("error-detail").textContent).toContain("UNREACHABLE: cannot reach the coordinator");
    await emit("state-changed", signedIn({ pools: [pool], status: "offline" }));
    await settle();
    expect($("error").textContent).toContain("Can't reach");
    await emit("state-changed", signedIn({ pools: [pool], status: "idle" }));
    await waitFor(() => expect($("error").textContent).toBe(""));
  });

  it("a link refused before anything is asked says why, and Close dismisses it", async () => {
    const why = "this device is already signed in as ann@acme.test on https://c.example: to pair it with this link, sign out first (Account tab)";
    const { called } = await start(signedIn({ linkRefused: why }), { dismiss_link: () => signedIn() });
    expect($("link-refused-message").textContent).toBe(
      "This device is already signed in as ann@acme.test on https://c.example: to pair it with this link, sign out first (Account tab).",
    );
    expect(has("link-dialog")).toBe(false);
    await click("link-refused-close");
    expect(called("dismiss_link")).toHaveLength(1);
    expect(has("link-refused")).toBe(false);
  });

  it("an activity entry says what happened in words, with the error behind a disclosure", async () => {
    const activity = [
      { at: Date.now(), kind: "unreachable" as const, message: "Can't reach ci.example.com — retrying. Your runners keep their jobs.", detail: "cannot reach the coordinator: connection refused" },
      { at: Date.now(), kind: "info" as const, message: "laptop-1 stopped: ci.example.com no longer accepts it." },
    ];
    await start(signedIn({ activity }));
    const [first, second] = $all("activity-item");
    expect(first.textContent).toContain("Can't reach ci.example.com");
    expect($("activity-detail", first).textContent).toBe("Detailscannot reach the coordinator: connection refused");
    expect(($("activity-detail", first) as HTMLDetailsElement).open).toBe(false);
    expect($all("activity-detail", second)).toHaveLength(0);
  });

  it("a state-changed event re-renders, keeping what is being typed", async () => {
    await start(appState());
    type("signin-url", "https://half-typed");
    ($("signin-url") as HTMLInputElement).focus();
    await emit("state-changed", appState({ activity: [{ at: Date.now() - 120_000, kind: "info", message: "hello" }] }));
    await waitFor(() => expect($all("activity-item")).toHaveLength(1));
    expect($all("activity-item")[0].textContent).toContain("hello");
    expect($all("activity-item")[0].textContent).toContain("2 min ago");
    expect(($("signin-url") as HTMLInputElement).value).toBe("https://half-typed");
    expect(document.activeElement).toBe($("signin-url"));

    await emit("state-changed", signedIn({ pools: [pool], status: "busy" }));
    await waitFor(() => expect($("status").textContent).toBe("Busy"));
    expect($all("pool-row")).toHaveLength(1);
  });

  it("a value set without an input event (as a script would) survives a re-render and is submitted", async () => {
    const { called } = await start(appState(), { sign_in: () => signedIn() });
    ($("signin-url") as HTMLInputElement).value = "https://set-by-script";
    await emit("state-changed", appState({ activity: [{ at: Date.now(), kind: "info", message: "tick" }] }));
    await waitFor(() => expect($all("activity-item")).toHaveLength(1));
    expect(($("signin-url") as HTMLInputElement).value).toBe("https://set-by-script");
    ($("signin-token") as HTMLInputElement).value = "drv_script";
    await click("signin-submit");
    expect(called("sign_in")).toEqual([{ url: "https://set-by-script", token: "drv_script" }]);
  });

  it("a saved field shows the saved value again, not what was typed", async () => {
    await start(signedIn({ pools: [pool] }), {
      set_pool_settings: ({ slots, labels }) => signedIn({ pools: [{ ...pool, slots: slots as number, labels: labels as string[] }] }),
      set_runner_count: () => signedIn({ pools: [{ ...pool, slots: 8 }] }),
    });
    type("slots-input", "3");
    await click("pool-save");
    expect(($("slots-input") as HTMLInputElement).value).toBe("3");
    // Saved elsewhere (the tray, another window): the field follows.
    await click("runner-add");
    expect(($("slots-input") as HTMLInputElement).value).toBe("8");
  });
});
