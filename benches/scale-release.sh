#!/usr/bin/env bash
# Cost at scale on one Slurm release (a line of tests/releases.tsv), in that release's root like
# its tests: benches/scale-release.sh RELEASE [RUNS]
#   1. builds the release plugin from the root's own headers, and the SPANK floor plugin
#      (benches/setenv_floor.c) on the host, from our header (the roots have no compiler);
#   2. starts a 64-node test cluster (96 CPUs declared per node) inside the root;
#   3. runs benches/scale.sh there (JSON lines on stdout);
#   4. when `perf record -a` works on this machine, one more launch of each of (a) and (e) under
#      it: the share of the machine's CPU samples taken in libtfcluster.so (tfcluster's own
#      code) and in setenv_floor.so, as a JSON line;
#   5. tears the cluster and the root's namespace down, whatever happens.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
release=${1:?usage: benches/scale-release.sh RELEASE [RUNS]}
runs=${2:-5}
. benches/lib.sh
stack=${TFC_DIR:-/tmp/tfcluster-cluster}/etc/plugstack.conf
enter_release "$release"
cc -shared -fPIC -O2 -I spank-headers \
    -DPLUGIN_VERSION="$(( (10#${release%.*} << 16) | (10#${release#*.} << 8) ))" \
    -o "$out/setenv_floor.so" benches/setenv_floor.c

scale_cluster_up
TFC_SETENV_FLOOR=$out/setenv_floor.so "$root" exec "$suite" bash "$repo/benches/scale.sh" "$plugin" "$runs" \
    > "$out/scale.jsonl"
sed "s/^{/{\"release\":\"$release\",/" "$out/scale.jsonl"

# Where the time goes, by sampling every CPU (cpu-clock, so it works in VMs without hardware
# counters): the part of the launch spent in each plugin's own code.
perf_share() { # plugstack line, srun options... -> percent of all samples in that plugin's .so
    local data=$out/perf.data so
    so=$(basename "${1%% *}")
    echo "required $1" > "$stack"
    shift
    perf record -q -a -F 999 -o "$data" -- "$root" exec "$suite" \
        sh -c 'cd /tmp && srun -N64 -n4096 "$@" true' sh "$@" >/dev/null 2>&1
    perf report -i "$data" --sort dso -F overhead,dso --stdio 2>/dev/null |
        awk -v so="$so" '$2 == so {sub("%", "", $1); p = $1} END {print p + 0}'
}
# (Not with TFC_SCALE_MODES: a run of some modes alone.)
if [ -z "${TFC_SCALE_MODES:-}" ] && perf record -q -a -o "$out/perf.data" -- true >/dev/null 2>&1; then
    size=$(sed -n 's/.*"tf_config_bytes":\([0-9]*\).*/\1/p' "$out/scale.jsonl")
    a=$(perf_share "$plugin" --tf-cluster=chief:1,ps:8,worker:*,end_with_chief=no)
    e=$(perf_share "$out/setenv_floor.so $size")
    printf '{"release":"%s","perf":"share of all CPU samples of one launch, in the plugin'"'"'s own code","tfcluster_pct":%s,"setenv_floor_pct":%s}\n' \
        "$release" "$a" "$e"
fi
echo "required $plugin" > "$stack"
