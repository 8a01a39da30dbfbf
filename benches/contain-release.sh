#!/usr/bin/env bash
# What slurm.conf's PrologFlags=Contain costs with isolate=yes at scale, on one Slurm release (a
# line of tests/releases.tsv), in that release's root: benches/contain-release.sh RELEASE [RUNS]
# On a 64-node test cluster (96 CPUs declared per node), RUNS interleaved jobs of each mode,
# first without PrologFlags, then with PrologFlags=Contain (slurmctld and every slurmd
# restarted with it), each job `srun -N64 -n4096 --tf-cluster=chief:1,ps:8,worker:* true`:
#   option:  the plugin loaded, no isolate=yes;
#   isolate: isolate=yes: every node installs the step's firewall, leaves its ended table as
#            its tasks end and hands that table to a holder: with Contain the job's extern step
#            (a thread started in every job's extern step), which owns it until slurmctld says
#            the step has ended; else no one (slurmd's log says so once per node).
# Every slurmd starts with isolate=yes in plugstack.conf (as on a site with the packaged
# snippet); each mode's plugstack.conf then applies to its jobs.
# Per mode and PrologFlags: srun's wall time, the time from srun's return until every node is
# idle again (the job's end on the nodes: epilog, extern step), and the machine's CPU time over
# both. Prints one JSON line per mode and PrologFlags: {"release", "prolog_flags", "mode",
# "runs", "launch_ms", "until_idle_ms", "cpu_ms"} (medians) and "all" (every run).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/contain-release.sh RELEASE [RUNS]}
runs=${2:-5}
. benches/lib.sh
enter_release "$release"
scale_cluster_up

{
    echo '#!/bin/bash'
    echo "plugin=$plugin runs=$runs cluster=$repo/tests/cluster/cluster.sh nodes='$nodes'"
    echo "stack=${TFC_DIR:-/tmp/tfcluster-cluster}/etc/plugstack.conf"
    echo ". $repo/benches/lib.sh"
    cat <<'MODES'
spec=--tf-cluster=chief:1,ps:8,worker:*,end_with_chief=no
idle() { # until all 64 nodes are idle (60 s at most)
    for _ in $(seq 1200); do
        [ "$(sinfo -h -t idle -o %D | awk '{n += $1} END {print n + 0}')" -ge 64 ] && return
        sleep 0.05
    done
}
ms() { echo $((($2 - $1) / 1000000)); }
for flags in "" Contain; do
    echo "required $plugin isolate=yes port_range=12000-32767" > "$stack"
    bash "$cluster" prolog-flags "$flags" >/dev/null
    declare -A launch=() after=() cpu=()
    for _ in $(seq "$runs"); do
        for mode in option isolate; do
            case $mode in
                option) echo "required $plugin" > "$stack" ;;
                isolate) echo "required $plugin isolate=yes port_range=12000-32767" > "$stack" ;;
            esac
            idle
            s=$(date +%s%N) b=$(busy_ms)
            srun -N64 -n4096 "$spec" true
            r=$(date +%s%N)
            idle
            e=$(date +%s%N)
            launch[$mode]+="$(ms "$s" "$r") " after[$mode]+="$(ms "$r" "$e") " cpu[$mode]+="$(($(busy_ms) - b)) "
        done
    done
    for mode in option isolate; do
        printf '{"prolog_flags":"%s","mode":"%s","runs":%s,"launch_ms":%s,"until_idle_ms":%s,"cpu_ms":%s,"all":{"launch_ms":"%s","until_idle_ms":"%s","cpu_ms":"%s"}}\n' \
            "$flags" "$mode" "$runs" "$(median <<<"${launch[$mode]}")" "$(median <<<"${after[$mode]}")" \
            "$(median <<<"${cpu[$mode]}")" "${launch[$mode]% }" "${after[$mode]% }" "${cpu[$mode]% }"
    done
done
echo "required $plugin" > "$stack"
MODES
} > "$out/contain.sh"
"$root" exec "$suite" bash "$out/contain.sh" > "$out/contain.jsonl"
sed "s/^{/{\"release\":\"$release\",/" "$out/contain.jsonl"
