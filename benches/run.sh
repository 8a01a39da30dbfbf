#!/usr/bin/env bash
# Every performance figure in docs/performance.md, measured in one run
# (`make bench`; root on Debian 12, like the tests). Prints Markdown tables.
#   1. per task, in process (benches/per_task.rs) against copying the output;
#   2. TensorFlow's SlurmClusterResolver on the same layouts, and TensorFlow's import time;
#   3. end to end on the 4-node test cluster: launch time with/without the option/plugin, and
#      slurmstepd's memory (benches/e2e.sh); what the job epilog hook costs every job
#      (benches/epilog.sh);
#   4. the size of the plugin;
#   5. cost at scale on a 64-node test cluster, on every release in its Debian root:
#      `srun -N64 -n4096 true` with and without the plugin and against the floors any TF_CONFIG
#      delivery pays, and with isolate=yes (benches/scale-release.sh, benches/scale.sh);
#   6. a heterogeneous step's start on every release: slurmctld's layout requests, srun's time
#      (benches/het-release.sh);
#   7. how fast a step ends on every release: after the chief's exit, after a failure, and when a
#      node cannot start its task (benches/stop-release.sh);
#   8. what the holders of ended tables ask of slurmctld (isolate=yes, PrologFlags=Contain), at
#      64 nodes with 1, 4 and 16 steps' tables held on every node (benches/holders-release.sh);
#   9. what isolate=yes costs one node per step, phase by phase, and handing its table over as
#      libnftables' JSON, with each Debian release's libnftables (benches/firewall.sh);
#  10. what each look at a step's ports costs on this machine (benches/port-looks.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh
cargo build --release --quiet
plugin=$root/target/release/libtfcluster.so
python=$(bash tests/tensorflow/setup.sh)
tmp=$(mktemp -d)

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
echo

cargo bench --quiet --bench per_task -- --json > "$tmp/rust.jsonl"
"$python" benches/tf_resolver.py $(sed 's/.*"tasks":\([0-9]*\).*/\1/' "$tmp/rust.jsonl") 2>/dev/null > "$tmp/tf.jsonl"
"$python" - "$tmp/rust.jsonl" "$tmp/tf.jsonl" <<'PY'
import json, sys
rust = {r["tasks"]: r for r in map(json.loads, open(sys.argv[1]))}
tf = {r["tasks"]: r for r in map(json.loads, open(sys.argv[2]))}
print("| tasks in the step | TF_CONFIG bytes | one task, cold | plugin, per task | with Apptainer's names | with `keras=3,tuner=yes` | copy of the output | plugin / copy | TensorFlow's resolver | resolver / plugin |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n, r in rust.items():
    t = tf[n]
    print(f"| {n} | {r['bytes']} | {r['cold_ns']/1e3:.1f} us | {r['per_task_ns']/1e3:.1f} us | {r['apptainer_ns']/1e3:.1f} us | {r['keras3_ns']/1e3:.1f} us | {r['copy_ns']/1e3:.2f} us "
          f"| {r['ratio']:.1f}x | {t['resolver_ns']/1e3:.0f} us "
          f"| {t['resolver_ns']/r['per_task_ns']:.0f}x |")
PY
echo

. benches/lib.sh
median_ms() { # command; median wall time of 7 runs
    local t=()
    for _ in 1 2 3 4 5 6 7; do
        local s=$(date +%s%N); "$@" >/dev/null 2>&1; t+=($(( ($(date +%s%N) - s) / 1000000 )))
    done
    printf '%s\n' "${t[@]}" | median
}
echo "| process start-up | median of 7 |"
echo "|---|---:|"
echo "| \`python -c pass\` | $(median_ms "$python" -c pass) ms |"
echo "| \`python -c 'import tensorflow'\` | $(median_ms "$python" -c 'import tensorflow') ms |"
echo

trap '"$root/tests/cluster/cluster.sh" down' EXIT
TFC_CPU_NODES= tests/cluster/cluster.sh up "$plugin" 2>/dev/null
bash benches/e2e.sh "$plugin" "${BENCH_RUNS:-15}" > "$tmp/e2e.jsonl"
"$python" - "$tmp/e2e.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| launch (median) | --tf-cluster given | plugin loaded, no option | no plugin | given / no plugin |")
print("|---|---:|---:|---:|---:|")
for r in rows:
    if "launch" in r:
        print(f"| `{r['launch']}` ({r['runs']} runs each, interleaved) | {r['option_ms']:.0f} ms | {r['loaded_ms']:.0f} ms | {r['none_ms']:.0f} ms | {r['ratio_option_vs_none']:.3f} |")
