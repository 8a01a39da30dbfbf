#!/usr/bin/env bash
# Every test of tfcluster, on a fresh Debian 12 as root:
#   1. installs what is missing (tests/setup.sh);
#   2. starts preparing, in the background and in test order, the root of every Slurm release
#      of tests/releases.tsv: first the Debian roots of 22.05, 24.11 and 26.05, then Debian 12
#      roots in which SchedMD's sources of 23.02, 23.11, 24.05, 25.05 and 25.11 are built (each
#      made once per machine, then cached; tests/release/root.sh);
#   3. lints (rustfmt, clippy) where those tools are installed;
#   4. unit, table, property, ABI and symbol tests (cargo test), and a deterministic short run
#      of every fuzz target (fuzz/run.sh smoke, beside the steps after it; `make fuzz` is the
#      real campaign);
#   5. makes (once per machine) the TensorFlow virtualenvs the releases need (tests/tensorflow/setup.sh: the newest, and 2.15 where marked);
#   6. on every release, in its root (waiting for the background to finish it): builds the
#      plugin from the release's headers, checks our header against them, brings up a real
#      4-node cluster of that release and runs the end-to-end, lifecycle, install/packaging and
#      topology tests on it (and TensorFlow, node-rank and scale tests where the table says),
#      then tears it down (tests/release/run.sh). The releases run in two lanes at once (the
#      table's fourth column; tests/release/lane.sh), each lane in a network namespace, a
#      state directory (TFC_DIR) and a cargo target directory of its own; TFC_LANES=1 runs
#      every release in one lane, one after another.
# A source release whose tarball is not in TFC_SLURM_SRC (default ../shared/slurm-src) is
# reported as skipped, by name. TFC_RELEASES="25.11" (space separated) runs step 6 on those
# releases only; "none" skips it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh

logs=$(mktemp -d)
# Every step's, suite's, test's and cluster start's seconds (tests/times.sh): the summary at the
# end says where the time went; TFC_TIMES=N lists the N slowest tests too.
export TFC_TIMES_FILE=$root/target/test-times.tsv
mkdir -p "$root/target" && : >"$TFC_TIMES_FILE"
step_start=$SECONDS
# Ends a step of this script: its seconds, as a row of the times file.
step_done() { tests/times.sh add host "$1" "$1" "$((SECONDS - step_start))"; step_start=$SECONDS; }
releases=${TFC_RELEASES:-$(awk '!/^#/ && NF {print $1}' tests/releases.tsv)}
[ "$releases" = none ] && releases=
root_of() { awk -v r="$1" '$1 == r {print $2}' tests/releases.tsv; }
lane_of() { if [ "${TFC_LANES:-2}" = 1 ]; then echo 1; else awk -v r="$1" '$1 == r {print $4}' tests/releases.tsv; fi; }
# The releases of each lane, in the table's order (a source release without its tarball is
# skipped: the summary says so).
lane1=() lane2=()
for release in $releases; do
    r=$(root_of "$release")
    [ -n "$r" ] || { echo "tfcluster: release $release is not in tests/releases.tsv" >&2; exit 2; }
    [[ $r != slurm-* ]] || tests/release/root.sh source "$r" >/dev/null 2>&1 || continue
    if [ "$(lane_of "$release")" = 2 ]; then lane2+=("$release"); else lane1+=("$release"); fi
