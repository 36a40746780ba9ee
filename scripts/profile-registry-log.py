#!/usr/bin/env python3
"""Profiles a sync from distribution's own logs (issue 42): per request kind, the count and the
summed handler time; the client's TCP connections (distinct remote ports); and the idle time,
when neither registry was handling a request of the tool. Input: the registries' stderr logs at
log level info (`FERRY_BENCH_REGISTRY_LOG=info FERRY_BENCH_KEEP=1 cargo bench --bench compare`
copies them into the work directory as <tool>-<label>-{source,target}-registry.log).

usage: scripts/profile-registry-log.py SOURCE.log TARGET.log [USER_AGENT_PREFIX]
"""
import re
import sys
from datetime import datetime

FIELD = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|\S+)')


def kind(method, uri):
    path, _, query = uri.partition("?")
    if path in ("/v2/", "/v2"):
        return "ping /v2/"
    if method == "GET" and path.endswith("/tags/list"):
        return "tag list"
    for m in ("HEAD", "GET", "PUT"):
        if method == m and "/manifests/" in path:
            return f"manifest {m}"
    if "/blobs/uploads/" in path:
        if method == "POST":
            return "mount POST" if "mount=" in query else "upload POST"
        return f"upload {method}"
    if "/blobs/" in path:
        return f"blob {method}"
    return "other"


def parse(path, agent):
    out = []
    for line in open(path, errors="replace"):
        if "response completed" not in line:
            continue
        f = {k: v.strip('"') for k, v in FIELD.findall(line)}
        if not f.get("http.request.useragent", "").startswith(agent):
            continue
        t = f["time"]
        # Go's RFC 3339 with nanoseconds: keep microseconds.
        m = re.match(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-].*)", t)
        frac = (m.group(2) or "0")[:6].ljust(6, "0")
        end = datetime.fromisoformat(m.group(1)).timestamp() + int(frac) / 1e6
        d = f.get("http.response.duration", "0s")
        secs = float(re.match(r"[\d.]+", d).group()) * {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1}[re.sub(r"[\d.]+", "", d)]
        out.append({
            "end": end, "start": end - secs, "secs": secs,
            "kind": kind(f["http.request.method"], f["http.request.uri"]),
            "port": f.get("http.request.remoteaddr", ""),
        })
    return out


def main():
    agent = sys.argv[3] if len(sys.argv) > 3 else "ferry/"
    source = parse(sys.argv[1], agent)
    # The bench seeds the source with ferry's client: a sync never writes to its source, so
    # everything up to the source's last write is the seeding, not the sync.
    writes = [i for i, r in enumerate(source) if r["kind"] in ("upload PUT", "manifest PUT")]
    if writes:
        source = source[writes[-1] + 1:]
    sides = {"source": source, "target": parse(sys.argv[2], agent)}
    everything = sorted(sides["source"] + sides["target"], key=lambda r: r["start"])
    if not everything:
        print("no requests of", agent)
        return
    t0 = everything[0]["start"]
    t1 = max(r["end"] for r in everything)
    print(f"span {t1 - t0:.2f} s (first request start to last response), user agent {agent}")
    for side, reqs in sides.items():
        print(f"\n{side}: {len(reqs)} requests, {len({r['port'] for r in reqs})} connections, handler time {sum(r['secs'] for r in reqs):.2f} s")
        kinds = {}
        for r in reqs:
            k = kinds.setdefault(r["kind"], [0, 0.0, 0.0])
            k[0] += 1
            k[1] += r["secs"]
            k[2] = max(k[2], r["secs"])
        print(f"  {'kind':<16}{'count':>7}{'sum s':>9}{'mean ms':>9}{'max ms':>9}")
        for name, (n, s, mx) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
            print(f"  {name:<16}{n:>7}{s:>9.2f}{1000 * s / n:>9.2f}{1000 * mx:>9.1f}")
    # Idle: no request of the tool in a handler on either registry.
    idle, gaps, edge = 0.0, [], t0
    for r in everything:
        if r["start"] > edge:
            gaps.append((r["start"] - edge, edge - t0))
            idle += r["start"] - edge
        edge = max(edge, r["end"])
    gaps.sort(reverse=True)
    print(f"\nidle (neither registry handling a request): {idle:.2f} s of {t1 - t0:.2f} s in {len(gaps)} gaps")
    print("  longest gaps (length s @ offset s):", ", ".join(f"{g:.3f}@{o:.2f}" for g, o in gaps[:8]))
    # Time in flight by number of requests being handled at once.
    events = sorted([(r["start"], 1) for r in everything] + [(r["end"], -1) for r in everything])
    level, last, hist = 0, t0, {}
    for t, d in events:
        hist[level] = hist.get(level, 0) + (t - last)
        level += d
        last = t
    print("  time by requests in handlers at once:", ", ".join(f"{k}: {v:.2f}s" for k, v in sorted(hist.items()) if v > 0.005))


main()
