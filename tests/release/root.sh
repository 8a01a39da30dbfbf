#!/usr/bin/env bash
# A Debian root per Slurm release, so that one Debian 12 machine tests every release: those
# Debian ships (their packages need a newer libc than Debian 12 has, so they cannot go on the
# host), and those built from SchedMD's sources, which sites run from SchedMD's RPMs, OpenHPC
# or their own builds.
#
#   tests/release/root.sh make NAME       build the root if it is missing or stale (cached)
#   tests/release/root.sh up NAME         enter it: a private mount namespace that holds the
#                                         root's mounts while commands run inside
#   tests/release/root.sh exec NAME CMD…  run CMD inside (environment and /tmp are the host's)
#   tests/release/root.sh down NAME       leave it: the namespace and its mounts go away
#   tests/release/root.sh path NAME       print where the root lives
#   tests/release/root.sh include NAME    print the include directory of its Slurm headers
#   tests/release/root.sh source NAME     print the source tarball a slurm-X.Y.Z root is built
#                                         from (exit 1, saying so, when it is not there)
#   tests/release/root.sh fetched NAME    print the roots NAME needs that mmdebstrap makes (they
#                                         need the network; a source build then needs none)
#
# NAME is the second column of tests/releases.tsv:
# - a Debian suite (bookworm, trixie, sid): that suite's own Slurm packages, munge and what the
#   test cluster needs;
# - slurm-X.Y.Z: Debian 12 with munge and a compiler, and Slurm X.Y.Z built from SchedMD's
#   unmodified source, TFC_SLURM_SRC/slurm-X.Y.Z.tar.xz (default: ../shared/slurm-src beside
#   the checkout), configured as a site that builds from source does (prefix /usr/local,
#   configuration in /etc/slurm) and installed there. The build takes 3 to 4 minutes on 2 cores,
#   is bounded by TFC_BUILD_TIMEOUT seconds (1800), and its log is kept beside the root;
# - slurm-X.Y.Z-rpm: the same, laid out as SchedMD's RPMs lay Slurm out (prefix /usr, libraries
#   in /usr/lib64, plugins in /usr/lib64/slurm), on a build host that also has Rust and libclang
#   for tfcluster's own `rpmbuild -ta`;
# - bare: bookworm with nothing but what mmdebstrap's minbase has (the fresh-machine check,
#   tests/fresh-machine.sh);
# - bundle: the root file system of the OCI bundles the --container tests run tasks in
#   (tests/common/cluster.rs `bundle` links it into each): a container image's userland,
#   bookworm minbase with Python 3.11, on which the TensorFlow virtualenv runs when a test binds
#   it in; never entered with `up`.
#
# Inside, /proc is fresh, /sys and /dev are the host's, /run is a private tmpfs (munge's socket,
# `ip netns` mounts), and /tmp, the checkout and the TensorFlow virtualenv (with the host's
# Python 3.11 that it runs on) are the host's, at the same paths, so tests on the host and
# daemons inside see the same files. The bare root shares nothing (its /tmp is its own). Roots
# are cached in TFC_ROOTS (/var/cache/tfcluster/roots) and rebuilt only when their package
# list, or their source tarball, changes. `make` holds a lock per root, so a make in the
# background (tests/run.sh prepares the next releases' roots while it tests) and an `up` that
# needs the same root wait for each other instead of building twice. Needs mmdebstrap
# (tests/setup.sh installs it).
set -euo pipefail

