#!/usr/bin/env bash
# End-to-end launch cost on the running test cluster (benches/run.sh brings it up).
#   launch: `srun -N4 -n32 true` and `srun -N4 -n4 true` in three modes, interleaved run by
#           run, each once every node is idle: the plugin loaded and --tf-cluster given; loaded, option not given; not in
#           plugstack.conf at all. Prints the median wall time of each and the ratios.
#   memory: slurmstepd's resident memory on one node (8 tasks) in the same three modes.
# Output: JSON lines. Usage: benches/e2e.sh PLUGIN.so [RUNS]
set -euo pipefail
plugin=${1:?usage: benches/e2e.sh PLUGIN.so [RUNS]}
runs=${2:-15}
. "$(dirname "$0")/lib.sh"
dir=${TFC_DIR:-/tmp/tfcluster-cluster}
stack=$dir/etc/plugstack.conf
cd /tmp

mode_stack() {
    case $1 in
        option|loaded) echo "required $plugin" > "$stack" ;;
        none) : > "$stack" ;;
    esac
}
mode_flag() { [ "$1" = option ] && echo "--tf-cluster=chief:1,ps:1,worker:*" || true; }

ms() { echo $(( $(date +%s%N) / 1000000 )); }
# Until the cluster's 4 nodes are idle and no job is left (60 s at most): a job otherwise waits for the previous
# one's nodes to leave COMPLETING (a --tf-cluster step that tfcluster ends leaves them there a
# moment longer), and the launch would time that wait.
idle() {
    for _ in $(seq 1200); do
        [ "$(sinfo -h -t idle -o %D | awk '{n += $1} END {print n + 0}')" -ge 4 ] \
            && [ -z "$(squeue -h -o %i)" ] && return
        sleep 0.05
    done
}

for n in 32 4; do
    declare -A times=()
    for i in $(seq "$runs"); do
        for mode in option loaded none; do
            mode_stack "$mode"
            idle
            t0=$(ms)
            srun -N4 -n"$n" $(mode_flag "$mode") true
            times[$mode]+="$(( $(ms) - t0 )) "
        done
    done
    o=$(median <<<"${times[option]}")
    l=$(median <<<"${times[loaded]}")
    z=$(median <<<"${times[none]}")
    awk -v n="$n" -v o="$o" -v l="$l" -v z="$z" -v r="$runs" 'BEGIN {
        printf "{\"launch\":\"srun -N4 -n%d true\",\"runs\":%d,\"option_ms\":%s,\"loaded_ms\":%s,\"none_ms\":%s,\"ratio_option_vs_none\":%.3f,\"ratio_option_vs_loaded\":%.3f}\n",
            n, r, o, l, z, o / z, o / l }'
    unset times
done

# slurmstepd's memory while 8 tasks sleep on one node.
node=$(sinfo -h -N -o '%N' | head -1)
for mode in option loaded none; do
    mode_stack "$mode"
    srun -w "$node" -N1 -n8 $(mode_flag "$mode") sleep 3 &
    sleep 1.5
    rss=0
    for pid in $(ip netns pids "tfc-$node"); do
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmstepd ]; then
            kb=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
            [ "${kb:-0}" -gt "$rss" ] && rss=$kb
        fi
    done
    wait
    echo "{\"memory\":\"$mode\",\"slurmstepd_rss_kb\":$rss}"
done
mode_stack option
