"""Temporal (dev server, in memory), measured like drover-bench measures Drover.

A job is one standalone activity (the server's activity.enableStandalone, on
in run.sh) put on a task queue with client.start_activity: no workflow wraps
it, so each job is one schedule, one dispatch and one completion, the nearest
thing Temporal has to a queued job. Wrapping each job in a one-activity
workflow adds workflow tasks to every job: on this machine that drained 67
jobs/s with 8 slots against about 190 for standalone activities, at 18.5
against 7-9 ms of server CPU per job.
The worker is one separate process with max_concurrent_activities=N and at
most N activity pollers (PollerBehaviorSimpleMaximum(N)); a poller asks only
when a slot is free, so one job at a time per slot, no prefetch. No workflows
are registered, so it runs no workflow tasks and has no sticky queue. The
activity is an async no-op that writes its times to the worker's stdout.
The dev server (run.sh) gives each task queue one partition
(matching.numTaskqueueRead/WritePartitions=1) instead of the default four,
which are meant to spread a busy queue over several matching hosts: with few
pollers, tasks and polls are forwarded between partitions, and Temporal's own
server gives one partition to the queues it knows one worker serves. In
interleaved 1,000-job drains that took 1 slot from 103-128 to 130-139 jobs/s
and 8 slots from 169-179 to 190-193. What is left is the dev server's own
cost: one process that persists every step, its visibility records included,
through one in-memory SQLite connection (pure-Go SQLite), about 5 ms of
server CPU per start and 7-9 per dispatch and completion, so two cores run
out near 200 jobs/s drained, and an open loop of starts and dispatches
saturates between 100 and 150 jobs/s.
Drain: M activities pre-queued, then the worker (already started and
connected) is told to go; jobs/s until the last completes, and the machine's
busy CPU-seconds (all of /proc/stat, so the server counts too) per 1,000 jobs
in that window (firstStartMs: how long after "go" the first job started).
Open loop: activities started at a fixed rate with a running worker
(concurrency 8) that has run a warm-up activity; each records its start
(≈ lease) and end against the time it was scheduled to be sent, so a sender
that falls behind shows as latency (senderLagMs: how far behind it fell). At
most 100 starts are in flight; the rest wait, their clocks running.
Each line carries the versions and settings used.

Usage: temporal_bench.py drain N M | open RATE SECONDS   (prints one JSON line)
Needs PEER_TEMPORAL: host:port of a Temporal frontend (default 127.0.0.1:7233);
PEER_TEMPORAL_DEV_FLAGS: the dev server's flags, to report them (run.sh).
"""
import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta

from temporalio import activity
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.common import ActivityIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

ADDRESS = os.environ.get("PEER_TEMPORAL", "127.0.0.1:7233")
TICK = os.sysconf("SC_CLK_TCK")
IN_FLIGHT = 100  # open loop: most starts in flight at once


@activity.defn
async def noop(sent_at: float) -> None:
    started = time.time()
    sys.stdout.write(f"{sent_at} {started} {time.time()}\n")
    sys.stdout.flush()


async def run_worker(n, queue):
    """Worker process: connect and build the worker, say ready, run on "go", exit when stdin closes."""
    client = await Client.connect(ADDRESS)
    worker = Worker(client, task_queue=queue, activities=[noop], max_concurrent_activities=n,
                    activity_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=n))
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)
    running = asyncio.create_task(worker.run())
    await loop.run_in_executor(None, sys.stdin.readline)  # EOF: the bench is done or gone
    os._exit(0 if not running.done() else 1)


