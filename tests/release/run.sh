#!/usr/bin/env bash
# The end-to-end suite on one Slurm release: tests/release/run.sh RELEASE (a line of
# tests/releases.tsv). Called by tests/run.sh for each release, after the host-side tests.
#   1. enters the release's root (made once, then cached; a source release is built there);
#   2. builds the plugin from that release's own headers and checks our header against its
#      <slurm/spank.h> and <slurm/slurm.h> (tests/abi.rs);
#   3. starts the test cluster (4 GPU nodes, 2 CPU-only nodes) with that release's slurmctld and
#      slurmd, loading the plugin;
#   4. runs the end-to-end, container and install/packaging tests against it, the TensorFlow
#      tests on the releases marked `tensorflow` and the Apptainer tests on those marked
#      `apptainer`;
#   5. restarts the cluster with two-socket nodes (TFC_SOCKETS=2) and runs the GPU affinity
#      tests, then with a tree topology and runs the topology tests; on the releases
#      marked `noderank`, again with TopologyParam=SwitchAsNodeRank; on the release marked
#      `scale`, with 64 nodes for the 4096-task tests;
#   6. tears the cluster and the root's namespace down, whatever happens.
# Needs TFC_PYTHON (the TensorFlow virtualenv's python: tests/tensorflow/setup.sh) on the
# releases marked `tensorflow`, and TFC_PYTHON_2_15 (TensorFlow 2.15's) on those marked
# `tensorflow-2.15`.
set -Eeuo pipefail  # -E: the ERR trap below names a failure inside a function too
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
release=${1:?usage: tests/release/run.sh RELEASE}
read -r root extra < <(awk -v r="$release" '$1 == r {print $2, $3}' tests/releases.tsv) || true
[ -n "${root:-}" ] || { echo "release $release is not in tests/releases.tsv" >&2; exit 2; }
has() { [[ ",$extra," == *",$1,"* ]]; }
rootsh=tests/release/root.sh
cluster() { "$rootsh" exec "$root" bash "$repo/tests/cluster/cluster.sh" "$@"; }
# Every suite runs even when one fails (a failure stops nothing but itself); the exit status says.
failed=()
# Each test's seconds go to the times file (tests/times.sh).
# TFC_TESTS=NAME (with TFC_SUITES): only the tests whose names contain NAME.
suite() {
    # shellcheck disable=SC2086 # a filter of libtest's, or none
    cargo test --test "$@" -- ${TFC_TESTS:-} --include-ignored --test-threads=1 | tests/times.sh suite "$release" "$1" \
        || failed+=("$1")
    # A node the suite left out of service is named (tests/run.sh's summary repeats the line) and
    # returned to service, so that the suites after it are not kept waiting for it.
    local unwell
    unwell=$(cluster unwell | paste -sd, -) || true
    [ -z "$unwell" ] || echo "== Slurm $release: UNWELL after the $1 suite, returned to service: $unwell" >&2
}

# A step of this script that fails (not a suite: suites are counted) stops the release; this
# line names it, and tests/run.sh repeats it in the summary.
trap 'echo "== Slurm $release: FAILED: \`$BASH_COMMAND\` exited $? (tests/release/run.sh:$LINENO)" >&2' ERR
# Brings the cluster up, and once more after a failure, saying so (the summary repeats it): a CI
# run once stopped here on its first release and left no line of why in the output it kept.
cluster_up() {
    cluster up "$@" && return 0
    echo "== Slurm $release: RETRY: the cluster did not come up (the lines above say why); down, and up once more" >&2
    cluster down || true
    cluster up "$@"
}

"$rootsh" up "$root"
trap 'cluster down || true; "$rootsh" down "$root"' EXIT

export TFCLUSTER_SLURM_INCLUDE
TFCLUSTER_SLURM_INCLUDE=$("$rootsh" include "$root")
export TFC_RELEASE=$release TFC_ROOT=$root
# Where each test's and each cluster start's seconds go (tests/times.sh; tests/run.sh sets it).
export TFC_TIMES_FILE=${TFC_TIMES_FILE:-$repo/target/test-times.tsv}
cargo build --quiet
# The target directory: target/, or the lane's own (tests/run.sh runs two releases at once, each
# building in a directory of its own).
target=${CARGO_TARGET_DIR:-$repo/target}
# This release's suites, those with real TensorFlow by its markers in tests/releases.tsv.
suites=(placement heterogeneous options refusals ending containers install rpm isolation ports plugstack)
has firewall && suites+=(firewall)
if has tensorflow; then
    : "${TFC_PYTHON:?the TensorFlow virtualenv python (tests/tensorflow/setup.sh)}"
    suites+=(tensorflow)
    has keras && suites+=(keras)
fi
if has jax; then
    : "${TFC_JAX_PYTHON:?the JAX virtualenv python (tests/jax/setup.sh)}"
    suites+=(jax)
fi
if has torch; then
    : "${TFC_TORCH_PYTHON:?the PyTorch virtualenv python (tests/torch/setup.sh)}"
    suites+=(torch)
fi
if has tensorflow-2.15; then
    export TFC_PYTHON_2_15
    : "${TFC_PYTHON_2_15:?the TensorFlow 2.15 virtualenv python (tests/run.sh makes it)}"
else
    unset TFC_PYTHON_2_15
