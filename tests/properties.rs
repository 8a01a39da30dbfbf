//! Properties over random steps and arbitrary input (bounded case counts, part of `cargo test`).

use proptest::prelude::*;
use std::collections::HashSet;
use tfcluster::core::address::AddressFormat;
use tfcluster::core::hostlist::expand;
use tfcluster::core::layout::{Distribution, Layout, TaskCounts};
use tfcluster::core::ports::parse_port_list;
use tfcluster::core::{NodeFacts, Role, Settings, Spec, StepInputs, StepPlan};

/// Slurm's placement written the plain way (slurm-observed.md section 4), as a reference:
/// for each cycle, for each node in order, up to `chunk` ids while the node has room.
fn reference(counts: &[u32], chunk: Option<u32>) -> Vec<Vec<u32>> {
    let mut nodes = vec![Vec::new(); counts.len()];
    let mut next = 0;
    match chunk {
        None => {
            for (i, &c) in counts.iter().enumerate() {
                for _ in 0..c {
                    nodes[i].push(next);
                    next += 1;
                }
            }
        }
        Some(chunk) => {
            let total: u32 = counts.iter().sum();
            while next < total {
                for (i, &c) in counts.iter().enumerate() {
                    let mut taken = 0;
                    while taken < chunk && (nodes[i].len() as u32) < c {
                        nodes[i].push(next);
                        next += 1;
                        taken += 1;
                    }
                }
            }
        }
    }
    nodes
}

fn distribution() -> impl Strategy<Value = Distribution> {
    prop_oneof![
        Just(Distribution::Block),
        Just(Distribution::Cyclic),
        (1u32..6).prop_map(Distribution::Plane),
    ]
}

/// Text heavy in the characters the grammars care about.
fn grammar_text() -> impl Strategy<Value = String> {
    prop_oneof!["[\\[\\]0-9a-z,\\-x: \\t\\n()=*+%.]{0,40}", any::<String>(),]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_rank_is_placed_once_where_slurm_puts_it(
        counts in prop::collection::vec(1u32..9, 1..12),
        dist in distribution(),
    ) {
        let layout = Layout::build(&TaskCounts::new(counts.clone()).unwrap(), dist).unwrap();
        let total: u32 = counts.iter().sum();
        prop_assert_eq!(layout.ranks.len() as u32, total);
        let mut seen = HashSet::new();
        for (node, gtids) in layout.nodes().enumerate() {
            prop_assert_eq!(gtids.len() as u32, counts[node]);
            for (slot, &rank) in gtids.iter().enumerate() {
                prop_assert!(seen.insert(rank));
                let p = layout.ranks[rank as usize];
                prop_assert_eq!((p.node as usize, p.slot as usize), (node, slot));
            }
        }
        let chunk = match dist {
            Distribution::Block => None,
            Distribution::Cyclic => Some(1),
            Distribution::Plane(p) => Some(p),
            Distribution::Arbitrary => unreachable!(),
        };
        prop_assert_eq!(layout.nodes().map(<[u32]>::to_vec).collect::<Vec<_>>(), reference(&counts, chunk));
    }

    #[test]
    fn host_files_place_exactly_what_slurm_started_or_say_why(
        counts in prop::collection::vec(0u32..4, 1..5),
        picks in prop::collection::vec(0usize..6, 0..14),
    ) {
        let hosts: Vec<String> = (0..counts.len()).map(|i| format!("n{i}")).collect();
        // Task hosts drawn from the step's nodes and one stranger ("n5" when fewer nodes).
        let task_hosts: Vec<String> = picks.iter().map(|&p| format!("n{}", p.min(5))).collect();
        match Layout::from_task_hosts(&hosts, &TaskCounts::new(counts.clone()).unwrap(), &task_hosts) {
            Ok(layout) => {
                for (node, gtids) in layout.nodes().enumerate() {
                    prop_assert_eq!(gtids.len() as u32, counts[node]);
                    for &rank in gtids {
                        prop_assert_eq!(&task_hosts[rank as usize], &hosts[node]);
                    }
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn parsers_never_panic(text in grammar_text()) {
        let _ = expand(&text);
        let _ = TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", &text);
        let _ = Spec::parse(Some(&text));
        let _ = Distribution::parse(Some(&text), Some(&text));
        let _ = Settings::from_plugstack(&[text.as_str()]);
        let _ = parse_port_list(&text);
        let _ = AddressFormat::parse(&text);
    }

    #[test]
    fn every_task_finds_itself_in_one_shared_cluster(
        counts in prop::collection::vec(1u32..6, 1..8),
        dist in distribution(),
        chief in any::<bool>(),
        ps in 0u32..3,
        host_chars in "[a-z0-9\"\\\\é-]{1,6}",
    ) {
        let total: u32 = counts.iter().sum();
        prop_assume!(total > u32::from(chief) + ps);
        let hosts: Vec<String> = (0..counts.len()).map(|i| format!("{host_chars}{i}x")).collect();
        let nodelist = hosts.join(",");
        let tpn: Vec<String> = counts.iter().map(u32::to_string).collect();
        let tpn = tpn.join(",");
        let dist_text = match dist {
            Distribution::Block => "block".to_string(),
            Distribution::Cyclic => "cyclic".to_string(),
            Distribution::Plane(p) => format!("plane={p}"),
            Distribution::Arbitrary => unreachable!(),
        };
        let mut spec = vec!["worker:*".to_string()];
        if chief { spec.push("chief:1".into()); }
        if ps > 0 { spec.push(format!("ps:{ps}")); }
        let spec = Spec::parse(Some(&spec.join(","))).unwrap();
        let step = StepInputs {
            nodelist: &nodelist, tasks_per_node: &tpn, distribution: Some(&dist_text),
            job_id: 99, step_id: 3, ..Default::default()
        };
        let plan = StepPlan::new(&spec, &Settings::default(), &step).unwrap();
        let mut clusters = HashSet::new();
        let mut endpoints = HashSet::new();
        let mut renderers = plan.renderers();
        for (node, gtids) in plan.layout.nodes().enumerate() {
            let facts = NodeFacts { node, gtids, ..Default::default() };
            let place = plan.place(None, &facts).unwrap();
            for slot in 0..gtids.len() {
                let env = plan.task(&place, slot, None, None, &|_| false, None, &mut renderers).unwrap();
                let text = env.get("TF_CONFIG").unwrap().to_string();
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                prop_assert!(endpoints.insert(env.endpoint.clone()));
                prop_assert!(env.endpoint.starts_with(hosts[node].as_str()));
                let own = &v["cluster"][env.role.name()][env.index as usize];
                prop_assert_eq!(own.as_str(), Some(env.endpoint.as_str()));
                prop_assert_eq!(&v["task"]["type"], env.role.name());
                prop_assert!(env.role != Role::Evaluator);
                clusters.insert(v["cluster"].to_string());
            }
        }
        prop_assert_eq!(clusters.len(), 1);
    }
}