class WorkerProcess:
    """The worker in a child process; a thread collects its (sent, started, ended) lines."""

    def __init__(self, n, queue):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", str(n), queue],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("worker did not start")
        self.times, self.cond = [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.times.append([float(x) for x in line.split()])
                self.cond.notify_all()

    def wait_done(self, m, timeout=3600):
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.times) >= m, timeout):
                raise SystemExit("timed out")

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def machine_cpu_seconds():
    """Busy CPU-seconds of the whole machine: user+nice+system+irq+softirq+steal."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICK


def pct(samples, p):
    samples = sorted(samples)
    return samples[round((len(samples) - 1) * p)] * 1000


def stats(samples):
    return {"p50": pct(samples, .5), "p99": pct(samples, .99), "max": pct(samples, 1)}


async def versions(client):
    cli = os.path.join(os.path.dirname(sys.executable), "temporal")
    try:
        cli = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        cli = "temporal CLI ?"
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    return (f"{cli}; server {info.server_version}; "
            f"temporalio {importlib.metadata.version('temporalio')} (Python SDK)")


def settings(n):
    return {"job": "standalone activity (client.start_activity)", "max_concurrent_activities": n,
            "activity_task_poller_behavior": f"SimpleMaximum({n})", "workflows": "none (no sticky queue)",
            "activity": "async def", "openLoopStartsInFlight": IN_FLIGHT,
            "devServer": os.environ.get("PEER_TEMPORAL_DEV_FLAGS", "?")}


async def enqueue(client, queue, i, sent_at=0.0):
    # An overloaded server answers some starts with DEADLINE_EXCEEDED; the
    # wait until one is taken counts in the latency, so retry. USE_EXISTING:
    # a retried start that had gone through finds its activity.
    while True:
        try:
            return await client.start_activity(noop, sent_at, id=f"{queue}-{i}", task_queue=queue,
                                               start_to_close_timeout=timedelta(minutes=1),
                                               rpc_timeout=timedelta(minutes=5),
                                               id_conflict_policy=ActivityIDConflictPolicy.USE_EXISTING)
        except RPCError as e:
            if e.status != RPCStatusCode.DEADLINE_EXCEEDED:
                raise


async def main():
    mode = sys.argv[1]
    if mode == "worker":
        return await run_worker(int(sys.argv[2]), sys.argv[3])
    client = await Client.connect(ADDRESS)
    queue = f"bench-{uuid.uuid4().hex[:12]}"
    if mode == "drain":
        n, m = int(sys.argv[2]), int(sys.argv[3])
        for lo in range(0, m, 200):
            await asyncio.gather(*(enqueue(client, queue, i) for i in range(lo, min(m, lo + 200))))
        worker = WorkerProcess(n, queue)
        cpu0, wcpu0, t0 = machine_cpu_seconds(), worker.cpu_seconds(), time.time()
        worker.go()
        await asyncio.to_thread(worker.wait_done, m)
        secs = time.time() - t0
        cpu, wcpu = machine_cpu_seconds() - cpu0, worker.cpu_seconds() - wcpu0
        worker.stop()
        print(json.dumps({"peer": "temporal", "mode": "drain", "workers": n, "jobs": m,
                          "jobsPerSecond": m / secs, "workerCpuSecondsPer1000": wcpu / m * 1000,
                          "machineCpuSecondsPer1000": cpu / m * 1000,
                          "firstStartMs": (min(s for _, s, _ in worker.times) - t0) * 1000,
                          "version": await versions(client), "settings": settings(n)}))
    else:
        rate, secs = int(sys.argv[2]), int(sys.argv[3])
        worker = WorkerProcess(8, queue)
        worker.go()
        await enqueue(client, queue, "warm", time.time())  # ready once it has run this one
        await asyncio.to_thread(worker.wait_done, 1)
        total = rate * secs
        start, sends, lag, in_flight = time.time(), [], [], asyncio.Semaphore(IN_FLIGHT)

        async def send(i, sent_at):  # at most IN_FLIGHT starts in flight; the rest wait here, clock running
            async with in_flight:
                await enqueue(client, queue, i, sent_at)

        for i in range(total):
            scheduled = start + i / rate
            delay = scheduled - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = max(scheduled, time.time())  # the schedule, unless a timer fired early
            lag.append(sent - scheduled)
            sends.append(asyncio.create_task(send(i, sent)))
        await asyncio.gather(*sends)
        await asyncio.to_thread(worker.wait_done, total + 1)
        worker.stop()
        times = worker.times[1:]
        lease = [s - q for q, s, _ in times]
        done = [e - q for q, _, e in times]
        print(json.dumps({"peer": "temporal", "mode": "open", "rate": rate,
                          "enqueueToLeaseMs": stats(lease), "enqueueToCompleteMs": stats(done),
                          "senderLagMs": stats(lag), "version": await versions(client),
                          "settings": settings(8)}))

if __name__ == "__main__":
    asyncio.run(main())
