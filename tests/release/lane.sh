#!/usr/bin/env bash
# One lane of the test command (tests/run.sh runs the lanes of tests/lanes.tsv at once):
#   tests/release/lane.sh LOGS UNIT...
# Runs each unit after the one before: a release (all of its suites: tests/release/run.sh), or
# RELEASE:PART, a part of its suites (TFC_PART). A unit's lines go to LOGS/UNIT and are printed
# whole when it ends, so that the other lanes' lines do not cut into them; its seconds go to
# LOGS/UNIT.seconds and the times file, and its release's name to LOGS/failed when it failed.
# The two parts of a release share its root, so a part waits while the other runs (a lock,
# LOGS/RELEASE.lock). tests/run.sh starts each lane in a network namespace of its own
# (`unshare --net`): the loopback comes up here, and the cluster's bridge, slurmctld's ports and
# the nodes' links are the lane's alone; TFC_LANE_CGROUP names the CPU cgroup it runs in.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
logs=${1:?usage: tests/release/lane.sh LOGS UNIT...}
shift
ip link set lo up
# The lane's CPU cgroup (tests/run.sh makes it), joined before anything of the lane starts.
if [ -n "${TFC_LANE_CGROUP:-}" ] && ! echo $$ >"$TFC_LANE_CGROUP/cgroup.procs"; then
    echo "tfcluster: could not join $TFC_LANE_CGROUP: this lane shares the cores per session" >&2
fi
for unit in "$@"; do
    release=${unit%%:*}
    part=
    [ "$unit" = "$release" ] || part=${unit#*:}
    start=$SECONDS
    echo "== Slurm $unit: started (its lines follow when it ends)"
    {
        flock 8
        TFC_PART=$part bash tests/release/run.sh "$release" >"$logs/$unit" 2>&1 8>&- || echo "$release" >>"$logs/failed"
    } 8>"$logs/$release.lock"
    seconds=$((SECONDS - start))
    echo "$seconds" >"$logs/$unit.seconds"
    tests/times.sh add "$release" wall "$unit" "$seconds"
    {
        flock 9
        cat "$logs/$unit"
        echo "== Slurm $unit: ended after $seconds s"
    } 9>"$logs/print.lock"
done
