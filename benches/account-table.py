#!/usr/bin/env python3
"""benches/account.sh's lines, and the table docs/performance.md shows of them.

  account-table.py launch RELEASE MODE WALL_MS NODES_CPU_US < timing lines
      one launch as a JSON line: its wall time, the CPU of all 64 nodes' cgroups, and (for
      `timed`) the sum of its `tfcluster timing:` lines per process, hook and phase
  account-table.py table < JSON lines (of one or more releases)
      per release: medians over the launches, per node (the 64 nodes' CPU / 64), with the
      spread (min-max), and each hook's and phase's CPU per node against the difference from
      the floor
  account-table.py wide < JSON lines (of every release)
      the same as docs/performance.md's two tables, a column per release
"""
import json
import math
import re
import statistics
import sys

NODES = 64
LINE = re.compile(r"tfcluster timing: (\S+) ([^:]+): (\d+) us CPU(?: \(([^)]*)\))?"
                  r"(?: (\d+) faults(?: \(([^)]*)\))?)?")


def add_parts(into, total, parts):
    """A line's total and its `phase N` parts, added into a hook's sums."""
    into["total"] = into.get("total", 0) + total
    for part in (parts or "").split(", "):
        if part:
            name, n = part.rsplit(" ", 1)
            into[name] = into.get(name, 0) + int(n)


def launch(release, mode, wall, cpu):
    phases, faults = {}, {}
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        hook, context = m.group(1), m.group(2)
        hook = hook.removeprefix("slurm_spank_")
        if hook == "task_init":
            context = "tasks"
        key = f"{context} {hook}"
        add_parts(phases.setdefault(key, {}), int(m.group(3)), m.group(4))
        if m.group(5) is not None:
            add_parts(faults.setdefault(key, {}), int(m.group(5)), m.group(6))
    print(json.dumps({"release": release, "mode": mode, "wall_ms": int(wall),
                      "nodes_cpu_us": int(cpu), "timing_us": phases, "faults": faults}))


def median_interval(values):
    """The interval between the k-th least and the k-th greatest of `values` that holds their
    distribution's median with at least 95 % confidence (k as large as that allows; 1 for fewer
    than 6 values), and that confidence: each value falls on either side of the median with even
    odds, so the median lies outside only when k values or more fall on one side."""
    n, ordered = len(values), sorted(values)
    def confidence(k):
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
    k = 1
    while k + 1 <= n // 2 and confidence(k + 1) >= 0.95:
        k += 1
    return ordered[k - 1], ordered[n - k], confidence(k)


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
        for mode in [m for m in ("floor", "spank", "packaged", "timed", "none", "loaded", "unisolated", "watchless", "apptainerless") if of(m)]:
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


# docs/performance.md's phase rows: each row's label, and the (process and hook, phase) pairs
# it adds up.
PHASES = [
    ("plan the step (layout, roles, ports, TF_CONFIGs)", [("slurmstepd init_post_opt", "plan")]),
    ("claim the node's ports (`/run/tfcluster`, the kernel's listeners)",
     [("slurmstepd init_post_opt", "claims"), ("slurmstepd exit", "claims")]),
    ("install the step's table (the kernel's messages; libnftables, then let go, before 0.16.0)",
     [("slurmstepd init_post_opt", "firewall")]),
    ("start the workers' watcher (its first look at connections)",
     [("slurmstepd init_post_opt", "watcher")]),
    ("each task: read its ids and variables", [("tasks task_init", "read")]),
    ("each task: its environment (TF_CONFIG rendered)", [("tasks task_init", "environment")]),
    ("each task: set its TF_CONFIG (into its own entry from 0.16.1; Slurm's `spank_setenv` before)", [("tasks task_init", "TF_CONFIG")]),
    ("each task: the same under Apptainer's name (a node with Apptainer: 26.05's root)",
     [("tasks task_init", "APPTAINERENV_TF_CONFIG")]),
    ("as the step ends: the ended table in, the step's table removed (libnftables again before 0.16.0)",
     [("slurmstepd exit", "firewall")]),
    ("the workers' watcher's thread (from the tasks' forks to the step's end)",
     [("slurmstepd thread_workers", "total")]),
    ("the job epilog", [("prolog or epilog job_epilog", "total")]),
]


