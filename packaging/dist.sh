#!/usr/bin/env bash
# The source tarball of this checkout, as a release ships it: packaging/dist.sh [OUTDIR]
# (`make dist`; default target/dist). Prints its path, tfcluster-VERSION.tar.gz, whose top
# directory tfcluster-VERSION holds:
#   - every file git tracks, as it is in the work tree;
#   - slurm-spank-tfcluster.spec (from packaging/slurm-spank-tfcluster.spec.in, with this
#     version), so that a RHEL-family site builds the RPM with `rpmbuild -ta` on the tarball;
#   - vendor/, every crate Cargo.lock names (`cargo vendor`), and .cargo/config.toml pointing
#     cargo at it, so that the build needs no network.
# Needs git, and cargo with the network (or the crates in its cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
out=$(realpath -m "${1:-$root/target/dist}")
name=tfcluster-$version

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/$name/.cargo"
# Tracked files as they are in the work tree (one deleted there is left out).
(cd "$root" && git ls-files -z | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$work/$name")
sed "s/@VERSION@/$version/g" "$root/packaging/slurm-spank-tfcluster.spec.in" \
    > "$work/$name/slurm-spank-tfcluster.spec"
# Quiet: cargo prints the config it would have us add, written below.
(cd "$work/$name" && cargo vendor --locked --versioned-dirs --quiet vendor >/dev/null)
printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "vendor"\n' \
    > "$work/$name/.cargo/config.toml"
mkdir -p "$out"
# Reproducible: sorted names, one owner and one time for every file.
tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$(git -C "$root" log -1 --format=%ct)" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