ROOTS=${TFC_ROOTS:-/var/cache/tfcluster/roots}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TF_VENV=${TFC_TF_VENV:-/var/cache/tfcluster/tf-venv}
# The JAX, Keras 3 and Keras Tuner virtualenv (tests/jax/setup.sh).
JAX_VENV=${TFC_JAX_VENV:-/var/cache/tfcluster/jax-venv}
# PyTorch's (tests/torch/setup.sh).
TORCH_VENV=${TFC_TORCH_VENV:-/var/cache/tfcluster/torch-venv}
# Everything the test cluster, the install tests and the packaging run inside the root.
# runc: the OCI runtime of the --container tests (oci.conf in tests/cluster/cluster.sh).
# nftables: libnftables1, which the plugin loads for isolate=yes, and `nft`, with which the
# isolation tests read each node's ruleset.
CLUSTER_TOOLS=iproute2,util-linux,mount,hostname,procps,make,binutils,dpkg-dev,python3,rpm,runc,nftables
CLUSTER_PACKAGES=slurmctld,slurmd,slurm-client,munge,libslurm-dev,$CLUSTER_TOOLS
# What SchedMD's configure needs for the plugins the tests use (auth/munge, cgroup, the OCI
# container support: json-c and http-parser), besides a compiler. Debian 12's own packages.
BUILD_PACKAGES=build-essential,pkg-config,munge,libmunge-dev,libdbus-1-dev,libjson-c-dev,libhttp-parser-dev,xz-utils,$CLUSTER_TOOLS
SLURM_SRC=${TFC_SLURM_SRC:-$REPO/../shared/slurm-src}
# Changing how releases are built (configure's options) must rebuild them: part of the cache key.
# --disable-debug CFLAGS=-O1: no -ggdb3, which doubled the compile time; SchedMD's own packages
# use -O2, which changes nothing a plugin sees.
BUILD_CONFIGURE="--prefix=/usr/local --sysconfdir=/etc/slurm --disable-debug CFLAGS=-O1"
# slurm-X.Y.Z-rpm: the same source laid out as SchedMD's RPMs lay Slurm out (slurm.spec's
# %configure: under /usr, libraries in /usr/lib64), on a build host that also has what
# tfcluster's own `rpmbuild -ta` needs (Rust, libclang): tests/install.rs builds the RPM there.
RPM_CONFIGURE="--prefix=/usr --libdir=/usr/lib64 --sysconfdir=/etc/slurm --disable-debug CFLAGS=-O1"
RPM_BUILD_TOOLS=rustc-web,cargo-web,libclang-dev
configure_of() {
    case $1 in
        *-rpm) echo "$RPM_CONFIGURE" ;;
        *) echo "$BUILD_CONFIGURE" ;;
    esac
}
recipe_of() { echo "configure $(configure_of "$1"); make -j\$((\$(nproc) + 1)); make install"; }

log() { printf 'root: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, mount namespaces)"

suite_of() {
    case $1 in
        bookworm|trixie|sid) echo "$1" ;;
        bare|bundle|build-bookworm|build-bookworm-rpm|slurm-*) echo bookworm ;;
        *) die "unknown root '$1' (bookworm, trixie, sid, slurm-X.Y.Z, bare or bundle)" ;;
    esac
}
packages_of() {
    case $1 in
        bare) echo "ca-certificates" ;;
        bundle) echo "python3.11" ;;
        build-bookworm-rpm|slurm-*-rpm) echo "$BUILD_PACKAGES,$RPM_BUILD_TOOLS" ;;
        build-bookworm|slurm-*) echo "$BUILD_PACKAGES" ;;
        # Apptainer is packaged from forky (not in bookworm or trixie): the apptainer tests run here.
        sid) echo "$CLUSTER_PACKAGES,apptainer" ;;
        *) echo "$CLUSTER_PACKAGES" ;;
    esac
}
path_of() { echo "$ROOTS/$1"; }
version_of() { local v=${1#slurm-}; echo "${v%-rpm}"; }
source_of() { echo "$SLURM_SRC/slurm-$(version_of "$1").tar.xz"; }
# Where a source release installs itself.
prefix_of() {
    case $1 in
        *-rpm) echo /usr ;;
        *) echo /usr/local ;;
    esac
}
# Where the Slurm headers of a root are (a source build installs them under its prefix).
include_of() {
    case $1 in
        slurm-*) echo "$(path_of "$1")$(prefix_of "$1")/include" ;;
        *) echo "$(path_of "$1")/usr/include" ;;
    esac
}
pidfile_of() { echo "/run/tfcluster-root-$1.pid"; }

# What a root is made of: compared with the key it was made with, to know whether it is stale.
key_of() {
    local name=$1 key
    key="$(suite_of "$name") $(packages_of "$name")"
    case $name in
        slurm-*)
            local src
            src=$(source_of "$name")
            [ -f "$src" ] || die "no source for $name: $src is missing (TFC_SLURM_SRC names another folder)"
            key="$key | $(sha256sum "$src" | cut -d' ' -f1) | $(recipe_of "$name")"
            ;;
    esac
    echo "$key"
}

make_root() {
    local name=$1
    mkdir -p "$ROOTS"
    # One maker per root at a time; the second waits and then finds the root made.
    exec {lock}>"$ROOTS/.$name.lock"
    flock "$lock"
    case $name in
        slurm-*) make_source_root "$name" ;;
        *) make_debian_root "$name" ;;
    esac
    flock -u "$lock"
    exec {lock}>&-
}

