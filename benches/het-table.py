#!/usr/bin/env python3
"""The table of docs/performance.md's heterogeneous steps from benches/het-release.sh's JSON
lines (one per release, component count and mode): slurmctld's layout requests per node of a
step, their mean time in slurmctld, and srun's median wall time with and without tfcluster."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
nodes = {2: 4, 4: 4}  # nodes of the bench's step for K components (benches/het-release.sh)
print("| Slurm | components | layout requests per node and step | mean time in slurmctld | srun, without | srun, with tfcluster | with / without |")
print("|---|---:|---:|---:|---:|---:|---:|")
for release in dict.fromkeys(r["release"] for r in rows):
    for k in sorted({r["components"] for r in rows if r["release"] == release}):
        by = {r["mode"]: r for r in rows if r["release"] == release and r["components"] == k}
        with_, without = by["with"], by["without"]
        per_node = with_["layout_rpcs"] / with_["steps"] / nodes[k]
        w, wo = statistics.median(with_["wall_ms"]), statistics.median(without["wall_ms"])
        print(f"| {release} | {k} | {per_node:.2f} | {with_['rpc_us']} µs | {wo:.0f} ms | {w:.0f} ms | {w / wo:.3f} |")
