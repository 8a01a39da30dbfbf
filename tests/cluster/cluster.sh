#!/usr/bin/env bash
# A real multi-node Slurm cluster on one Debian 12 machine, for tfcluster's tests and demo.
#
#   tests/cluster/cluster.sh up [PLUGIN.so [WORD...]]
#                                             install what is missing, start munge, slurmctld and
#                                             one slurmd per node, load PLUGIN.so (if given) with
#                                             the plugstack.conf words WORD...
#   tests/cluster/cluster.sh plugstack LINE   replace the plugstack.conf line (re-read per step)
#   tests/cluster/cluster.sh restart-slurmd [--busy] [--keep-munge [--options 'OPTS']] NODE...
#                                             restart those nodes' slurmd (and munged), as an admin
#                                             does: slurmd reads plugstack.conf again;
#                                             --keep-munge: slurmd alone, in the node's namespaces
#                                             as they are (a slurmstepd that outlives it, a job's
#                                             extern step, keeps its munged), started with OPTS
#                                             (default -D; e.g. --systemd, as 23.11's unit does)
#   tests/cluster/cluster.sh restart-slurmctld
#                                             restart slurmctld (its jobs and nodes kept from its
#                                             state files) and wait until every node is idle
#   tests/cluster/cluster.sh reconfigure      scontrol reconfigure, as an admin does; a slurmctld
#                                             that does not answer within 60 s after it is
#                                             restarted, with a line
#   tests/cluster/cluster.sh configless NODE yes|no
#                                             configless Slurm (SlurmctldParameters=
#                                             enable_configless): restart slurmctld, and NODE's
#                                             slurmd fetching its configuration from it with the
#                                             cluster's configuration folder hidden from it; `no`
#                                             also drops slurm.conf's PlugStackConfig, so every
#                                             daemon reads the plugstack.conf beside slurm.conf
#   tests/cluster/cluster.sh configured NODE  back from `configless`: NODE and slurmctld read the
#                                             cluster's files again, PlugStackConfig as `up` set it
#   tests/cluster/cluster.sh prolog-flags FLAGS
#                                             slurm.conf's PrologFlags=FLAGS (none when empty),
#                                             e.g. Contain (every job gets an extern step):
#                                             restart slurmctld and every node's slurmd (a node
#                                             left on the old flags takes the new ones at the
#                                             next `scontrol reconfigure`, mid-job)
#   tests/cluster/cluster.sh unwell           the nodes out of service (down, drained, draining,
#                                             not responding), a line each: NODE STATE (REASON);
#                                             the down and drained ones are returned to service
#   tests/cluster/cluster.sh node-cpu         with TFC_NODE_CPU=1: each node's CPU so far, a line
#                                             each: NODE MICROSECONDS
#   tests/cluster/cluster.sh down             stop everything this script started, undo all
#   tests/cluster/cluster.sh status
#
# Each node is a slurmd in its own network namespace (veth on a bridge), UTS namespace (its own
# hostname) and mount namespace (a private /dev overlay holding 4 fake GPU devices for GRES, and
# a private /run/munge with the node's own munged, as on a real cluster: SchedMD's builds from
# 23.02 reject a launch credential that one shared munged already decoded for another node).
# slurmctld and the controller's munged run in the root namespaces. The daemons are the first
# on PATH (a source build's are in /usr/local/sbin). Everything started is recorded by PID in
# the state directory, and `down` kills only those PIDs plus what still runs inside the node
# namespaces it created.
#
# Settings (environment):
#   TFC_NODES   node names, in slurm.conf order (default "n9 n10 n011 n012": Slurm then prints
#               the step node list as n[9-10,011-012], zero padding and non-lexicographic order)
#   TFC_DIR     state directory (default /tmp/tfcluster-cluster)
#   TFC_CPU_NODES  CPU-only nodes (no GPU, no GRES) added after TFC_NODES, in partition `cpu`
#               (default "cpu1 cpu2"; empty for none). Partitions: debug (the default, exclusive)
#               and shared hold the GPU nodes (TFC_NODES), gpu too, cpu the CPU-only nodes,
#               mixed every node (heterogeneous jobs and steps, tests/heterogeneous.rs)
#   TFC_CPUS    CPUs each node declares (default 8; slurmd accepts more than the machine has)
#   TFC_PLUGSTACK_KIND  `up`'s plugstack.conf word before PLUGIN.so: required (the default) or
#               optional (the packages' snippet: `optional PLUGIN.so isolate=yes`, the demo's)
#   TFC_TOPOLOGY  a topology plugin and its topology.conf lines, `;`-separated, e.g.
#               "topology/tree;SwitchName=s1 Nodes=n011,n9;SwitchName=s2 Nodes=n012,n10"
#               (default none: Slurm's flat topology)
#   TFC_TOPOLOGY_PARAM  slurm.conf's TopologyParam (e.g. SwitchAsNodeRank), default none
#   TFC_SLURMD_PARAMETERS  more of slurm.conf's SlurmdParameters (after config_overrides), e.g.
#               contain_spank (24.05 and later: slurmstepd runs task_exit in a short-lived child)
#   TFC_NODE_CPU=1  each node's slurmd (and so its slurmstepds, tasks and epilogs) in a CPU
#               accounting cgroup of its own, which `node-cpu` reads: the CPU a launch costs each
#               node, counted in the node's own processes (benches/account.sh)
#   TFC_SOCKETS=2  two-socket GPU nodes whose hardware Slurm and the kernel both describe: each
#               declares 2 sockets of 1 core (CPUs 0 and 1, the machine's own two), Slurm binds
#               each task to its CPUs (TaskPlugin=task/affinity), gres.conf puts GPUs 0-1 on
#               socket 0's core and 2-3 on socket 1's (Cores=), and the node's mount namespace
#               has a PCI tree over /sys/bus/pci/devices that says the same (NUMA node and local
#               CPUs of each GPU, in PCI bus order; and one network card that is no GPU)
set -euo pipefail

