#!/usr/bin/env bash
# Builds a Debian package of a built plugin: packaging/build-deb.sh PLUGIN.so [OUTDIR]
# The package's version carries the Slurm release the plugin was built for (read from the .so),
# and it depends on that release's slurm-wlm-basic-plugins (which holds libslurmfull, loaded by
# every Slurm command that loads SPANK plugins). Prints the path of the .deb.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
plugin=$(realpath "$1")
out=$(realpath -m "${2:-$root/target/deb}")
slurm=$("$root/packaging/plugin-version.sh" "$plugin")
major=${slurm%.*}
minor=${slurm#*.}
next=$(printf '%d.%02d' "$major" $((10#$minor + 1)))
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)+slurm$slurm"
arch=$(dpkg --print-architecture)
plugdir=${SLURM_PLUGIN_DIR:-/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/slurm-wlm}
name=slurm-spank-tfcluster

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
make -s -C "$root" install DESTDIR="$stage" PREFIX=/usr SYSCONFDIR=/etc SLURM_PLUGIN_DIR="$plugdir" PLUGIN="$plugin" >/dev/null
strip --strip-unneeded "$stage$plugdir/spank_tfcluster.so"
install -D -m 0644 "$root/README.md" "$stage/usr/share/doc/$name/README.md"
printf 'tfcluster %s\nLicense: Apache-2.0\n' "$version" > "$stage/usr/share/doc/$name/copyright"
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Section: admin
Priority: optional
Depends: slurm-wlm-basic-plugins (>= $slurm), slurm-wlm-basic-plugins (<< $next)
Installed-Size: $(du -sk "$stage" | cut -f1)
Maintainer: tfcluster developers <tfcluster@invalid>
Description: Slurm SPANK plugin: TF_CONFIG and GPU split for distributed TensorFlow
 srun --tf-cluster=chief:1,ps:2,worker:* gives every task its TF_CONFIG and its
 share of the node's GPUs. Built for Slurm $slurm; enable it by linking
 /usr/share/tfcluster/tfcluster.conf into /etc/slurm/plugstack.conf.d/.
CONTROL
mkdir -p "$out"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
