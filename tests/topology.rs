//! Slurm 26.05's topology order for block steps: the rules (tables, every row seen on a Slurm
//! 26.05.5 test cluster) and, on the test cluster started with a tree topology, what every
//! release really does. tests/release/run.sh runs the cluster part on each release with
//! TFC_TOPOLOGY set (leaf switch s1 = n011,n9 and s2 = n012,n10: not node order), and on the
//! releases marked `noderank` again with TFC_TOPOLOGY_PARAM=SwitchAsNodeRank, which from 23.02
//! puts Slurm's node table itself in switch order (ties in slurm.conf order): then
//! SLURM_STEP_NODELIST reads n[9,011,10,012], unsorted, and every distribution follows it.

#![allow(clippy::type_complexity)] // tables of cases

mod common;
use common::cluster::{dir, parse, sh, summary, tool};
use common::release;
use std::path::Path;
use tfcluster::core::topology::{self, ConfFile, NodeRanks, SlurmConf};

/// (slurm.conf lines, the plugin whose ranks reorder block steps)
#[rustfmt::skip]
const CONFS: &[(&str, Option<&str>)] = &[
    ("",                                                              None),
    ("TopologyPlugin=topology/tree",                                  Some("topology/tree")),
    ("topologyplugin=topology/block # a comment",                     Some("topology/block")),
    ("SelectType=select/cons_tres TopologyPlugin=topology/tree",      Some("topology/tree")),
    ("TopologyPlugin=topology/tree\nSelectTypeParameters=CR_CPU,CR_NO_DIST_TOPO_BLOCK", None),
    ("TopologyPlugin=topology/flat",                                  None),
    ("TopologyPlugin=topology/default",                               None),
    ("#TopologyPlugin=topology/tree",                                 None),
    ("TopologyPlugin=topology/tree\nTopologyPlugin=topology/flat",    None), // the last line wins
];

#[test]
fn which_configurations_reorder_block_steps() {
    for (text, want) in CONFS {
        assert_eq!(SlurmConf::parse(text).ranking_plugin(), *want, "{text:?}");
    }
    let conf = SlurmConf::parse("Include /etc/slurm/topo.conf\ninclude nodes.conf");
    assert_eq!(conf.includes, ["/etc/slurm/topo.conf", "nodes.conf"]);
}