def wide():
    runs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
    releases = sorted({r["release"] for r in runs})
    of = lambda rel, mode: [r for r in runs if r["release"] == rel and r["mode"] == mode]
    cpu = lambda rel, mode: [r["nodes_cpu_us"] / NODES / 1000 for r in of(rel, mode)]
    wall = lambda rel, mode: [r["wall_ms"] for r in of(rel, mode)]
    med = statistics.median
    rounds = sorted({len(of(rel, "floor")) for rel in releases})
    head = " | ".join(f"Slurm {rel}" for rel in releases)
    line = lambda label, cells: print(f"| {label} | " + " | ".join(cells) + " |")
    has = lambda mode: all(of(rel, mode) for rel in releases)
    print(f"| CPU per node and step, ms: median (spread of {', '.join(map(str, rounds))}) | {head} |")
    print("|---|" + "---:|" * len(releases))
    for label, mode in [("(d) no plugin, a TF_CONFIG-sized variable exported", "floor"),
                        ("(p) **the packages' line**", "packaged"),
                        ("(u) `optional PLUGIN` alone (no `isolate`)", "unisolated"),
                        ("(b) the packages' line, another build (`baseline`)", "baseline"),
                        ("(p) with `timing=yes`", "timed")]:
        if not has(mode):
            continue
        line(label, [f"{med(cpu(rel, mode)):.0f} ({min(cpu(rel, mode)):.0f}-{max(cpu(rel, mode)):.0f})"
                     for rel in releases])
    # Each round's launches ran one after another (every other round in reverse order): a
    # round's own ratio leaves out what drifts between rounds (the shared VM's speed).
    def rounds_ratio(rel, a, f):
        return [x / y for x, y in zip(f(rel, a), f(rel, "floor"))]
    def interval(rel, a, f):
        r = rounds_ratio(rel, a, f)
        least, most, _ = median_interval(r)
        return f"{med(r):.3f} ({least:.3f}-{most:.3f})"
    # Against a goal: the whole interval under it, over it, or the goal inside it.
    def against(rel, a, f, goal):
        least, most, _ = median_interval(rounds_ratio(rel, a, f))
        if most <= goal:
            return f"within {goal}"
        if least > goal:
            return f"over {goal}"
        return f"{goal} inside"
    confidence = sorted({f"{100 * median_interval(rounds_ratio(rel, 'packaged', cpu))[2]:.0f} %"
                         for rel in releases})
    line(f"p/d, CPU per node: the rounds' median (the interval that holds it with {', '.join(confidence)} confidence)",
         [interval(rel, "packaged", cpu) for rel in releases])
    line("p/d, wall time of the launch, the same", [interval(rel, "packaged", wall) for rel in releases])
    if has("unisolated"):
        line("u/d, CPU per node, the same", [interval(rel, "unisolated", cpu) for rel in releases])
    if has("baseline"):
        line("b/d, CPU per node, the same", [interval(rel, "baseline", cpu) for rel in releases])
    line("p/d against the goal of 1.05: the whole interval within it, over it, or 1.05 inside it",
         [against(rel, "packaged", cpu, 1.05) for rel in releases])
    line("p/d's wall time against 1.05, the same", [against(rel, "packaged", wall, 1.05) for rel in releases])
    if has("unisolated"):
        line("u/d against the goal of 1.02, the same", [against(rel, "unisolated", cpu, 1.02) for rel in releases])
    paired = lambda rel, a, b="floor": [x - y for x, y in zip(cpu(rel, a), cpu(rel, b))]
    line("p - d, CPU per node, ms, round by round",
         [", ".join(f"{d:.0f}" for d in paired(rel, "packaged")) for rel in releases])
    if has("unisolated"):
        line("u - d, the same", [", ".join(f"{d:.0f}" for d in paired(rel, "unisolated")) for rel in releases])
    if has("baseline"):
        line("b - p, the same (what the change saves)",
             [", ".join(f"{d:.0f}" for d in paired(rel, "baseline", "packaged")) for rel in releases])
        def saved(rel):
            d = paired(rel, "baseline", "packaged")
            least, most, _ = median_interval(d)
            return f"{med(d):.1f} ({least:.1f} to {most:.1f})"
        line("b - p, the rounds' median (the same confidence)", [saved(rel) for rel in releases])
    if not has("timed"):
        return
    print(f"\n| phase (`timing=yes`), CPU per node and step, ms, median of {', '.join(map(str, rounds))} | {head} |")
    print("|---|" + "---:|" * len(releases))
    phase = lambda r, pairs: sum(r["timing_us"].get(k, {}).get(p, 0) for k, p in pairs) / NODES / 1000
    for label, pairs in PHASES:
        line(label, [f"{med([phase(r, pairs) for r in of(rel, 'timed')]):.2f}" for rel in releases])
    total = lambda r: sum(v["total"] for v in r["timing_us"].values()) / NODES / 1000
    setenv = [("tasks task_init", "TF_CONFIG"), ("tasks task_init", "APPTAINERENV_TF_CONFIG")]
    cells = []
    for rel in releases:
        t = [total(r) for r in of(rel, "timed")]
        cells.append(f"{med(t):.1f} ({min(t):.1f}-{max(t):.1f})")
    line("**every hook, all** (spread)", cells)
    line("every hook but setting TF_CONFIG",
         [f"{med([total(r) - phase(r, setenv) for r in of(rel, 'timed')]):.1f}" for rel in releases])
    line("p - d, measured per node",
         [f"{med(cpu(rel, 'packaged')) - med(cpu(rel, 'floor')):.1f}" for rel in releases])


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(*sys.argv[2:6])
    elif sys.argv[1] == "wide":
        wide()
    else:
        table()
