#!/usr/bin/env python3
"""A storm of member reads while a runner leases and heartbeats.

Starts target/release/drover-coordinator on a fresh SQLite file (or on
DROVER_BENCH_PG, a PostgreSQL URL of an empty database), makes a member and a
paired runner holding one lease, then for SECONDS runs N clients that loop on
`GET /v1/jobs?limit=100` over keep-alive connections (pausing a second after
a 503, as Retry-After asks) while a prober repeats the runner's heartbeat and
an empty lease (`waitMs: 0`) on fresh connections. Prints a Markdown table:
reads by status, and the prober's latencies.

    bench/storm.py [N ...]        (default: 1000 3000; SECONDS=20)

DROVER_COORDINATOR names another binary (e.g. an older build, to compare).
"""
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COORDINATOR = os.environ.get(
    "DROVER_COORDINATOR", os.path.join(ROOT, "target", "release", "drover-coordinator")
)
SECONDS = float(os.environ.get("SECONDS_PER_RUN", "20"))


def call(base, method, path, token, body=None):
    req = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def pct(xs, q):
    xs = sorted(xs)
    return f"{xs[int(q * (len(xs) - 1))] * 1000:.0f}" if xs else "-"


async def storm(port, member, n):
    base = f"http://127.0.0.1:{port}"
    _, paired = call(base, "POST", "/v1/workspace/runners", member, {})
    runner = paired["token"]
    # Two slots: one for the held lease, one for the probe's empty leases.
    call(base, "POST", "/v1/runner/hello", runner, {"capabilities": [], "slots": 2})
    call(base, "POST", "/v1/jobs", member, {"runtime": "self:ws", "script": "true"})
    _, lease = call(base, "POST", "/v1/runner/lease", runner, {"waitMs": 1000})
    lease_id = lease["lease"]["leaseId"]
    reads = {}
    probes = []
    stop = asyncio.Event()

    async def reader():
        while not stop.is_set():
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                while not stop.is_set():
                    w.write(
                        f"GET /v1/jobs?limit=100 HTTP/1.1\r\nHost: bench\r\n"
                        f"Authorization: Bearer {member}\r\n\r\n".encode()
                    )
                    head = await r.readuntil(b"\r\n\r\n")
                    code = head.split(b" ")[1].decode()
                    length = [
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ][0]
                    await r.readexactly(length)
                    reads[code] = reads.get(code, 0) + 1
                    if code == "503":
                        await asyncio.sleep(1)
                    if b"connection: close" in head.lower():
                        break
                w.close()
            except Exception as e:  # a refused or reset connection: count it
                reads[type(e).__name__] = reads.get(type(e).__name__, 0) + 1
                await asyncio.sleep(0.05)

    async def prober():
        loop = asyncio.get_running_loop()
        calls = (
            ("heartbeat", f"/v1/runner/leases/{lease_id}/heartbeat"),
            ("lease", "/v1/runner/lease"),
        )
        while not stop.is_set():
            for kind, path in calls:
                t = time.time()
                status, _ = await loop.run_in_executor(
                    None, call, base, "POST", path, runner, {"waitMs": 0}
                )
                probes.append((kind, status, time.time() - t))
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(reader()) for _ in range(n)]
    tasks.append(asyncio.create_task(prober()))
    await asyncio.sleep(SECONDS)
    stop.set()
    await asyncio.wait(tasks, timeout=60)
    row = [f"{n:,}", ", ".join(f"{k}: {v:,}" for k, v in sorted(reads.items()))]
    for kind in ("heartbeat", "lease"):
        xs = [d for k, _, d in probes if k == kind]
        codes = sorted({s for k, s, _ in probes if k == kind})
        row.append(f"{len(xs)} calls, p50 {pct(xs, .5)} / p99 {pct(xs, .99)} ms, {codes}")
    return "| " + " | ".join(row) + " |"


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 3000]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as d:
        db = os.environ.get("DROVER_BENCH_PG") or f"sqlite://{d}/drover.db"
        env = dict(os.environ)
        if db.startswith("postgres"):
            key = os.path.join(d, "secret.key")
            with open(key, "w") as f:
                f.write("k1:" + os.urandom(32).hex() + "\n")
            env["DROVER_SECRET_KEY_FILE"] = key
        member = json.loads(
            subprocess.check_output(
                [COORDINATOR, "admin", "bootstrap", "--workspace", "bench",
                 "--email", "bench@bench.test", "--database", db, "--json"],
                env=env,
            )
        )["token"]
        proc = subprocess.Popen(
            [COORDINATOR, "serve", "--listen", "127.0.0.1:0", "--database", db],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        try:
            port = int(proc.stdout.readline().split()[-1].rsplit(":", 1)[1])
            print(f"{db.split(':')[0]}, {SECONDS:.0f} s a run")
            print()
            print("| readers | reads by status | runner heartbeat | runner lease |")
            print("|---|---|---|---|")
            for n in sizes:
                print(asyncio.run(storm(port, member, n)), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
