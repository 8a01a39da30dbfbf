#!/usr/bin/env bash
# tests/release/seed.sh FROM TO: a cargo target directory TO that starts from FROM's compiled
# crates (artifacts, build scripts' outputs and fingerprints), not tfcluster's own, so that only
# tfcluster is compiled there. Nothing when FROM has nothing built or TO exists.
set -euo pipefail
from=$1/debug to=$2/debug
[ -d "$from/deps" ] && [ ! -e "$to" ] || exit 0
mkdir -p "$to/deps" "$to/build" "$to/.fingerprint"
find "$from/deps" -maxdepth 1 -name 'lib*' ! -name 'libtfcluster*' -exec cp -a -t "$to/deps" {} +
for d in build .fingerprint; do
    find "$from/$d" -mindepth 1 -maxdepth 1 ! -name 'tfcluster-*' -exec cp -a -t "$to/$d" {} +
done
