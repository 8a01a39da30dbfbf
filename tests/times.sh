#!/usr/bin/env bash
# Where the test command's time goes (docs/testing.md, "Where the time goes").
#
#   CMD | tests/times.sh suite RELEASE SUITE   passes CMD's output through and appends, for each
#                                             test libtest reports, `RELEASE SUITE TEST SECONDS`
#                                             to the times file: with --test-threads=1 a test's
#                                             line ends when it ends, so its time is the time
#                                             since the line before it
#   tests/times.sh add RELEASE WHAT NAME SECONDS
#                                             appends one row: a cluster start or restart (WHAT
#                                             `cluster`), a step of tests/run.sh (RELEASE `host`),
#                                             or the time of a release or of a part of it (WHAT
#                                             `wall`; a release's parts add up)
#   tests/times.sh report [N]                 one line per release: its wall time and each
#                                             suite's seconds; and (N > 0) the N slowest tests
#                                             and cluster starts and restarts
#
# The times file is TFC_TIMES_FILE (default target/test-times.tsv; tests/run.sh makes it anew
# each run, tests/release/run.sh alone appends to it).
set -uo pipefail
file=${TFC_TIMES_FILE:-$(cd "$(dirname "$0")/.." && pwd)/target/test-times.tsv}

case ${1:-} in
    suite)
        release=$2 suite=$3
        last=$EPOCHREALTIME
        while IFS= read -r line; do
            printf '%s\n' "$line"
            case $line in
                "running "*" test"*) last=$EPOCHREALTIME ;;
                "test "*" ... "*)
                    now=$EPOCHREALTIME
                    name=${line#test }
                    name=${name%% ... *}
                    printf '%s\t%s\t%s\t%s\n' "$release" "$suite" "$name" \
                        "$(awk -v a="$last" -v b="$now" 'BEGIN {printf "%.1f", b - a}')" >>"$file"
                    last=$now
                    ;;
            esac
        done
        ;;
    add)
        printf '%s\t%s\t%s\t%s\n' "$2" "$3" "$4" "$5" >>"$file"
        ;;
    report)
        [ -s "$file" ] || exit 0
        echo "where the time went (seconds; tests/times.sh, rows in $file):"
        awk -F'\t' '$1 == "all" {printf "  the test command: %d s\n", $4}' "$file"
        # One line per release (host first): its wall time, then each suite's, the largest first.
        awk -F'\t' '$1 == "all" {next}
            $2 == "wall" {wall[$1] += $4; next}
            $1 == "host" {wall["host"] += $4}
            {s[$1 "\t" $2] += $4; seen[$1] = 1}
            END {for (r in wall) seen[r] = 1
                 for (r in seen) {
                     line = sprintf("  %-6s %6.0f:", r, wall[r])
                     n = 0
                     for (k in s) {split(k, p, "\t"); if (p[1] == r) {n++; name[n] = p[2]; secs[n] = s[k]}}
                     for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (secs[j] > secs[i]) {
                         t = secs[i]; secs[i] = secs[j]; secs[j] = t; t = name[i]; name[i] = name[j]; name[j] = t}
                     for (i = 1; i <= n; i++) line = line sprintf(" %s %.0f", name[i], secs[i])
                     print line}}' "$file" | sort -k1,1V
        n=${2:-0}
        if [ "$n" -gt 0 ]; then
            echo "the $n slowest tests and cluster starts and restarts (seconds):"
            # awk, not head: the sort before it must not die of a closed pipe (exit 141).
            awk -F'\t' '$2 != "wall"' "$file" | sort -t$'\t' -k4,4gr \
                | awk -F'\t' -v n="$n" 'NR <= n {printf "  %7.1f  %-6s %-12s %s\n", $4, $1, $2, $3}'
        fi
        ;;
    *) echo "usage: $0 suite RELEASE SUITE | add RELEASE WHAT NAME SECONDS | report [N]" >&2; exit 2 ;;
esac
