#!/bin/sh
# Run as every task by tests/ending.rs: ending.sh 'ROLE:INDEX=ACTION' ... 'default=ACTION'
# Each task finds its role and index in TF_CONFIG and does the first matching ACTION:
#   exit N         after 1 s, exit N
#   signal SIG     after 1 s, kill itself with SIG
#   oom            after 1 s, be killed by the OOM killer (a 64 MB memory cgroup, then tail /dev/zero)
#   save S FILE    a chief writing its checkpoint: after S s, write FILE, then exit 42
#   sleep S        sleep S s, then exit 0 (a stand-in for a server, or for training)
me=$(printf '%s' "$TF_CONFIG" | sed -n 's/.*"task":{"type":"\([a-z]*\)","index":\([0-9]*\)}.*/\1:\2/p')
for rule in "$@"; do
    case "$rule" in
        "$me="*|default=*) action=${rule#*=}; break ;;
    esac
done
set -- $action
case "$1" in
    exit) sleep 1; exit "$2" ;;
    signal) sleep 1; kill -s "$2" $$ ;;
    oom)
        sleep 1
        name=tfc-oom-$SLURM_JOB_ID-$SLURM_PROCID
        if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
            cg=/sys/fs/cgroup/$name
            mkdir "$cg" && echo 64M > "$cg/memory.max" && echo 0 > "$cg/memory.swap.max"
        else
            cg=/sys/fs/cgroup/memory/$name
            mkdir "$cg" && echo 64M > "$cg/memory.limit_in_bytes"
        fi || { echo "ending.sh: cannot make a memory cgroup at $cg" >&2; exit 99; }
        echo $$ > "$cg/cgroup.procs" || exit 99
        exec tail /dev/zero ;;
    save) sleep "$2"; echo saved > "$3"; exit 42 ;;
    sleep) exec sleep "$2" ;;
    *) echo "ending.sh: no action for $me in: $*" >&2; exit 99 ;;
esac
