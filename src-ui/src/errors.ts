// Errors for people: what happened and what to do, in a sentence; the code
// and the coordinator's own words stay behind a disclosure.

import type { ApiError } from "./types";

/** The host of a coordinator URL, for sentences ("ci.example.com"). */
function hostOf(url: string | undefined): string {
  if (!url) return "the coordinator";
  try {
    return new URL(url).host || url;
  } catch {
    return url;
  }
}

/** The sentence shown for `e`; `coordinator` is the signed-in account's URL. */
export function sentence(e: ApiError, coordinator?: string): string {
  const host = hostOf(coordinator);
  switch (e.code) {
    case "UNREACHABLE":
      return `Can't reach ${host} — retrying. Your runners keep their jobs.`;
    case "TLS":
      return `Can't talk securely to ${host}: its certificate is not trusted here. Check the URL, or ask your admin for the CA file.`;
    case "NOT_DROVER":
      return "That address is not a Drover coordinator. Check the URL.";
    case "FORBIDDEN":
      return "Your role does not allow this. Ask a workspace admin.";
    case "NOT_SIGNED_IN":
      return "Sign in first (Account tab).";
    case "RATE_LIMITED":
    case "OVERLOADED":
      return `${host} is busy — try again in a moment.`;
    case "KEYCHAIN":
      return "The system keychain refused: unlock it, then try again.";
    case "INTERNAL":
      return "Something went wrong in the app. Try again; if it keeps happening, the details help a bug report.";
    default: {
      // Refusals with their own words (bad input, not found, budgets): those words.
      const m = e.message.trim();
      return m ? m.charAt(0).toUpperCase() + m.slice(1) + (/[.!?]$/.test(m) ? "" : ".") : e.code;
    }
  }
}

/** Errors whose cause is the connection: they clear once runners are online again. */
export function isConnection(e: ApiError): boolean {
  return e.code === "UNREACHABLE";
}
