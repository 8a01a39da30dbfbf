#!/usr/bin/env bash
# README's two commands on a Debian 12 machine with nothing on it: no Rust, no Slurm, no munge,
# nothing from this machine. Anyone can run it (as root, on Debian 12):
#
#   bash tests/fresh-machine.sh            the demo, then the test command without the clusters
#   TFC_FRESH_TESTS="22.05" bash ...       the test command with those releases' clusters too
#
# It makes a bare Debian 12 root with mmdebstrap (minbase, the main and security archives, as a
# Debian installation has them), clones this repository's committed HEAD into it, and runs,
# inside it as root with a clean environment:
#   1. README's demo command, `bash tests/demo.sh`: it installs Slurm, munge, libclang, a C
#      compiler and Rust (Debian's rustc-web) from Debian's packages, builds the plugin, starts a
#      4-node cluster and runs a step;
#   2. README's test command, `bash tests/run.sh`, with the releases TFC_FRESH_TESTS names
#      (default none: lint and every test that needs no cluster).
# Each phase prints its time. The bare root is made anew for every run and removed afterwards.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "fresh-machine: run as root" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { apt-get update -qq; apt-get install -y -qq mmdebstrap >/dev/null; }

root=tests/release/root.sh
cd "$repo"
export TFC_ROOTS=${TFC_FRESH_DIR:-/var/tmp/tfcluster-fresh}
trap 'bash "$root" down bare || true; rm -rf "$TFC_ROOTS"' EXIT
rm -rf "$TFC_ROOTS"

phase() { echo "== fresh-machine: $1"; start=$SECONDS; }
done_in() { echo "== fresh-machine: $1 in $((SECONDS - start)) s"; }

phase "a bare Debian 12 root"
bash "$root" up bare
done_in "made and entered"

dir=$(bash "$root" path bare)
git clone --quiet "$repo" "$dir/root/tfcluster"
inside() {
    bash "$root" exec bare env -i HOME=/root TERM=dumb CI=true \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        ${TFC_RELEASES+TFC_RELEASES="$TFC_RELEASES"} \
        bash -c "cd /root/tfcluster && $1" </dev/null
}

phase "demo: bash tests/demo.sh"
inside "bash tests/demo.sh"
done_in "demo passed"

phase "tests: bash tests/run.sh (releases: ${TFC_FRESH_TESTS:-none})"
TFC_RELEASES=${TFC_FRESH_TESTS:-none} inside "bash tests/run.sh"
done_in "tests passed"
