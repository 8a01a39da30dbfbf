#!/usr/bin/env bash
# Whether users other than root can read the checkout at $1: the test cluster runs srun as other
# users (tfc-owner, tfc-other), whose srun loads the plugin from the checkout's target/ and runs
# its tools from tests/. From a clone in root's home (mode 0700), each such test failed with
# `dlopen(...libtfcluster.so): Permission denied`. Prints what to change and exits 1 when they
# cannot; tests/run.sh and tests/demo.sh stop at once on it.
set -euo pipefail
dir=$(cd "${1:?usage: tests/readable.sh CHECKOUT}" && pwd)
# nobody (65534) stands for any other user: what it cannot reach, tfc-owner cannot either.
if setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$dir/Cargo.toml" 2>/dev/null \
    && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$dir/tests" 2>/dev/null; then
    exit 0
fi
# The first directory on the way that they cannot enter.
closed= at=
IFS=/ read -ra parts <<<"${dir#/}"
for part in "${parts[@]}"; do
    at=$at/$part
    if ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$at" 2>/dev/null; then
        closed=$at
        break
    fi
done
[ -n "$closed" ] || closed=$dir
echo "tfcluster: other users cannot read this checkout ($dir): the tests run srun as other" \
    "users, whose srun loads the plugin from it, and $closed is closed to them (mode" \
    "$(stat -c %a "$closed")). Clone it where every user can read it (e.g. git clone ..." \
    "/srv/tfcluster), or open it to them (chmod o+x $closed)." >&2
exit 1
