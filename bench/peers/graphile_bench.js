// graphile-worker on PostgreSQL, measured like drover-bench measures Drover.
// Drain: M no-op jobs pre-queued, then a worker with concurrency N (one job
// at a time per slot, no batching); jobs/s until the last completes, and the
// machine's busy CPU-seconds (all of /proc/stat) per 1,000 jobs in that window.
// Open loop: jobs added at a fixed rate to a running worker (concurrency 8);
// each job records when it started (≈ lease) and ended.
// Usage: node graphile_bench.js drain N M | open RATE SECONDS  (one JSON line)
// Needs PEER_PG_URL: a database graphile-worker may install its schema in.
const path = require("path");
const { run, makeWorkerUtils, Logger } = require(path.join(__dirname, ".local/node/node_modules/graphile-worker"));
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
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.round((s.length - 1) * p)]; };

async function main() {
  const [mode, a, b] = process.argv.slice(2);
  const utils = await makeWorkerUtils({ connectionString, logger });
  await utils.migrate();
  await utils.withPgClient((c) => c.query("delete from graphile_worker._private_jobs"));
  const times = [];
  let done = 0;
  const taskList = { noop: async (payload) => { const s = now(); times.push([payload.sentAt, s, now()]); done++; } };
  const waitFor = (n) => new Promise((resolve) => { const t = setInterval(() => { if (done >= n) { clearInterval(t); resolve(); } }, 2); });
  if (mode === "drain") {
    const n = Number(a), m = Number(b);
    await utils.withPgClient((c) => c.query(
      "select graphile_worker.add_job('noop', json_build_object('sentAt', 0)) from generate_series(1, $1)", [m]));
    const cpu0 = process.cpuUsage(), mcpu0 = machineCpuSeconds();
    const t0 = now();
    const runner = await run({ connectionString, concurrency: n, noHandleSignals: true, pollInterval: 2000, taskList, logger });
    await waitFor(m);
    const secs = (now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0), mcpu = machineCpuSeconds() - mcpu0;
    await runner.stop();
    console.log(JSON.stringify({ peer: "graphile-worker", mode, workers: n, jobs: m, jobsPerSecond: m / secs,
      workerCpuSecondsPer1000: (cpu.user + cpu.system) / 1e6 / m * 1000, machineCpuSecondsPer1000: mcpu / m * 1000 }));
  } else {
    const rate = Number(a), secs = Number(b), total = rate * secs;
    const runner = await run({ connectionString, concurrency: 8, noHandleSignals: true, pollInterval: 2000, taskList, logger });
    const start = now();
    const adds = [];
    for (let i = 0; i < total; i++) {
      const wait = start + (i * 1000) / rate - now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      adds.push(utils.addJob("noop", { sentAt: now() }));
    }
    await Promise.all(adds);
    await waitFor(total);
    await runner.stop();
    const lease = times.map(([q, s]) => s - q), complete = times.map(([q, , e]) => e - q);
    console.log(JSON.stringify({ peer: "graphile-worker", mode, rate,
      enqueueToLeaseMs: { p50: pct(lease, 0.5), p99: pct(lease, 0.99), max: pct(lease, 1) },
      enqueueToCompleteMs: { p50: pct(complete, 0.5), p99: pct(complete, 0.99), max: pct(complete, 1) } }));
  }
  await utils.release();
}
main().catch((e) => { console.error(e); process.exit(1); });
