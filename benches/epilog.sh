#!/usr/bin/env bash
# What exporting slurm_spank_job_epilog costs every job (isolate=yes needs the hook; slurmd
# then runs a "spank epilog" slurmstepd at the end of every job on every node, whether or not
# the job used --tf-cluster). Back-to-back jobs of `srun -N4 true` on the exclusive partition,
# so that each waits for the previous one's nodes to finish their epilog:
#   hook:    slurmd started with the plugin in plugstack.conf (the hook runs, isolate off)
#   isolate: the same with isolate=yes (the hook lists the node's tables too)
#   none:    slurmd started with an empty plugstack.conf (no spank epilog at all)
# slurmd decides at start whether to run the spank epilog, so each mode gets its own cluster
# start; the modes alternate ROUNDS times, JOBS jobs each. Output: one JSON line.
# Usage: benches/epilog.sh PLUGIN.so [JOBS] [ROUNDS]
set -euo pipefail
plugin=${1:?usage: benches/epilog.sh PLUGIN.so [JOBS] [ROUNDS]}
jobs=${2:-20}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cluster=$here/../tests/cluster/cluster.sh
cd /tmp

per_job_ms() { # cluster up words... -> mean ms per job
    bash "$cluster" down >/dev/null 2>&1 || true
    bash "$cluster" up "$@" >/dev/null 2>&1 || die "the cluster did not come up"
    srun -N4 true 2>/dev/null # the first job after a start pays for the nodes' first contact
    local s=$(date +%s%N)
    for _ in $(seq "$jobs"); do srun -N4 true 2>/dev/null; done
    echo $(( ($(date +%s%N) - s) / 1000000 / jobs ))
}
declare -A t
for _ in $(seq "$rounds"); do
    t[hook]+="$(per_job_ms "$plugin") "
    t[isolate]+="$(per_job_ms "$plugin" isolate=yes) "
    t[none]+="$(per_job_ms) "
done
bash "$cluster" down >/dev/null 2>&1 || true
h=$(median <<<"${t[hook]}") i=$(median <<<"${t[isolate]}") n=$(median <<<"${t[none]}")
printf '{"epilog":"back-to-back srun -N4 true jobs, ms per job (median of %s rounds of %s)","hook_ms":%s,"isolate_ms":%s,"none_ms":%s,"all":{"hook":"%s","isolate":"%s","none":"%s"}}\n' \
    "$rounds" "$jobs" "$h" "$i" "$n" "${t[hook]% }" "${t[isolate]% }" "${t[none]% }"
