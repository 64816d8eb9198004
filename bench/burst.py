#!/usr/bin/env python3
"""Memory under a burst of stalled uploads, and after it.

Starts target/release/drover-coordinator on a fresh SQLite file, makes a
member, then opens N connections that each announce a 1 MiB POST /v1/jobs
body and send 900 KiB of it (never the rest). It reads the coordinator's
resident memory (VmRSS) before, while the uploads are stalled, and after
they are closed, and counts how they were answered. Prints a Markdown table.

    bench/burst.py [N ...]        (default: 1000 2000)

DROVER_COORDINATOR names another binary (e.g. an older build, to compare).
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COORDINATOR = os.environ.get(
    "DROVER_COORDINATOR", os.path.join(ROOT, "target", "release", "drover-coordinator")
)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def settle(pid, seconds=3.0):
    """RSS after `seconds` (the coordinator frees what closed sockets held)."""
    time.sleep(seconds)
    return rss_mib(pid)


def burst(port, pid, token, n, sent=900 * 1024):
    head = (
        "POST /v1/jobs HTTP/1.1\r\nHost: bench\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1048576\r\n\r\n"
    ).encode()
    chunk = b"x" * sent
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(head)
        s.setblocking(False)
        try:
            s.send(chunk)
        except BlockingIOError:
            pass
        socks.append(s)
    peak = settle(pid)
    answers = {}
    for s in socks:
        try:
            data = s.recv(200)
            code = data.split(b" ")[1].decode() if data else "closed"
        except BlockingIOError:
            code = "still reading"
        except OSError as e:
            code = type(e).__name__
        answers[code] = answers.get(code, 0) + 1
        s.close()
    return peak, settle(pid), answers


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 2000]
    with tempfile.TemporaryDirectory() as d:
        db = f"sqlite://{d}/drover.db"
        member = json.loads(
            subprocess.check_output(
                [COORDINATOR, "admin", "bootstrap", "--workspace", "bench",
                 "--email", "bench@bench.test", "--database", db, "--json"]
            )
        )
        proc = subprocess.Popen(
            [COORDINATOR, "serve", "--listen", "127.0.0.1:0", "--database", db],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            url = proc.stdout.readline().split()[-1]
            port = int(url.rsplit(":", 1)[1])
            print("| stalled 1 MiB uploads | RSS before | during | after closing | answers |")
            print("|---|---|---|---|---|")
            for n in sizes:
                before = settle(proc.pid, 1.0)
                peak, after, answers = burst(port, proc.pid, member["token"], n)
                said = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()))
                print(f"| {n:,} | {before:.0f} MiB | {peak:.0f} MiB | {after:.0f} MiB | {said} |")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
