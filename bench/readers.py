#!/usr/bin/env python3
"""Memory under stalled readers of the largest answer one member can make.

Starts target/release/drover-coordinator on a fresh SQLite file, makes a
member and a workspace runner (so that submits are placed), and submits 64
jobs whose command is 1 MiB each (just under the body limit), and warms up
(16 clients read the list whole, as ordinary use would: every database
connection and its page cache). Then N connections each send `GET
/v1/jobs?limit=1000` (with `N:job`, `GET /v1/jobs/{id}` of one of those
jobs, whose answer is its whole 1 MiB command), read 64 bytes of the answer
and stop reading (the socket stays open, its receive buffer small). It
samples the coordinator's resident memory (VmRSS) before (the baseline),
while the readers are stalled (the peak), and for 10 s after they close
(the last sample, and how long until RSS was back within 20 % of the
baseline). Prints a Markdown table row per N.

    bench/readers.py [N[:job] ...]        (default: 100 10 100:job)

DROVER_COORDINATOR names another binary (e.g. an older build, to compare);
DROVER_SERVE_ARGS adds flags to `serve` (e.g. `--max-reads-per-member 1000`,
to see the byte bound of answers alone).
"""
import concurrent.futures
import json
import os
import resource
import shlex
import socket
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
SERVE_ARGS = shlex.split(os.environ.get("DROVER_SERVE_ARGS", ""))
JOBS = 64
# A 1 MiB body at most: the command's text and its JSON around it.
COMMAND_BYTES = 1024 * 1024 - 200
STALL_SECONDS = 5.0
AFTER_SECONDS = 10.0


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


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
        return e.code, json.loads(e.read() or b"null")


def setup(base, member):
    _, paired = call(base, "POST", "/v1/workspace/runners", member, {})
    call(base, "POST", "/v1/runner/hello", paired["token"], {"capabilities": [], "slots": 1})
    for i in range(JOBS):
        status, answer = call(base, "POST", "/v1/jobs", member, {
            "runtime": "self:ws",
            "command": ["echo", str(i) + "x" * COMMAND_BYTES],
        })
        if status != 201:
            raise RuntimeError(f"submit {i}: {status} {answer}")
    job = answer["id"]
    # Warm up as ordinary use would (every database connection, its page
    # cache): 16 clients read the list whole, a few times. Returns the size
    # of one whole answer, as a client that reads it sees it.
    def read_whole(path):
        req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + member})
        for _ in range(20):
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    return len(r.read())
            except urllib.error.HTTPError:  # 429 or 503: its turn comes
                time.sleep(0.1)
        return 0
    paths = {"list": "/v1/jobs?limit=1000", "job": f"/v1/jobs/{job}"}
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        sizes = {k: max(pool.map(read_whole, [p] * 48)) for k, p in paths.items()}
    return paths, sizes


def stalled_readers(port, pid, member, n, path):
    head = (
        f"GET {path} HTTP/1.1\r\nHost: bench\r\n"
        f"Authorization: Bearer {member}\r\n\r\n"
    ).encode()
    socks, answers = [], {}
    for _ in range(n):
        s = socket.socket()
        # A small receive window, as a slow client would have.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(head)
        socks.append(s)
    for s in socks:
        s.settimeout(30)
        try:
            data = s.recv(64)
            code = data.split(b" ")[1].decode() if data else "closed"
        except OSError as e:
            code = type(e).__name__
        answers[code] = answers.get(code, 0) + 1
    peak, until = 0.0, time.time() + STALL_SECONDS
    while time.time() < until:
        peak = max(peak, rss_mib(pid))
        time.sleep(0.1)
    for s in socks:
        s.close()
    return peak, answers


def job_id(paths):
    return paths["job"].rsplit("/", 1)[1]


def main():
    rows = [(int(a.split(":")[0]), (a.split(":") + ["list"])[1]) for a in sys.argv[1:]] \
        or [(100, "list"), (10, "list"), (100, "job")]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    flags = " ".join(SERVE_ARGS) or "defaults"
    print(f"| stalled readers ({flags}) | of | one answer | RSS before | while stalled (peak) "
          f"| {AFTER_SECONDS:.0f} s after closing | back within 20 % after | answers |")
    print("|---|---|---|---|---|---|---|---|")
    for n, what in rows:
        with tempfile.TemporaryDirectory() as d:
            db = f"sqlite://{d}/drover.db"
            member = json.loads(
                subprocess.check_output(
                    [COORDINATOR, "admin", "bootstrap", "--workspace", "bench",
                     "--email", "bench@bench.test", "--database", db, "--json"]
                )
            )["token"]
            proc = subprocess.Popen(
                [COORDINATOR, "serve", "--listen", "127.0.0.1:0", "--database", db,
                 *SERVE_ARGS],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )
            try:
                url = proc.stdout.readline().split()[-1]
                port = int(url.rsplit(":", 1)[1])
                paths, sizes = setup(url, member)
                time.sleep(3)  # what the warm-up freed goes back first
                before = rss_mib(proc.pid)
                peak, answers = stalled_readers(port, proc.pid, member, n, paths[what])
                closed = time.time()
                back, after = None, before
                while time.time() < closed + AFTER_SECONDS:
                    time.sleep(0.1)
                    after = rss_mib(proc.pid)
                    if back is None and after <= before * 1.2:
                        back = time.time() - closed
                    elif after > before * 1.2:
                        back = None
                said = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()))
                back_text = f"{back:.1f} s" if back is not None else "not yet"
                print(f"| {n:,} | `GET {paths[what].replace(job_id(paths), '{id}')}` "
                      f"| {sizes[what] / 1048576:.2f} MiB | {before:.0f} MiB | {peak:.0f} MiB "
                      f"| {after:.0f} MiB | {back_text} | {said} |", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
