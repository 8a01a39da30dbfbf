#!/usr/bin/env bash
# Flakiness check: one release's end-to-end suites (placement, options, refusals, ending) N times in a row on one test
# cluster, with no test retried, while the machine is busy building Slurm from source:
#
#   tests/release/repeat.sh RELEASE [N]      (default 10; RELEASE is a line of tests/releases.tsv)
#   TFC_REPEAT_SUITES="isolation ports" tests/release/repeat.sh RELEASE [N]   (other suites)
#
# The build (SchedMD's 23.02 source, from TFC_SLURM_SRC, into a scratch folder, again and
# again) takes both cores, as the background preparation of tests/run.sh does. Prints one line
# per run and `N passed, N failed` at the end; exits non-zero if any run failed. Needs what
# tests/run.sh needs (run it once first: the release's root is then cached).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
release=${1:?usage: tests/release/repeat.sh RELEASE [N]}
runs=${2:-10}
root=$(awk -v r="$release" '$1 == r {print $2}' tests/releases.tsv)
[ -n "$root" ] || { echo "release $release is not in tests/releases.tsv" >&2; exit 2; }
rootsh=tests/release/root.sh
scratch=$(mktemp -d /var/tmp/tfcluster-busy.XXXXXX)
logs=$(mktemp -d)
busy=

"$rootsh" up "$root"
cleanup() {
    [ -n "$busy" ] && kill -- -"$busy" 2>/dev/null || true
    "$rootsh" exec "$root" bash "$repo/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true
    "$rootsh" down "$root"
    rm -rf "$scratch" "$logs"
}
trap cleanup EXIT

export TFCLUSTER_SLURM_INCLUDE TFC_RELEASE=$release TFC_ROOT=$root
TFCLUSTER_SLURM_INCLUDE=$("$rootsh" include "$root")
cargo build --quiet
target=${CARGO_TARGET_DIR:-$repo/target}
mkdir -p "$target/slurm-$release"
cp "$target/debug/libtfcluster.so" "$target/slurm-$release/libtfcluster.so"
export TFC_PLUGIN=$target/slurm-$release/libtfcluster.so
suites=()
for t in ${TFC_REPEAT_SUITES:-placement options refusals ending}; do suites+=(--test "$t"); done
cargo test --quiet "${suites[@]}" --no-run
"$rootsh" exec "$root" bash "$repo/tests/cluster/cluster.sh" up "$TFC_PLUGIN" end_with_chief=no

# The busy machine: Slurm built from source, over and over, in its own scratch roots.
setsid bash -c 'while :; do rm -rf "$1"/slurm-*; TFC_ROOTS=$1 tests/release/root.sh make slurm-23.02.8 || sleep 5; done' \
    busy "$scratch" >/dev/null 2>&1 </dev/null &
busy=$!

passed=0 failed=0
for i in $(seq "$runs"); do
    start=$SECONDS
    if cargo test --quiet "${suites[@]}" -- --include-ignored --test-threads=1 >"$logs/$i" 2>&1; then
        passed=$((passed + 1)) verdict=passed
    else
        failed=$((failed + 1)) verdict=FAILED
        grep -E '^test .* FAILED|panicked' "$logs/$i" >&2 || true
    fi
    echo "run $i: $verdict ($((SECONDS - start)) s, load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "Slurm $release, end-to-end suites $runs times while building Slurm: $passed passed, $failed failed"
[ "$failed" = 0 ]