# Debian 12 with the build packages (made once, shared by every source release; with the RPM
# build tools for the RPM layout), then a copy of it per release in which that release is built
# and installed.
make_source_root() {
    local name=$1 dir key base=build-bookworm prefix
    [[ $name == *-rpm ]] && base=build-bookworm-rpm
    prefix=$(prefix_of "$name")
    dir=$(path_of "$name")
    key=$(key_of "$name")
    if [ "$(cat "$dir/.tfcluster-packages" 2>/dev/null)" = "$key" ]; then return 0; fi
    make_debian_root "$base"
    log "building $name from $(source_of "$name") (3-4 minutes on 2 cores; log: $dir.log)"
    local start=$SECONDS
    rm -rf "$dir.new"
    cp -a "$(path_of "$base")" "$dir.new"
    mkdir -p "$dir.new/usr/src"
    tar -C "$dir.new/usr/src" -xf "$(source_of "$name")"
    local version
    version=$(version_of "$name")
    # A private mount namespace for the build: its /proc and /dev go away with it.
    # shellcheck disable=SC2016
    if ! timeout "${TFC_BUILD_TIMEOUT:-1800}" unshare --mount --propagation private -- bash -c '
        set -e
        R=$1; v=$2; configure=$3
        mount -t proc proc "$R/proc"
        mount --rbind /dev "$R/dev"
        exec chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C bash -c "
            set -e
            cd /usr/src/slurm-\$0
            # Debian'"'"'s loader does not look in /usr/lib64 (the RPM layout'"'"'s libdir).
            echo /usr/lib64 > /etc/ld.so.conf.d/lib64.conf
            ./configure \$1
            make -j\$((\$(nproc) + 1))
            make install
            ldconfig
            cd / && rm -rf /usr/src/slurm-\$0
        " "$v" "$configure"
    ' build "$dir.new" "$version" "$(configure_of "$name")" >"$dir.log" 2>&1 </dev/null; then
        tail -n 30 "$dir.log" >&2
        die "building Slurm $version failed or took over ${TFC_BUILD_TIMEOUT:-1800} s (log: $dir.log)"
    fi
    [ -x "$dir.new$prefix/sbin/slurmd" ] || die "Slurm $version built, but installed no slurmd (log: $dir.log)"
    echo "$key" > "$dir.new/.tfcluster-packages"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
    log "built $name in $((SECONDS - start)) s"
}

