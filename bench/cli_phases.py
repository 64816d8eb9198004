#!/usr/bin/env python3
"""Where `drover submit --wait -- true` spends its time, phase by phase,
from the system calls of the CLI, the coordinator and the runner.

Starts target/release/drover-coordinator on a fresh SQLite file
(`--sqlite-sync normal`), pairs one workspace runner (target/release/drover)
and runs the command RUNS times (default 100) under `perf trace -a` (needs
root and `perf`, Debian's `linux-perf`), each after the runner's lease
long-poll is back. Each run is cut into phases by the calls that mark them:

    the CLI's execve → its connect → the CLI reading the submit's answer →
    the runner's clone3 of the job → the job's exit_group → the runner's
    next write (its complete) → the CLI reading the log's trailers →
    the CLI's exit_group

and the table gives each phase's median. `perf trace` slows every traced
call a little, so the total here is a little over bench/cli.py's figure;
what it is for is the split.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from cli import CLI, serving

RUNS = int(os.environ.get("RUNS", "100"))
CALLS = "sendto,recvfrom,writev,clone3,execve,exit_group,connect"
LINE = re.compile(r"\s*([\d.]+) \(.*?\): (\S+?)/(\d+)\s+(?:\.\.\. \[continued\]: )?(\w+)\(")

PHASES = [
    ("exec", "connect", "CLI start (execve to connect)"),
    ("connect", "submitted", "submit (connect to the answer read)"),
    ("submitted", "spawn", "lease, the runner's first heartbeat, the job's directory and cgroup"),
    ("spawn", "exited", "the job: clone3 to its exit (`true`, found on PATH)"),
    ("exited", "completed", "reaping and cleaning up, to the complete sent"),
    ("completed", "trailers", "complete written, the log's end to the CLI"),
    ("trailers", "exit", "CLI exit"),
    ("exec", "exit", "total"),
]


def phases(trace):
    """Marks per run, from `perf trace` output. A run starts where a
    process execs as `drover` (the runner, also `drover`, started before
    the trace)."""
    events = []
    for line in trace.splitlines():
        m = LINE.match(line)
        if m:
            events.append((float(m.group(1)), m.group(2), int(m.group(3)), m.group(4)))
    events.sort()
    runs, run, seen = [], None, set()
    for t, comm, pid, call_ in events:
        if comm == "drover" and call_ == "execve" and pid not in seen:
            seen.add(pid)
            run = {"exec": t, "pid": pid}
            runs.append(run)
            continue
        if run is None:
            continue
        if pid == run["pid"]:
            if call_ == "connect":
                run.setdefault("connect", t)
            elif call_ == "recvfrom":
                run.setdefault("submitted" if "completed" not in run else "trailers", t)
            elif call_ == "exit_group":
                run["exit"] = t
        elif comm == "true" and call_ == "exit_group":
            run.setdefault("exited", t)
        elif call_ == "clone3" and comm.startswith("tokio") and "submitted" in run:
            run.setdefault("spawn", t)
        elif call_ == "writev" and "exited" in run:
            run.setdefault("completed", t)
    return runs


def main():
    perf = shutil.which("perf")
    if perf is None:
        sys.exit("bench/cli_phases.py needs perf (apt-get install linux-perf) and root")
    with tempfile.TemporaryDirectory() as d:
        db = f"sqlite://{d}/drover.db"
        with serving(d, db, ["--sqlite-sync", "normal"], dict(os.environ), "phases") as (base, member):
            env = dict(os.environ, DROVER_URL=base, DROVER_TOKEN=member)
            submit = [CLI, "submit", "--runtime", "self:ws", "--wait", "--", "true"]
            subprocess.run(submit, env=env, check=True, capture_output=True, timeout=60)
            # The runs, one process each, as bench/cli.py makes them, each
            # once the runner waits again; the waits are outside the trace's
            # marks (they make no call perf traces here).
            script = os.path.join(d, "runs.py")
            with open(script, "w") as f:
                f.write(
                    "import subprocess, sys\n"
                    f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                    "from cli import runner_waiting\n"
                    f"for _ in range({RUNS}):\n"
                    f"    runner_waiting({base!r})\n"
                    f"    subprocess.run({submit!r}, check=True, capture_output=True, timeout=60)\n")
            out = os.path.join(d, "trace.txt")
            subprocess.run([perf, "trace", "-a", "-e", CALLS, "-o", out, "--", sys.executable, script],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                runs = phases(f.read())
    print(f"| phase ({RUNS} runs, SQLite NORMAL, under `perf trace`) | p50 ms |")
    print("|---|---|")
    for a, b, name in PHASES:
        spans = [r[b] - r[a] for r in runs if a in r and b in r]
        if len(spans) < len(runs) * 0.9:
            sys.exit(f"only {len(spans)} of {len(runs)} runs had both marks of {name!r}")
        print(f"| {name} | {statistics.median(spans):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
