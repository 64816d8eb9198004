import { describe, expect, it, vi } from "vitest";
import { duration, h, refreshTimes, relativeTime, splitList, unsandboxed, when } from "../src/h";

describe("helpers", () => {
  it("builds elements with test ids, listeners and children", () => {
    let clicked = 0;
    const el = h("button", { testid: "go", class: "primary", disabled: false, onclick: () => clicked++ }, "Go ", 1, null, ["!"]);
    expect(el.dataset.testid).toBe("go");
    expect(el.className).toBe("primary");
    expect(el.disabled).toBe(false);
    expect(el.textContent).toBe("Go 1!");
    el.click();
    expect(clicked).toBe(1);
  });

  it("says times relative to now", () => {
    const now = 1_800_000_000_000;
    expect(relativeTime(now - 10_000, now)).toBe("just now");
    expect(relativeTime(now - 3 * 60_000, now)).toBe("3 min ago");
    expect(relativeTime(now - 2 * 3_600_000, now)).toBe("2 h ago");
    expect(relativeTime(now - 86_400_000, now)).toBe("1 day ago");
    expect(relativeTime(now - 5 * 86_400_000, now)).toBe("5 days ago");
    expect(relativeTime(now + 23 * 3_600_000, now)).toBe("in 23 h");
  });

  it("formats durations and lists", () => {
    expect(duration(40_000)).toBe("40 s");
    expect(duration(12 * 60_000)).toBe("12 min");
    expect(duration(65 * 60_000)).toBe("1 h 05 min");
    expect(splitList(" gpu, os=linux ,, ")).toEqual(["gpu", "os=linux"]);
  });

  it("keeps relative times true without a re-render", () => {
    vi.useFakeTimers();
    try {
      vi.setSystemTime(1_800_000_000_000);
      const root = h("div", null, when(Date.now() - 5_000));
      expect(root.textContent).toBe("just now");
      vi.setSystemTime(1_800_000_000_000 + 5 * 60_000);
      refreshTimes(root);
      expect(root.textContent).toBe("5 min ago");
    } finally {
      vi.useRealTimers();
    }
  });

  it("a runner is unsandboxed when it announced sandbox=none, whatever a label claims", () => {
    expect(unsandboxed(["os=linux", "sandbox=none"])).toBe(true);
    expect(unsandboxed(["sandbox=bwrap", "sandbox=none"])).toBe(true);
    expect(unsandboxed(["os=linux", "sandbox=bwrap"])).toBe(false);
    expect(unsandboxed(["os=linux"])).toBe(false);
  });
});
