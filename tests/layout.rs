//! Where each global rank runs, one layout per line. Every row of "Layouts" in
//! shared/reference/slurm-observed.md (what a probe plugin saw Slurm 22.05 do) is here; T1-T5 are
//! TensorFlow's tasks-per-node cases.

#![allow(clippy::type_complexity)] // tables of cases

use tfcluster::core::layout::{Distribution, Layout, TaskCounts};

/// One layout Slurm made ([`OBSERVED`]).
struct Observed {
    /// The srun command it came from.
    srun: &'static str,
    /// `SLURM_STEP_TASKS_PER_NODE`, `SLURM_DISTRIBUTION`, `SLURM_DIST_PLANESIZE`
    tasks_per_node: &'static str,
    distribution: Option<&'static str>,
    plane_size: Option<&'static str>,
    /// The global ids on each node, in node order.
    ids: &'static [&'static [u32]],
}

#[rustfmt::skip]
const OBSERVED: &[Observed] = &[
    Observed { srun: "srun -N4 -n8",                         tasks_per_node: "2(x4)",   distribution: None,             plane_size: None,      ids: &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]] },
    Observed { srun: "srun -N2 -n3",                         tasks_per_node: "2,1",     distribution: None,             plane_size: None,      ids: &[&[0, 1], &[2]] },
    Observed { srun: "srun -N2 -n4 -m block",                tasks_per_node: "2(x2)",   distribution: Some("block"),    plane_size: None,      ids: &[&[0, 1], &[2, 3]] },
    Observed { srun: "srun -N2 -n4 -m cyclic",               tasks_per_node: "2(x2)",   distribution: Some("cyclic"),   plane_size: None,      ids: &[&[0, 2], &[1, 3]] },
    Observed { srun: "srun -N3 -n7 -m cyclic",               tasks_per_node: "3,2(x2)", distribution: Some("cyclic"),   plane_size: None,      ids: &[&[0, 3, 6], &[1, 4], &[2, 5]] },
    Observed { srun: "srun -N2 --ntasks-per-node=2 -m cyclic", tasks_per_node: "2(x2)", distribution: Some("cyclic"),   plane_size: None,      ids: &[&[0, 2], &[1, 3]] },
    Observed { srun: "srun -N2 -n5 -m plane=2",              tasks_per_node: "3,2",     distribution: Some("plane"),    plane_size: Some("2"), ids: &[&[0, 1, 4], &[2, 3]] },
    Observed { srun: "srun -N3 -n8 -m plane=2",              tasks_per_node: "4,2(x2)", distribution: Some("plane"),    plane_size: Some("2"), ids: &[&[0, 1, 6, 7], &[2, 3], &[4, 5]] },
    Observed { srun: "srun -p shared -N4 -n8",               tasks_per_node: "5,1(x3)", distribution: None,             plane_size: None,      ids: &[&[0, 1, 2, 3, 4], &[5], &[6], &[7]] },
    Observed { srun: "srun -p shared -N4 -n8 -m cyclic",     tasks_per_node: "5,1(x3)", distribution: Some("cyclic"),   plane_size: None,      ids: &[&[0, 4, 5, 6, 7], &[1], &[2], &[3]] },
    Observed { srun: "srun -p shared -N3 -n7 -m plane=2",    tasks_per_node: "5,1(x2)", distribution: Some("plane"),    plane_size: Some("2"), ids: &[&[0, 1, 4, 5, 6], &[2], &[3]] },
    Observed { srun: "salloc -N3 -n6; srun -N2 -n3 -r1",     tasks_per_node: "2,1",     distribution: Some("block"),    plane_size: None,      ids: &[&[0, 1], &[2]] },
    Observed { srun: "srun -N2 -n4 -m block,Pack",           tasks_per_node: "3,1",     distribution: Some("block,pack"), plane_size: None,    ids: &[&[0, 1, 2], &[3]] },
    // Second and third levels never move tasks between nodes
    Observed { srun: "srun -N2 -n4 -m cyclic:block",         tasks_per_node: "2(x2)",   distribution: Some("cyclic:block"), plane_size: None,  ids: &[&[0, 2], &[1, 3]] },
    Observed { srun: "srun -N2 -n4 -m block:cyclic",         tasks_per_node: "2(x2)",   distribution: Some("block:cyclic"), plane_size: None,  ids: &[&[0, 1], &[2, 3]] },
    Observed { srun: "srun -N2 -n4 -m cyclic:cyclic:fcyclic",tasks_per_node: "2(x2)",   distribution: Some("cyclic:cyclic:fcyclic"), plane_size: None, ids: &[&[0, 2], &[1, 3]] },
    Observed { srun: "srun -N2 -n4 -m cyclic,nopack",        tasks_per_node: "2(x2)",   distribution: Some("cyclic,nopack"), plane_size: None, ids: &[&[0, 2], &[1, 3]] },
    Observed { srun: "srun -N3 -n9 -m plane=4",              tasks_per_node: "4,4,1",   distribution: Some("plane=4"),  plane_size: None,      ids: &[&[0, 1, 2, 3], &[4, 5, 6, 7], &[8]] },
];