print()
mem = {r["memory"]: r["slurmstepd_rss_kb"] for r in rows if "memory" in r}
print("| slurmstepd resident memory, 8 tasks on one node | --tf-cluster given | plugin loaded, no option | no plugin |")
print("|---|---:|---:|---:|")
print(f"| VmRSS | {mem['option']} KiB | {mem['loaded']} KiB | {mem['none']} KiB |")
PY
echo

# What the exported job epilog hook costs every job (it restarts the cluster per mode).
bash benches/epilog.sh "$plugin" "${BENCH_EPILOG_JOBS:-20}" "${BENCH_EPILOG_ROUNDS:-3}" > "$tmp/epilog.jsonl"
"$python" - "$tmp/epilog.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
print("| back-to-back `srun -N4 true` jobs, ms per job (median of rounds; every round) | epilog hook, isolate off | isolate=yes | no spank epilog |")
print("|---|---:|---:|---:|")
print(f"| {r['hook_ms']} / {r['isolate_ms']} / {r['none_ms']} | {r['all']['hook']} | {r['all']['isolate']} | {r['all']['none']} |")
PY
echo

# (Before the scale runs, which rebuild target/release for each release.)
echo "plugin: $(stat -c %s "$plugin") bytes ($(basename "$plugin"), release build)"
echo

tests/cluster/cluster.sh down 2>/dev/null
# At scale, on every release (each in its Debian root, as its tests run).
for release in ${BENCH_SCALE_RELEASES:-$(awk '!/^#/ && NF {print $1}' tests/releases.tsv)}; do
    bash benches/scale-release.sh "$release" "${BENCH_SCALE_RUNS:-7}" 2>/dev/null
done > "$tmp/scale.jsonl"
"$python" benches/scale-table.py "$tmp/scale.jsonl"
echo
# A heterogeneous step's start, on every release.
for release in ${BENCH_HET_RELEASES:-$(awk '!/^#/ && NF {print $1}' tests/releases.tsv)}; do
    bash benches/het-release.sh "$release" "${BENCH_HET_RUNS:-11}" 2>/dev/null
done > "$tmp/het.jsonl"
"$python" benches/het-table.py "$tmp/het.jsonl"
echo
# How fast a step ends, on every release.
for release in ${BENCH_STOP_RELEASES:-$(awk '!/^#/ && NF {print $1}' tests/releases.tsv)}; do
    bash benches/stop-release.sh "$release" "${BENCH_STOP_RUNS:-7}" 2>/dev/null
done > "$tmp/stop.jsonl"
"$python" benches/stop-table.py "$tmp/stop.jsonl"
# What the holders ask of slurmctld, on one release.
bash benches/holders-release.sh "${BENCH_HOLDERS_RELEASE:-24.11}" "${BENCH_HOLDERS_SECONDS:-20}" 2>/dev/null > "$tmp/holders.jsonl"
"$python" - "$tmp/holders.jsonl" <<'PY'
import json, sys
print("| release | nodes | steps held per node | tables held | step-layout requests in the window | per second | per node and second |")
print("|---|---:|---:|---:|---:|---:|---:|")
for r in map(json.loads, open(sys.argv[1])):
    print(f"| {r['release']} | {r['nodes']} | {r['steps']} | {r['held_tables']} | {r['step_layout_rpcs']} in {r['seconds']} s | {r['per_second']} | {r['per_node_per_second']} |")
PY
# One node's firewall, phase by phase, with each Debian release's libnftables.
bash benches/firewall.sh "${BENCH_FIREWALL_RUNS:-100}" 2>/dev/null
# What each look at a step's ports costs.
"$python" benches/port-looks.py
rm -rf "$tmp"
