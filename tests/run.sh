#!/usr/bin/env bash
# Every test of tfcluster, on a fresh Debian 12 as root:
#   1. installs what is missing (tests/setup.sh);
#   2. starts preparing, in the background and in the order the lanes come to them, the root
#      of every Slurm release of tests/releases.tsv: the Debian roots of 22.05, 24.11 and 26.05,
#      and beside them Debian 12 roots in which SchedMD's sources of 25.05, 25.11, 23.02, 23.11
#      and 24.05 are built (each made once per machine, then cached; tests/release/root.sh);
#   3. lints (rustfmt, clippy) where those tools are installed;
#   4. unit, table, property, ABI and symbol tests (cargo test), and a deterministic short run
#      of every fuzz target (fuzz/run.sh smoke, beside the steps after it; `make fuzz` is the
#      real campaign);
#   5. makes (once per machine) the TensorFlow virtualenvs the releases need (tests/tensorflow/setup.sh: the newest, and 2.15 where marked);
#   6. on every release, in its root (waiting for the background to finish it): builds the
#      plugin from the release's headers, checks our header against them, brings up a real
#      4-node cluster of that release and runs the end-to-end, lifecycle, install/packaging and
#      topology tests on it (and TensorFlow, node-rank and scale tests where the table says),
#      then tears it down (tests/release/run.sh). The releases run in the three lanes of
#      tests/lanes.tsv at once (tests/release/lane.sh), each lane in a network namespace, a
#      CPU cgroup, a state directory (TFC_DIR) and a cargo target directory of its own, the
#      real TensorFlow of two releases in one lane beside the other suites of all eight in two;
#      TFC_LANES=1 runs every release whole in one lane, one after another.
# A source release whose tarball is not in TFC_SLURM_SRC (default ../shared/slurm-src) is
# reported as skipped, by name. TFC_RELEASES="25.11" (space separated) runs step 6 on those
# releases only; "none" skips it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh
# Other users run srun from this checkout: stop at once, saying what to change, where they cannot.
bash tests/readable.sh "$root"

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
# The releases chosen (a source release without its tarball is skipped: the summary says so).
chosen=()
for release in $releases; do
    r=$(root_of "$release")
    [ -n "$r" ] || { echo "tfcluster: release $release is not in tests/releases.tsv" >&2; exit 2; }
    grep -v '^#' tests/lanes.tsv | grep -qE "[[:space:]]$release(:|[[:space:]]|$)" \
        || { echo "tfcluster: release $release is in no lane of tests/lanes.tsv" >&2; exit 2; }
    [[ $r != slurm-* ]] || tests/release/root.sh source "$r" >/dev/null 2>&1 || continue
    chosen+=("$release")
done
# Each lane's name and what it runs (tests/lanes.tsv), of the releases chosen; TFC_LANES=1: one
# lane, every chosen release whole, in the table's order.
lane_names=() lane_units=() lane_weights=()
if [ "${TFC_LANES:-}" = 1 ]; then
    lane_names=(1) lane_units=("${chosen[*]}") lane_weights=(100)
else
    while read -r lane weight units; do
        kept=()
        for unit in $units; do
            [[ " ${chosen[*]} " != *" ${unit%%:*} "* ]] || kept+=("$unit")
        done
        lane_names+=("$lane") lane_units+=("${kept[*]}") lane_weights+=("$weight")
    done < <(grep -v '^#' tests/lanes.tsv | awk 'NF')
