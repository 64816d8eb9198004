"""Celery + Redis, measured like drover-bench measures Drover.

One job at a time per worker slot, as Celery's own guide ("Optimizing",
"Reserve one task at a time") recommends: task_acks_late and a prefetch
multiplier of 1, so a worker with N slots holds at most N unacknowledged
tasks. The worker is one process with a thread pool of N slots, -O fair,
no gossip, mingle or heartbeat.

Drain: M no-op tasks are pre-queued on the default queue while the worker
runs, answers a ping and has run a warm-up task on a queue of its own; the
clock starts when it is told to consume the default queue (remote control
add_consumer), so it does not count the worker starting up. jobs/s until the
last task completes, and the machine's busy CPU-seconds (all of /proc/stat)
per 1,000 jobs in that window. Open loop: tasks sent at a fixed rate to a
ready worker (8 slots); each task records when it started (≈ lease) and
ended, against the time it was scheduled to be sent, so a sender that falls
behind shows as latency (senderLagMs says how far behind it fell).

Each line carries the versions and settings used.

Usage: celery_bench.py drain N M | open RATE SECONDS   (prints one JSON line)
"""
import importlib.metadata
import json
import os
import subprocess
import sys
import time

import redis
from celery import Celery

BROKER = os.environ.get("PEER_REDIS", "redis://127.0.0.1:6390/0")
WARM_QUEUE = "bench-warm"  # the worker's own queue until it is told to go
NODE = "bench@localhost"
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


@app.task(name="warm")
def warm():
    r.incr("bench:warm")


def start_worker(n):
    return subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "celery"), "-A", "celery_bench", "worker",
         "-n", NODE, "-Q", WARM_QUEUE,
         "--pool=threads", f"--concurrency={n}", "--prefetch-multiplier=1", "-O", "fair",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        cwd=os.path.dirname(os.path.abspath(__file__)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(worker, timeout=60):
    """Until the worker answers a ping and has run a warm-up task."""
    end = time.time() + timeout
    while not app.control.ping(destination=[NODE], timeout=0.5):
        if worker.poll() is not None or time.time() > end:
            raise SystemExit("celery worker did not start")
    warm.apply_async(queue=WARM_QUEUE)
    while int(r.get("bench:warm") or 0) < 1:
        if time.time() > end:
            raise SystemExit("celery worker did not run the warm-up task")
        time.sleep(0.005)


def go():
    """Tells the ready worker to consume the default queue, where the jobs are.

    Its Redis consumer is blocked in BRPOP on its own queue (for up to a
    second, kombu's default), so a warm-up task sent there once the consumer
    is added wakes it to listen on both queues at once.
    """
    if not app.control.add_consumer("celery", destination=[NODE], reply=True, limit=1, timeout=10):
        raise SystemExit("celery worker did not answer add_consumer")
    warm.apply_async(queue=WARM_QUEUE)


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


def stats(samples):
    return {"p50": pct(samples, .5), "p99": pct(samples, .99), "max": pct(samples, 1)}


def versions():
    v = importlib.metadata.version
    return (f"celery {v('celery')}, kombu {v('kombu')}, redis-py {v('redis')}, "
            f"redis-server {r.info('server')['redis_version']}")


def settings(n):
    return {"pool": "threads", "concurrency": n, "worker_prefetch_multiplier": 1, "task_acks_late": True,
            "optimization": "fair", "gossip/mingle/heartbeat": "off", "task_ignore_result": True,
            "broker": "redis, loopback, no persistence (--save '' --appendonly no)"}


def main():
    r.flushdb()
    mode = sys.argv[1]
    if mode == "drain":
        n, m = int(sys.argv[2]), int(sys.argv[3])
        worker = start_worker(n)
        wait_ready(worker)
        for _ in range(m):
            noop.apply_async(args=[0.0])
        wcpu0, mcpu0, t0 = cpu_seconds(worker.pid), machine_cpu_seconds(), time.time()
        go()
        wait_done(m)
        secs = time.time() - t0
        mcpu, wcpu = machine_cpu_seconds() - mcpu0, cpu_seconds(worker.pid) - wcpu0
        worker.terminate()
        worker.wait()
        first = min(s for _, s, _ in (json.loads(x) for x in r.lrange("bench:times", 0, -1)))
        print(json.dumps({"peer": "celery", "mode": "drain", "workers": n, "jobs": m,
                          "jobsPerSecond": m / secs, "workerCpuSecondsPer1000": wcpu / m * 1000,
                          "machineCpuSecondsPer1000": mcpu / m * 1000, "firstStartMs": (first - t0) * 1000,
                          "version": versions(), "settings": settings(n)}))
    else:
        rate, secs = int(sys.argv[2]), int(sys.argv[3])
        worker = start_worker(8)
        wait_ready(worker)
        go()
        total = rate * secs
        start, lag = time.time(), []
        for i in range(total):
            scheduled = start + i / rate
            delay = scheduled - time.time()
            if delay > 0:
                time.sleep(delay)
            sent = max(scheduled, time.time())  # the schedule, unless a timer fired early
            lag.append(sent - scheduled)
            noop.apply_async(args=[sent])
        wait_done(total)
        worker.terminate()
        worker.wait()
        times = [json.loads(x) for x in r.lrange("bench:times", 0, -1)]
        lease = [s - q for q, s, _ in times]
        done = [e - q for q, _, e in times]
        print(json.dumps({"peer": "celery", "mode": "open", "rate": rate,
                          "enqueueToLeaseMs": stats(lease), "enqueueToCompleteMs": stats(done),
                          "senderLagMs": stats(lag), "version": versions(), "settings": settings(8)}))


if __name__ == "__main__":
    main()