done
# The roots in the order the lanes need them: Debian's first (a minute each), then the source
# builds (minutes each) by their place in their lane, so that the builds run in the background
# behind the tests instead of holding them up. Each release's run waits for its own root.
tested=()
for i in $(seq 0 $(( (${#lane1[@]} > ${#lane2[@]} ? ${#lane1[@]} : ${#lane2[@]}) - 1 ))); do
    tested+=(${lane1[$i]:+"${lane1[$i]}"} ${lane2[$i]:+"${lane2[$i]}"})
done
prepare=
if [ ${#tested[@]} -gt 0 ]; then
    roots=$(for release in "${tested[@]}"; do root_of "$release"; done)
    setsid bash -c 'for r in "$@"; do tests/release/root.sh make "$r" || echo "tfcluster: could not make the $r root" >&2; done' \
        prepare $(grep -v '^slurm-' <<<"$roots") $(grep '^slurm-' <<<"$roots") >"$logs/prepare" 2>&1 </dev/null &
    prepare=$!
fi
lanes=()
cleanup() {
    [ -n "$prepare" ] && kill -- -"$prepare" 2>/dev/null || true
    for pid in "${lanes[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
    [ -z "${fuzz:-}" ] || kill "$fuzz" 2>/dev/null || true
    rm -rf "$logs"
}
trap cleanup EXIT

if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; fi
if cargo clippy --version >/dev/null 2>&1; then cargo clippy --all-targets --quiet -- -D warnings; fi
step_done lint

passed() { sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}'; }
failed() { sed -n 's/^test result: .* \([0-9]*\) failed;.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}'; }

cargo test 2>&1 | tee "$logs/host"
step_done cargo-test
# The fuzz smoke runs beside the rest (it needs no cluster, and the lanes leave a core idle
# while their clusters wait); its lines and its status come at the end.
fuzz_start=$SECONDS
(
    status=0
    bash fuzz/run.sh smoke >"$logs/fuzz" 2>&1 || status=$?
    tests/times.sh add host fuzz-smoke fuzz-smoke "$((SECONDS - fuzz_start))"
    exit "$status"
) &
fuzz=$!
# The TensorFlow virtualenvs the chosen releases need (made once per machine).
python= python_2_15= jax_python=
marked() { awk -v r="$1" '$1 == r {print "," $3 ","}' tests/releases.tsv | grep -q ",$2,"; }
for release in "${tested[@]}"; do
    if marked "$release" tensorflow && [ -z "$python" ]; then
        python=$(bash tests/tensorflow/setup.sh)
    fi
    if marked "$release" tensorflow-2.15 && [ -z "$python_2_15" ]; then
        python_2_15=$(TFC_TF_VERSION=2.15.1 TFC_TF_VENV=/var/cache/tfcluster/tf-venv-2.15.1 bash tests/tensorflow/setup.sh)
    fi
    if marked "$release" jax && [ -z "$jax_python" ]; then
        jax_python=$(bash tests/jax/setup.sh)
    fi
done
step_done virtualenvs
# The two lanes at once, each in a network namespace of its own (tests/release/lane.sh), with
# its own cluster state directory and cargo target directory (each release rebuilds only
# tfcluster itself there; two lanes in one directory would rebuild it for each other's release
# at every suite).
export TFC_PYTHON=$python TFC_PYTHON_2_15=$python_2_15 TFC_JAX_PYTHON=$jax_python
# Lane 2's and the other-release builds' target directories start from the crates tfcluster
# uses as `cargo test` compiled them here (tests/release/seed.sh; not tfcluster's own, which
# each release compiles against its headers), so that a lane's first build, and the first
# build for another release, compile tfcluster alone (from nothing they took 2 minutes of
# lane 2 on 2 cores, 2026-11-27). A directory that has a build already is left as it is.
for to in lane-2 another-release lane-2/another-release; do
    bash tests/release/seed.sh "$root/target" "$root/target/$to"
done
for lane in 1 2; do
    if [ "$lane" = 1 ]; then members=("${lane1[@]}"); else members=("${lane2[@]}"); fi
    [ ${#members[@]} -gt 0 ] || continue
    target=$root/target
    [ "$lane" = 1 ] || target=$root/target/lane-$lane
    CARGO_TARGET_DIR=$target TFC_DIR=/tmp/tfcluster-cluster-lane-$lane \
        setsid unshare --net -- bash tests/release/lane.sh "$logs" "${members[@]}" </dev/null &
    lanes+=($!)
done
for pid in "${lanes[@]}"; do wait "$pid" || true; done
lanes=()
fuzz_status=0
wait "$fuzz" || fuzz_status=$?
fuzz=
cat "$logs/fuzz"
bad=()
for release in $releases; do
    grep -qx "$release" "$logs/failed" 2>/dev/null || continue
    bad+=("$release")
    echo "tfcluster: the tests FAILED on Slurm $release (its lines are above)" >&2
done
if [ -n "$prepare" ]; then
    wait "$prepare" || true
    prepare=
    sed 's/^/prepare: /' "$logs/prepare"
fi

echo
echo "host (no cluster): $(passed "$logs/host") passed, $(failed "$logs/host") failed"
total_passed=$(passed "$logs/host") total_failed=$(failed "$logs/host")
for release in $releases; do
    if [ -f "$logs/$release.seconds" ]; then
        echo "Slurm $release: $(passed "$logs/$release") passed, $(failed "$logs/$release") failed ($(cat "$logs/$release.seconds") s)"
        # Why a release stopped or retried, where its own lines say (they scroll far up).
        grep -E '^== Slurm .*: (FAILED|RETRY)|^(cluster|root): error' "$logs/$release" | sed 's/^/    /' || true
        total_passed=$((total_passed + $(passed "$logs/$release")))
        total_failed=$((total_failed + $(failed "$logs/$release")))
    else
        echo "Slurm $release: skipped: its source $(root_of "$release").tar.xz is not in ${TFC_SLURM_SRC:-../shared/slurm-src}"
    fi
done
tests/times.sh add all wall "the test command" "$SECONDS"
echo
# Never the command's status: it says where the time went, whatever happened.
tests/times.sh report "${TFC_TIMES:-0}" || true
echo "total: $total_passed passed, $total_failed failed"
if [ "$fuzz_status" != 0 ]; then
    echo "tfcluster: the fuzz smoke FAILED (its lines are above)" >&2
fi
if [ ${#bad[@]} -gt 0 ]; then
    echo "tfcluster: failed on Slurm ${bad[*]}" >&2
fi
[ ${#bad[@]} -eq 0 ] && [ "$fuzz_status" = 0 ]