fi
# The roots in the order the lanes need them: the container image every release's root links
# in (bundle) and Debian's (a minute each) first, then the source builds (minutes each) by when
# their lane comes to them, so that the builds run in the background behind the tests instead of
# holding them up. Each release's run waits for its own root. When a lane comes to a release is
# counted in what runs before it in its lane, a release or part with real TensorFlow counting
# three (it takes about three times as long: 1129-1459 s against 284-607 s, docs/testing.md): from nothing, in
# the lanes' interleaved order, lane 2 came to 25.11 before the builds did and built it itself
# (1012 s instead of 416, 2026-11-27).
marked() { awk -v r="$1" '$1 == r {print "," $3 ","}' tests/releases.tsv | grep -q ",$2,"; }
tested=($(
    for units in "${lane_units[@]}"; do
        at=0
        for unit in $units; do
            echo "$at ${unit%%:*}"
            if [[ $unit == *:tensorflow ]] || { [[ $unit != *:* ]] && marked "$unit" tensorflow; }; then
                at=$((at + 3))
            else
                at=$((at + 1))
            fi
        done
    done | sort -s -n -k1,1 | cut -d' ' -f2 | awk '!seen[$0]++'
))
prepare= prepare_builds=
fetched=
if [ ${#tested[@]} -gt 0 ]; then
    roots=$(for release in "${tested[@]}"; do root_of "$release"; done)
    # The roots mmdebstrap makes, which need the network: the container image first, then in
    # the order the lanes need them.
    fetched=$(for r in bundle $roots; do tests/release/root.sh fetched "$r"; done | awk '!seen[$0]++' | tr '\n' ' ')
    # Two chains at once: the roots mmdebstrap fetches (the network's time), and the build hosts
    # then the source builds (the CPU's): from nothing, the builds in one chain behind the
    # fetches kept a lane waiting for its release's build (25.05: 710 s instead of 286).
    make_roots='for r in "$@"; do tests/release/root.sh make "$r" || echo "tfcluster: could not make the $r root" >&2; done'
    setsid bash -c "$make_roots" prepare $(tr ' ' '\n' <<<"$fetched" | grep -v '^build-') \
        >"$logs/prepare" 2>&1 </dev/null &
    prepare=$!
    setsid bash -c "$make_roots" prepare $(tr ' ' '\n' <<<"$fetched" | grep '^build-') $(grep '^slurm-' <<<"$roots") \
        >"$logs/prepare-builds" 2>&1 </dev/null &
    prepare_builds=$!
fi
lanes=()
# Each lane in a CPU cgroup of its own, of the weight tests/lanes.tsv gives it (cgroup v2, or
# v1's cpu hierarchy where the machine has that); printed, or nothing where none can be made.
# Without it the kernel shares the cores per session (autogroup), and every task is a session: a
# lane's 4096 tasks (tests/scale.rs) took nearly all of both cores, the other lane's slurmstepd
# did not get through its end of a step within UnkillableStepTimeout, and Slurm drained its node
# (2026-11-28: 14 tests then waited out their limits). With it each lane has its weight's share
# whenever they all want more.
lane_cgroups=()
lane_cgroup() { # lane weight
    local base=/sys/fs/cgroup knob value=$2
    if [ -f $base/cgroup.subtree_control ]; then
        grep -qw cpu $base/cgroup.subtree_control || echo +cpu >$base/cgroup.subtree_control 2>/dev/null || return 0
        knob=cpu.weight
    elif [ -d $base/cpu ]; then
        base=$base/cpu knob=cpu.shares value=$(($2 * 1024 / 100))
    else
        return 0
    fi
    mkdir -p "$base/tfcluster-lane-$1" 2>/dev/null || return 0
    echo "$value" >"$base/tfcluster-lane-$1/$knob" 2>/dev/null \
        || echo "tfcluster: lane $1's CPU weight could not be set: it has the default" >&2
    echo "$base/tfcluster-lane-$1"
}
# Removes the lanes' cgroups (once their processes are gone: `down` ended the clusters').
remove_lane_cgroups() {
    local c
    for c in "${lane_cgroups[@]}"; do
        rmdir "$c" 2>/dev/null || echo "tfcluster: $c still has processes: left as it is" >&2
    done
    lane_cgroups=()
}
cleanup() {
    [ -n "$prepare" ] && kill -- -"$prepare" 2>/dev/null || true
    [ -n "$prepare_builds" ] && kill -- -"$prepare_builds" 2>/dev/null || true
    for pid in "${lanes[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
    remove_lane_cgroups
    [ -z "${fuzz:-}" ] || kill "$fuzz" 2>/dev/null || true
    rm -rf "$logs"
}
trap cleanup EXIT

if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; fi
if cargo clippy --version >/dev/null 2>&1; then cargo clippy --all-targets --quiet -- -D warnings; fi
step_done lint

passed() { sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$@" | awk '{s += $1} END {print s + 0}'; }
failed() { sed -n 's/^test result: .* \([0-9]*\) failed;.*/\1/p' "$@" | awk '{s += $1} END {print s + 0}'; }

cargo test 2>&1 | tee "$logs/host"
step_done cargo-test
# The fuzz smoke runs beside the rest (it needs no cluster, and the lanes leave a core idle
# while their clusters wait); its lines and its status come at the end. It builds where the
# last run did (TFC_FUZZ_TARGET), so that libFuzzer's C++ and the crates are compiled once per
# machine, not in every fresh clone. Alone on the 2 cores (2026-11-28): 175 s of CPU (93 s)
# from nothing, 47 s (31 s) in another clone once they were built.
fuzz_start=$SECONDS
(
    status=0
    CARGO_TARGET_DIR=${TFC_FUZZ_TARGET:-/var/cache/tfcluster/fuzz-target} bash fuzz/run.sh smoke >"$logs/fuzz" 2>&1 || status=$?
    tests/times.sh add host fuzz-smoke fuzz-smoke "$((SECONDS - fuzz_start))"
    exit "$status"
) &
fuzz=$!
# The TensorFlow virtualenvs the chosen releases need (made once per machine).
python= python_2_15= jax_python= torch_python=
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
    if marked "$release" torch && [ -z "$torch_python" ]; then
        torch_python=$(bash tests/torch/setup.sh)
    fi
done
step_done virtualenvs
# The lanes at once, each in a network namespace of its own (tests/release/lane.sh), with its
# own cluster state directory and cargo target directory (each release rebuilds only tfcluster
# itself there; two lanes in one directory would rebuild it for each other's release at every
# suite).
export TFC_PYTHON=$python TFC_PYTHON_2_15=$python_2_15 TFC_JAX_PYTHON=$jax_python TFC_TORCH_PYTHON=$torch_python
# The other lanes' and the other-release builds' target directories start from the crates tfcluster
# uses as `cargo test` compiled them here (tests/release/seed.sh; not tfcluster's own, which
# each release compiles against its headers), so that a lane's first build, and the first
# build for another release, compile tfcluster alone (from nothing they took 2 minutes of
# lane 2 on 2 cores, 2026-11-27). A directory that has a build already is left as it is.
for lane in "${lane_names[@]}"; do
    to=lane-$lane/
    [ "$lane" != 1 ] || to=
    for dir in "${to%/}" "${to}another-release"; do
        [ -z "$dir" ] || bash tests/release/seed.sh "$root/target" "$root/target/$dir"
    done
done
# The roots mmdebstrap makes, made here if the background has not made them yet (or waited for
# while it makes them): it needs the network, and the lanes run in network namespaces with none
# (a run from nothing lost every release whose lane came to make one first, 2026-11-27). So
# does every crate Cargo.lock names, for any platform, which `make dist` vendors in a lane (the
# build fetched only those it compiles: from nothing, the RPM's tests failed without the rest).
if [ ${#tested[@]} -gt 0 ]; then
    cargo fetch --locked --quiet
    for r in $fetched; do
        tests/release/root.sh make "$r" >/dev/null || echo "tfcluster: could not make the $r root" >&2
    done
    step_done debian-roots
fi
for i in "${!lane_names[@]}"; do
    lane=${lane_names[$i]}
    read -ra members <<<"${lane_units[$i]}"
    [ ${#members[@]} -gt 0 ] || continue
    target=$root/target
    [ "$lane" = 1 ] || target=$root/target/lane-$lane
    cgroup=$(lane_cgroup "$lane" "${lane_weights[$i]}")
    if [ -n "$cgroup" ]; then
        lane_cgroups+=("$cgroup")
    else
        echo "tfcluster: no CPU cgroup could be made for lane $lane: it shares the cores per session" >&2
    fi
    CARGO_TARGET_DIR=$target TFC_DIR=/tmp/tfcluster-cluster-lane-$lane TFC_LANE_CGROUP=$cgroup \
        setsid unshare --net -- bash tests/release/lane.sh "$logs" "${members[@]}" </dev/null &
    lanes+=($!)
done
for pid in "${lanes[@]}"; do wait "$pid" || true; done
lanes=()
remove_lane_cgroups
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
    wait "$prepare_builds" || true
    prepare= prepare_builds=
    sed 's/^/prepare: /' "$logs/prepare" "$logs/prepare-builds"
fi

echo
echo "host (no cluster): $(passed "$logs/host") passed, $(failed "$logs/host") failed"
total_passed=$(passed "$logs/host") total_failed=$(failed "$logs/host")
for release in $releases; do
    # The release's logs: one, or one per part it ran in (tests/lanes.tsv), and their seconds.
    ran=() seconds=()
    for log in "$logs/$release" "$logs/$release:"*; do
        [ -f "$log.seconds" ] || continue
        ran+=("$log")
        part=${log##*/}
        part=${part#"$release"}
        part=${part#:}
        seconds+=("${part:+$part }$(cat "$log.seconds") s")
    done
    if [ ${#ran[@]} -gt 0 ]; then
        printf -v took '%s, ' "${seconds[@]}"
        echo "Slurm $release: $(passed "${ran[@]}") passed, $(failed "${ran[@]}") failed (${took%, })"
        # Why a release stopped, retried or found a node out of service, where its own lines say (they
        # scroll far up).
        grep -hE '^== Slurm .*: (FAILED|RETRY|UNWELL)|^(cluster|root): error' "${ran[@]}" | sed 's/^/    /' || true
        total_passed=$((total_passed + $(passed "${ran[@]}")))
        total_failed=$((total_failed + $(failed "${ran[@]}")))
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
