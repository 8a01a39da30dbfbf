#!/usr/bin/env bash
# The end-to-end suite on one Slurm release: tests/release/run.sh RELEASE (a line of
# tests/releases.tsv). Called by tests/run.sh for each release, after the host-side tests.
#   1. enters the release's Debian root (made once, then cached);
#   2. builds the plugin from that release's own headers (its libslurm-dev) and checks our
#      header against its <slurm/spank.h> (tests/abi.rs);
#   3. starts the 4-node test cluster with that release's slurmctld and slurmd, loading the plugin;
#   4. runs the end-to-end, install/packaging and TensorFlow tests against it;
#   5. restarts the cluster with a tree topology and runs the topology tests, and on the release
#      marked `scale`, with 64 nodes for the 4096-task tests;
#   6. tears the cluster and the root's namespace down, whatever happens.
# Needs TFC_PYTHON (the TensorFlow virtualenv's python: tests/tensorflow/setup.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
release=${1:?usage: tests/release/run.sh RELEASE}
suite=$(awk -v r="$release" '$1 == r {print $2}' tests/releases.tsv)
[ -n "$suite" ] || { echo "release $release is not in tests/releases.tsv" >&2; exit 2; }
: "${TFC_PYTHON:?the TensorFlow virtualenv python (tests/tensorflow/setup.sh)}"
root=tests/release/root.sh

"$root" up "$suite"
trap '"$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" down || true; "$root" down "$suite"' EXIT

export TFCLUSTER_SLURM_INCLUDE
TFCLUSTER_SLURM_INCLUDE=$("$root" path "$suite")/usr/include
export TFC_RELEASE=$release TFC_ROOT=$suite
cargo build --quiet
mkdir -p "target/slurm-$release"
cp target/debug/libtfcluster.so "target/slurm-$release/libtfcluster.so"
export TFC_PLUGIN=$repo/target/slurm-$release/libtfcluster.so
echo "== Slurm $release ($suite): plugin_version $(packaging/plugin-version.sh "$TFC_PLUGIN")"

cargo test --test abi
# Tasks that print and exit would be cut short by end_with_chief (on by default for specs with
# ps): the cluster runs with it off, and the tests of it turn the default back on.
"$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" up "$TFC_PLUGIN" end_with_chief=no
for t in cluster install tensorflow; do
    cargo test --test "$t" -- --include-ignored --test-threads=1
done

# The same cluster with a tree topology whose leaf switches interleave the nodes: from 26.05
# Slurm places block steps in switch order (tests/topology.rs).
"$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" down
TFC_TOPOLOGY="topology/tree;SwitchName=s1 Nodes=n011,n9;SwitchName=s2 Nodes=n012,n10;SwitchName=top Switches=s[1-2]" \
    "$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" up "$TFC_PLUGIN" end_with_chief=no
cargo test --test topology -- --include-ignored --test-threads=1

# 64 nodes and 4096 tasks, on the release tests/releases.tsv marks `scale`.
if awk -v r="$release" '$1 == r && $3 == "scale" {found = 1} END {exit !found}' tests/releases.tsv; then
    "$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" down
    TFC_NODES="$(printf 'tfc-node-%04d ' $(seq 64))" TFC_CPUS=96 \
        "$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" up "$TFC_PLUGIN" end_with_chief=no
    cargo test --test scale -- --include-ignored --test-threads=1
fi
