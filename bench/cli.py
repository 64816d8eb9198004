#!/usr/bin/env python3
"""`drover submit --wait -- true`, from the command to its exit, while a
runner waits for work: what a person at a terminal (or a CI step) sees.

Starts target/release/drover-coordinator on a fresh SQLite file (durability
`full`, the default, then `normal`), or on DROVER_BENCH_PG (a PostgreSQL URL
of an empty database), pairs one workspace runner and runs it
(target/release/drover), then runs the command RUNS times, one after the
other, each as its own process. Prints a Markdown table: submit → exit
percentiles, and where each job's time went by its own timestamps (queued →
leased, leased → finished), so the CLI's own start-up shows as the rest.

    bench/cli.py                  (RUNS=200)

Each run starts once the runner's lease long-poll is back at the coordinator
(waited for on /healthz), then after IDLE_MS of quiet (default 0 and 50, a
row each): the kernel's work at the job's start (moving it into its cgroup)
takes longer on an idle machine, so both are reported.

DROVER_COORDINATOR and DROVER_CLI name other binaries (e.g. older builds);
RUNNER_ARGS adds flags to the runner (e.g. `--sandbox bwrap`).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from storm import call

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
COORDINATOR = os.environ.get("DROVER_COORDINATOR", os.path.join(RELEASE, "drover-coordinator"))
CLI = os.environ.get("DROVER_CLI", os.path.join(RELEASE, "drover"))
RUNS = int(os.environ.get("RUNS", "200"))
IDLE_MS = [int(x) for x in os.environ.get("IDLE_MS", "0 50").split()]


def get(base, path, token):
    status, body = call(base, "GET", path, token)
    assert status == 200, f"GET {path}: {status}"
    return body


def runner_waiting(base, deadline_s=30):
    """Waits (with a deadline) until the runner's lease long-poll is back
    at the coordinator, as a person's next command would find it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(base + "/healthz", timeout=10) as r:
            if json.load(r)["waitingLeases"] >= 1:
                return
        time.sleep(0.001)  # the poll's interval
    raise SystemExit(f"the runner did not wait for work again within {deadline_s} s")


def ms(xs, q):
    xs = sorted(xs)
    return f"{xs[int(q * (len(xs) - 1))]:.1f}"


@contextlib.contextmanager
def serving(d, db, extra, env, name):
    """A coordinator on `db` (a fresh one: bootstrapped here) with `extra`
    flags, and one workspace runner paired to it, both stopped on leaving;
    `d` a directory for the runner's state. Yields the coordinator's URL and
    a member's token."""
    member = json.loads(subprocess.check_output(
        [COORDINATOR, "admin", "bootstrap", "--workspace", name, "--email", f"{name}@bench.test",
         "--database", db, "--json"], env=env))["token"]
    coordinator = subprocess.Popen(
        [COORDINATOR, "serve", "--listen", "127.0.0.1:0", "--database", db, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    runner = None
    try:
        base = coordinator.stdout.readline().split()[-1]
        _, paired = call(base, "POST", "/v1/workspace/runners", member, {"name": name})
        runner = subprocess.Popen(
            [CLI, "runner", "--url", base, "--state-dir", os.path.join(d, "runner"),
             *os.environ.get("RUNNER_ARGS", "").split()],
            env=dict(env, DROVER_TOKEN=paired["token"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield base, member
    finally:
        if runner:
            runner.terminate()
            runner.wait(timeout=30)
        coordinator.terminate()
        coordinator.wait(timeout=30)


def run(db, label, extra, idle_ms):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ)
        if db is None:
            db = f"sqlite://{d}/drover.db"
        else:
            key = os.path.join(d, "secret.key")
            with open(key, "w") as f:
                f.write("k1:" + os.urandom(32).hex() + "\n")
            env["DROVER_SECRET_KEY_FILE"] = key
        with serving(d, db, extra, env, f"bench{idle_ms}") as (base, member):
            cli_env = dict(env, DROVER_URL=base, DROVER_TOKEN=member)
            submit = [CLI, "submit", "--runtime", "self:ws", "--wait", "--", "true"]
            # A first job: the runner is up and waiting (and caches are warm).
            subprocess.run(submit, env=cli_env, check=True, capture_output=True, timeout=60)
            total, queued, ran, ids = [], [], [], []
            for _ in range(RUNS):
                runner_waiting(base)
                time.sleep(idle_ms / 1000)  # the quiet this row measures after
                t0 = time.perf_counter()
                out = subprocess.run(submit, env=cli_env, check=True, capture_output=True, text=True, timeout=60)
                total.append((time.perf_counter() - t0) * 1000)
                ids.append(out.stdout.split()[0])
            for job_id in ids:
                job = get(base, f"/v1/jobs/{job_id}", member)
                queued.append(job["startedAt"] - job["createdAt"])
                ran.append(job["finishedAt"] - job["startedAt"])
            return (f"| {label} | {idle_ms} | {RUNS} | {ms(total, 0.5)} | {ms(total, 0.9)} | {ms(total, 0.99)} "
                    f"| {ms(queued, 0.5)} | {ms(ran, 0.5)} |")


def main():
    print("| database | idle ms | runs | submit → exit p50 ms | p90 | p99 | queued → leased p50 ms | leased → finished p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    pg = os.environ.get("DROVER_BENCH_PG")
    setups = [(pg, "PostgreSQL", [])] if pg else [
        (None, f"SQLite {sync.upper()}", ["--sqlite-sync", sync]) for sync in ("full", "normal")
    ]
    for db, label, extra in setups:
        for idle_ms in IDLE_MS:
            print(run(db, label, extra, idle_ms), flush=True)
    # What the measuring itself costs: the same call, for a program that
    # does nothing. It is inside every figure above. (HARNESS=0: not measured.)
    if os.environ.get("HARNESS") == "0":
        return
    spent = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(["/bin/true"], check=True, capture_output=True, text=True, timeout=60)
        spent.append((time.perf_counter() - t0) * 1000)
    print(f"\n(The harness: starting `/bin/true` the same way takes {ms(spent, 0.5)} ms at p50, "
          "included in each submit → exit figure.)")


if __name__ == "__main__":
    sys.exit(main())
