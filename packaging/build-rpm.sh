#!/usr/bin/env bash
# The RPM, built as a RHEL-family site builds it (`make rpm`): the source tarball
# (packaging/dist.sh), then `rpmbuild -ta` on it, against the Slurm whose development files are
# installed (slurm-devel: /usr/include/slurm, /usr/lib64/libslurm.so). The package requires
# that release's libslurm soname and names the release in Release (1.slurm25.11). Needs git,
# cargo, rpmbuild and clang's libclang. Prints the binary package's path; the source package
# (SRPM) goes beside it. packaging/build-rpm.sh [OUTDIR] (default target/rpm)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/target/rpm}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$(bash "$root/packaging/dist.sh" "$work")
rpmbuild -ta --quiet --define "_topdir $work/top" "$tarball" >&2
mkdir -p "$out"
cp "$work"/top/RPMS/*/*.rpm "$work"/top/SRPMS/*.rpm "$out/"
echo "$out/$(basename "$(ls "$work"/top/RPMS/*/*.rpm)")"
