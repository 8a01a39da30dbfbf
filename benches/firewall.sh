#!/usr/bin/env bash
# What isolate=yes costs one node per step, phase by phase, with the libnftables of each Debian
# release the tests run (bookworm's on the host, which the source-built releases use too;
# trixie's and sid's in their roots): benches/firewall.sh [RUNS] (default 100). One Markdown
# table per library on stdout; benches/firewall.rs says what each row is. As root.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
runs=${1:-100}
. benches/lib.sh
bin=$(cargo bench --bench firewall --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
[ -x "$bin" ] || die "cargo did not build benches/firewall.rs"
root=tests/release/root.sh
# The libnftables1 package installed under the directory $1 ("" for the host).
library() { dpkg-query --admindir="$1/var/lib/dpkg" -W -f '${Version}' libnftables1; }
for suite in bookworm trixie sid; do
    if [ "$suite" = bookworm ]; then
        echo "## libnftables $(library "") ($suite, the host)"
        TFC_FIREWALL_RUNS=$runs "$bin"
        continue
    fi
    echo "## libnftables $(library "$("$root" path "$suite")") ($suite)"
    "$root" up "$suite" >&2
    status=0
    TFC_FIREWALL_RUNS=$runs "$root" exec "$suite" "$bin" || status=$?
    "$root" down "$suite" >&2
    [ "$status" = 0 ] || die "the bench failed in $suite's root"
done