#[test]
fn reproduces_every_layout_slurm_produced() {
    for Observed {
        srun: cmd,
        tasks_per_node,
        distribution,
        plane_size,
        ids: want,
    } in OBSERVED
    {
        let counts = TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", tasks_per_node).unwrap();
        let dist = Distribution::parse(*distribution, *plane_size).unwrap();
        let layout = Layout::build(&counts, dist).unwrap();
        let got: Vec<&[u32]> = layout.nodes().collect();
        assert_eq!(got, *want, "{cmd}");
        for (node, gtids) in layout.nodes().enumerate() {
            for (slot, &rank) in gtids.iter().enumerate() {
                let p = layout.ranks[rank as usize];
                assert_eq!(
                    (p.node as usize, p.slot as usize),
                    (node, slot),
                    "{cmd}: rank {rank}"
                );
            }
        }
    }
}

/// `SLURM_HOSTFILE=f srun -m arbitrary -n5`, f = node3,node1,node3,node2,node1: Slurm lists
/// the nodes sorted (node[1-3], counts 2,1,2) and gives rank k to the k-th line's host.
#[test]
fn arbitrary_follows_the_host_file() {
    let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let layout = Layout::from_task_hosts(
        &names(&["node1", "node2", "node3"]),
        &TaskCounts::new(vec![2, 1, 2]).unwrap(),
        &names(&["node3", "node1", "node3", "node2", "node1"]),
    )
    .unwrap();
    let got: Vec<&[u32]> = layout.nodes().collect();
    assert_eq!(got, [&[1, 4][..], &[3], &[0, 2]]);
}

#[test]
fn host_files_are_read_like_slurm() {
    use tfcluster::core::hostlist::hostfile_task_hosts;
    assert_eq!(
        hostfile_task_hosts("n3\nn1\nn3\n", 3).unwrap(),
        ["n3", "n1", "n3"]
    );
    assert_eq!(
        hostfile_task_hosts("n3,n1\nn[1-2]\n", 3).unwrap(),
        ["n3", "n1", "n1"]
    );
    assert_eq!(
        hostfile_task_hosts("a\nb\nc\nd\n", 2).unwrap(),
        ["a", "b"],
        "extra lines unused"
    );
}

#[rustfmt::skip]
const COUNTS: &[(&str, &[u32])] = &[
    ("2",              &[2]),                                        // T1
    ("2,1,3",          &[2, 1, 3]),                                  // T2
    ("3(x2),2,1",      &[3, 3, 2, 1]),                               // T3
    ("3(x2),2,11(x4)", &[3, 3, 2, 11, 11, 11, 11]),                  // T4
    ("13(x10)",        &[13, 13, 13, 13, 13, 13, 13, 13, 13, 13]),  // T5
    ("1,1",            &[1, 1]),                                     // never emitted, still valid
];

#[test]
fn parses_count_lists() {
    for (text, want) in COUNTS {
        assert_eq!(
            *TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", text).unwrap(),
            **want,
            "{text}"
        );
    }
}

#[rustfmt::skip]
const DISTRIBUTIONS: &[(Option<&str>, Option<&str>, Distribution)] = &[
    (None,                    None,      Distribution::Block),
    (Some("block"),           None,      Distribution::Block),
    (Some("unknown"),         None,      Distribution::Block),
    (Some("block,pack"),      None,      Distribution::Block),
    (Some("cyclic"),          None,      Distribution::Cyclic),
    (Some("cyclic:*:*"),      None,      Distribution::Cyclic),
    (Some("plane"),           Some("2"), Distribution::Plane(2)),
    (Some("plane=8"),         None,      Distribution::Plane(8)),
    (Some("arbitrary"),       None,      Distribution::Arbitrary),
];

#[test]
fn reads_slurm_distribution() {
    for (dist, plane, want) in DISTRIBUTIONS {
        assert_eq!(
            Distribution::parse(*dist, *plane).unwrap(),
            *want,
            "{dist:?} {plane:?}"
        );
    }
}
