# Sourced by build-deb.sh with the built plugin in $plugin: what the package says about it, and
# the files it installs.
#   tfc_slurm     the Slurm release the plugin is for (MAJOR.MINOR, read from the .so itself)
#   tfc_next      the next release (a package must depend on >= tfc_slurm and < tfc_next)
#   tfc_version   tfcluster's own version (Cargo.toml)
#   TFC_ADMIN_CONF the admin's settings file (a conffile)
#   tfc_stage DIR PLUGDIR   installs the package's files under DIR, the plugin in PLUGDIR
tfc_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tfc_slurm=$("$tfc_root/packaging/plugin-version.sh" "$plugin")
tfc_next=$(printf '%d.%02d' "${tfc_slurm%.*}" $((10#${tfc_slurm#*.} + 1)))
tfc_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$tfc_root/Cargo.toml" | head -1)
# The admin's settings file, which the packages install once and never overwrite.
TFC_ADMIN_CONF=/etc/tfcluster/tfcluster.conf

tfc_stage() {
    local dir=$1 plugdir=$2
    make -s -C "$tfc_root" install DESTDIR="$dir" PREFIX=/usr SYSCONFDIR=/etc \
        SLURM_PLUGIN_DIR="$plugdir" PLUGIN="$plugin" >/dev/null
    strip --strip-unneeded "$dir$plugdir/spank_tfcluster.so"
    # The admin's copy of the packaged line, which the enable step uses: a conffile, kept as
    # the admin edited it through upgrades (the one under /usr/share is the package's).
    install -D -m 0644 "$dir/usr/share/tfcluster/tfcluster.conf" "$dir$TFC_ADMIN_CONF"
    install -D -m 0644 "$tfc_root/README.md" "$dir/usr/share/doc/slurm-spank-tfcluster/README.md"
}
