#!/usr/bin/env bash
# Every test of tfcluster, on a fresh Debian 12 as root:
#   1. installs what is missing (tests/setup.sh);
#   2. lints (rustfmt, clippy) where those tools are installed;
#   3. unit, table, property, ABI and symbol tests (cargo test), and a deterministic short run
#      of every fuzz target (fuzz/run.sh smoke; `make fuzz` is the real campaign);
#   4. makes (once per machine) a TensorFlow virtualenv (tests/tensorflow/setup.sh);
#   5. on every Slurm release of tests/releases.tsv (22.05, 24.11, 26.05), in a Debian root of
#      that release (made once, then cached): builds the plugin from the release's headers,
#      checks our header against its spank.h, brings up a real 4-node cluster of that release
#      and runs the end-to-end, install/packaging and TensorFlow tests on it, then tears it down
#      (tests/release/run.sh).
# TFC_RELEASES="24.11" (space separated) runs step 5 on those releases only; "none" skips it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh

if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; fi
if cargo clippy --version >/dev/null 2>&1; then cargo clippy --all-targets --quiet -- -D warnings; fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
passed() { sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}'; }
failed() { sed -n 's/^test result: .* \([0-9]*\) failed;.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}'; }

cargo test 2>&1 | tee "$logs/host"
bash fuzz/run.sh smoke
releases=${TFC_RELEASES:-$(awk '!/^#/ && NF {print $1}' tests/releases.tsv)}
[ "$releases" = none ] && releases=
[ -z "$releases" ] || python=$(bash tests/tensorflow/setup.sh)
bad=()
for release in $releases; do
    if ! TFC_PYTHON=$python bash tests/release/run.sh "$release" 2>&1 | tee "$logs/$release"; then
        bad+=("$release")
        echo "tfcluster: the tests FAILED on Slurm $release (see above)" >&2
    fi
done

echo
echo "host (no cluster): $(passed "$logs/host") passed"
total_passed=$(passed "$logs/host") total_failed=$(failed "$logs/host")
for release in $releases; do
    echo "Slurm $release: $(passed "$logs/$release") passed, $(failed "$logs/$release") failed"
    total_passed=$((total_passed + $(passed "$logs/$release")))
    total_failed=$((total_failed + $(failed "$logs/$release")))
done
echo "total: $total_passed passed, $total_failed failed"
if [ ${#bad[@]} -gt 0 ]; then
    echo "tfcluster: failed on Slurm ${bad[*]}" >&2
    exit 1
fi
