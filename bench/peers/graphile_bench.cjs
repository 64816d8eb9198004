// graphile-worker on PostgreSQL, measured like drover-bench measures Drover.
// One job at a time per slot, no batching, as graphile-worker is configured
// by default: concurrency N, no local queue (localQueue.size -1), jobs
// completed and failed one at a time (completeJobBatchDelay and
// failJobBatchDelay -1), new jobs announced by LISTEN/NOTIFY, pollInterval
// 2 s (the default) only for jobs scheduled in the future, and the default
// pool of 10 connections. graphile-worker warns that a pool smaller than the
// concurrency "may lead to non-optimal performance", and its own performance
// set-up uses concurrency + 1; on this 2-core machine a pool of 65 drained
// 64 slots 10-15 % slower than 10 (more PostgreSQL backends contending), so
// the default stays (the pool size is in each line's settings).
// Drain: a worker with concurrency N started, each of its N slots through its
// first (empty) fetch and a warm-up job run; then M no-op jobs are queued with
// add_job in one transaction, and the clock starts at its commit (where the
// jobs and add_job's NOTIFYs appear at once), so it counts neither the worker
// starting up nor the jobs being queued. jobs/s until the
// last completes, and the machine's busy CPU-seconds (all of /proc/stat) and
// PostgreSQL's processes' per 1,000 jobs in that window, with the share of
// the machine's CPU time that was steal.
// Open loop: jobs added at a fixed rate to a ready worker (concurrency 8); each
// job records when it started (≈ lease) and ended, against the time it was
// scheduled to be added (or when it was added, if a timer fired early), so an
// adder that falls behind shows as latency (senderLagMs: how far behind).
// Each line carries the versions and settings used.
// Usage: node graphile_bench.cjs drain N M | open RATE SECONDS  (one JSON line)
// Needs PEER_PG_URL: a database graphile-worker may install its schema in.
const path = require("path");
const { EventEmitter } = require("events");
const modules = path.join(__dirname, ".local/node/node_modules");
const { run, makeWorkerUtils, Logger } = require(path.join(modules, "graphile-worker"));
const gwVersion = require(path.join(modules, "graphile-worker/package.json")).version;
// Errors only: per-job INFO lines would measure the console, not the queue.
const logger = new Logger(() => (level, message) => { if (level === "error") console.error(message); });
const { performance } = require("perf_hooks");
const fs = require("fs");
const { execSync } = require("child_process");

const connectionString = process.env.PEER_PG_URL;
const now = () => performance.timeOrigin + performance.now();
// Busy CPU-seconds of the whole machine: user+nice+system+irq+softirq+steal.
const TICK = Number(execSync("getconf CLK_TCK"));
const machineCpuSeconds = () => {
  const v = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].split(/\s+/).slice(1, 9).map(Number);
  return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICK;
};
// CPU-seconds of PostgreSQL's processes on this machine: each live one's,
// and the postmaster's exited children's (as drover-bench counts them).
const postgresCpuSeconds = () => {
  const stat = (pid) => {
    try {
      const t = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = t.slice(t.indexOf("(") + 1, t.lastIndexOf(")"));
      return { comm, f: t.slice(t.lastIndexOf(")") + 2).split(" ").map(Number) };
    } catch { return null; }
  };
  let ticks = 0;
  for (const pid of fs.readdirSync("/proc").filter((n) => /^[0-9]+$/.test(n))) {
    const s = stat(pid);
    if (!s || s.comm !== "postgres") continue;
    // After the name: state ppid … utime(11) stime(12) cutime(13) cstime(14).
    ticks += s.f[11] + s.f[12];
    if (stat(s.f[1])?.comm !== "postgres") ticks += s.f[13] + s.f[14];
  }
  return ticks / TICK;
};
// The machine's (steal, all) ticks: steal is CPU time the hypervisor gave
// to other guests (drover-bench reports its share the same way).
const cpuTicks = () => {
  const v = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].split(/\s+/).slice(1, 9).map(Number);
  return [v[7], v.reduce((a, b) => a + b, 0)];
};
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.round((s.length - 1) * p)]; };
const stats = (xs) => ({ p50: pct(xs, 0.5), p99: pct(xs, 0.99), max: pct(xs, 1) });
const POLL_INTERVAL = 2000; // graphile-worker's default
const MAX_POOL_SIZE = 10; // graphile-worker's (node-postgres') default

