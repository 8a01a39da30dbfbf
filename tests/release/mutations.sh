#!/usr/bin/env bash
# The audit of isolate=yes's rules and flags: tests/release/mutations.sh [RELEASE]
# Each row of tests/release/mutations.tsv changes one rule or flag of src/core/isolation/rules.rs, in a
# scratch clone of the checkout's HEAD; the test the row names must then fail:
#   - tests/firewall.rs (the rules in a kernel: network namespaces in RELEASE's root, no cluster);
#   - a test of tests/isolation.rs on the test cluster (tests/release/lane.sh with TFC_SUITES and
#     TFC_TESTS), for the table's flags, which only slurmstepd's life and an admin's day show.
# First the unchanged tree must pass both. Prints a line per row, CAUGHT (its test failed) or
# SURVIVED (BROKEN: the change did not build, which shows nothing), and exits 1 unless every
# change was caught: a rule no test notices missing.
# The machine's kernel must keep a killed slurmstepd's table (`flags persist`: Linux 6.9 or
# later; slurmstepd asks for it on every release since 0.16.0). Not part of the test command:
# about 15 minutes on 2 cores (docs/testing.md has the last run). Needs what tests/run.sh needs, and
# TFC_PYTHON is not used.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
release=${1:-24.11}
root=$(awk -v r="$release" '$1 == r {print $2}' "$repo/tests/releases.tsv")
[ -n "$root" ] || { echo "release $release is not in tests/releases.tsv" >&2; exit 2; }
scratch=$(mktemp -d /tmp/tfcluster-mutations.XXXXXX)
chmod 755 "$scratch" # the tests run programs as other users from the cluster directory inside
logs=$scratch/logs
mkdir -p "$logs"
git clone -q "$repo" "$scratch/repo"
cd "$scratch/repo"
# In the clone, where the cluster's slurmd (inside the root) finds the plugin; started from the
# checkout's compiled crates.
export CARGO_TARGET_DIR=$scratch/repo/target
bash tests/release/seed.sh "$repo/target" "$CARGO_TARGET_DIR"
export TFC_DIR=$scratch/cluster
rows=tests/release/mutations.tsv
source_file=src/core/isolation/rules.rs
cp "$source_file" "$scratch/original.rs"

# The row's fields, tab-separated (empty ones kept): what, suite, test, occurrence, text, replacement.
field() { python3 -c 'import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
print(rows[int(sys.argv[2])][int(sys.argv[3])])' "$rows" "$1" "$2"; }
count=$(grep -cv -e '^#' -e '^$' "$rows")

# Changes the source as row N says; fails if its text's occurrence is not there.
mutate() {
    cp "$scratch/original.rs" "$source_file"
    python3 - "$rows" "$1" "$source_file" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
what, suite, test, occurrence, text, replacement = rows[int(sys.argv[2])]
src = open(sys.argv[3]).read()
at = -1
for _ in range(int(occurrence)):
    at = src.find(text, at + 1)
    if at < 0:
        sys.exit(f"{what}: occurrence {occurrence} of {text!r} is not in {sys.argv[3]}")
open(sys.argv[3], "w").write(src[:at] + replacement + src[at + len(text):])
EOF
}

# Runs a suite's test; its status.
run() {
    local suite=$1 test=$2 log=$3
    if [ "$suite" = firewall ]; then
        TFC_ROOT=$root cargo test --test firewall -- --include-ignored "$test" >"$log" 2>&1
    else
        TFC_SUITES=$suite TFC_TESTS=$test TFC_TIMES_FILE=$logs/times.tsv \
            setsid unshare --net -- bash tests/release/lane.sh "$logs" "$release" >"$log" 2>&1 \
            && ! grep -qx "$release" "$logs/failed" 2>/dev/null
    fi
}

tests/release/root.sh up "$root" >/dev/null
# At the end the root is left and the clone (with its build) removed; the logs stay.
trap 'tests/release/root.sh down "$root" >/dev/null 2>&1 || true; cd /; rm -rf "$scratch/repo"' EXIT
survived=0
for suite in firewall isolation; do
    # The unchanged tree passes each test the rows name.
    for test in $(for i in $(seq 0 $((count - 1))); do [ "$(field "$i" 1)" = "$suite" ] && field "$i" 2; done | sort -u); do
        cp "$scratch/original.rs" "$source_file"
        [ "$suite" = isolation ] && tests/release/root.sh down "$root" >/dev/null 2>&1
        rm -f "$logs/failed"
        run "$suite" "$test" "$logs/unchanged.$test" || { echo "the unchanged tree fails $test ($logs/unchanged.$test)" >&2; exit 2; }
    done
    for i in $(seq 0 $((count - 1))); do
        [ "$(field "$i" 1)" = "$suite" ] || continue
        what=$(field "$i" 0)
        mutate "$i"
        rm -f "$logs/failed"
        start=$SECONDS
        if run "$suite" "$(field "$i" 2)" "$logs/row.$i"; then
            result=SURVIVED
            survived=$((survived + 1))
        elif grep -q 'panicked at' "$logs/row.$i"; then
            result=CAUGHT
        else
            result=BROKEN # it failed before its test ran (a change that does not build)
            survived=$((survived + 1))
        fi
        printf '%-9s %4s s  %s (%s %s)\n' "$result" $((SECONDS - start)) "$what" "$suite" "$(field "$i" 2)"
    done
done
echo "$count changes, $survived not caught (logs: $logs)"
[ "$survived" = 0 ]
