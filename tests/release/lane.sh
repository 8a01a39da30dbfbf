#!/usr/bin/env bash
# One lane of the test command (tests/run.sh runs two at once): tests/release/lane.sh LOGS RELEASE...
# Runs each release's suites (tests/release/run.sh) after the one before. A release's lines go to
# LOGS/RELEASE and are printed whole when it ends, so that the other lane's lines do not cut
# into them; its seconds go to LOGS/RELEASE.seconds and the times file, and its name to
# LOGS/failed when it failed. tests/run.sh starts each lane in a network namespace of its own
# (`unshare --net`): the loopback comes up here, and the cluster's bridge, slurmctld's ports and
# the nodes' links are the lane's alone.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
logs=${1:?usage: tests/release/lane.sh LOGS RELEASE...}
shift
ip link set lo up
for release in "$@"; do
    start=$SECONDS
    echo "== Slurm $release: started (its lines follow when it ends)"
    bash tests/release/run.sh "$release" >"$logs/$release" 2>&1 || echo "$release" >>"$logs/failed"
    seconds=$((SECONDS - start))
    echo "$seconds" >"$logs/$release.seconds"
    tests/times.sh add "$release" wall "$release" "$seconds"
    {
        flock 9
        cat "$logs/$release"
        echo "== Slurm $release: ended after $seconds s"
    } 9>"$logs/print.lock"
done
