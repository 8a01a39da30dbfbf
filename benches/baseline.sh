#!/usr/bin/env bash
# Another build of tfcluster for benches/account.sh's mode `baseline` (a change's before and
# after, interleaved in the same rounds): benches/baseline.sh COMMIT RELEASE builds the plugin
# of COMMIT (a tag or a commit of this checkout) from the headers of RELEASE's root (a line of
# tests/releases.tsv, made by tests/release/root.sh), in target/baseline/, and prints its path:
#   TFC_ACCOUNT_BASELINE=$(benches/baseline.sh v0.15.2 24.11) \
#       TFC_ACCOUNT_MODES="packaged baseline floor" benches/account.sh 24.11 9
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. benches/lib.sh
usage="usage: benches/baseline.sh COMMIT RELEASE"
commit=$(git rev-parse --short "${1:?$usage}^{commit}")
release=${2:?$usage}
tree=$repo/target/baseline/$commit
if [ ! -f "$tree/Cargo.toml" ]; then
    mkdir -p "$tree"
    git archive "$commit" | tar -x -C "$tree"
fi
build_for "$release" "$tree" "$tree/target-$release"
echo "$tree/target-$release/release/libtfcluster.so"