DIR=${TFC_DIR:-/tmp/tfcluster-cluster}
# A running cluster keeps the names it was started with, so `down` always undoes what `up` did.
if [ -s "$DIR/nodes" ] && [ "${1:-}" != up ]; then NODES=($(cat "$DIR/nodes")); else NODES=(${TFC_NODES:-n9 n10 n011 n012} ${TFC_CPU_NODES-cpu1 cpu2}); fi
CPU_NODES=" ${TFC_CPU_NODES-cpu1 cpu2} "
# A CPU-only node: no Gres in slurm.conf, no line in gres.conf.
is_cpu_node() { [[ "$CPU_NODES" == *" $1 "* ]]; }
BRIDGE=tfcbr0
NET=10.77.0
HOSTS_BEGIN="# >>> tfcluster test cluster"
HOSTS_END="# <<< tfcluster test cluster"
SLURM_CONF_LINK=/etc/slurm/slurm.conf
PACKAGES=(slurmctld slurmd slurm-client munge libslurm-dev iproute2 util-linux)

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, munge, slurmd)"

# The release's own daemons: a source build's in /usr/local/sbin, Debian's in /usr/sbin.
PATH=/usr/local/sbin:/usr/local/bin:$PATH
sbin() { command -v "$1" || die "no $1 on PATH: is Slurm installed?"; }

# The PID a file of ours records, if that process still runs and is one of the daemons we start:
# a PID file left by a run that a machine's reboot or a CI timeout cut short names a process of
# no one's, or someone else's, which must be neither trusted nor killed.
running() {
    local pid
    [ -s "$1" ] && pid=$(cat "$1") && [ -n "$pid" ] || return 1
    case $(cat "/proc/$pid/comm" 2>/dev/null) in
        slurmd|slurmctld|munged|tfc-notify) echo "$pid" ;;
        *) return 1 ;;
    esac
}

# Debian's Slurm and munge, unless a Slurm is already installed (a release built from source).
install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null \
        && command -v munged >/dev/null; then
        return 0
    fi
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

node_ip() { echo "$NET.$((11 + $1))"; }

# TFC_NODE_CPU=1: node NAME's CPU accounting cgroup (cgroup v1's cpuacct where the machine
# mounts it, v2's otherwise), named after the state directory so two clusters never share one.
node_cgroup() {
    local base=/sys/fs/cgroup
    [ -d $base/cpuacct ] && base=$base/cpuacct
    echo "$base/tfcluster-$(basename "$DIR")/$1"
}
# Its CPU so far, in microseconds.
node_cpu_us() {
    local cg
    cg=$(node_cgroup "$1")
    if [ -r "$cg/cpuacct.usage" ]; then echo $(($(cat "$cg/cpuacct.usage") / 1000))
    else awk '$1 == "usage_usec" {print $2}' "$cg/cpu.stat"; fi
}

write_hosts_block() {
    # Rewrite /etc/hosts in place (it may be a bind mount), without our old block.
    local text
    text=$(sed "/^$HOSTS_BEGIN\$/,/^$HOSTS_END\$/d" /etc/hosts)
    {
        printf '%s\n' "$text"
        if [ "${1:-}" = add ]; then
            echo "$HOSTS_BEGIN"
            echo "$NET.1 tfc-ctl"
            for i in "${!NODES[@]}"; do echo "$(node_ip "$i") ${NODES[$i]}"; done
            echo "$HOSTS_END"
        fi
    } > /etc/hosts.tfc.tmp
    cat /etc/hosts.tfc.tmp > /etc/hosts
    rm -f /etc/hosts.tfc.tmp
}

