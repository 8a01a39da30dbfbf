#!/usr/bin/env bash
# Cost at scale, on a running 64-node test cluster (benches/run.sh brings one up; so does
# tests/release/run.sh for the release marked `scale` in tests/releases.tsv):
# median wall time over interleaved runs of `srun -N64 -n4096 true`, each started once every
# node is idle (a new job waits for the previous job's nodes to leave COMPLETING, for up to
# 30 s on some releases: a scheduling wait, not the launch; shared/reference/slurm-observed.md
# section 11)
#   option: the plugin loaded and --tf-cluster=chief:1,ps:8,worker:*,apptainer_env=auto given
#   loaded: the plugin loaded, no option
#   none:   no plugin in plugstack.conf
#   floor:  no plugin, but an environment variable as large as that step's TF_CONFIG exported
#           to every task (what any TF_CONFIG delivery pays: copying it into 4096 processes)
#   default: the plugin with the code's defaults (`required`, no isolate) and --tf-cluster=chief:1,ps:8,worker:*: every
#           setting at its default (apptainer_env=yes: each variable again under the names of
#           the container runtimes found on the node, none where there is none)
#   apptainer: as `option`, with apptainer_env=always: every task also gets each variable under
#           Apptainer's and SingularityCE's names (three TF_CONFIG-sized variables per task)
#   jax:    as `option`, with keras=3,tuner=yes: every task also gets JAX's, Keras's and Keras
#           Tuner's variables (a few dozen bytes: KERAS_DISTRIBUTION_JOB_ADDRESSES is rank 0's endpoint)
#   workers: the plugin loaded and --tf-cluster=worker:*,apptainer_env=auto given: the option alone,
#           as a PyTorch step gives it
#   torch:  as `workers`, with torch=yes: every task also gets PyTorch's and torchrun's variables
#   isolate: as `option`, with isolate=yes in plugstack.conf: every node installs the step's
#           firewall (4096 endpoints) before its tasks start and removes it as its slurmstepd exits
#   packaged: the line the packages install (`optional PLUGIN isolate=yes`, the Makefile's
#           snippet) and --tf-cluster=chief:1,ps:8,worker:*: what a site that installs the
#           package gets, every setting at its default
#   spank:  instead of tfcluster, benches/setenv_floor.c, which only hands every task a
#           variable of that size with spank_setenv (what any per-task delivery through SPANK
#           pays: Slurm's own setenv, per task); a/e is then tfcluster's own work
# and slurmstepd's resident memory per node during such a step, with and without the option.
# Output: JSON lines. Usage: benches/scale.sh PLUGIN.so [RUNS]
# TFC_SCALE_MODES="packaged default floor" (any of the modes above) runs those alone, in turn,
# and prints one line of their medians and each one against the floor (d) instead.
set -euo pipefail
plugin=${1:?usage: benches/scale.sh PLUGIN.so [RUNS]}
runs=${2:-5}
. "$(dirname "$0")/lib.sh"
dir=${TFC_DIR:-/tmp/tfcluster-cluster}
stack=$dir/etc/plugstack.conf
step=(-N64 -n4096)
# end_with_chief=no: `true` exits at once, and stopping the step after the chief would time
# Slurm's step cancellation, not the delivery of TF_CONFIG.
# apptainer_env=auto: (a) is tfcluster's delivery of its own variables, against the floors of
# one such variable; (h) is the default configuration, (f) both runtimes' names in every task.
default_spec=--tf-cluster=chief:1,ps:8,worker:*,end_with_chief=no
spec=$default_spec,apptainer_env=auto
workers_spec=--tf-cluster=worker:*,apptainer_env=auto
here=$(cd "$(dirname "$0")" && pwd)
cd /tmp

# The size of that step's TF_CONFIG, as the plugin gives it to rank 0.
echo "required $plugin" > "$stack"
size=$(srun "${step[@]}" "$spec" sh -c '[ "$SLURM_PROCID" = 0 ] && printf %s "${#TF_CONFIG}"; true')
floor=$(head -c "$size" /dev/zero | tr '\0' x)
# The SPANK floor plugin, for the same release as the plugin (its version word).
release=$(bash "$here/../packaging/plugin-version.sh" "$plugin")
# (TFC_SETENV_FLOOR: one built elsewhere, e.g. outside a test root that has no compiler.)
spank_so=${TFC_SETENV_FLOOR:-$dir/setenv_floor.so}
[ -n "${TFC_SETENV_FLOOR:-}" ] || cc -shared -fPIC -O2 -I "$here/../spank-headers" \
    -DPLUGIN_VERSION="$(( (10#${release%.*} << 16) | (10#${release#*.} << 8) ))" \
    -o "$spank_so" "$here/setenv_floor.c"
