#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/ from the inputs of the table tests (tests/*.rs), so fuzzing starts
from every case the specification already names. Run by fuzz/run.sh before each campaign."""
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.join(root, "fuzz", "seeds")


def table(path, name):
    """The first string literal of each row of `const NAME` in a test file."""
    text = open(os.path.join(root, "tests", path)).read()
    m = re.search(r"const %s\b[^=]*= &\[(.*?)\n\];" % name, text, re.S)
    if not m:
        sys.exit(f"seeds: no table {name} in tests/{path}")
    rows = re.findall(r'^\s*\((?:Some\()?r?#?"((?:[^"\\]|\\.)*)"', m.group(1), re.M)
    return [bytes(r, "utf-8").decode("unicode_escape") for r in rows]


def rows(path, name):
    text = open(os.path.join(root, "tests", path)).read()
    m = re.search(r"const %s\b[^=]*= &\[(.*?)\n\];" % name, text, re.S)
    return [re.findall(r'"((?:[^"\\]|\\.)*)"', line) for line in m.group(1).splitlines() if '"' in line]


seeds = {
    "spec": table("roles.rs", "CASES") + table("roles.rs", "PROGRAMS") + [r[0] for r in rows("settings.rs", "ENDS")],
    "hostlist": table("hostlist.rs", "EXPANSIONS") + table("hostlist.rs", "ERRORS"),
    "counts": table("layout.rs", "COUNTS"),
    "distribution": [d + ("\n" + p if p else "") for d, p in
                     [("block", ""), ("block,pack", ""), ("cyclic", ""), ("cyclic:*:*", ""),
                      ("plane", "2"), ("plane=8", ""), ("arbitrary", ""), ("unknown", "")]],
    "resv_ports": ["12000-12003", "12000-12001,12010", "12000-99999", "12000", ""],
    "settings": ["port_base=9000 address=%h-ib\nchief:1,worker:*,gpu_roles=chief+worker",
                 "port_range=30000-30999 port_block=16\nworker:*,even_gpus=no,dtensor=yes",
                 "end_with_chief=no grpc_proxy_bypass=no evaluator_cluster=training\nchief:1,evaluator:1,worker:*",
                 "gpus=keep rpc_layer=grpc+verbs\nps:1,worker:*,port_base=8888"],
    "hostfile": ["\x05n012\nn9\nn012\nn011\nn9\n", "\x04n[1-2],n1,n2", "\x03a\n"],
    "topology": ["TopologyPlugin=topology/tree\n\0SwitchName=s1 Nodes=n011,n9\nSwitchName=s2 Nodes=n012,n10\nSwitchName=top Switches=s[1-2]\n\0n[9-10,011-012]",
                 "TopologyPlugin=topology/block\n\0BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n\0n[1-4]",
                 "Include /etc/slurm/x.conf\nSelectTypeParameters=CR_Core,CR_NO_DIST_TOPO_BLOCK\n\0\0n1"],
}
# Heterogeneous steps: the components' layouts slurmctld gave on the test cluster.
seeds["het"] = ["7 7 1 2 4 n012\n3\n7|cpu1|0,1,2\n7|n[011-012]|0,1,2;3",
                "4 8 0 1 2 n9\n0,1\n7|cpu1|0,1\n8|!\n9|n9|0,1",
                "4 7 0 1 2 cpu2\n0,1\n7|cpu1|0,1\n7|cpu2|0,1",
                "5 7 1 2 4 n10\n1,3\n7|cpu1|0\n7|n9,n10|0,2;1,3"]
# Whole plans: each layout the tests observed on Slurm, with the specs above.
observed = rows("layout.rs", "OBSERVED")
specs = ["", "chief:1,ps:2,worker:*", "chief:1,evaluator:1,worker:*,dtensor=yes", "ps:1,worker:*,even_gpus=yes"]
seeds["plan"] = []
for i, r in enumerate(observed):
    tpn = r[1]  # r[0] describes the srun command
    dist, plane = (r[2:] + ["", ""])[:2]
    nodes = sum(int(m.group(2) or 1) for m in re.finditer(r"(\d+)(?:\(x(\d+)\))?", tpn))
    seeds["plan"].append("\n".join([specs[i % len(specs)], "port_base=9000" if i % 3 == 0 else "",
                                    f"n[1-{nodes}]", tpn, dist, plane, "", "", "0,1,2,3"]))
seeds["plan"].append("\n".join(["ps:1,worker:*", "", "n[1-3]", "2,2,1", "arbitrary", "", "", "n2,n1,n3,n1,n2", ""]))
seeds["plan"].append("\n".join(["worker:*", "", "a,b", "3,1", "", "", "12000-12003", "", "0,1,2,3"]))

for target, inputs in seeds.items():
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for n, text in enumerate(inputs):
        with open(os.path.join(d, f"{n:03}"), "wb") as fh:
            fh.write(text.encode("utf-8"))
    print(f"seeds: {target}: {len(inputs)}", file=sys.stderr)
