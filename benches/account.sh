#!/usr/bin/env bash
# The account of a 64-node launch under the packaged line, on one Slurm release (a line of
# tests/releases.tsv), in that release's root: benches/account.sh RELEASE [ROUNDS]
#   1. builds the release plugin from the root's own headers (benches/lib.sh);
#   2. starts the 64-node test cluster with each node in a CPU accounting cgroup of its own
#      (TFC_NODE_CPU=1: its slurmd, slurmstepds, tasks and epilogs);
#   3. runs ROUNDS interleaved rounds (default 5; every other one in reverse order) of
#      `srun -N64 -n4096 true` from idle nodes:
#      `packaged`: the packages' line (`optional PLUGIN isolate=yes`) with
#                  --tf-cluster=chief:1,ps:8,worker:*,end_with_chief=no;
#      `timed`:    the same line with timing=yes (each hook logs its CPU by phase);
#      `floor`:    no plugin, a variable as large as that step's TF_CONFIG exported to every task;
#      (and with TFC_ACCOUNT_MODES="...": `loaded`, the packaged line without the option, and
#      `none`, no plugin and no variable: what loading the plugin costs where no step asks;
#      `unisolated`, the option under `optional PLUGIN` alone: what isolate=yes adds;
#      `apptainerless`, the packaged line with the job's apptainer_env=no: what carrying each
#      variable under Apptainer's names too costs, on a node with Apptainer;
#      `watchless`, the option under `optional PLUGIN` alone with the job's fail_fast=no: what
#      the workers' watcher, a thread of each slurmstepd while it forks the tasks, costs;
#      `spank`, no tfcluster but benches/setenv_floor.c, which only hands every task a
#      variable of TF_CONFIG's size with spank_setenv: the floor of any delivery through SPANK;
#      `baseline`, the packaged line with another build of tfcluster for the same release, the
#      plugin file TFC_ACCOUNT_BASELINE names (benches/baseline.sh builds one from a commit):
#      a change's before and after, in the same rounds);
#      each launch's wall time, and the CPU each node's cgroup used from before the launch until
#      every node is idle again (the epilog included);
#   4. adds up the `timed` launches' `tfcluster timing:` lines (slurmd's log of each node, srun's
#      output) per process, hook and phase, per node and launch.
# With TFC_ACCOUNT_PERF=DIR, each launch runs under `perf record -a -g` (999 Hz) into
# DIR/MODE-N.data: benches/perf-kinds.py DIR says where slurmstepd's CPU went, by kind.
# Output: JSON lines (benches/account-table.py makes docs/performance.md's table of them).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/account.sh RELEASE [ROUNDS]}
rounds=${2:-5}
. benches/lib.sh
dir=${TFC_DIR:-/tmp/tfcluster-cluster}
stack=$dir/etc/plugstack.conf
enter_release "$release"
export TFC_NODE_CPU=1
scale_cluster_up
in_root() { "$root" exec "$suite" "$@"; }
spec=--tf-cluster=chief:1,ps:8,worker:*,end_with_chief=no
step=(-N64 -n4096)

echo "optional $plugin isolate=yes" > "$stack"
size=$(in_root sh -c "cd /tmp && srun ${step[*]} $spec sh -c '[ \"\$SLURM_PROCID\" = 0 ] && printf %s \"\${#TF_CONFIG}\"; true'")
floor=$(head -c "$size" /dev/zero | tr '\0' x)
# The SPANK floor plugin (mode `spank`), built on the host against tfcluster's own header for
# the plugin's release.
spank_so=$out/setenv_floor.so
cc -shared -fPIC -O2 -I spank-headers \
    -DPLUGIN_VERSION="$(( (10#${release%.*} << 16) | (10#${release#*.} << 8) ))" \
    -o "$spank_so" benches/setenv_floor.c

