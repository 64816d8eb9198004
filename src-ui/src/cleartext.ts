// Plain http:// to another machine: every token the app sends (its device
// token, its runners' credentials) and every job's env and log would cross
// the network in clear text. The same rule as the CLI's warning
// (runner-core's `cleartext_warning`): https:// and loopback are fine.

/** True for an `http://` URL whose host is not loopback (`localhost`, `*.localhost`, 127.0.0.0/8, `::1`). */
export function isCleartext(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== "http:") return false;
  const host = parsed.hostname.toLowerCase().replace(/\.$/, "");
  if (host === "[::1]" || host === "localhost" || host.endsWith(".localhost")) return false;
  // The URL parser writes IPv4 hosts in dotted decimal (http://127.1 → 127.0.0.1).
  return !/^127\.\d+\.\d+\.\d+$/.test(host);
}

/** The coordinators among `urls` reached in clear text, each once. */
export function cleartextOf(urls: (string | null | undefined)[]): string[] {
  return [...new Set(urls.filter((u): u is string => !!u && isCleartext(u)))];
}
