# Shared by the bench scripts (sourced).

# The median of the numbers on stdin (separated by spaces or newlines): the middle one, or the
# mean of the two middle ones for an even count. Fails on no numbers.
median() {
    tr -s ' \t' '\n\n' | grep . | sort -n \
        | awk '{a[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# The machine's CPU time so far, in ms: user, nice, system, irq and softirq of all CPUs (not
# steal or idle), from /proc/stat (in USER_HZ, 100 per second). On a quiet machine, what a
# launch costs in work, steadier than its wall time.
busy_ms() { awk '/^cpu / {print ($2 + $3 + $4 + $7 + $8) * 10; exit}' /proc/stat; }

# Stops the bench, saying why.
die() {
    echo "bench: $*" >&2
    exit 1
}

# enter_release RELEASE: enters the release's Debian root (its line of tests/releases.tsv:
# $suite, through $root = tests/release/root.sh) and builds the plugin from that root's headers
# into $plugin (in $out = target/bench-RELEASE); on exit the test cluster there is brought down
# and the root left. Needs $repo, the checkout, as the working directory.
enter_release() {
    suite=$(suite_of "$1") || exit 1
    root=tests/release/root.sh
    out=$repo/target/bench-$1
    mkdir -p "$out"
    "$root" up "$suite" >&2
    trap '"$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" down >/dev/null 2>&1 || true; "$root" down "$suite" >&2' EXIT
    build_for "$1" "$repo" "$repo/target"
    cp target/release/libtfcluster.so "$out/libtfcluster.so"
    plugin=$out/libtfcluster.so
}

# suite_of RELEASE: the root RELEASE's line of tests/releases.tsv names.
suite_of() {
    local suite
    suite=$(awk -v r="$1" '$1 == r {print $2}' "$repo/tests/releases.tsv")
    [ -n "$suite" ] || die "release $1 is not in tests/releases.tsv"
    echo "$suite"
}

# build_for RELEASE TREE TARGET: builds the plugin of the source tree TREE from the headers of
# RELEASE's root into TARGET/release/libtfcluster.so, and checks it is RELEASE's.
build_for() {
    local suite include built
    suite=$(suite_of "$1") || exit 1
    include=$("$repo/tests/release/root.sh" include "$suite")
    [ -f "$include/slurm/spank.h" ] || die "no $include/slurm/spank.h: make the root first (tests/release/root.sh make $suite)"
    (cd "$2" && TFCLUSTER_SLURM_INCLUDE=$include CARGO_TARGET_DIR=$3 cargo build --release --quiet >&2)
    built=$("$repo/packaging/plugin-version.sh" "$3/release/libtfcluster.so")
    [ "$built" = "$1" ] || die "the plugin was built for Slurm $built, not $1"
}

# cluster_up [WORD...]: the test cluster in the release's root (after enter_release), the plugin
# loaded with the plugstack.conf words WORD...
cluster_up() {
    "$root" exec "$suite" bash "$repo/tests/cluster/cluster.sh" up "$plugin" "$@" >&2
}

# scale_cluster_up: the 64-node test cluster of the scale benches (96 CPUs declared per node, no
# CPU-only nodes) in the release's root, the plugin loaded with end_with_chief=no; its node
# names in $nodes.
scale_cluster_up() {
    nodes=$(printf 'tfc-node-%04d ' $(seq 64))
    TFC_NODES="$nodes" TFC_CPU_NODES= TFC_CPUS=96 cluster_up end_with_chief=no
}