write_config() {
    local conf=$DIR/etc
    mkdir -p "$conf" "$DIR/state" "$DIR/log" "$DIR/spool"
    local names gpu_nodes=() cpu_nodes=() all
    for name in "${NODES[@]}"; do
        if is_cpu_node "$name"; then cpu_nodes+=("$name"); else gpu_nodes+=("$name"); fi
    done
    names=$(IFS=,; echo "${gpu_nodes[*]}")
    all=$(IFS=,; echo "${NODES[*]}")
    {
        echo "ClusterName=tfc"
        echo "SlurmctldHost=$(hostname -s)($NET.1)"
        echo "MailProg=/bin/true"
        echo "SlurmUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$DIR/state"
        echo "SlurmdSpoolDir=$DIR/spool/%n"
        echo "SlurmctldPidFile=$DIR/slurmctld.pid"
        echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
        echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
        echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
        echo "SlurmctldPort=6817"
        echo "SlurmdPort=6818"
        echo "ProctrackType=proctrack/linuxproc"
        if [ "${TFC_SOCKETS:-}" = 2 ]; then echo "TaskPlugin=task/affinity"; else echo "TaskPlugin=task/none"; fi
        echo "SwitchType=switch/none"
        echo "MpiDefault=none"
        echo "MpiParams=ports=12000-12999"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        echo "GresTypes=gpu"
        echo "SlurmdParameters=config_overrides${TFC_SLURMD_PARAMETERS:+,$TFC_SLURMD_PARAMETERS}"
        echo "ReturnToService=2"
        echo "MinJobAge=10"
        echo "KillWait=5"
        # A node here has 1/64 to 1/4 of 2 cores, shared with another lane's cluster: once a
        # step's tasks end, each slurmstepd walks /proc for what is left, and at 64 nodes x 64
        # tasks, with the other lane busy, 4 of them took past the default 60 s and Slurm drained
        # their nodes "Kill task failed" (2026-11-28).
        echo "UnkillableStepTimeout=300"
        echo "InactiveLimit=0"
        # Heterogeneous jobs are scheduled by the backfill scheduler alone: every second, not 30.
        echo "SchedulerParameters=bf_interval=1"
        echo "PlugStackConfig=$conf/plugstack.conf"
        if [ -n "${TFC_TOPOLOGY:-}" ]; then echo "TopologyPlugin=${TFC_TOPOLOGY%%;*}"; fi
        if [ -n "${TFC_TOPOLOGY_PARAM:-}" ]; then echo "TopologyParam=$TFC_TOPOLOGY_PARAM"; fi
        for i in "${!NODES[@]}"; do
            local gres=" Gres=gpu:4" cpus="CPUs=${TFC_CPUS:-8}"
            is_cpu_node "${NODES[$i]}" && gres=""
            [ "${TFC_SOCKETS:-}" = 2 ] && cpus="CPUs=2 Sockets=2 CoresPerSocket=1 ThreadsPerCore=1"
            echo "NodeName=${NODES[$i]} NodeAddr=$(node_ip "$i") NodeHostname=${NODES[$i]} $cpus RealMemory=4000$gres State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=$names Default=YES OverSubscribe=EXCLUSIVE MaxTime=INFINITE State=UP"
        echo "PartitionName=shared Nodes=$names Default=NO MaxTime=INFINITE State=UP"
        if [ ${#cpu_nodes[@]} -gt 0 ]; then
            echo "PartitionName=gpu Nodes=$names Default=NO MaxTime=INFINITE State=UP"
            echo "PartitionName=cpu Nodes=$(IFS=,; echo "${cpu_nodes[*]}") Default=NO MaxTime=INFINITE State=UP"
            echo "PartitionName=mixed Nodes=$all Default=NO MaxTime=INFINITE State=UP"
        fi
    } > "$conf/slurm.conf"
    rm -f "$conf/topology.conf"
    if [ -n "${TFC_TOPOLOGY:-}" ]; then
        tr ';' '\n' <<<"${TFC_TOPOLOGY#*;}" > "$conf/topology.conf"
    fi
    {
        echo "AutoDetect=off"
        if [ "${TFC_SOCKETS:-}" = 2 ]; then
            echo "NodeName=$names Name=gpu File=/dev/nvidia[0-1] Cores=0"
            echo "NodeName=$names Name=gpu File=/dev/nvidia[2-3] Cores=1"
        else
            echo "NodeName=$names Name=gpu File=/dev/nvidia[0-3]"
        fi
    } > "$conf/gres.conf"
    write_pci_tree "$DIR/pci"
    # Slurm's own containers (srun --container=BUNDLE) with Debian's runc, as oci.conf(5)
    # describes for runc; without runc, --container stays advisory (tasks run on the node).
    rm -f "$conf/oci.conf"
    if command -v runc >/dev/null; then
        local id=%n.%u.%j.%s.%t
        {
            echo "RunTimeQuery=\"runc --root=/run/tfc-oci state $id\""
            echo "RunTimeKill=\"runc --root=/run/tfc-oci kill -a $id\""
            echo "RunTimeDelete=\"runc --root=/run/tfc-oci delete --force $id\""
            echo "RunTimeRun=\"runc --root=/run/tfc-oci run $id -b %b\""
        } > "$conf/oci.conf"
    fi
    # Plain srun/sbatch/sinfo find the cluster through the usual path.
    if [ -e "$SLURM_CONF_LINK" ] && [ ! -L "$SLURM_CONF_LINK" ]; then
        mv "$SLURM_CONF_LINK" "$SLURM_CONF_LINK.tfc-saved"
    fi
    mkdir -p "$(dirname "$SLURM_CONF_LINK")"
    ln -sfn "$conf/slurm.conf" "$SLURM_CONF_LINK"
}

# TFC_SOCKETS=2's PCI tree: the files of /sys/bus/pci/devices/ADDRESS that describe a device
# (vendor, class, numa_node, local_cpulist), for 4 NVIDIA GPUs in PCI bus order, two per socket,
# and one Intel network card.
write_pci_tree() {
    rm -rf "$1"
    [ "${TFC_SOCKETS:-}" = 2 ] || return 0
    local address vendor class numa cpus
    while read -r address vendor class numa cpus; do
        mkdir -p "$1/$address"
        echo "$vendor" > "$1/$address/vendor"
        echo "$class" > "$1/$address/class"
        echo "$numa" > "$1/$address/numa_node"
        echo "$cpus" > "$1/$address/local_cpulist"
    done <<'TREE'
0000:1a:00.0 0x10de 0x030200 0 0
0000:3d:00.0 0x10de 0x030200 0 0
0000:5e:00.0 0x8086 0x020000 0 0
0000:89:00.0 0x10de 0x030200 1 1
0000:b2:00.0 0x10de 0x030200 1 1
TREE
}

start_munge() {
    if running "$DIR/munged.pid" >/dev/null; then return; fi
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
    if [ ! -s /etc/munge/munge.key ]; then
        if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key
        else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
    fi
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    runuser -u munge -- "$(sbin munged)" --force --pid-file=/run/munge/tfc-munged.pid
    # 20 s: a machine busy building Slurm on every core can take seconds to start a daemon.
    for _ in $(seq 200); do [ -s /run/munge/tfc-munged.pid ] && break; sleep 0.1; done
    if [ ! -s /run/munge/tfc-munged.pid ]; then
        tail -n 20 /var/log/munge/munged.log >&2 || true
        die "munged wrote no PID file in 20 s (its log is above)"
    fi
    cp /run/munge/tfc-munged.pid "$DIR/munged.pid"
    munge -n | unmunge >/dev/null || die "munge does not work"
}

start_network() {
    ip link show "$BRIDGE" >/dev/null 2>&1 || {
        ip link add "$BRIDGE" type bridge
        ip addr add "$NET.1/24" dev "$BRIDGE"
        ip link set "$BRIDGE" up
    }
    for i in "${!NODES[@]}"; do
        local ns=tfc-${NODES[$i]} host=tfcv$i
        ip netns list | grep -qw "^$ns" && continue
        ip netns add "$ns"
        # A node's end of a veth whose namespace the kernel has not freed yet (a socket of the
        # last cluster can hold it) would make this add fail with "File exists": it is ours.
        ip link delete "$host" 2>/dev/null || true
        ip link add "$host" type veth peer name eth0 netns "$ns"
        ip link set "$host" master "$BRIDGE" up
        ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" route add default via "$NET.1"
    done
}

start_slurmctld() {
    if running "$DIR/slurmctld.run.pid" >/dev/null; then return; fi
    setsid "$(sbin slurmctld)" -D -i -f "$DIR/etc/slurm.conf" >"$DIR/log/slurmctld.out" 2>&1 < /dev/null &
    echo $! > "$DIR/slurmctld.run.pid"
}

# start_slurmd INDEX [configless]
start_slurmd() {
    local i=$1 name=${NODES[$1]} mode=${2:-}
    local pidf=$DIR/slurmd-$name.run.pid
    if running "$pidf" >/dev/null; then return; fi
    mkdir -p "$DIR/spool/$name" "$DIR/dev/$name/upper" "$DIR/dev/$name/work" "$DIR/dev/$name/orig"
    mkdir -p "$DIR/munge/$name"
    chown munge:munge "$DIR/munge/$name"
    local slurmd munged
    slurmd=$(sbin slurmd)
    munged=$(sbin munged)
    cat > "$DIR/boot-$name.sh" <<EOF
set -e
hostname $name
# A private /dev: an overlay over the real one, with 4 fake GPUs (char devices 195:K).
mount --make-rprivate /
mount --rbind /dev $DIR/dev/$name/orig
mount -t overlay overlay -o lowerdir=/dev,upperdir=$DIR/dev/$name/upper,workdir=$DIR/dev/$name/work /dev
for sub in pts shm mqueue; do
    [ -d $DIR/dev/$name/orig/\$sub ] && mount --rbind $DIR/dev/$name/orig/\$sub /dev/\$sub || true
done
for k in 0 1 2 3; do [ -e /dev/nvidia\$k ] || mknod -m 0666 /dev/nvidia\$k c 195 \$k; done
$(if [ "${TFC_NODE_CPU:-}" = 1 ]; then printf 'mkdir -p %s && echo $$ > %s/cgroup.procs\n' "$(node_cgroup "$name")" "$(node_cgroup "$name")"; fi)
# TFC_SOCKETS=2: the node's PCI devices as its kernel would describe them.
if [ -d $DIR/pci ]; then mount --bind $DIR/pci /sys/bus/pci/devices; fi
# The node's own munged, on the usual socket path in a private /run/munge.
mount -t tmpfs -o mode=0755 tmpfs /run/munge
chown munge:munge /run/munge
runuser -u munge -- $munged --force --pid-file=$DIR/munge/$name/munged.pid \\
    --seed-file=$DIR/munge/$name/seed --log-file=$DIR/munge/$name/munged.log
for _ in \$(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
$(start_line "$name" "$slurmd" "$mode")
EOF
    # nsenter, not `ip netns exec`: the latter remounts /sys and slurmd then finds no cgroup fs.
    setsid nsenter --net="/run/netns/tfc-$name" unshare --mount --uts bash "$DIR/boot-$name.sh" \
        >"$DIR/log/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$pidf"
}

# The boot script's last lines: slurmd with the cluster's slurm.conf, or configless: the
# configuration folder hidden (as on a node without /etc/slurm) and everything fetched from
# slurmctld.
start_line() {
    local name=$1 slurmd=$2 mode=$3
    case $mode in
        configless) printf 'mount -t tmpfs tfc-configless %s\nexec %s -D -N %s --conf-server %s\n' \
            "$DIR/etc" "$slurmd" "$name" "$NET.1" ;;
        *) printf 'exec %s -D -N %s -f %s\n' "$slurmd" "$name" "$DIR/etc/slurm.conf" ;;
    esac
}

# Restarts the named nodes' slurmd and munged (nothing may run on them), all at once, then
# waits for the cluster to be ready. --busy: a job may hold them (no step runs there); waits for
# those nodes to answer, whatever their state.
# restart_slurmd [--configless] [--busy] [--keep-munge [--options 'OPTS']] NODE...
restart_slurmd() {
    local name i mode= busy= keep= options=-D files=() index=() seen=()
    if [ "${1:-}" = --configless ]; then mode=configless; shift; fi
    if [ "${1:-}" = --busy ]; then busy=1; shift; fi
    if [ "${1:-}" = --keep-munge ]; then keep=1; shift; fi
    if [ "${1:-}" = --options ]; then options=$2; shift 2; fi
    for name in "$@"; do
        # A slurmd that `scontrol reconfigure` started anew (with --systemd) has a pid of its
        # own: the node's slurmd is whichever runs in its network namespace.
        node_slurmds "$name" | xargs -r kill 2>/dev/null || true
        for i in "${!NODES[@]}"; do
            [ "${NODES[$i]}" = "$name" ] || continue
            index+=("$i")
            seen+=("$(wc -l < "$DIR/log/slurmd-$name.log" 2>/dev/null || echo 0)")
            files+=("$DIR/slurmd-$name.run.pid")
            [ -n "$keep" ] || files+=("$DIR/munge/$name/munged.pid")
        done
    done
    [ ${#files[@]} -gt 0 ] && kill_pidfiles "${files[@]}"
    for i in "${index[@]}"; do
        if [ -n "$keep" ]; then restart_in_place "$i" "$options"; else start_slurmd "$i" "$mode"; fi
    done
    # slurmctld still shows the nodes idle: wait for each new slurmd's own word that it has read
    # its configuration (plugstack.conf included) and started.
    local k log
    for k in "${!index[@]}"; do
        name=${NODES[${index[$k]}]} log=$DIR/log/slurmd-${NODES[${index[$k]}]}.log
        for _ in $(seq 300); do
            tail -n +"$((seen[k] + 1))" "$log" 2>/dev/null | grep -q 'slurmd started' && break
            sleep 0.2
        done
        tail -n +"$((seen[k] + 1))" "$log" | grep -q 'slurmd started' || die "slurmd on $name did not start again"
    done
    if [ -n "$busy" ]; then wait_answering "$@"; else wait_ready; fi
    log "restarted slurmd on $*"
}

# restart_in_place INDEX [OPTS]: the node's slurmd again, in the namespaces its munged still
# runs in, started with OPTS (default -D; `--systemd` as 23.11's unit starts it, with a
# NOTIFY_SOCKET as systemd gives it: start_notify).
restart_in_place() {
    local name=${NODES[$1]} munged notify=
    munged=$(running "$DIR/munge/$name/munged.pid") || die "no munged runs on $name"
    kill_pidfiles "$DIR/notify-$name.run.pid"
    if [[ " ${2:-} " == *" --systemd "* ]]; then
        start_notify "$name"
        notify=NOTIFY_SOCKET=$DIR/notify-$name.sock
    fi
    # shellcheck disable=SC2086 # OPTS are words
    setsid nsenter --target "$munged" --net --mount --uts -- env $notify "$(sbin slurmd)" ${2:--D} -N "$name" \
        -f "$DIR/etc/slurm.conf" >>"$DIR/log/slurmd-$name.out" 2>&1 < /dev/null &
    echo $! > "$DIR/slurmd-$name.run.pid"
}

# start_notify NAME: what systemd is to a Type=notify unit for node NAME's slurmd: a datagram
# socket ($DIR/notify-NAME.sock, its NOTIFY_SOCKET) whose messages go, a line each, to
# $DIR/log/notify-NAME.log; a MAINPID= message (a slurmd that `scontrol reconfigure` started
# anew, taking over) is recorded as the node's slurmd, as systemd records its main process.
start_notify() {
    local name=$1 sock=$DIR/notify-$1.sock
    rm -f "$sock"
    setsid python3 -c '
import ctypes, socket, sys
ctypes.CDLL(None).prctl(15, b"tfc-notify")  # PR_SET_NAME: what `running` checks
sock, log, pidfile = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sock)
while True:
    message = s.recv(4096).decode(errors="replace")
    with open(log, "a") as f:
        f.write(message.replace("\n", " ") + "\n")
    for line in message.splitlines():
        if line.startswith("MAINPID="):
            with open(pidfile, "w") as f:
                f.write(line[len("MAINPID="):] + "\n")
' "$sock" "$DIR/log/notify-$name.log" "$DIR/slurmd-$name.run.pid" </dev/null >/dev/null 2>&1 &
    echo $! > "$DIR/notify-$name.run.pid"
    for _ in $(seq 50); do [ -S "$sock" ] && return; sleep 0.1; done
    die "no notify socket for $name"
}

# node_slurmds NAME: the pids of the slurmd processes in node NAME's network namespace.
node_slurmds() {
    local pid
    for pid in $(ip netns pids "tfc-$1" 2>/dev/null); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmd ] && echo "$pid"
    done
    return 0
}

restart_slurmctld() {
    kill_pidfiles "$DIR/slurmctld.run.pid"
    start_slurmctld
    for _ in $(seq 300); do scontrol ping >/dev/null 2>&1 && return; sleep 0.2; done
    die "slurmctld did not start again"
}

# restart_controller: see the usage above.
restart_controller() {
    restart_slurmctld
    wait_ready
    log "restarted slurmctld"
}

# reconfigure: see the usage above. 25.05's slurmctld twice stopped answering after
# "Reconfigure signal (SIGHUP) received" (2026-11-27 and 2026-11-29, in dozens of runs: Slurm's
# hang, with no line of tfcluster's in its log), and every later test of its lane then waited
# out its 5-minute limit; slurmd's side of a reconfigure, what the tests look at, came first.
reconfigure() {
    timeout 30 scontrol reconfigure || log "scontrol reconfigure: no answer within 30 s"
    local until=$((SECONDS + 60))
    while [ $SECONDS -lt $until ]; do
        timeout 5 scontrol ping >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    log "slurmctld did not answer for 60 s after scontrol reconfigure (Slurm's hang, seen on 25.05): restarting it"
    # Jobs run through a reconfigure: the nodes answer again, not idle (waiting for idle, a CI
    # run's isolation test died here, its job still on n9 and n10, 2026-11-29).
    restart_slurmctld
    wait_answering "${NODES[@]}"
    log "restarted slurmctld"
}

# unwell: see the usage above. A step whose processes outlive UnkillableStepTimeout drains its
# node ("Kill task failed"), and every later job that asks for that node waits: a CI run lost 70
# minutes so, 14 tests each waiting out its 5-minute limit (2026-11-28). The tests call this
# after each suite, and when a command runs into its limit, to say so and go on.
unwell() {
    local node state reason
    sinfo -h -N -o '%N|%T|%E' | sort -u | while IFS='|' read -r node state reason; do
        case $state in
            *drain*|*down*|*fail*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
            *'*') ;;
            *) continue ;;
        esac
        echo "$node $state ($reason)"
    done
}

