#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser and of whole step plans (fuzz/fuzz_targets/), with
# libFuzzer on the stable toolchain: rustc's SanitizerCoverage pass is enabled with stable -C
# flags (what cargo-fuzz passes on nightly, minus the sanitizer), and libfuzzer-sys supplies
# libFuzzer. Debug assertions and overflow checks stay on.
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#   fuzz/run.sh smoke                                 (20000 inputs per target from seed 1:
#                                                     deterministic; run by tests/run.sh)
# Seeds come from the table tests (fuzz/seeds.py); the growing corpus is kept in
# fuzz/corpus/ (not committed). Prints executions, crashes and hangs (inputs over 5 s) per
# target, and exits non-zero when any target crashed or hung; crashing inputs are saved in
# fuzz/artifacts/TARGET/ to become table tests. Builds in fuzz/target, or CARGO_TARGET_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
seconds=${1:-60}
shift || true
budget=(-max_total_time="$seconds")
corpora=corpus
if [ "$seconds" = smoke ]; then
    budget=(-runs=20000 -seed=1)
    corpora=$(mktemp -d)
    trap 'rm -rf "$corpora"' EXIT
fi
all=(spec hostlist counts distribution resv_ports settings hostfile topology plan het)
targets=("${@:-${all[@]}}")
[ $# -gt 0 ] || targets=("${all[@]}")

command -v c++ >/dev/null || { apt-get update -qq && apt-get install -y -qq g++ >/dev/null; }
host=$(rustc -vV | sed -n 's/^host: //p')
# --target keeps the instrumentation off build scripts and proc macros (they are not linked
# with libFuzzer).
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
    cargo build --quiet --release --target "$host" --bins
python3 seeds.py 2>/dev/null

printf '%-13s %12s %8s %8s %8s\n' target executions crashes hangs corpus
total=0 failed=0
for t in "${targets[@]}"; do
    mkdir -p "$corpora/$t" "artifacts/$t"
    log=$(mktemp)
    mark=$(mktemp) # only artifacts newer than this are this run's
    set +e
    "${CARGO_TARGET_DIR:-target}/$host/release/$t" "$corpora/$t" "seeds/$t" "${budget[@]}" -timeout=5 \
        -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
        >"$log" 2>&1
    rc=$?
    set -e
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    crashes=$(find "artifacts/$t" -newer "$mark" \( -name 'crash-*' -o -name 'oom-*' \) | wc -l)
    hangs=$(find "artifacts/$t" -newer "$mark" \( -name 'timeout-*' -o -name 'slow-unit-*' \) | wc -l)
    corpus=$(find "$corpora/$t" -type f | wc -l)
    printf '%-13s %12s %8s %8s %8s\n' "$t" "${runs:-?}" "$crashes" "$hangs" "$corpus"
    total=$((total + ${runs:-0}))
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ] || [ "$hangs" -gt 0 ]; then
        failed=1
        grep -E 'panicked|ERROR|SUMMARY' "$log" | head -5 >&2 || true
    fi
    rm -f "$log" "$mark"
done
echo "total executions: $total"
exit "$failed"