built=$(bash "$here/../packaging/plugin-version.sh" "$spank_so")
[ "$built" = "$release" ] || die "$spank_so is for Slurm $built, the plugin for $release"

nodes=${step[0]#-N}
idle() { # until every node of the cluster is idle (60 s at most)
    for _ in $(seq 1200); do
        [ "$(sinfo -h -t idle -o %D | awk '{n += $1} END {print n + 0}')" -ge "$nodes" ] && return
        sleep 0.05
    done
}
run() { # mode -> prints "wall_ms cpu_ms"
    local s b
    case $1 in
        option|loaded|apptainer|default|jax|workers|torch) echo "required $plugin" > "$stack" ;;
        packaged) echo "optional $plugin isolate=yes" > "$stack" ;;
        # port_range covers the ports the test cluster reserves (MpiParams), as a site's must.
        isolate) echo "required $plugin isolate=yes port_range=12000-32767" > "$stack" ;;
        none|floor) : > "$stack" ;;
        spank) echo "required $spank_so $size" > "$stack" ;;
    esac
    idle
    s=$(date +%s%N) b=$(busy_ms)
    case $1 in
        option|isolate) srun "${step[@]}" "$spec" true ;;
        default|packaged) srun "${step[@]}" "$default_spec" true ;;
        apptainer) srun "${step[@]}" "$default_spec,apptainer_env=always" true ;;
        jax) srun "${step[@]}" "$spec,keras=3,tuner=yes" true ;;
        workers) srun "${step[@]}" "$workers_spec" true ;;
        torch) srun "${step[@]}" "$workers_spec,torch=yes" true ;;
        loaded|none|spank) srun "${step[@]}" true ;;
        floor) TFC_FLOOR=$floor srun "${step[@]}" true ;;
    esac
    echo $((($(date +%s%N) - s) / 1000000)) $(($(busy_ms) - b))
}
declare -A t c
modes=${TFC_SCALE_MODES:-option loaded none floor spank apptainer isolate default jax packaged}
for _ in $(seq "$runs"); do
    for mode in $modes; do
        read -r wall cpu < <(run $mode)
        t[$mode]+="$wall " c[$mode]+="$cpu "
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
if [ -n "${TFC_SCALE_MODES:-}" ]; then
    # The chosen modes: medians, and each against the floor (d) where it ran.
    line='{"some_modes":"srun -N64 -n4096 true","runs":'$runs',"tf_config_bytes":'$size
    for mode in $modes; do
        w=$(median <<<"${t[$mode]}") m=$(median <<<"${c[$mode]}")
        line+=",\"$mode\":{\"wall_ms\":$w,\"cpu_ms\":$m,\"all_wall\":\"${t[$mode]% }\",\"all_cpu\":\"${c[$mode]% }\""
        if [ -n "${t[floor]:-}" ] && [ "$mode" != floor ]; then
            line+=",\"wall_over_d\":$(ratio "$w" "$(median <<<"${t[floor]}")"),\"cpu_over_d\":$(ratio "$m" "$(median <<<"${c[floor]}")")"
        fi
        line+="}"
    done
    echo "$line}"
    echo "required $plugin" > "$stack"
    exit 0
fi
o=$(median <<<"${t[option]}") l=$(median <<<"${t[loaded]}") n=$(median <<<"${t[none]}")
f=$(median <<<"${t[floor]}") e=$(median <<<"${t[spank]}") ap=$(median <<<"${t[apptainer]}")
g=$(median <<<"${t[isolate]}") h=$(median <<<"${t[default]}") i=$(median <<<"${t[jax]}")
pk=$(median <<<"${t[packaged]}") cpk=$(median <<<"${c[packaged]}")
printf '{"packaged_ms":%s,"packaged_over_d":%s,"cpu_packaged_ms":%s,"cpu_packaged_over_d":%s,"all":{"wall":"%s","cpu":"%s"}}\n' \
    "$pk" "$(ratio "$pk" "$(median <<<"${t[floor]}")")" "$cpk" "$(ratio "$cpk" "$(median <<<"${c[floor]}")")" "${t[packaged]% }" "${c[packaged]% }"
