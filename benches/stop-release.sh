#!/usr/bin/env bash
# How fast tfcluster ends a step, on one Slurm release (a line of tests/releases.tsv), in that
# release's root: benches/stop-release.sh RELEASE [RUNS]
# On the test cluster, RUNS steps of each kind (docs/performance.md, "Ending a step"):
#   chief    chief:1,ps:1,worker:* over n9,n10 (4 tasks): the chief exits 0 after 1 s, the
#            others would sleep 300 s (`end_with_chief`, on by default with a ps); from the chief's exit (tests/cluster/decider.sh prints the time
#            just before it exits) to srun's return;
#   failure  chief:1,ps:1,worker:* over n9,n10: worker 0 exits 3 after 1 s; the same interval;
#   gpus     --gpus=5 over n011,n012 (3 tasks): n012 has fewer GPUs than n011's tasks need, its
#            task fails at start and stops the step; from srun's start to its return.
# Prints one JSON line per kind: {"release", "kind", "ms": [...]} (benches/stop-table.py).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/stop-release.sh RELEASE [RUNS]}
runs=${2:-7}
. benches/lib.sh
enter_release "$release"
cluster_up

# The measuring runs in the root (its srun).
{
    echo '#!/bin/bash'
    echo "# stop-steps.sh RUNS: one JSON line per kind"
    echo "decider=$repo/tests/cluster/decider.sh"
    cat <<'STEPS'
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%d", (b - a) * 1000}'; }
declare -A lines=(
    [chief]="srun -w n9,n10 -N2 -n4 --tf-cluster=chief:1,ps:1,worker:* $decider chief 0 300"
    [failure]="srun -w n9,n10 -N2 -n4 --tf-cluster=chief:1,ps:1,worker:* $decider worker 3 300"
    [gpus]="srun -w n011,n012 -N2 -n3 --gpus=5 --tf-cluster sleep 30"
)
for kind in chief failure gpus; do
    times=()
    for _ in $(seq "$1"); do
        start=$(now)
        # A step that does not end goes unmeasured, never hangs the bench.
        out=$(timeout 60 ${lines[$kind]} 2>/dev/null || true)
        end=$(now)
        from=$start
        [ "$kind" = gpus ] || from=$(sed -n 's/^DECIDER|//p' <<<"$out" | head -1)
        [ -n "$from" ] || { echo "bench: $kind: no DECIDER line" >&2; continue; }
        times+=("$(ms "$from" "$end")")
    done
    printf '{"kind": "%s", "ms": [%s]}\n' "$kind" "$(IFS=,; echo "${times[*]}")"
done
STEPS
} > "$out/stop-steps.sh"
"$root" exec "$suite" bash "$out/stop-steps.sh" "$runs" 2>/dev/null > "$out/stop.jsonl"
sed "s/^{/{\"release\": \"$release\", /" "$out/stop.jsonl"