fi
has apptainer && suites+=(apptainer)
# TFC_PART (tests/lanes.tsv, which tests/run.sh's lanes follow): `tensorflow` runs only the
# suites with real TensorFlow, Keras, JAX, PyTorch and Apptainer, `cluster` every other suite and the
# topology and scale clusters after them; unset, all of them.
tf_suites=" tensorflow keras jax torch apptainer "
in_part() {
    case ${TFC_PART:-} in
        tensorflow) [[ $tf_suites == *" $1 "* ]] ;;
        cluster) [[ $tf_suites != *" $1 "* ]] ;;
        *) true ;;
    esac
}
# The test binaries this run needs, at once, on every core, while no cluster waits (each suite's
# `cargo test` then finds its binary built; one at a time they were built one after another).
# The TensorFlow part needs abi's and its suites' alone: building the other 30 or so again, for
# the plugin built against this release's headers, took its lane (the longest) minutes of CPU.
if [ "${TFC_PART:-}" = tensorflow ]; then
    binaries=(--test abi)
    for t in "${suites[@]}"; do
        if in_part "$t"; then binaries+=(--test "$t"); fi
    done
    cargo test --quiet --no-run "${binaries[@]}"
else
    cargo test --quiet --no-run
fi
mkdir -p "$target/slurm-$release"
cp "$target/debug/libtfcluster.so" "$target/slurm-$release/libtfcluster.so"
export TFC_PLUGIN=$target/slurm-$release/libtfcluster.so
echo "== Slurm $release ($root): plugin_version $(packaging/plugin-version.sh "$TFC_PLUGIN")"

cargo test --test abi
# Tasks that print and exit would be cut short by end_with_chief (on by default for specs with
# ps): the cluster runs with it off, and the tests of it turn the default back on.
cluster_up "$TFC_PLUGIN" end_with_chief=no
# Two-socket nodes whose GPUs sit on either socket (TFC_SOCKETS=2): each task's GPUs are the
# closest to the CPUs Slurm bound it to, as Slurm's own --gpu-bind=closest picks them
# (tests/gpu_affinity.rs).
two_sockets() {
    cluster down
    TFC_SOCKETS=2 TFC_NODES="n9 n10" TFC_CPU_NODES= cluster_up "$TFC_PLUGIN" end_with_chief=no
    suite gpu_affinity
}
# TFC_SUITES="ending refusals" (space separated): only those of this release's suites (and
# gpu_affinity's two-socket cluster, when named), and no topology or scale cluster after them
# (a quick check of a change; the test command runs all).
if [ -n "${TFC_SUITES:-}" ]; then
    for t in "${suites[@]}"; do [[ " $TFC_SUITES " == *" $t "* ]] && suite "$t"; done
    if [[ " $TFC_SUITES " == *" gpu_affinity "* ]]; then two_sockets; fi
    [ ${#failed[@]} -eq 0 ] || { echo "== Slurm $release: FAILED: ${failed[*]}" >&2; exit 1; }
    exit 0
fi
for t in "${suites[@]}"; do
    if in_part "$t"; then suite "$t"; fi
done
if [ "${TFC_PART:-}" = tensorflow ]; then
    [ ${#failed[@]} -eq 0 ] || { echo "== Slurm $release: FAILED: ${failed[*]}" >&2; exit 1; }
    exit 0
fi

two_sockets

# With SlurmdParameters=contain_spank (24.05 and later), slurmstepd runs task_exit and
# task_post_fork in child processes of their own that exit as the hook returns: the step still
# ends with the chief or a failed task, and the workers' watcher (started before the forks
# there) still lets a ParameterServerStrategy step survive a worker the chief had reached
# (tests/ending.rs); and user_init in another, which drops to the user too: root looks at no
# file the job's PATH names (tests/containers.rs).
if has contain_spank; then
    cluster down
    export TFC_SLURMD_PARAMETERS=contain_spank
    cluster_up "$TFC_PLUGIN" end_with_chief=no
    suite ending
    suite containers
    unset TFC_SLURMD_PARAMETERS
fi

# The same cluster with a tree topology whose leaf switches interleave the nodes: from 26.05
# Slurm places block steps in switch order (tests/topology.rs).
tree="topology/tree;SwitchName=s1 Nodes=n011,n9;SwitchName=s2 Nodes=n012,n10;SwitchName=top Switches=s[1-2]"
cluster down
TFC_TOPOLOGY=$tree cluster_up "$TFC_PLUGIN" end_with_chief=no
suite topology

# From 23.02, SwitchAsNodeRank puts the node table itself (and so SLURM_STEP_NODELIST and the
# node ids) in switch order.
if has noderank; then
    cluster down
    export TFC_TOPOLOGY_PARAM=SwitchAsNodeRank
    TFC_TOPOLOGY=$tree cluster_up "$TFC_PLUGIN" end_with_chief=no
    suite topology every_task_is_listed
    unset TFC_TOPOLOGY_PARAM
fi

# 64 nodes and 4096 tasks.
if has scale; then
    cluster down
    TFC_NODES="$(printf 'tfc-node-%04d ' $(seq 64))" TFC_CPU_NODES= TFC_CPUS=96 cluster_up "$TFC_PLUGIN" end_with_chief=no
    suite scale
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "== Slurm $release: FAILED: ${failed[*]}" >&2
    exit 1
fi
