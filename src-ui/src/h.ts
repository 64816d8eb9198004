// A tiny DOM builder and the formatting helpers the views share.

export type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (ev: Event) => void;
export type Attrs = { [key: string]: unknown; testid?: string };

/** Properties set as DOM properties rather than attributes. */
const PROPS = new Set(["value", "checked", "disabled", "selected", "readOnly"]);

/**
 * `h("button", { testid: "x", class: "primary", onclick: fn }, "Save")`.
 * `testid` becomes `data-testid`; `on…` functions become listeners; `false`,
 * `null` and `undefined` attributes and children are skipped.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "testid") el.dataset.testid = String(value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value as Handler);
    } else if (PROPS.has(key)) (el as unknown as Record<string, unknown>)[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** "just now", "3 min ago", "in 2 h", "5 days ago"; unix milliseconds. */
export function relativeTime(ms: number, now = Date.now()): string {
  const diff = Math.round((now - ms) / 1000);
  const abs = Math.abs(diff);
  if (abs < 45) return "just now";
  let text: string;
  if (abs < 3600) text = `${Math.max(1, Math.round(abs / 60))} min`;
  else if (abs < 86400) text = `${Math.round(abs / 3600)} h`;
  else if (abs < 86400 * 30) {
    const days = Math.round(abs / 86400);
    text = days === 1 ? "1 day" : `${days} days`;
  } else return new Date(ms).toLocaleDateString();
  return diff > 0 ? `${text} ago` : `in ${text}`;
}

/**
 * A `<time>` saying how long ago (or until) `ms`, with the full date as its
 * tooltip; `refreshTimes` keeps its text true without a re-render.
 */
export function when(ms: number) {
  const date = new Date(ms);
  return h("time", { "data-at": ms, datetime: date.toISOString(), title: date.toLocaleString() }, relativeTime(ms));
}


export function refreshTimes(root: ParentNode) {
  for (const t of root.querySelectorAll<HTMLElement>("time[data-at]")) {
    const text = relativeTime(Number(t.dataset.at));
    if (t.textContent !== text) t.textContent = text;
  }
}

/** "1 h 05 min", "12 min", "40 s". */
export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

/** A runner announced that its jobs run unsandboxed (`sandbox=none`; a
 * `sandbox=` label claiming otherwise does not hide it). */
export const unsandboxed = (capabilities: string[]) => capabilities.includes("sandbox=none");

/** "a, b ,c" → ["a", "b", "c"]. */
export const splitList = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** Copies text, quietly doing nothing where the clipboard is refused. */
export function copy(text: string, button: HTMLButtonElement) {
  void navigator.clipboard?.writeText(text).then(
    () => {
      button.textContent = "Copied";
      setTimeout(() => (button.textContent = "Copy"), 1500);
    },
    () => {},
  );
}

/**
 * A pool ref (`ws:<workspace>:<name>`, `self:<subject>:<name>`) as a person
 * reads it: the name and a personal/workspace badge, the ref as a tooltip.
 */
export function poolLabel(ref: string) {
  const m = /^(ws|self):[^:]+:(.+)$/.exec(ref);
  if (!m) return h("strong", null, ref);
  const kind = m[1] === "ws" ? "workspace" : "personal";
  return h("span", { title: ref }, h("strong", null, m[2]), h("span", { class: `tag tag-${kind}` }, kind));
}

/** `job_06h4he5te6e87n370tjg` → `job_06h4he5t…`: enough to tell rows apart (the whole id in a tooltip). */
export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 12)}…` : id;
}