# prolog_flags FLAGS: see the usage above.
prolog_flags() {
    local flags=${1?flags} conf=$DIR/etc/slurm.conf
    sed -i '/^PrologFlags=/d' "$conf"
    [ -n "$flags" ] && echo "PrologFlags=$flags" >> "$conf"
    restart_slurmctld
    restart_slurmd "${NODES[@]}"
}

# configless NODE yes|no: see the usage above.
configless() {
    local node=${1:?node} keep=${2:?yes or no} conf=$DIR/etc/slurm.conf
    grep -q '^SlurmctldParameters=enable_configless$' "$conf" \
        || echo "SlurmctldParameters=enable_configless" >> "$conf"
    sed -i '/^PlugStackConfig=/d' "$conf"
    [ "$keep" = yes ] && echo "PlugStackConfig=$DIR/etc/plugstack.conf" >> "$conf"
    restart_slurmctld
    restart_slurmd --configless "$node"
}

configured() {
    local node=${1:?node} conf=$DIR/etc/slurm.conf
    sed -i '/^PlugStackConfig=/d; /^SlurmctldParameters=enable_configless$/d' "$conf"
    echo "PlugStackConfig=$DIR/etc/plugstack.conf" >> "$conf"
    restart_slurmctld
    restart_slurmd "$node"
}

