#!/usr/bin/env python3
"""The at-scale table of docs/performance.md, a column per release, from the JSON lines
benches/scale-release.sh prints (benches/run.sh; or by hand: cat RELEASE.jsonl ... | this)."""
import json, sys
rows = [json.loads(l) for l in (open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)]
rel = list(dict.fromkeys(r["release"] for r in rows))
def of(kind):
    return {r["release"]: r for r in rows if kind in r}
w, c, m, p = of("launch"), of("cpu"), of("memory"), of("perf")
pk = of("packaged_ms")
size = next(iter(w.values()))["tf_config_bytes"]
print("| `srun -N64 -n4096 true`, median of %d interleaved runs | " % next(iter(w.values()))["runs"]
      + " | ".join(f"Slurm {r}" for r in rel) + " |")
print("|---|" + "---:|" * len(rel))
def row(name, cells):
    print(f"| {name} | " + " | ".join(cells) + " |")
row("(a) `--tf-cluster=chief:1,ps:8,worker:*,apptainer_env=auto`", [f"{w[r]['option_ms']} ms" for r in rel])
row("(b) plugin loaded, no option", [f"{w[r]['loaded_ms']} ms" for r in rel])
row("(c) no plugin", [f"{w[r]['none_ms']} ms" for r in rel])
row(f"(d) no plugin, a {size}-byte variable exported to every task", [f"{w[r]['floor_ms']} ms" for r in rel])
row(f"(e) `setenv_floor.so`: only `spank_setenv` of {size} bytes per task", [f"{w[r]['spank_ms']} ms" for r in rel])
row("(f) as (a), with `apptainer_env=always` (each variable under Apptainer's and SingularityCE's names too)",
    [f"{w[r]['apptainer_ms']} ms" if "apptainer_ms" in w[r] else "-" for r in rel])
row("(g) as (a), with `isolate=yes` (each node installs and removes the step's firewall)",
    [f"{w[r]['isolate_ms']} ms" if "isolate_ms" in w[r] else "-" for r in rel])
row("**(h) the default: `--tf-cluster=chief:1,ps:8,worker:*`, every setting at its default** (Apptainer's names only where it is installed: 26.05's root)",
    [f"**{w[r]['default_ms']} ms**" if "default_ms" in w[r] else "-" for r in rel])
row("(i) as (a), with `keras=3,tuner=yes` (JAX's, Keras's and Keras Tuner's variables too)",
    [f"{w[r]['jax_ms']} ms" if "jax_ms" in w[r] else "-" for r in rel])
row("**(j) the packaged line: `optional PLUGIN isolate=yes`, `--tf-cluster=chief:1,ps:8,worker:*`**",
    [f"**{pk[r]['packaged_ms']} ms**" if r in pk else "-" for r in rel])
row("**machine CPU per launch, j/d** (the packaged line against exporting a variable of TF_CONFIG's size yourself)",
    [f"**{pk[r]['cpu_packaged_over_d']:.3f}**" if r in pk else "-" for r in rel])
row("a/c", [f"{w[r]['a_over_c']:.3f}" for r in rel])
row("**a/d** (goal: within 1.02)", [f"**{w[r]['a_over_d']:.3f}**" for r in rel])
row("**h/d**, the default against exporting a variable of TF_CONFIG's size yourself", [f"**{w[r]['h_over_d']:.3f}**" if "h_over_d" in w[r] else "-" for r in rel])
row("h/a (goal: 1.02 without a container runtime, 1.10 with Apptainer)", [f"{w[r]['h_over_a']:.3f}" if "h_over_a" in w[r] else "-" for r in rel])
row("a/e", [f"{w[r]['a_over_e']:.3f}" for r in rel])
row("f/a", [f"{w[r]['f_over_a']:.3f}" if "f_over_a" in w[r] else "-" for r in rel])
row("machine CPU per launch, a/d", [f"{c[r]['a_over_d']:.3f} ({c[r]['a']} / {c[r]['d']} ms)" for r in rel])
row("machine CPU per launch, h/d", [f"{c[r]['h_over_d']:.3f} ({c[r]['h']} / {c[r]['d']} ms)" if "h_over_d" in c[r] else "-" for r in rel])
row("machine CPU per launch, h/a", [f"{c[r]['h_over_a']:.3f}" if "h_over_a" in c[r] else "-" for r in rel])
row("machine CPU per launch, f/a", [f"{c[r]['f_over_a']:.3f}" if "f_over_a" in c[r] else "-" for r in rel])
row("i/a, and machine CPU per launch i/a", [f"{w[r]['i_over_a']:.3f}, {c[r]['i_over_a']:.3f}" if "i_over_a" in w[r] else "-" for r in rel])
row("g/a", [f"{w[r]['g_over_a']:.3f}" if "g_over_a" in w[r] else "-" for r in rel])
row("machine CPU per launch, g/a (isolate=yes's own CPU per node)",
    [f"{c[r]['g_over_a']:.3f} ({c[r]['g_minus_a_per_node']} ms)" if "g_over_a" in c[r] else "-" for r in rel])
row("CPU samples in tfcluster's own code (perf)", [f"{p[r]['tfcluster_pct']}%" if r in p else "-" for r in rel])
row("slurmstepd resident memory per node, with / without", [f"{m[r]['option_kb']} / {m[r]['none_kb']} KiB" if m[r]["none_kb"] else "-" for r in rel])
