"""Celery + Redis, measured like drover-bench measures Drover.

One job at a time per worker: prefetch multiplier 1, acks late, a thread pool
of N workers. Drain: M no-op tasks pre-queued, then N workers start; jobs/s
until the last completes, and the machine's busy CPU-seconds (all of
/proc/stat) per 1,000 jobs in that window. Open loop: tasks sent at a fixed
rate; each task records when it started (≈ lease) and ended, against its send
time.

Usage: celery_bench.py drain N M | open RATE SECONDS   (prints one JSON line)
"""
import json
import os
import subprocess
import sys
import time

import redis
from celery import Celery

BROKER = os.environ.get("PEER_REDIS", "redis://127.0.0.1:6390/0")
app = Celery("celery_bench", broker=BROKER)
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
r = redis.Redis.from_url(BROKER)


@app.task(name="noop")
def noop(sent_at):
    started = time.time()
    r.rpush("bench:times", json.dumps([sent_at, started, time.time()]))
    r.incr("bench:done")


def start_worker(n):
    return subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "celery"), "-A", "celery_bench", "worker",
         "--pool=threads", f"--concurrency={n}", "--prefetch-multiplier=1", "-O", "fair",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_done(m, timeout=3600):
    end = time.time() + timeout
    while int(r.get("bench:done") or 0) < m:
        if time.time() > end:
            raise SystemExit("timed out")
        time.sleep(0.005)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds():
    """Busy CPU-seconds of the whole machine: user+nice+system+irq+softirq+steal."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def pct(samples, p):
    samples = sorted(samples)
    return samples[round((len(samples) - 1) * p)] * 1000


def main():
    r.flushdb()
    mode = sys.argv[1]
    if mode == "drain":
        n, m = int(sys.argv[2]), int(sys.argv[3])
        for _ in range(m):
            noop.apply_async(args=[time.time()])
        mcpu0, t0 = machine_cpu_seconds(), time.time()
        worker = start_worker(n)
        wait_done(m)
        secs = time.time() - t0
        mcpu = machine_cpu_seconds() - mcpu0
        cpu = cpu_seconds(worker.pid)
        worker.terminate()
        worker.wait()
        print(json.dumps({"peer": "celery", "mode": "drain", "workers": n, "jobs": m,
                          "jobsPerSecond": m / secs, "workerCpuSecondsPer1000": cpu / m * 1000,
                          "machineCpuSecondsPer1000": mcpu / m * 1000}))
    else:
        rate, secs = int(sys.argv[2]), int(sys.argv[3])
        worker = start_worker(8)
        time.sleep(2)  # let the worker connect before the clock starts
        total = rate * secs
        start = time.time()
        for i in range(total):
            delay = start + i / rate - time.time()
            if delay > 0:
                time.sleep(delay)
            noop.apply_async(args=[time.time()])
        wait_done(total)
        worker.terminate()
        worker.wait()
        times = [json.loads(x) for x in r.lrange("bench:times", 0, -1)]
        lease = [s - q for q, s, _ in times]
        done = [e - q for q, _, e in times]
        print(json.dumps({"peer": "celery", "mode": "open", "rate": rate,
                          "enqueueToLeaseMs": {"p50": pct(lease, .5), "p99": pct(lease, .99), "max": pct(lease, 1)},
                          "enqueueToCompleteMs": {"p50": pct(done, .5), "p99": pct(done, .99), "max": pct(done, 1)}}))


if __name__ == "__main__":
    main()