wait_ready() {
    local names
    names=$(IFS=,; echo "${NODES[*]}")
    # 60 s (a machine building Slurm on every core in the background is slow to start daemons;
    # an idle one is ready in about 1 s), plus about 1 s for every node past the first 8 (tries
    # are 0.2 s apart).
    local tries=$((300 + 5 * (${#NODES[@]} > 8 ? (${#NODES[@]} - 8) / 8 : 0) * 8))
    for _ in $(seq "$tries"); do
        if scontrol ping >/dev/null 2>&1; then
            local states
            states=$(sinfo -h -N -n "$names" -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
            [ "$states" = "idle " ] && return 0
        fi
        sleep 0.2
    done
    sinfo -N 2>&1 >&2 || true
    tail -n 20 "$DIR"/log/*.log "$DIR"/log/*.out >&2 || true
    die "the cluster did not become ready in $((tries / 5)) s"
}

# wait_answering NODE...: until slurmctld has each node in a state it answers in (idle, mixed,
# allocated: not down, unknown or not responding).
wait_answering() {
    local names states
    names=$(IFS=,; echo "$*")
    for _ in $(seq 300); do
        states=$(sinfo -h -N -n "$names" -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
        [[ -n $states && $states =~ ^((idle|mix|alloc)\ )+$ ]] && return 0
        sleep 0.2
    done
    die "nodes $* did not answer again in 60 s (states: $states)"
}

# Two unprivileged users for the tests that need more than one (tests/isolation.rs): the owner
# of a step, and another user of the same cluster. Home /tmp, which every node shares.
make_users() {
    local u
    for u in tfc-owner tfc-other; do
        id -u "$u" >/dev/null 2>&1 || useradd --no-create-home --home-dir /tmp --shell /bin/sh "$u"
    done
}

set_plugstack() {
    printf '%s\n' "$1" > "$DIR/etc/plugstack.conf"
}

up() {
    local start=$SECONDS
    install_packages
    mkdir -p "$DIR"
    # A cluster whose daemons are all gone (a run cut short by a timeout or a reboot, which
    # keep /tmp on some machines) is removed, not refused: nothing of it runs.
    if [ -s "$DIR/nodes" ] && ! any_running; then
        log "removing the cluster an earlier run left in $DIR ($(wc -w < "$DIR/nodes") nodes, none of its daemons running)"
        local wanted=("${NODES[@]}")
        NODES=($(cat "$DIR/nodes"))
        down
        NODES=("${wanted[@]}")
    fi
    if [ -s "$DIR/nodes" ] && [ "$(cat "$DIR/nodes")" != "${NODES[*]}" ]; then
        die "a cluster with nodes '$(cat "$DIR/nodes")' is up; run '$0 down' first"
    fi
    echo "${NODES[*]}" > "$DIR/nodes"
    write_config
    make_users
    # Before any daemon starts: slurmd loads plugstack.conf at start, and a line left by an
    # earlier run may name a plugin that no longer exists (with `required`, slurmd then dies).
    set_plugstack "${1:+${TFC_PLUGSTACK_KIND:-required} $*}"
    rm -f "$DIR"/log/*
    write_hosts_block add
    start_munge
    start_network
    start_slurmctld
    for i in "${!NODES[@]}"; do start_slurmd "$i"; done
    wait_ready
    log "up: ${NODES[*]} ($((SECONDS - start)) s); plugstack: $(cat "$DIR/etc/plugstack.conf")"
}

# True when any daemon this script started, by its PID files, still runs.
any_running() {
    local f
    for f in "$DIR/slurmctld.run.pid" "$DIR/munged.pid" "$DIR"/slurmd-*.run.pid "$DIR"/munge/*/munged.pid; do
        running "$f" >/dev/null && return 0
    done
    return 1
}

# Stops the processes whose PIDs these files hold, when they are still our daemons (`running`),
# with TERM, then KILL after 10 s, and removes the files.
kill_pidfiles() {
    local pids=() f pid
    for f in "$@"; do
        if pid=$(running "$f"); then kill "$pid" 2>/dev/null && pids+=("$pid"); fi
        rm -f "$f"
    done
    for _ in $(seq 100); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}

down() {
    local start=$SECONDS
    local f=()
    for name in "${NODES[@]}"; do
        f+=("$DIR/slurmd-$name.run.pid" "$DIR/munge/$name/munged.pid" "$DIR/notify-$name.run.pid")
    done
    kill_pidfiles "${f[@]}"
    for name in "${NODES[@]}"; do
        local ns=tfc-$name
        if ip netns list 2>/dev/null | grep -qw "^$ns"; then
            # Step daemons and tasks left inside the node.
            ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
            ip netns delete "$ns"
        fi
    done
    # The nodes' ends of their veths go with their namespaces, unless the kernel keeps one.
    for i in "${!NODES[@]}"; do ip link delete "tfcv$i" 2>/dev/null || true; done
    kill_pidfiles "$DIR/slurmctld.run.pid" "$DIR/munged.pid"
    ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
    write_hosts_block remove
    if [ -L "$SLURM_CONF_LINK" ] && [ "$(readlink "$SLURM_CONF_LINK")" = "$DIR/etc/slurm.conf" ]; then
        rm -f "$SLURM_CONF_LINK"
        [ -e "$SLURM_CONF_LINK.tfc-saved" ] && mv "$SLURM_CONF_LINK.tfc-saved" "$SLURM_CONF_LINK"
    fi
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/dev" "$DIR/munge" "$DIR/nodes" "$DIR/bundles"
    # TFC_NODE_CPU's cgroups, once empty (a process still leaving keeps one a moment).
    local cgroups
    cgroups=$(dirname "$(node_cgroup x)")
    if [ -d "$cgroups" ]; then
        for _ in $(seq 50); do
            rmdir "$cgroups"/*/ 2>/dev/null || true
            rmdir "$cgroups" 2>/dev/null && break
            sleep 0.1
        done
    fi
    log "down ($((SECONDS - start)) s)"
}

# Each start, restart and stop is a row of the test command's times (tests/times.sh, where
# TFC_TIMES_FILE names the file), so a test that restarts daemons shows what that costs.
timed() {
    local start=$EPOCHREALTIME what="$*"
    "$@"
    [ -n "${TFC_TIMES_FILE:-}" ] || return 0
    "$(dirname "$0")/../times.sh" add "${TFC_RELEASE:-host}" cluster "${what/\/*libtfcluster.so/plugin}" \
        "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')" || true
}

case "${1:-}" in
    up) shift; timed up "$@" ;;
    down) timed down ;;
    node-cpu) for name in "${NODES[@]}"; do echo "$name $(node_cpu_us "$name")"; done ;;
    plugstack) set_plugstack "${2:?plugstack line}" ;;
    restart-slurmd) shift; timed restart_slurmd "$@" ;;
    restart-slurmctld) timed restart_controller ;;
    reconfigure) timed reconfigure ;;
    configless) shift; timed configless "$@" ;;
    configured) shift; timed configured "$@" ;;
    prolog-flags) shift; timed prolog_flags "$@" ;;
    unwell) unwell ;;
    status) sinfo -N; cat "$DIR/etc/plugstack.conf" ;;
    *) echo "usage: $0 up [PLUGIN.so [WORD...]] | plugstack LINE | unwell | down | status" >&2; exit 2 ;;
esac
