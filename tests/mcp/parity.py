"""REST ↔ MCP parity, driven by /openapi.json, through an independent MCP
client (the official Python SDK, `mcp` from PyPI).

For every human-facing operation (one that takes a member token) it checks:
  - the MCP tool named by the operation's `x-mcp-tool` is listed, and its
    input schema names the operation's path parameters as required;
  - it does the same thing: reads answer what REST answers; writes answer
    the shape REST answers, and REST then sees their effect;
  - it is refused the same way, with the same error code: a member calling
    an admin tool, another workspace's ids, and bad input.
At the end, every write made through MCP is in the audit log, via `mcp`.

Run by tests/tests/mcp.rs against a fresh coordinator, with DROVER_URL and
the tokens ADMIN_TOKEN, MEMBER_TOKEN (same workspace) and OTHER_TOKEN (an
admin of another workspace). Exits non-zero, saying what differed.
"""

import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL = os.environ["DROVER_URL"]
TOKENS = {
    "admin": os.environ["ADMIN_TOKEN"],
    "member": os.environ["MEMBER_TOKEN"],
    "other": os.environ["OTHER_TOKEN"],
}
failures = []
secrets = []  # tokens and codes MCP answered: the coordinator's log must hold none


def collect(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("token", "code") and isinstance(x, str) and len(x) > 8:
                secrets.append(x)
            if k == "script" and isinstance(x, str):
                # The install script's GitHub registration token and runner token.
                for line in x.splitlines():
                    if line.startswith(("GH_TOKEN=", "DROVER_RUNNER_TOKEN=")):
                        secrets.append(line.split("=", 1)[1].strip("'"))
            collect(x)
    elif isinstance(v, list):
        for x in v:
            collect(x)


def fail(msg):
    failures.append(msg)
    print("FAIL", msg, flush=True)


def rest(who, method, path, query=None, body=None, token=None):
    """(status, JSON or text) of one REST call."""
    url = URL + path
    if query:
        url += "?" + urllib.parse.urlencode({k: v for k, v in query.items()})
    data = None
    headers = {"Authorization": "Bearer " + (token or TOKENS[who])}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method.upper(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, raw, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if not raw:
        return status, {}
    if ctype.startswith("application/json"):
        return status, json.loads(raw)
    return status, {"text": raw.decode()}


def rest_op(who, op, args):
    """Calls an operation with MCP-style arguments over REST."""
    args = dict(args)
    path = op["path"]
    for name in op["path_params"]:
        path = path.replace("{%s}" % name, urllib.parse.quote(args.pop(name), safe=""))
    if op["method"] in ("get", "delete"):
        query = {k: (json.dumps(v) if isinstance(v, bool) else v) for k, v in args.items()}
        return rest(who, op["method"], path, query=query)
    body = args if (args or op["has_body"]) else None
    if body is None and op["has_body"]:
        body = {}
    return rest(who, op["method"], path, body=body)


def code_of(answer):
    return (answer.get("error") or {}).get("code")


def volatile(v):
    """Drops what moves between two reads (times a runner last spoke)."""
    if isinstance(v, dict):
        return {k: volatile(x) for k, x in v.items() if not k.startswith("lastSeen") and k != "online"}
    if isinstance(v, list):
        return [volatile(x) for x in v]
    return v


def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__


class Mcp:
    def __init__(self):
        self.stack = None
        self.sessions = {}

    async def open(self, stack):
        for who, token in TOKENS.items():
            client = create_mcp_http_client(headers={"Authorization": "Bearer " + token})
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(streamable_http_client(URL + "/mcp", http_client=client))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            self.sessions[who] = session

    async def call(self, who, name, args):
        """(ok, structured answer) of one tool call."""
        r = await self.sessions[who].call_tool(name, args)
        value = r.structured_content
        if value is None:
            value = json.loads(r.content[0].text) if r.content else {}
        collect(value)
        return (not r.is_error), value


def uid():
    return uuid.uuid4().hex[:8]


async def main():
    spec = json.loads(urllib.request.urlopen(URL + "/openapi.json").read())
    ops = {}
    for path, item in spec["paths"].items():
        for method, o in item.items():
            if any("memberToken" in s for s in o.get("security", [])):
                ops[o["operationId"]] = {
                    "id": o["operationId"],
                    "path": path,
                    "method": method,
                    "tool": o.get("x-mcp-tool"),
                    "path_params": [p.strip("{}") for p in path.split("/") if p.startswith("{")],
                    "has_body": "requestBody" in o,
                }
    print(f"{len(ops)} human-facing operations in /openapi.json", flush=True)

    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        mcp = Mcp()
        await mcp.open(stack)
        listed = {t.name: t for t in (await mcp.sessions["admin"].list_tools()).tools}
        print(f"{len(listed)} tools listed on /mcp", flush=True)

        # Fixtures, made over REST.
        me = rest("admin", "get", "/v1/me")[1]
        mine_pool = rest("admin", "post", "/v1/me/runtimes", body={"name": "p-" + uid()})[1]
        ws_pool = rest("admin", "post", "/v1/workspace/runtimes", body={"name": "w-" + uid()})[1]
        member_id = next(m["id"] for m in rest("admin", "get", "/v1/workspace/members")[1]["members"] if m["role"] == "member")
        done = rest("admin", "post", "/v1/jobs", body={"runtime": "self:ws", "command": ["echo", "parity"]})[1]
        deadline = time.monotonic() + 30
        while rest("admin", "get", "/v1/jobs/" + done["id"])[1]["state"] not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                fail("the fixture job did not finish within 30 s")
                break
            await asyncio.sleep(0.05)
        stuck = lambda: rest("admin", "post", "/v1/jobs", body={"runtime": "self:ws", "script": "true", "requires": ["parity-nobody"]})[1]["id"]

        def paired(scope):
            return rest("admin", "post", f"/v1/{scope}/runners", body={"name": "r-" + uid()})[1]["runner"]["id"]

        def device_token():
            code = rest("admin", "post", "/v1/me/pairing-codes")[1]["code"]
            token = rest("admin", "post", f"/v1/pairing-codes/{code}/redeem", body={"deviceName": "d-" + uid()})[1]
            return token["tokenId"] if "tokenId" in token else token["id"]

        def join_token(scope, pool):
            return rest("admin", "post", f"/v1/{scope}/runtimes/{pool['id']}/join-tokens")[1]["id"]

        def invited():
            return rest("admin", "post", "/v1/workspace/members", body={"email": f"i{uid()}@acme.test", "role": "member"})[1]["member"]["id"]

        # Repositories the App's installation on `octo` reaches (a link pins
        # the repository's id, read through it): each used once.
        ci_names = iter(f"octo/ci-{i}" for i in range(40))

        def ci_linked():
            repo = rest("admin", "put", "/v1/workspace/ci/links", body={"repository": next(ci_names)})[1]["repository"]
            owner, name = repo.split("/")
            return {"owner": owner, "repo": name}

        def ci_repos():
            return [l["repository"] for l in rest("admin", "get", "/v1/workspace/ci/links")[1]["links"]]

        workflow_repo = ci_linked()

        def on_demand():
            body = {"pool": ws_pool["name"], "target": next(ci_names)}
            return {"id": rest("admin", "put", "/v1/workspace/github/on-demand", body=body)[1]["id"]}

        def listed_ids(path, key):
            return [x["id"] for x in rest("admin", "get", path)[1][key]]

        # Each operation: its arguments (called fresh for each use), whether
        # it is for admins, a bad input with the code both must give, and
        # for writes the check that REST sees the effect.
        def read(args=lambda: {}, admin=False, bad=None):
            return {"args": args, "admin": admin, "bad": bad, "read": True}

        def write(args, seen, admin=False, bad=None):
            return {"args": args, "admin": admin, "bad": bad, "read": False, "seen": seen}

        cases = {
            "submitJob": write(lambda: {"runtime": "self:ws", "command": ["echo", uid()]},
                               lambda a, r: rest("admin", "get", "/v1/jobs/" + r["id"])[1]["runtime"] == "self:ws",
                               bad=({"runtime": "self:ws", "command": "true"}, "BAD_REQUEST")),
            "listJobs": read(lambda: {"limit": 5}, bad=({"limit": 0}, "BAD_REQUEST")),
            "getJob": read(lambda: {"id": done["id"]}, bad=({"id": "job_nope"}, "NOT_FOUND")),
            "cancelJob": write(lambda: {"id": stuck()},
                               lambda a, r: rest("admin", "get", "/v1/jobs/" + a["id"])[1]["state"] == "cancelled",
                               bad=({"id": "job_nope"}, "NOT_FOUND")),
            "getJobLogs": read(lambda: {"id": done["id"]}, bad=({"id": "job_nope"}, "NOT_FOUND")),
            "createRuntimeMine": write(lambda: {"name": "m-" + uid()},
                                       lambda a, r: r["id"] in listed_ids("/v1/me/runtimes", "runtimes"),
                                       bad=({"name": "no spaces"}, "BAD_REQUEST")),
            "listRuntimesMine": read(),
            "createJoinTokenMine": write(lambda: {"id": mine_pool["id"]}, lambda a, r: r["token"].startswith("djt_"),
                                         bad=({"id": "rt_nope"}, "NOT_FOUND")),
            "createRuntimeWorkspace": write(lambda: {"name": "w-" + uid()},
                                            lambda a, r: r["id"] in listed_ids("/v1/workspace/runtimes", "runtimes"),
                                            admin=True, bad=({"name": "no spaces"}, "BAD_REQUEST")),
            "listRuntimesWorkspace": read(),
            "createJoinTokenWorkspace": write(lambda: {"id": ws_pool["id"]}, lambda a, r: r["token"].startswith("djt_"),
                                              admin=True, bad=({"id": "rt_nope"}, "NOT_FOUND")),
            "listJoinTokensMine": read(),
            "revokeJoinTokenMine": write(lambda: {"id": join_token("me", mine_pool)},
                                         lambda a, r: a["id"] not in listed_ids("/v1/me/join-tokens", "joinTokens"),
                                         bad=({"id": "jt_nope"}, "NOT_FOUND")),
            "listJoinTokensWorkspace": read(admin=True),
            "revokeJoinTokenWorkspace": write(lambda: {"id": join_token("workspace", ws_pool)},
                                              lambda a, r: a["id"] not in listed_ids("/v1/workspace/join-tokens", "joinTokens"),
                                              admin=True, bad=({"id": "jt_nope"}, "NOT_FOUND")),
            "pairRunnerMine": write(lambda: {"name": "r-" + uid()},
                                    lambda a, r: r["runner"]["id"] in listed_ids("/v1/me/runners", "runners"),
                                    bad=({"capabilities": "gpu"}, "BAD_REQUEST")),
            "listRunnersMine": read(),
            "revokeRunnerMine": write(lambda: {"id": paired("me")},
                                      lambda a, r: a["id"] not in listed_ids("/v1/me/runners", "runners"),
                                      bad=({"id": "rn_nope"}, "NOT_FOUND")),
            "pairRunnerWorkspace": write(lambda: {"name": "r-" + uid()},
                                         lambda a, r: r["runner"]["id"] in listed_ids("/v1/workspace/runners/owned", "runners"),
                                         admin=True, bad=({"capabilities": "gpu"}, "BAD_REQUEST")),
            "listRunnerRoster": read(),
            "listRunnersWorkspace": read(),
            "revokeRunnerWorkspace": write(lambda: {"id": paired("workspace")},
                                           lambda a, r: a["id"] not in listed_ids("/v1/workspace/runners/owned", "runners"),
                                           admin=True, bad=({"id": "rn_nope"}, "NOT_FOUND")),
            "setBudget": write(lambda: {"monthlyMinutes": 100000},
                               lambda a, r: rest("admin", "get", "/v1/workspace/usage")[1]["monthlyMinutes"] == 100000,
                               admin=True, bad=({"monthlyMinutes": -5}, "BAD_REQUEST")),
            "getUsage": read(),
            "getWorkspaceUsageReport": read(lambda: {"by": "member"}, admin=True, bad=({"month": "2026-13"}, "BAD_REQUEST")),
            "getMyUsageReport": read(lambda: {"by": "pool"}, bad=({"by": "planet"}, "BAD_REQUEST")),
            "getMe": read(),
            "createPairingCode": write(lambda: {}, lambda a, r: len(r["code"]) > 0),
            "listTokensMine": read(),
            "revokeTokenMine": write(lambda: {"id": device_token()},
                                     lambda a, r: a["id"] not in listed_ids("/v1/me/tokens", "tokens"),
                                     bad=({"id": "tok_nope"}, "NOT_FOUND")),
            "listMembers": read(admin=True),
            "inviteMember": write(lambda: {"email": f"n{uid()}@acme.test", "role": "member"},
                                  lambda a, r: r["member"]["id"] in listed_ids("/v1/workspace/members", "members"),
                                  admin=True, bad=({"email": "not-an-email", "role": "member"}, "BAD_REQUEST")),
            "updateMember": write(lambda: {"id": invited(), "role": "admin"},
                                  lambda a, r: any(m["id"] == a["id"] and m["role"] == "admin"
                                                   for m in rest("admin", "get", "/v1/workspace/members")[1]["members"]),
                                  admin=True, bad=({"id": member_id, "role": "owner"}, "BAD_REQUEST")),
            "removeMember": write(lambda: {"id": invited()},
                                  lambda a, r: a["id"] not in listed_ids("/v1/workspace/members", "members"),
                                  admin=True, bad=({"id": "usr_nope"}, "NOT_FOUND")),
            "listAuditEvents": read(lambda: {"limit": 20}, admin=True, bad=({"limit": 0}, "BAD_REQUEST")),
            # The GitHub App (a fake GitHub; the test links an installation on `octo`).
            "createGithubInstallLink": write(lambda: {}, lambda a, r: "state=" in r["url"] and r["host"] == "github.com",
                                             admin=True, bad=({"host": "nowhere.test"}, "BAD_REQUEST")),
            "listGithubInstallations": read(admin=True),
            "listGithubRepos": read(lambda: {"perPage": 1, "page": 2}, admin=True, bad=({"perPage": 0}, "BAD_REQUEST")),
            "installGithubWorkspaceRunner": write(
                lambda: {"repository": "octo/hello", "labels": ["gpu"]},
                lambda a, r: r["runner"]["id"] in listed_ids("/v1/workspace/runners/owned", "runners")
                and "./config.sh" in r["script"] and r["workflowHint"]["runtime"].startswith("self:ws:"),
                admin=True, bad=({"repository": "octo/hello", "org": "octo"}, "BAD_REQUEST")),
            # CI links.
            "setCiLink": write(lambda: {"repository": next(ci_names), "runsOn": ["self-hosted"]},
                               lambda a, r: a["repository"] in ci_repos() and r["principal"] == "ci:" + a["repository"],
                               admin=True, bad=({"repository": "no-slash"}, "BAD_REQUEST")),
            "listCiLinks": read(admin=True),
            "removeCiLink": write(ci_linked, lambda a, r: f"{a['owner']}/{a['repo']}" not in ci_repos(),
                                  admin=True, bad=({"owner": "octo", "repo": "never-linked"}, "NOT_FOUND")),
            "getCiWorkflow": read(lambda: dict(workflow_repo), admin=True,
                                  bad=({"owner": "octo", "repo": "never-linked"}, "NOT_FOUND")),
            # GitHub Actions on demand.
            "setGithubOnDemand": write(lambda: {"pool": ws_pool["name"], "target": next(ci_names), "labels": ["l-" + uid()]},
                                       lambda a, r: r["id"] in listed_ids("/v1/workspace/github/on-demand", "pools")
                                       and r["principal"] == "actions:" + a["target"],
                                       admin=True, bad=({"pool": ws_pool["name"], "target": "octo/x", "labels": ["no spaces"]}, "BAD_REQUEST")),
            "listGithubOnDemand": read(admin=True),
            "removeGithubOnDemand": write(on_demand, lambda a, r: a["id"] not in listed_ids("/v1/workspace/github/on-demand", "pools"),
                                          admin=True, bad=({"id": "god_nope"}, "NOT_FOUND")),
        }

        missing = sorted(set(ops) - set(cases))
        if missing:
            fail(f"operations with no parity case (add one): {missing}")
        mcp_writes = 0
        audited = 0  # every write but a submit is in the audit log
        for op_id, op in sorted(ops.items()):
            case = cases.get(op_id)
            tool = op["tool"]
            if not tool:
                fail(f"{op_id}: no x-mcp-tool")
                continue
            if tool not in listed:
                fail(f"{op_id}: tool {tool} is not listed on /mcp")
                continue
            hints = listed[tool].annotations
            if hints is None or hints.read_only_hint != (op["method"] == "get") \
                    or hints.destructive_hint != (op["method"] == "delete"):
                fail(f"{tool}: annotations {hints} do not match {op['method'].upper()}")
            schema = listed[tool].input_schema
            for p in op["path_params"]:
                if p not in schema.get("properties", {}) or p not in schema.get("required", []):
                    fail(f"{tool}: path parameter {p} is not a required input")
            if case is None:
                continue

            # Refused the same way: another workspace's ids.
            if op["path_params"]:
                args = case["args"]()
                status, r = rest_op("other", op, args)
                ok, m = await mcp.call("other", tool, args)
                if status != 404 or ok or code_of(m) != code_of(r):
                    fail(f"{tool}: another workspace's id: REST {status} {code_of(r)}, MCP {code_of(m)}")
            # A member calling an admin tool.
            if case["admin"]:
                args = case["args"]()
                status, r = rest_op("member", op, args)
                ok, m = await mcp.call("member", tool, args)
                if status != 403 or ok or code_of(r) != "FORBIDDEN" or code_of(m) != "FORBIDDEN":
                    fail(f"{tool}: as a member: REST {status} {code_of(r)}, MCP {code_of(m)}")
            # Bad input.
            if case["bad"]:
                args, want = case["bad"]
                status, r = rest_op("admin", op, args)
                ok, m = await mcp.call("admin", tool, args)
                if ok or code_of(r) != want or code_of(m) != want:
                    fail(f"{tool}: bad input {args}: REST {status} {code_of(r)}, MCP {code_of(m)} (want {want})")
            # The same thing.
            if case["read"]:
                args = case["args"]()
                status, r = rest_op("admin", op, args)
                ok, m = await mcp.call("admin", tool, args)
                if not ok or status >= 300 or volatile(r) != volatile(m):
                    fail(f"{tool}: REST {status} {json.dumps(r)[:300]} but MCP {json.dumps(m)[:300]}")
            else:
                status, r = rest_op("admin", op, case["args"]())
                args = case["args"]()
                ok, m = await mcp.call("admin", tool, args)
                mcp_writes += 1
                audited += op_id != "submitJob"
                if not ok or status >= 300:
                    fail(f"{tool}: REST {status} {json.dumps(r)[:200]}, MCP ok={ok} {json.dumps(m)[:200]}")
                elif shape(r) != shape(m):
                    fail(f"{tool}: REST answers {shape(r)} but MCP {shape(m)}")
                elif not case["seen"](args, m):
                    fail(f"{tool}: REST does not see what the MCP call did ({json.dumps(m)[:200]})")
            print(f"ok  {op['method'].upper():6} {op['path']:40} {tool}", flush=True)

        # What REST takes in headers reaches MCP as arguments. An
        # Idempotency-Key: the same key answers the same job, over either
        # surface, and queues one.
        key = "mcp-" + uid()
        # Never runnable: it adds no usage while the reports are compared.
        job = {"runtime": "self:ws", "command": ["true"], "requires": ["parity-nobody"]}
        ok1, first = await mcp.call("admin", "submit_job", dict(job, idempotencyKey=key))
        ok2, again = await mcp.call("admin", "submit_job", dict(job, idempotencyKey=key))
        req = urllib.request.Request(URL + "/v1/jobs", data=json.dumps(job).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + TOKENS["admin"],
                                              "Content-Type": "application/json", "Idempotency-Key": key})
        with urllib.request.urlopen(req, timeout=30) as r:
            via_rest = (r.status, json.loads(r.read()))
        if not (ok1 and ok2) or first["id"] != again["id"] or via_rest != (200, via_rest[1]) \
                or via_rest[1]["id"] != first["id"]:
            fail(f"submit_job with idempotencyKey: {first.get('id')}, {again.get('id')}, REST {via_rest[0]} {via_rest[1].get('id')}")
        ok, other = await mcp.call("admin", "submit_job", dict(job, command=["false"], idempotencyKey=key))
        if ok or code_of(other) != "CONFLICT":
            fail(f"submit_job: a key reused with another body: {other}")
        # CSV, as REST gives it with `Accept: text/csv`: once every job that
        # can run has finished, so the usage holds still between the two reads.
        deadline = time.monotonic() + 30
        while True:
            live = [j for st in ("queued", "leased", "running")
                    for j in rest("admin", "get", "/v1/jobs", query={"state": st, "limit": 1000})[1]["jobs"]
                    if "parity-nobody" not in j["requires"]]
            if not live:
                break
            if time.monotonic() > deadline:
                fail(f"{len(live)} jobs still running after 30 s")
                break
            await asyncio.sleep(0.05)
        for tool, path in [("get_usage_report", "/v1/workspace/billing/usage"), ("get_my_usage_report", "/v1/me/usage")]:
            ok, m = await mcp.call("admin", tool, {"by": "member", "format": "csv"})
            req = urllib.request.Request(URL + path + "?by=member",
                                         headers={"Authorization": "Bearer " + TOKENS["admin"], "Accept": "text/csv"})
            with urllib.request.urlopen(req, timeout=30) as r:
                csv_text = r.read().decode()
            if not ok or m.get("text") != csv_text or not csv_text.startswith("month,member_id,"):
                fail(f"{tool} format=csv: MCP {json.dumps(m)[:200]} but REST {csv_text[:200]!r}")
            ok, m = await mcp.call("admin", tool, {"format": "xml"})
            if ok or code_of(m) != "BAD_REQUEST":
                fail(f"{tool} format=xml: {m}")
        print("ok  idempotencyKey and format=csv reach MCP", flush=True)

        # No token: refused before MCP, as on REST.
        req = urllib.request.Request(URL + "/mcp", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        try:
            urllib.request.urlopen(req, timeout=10)
            fail("/mcp without a token was served")
        except urllib.error.HTTPError as e:
            if e.code != 401 or json.loads(e.read())["error"]["code"] != "UNAUTHORIZED":
                fail(f"/mcp without a token: {e.code}")

        events = rest("admin", "get", "/v1/workspace/audit", query={"limit": 500})[1]["events"]
        via_mcp = [e for e in events if e.get("surface") == "mcp"]
        if len(via_mcp) < audited:
            fail(f"{audited} audited writes through MCP, but {len(via_mcp)} audit entries via mcp")
        print(f"audit: {len(via_mcp)} entries via mcp for {mcp_writes} writes", flush=True)

    with open(os.environ["SECRETS_OUT"], "w") as f:
        json.dump(secrets + list(TOKENS.values()), f)
    if failures:
        print(f"{len(failures)} parity failure(s)", flush=True)
        sys.exit(1)
    print("parity: every human-facing operation has its MCP tool, and they agree", flush=True)


asyncio.run(main())
