import { afterEach, describe, expect, it } from "vitest";
import { clearMocks, mockIPC } from "@tauri-apps/api/mocks";
import * as api from "../src/api";
import { appState } from "./helpers";

afterEach(() => clearMocks());

describe("api", () => {
  it("passes camelCase arguments and returns the command's answer", async () => {
    const seen: unknown[] = [];
    mockIPC((cmd, args) => {
      seen.push([cmd, args]);
      return appState({ status: "idle" });
    });
    const s = await api.signIn("https://c.example", "drv_secret");
    expect(s.status).toBe("idle");
    const settings = { autostart: true, pauseOnBattery: false, pauseOnMetered: true, quietHours: { from: "22:00", to: "07:00" }, keepAwake: true };
    await api.setSettings(settings);
    await api.wsSetBudget(null);
    expect(seen).toEqual([
      ["sign_in", { url: "https://c.example", token: "drv_secret" }],
      ["set_settings", { settings }],
      ["ws_set_budget", { monthlyMinutes: null }],
    ]);
  });

  it("keeps an ApiError rejection as {code, message}", async () => {
    mockIPC(() => {
      throw { code: "PAIRING_CODE_USED", message: "this pairing code was already used" };
    });
    await expect(api.confirmLink()).rejects.toEqual({
      code: "PAIRING_CODE_USED",
      message: "this pairing code was already used",
    });
  });

  it("turns a bare-string rejection into INTERNAL", async () => {
    mockIPC(() => {
      throw "something broke";
    });
    await expect(api.getState()).rejects.toEqual({ code: "INTERNAL", message: "something broke" });
  });

  it("turns an Error or an odd object into INTERNAL", async () => {
    mockIPC(() => {
      throw new Error("boom");
    });
    await expect(api.listJobs()).rejects.toEqual({ code: "INTERNAL", message: "boom" });
    mockIPC(() => {
      throw { reason: 42 };
    });
    const e = await api.wsUsage().catch((e: unknown) => e);
    expect(e).toMatchObject({ code: "INTERNAL" });
    expect(api.isApiError(e)).toBe(true);
  });
});
