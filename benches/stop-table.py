"""The table of benches/stop-release.sh's JSON lines: per release, each kind's median and range
in milliseconds (docs/performance.md, "Ending a step")."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
kinds = ["chief", "failure", "gpus"]
print("| release | the chief's exit → srun returns | a worker's failure → srun returns | a node short of GPUs: srun's start → return |")
print("|---|---:|---:|---:|")
for release in dict.fromkeys(r["release"] for r in rows):
    cells = []
    for kind in kinds:
        ms = next((r["ms"] for r in rows if r["release"] == release and r["kind"] == kind), [])
        cells.append(f"{statistics.median(ms):.0f} ms ({min(ms)}–{max(ms)}, {len(ms)} runs)" if ms else "-")
    print(f"| {release} | " + " | ".join(cells) + " |")
