#!/usr/bin/env bash
# Installs what building and testing tfcluster needs on Debian 12 (as root), if missing, all
# from Debian's own packages:
# - Slurm 22.05 + munge (the demo's cluster, and the headers a plain build reads its release from);
# - libnftables1 (the demo's plugstack.conf line is the packages', with isolate=yes);
# - libclang (bindgen), a C compiler and binutils (the ABI and symbol tests);
# - mmdebstrap (the Debian roots the tests run the other Slurm releases in);
# - Rust: a toolchain already on the machine if it is new enough (rustup's, in ~/.cargo/bin, is
#   preferred), else Debian 12's rustc-web/cargo-web with rustfmt and clippy (Debian's plain
#   rustc, 1.63, is too old).
# Sourced (`. tests/setup.sh`) by tests/run.sh, tests/demo.sh and benches/run.sh, so that cargo
# is on their PATH afterwards.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "setup: run as root (apt-get, namespaces, munge)" >&2; exit 1; }

# The oldest Rust that builds the plugin and its test dependencies: Cargo.toml's rust-version,
# the one place it is written (clippy holds the code to it). Debian 12 ships 1.85 in bookworm
# and newer in bookworm-security as rustc-web.
tfc_min_rust=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml")

tfc_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing ${missing[*]}" >&2
        if [ -z "${tfc_apt_updated:-}" ]; then apt-get update -qq; tfc_apt_updated=1; fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# True when `cargo` on PATH is at least $tfc_min_rust.
tfc_rust_ok() {
    local v
    v=$(cargo --version 2>/dev/null | awk '{print $2}') || return 1
    [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$tfc_min_rust" "$v" | sort -V | head -1)" = "$tfc_min_rust" ]
}

tfc_install slurmctld slurmd slurm-client munge libslurm-dev libclang-dev gcc libc6-dev binutils \
    make git python3 python3-venv iproute2 util-linux procps mmdebstrap ca-certificates libnftables1

if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! tfc_rust_ok; then
    echo "setup: no Rust >= $tfc_min_rust on this machine; installing Debian's rustc-web" >&2
    tfc_install rustc-web cargo-web rustfmt-web rust-web-clippy
    hash -r
    tfc_rust_ok || { echo "setup: Debian's cargo is $(cargo --version); tfcluster needs >= $tfc_min_rust" >&2; exit 1; }
fi
