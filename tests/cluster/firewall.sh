#!/usr/bin/env bash
# The network tests/firewall.rs loads a step's rules into, as network namespaces (no Slurm):
#   firewall.sh up     n9, n10 and out on one bridge (10.77.0.11-13/24 and fd00::11-13/64: the
#                      step's two nodes and a node outside it; n9 also has 10.77.0.250 and
#                      fd00::250), and behind each of n9 and n10 a
#                      network it forwards and NATs to its own addresses, IPv4 and IPv6 (a
#                      container, VM or pod network): nat-n9, nat-n10
#   firewall.sh down   all of it, whatever is left
# Namespaces are named tfk-NAME (the test cluster's are tfc-NAME).
set -euo pipefail
case ${1:?usage: firewall.sh up|down} in
up)
    ip netns add tfk-lan
    ip -n tfk-lan link add br0 type bridge
    ip -n tfk-lan link set br0 up
    i=11
    for n in n9 n10 out; do
        ip netns add "tfk-$n"
        ip -n "tfk-$n" link set lo up
        ip -n tfk-lan link add "$n" type veth peer name eth0 netns "tfk-$n"
        ip -n tfk-lan link set "$n" master br0 up
        ip -n "tfk-$n" addr add "10.77.0.$i/24" dev eth0
        ip -n "tfk-$n" addr add "fd00::$i/64" dev eth0 nodad
        ip -n "tfk-$n" link set eth0 up
        i=$((i + 1))
    done
    # n9's other addresses on the same network (TensorFlow listens on every address).
    ip -n tfk-n9 addr add 10.77.0.250/24 dev eth0
    ip -n tfk-n9 addr add fd00::250/64 dev eth0 nodad
    k=9
    for n in n9 n10; do
        behind=tfk-nat-$n
        ip netns add "$behind"
        ip -n "$behind" link set lo up
        ip -n "tfk-$n" link add nat0 type veth peer name eth0 netns "$behind"
        ip -n "tfk-$n" addr add "10.79.$k.1/24" dev nat0
        ip -n "tfk-$n" addr add "fd79:$k::1/64" dev nat0 nodad
        ip -n "tfk-$n" link set nat0 up
        ip -n "$behind" addr add "10.79.$k.2/24" dev eth0
        ip -n "$behind" addr add "fd79:$k::2/64" dev eth0 nodad
        ip -n "$behind" link set eth0 up
        ip -n "$behind" route add default via "10.79.$k.1"
        ip -n "$behind" -6 route add default via "fd79:$k::1"
        ip netns exec "tfk-$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
        ip netns exec "tfk-$n" nft "add table inet tfktest_nat; add chain inet tfktest_nat post { type nat hook postrouting priority 100; }; add rule inet tfktest_nat post oif eth0 masquerade"
        k=$((k + 1))
    done
    ;;
down)
    for n in lan n9 n10 out nat-n9 nat-n10; do
        ip netns del "tfk-$n" 2>/dev/null || true
    done
    ;;
esac
