#!/bin/sh
# Run as every task by tests/ending.rs: ending.sh 'ROLE:INDEX=ACTION' ... 'default=ACTION'
# Each task finds its role and index in TF_CONFIG and does the first matching ACTION:
#   exit N         after 1 s, exit N
#   signal SIG     after 1 s, kill itself with SIG
#   oom DIR        after 1 s, be killed by the OOM killer (a 64 MB memory cgroup named after the
#                  cluster's state directory DIR, then tail /dev/zero)
#   save S FILE    a chief writing its checkpoint: after S s, write FILE, then exit 42
#   sleep S        sleep S s, then exit 0 (a stand-in for a server, or for training)
#   serve N        a worker's server: listen on its TF_CONFIG port, take one connection, hold it
#                  3 s (three of the node's looks for it, fail_fast=auto), then exit N
#   listen S N FILE  a worker's server no task of the step reaches: listen on its TF_CONFIG
#                  port, write its address (HOST:PORT) to FILE, take any connection for S s,
#                  then exit N
#   connect R:I S  the chief reaching task R:I's server: connect to its TF_CONFIG address
#                  (retried while it is not listening yet), hold the connection S s, exit 0
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
        # Named by the cluster's state directory DIR too: the test command's two clusters share
        # the machine's cgroups and give the same job IDs (one left by a run stopped mid-test
        # then refused the next run's, 2026-11-28); one left by an earlier run is used again.
        name=tfc-oom-$(basename "$2")-$SLURM_JOB_ID-$SLURM_PROCID
        if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
            cg=/sys/fs/cgroup/$name
            mkdir -p "$cg" && echo 64M > "$cg/memory.max" && echo 0 > "$cg/memory.swap.max"
        else
            cg=/sys/fs/cgroup/memory/$name
            mkdir -p "$cg" && echo 64M > "$cg/memory.limit_in_bytes"
        fi || { echo "ending.sh: cannot make a memory cgroup at $cg" >&2; exit 99; }
        echo $$ > "$cg/cgroup.procs" || exit 99
        exec tail /dev/zero ;;
    save) sleep "$2"; echo saved > "$3"; exit 42 ;;
    sleep) exec sleep "$2" ;;
    serve|connect|listen)
        exec python3 -c '
import json, os, socket, sys, time
action, args = sys.argv[1], sys.argv[2:]
tf = json.loads(os.environ["TF_CONFIG"])
def address(role, index):
    host, port = tf["cluster"][role][int(index)].rsplit(":", 1)
    return host, int(port)
own = address(tf["task"]["type"], tf["task"]["index"])
if action == "serve":
    server = socket.create_server(("", own[1]))
    connection, _ = server.accept()
    time.sleep(3)
    sys.exit(int(args[0]))
if action == "listen":
    server = socket.create_server(("", own[1]))
    with open(args[2] + ".tmp", "w") as f:
        f.write("%s:%d" % own)
    os.rename(args[2] + ".tmp", args[2])
    end, held = time.time() + float(args[0]), []
    while time.time() < end:
        server.settimeout(max(0.01, end - time.time()))
        try:
            held.append(server.accept()[0])
        except OSError:
            pass
    sys.exit(int(args[1]))
role, index = args[0].split(":")
end = time.time() + 60
while True:
    try:
        connection = socket.create_connection(address(role, index), timeout=5)
        break
    except OSError:
        if time.time() > end:
            raise
        time.sleep(0.1)
time.sleep(float(args[1]))
' "$@" ;;
    *) echo "ending.sh: no action for $me in: $*" >&2; exit 99 ;;
esac