make_debian_root() {
    local name=$1 suite packages dir
    suite=$(suite_of "$name")
    packages=$(packages_of "$name")
    dir=$(path_of "$name")
    if [ "$(cat "$dir/.tfcluster-packages" 2>/dev/null)" = "$suite $packages" ]; then return 0; fi
    log "making the $name root ($suite: $packages) in $dir"
    local start=$SECONDS
    rm -rf "$dir.new"
    mkdir -p "$ROOTS"
    # The sid index served here can be older than its Valid-Until; it is only a test root.
    # mmdebstrap needs the network: tests/run.sh makes these roots before the lanes, which have
    # none.
    mmdebstrap --quiet --variant=minbase --include="$packages" \
        --aptopt='Acquire::Check-Valid-Until "false"' "$suite" "$dir.new" >&2 \
        || die "mmdebstrap $suite failed"
    if [ "$name" = bundle ]; then
        # Mount points for what the tests' config.json binds in (the root is read-only to the
        # runtime): the node's /etc/hosts (TF_CONFIG names nodes) and the TensorFlow virtualenv.
        touch "$dir.new/etc/hosts"
        mkdir -p "$dir.new$TF_VENV"
    fi
    if [ "$name" = bare ]; then
        # The archives this machine's apt uses (a Debian 12 installation has the security
        # archive too; mmdebstrap alone gives only the main one).
        if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
            rm -f "$dir.new/etc/apt/sources.list"
            cp /etc/apt/sources.list.d/*.sources "$dir.new/etc/apt/sources.list.d/"
        fi
        [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$dir.new/etc/apt/"
        cp /etc/resolv.conf "$dir.new/etc/resolv.conf" 2>/dev/null || true
        # The certificate authorities this machine trusts besides Debian's (a site's own, or
        # a proxy's), so that the registries answer inside as they do here.
        if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
            cp /usr/local/share/ca-certificates/*.crt "$dir.new/usr/local/share/ca-certificates/"
            chroot "$dir.new" update-ca-certificates >/dev/null 2>&1 || true
        fi
        [ -f /etc/pip.conf ] && cp /etc/pip.conf "$dir.new/etc/pip.conf"
    fi
    echo "$suite $packages" > "$dir.new/.tfcluster-packages"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
    log "made $name in $((SECONDS - start)) s"
}

# The PID of the process that holds a root's namespace, if it still runs: a PID file left by a
# run cut short names, after a reboot, a process of someone else's, never to be entered or killed.
holder_pid() {
    local f
    f=$(pidfile_of "$1")
    [ -s "$f" ] && [ "$(cat "/proc/$(cat "$f")/comm" 2>/dev/null)" = sleep ] && cat "$f"
}

up() {
    local name=$1 dir
    make_root "$name"
    holder_pid "$name" >/dev/null && return 0
    dir=$(path_of "$name")
    # Names of this machine must resolve inside (from 24.11 an unresolvable name costs 10 s per
    # lookup), and, in the release roots, only from files: the nodes' network namespaces reach
    # no DNS server. The bare root stays as Debian made it (it needs DNS for apt-get).
    printf '127.0.0.1\tlocalhost %s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
        "$(hostname)" > "$dir/etc/hosts"
    [ "$name" = bare ] || sed -i 's/^hosts:.*/hosts:          files/' "$dir/etc/nsswitch.conf"
    local shared=() tmp=bind
    if [ "$name" = bare ]; then
        tmp=tmpfs    # a machine of its own: nothing of this one's is shared
    else
        # The container image of the --container tests (they link it into their bundles).
        make_root bundle
        shared=(/tmp "$REPO")
        # The TensorFlow virtualenvs: the newest, and others beside it (tf-venv-2.15.1); JAX's
        # and PyTorch's.
        for venv in "$TF_VENV" "$TF_VENV"-* "$JAX_VENV" "$TORCH_VENV"; do
            [ -d "$venv" ] && shared+=("$venv")
        done
        # The TensorFlow virtualenvs run on the host's Python 3.11 (one virtualenv serves every
        # release; the roots' own Pythons are 3.13 and 3.14).
        if [ -x /usr/bin/python3.11 ] && [ -d /usr/lib/python3.11 ]; then
            shared+=(/usr/bin/python3.11 /usr/lib/python3.11)
        fi
    fi
    # shellcheck disable=SC2016
    setsid unshare --mount --propagation private -- bash -c '
        set -e
        R=$1; tmp=$2; shift 2
        mount --bind "$R" "$R"      # `ip netns` remounts / and needs it to be a mount point
        [ "$tmp" = tmpfs ] && mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
        mount -t proc proc "$R/proc"
        mount --rbind /sys "$R/sys"
        mount --rbind /dev "$R/dev"
        mount -t tmpfs -o mode=0755 tmpfs "$R/run"
        for p in "$@"; do
            if [ -d "$p" ]; then mkdir -p "$R$p"; else mkdir -p "$(dirname "$R$p")"; touch "$R$p"; fi
            mount --rbind "$p" "$R$p"
        done
        mkdir -p "$R/run/lock" "$R/.oldroot"
        # pivot_root, not chroot: Apptainer refuses to run in a chroot, and the kernel refuses
        # user namespaces there. The old root goes once the holder is in.
        cd "$R"
        pivot_root . .oldroot
        exec chroot . /bin/sh -c "umount -l /.oldroot; exec /bin/sleep infinity"
    ' holder "$dir" "$tmp" "${shared[@]}" </dev/null >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] && break
        kill -0 "$pid" 2>/dev/null || die "could not enter $dir"
        sleep 0.05
    done
    echo "$pid" > "$(pidfile_of "$name")"
    log "up: $name ($( (in_root "$name" slurmd -V) 2>/dev/null || echo 'no Slurm'))"
}

in_root() {
    local name=$1 pid
    shift
    pid=$(holder_pid "$name") || die "the $name root is not up ($0 up $name)"
    # A source build's programs are under /usr/local, which comes first as on such a site.
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin exec nsenter --target "$pid" --mount --root --wd -- "$@"
}

down() {
    local name=$1 pid f
    f=$(pidfile_of "$name")
    if pid=$(holder_pid "$name"); then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
}

cmd=${1:-}
name=${2:-}
[ -n "$name" ] || { echo "usage: $0 make|up|exec|down|path NAME [CMD…]" >&2; exit 2; }
case $cmd in
    make) make_root "$name" ;;
    include) include_of "$name" ;;
    source)
        src=$(source_of "$name")
        [ -f "$src" ] || { log "$src is missing"; exit 1; }
        echo "$src"
        ;;
    fetched)
        # `up` links the container image (bundle) into every release root.
        case $name in
            bare|bundle) echo "$name" ;;
            slurm-*-rpm) printf '%s\n' build-bookworm-rpm bundle ;;
            slurm-*) printf '%s\n' build-bookworm bundle ;;
            *) printf '%s\n' "$name" bundle ;;
        esac
        ;;
    up) up "$name" ;;
    exec) shift 2; in_root "$name" "$@" ;;
    down) down "$name" ;;
    path) path_of "$name" ;;
    *) echo "usage: $0 make|up|exec|down|path NAME [CMD…]" >&2; exit 2 ;;
esac
