"""Drover against its peers: ratios Drover ÷ peer, one Markdown table per backend.

Usage: python3 bench/compare.py DROVER_JSON PEERS_JSONL

DROVER_JSON is drover-bench's BENCH_SECTION=fleet JSON, {"fleet": [{"backend":
..., "drain1": ..., "open200": ...}, ...]}, or any file whose last line that
starts with '{' is that JSON (a saved run's output or a results .md file).
PEERS_JSONL is bench/peers/run.sh's output, one JSON line per peer and run.
Rows: drain jobs/s with 1, 8 and 64 workers; jobs per machine CPU-second
(1000 / machineCpuSecondsPer1000) in each drain; open loop at 200 and 1,000
jobs/s, enqueue→lease p50 and p99 (the peers' enqueue→start). What is missing
on either side shows as "–". The peers' versions and settings, as their
drivers recorded them in each line ("version", "settings"), are printed first;
a setting that differs between runs (the concurrency) shows its values in run
order, joined by "/".
"""
import json
import sys

DRAINS = (1, 8, 64)
RATES = (200, 1000)


def load_drover(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except ValueError:
        lines = [l for l in text.splitlines() if l.lstrip().startswith("{")]
        if not lines:
            raise SystemExit(f"{path}: no JSON line found")
        return json.loads(lines[-1])


def load_peers(path):
    """{peer: {("drain", workers) or ("open", rate): record}}, peers in file order; later lines win."""
    peers = {}
    for line in open(path):
        if not line.lstrip().startswith("{"):
            continue
        rec = json.loads(line)
        key = ("drain", rec.get("workers")) if rec.get("mode") == "drain" else ("open", rec.get("rate"))
        peers.setdefault(rec.get("peer", "?"), {})[key] = rec
    return peers


def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, (int, float)) else None


def per_cpu_second(cpu_per_1000):
    return 1000 / cpu_per_1000 if cpu_per_1000 else None


def rows():
    """(label, Drover value from a backend entry, peer value from the peer's records)."""
    for n in DRAINS:
        yield (f"drain, {n} worker{'s' if n > 1 else ''}: jobs/s",
               lambda b, n=n: get(b, f"drain{n}", "jobsPerSecond"),
               lambda p, n=n: get(p.get(("drain", n)), "jobsPerSecond"))
    for n in DRAINS:
        yield (f"drain, {n} worker{'s' if n > 1 else ''}: jobs per machine CPU-second",
               lambda b, n=n: per_cpu_second(get(b, f"drain{n}", "machineCpuSecondsPer1000")),
               lambda p, n=n: per_cpu_second(get(p.get(("drain", n)), "machineCpuSecondsPer1000")))
    for rate in RATES:
        for q in ("p50", "p99"):
            yield (f"open {rate} jobs/s: enqueue→lease {q}, ms",
                   lambda b, r=rate, q=q: get(b, f"open{r}", "enqueueToLeaseMs", q),
                   lambda p, r=rate, q=q: get(p.get(("open", r)), "enqueueToLeaseMs", q))


def fmt(x):
    if x is None:
        return "–"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def peer_settings(peers):
    """Markdown: each peer's versions and settings, merged over its runs."""
    lines = ["### Peers: versions and settings\n", "| peer | versions | settings |", "|---|---|---|"]
    for name, recs in peers.items():
        versions, settings = [], {}
        for rec in recs.values():
            if rec.get("version") and rec["version"] not in versions:
                versions.append(rec["version"])
            for k, v in (rec.get("settings") or {}).items():
                v = json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else str(v)
                if v not in settings.setdefault(k, []):
                    settings[k].append(v)
        settings_text = "; ".join(f"{k}={'/'.join(v)}" for k, v in settings.items())
        lines.append(f"| {cell(name)} | {cell('; '.join(versions) or 'not recorded')} | "
                     f"{cell(settings_text or 'not recorded')} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1])
    drover, peers = load_drover(sys.argv[1]), load_peers(sys.argv[2])
    names = list(peers)
    if names:
        print(peer_settings(peers))
    for backend in drover.get("fleet", []):
        print(f"### Drover ({backend.get('backend', '?')}) ÷ peer\n")
        print("| measure | Drover | " + " | ".join(f"÷ {p}" for p in names) + " |")
        print("|---|---:|" + "---:|" * len(names))
        for label, ours, theirs in rows():
            d = ours(backend)
            cells = []
            for p in names:
                v = theirs(peers[p])
                cells.append(fmt(d / v if d is not None and v else None))
            print(f"| {label} | {fmt(d)} | " + " | ".join(cells) + " |")
        print("\nThroughput and jobs per CPU-second: a ratio > 1 means Drover does more. "
              "Latency: a ratio < 1 means Drover is faster (the peer's figure is enqueue→start, "
              "from the time each job was scheduled to be sent).\n")


if __name__ == "__main__":
    main()
