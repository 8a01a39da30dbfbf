#!/usr/bin/env python3
"""What each way of asking who holds a step's ports costs on this machine, in CPU per look:
benches/port-looks.py [PORTS [ROUNDS]] (64 ports, 300 rounds by default; run as any user).

- the kernel's socket diagnostics as tfcluster asks them (`TCPDIAG_GETSOCK`, family
  `AF_UNSPEC`: IPv4 and IPv6 in one request, src/core/claims.rs), for listening sockets alone
  and for every state but TIME_WAIT (the claim's `HOLDING`). A request for any state but LISTEN
  walks every bucket of the machine's connection table, however few sockets it holds and
  whatever the request's filter, so its cost follows the table's size
  (`net.ipv4.tcp_ehash_entries`, which Linux sizes from the memory);
- a fresh socket bound to each port on the wildcard address and closed
  (src/spank/sock_diag.rs `unbound`), for PORTS free ports.

Printed: a Markdown table, one row per look, with the table's size above it.
"""

import socket
import struct
import sys
import time

TCPDIAG_GETSOCK = 18
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
LISTEN = 1 << 10
HOLDING = 0b1111_1111_1110 & ~(1 << 6)


def diag(states):
    """One dump of the sockets in `states`, as tfcluster requests it; how many came back."""
    body = bytes(52) + struct.pack("=II", states, 0)
    request = struct.pack("=IHHII", 16 + len(body), TCPDIAG_GETSOCK,
                          NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as s:
        s.send(request)
        found = 0
        while True:
            data = s.recv(65536)
            offset = 0
            while offset < len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind in (NLMSG_DONE, NLMSG_ERROR):
                    return found
                found += 1
                offset += (length + 3) & ~3


def free_ports(count):
    """`count` ports the kernel found free on every address, released."""
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET6)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", 0))
        held.append(s)
    ports = [s.getsockname()[1] for s in held]
    for s in held:
        s.close()
    return ports


def binds(ports):
    """Whether each port binds, as tfcluster's `unbound` asks."""
    for port in ports:
        with socket.socket(socket.AF_INET6) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                s.bind(("::", port))
            except OSError:
                return False
    return True


def cpu_us(look, rounds):
    start = time.process_time()
    for _ in range(rounds):
        look()
    return 1e6 * (time.process_time() - start) / rounds


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    with open("/proc/sys/net/ipv4/tcp_ehash_entries") as f:
        buckets = f.read().strip()
    ports = free_ports(count)
    print(f"The machine's connection table: {buckets} buckets; {rounds} rounds each.\n")
    print("| look | CPU per look |")
    print("|---|---:|")
    rows = [
        ("socket diagnostics, listening sockets alone", lambda: diag(LISTEN)),
        ("socket diagnostics, every state but TIME_WAIT (the claim's before 0.16.2)",
         lambda: diag(HOLDING)),
        (f"a bind of each of {count} free ports (the claim's from 0.16.2)", lambda: binds(ports)),
    ]
    for what, look in rows:
        print(f"| {what} | {cpu_us(look, rounds):.0f} us |")


if __name__ == "__main__":
    main()