async function main() {
  const [mode, a, b] = process.argv.slice(2);
  const utils = await makeWorkerUtils({ connectionString, logger });
  await utils.migrate();
  await utils.withPgClient((c) => c.query("delete from graphile_worker._private_jobs"));
  const pg = await utils.withPgClient(async (c) => {
    const { rows } = await c.query("select current_setting('server_version') as v, current_setting('synchronous_commit') as sc");
    return rows[0];
  });
  const version = `graphile-worker ${gwVersion}, node ${process.versions.node}, PostgreSQL ${pg.v}`;
  const settings = (n, pool) => ({ concurrency: n, maxPoolSize: pool, pollInterval: POLL_INTERVAL,
    localQueueSize: -1, completeJobBatchDelay: -1, failJobBatchDelay: -1, preparedStatements: true,
    synchronous_commit: pg.sc, newJobs: "LISTEN/NOTIFY" });
  const times = [];
  let done = 0, warm = 0;
  const taskList = {
    noop: async (payload) => { const s = now(); times.push([payload.sentAt, s, now()]); done++; },
    warm: async () => { warm++; },
  };
  const waitUntil = (ok) => new Promise((resolve) => { const t = setInterval(() => { if (ok()) { clearInterval(t); resolve(); } }, 2); });
  // Starts a worker with `n` slots and returns once each slot has been through
  // its first fetch and a warm-up job has run (so LISTEN is in place).
  const startReady = async (n, pool) => {
    const events = new EventEmitter();
    let empty = 0;
    events.on("worker:getJob:empty", () => { empty++; });
    const runner = await run({ connectionString, concurrency: n, maxPoolSize: pool, noHandleSignals: true,
      pollInterval: POLL_INTERVAL, taskList, logger, events });
    await waitUntil(() => empty >= n);
    await utils.addJob("warm", {});
    await waitUntil(() => warm >= 1);
    return runner;
  };
  if (mode === "drain") {
    const n = Number(a), m = Number(b), pool = MAX_POOL_SIZE;
    const runner = await startReady(n, pool);
    let cpu0, mcpu0, pg0, ticks0, t0;
    await utils.withPgClient(async (c) => {
      // Queued in one transaction: the jobs, and add_job's NOTIFYs, appear at its commit.
      await c.query("begin");
      await c.query("select graphile_worker.add_job('noop', json_build_object('sentAt', 0)) from generate_series(1, $1)", [m]);
      cpu0 = process.cpuUsage(); mcpu0 = machineCpuSeconds(); pg0 = postgresCpuSeconds(); ticks0 = cpuTicks(); t0 = now();
      await c.query("commit");
    });
    await waitUntil(() => done >= m);
    const secs = (now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0), mcpu = machineCpuSeconds() - mcpu0;
    const pgCpu = postgresCpuSeconds() - pg0;
    const ticks = cpuTicks(), stealShare = (ticks[0] - ticks0[0]) / Math.max(1, ticks[1] - ticks0[1]);
    await runner.stop();
    const firstStartMs = Math.min(...times.map(([, s]) => s)) - t0;
    console.log(JSON.stringify({ peer: "graphile-worker", mode, workers: n, jobs: m, jobsPerSecond: m / secs,
      workerCpuSecondsPer1000: (cpu.user + cpu.system) / 1e6 / m * 1000, machineCpuSecondsPer1000: mcpu / m * 1000,
      pgCpuSecondsPer1000: pgCpu / m * 1000, stealShare, firstStartMs, version, settings: settings(n, pool) }));
  } else {
    const rate = Number(a), secs = Number(b), total = rate * secs, pool = MAX_POOL_SIZE;
    const runner = await startReady(8, pool);
    const start = now();
    const adds = [], lag = [];
    for (let i = 0; i < total; i++) {
      const scheduled = start + (i * 1000) / rate;
      const wait = scheduled - now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      // A timer may fire a little early (Node's timers count whole ms); then
      // the job's clock starts when it is really added.
      const sent = Math.max(scheduled, now());
      lag.push(sent - scheduled);
      adds.push(utils.addJob("noop", { sentAt: sent }));
    }
    await Promise.all(adds);
    await waitUntil(() => done >= total);
    await runner.stop();
    const lease = times.map(([q, s]) => s - q), complete = times.map(([q, , e]) => e - q);
    console.log(JSON.stringify({ peer: "graphile-worker", mode, rate,
      enqueueToLeaseMs: stats(lease), enqueueToCompleteMs: stats(complete), senderLagMs: stats(lag),
      version, settings: settings(8, pool) }));
  }
  await utils.release();
}
main().catch((e) => { console.error(e); process.exit(1); });
