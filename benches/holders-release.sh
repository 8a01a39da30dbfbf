#!/usr/bin/env bash
# What the holders of ended tables ask of slurmctld (isolate=yes with PrologFlags=Contain), on
# one Slurm release (a line of tests/releases.tsv), in that release's root:
# benches/holders-release.sh RELEASE [SECONDS] [STEPS...]
# On a 64-node test cluster (96 CPUs declared per node), one job on all 64 nodes runs STEPS
# steps at once (default 1 4 16, one round each), each `srun -N64 -n64 --tf-cluster=worker:*`
# whose task on the first node sleeps while the other 63 exit at once: every other node then
# holds one ended table per step, in the job's extern step, whose holder asks slurmctld whether
# a held table's step has ended (`slurm_job_step_layout_get`, RPC REQUEST_STEP_LAYOUT). Once
# every table is held, slurmctld's own count of those RPCs (sdiag, reset first) over SECONDS
# (default 20). Prints one JSON line per round: {"release", "nodes", "steps", "held_tables",
# "seconds", "step_layout_rpcs", "per_second", "per_node_per_second"}.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/holders-release.sh RELEASE [SECONDS] [STEPS...]}
seconds=${2:-20}
shift 2 2>/dev/null || shift $#
rounds=${*:-1 4 16}
. benches/lib.sh
enter_release "$release"
scale_cluster_up

{
    echo '#!/bin/bash'
    echo "plugin=$plugin seconds=$seconds rounds='$rounds' cluster=$repo/tests/cluster/cluster.sh"
    echo "stack=${TFC_DIR:-/tmp/tfcluster-cluster}/etc/plugstack.conf"
    cat <<'ROUNDS'
set -euo pipefail
echo "required $plugin isolate=yes port_range=12000-32767" > "$stack"
bash "$cluster" prolog-flags Contain >/dev/null
held() { # ended tables held on every node, from the holders' files
    find /run/tfcluster/held -name 'step_*.held' 2>/dev/null | wc -l
}
rpcs() { # slurmctld's count of REQUEST_STEP_LAYOUT since its last reset
    sdiag | awk '/REQUEST_STEP_LAYOUT/ {for (i = 1; i <= NF; i++) if ($i ~ /^count:/) {sub("count:", "", $i); print $i; exit}}' | grep . || echo 0
}
for steps in $rounds; do
    job=$(salloc --no-shell -N64 --exclusive -t 10 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
    [ -n "$job" ] || { echo "no allocation" >&2; exit 1; }
    for _ in $(seq "$steps"); do
        srun --jobid="$job" -N64 -n64 --overlap -t 5 --tf-cluster=worker:* \
            sh -c '[ "$SLURM_NODEID" = 0 ] && sleep 600; true' >/dev/null 2>&1 &
    done
    want=$((63 * steps))
    for _ in $(seq 1200); do [ "$(held)" -ge "$want" ] && break; sleep 0.1; done
    have=$(held)
    sdiag -r >/dev/null
    sleep "$seconds"
    count=$(rpcs)
    scancel "$job"
    wait || true
    for _ in $(seq 600); do [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break; sleep 0.1; done
    awk -v s="$steps" -v h="$have" -v t="$seconds" -v c="$count" 'BEGIN {
        printf "{\"nodes\":64,\"steps\":%d,\"held_tables\":%d,\"seconds\":%d,\"step_layout_rpcs\":%d,\"per_second\":%.1f,\"per_node_per_second\":%.2f}\n", s, h, t, c, c / t, c / t / 63 }'
done
bash "$cluster" prolog-flags '' >/dev/null
echo "required $plugin" > "$stack"
ROUNDS
} > "$out/holders.sh"
"$root" exec "$suite" bash "$out/holders.sh" > "$out/holders.jsonl"
sed "s/^{/{\"release\":\"$release\",/" "$out/holders.jsonl"
