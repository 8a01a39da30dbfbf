# Shared by the bench scripts (sourced).

# The median of the numbers on stdin (separated by spaces or newlines): the middle one, or the
# mean of the two middle ones for an even count. Fails on no numbers.
median() {
    tr -s ' \t' '\n\n' | grep . | sort -n \
        | awk '{a[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# Stops the bench, saying why.
die() {
    echo "bench: $*" >&2
    exit 1
}
