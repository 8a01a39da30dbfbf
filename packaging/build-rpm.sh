#!/usr/bin/env bash
# Builds an RPM of a built plugin, for RHEL-family sites: packaging/build-rpm.sh PLUGIN.so [OUTDIR]
# The Slurm release the plugin was built for (read from the .so) is in the package's Release
# (1.slurm24.11) and pins the `slurm` package (>= that release, < the next one). The plugin goes
# in /usr/lib64/slurm, RPM's Slurm plugin directory (SLURM_PLUGIN_DIR overrides). Needs rpmbuild
# (Debian's `rpm` package has it). Prints the path of the .rpm.
set -euo pipefail
plugin=$(realpath "${1:?usage: packaging/build-rpm.sh PLUGIN.so [OUTDIR]}")
. "$(dirname "$0")/common.sh"
out=$(realpath -m "${2:-$tfc_root/target/rpm}")
plugdir=${SLURM_PLUGIN_DIR:-/usr/lib64/slurm}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tfc_stage "$work/files" "$plugdir"
rpmbuild --quiet -bb \
    --define "_topdir $work/top" \
    --define "_rpmdir $work/out" \
    --define "tfc_stage $work/files" \
    --define "tfc_version $tfc_version" \
    --define "tfc_slurm $tfc_slurm" \
    --define "tfc_slurm_next $tfc_next" \
    --define "tfc_plugin_dir $plugdir" \
    "$tfc_root/packaging/tfcluster.spec" >&2
mkdir -p "$out"
rpm=$(find "$work/out" -name '*.rpm' | head -1)
cp "$rpm" "$out/"
echo "$out/$(basename "$rpm")"