idle() { # until every node is idle (60 s at most)
    for _ in $(seq 1200); do
        [ "$(in_root sinfo -h -t idle -o %D | awk '{n += $1} END {print n + 0}')" -ge 64 ] && return
        sleep 0.05
    done
}
node_cpu() { in_root bash "$repo/tests/cluster/cluster.sh" node-cpu | awk '{s += $2} END {print s}'; }
# The nodes' logs' sizes now: what a launch adds comes after.
log_sizes() { stat -c '%n %s' "$dir"/log/slurmd-tfc-node-*.log; }
run() { # mode -> JSON line
    case $1 in
        packaged) echo "optional $plugin isolate=yes" > "$stack" ;;
        timed) echo "optional $plugin isolate=yes timing=yes" > "$stack" ;;
        floor|none) : > "$stack" ;;
        spank) echo "optional $spank_so $size" > "$stack" ;;
        loaded|apptainerless) echo "optional $plugin isolate=yes" > "$stack" ;;
        baseline) echo "optional ${TFC_ACCOUNT_BASELINE:?baseline: set TFC_ACCOUNT_BASELINE} isolate=yes" > "$stack" ;;
        unisolated|watchless) echo "optional $plugin" > "$stack" ;;
    esac
    idle
    local sizes before s wall after err=$out/account-srun.err
    sizes=$(log_sizes)
    before=$(node_cpu)
    s=$(date +%s%N)
    local recorded=()
    if [ -n "${TFC_ACCOUNT_PERF:-}" ]; then
        launches=$((launches + 1))
        recorded=(perf record -q -a -g -F 999 -o "$TFC_ACCOUNT_PERF/$1-$launches.data" --)
    fi
    case $1 in
        packaged|timed|unisolated|baseline) "${recorded[@]}" "$root" exec "$suite" sh -c "cd /tmp && srun ${step[*]} $spec true" 2> "$err" ;;
        apptainerless) "${recorded[@]}" "$root" exec "$suite" sh -c "cd /tmp && srun ${step[*]} $spec,apptainer_env=no true" 2> "$err" ;;
        watchless) "${recorded[@]}" "$root" exec "$suite" sh -c "cd /tmp && srun ${step[*]} $spec,fail_fast=no true" 2> "$err" ;;
        floor) "${recorded[@]}" "$root" exec "$suite" env TFC_FLOOR="$floor" sh -c "cd /tmp && srun ${step[*]} true" 2> "$err" ;;
        loaded|none|spank) "${recorded[@]}" "$root" exec "$suite" sh -c "cd /tmp && srun ${step[*]} true" 2> "$err" ;;
    esac
    wall=$((($(date +%s%N) - s) / 1000000))
    idle
    sleep 1 # the epilog's last lines
    after=$(node_cpu)
    local lines=""
    if [ "$1" = timed ]; then
        lines=$(while read -r file size; do tail -c "+$((size + 1))" "$file"; done <<<"$sizes" | grep -h 'tfcluster timing:' || true)
        lines+=$'\n'$(grep -h 'tfcluster timing:' "$err" || true)
    fi
    python3 "$repo/benches/account-table.py" launch "$release" "$1" "$wall" "$((after - before))" <<<"$lines"
}
launches=0
[ -z "${TFC_ACCOUNT_PERF:-}" ] || mkdir -p "$TFC_ACCOUNT_PERF"
# Every other round runs the modes in reverse order, so that a launch's place in its round (the
# cluster's warmth, the VM's drift within the round) weighs on every mode alike.
read -ra modes <<<"${TFC_ACCOUNT_MODES:-packaged timed floor}"
for round in $(seq "$rounds"); do
    order=("${modes[@]}")
    if [ $((round % 2)) = 0 ]; then
        mapfile -t order < <(printf '%s\n' "${modes[@]}" | tac)
    fi
    for mode in "${order[@]}"; do
        run "$mode"
    done
done
echo "optional $plugin isolate=yes" > "$stack"