/// Which steps' nodes slurmstepd reads the topology for: only where the release reorders block
/// steps, a step on several nodes, not a heterogeneous one.
#[rustfmt::skip]
#[test]
fn which_steps_read_the_topology() {
    struct Row { what: &'static str, release_reorders: bool, nodes: u32, heterogeneous: bool, reads: bool }
    let rows = [
        Row { what: "26.05 and later, a step on 4 nodes",       release_reorders: true,  nodes: 4, heterogeneous: false, reads: true },
        Row { what: "a step on one node is never reordered",    release_reorders: true,  nodes: 1, heterogeneous: false, reads: false },
        Row { what: "a heterogeneous step: its components say", release_reorders: true,  nodes: 4, heterogeneous: true,  reads: false },
        Row { what: "a release before 26.05",                   release_reorders: false, nodes: 4, heterogeneous: false, reads: false },
    ];
    for row in rows {
        assert_eq!(topology::applies(row.release_reorders, row.nodes, row.heterogeneous), row.reads, "{}", row.what);
    }
}

/// (plugin, topology.conf, the step's nodes in node order, Slurm's order of them for a block step)
#[rustfmt::skip]
const ORDERS: &[(&str, &str, &[&str], &[&str])] = &[
    // Seen on Slurm 26.05.5: srun -N4 puts ranks on n011, n9, n012, n10.
    ("topology/tree", "SwitchName=s1 Nodes=n011,n9\nSwitchName=s2 Nodes=n012,n10\nSwitchName=top Switches=s[1-2]",
     &["n011", "n012", "n9", "n10"], &["n011", "n9", "n012", "n10"]),
    // Leaf switches rank in file order, not by name (seen: zz before aa).
    ("topology/tree", "SwitchName=zz Nodes=n012,n10\nSwitchName=aa Nodes=n011,n9\nSwitchName=top Switches=zz,aa",
     &["n011", "n012", "n9", "n10"], &["n012", "n10", "n011", "n9"]),
    ("topology/tree", "SwitchName=zz Nodes=n012,n10\nSwitchName=aa Nodes=n011,n9",
     &["n9", "n10", "n012"], &["n10", "n012", "n9"]),
    ("topology/tree", "SwitchName=s1 Nodes=node[1,3]\nSwitchName=s2 Nodes=node[2,4]",
     &["node1", "node2", "node3", "node4"], &["node1", "node3", "node2", "node4"]),
    ("topology/block", "BlockName=b1 Nodes=node[1,3,5,7]\nBlockName=b2 Nodes=node[2,4,6,8]\nBlockSizes=4",
     &["node1", "node2", "node3", "node4", "node5", "node6", "node7", "node8"],
     &["node1", "node3", "node5", "node7", "node2", "node4", "node6", "node8"]),
];

#[test]
fn slurms_node_order_for_block_steps() {
    for (plugin, conf, hosts, want) in ORDERS {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let order = NodeRanks::read(plugin, Some(conf))
            .unwrap()
            .order(&hosts)
            .unwrap();
        let got: Vec<&str> = order.iter().map(|&i| hosts[i].as_str()).collect();
        assert_eq!(got, *want, "{plugin}: {conf}");
    }
}

const TREE: &str = "SwitchName=s1 Nodes=n011,n9\nSwitchName=s2 Nodes=n012,n10";

/// (the files in /etc/slurm, each `name: text` or `name: !unreadable`; the order Slurm gives a
/// block step on n011,n012,n9,n10, or the error's reason, or `-` when the topology reorders
/// nothing)
#[rustfmt::skip]
const RULES: &[(&[&str], &str)] = &[
    (&["slurm.conf: ClusterName=c"],                                     "-"),
    (&["slurm.conf: TopologyPlugin=topology/tree", "topology.conf: TREE"], "n011,n9,n012,n10"),
    (&["slurm.conf: Include site.conf", "site.conf: TopologyPlugin=topology/tree", "topology.conf: TREE"],
                                                                        "n011,n9,n012,n10"),  // Include lines are followed
    (&["slurm.conf: Include /etc/slurm/site.conf", "site.conf: TopologyPlugin=topology/tree", "topology.conf: TREE"],
                                                                        "n011,n9,n012,n10"),  // absolute too
    (&["slurm.conf: TopologyPlugin=topology/tree\nInclude site.conf", "site.conf: TopologyPlugin=topology/flat"],
                                                                        "-"),                 // a later line wins
    (&["slurm.conf: Include site.conf"],                                "unknown: /etc/slurm/site.conf does not exist"),
    (&["slurm.conf: Include site.conf", "site.conf: !unreadable"],      "unknown: /etc/slurm/site.conf: permission denied"),
    (&[],                                                               "unknown: /etc/slurm/slurm.conf does not exist"),
    (&["slurm.conf: !unreadable"],                                      "unknown: /etc/slurm/slurm.conf: permission denied"),
    (&["slurm.conf: TopologyPlugin=topology/tree", "topology.yaml: - topology: x", "topology.conf: TREE"],
                                                                        "topology/tree: tfcluster does not read topology.yaml"),
    (&["slurm.conf: ClusterName=c", "topology.yaml: - topology: x"],    "from topology.yaml: tfcluster does not read topology.yaml"),
    (&["slurm.conf: TopologyPlugin=topology/tree"],                     "topology/tree: topology.conf cannot be read"),
    (&["slurm.conf: TopologyPlugin=topology/tree", "topology.conf: !unreadable"],
                                                                        "topology/tree: /etc/slurm/topology.conf: permission denied"),
];

#[test]
fn which_files_decide_the_order_of_block_steps() {
    let hosts: Vec<String> = ["n011", "n012", "n9", "n10"].map(String::from).to_vec();
    for (files, want) in RULES {
        let read = |path: &Path| {
            let name = path
                .strip_prefix("/etc/slurm")
                .map_or(path, |p| p)
                .to_str()
                .unwrap();
            match files
                .iter()
                .find_map(|f| f.strip_prefix(name)?.strip_prefix(": "))
            {
                None => ConfFile::Missing,
                Some("!unreadable") => ConfFile::Unreadable("permission denied".into()),
                Some(text) => ConfFile::Text(text.replace("TREE", TREE)),
            }
        };
        let got = match topology::node_ranks(Path::new("/etc/slurm/slurm.conf"), read) {
            None => "-".to_string(),
            Some(Ok(ranks)) => {
                let order = ranks.order(&hosts).unwrap();
                order
                    .iter()
                    .map(|&i| hosts[i].as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            }
            Some(Err(tfcluster::core::Error::TopologyUnreadable { plugin, reason })) => {
                format!("{plugin}: {reason}")
            }
            Some(Err(e)) => panic!("{e}"),
        };
        assert_eq!(got, *want, "{files:?}");
    }
}

/// (srun arguments, the host of each rank: in Slurm 26.05's topology order; before 26.05; with
/// SwitchAsNodeRank, seen on 23.02.8 and 25.11.7)
#[rustfmt::skip]
const STEPS: &[(&str, &[&str], &[&str], &[&str])] = &[
    ("-N4 -n8",
     &["n011", "n011", "n9", "n9", "n012", "n012", "n10", "n10"],
     &["n011", "n011", "n012", "n012", "n9", "n9", "n10", "n10"],
     &["n9", "n9", "n011", "n011", "n10", "n10", "n012", "n012"]),
    ("-N4 -n4 -m block",
     &["n011", "n9", "n012", "n10"],
     &["n011", "n012", "n9", "n10"],
     &["n9", "n011", "n10", "n012"]),
    ("-p shared -N4 -n8",
     &["n011", "n011", "n011", "n011", "n011", "n9", "n012", "n10"],
     &["n011", "n011", "n011", "n011", "n011", "n012", "n9", "n10"],
     &["n9", "n9", "n9", "n9", "n9", "n011", "n10", "n012"]),
    ("-N4 -n4 -m cyclic",
     &["n011", "n012", "n9", "n10"],
     &["n011", "n012", "n9", "n10"],
     &["n9", "n011", "n10", "n012"]),
    ("-N3 -n6 -w n011,n012,n9 -m plane=2",
     &["n011", "n011", "n012", "n012", "n9", "n9"],
     &["n011", "n011", "n012", "n012", "n9", "n9"],
     &["n9", "n9", "n011", "n011", "n012", "n012"]),
    ("-N1 -n2 -w n9",
     &["n9", "n9"],
     &["n9", "n9"],
     &["n9", "n9"]),
];

/// The cluster runs with `TopologyParam=SwitchAsNodeRank` (tests/release/run.sh, `noderank`).
fn switch_as_node_rank() -> bool {
    std::env::var("TFC_TOPOLOGY_PARAM").is_ok_and(|p| p.contains("SwitchAsNodeRank"))
}

#[test]
#[ignore = "needs the test cluster with a tree topology: run tests/run.sh"]
fn every_task_is_listed_where_it_runs_under_a_tree_topology() {
    let release = release::current();
    for (args, ordered, before, by_switch) in STEPS {
        let out = sh(&format!(
            "srun {args} --tf-cluster=chief:1,worker:* {}",
            tool("report.sh")
        ));
        let run = parse(out);
        summary(&run, &format!("srun {args}"));
        let hosts: Vec<&str> = run.tasks.iter().map(|t| t.host.as_str()).collect();
        let want = if switch_as_node_rank() {
            by_switch
        } else if release.topology_orders_block_steps {
            ordered
        } else {
            before
        };
        assert_eq!(hosts, *want, "srun {args}: where Slurm ran each rank");
    }
}

#[test]
#[ignore = "needs the test cluster with a tree topology: run tests/run.sh"]
fn a_plan_slurm_contradicts_stops_the_whole_step() {
    // topology.conf changed on disk after slurmctld read it: the nodes compute another order
    // than the one Slurm uses. n011 and n10 hold the ids the plan gives them; n9 and n012 do not.
    let release = release::current();
    let conf = dir().join("etc/topology.conf");
    let original = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, "SwitchName=s0 Nodes=n011,n012,n9,n10\n").unwrap();
    let started = std::time::Instant::now();
    // Where the step is to be stopped, each task waits up to 60 s before reporting: long enough
    // for the stop to reach it on a loaded machine. A stopped step ends long before. The wait
    // is bash's own (`read` from a pipe it holds both ends of), not a child's `sleep`: a task
    // that the stop's first kill passed over (not yet exec'd, which proctrack/linuxproc skips)
    // went on to report as soon as its `sleep` was killed (a CI run on 26.05: 1.3 s into the
    // step, with `sleep 60` first).
    let wait = match release.topology_orders_block_steps {
        true => "read -t 60 <> <(:); ",
        false => "",
    };
    let out = sh(&format!(
        "srun -N4 -n8 --tf-cluster=chief:1,worker:* bash -c '{wait}exec {}'",
        tool("report.sh")
    ));
    let elapsed = started.elapsed().as_secs_f64();
    std::fs::write(&conf, original).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !release.topology_orders_block_steps {
        // Before 26.05 Slurm places block steps in node order and tfcluster reads no topology.
        assert!(out.status.success(), "{stderr}");
        return;
    }
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let line = "tfcluster: node 1 (n012): Slurm placed global tasks [4,5] here but tfcluster \
                computed [2,3], so no TF_CONFIG of this step can be right and the whole step is stopped; \
                run srun with -m cyclic or -m plane=N (placements Slurm never reorders), or -m arbitrary \
                with the hosts in rank order in a file named by SLURM_HOSTFILE, or ask the admin to add \
                CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters";
    assert!(
        release
            .stderr_lines(&stderr)
            .iter()
            .any(|l| l.contains(line)),
        "expected a line with\n{line}\ngot:\n{stderr}"
    );
    assert!(
        !stdout.contains("TASK|"),
        "no task may get to use a TF_CONFIG of a wrong plan:\n{stdout}"
    );
    eprintln!("the whole step was stopped in {elapsed:.2} s");
    assert!(elapsed < 60.0, "the step ran {elapsed:.1} s");
}
