// Workspace (admins), continued: members (invite, change a role, remove),
// usage by month, and the audit log.

import type { App } from "../app";
import * as api from "../api";
import { duration, h, poolLabel, when } from "../h";
import type { AuditEvent, Member } from "../types";

export function membersSection(app: App) {
  const { members, invite } = app.remote;
  const me = app.state.account?.subject;

  const submit = (ev: Event) => {
    ev.preventDefault();
    const email = app.value("ws-invite-email");
    if (!email) return app.fail("INVALID_INPUT", "enter the email to invite");
    const role = (app.value("ws-invite-role") || "member") as Member["role"];
    void app.act("ws-invite", () => api.wsInviteMember(email, role), (result) => {
      app.forget("ws-invite-email");
      app.remote.invite = result;
      app.remote.members = [...(members ?? []).filter((m) => m.id !== result.member.id), result.member];
    });
  };
  const replace = (m: Member) => {
    app.remote.members = (app.remote.members ?? []).map((x) => (x.id === m.id ? m : x));
  };

  return [
    h("h3", null, "Members"),
    h(
      "table",
      { testid: "ws-members", class: "card roster" },
      h(
        "tbody",
        null,
        (members ?? []).map((m) => {
          const used = Math.max(0, ...m.tokens.map((t) => t.lastUsedAt ?? 0));
          const other: Member["role"] = m.role === "admin" ? "member" : "admin";
          return h(
            "tr",
            { testid: "ws-member-row", "data-id": m.id, "data-email": m.email },
            h("td", null, h("strong", null, m.email), m.id === me ? h("span", { class: "tag" }, "you") : null),
            h("td", { class: "small" }, h("span", { testid: "ws-member-role" }, m.role)),
            h("td", { class: "small" }, h("span", { testid: "ws-member-status", class: `tag tag-${m.status}` }, m.status)),
            h("td", { class: "small muted" }, `${m.tokens.length} ${m.tokens.length === 1 ? "token" : "tokens"}`, used ? [" · used ", when(used)] : null),
            h(
              "td",
              { class: "nowrap" },
              h("button", { testid: "ws-member-role-toggle", class: "small", disabled: app.busy.has(`member:${m.id}`), onclick: () => app.act(`member:${m.id}`, () => api.wsUpdateMember(m.id, other), replace) }, `Make ${other}`),
              h(
                "button",
                {
                  testid: "ws-member-remove",
                  class: "small danger",
                  disabled: m.id === me || app.busy.has(`member:${m.id}`),
                  title: m.id === me ? "You cannot remove yourself here" : "Remove: their tokens, runners and queued jobs go at once",
                  onclick: () =>
                    app.act(`member:${m.id}`, () => api.wsRemoveMember(m.id), () => {
                      app.remote.members = (app.remote.members ?? []).filter((x) => x.id !== m.id);
                    }),
                },
                "Remove",
              ),
            ),
          );
        }),
      ),
    ),
    h(
      "form",
      { class: "card row", onsubmit: submit },
      app.input("ws-invite-email", { testid: "ws-invite-email", type: "email", placeholder: "Invite by email", class: "grow", autocomplete: "off" }),
      app.select("ws-invite-role", { testid: "ws-invite-role" }, [["member", "member"], ["admin", "admin"]]),
      h("button", { testid: "ws-invite-submit", type: "submit", disabled: app.busy.has("ws-invite") }, "Invite"),
    ),
    invite
      ? h(
          "div",
          { class: "card secret" },
          h("p", { class: "small" }, `Invite for ${invite.member.email}: it works once, until `, when(invite.expiresAt), ". Send them this link; it is shown once."),
          h("code", { testid: "ws-invite-link", class: "block" }, invite.link),
        )
      : null,
  ];
}

export function usageSection(app: App) {
  const { report } = app.remote;
  const reload = (ev: Event) => {
    ev.preventDefault();
    void app.loadReport();
  };
  return [
    h("h3", null, "Usage by month"),
    h(
      "form",
      { class: "row", onsubmit: reload },
      h("label", { class: "inline" }, "Month", app.input("ws-report-month", { testid: "ws-report-month", type: "month", class: "narrow" }, report?.month ?? "")),
      h("label", { class: "inline" }, "By", app.select("ws-report-by", { testid: "ws-report-by" }, [["pool", "pool"], ["member", "member"], ["runner", "runner"]])),
      h("button", { testid: "ws-report-submit", type: "submit", disabled: app.busy.has("report") }, "Show"),
    ),
    h(
      "table",
      { testid: "ws-report", class: "card roster" },
      h(
        "tbody",
        null,
        (report?.lines ?? []).map((l) =>
          h(
            "tr",
            { testid: "ws-report-row", "data-id": l.id },
            h("td", null, report?.by === "pool" ? poolLabel(l.name || l.id) : h("strong", null, l.name || l.id)),
            h("td", { class: "small" }, duration(l.runnerMs)),
            h("td", { class: "small muted" }, `charged ${duration(l.chargedMs)}`),
            h("td", { class: "small muted" }, `${l.attempts} ${l.attempts === 1 ? "attempt" : "attempts"}`),
          ),
        ),
      ),
    ),
    report && !report.lines.length ? h("p", { class: "muted" }, `Nothing ran in ${report.month}.`) : null,
  ];
}

function auditRow(e: AuditEvent) {
  const who = e.actor.email ?? `${e.actor.kind} ${e.actor.id}`;
  return h(
    "tr",
    { testid: "ws-audit-row", "data-action": e.action, "data-surface": e.surface },
    h("td", { class: "small nowrap" }, when(e.at)),
    h("td", null, h("code", null, e.action)),
    h("td", { class: "small" }, who, h("span", { class: "muted" }, ` via ${e.surface}`)),
    h("td", { class: "small" }, h("code", { class: "muted" }, e.target)),
  );
}

export function auditSection(app: App) {
  const { audit } = app.remote;
  const older = () => {
    const before = audit?.nextBefore;
    if (!before) return;
    void app.act("audit-more", () => api.wsAudit(before), (page) => {
      app.remote.audit = { events: [...(audit?.events ?? []), ...page.events], nextBefore: page.nextBefore };
    });
  };
  return [
    h("h3", null, "Audit log"),
    h("table", { testid: "ws-audit", class: "card roster" }, h("tbody", null, (audit?.events ?? []).map(auditRow))),
    audit?.nextBefore
      ? h("button", { testid: "ws-audit-more", class: "small", disabled: app.busy.has("audit-more"), onclick: older }, "Older")
      : null,
  ];
}
