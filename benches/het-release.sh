#!/usr/bin/env bash
# What a heterogeneous step costs at its start, on one Slurm release (a line of
# tests/releases.tsv), in that release's root: benches/het-release.sh RELEASE [RUNS]
# On the 6-node test cluster (4 GPU nodes, 2 CPU nodes), inside one allocation of 4 nodes, a
# heterogeneous step of K components (K = 2: cpu1 : n9,n10,n011; K = 4: one node each), each
# task `sleep 1`, with and then without --tf-cluster, RUNS steps each. Each node of a
# --tf-cluster step asks slurmctld for every component's layout: slurmctld's own count of those
# requests (sdiag, REQUEST_STEP_LAYOUT) and their mean time there, and srun's wall time, median.
# Prints one JSON line per (K, mode), with the release (benches/het-table.py makes the table).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/het-release.sh RELEASE [RUNS]}
runs=${2:-11}
. benches/lib.sh
enter_release "$release"
cluster_up end_with_chief=no

# The measuring runs inside the allocation, in the root (its srun, its sdiag).
cat > "$out/het-steps.sh" <<'EOF'
#!/bin/bash
# het-steps.sh RUNS: JSON lines {components, mode, layout_rpcs, rpc_us, wall_ms[]}
runs=$1
layouts() { sdiag | awk '/REQUEST_STEP_LAYOUT/ {for (i = 1; i <= NF; i++) if ($i ~ /^(count|total_time):/) {split($i, f, ":"); printf "%s ", f[2]}}'; }
declare -A steps=(
    [2]="-N1 -n1 -w cpu1 sleep 1 : -N3 -n3 -w n9,n10,n011 sleep 1"
    [4]="-N1 -n1 -w cpu1 sleep 1 : -N1 -n1 -w cpu2 sleep 1 : -N1 -n1 -w n9 sleep 1 : -N1 -n1 -w n10 sleep 1"
)
for k in 2 4; do
    for mode in with without; do
        opt=""; [ $mode = with ] && opt="--tf-cluster"
        read -r c0 t0 <<<"$(layouts)"
        walls=()
        for _ in $(seq "$runs"); do
            s=$(date +%s%N)
            # --tf-cluster on the first component: Slurm hands every component the last value.
            srun $opt ${steps[$k]} >/dev/null 2>&1 || echo "step failed" >&2
            walls+=($(( ($(date +%s%N) - s) / 1000000 )))
        done
        read -r c1 t1 <<<"$(layouts)"
        n=$(( ${c1:-0} - ${c0:-0} )); us=0
        [ "$n" -gt 0 ] && us=$(( (${t1:-0} - ${t0:-0}) / n ))
        printf '{"components": %s, "mode": "%s", "steps": %s, "layout_rpcs": %s, "rpc_us": %s, "wall_ms": [%s]}\n' \
            "$k" "$mode" "$runs" "$n" "$us" "$(IFS=,; echo "${walls[*]}")"
    done
done
EOF
"$root" exec "$suite" salloc -p mixed -w cpu1,cpu2,n9,n10,n011 -N5 --exclusive bash "$out/het-steps.sh" "$runs" \
    2>/dev/null > "$out/het.jsonl"
sed "s/^{/{\"release\": \"$release\", /" "$out/het.jsonl"
