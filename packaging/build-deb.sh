#!/usr/bin/env bash
# Builds a Debian package of a built plugin: packaging/build-deb.sh PLUGIN.so [OUTDIR]
# The package's version carries the Slurm release the plugin was built for (read from the .so),
# and it depends on that release of the package that holds Slurm's plugins and libslurmfull
# (loaded by every Slurm command that loads SPANK plugins): Debian's slurm-wlm-basic-plugins, or
# SchedMD's own slurm-smd where that is installed (SLURM_PACKAGE overrides the choice), and the
# plugin goes where that package keeps Slurm's plugins. Prints the path of the .deb.
set -euo pipefail
plugin=$(realpath "${1:?usage: packaging/build-deb.sh PLUGIN.so [OUTDIR]}")
. "$(dirname "$0")/common.sh"
out=$(realpath -m "${2:-$tfc_root/target/deb}")
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
if [ -z "${SLURM_PACKAGE:-}" ]; then
    SLURM_PACKAGE=slurm-wlm-basic-plugins
    dpkg-query -W -f='${Status}' slurm-smd 2>/dev/null | grep -q 'install ok installed' && SLURM_PACKAGE=slurm-smd
fi
case $SLURM_PACKAGE in
    slurm-smd) default_dir=/usr/lib/$triplet/slurm ;;
    *) default_dir=/usr/lib/$triplet/slurm-wlm ;;
esac
plugdir=${SLURM_PLUGIN_DIR:-$default_dir}
name=slurm-spank-tfcluster
version=$tfc_version+slurm$tfc_slurm

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
tfc_stage "$stage" "$plugdir"
printf 'tfcluster %s\nLicense: Apache-2.0\n On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.\n' \
    "$version" > "$stage/usr/share/doc/$name/copyright"
mkdir -p "$stage/DEBIAN"
echo "$TFC_ADMIN_CONF" > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Section: admin
Priority: optional
Depends: $SLURM_PACKAGE (>= $tfc_slurm), $SLURM_PACKAGE (<< $tfc_next), libnftables1
Installed-Size: $(du -sk "$stage" | cut -f1)
Maintainer: tfcluster developers <tfcluster@invalid>
Description: Slurm SPANK plugin: TF_CONFIG and GPU split for distributed TensorFlow
 srun --tf-cluster=chief:1,ps:2,worker:* gives every task its TF_CONFIG and its
 share of the node's GPUs. Built for Slurm $tfc_slurm; enable it by linking
 $TFC_ADMIN_CONF (the site's settings, kept through upgrades) into
 /etc/slurm/plugstack.conf.d/.
CONTROL
mkdir -p "$out"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
