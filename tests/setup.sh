#!/usr/bin/env bash
# Installs what building and testing tfcluster needs on Debian 12 (as root), if missing:
# Slurm 22.05 + munge (the test cluster, and the headers the build reads its version from),
# libclang (bindgen), a C compiler and binutils (the ABI and symbol tests), and Rust.
# Sourced (`. tests/setup.sh`) by tests/run.sh, tests/demo.sh and benches/run.sh, so that cargo
# is on their PATH afterwards.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "setup: run as root (apt-get, namespaces, munge)" >&2; exit 1; }

packages=(slurmctld slurmd slurm-client munge libslurm-dev libclang-dev gcc libc6-dev binutils
          make python3 python3-venv iproute2 util-linux procps)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
    echo "setup: installing Debian's cargo (tfcluster needs Rust >= 1.77; use rustup if Debian's is older)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo rustc >/dev/null
fi
