import { afterEach, describe, expect, it } from "vitest";
import { $, appState, has, member, settle, start, stop, waitFor } from "./helpers";

afterEach(() => stop());

const signedIn = () => appState({ status: "idle", account: member });

// What the coordinator answers (426) a client older than it serves; the
// banner shows these words, as `drover` prints them.
const UPGRADE =
  "this client (drover/0.1.0, protocol 1) is older than this coordinator (v0.2.0) serves (protocol 2): upgrade to drover 0.2.0";
const TOO_OLD =
  "this coordinator (v0.1.0, protocol 1) is older than this client (drover/0.2.0, protocol 2) speaks: upgrade the coordinator, or use drover 0.1.0";

describe("version banner", () => {
  it("a coordinator that refuses this app's version shows a banner with its words, not an error line", async () => {
    const { app } = await start(signedIn(), {
      list_devices: () => {
        throw { code: "UPGRADE_REQUIRED", message: UPGRADE };
      },
    });
    expect(has("version-banner")).toBe(false);
    app.show("account");
    await waitFor(() => expect(has("version-banner")).toBe(true));
    expect($("version-banner").dataset.code).toBe("UPGRADE_REQUIRED");
    expect($("version-banner").textContent).toContain("This app is too old for the coordinator");
    expect($("version-banner-message").textContent).toBe(UPGRADE);
    expect($("error").textContent).toBe("");
    // It stays while other commands come and go.
    app.show("machine");
    await settle();
    expect($("version-banner-message").textContent).toBe(UPGRADE);
  });

  it("a coordinator older than this app says so; another account clears it", async () => {
    const { app } = await start(signedIn(), {
      list_devices: () => {
        throw { code: "COORDINATOR_TOO_OLD", message: TOO_OLD };
      },
    });
    app.show("account");
    await waitFor(() => expect(has("version-banner")).toBe(true));
    expect($("version-banner").textContent).toContain("The coordinator is older than this app");
    expect($("version-banner-message").textContent).toBe(TOO_OLD);
    app.setState(appState());
    await settle();
    expect(has("version-banner")).toBe(false);
  });
});
