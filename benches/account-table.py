#!/usr/bin/env python3
"""benches/account.sh's lines, and the table docs/performance.md shows of them.

  account-table.py launch RELEASE MODE WALL_MS NODES_CPU_US < timing lines
      one launch as a JSON line: its wall time, the CPU of all 64 nodes' cgroups, and (for
      `timed`) the sum of its `tfcluster timing:` lines per process, hook and phase
  account-table.py table < JSON lines (of one or more releases)
      per release: medians over the launches, per node (the 64 nodes' CPU / 64), with the
      spread (min-max), and each hook's and phase's CPU per node against the difference from
      the floor
"""
import json
import re
import statistics
import sys

NODES = 64
LINE = re.compile(r"tfcluster timing: (\S+) ([^:]+): (\d+) us CPU(?: \((.*)\))?")


def launch(release, mode, wall, cpu):
    phases = {}
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        hook, context, total, parts = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        hook = hook.removeprefix("slurm_spank_")
        if hook == "task_init":
            context = "tasks"
        key = f"{context} {hook}"
        phases.setdefault(key, {"total": 0})
        phases[key]["total"] += total
        for part in (parts or "").split(", "):
            if part:
                name, us = part.rsplit(" ", 1)
                phases[key][name] = phases[key].get(name, 0) + int(us)
    print(json.dumps({"release": release, "mode": mode, "wall_ms": int(wall),
                      "nodes_cpu_us": int(cpu), "timing_us": phases}))


def spread(values):
    return f"{min(values)}-{max(values)}"


def table():
    runs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
    for release in sorted({r["release"] for r in runs}):
        of = lambda mode: [r for r in runs if r["release"] == release and r["mode"] == mode]
        per_node = lambda mode: [round(r["nodes_cpu_us"] / NODES / 1000, 1) for r in of(mode)]
        walls = lambda mode: [r["wall_ms"] for r in of(mode)]
        print(f"\n### Slurm {release} ({len(of('floor'))} rounds)\n")
        print("| launch | CPU per node, ms: median (spread) | wall, ms: median (spread) |")
        print("|---|---:|---:|")
        for mode in [m for m in ("floor", "packaged", "timed", "none", "loaded", "unisolated") if of(m)]:
            print(f"| {mode} | {statistics.median(per_node(mode)):.1f} ({spread(per_node(mode))}) | "
                  f"{statistics.median(walls(mode)):.0f} ({spread(walls(mode))}) |")
        diff = statistics.median(per_node("packaged")) - statistics.median(per_node("floor"))
        print(f"\npackaged - floor: {diff:.1f} ms of CPU per node; "
              f"packaged / floor: {statistics.median(per_node('packaged')) / statistics.median(per_node('floor')):.3f} (CPU), "
              f"{statistics.median(walls('packaged')) / statistics.median(walls('floor')):.3f} (wall)\n")
        keys = sorted({(k, p) for r in of("timed") for k, v in r["timing_us"].items() for p in v})
        print("| process, hook | phase | CPU per node, ms (median of launches) |")
        print("|---|---|---:|")
        accounted = []
        for key, phase in keys:
            values = [r["timing_us"].get(key, {}).get(phase, 0) / NODES / 1000 for r in of("timed")]
            if key.startswith("srun"):
                values = [v for v in values]  # srun is one process: shown per launch / 64 too
            print(f"| {key} | {phase} | {statistics.median(values):.2f} |")
        for r in of("timed"):
            accounted.append(sum(v["total"] for v in r["timing_us"].values()) / NODES / 1000)
        print(f"\ntimed hooks, all: {statistics.median(accounted):.1f} ms per node "
              f"(spread {min(accounted):.1f}-{max(accounted):.1f}), against {diff:.1f} ms measured")


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(*sys.argv[2:6])
    else:
        table()