printf '{"launch":"srun -N64 -n4096 true","runs":%s,"tf_config_bytes":%s,"option_ms":%s,"loaded_ms":%s,"none_ms":%s,"floor_ms":%s,"spank_ms":%s,"apptainer_ms":%s,"isolate_ms":%s,"default_ms":%s,"a_over_c":%s,"a_over_d":%s,"a_over_e":%s,"e_over_d":%s,"f_over_a":%s,"g_over_a":%s,"h_over_a":%s,"h_over_d":%s,"jax_ms":%s,"i_over_a":%s,"all":{"a":"%s","b":"%s","c":"%s","d":"%s","e":"%s","f":"%s","g":"%s","h":"%s","i":"%s"}}\n' \
    "$runs" "$size" "$o" "$l" "$n" "$f" "$e" "$ap" "$g" "$h" "$(ratio "$o" "$n")" "$(ratio "$o" "$f")" "$(ratio "$o" "$e")" "$(ratio "$e" "$f")" "$(ratio "$ap" "$o")" "$(ratio "$g" "$o")" "$(ratio "$h" "$o")" "$(ratio "$h" "$f")" "$i" "$(ratio "$i" "$o")" \
    "${t[option]% }" "${t[loaded]% }" "${t[none]% }" "${t[floor]% }" "${t[spank]% }" "${t[apptainer]% }" "${t[isolate]% }" "${t[default]% }" "${t[jax]% }"
ca=$(median <<<"${c[option]}") cb=$(median <<<"${c[loaded]}") cc=$(median <<<"${c[none]}")
cd=$(median <<<"${c[floor]}") ce=$(median <<<"${c[spank]}") cf=$(median <<<"${c[apptainer]}")
cg=$(median <<<"${c[isolate]}") ch=$(median <<<"${c[default]}") ci=$(median <<<"${c[jax]}")
# isolate=yes's own work per node: the machine's extra CPU over (a), shared by the 64 nodes.
per_node() { awk -v g="$1" -v a="$2" 'BEGIN {printf "%.0f", (g - a) / 64}'; }
printf '{"cpu":"machine CPU ms per launch (median)","a":%s,"b":%s,"c":%s,"d":%s,"e":%s,"f":%s,"g":%s,"h":%s,"a_over_d":%s,"a_over_e":%s,"f_over_a":%s,"g_over_a":%s,"g_minus_a_per_node":%s,"h_over_a":%s,"h_over_d":%s,"i":%s,"i_over_a":%s,"all":{"a":"%s","d":"%s","e":"%s","f":"%s","g":"%s","h":"%s","i":"%s"}}\n' \
    "$ca" "$cb" "$cc" "$cd" "$ce" "$cf" "$cg" "$ch" "$(ratio "$ca" "$cd")" "$(ratio "$ca" "$ce")" "$(ratio "$cf" "$ca")" "$(ratio "$cg" "$ca")" "$(per_node "$cg" "$ca")" "$(ratio "$ch" "$ca")" "$(ratio "$ch" "$cd")" "$ci" "$(ratio "$ci" "$ca")" "${c[option]% }" "${c[floor]% }" "${c[spank]% }" "${c[apptainer]% }" "${c[isolate]% }" "${c[default]% }" "${c[jax]% }"

rss() { # mode -> mean VmRSS (KiB) of the step's slurmstepd processes, mid-step
    case $1 in option) echo "required $plugin" > "$stack" ;; none) : > "$stack" ;; esac
    local args=("${step[@]}")
    [ "$1" = option ] && args+=("$spec")
    idle
    srun -J "tfc-rss-$1" "${args[@]}" sleep 30 &
    local pid=$! job=""
    for _ in $(seq 50); do
        job=$(squeue -h -n "tfc-rss-$1" -o %i 2>/dev/null | head -1)
        [ -n "$job" ] && break
        sleep 0.1
    done
    # Until every node's slurmstepd runs, then 2 s for its tasks to start.
    for _ in $(seq 200); do
        [ "$(pgrep -fc "^slurmstepd: \[$job\.0\]")" -ge "$nodes" ] && break
        sleep 0.1
    done
    sleep 2
    local total=0 count=0 p kb
    for p in $(pgrep -f "^slurmstepd: \[$job\.0\]"); do
        kb=$(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
        [ -n "$kb" ] && total=$((total + kb)) && count=$((count + 1))
    done
    scancel "$job" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo $((count ? total / count : 0)) "$count"
}
read -r ro co < <(rss option)
read -r rn cn < <(rss none)
printf '{"memory":"slurmstepd per node, 64 tasks each","option_kb":%s,"none_kb":%s,"stepds":%s}\n' "$ro" "$rn" "$co"
echo "required $plugin" > "$stack"
