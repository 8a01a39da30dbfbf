//! A whole step plan from arbitrary inputs, checked against what every step must satisfy: every
//! rank placed exactly once, every trainer given the one shared cluster and finding itself in it
//! at its own node, the evaluator finding itself in its own, no endpoint twice, valid JSON,
//! DTensor's list in rank order, GPU slices disjoint within a node.
//!
//! Input: newline-separated fields: spec, plugstack words, SLURM_STEP_NODELIST,
//! SLURM_STEP_TASKS_PER_NODE, SLURM_DISTRIBUTION, SLURM_DIST_PLANESIZE, SLURM_STEP_RESV_PORTS,
//! the arbitrary task order, CUDA_VISIBLE_DEVICES (an empty field is an unset variable).
//! Steps are capped at 256 tasks so each input runs in well under a millisecond; the parsers'
//! own targets take inputs of any size.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::collections::HashSet;
use tfcluster::core::layout::parse_counts;
use tfcluster::core::{Error, GpuAction, Role, Settings, Spec, StepInputs, StepPlan};

const MAX_TASKS: u64 = 256;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut f = text.split('\n');
    let mut field = || f.next().unwrap_or("");
    let (spec, admin, nodelist, tpn) = (field(), field(), field(), field());
    let (dist, plane, resv, order, gpus) = (field(), field(), field(), field(), field());
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let (dist, plane, resv, order, gpus) =
        (some(dist), some(plane), some(resv), some(order), some(gpus));
    let Ok(counts) = parse_counts("x", tpn) else {
        return;
    };
    if counts.iter().map(|&c| u64::from(c)).sum::<u64>() > MAX_TASKS || counts.len() > 256 {
        return;
    }
    let Ok(spec) = Spec::parse(Some(spec)) else {
        return;
    };
    let words: Vec<&str> = admin.split_whitespace().collect();
    let Ok(settings) = Settings::from_plugstack(&words) else {
        return;
    };
    let step = StepInputs {
        nodelist,
        tasks_per_node: tpn,
        distribution: dist.as_deref(),
        plane_size: plane.as_deref(),
        resv_ports: resv.as_deref(),
        task_hosts: order.as_deref(),
        topology: None,
        job_id: 42,
        step_id: 1,
    };
    let Ok(plan) = StepPlan::new(&spec, &settings, &step) else {
        return;
    };
    check(&plan, gpus.as_deref());
});

fn check(plan: &StepPlan, gpus: Option<&str>) {
    let tasks = plan.tasks();
    // Every rank placed exactly once, and the two views of the layout agree.
    let mut seen = vec![false; tasks as usize];
    for (node, gtids) in plan.layout.nodes().enumerate() {
        for (slot, &rank) in gtids.iter().enumerate() {
            assert!(
                !std::mem::replace(&mut seen[rank as usize], true),
                "rank {rank} twice"
            );
            let p = plan.layout.ranks[rank as usize];
            assert_eq!((p.node as usize, p.slot as usize), (node, slot));
        }
    }
    assert!(seen.iter().all(|&s| s), "a rank is placed nowhere");

    let mut trainers_cluster: Option<Value> = None;
    let mut endpoints = HashSet::new();
    let mut node_gpus: Vec<HashSet<String>> = vec![HashSet::new(); plan.hosts.len()];
    let jobs: Option<Vec<&str>> = plan.dtensor_jobs.as_deref().map(|j| j.split(',').collect());
    if let Some(jobs) = &jobs {
        assert_eq!(jobs.len(), tasks as usize);
    }
    let mut renderer = plan.renderer();
    for rank in 0..tasks {
        let p = plan.layout.ranks[rank as usize];
        let env = match plan.task(p.node as usize, p.slot as usize, gpus, gpus) {
            Ok(env) => env,
            Err(
                Error::NotEnoughGpus { .. }
                | Error::UnevenGpus { .. }
                | Error::BadGpuList { .. }
                | Error::RepeatedGpu { .. },
            ) => return,
            Err(e) => panic!("rank {rank}: {e}"),
        };
        assert_eq!(env.rank, rank);
        assert_eq!(plan.roles.of_rank(rank), Some((env.role, env.index)));
        let text = plan
            .tf_config(env.role, env.index)
            .expect("sized when planned");
        let nul = plan.tf_config_nul(&mut renderer, env.role, env.index);
        assert_eq!(
            nul.strip_suffix('\0'),
            Some(text.as_str()),
            "the node's buffer differs"
        );
        assert!(!text.contains('\0'));
        let tf: Value = serde_json::from_str(&text).expect("TF_CONFIG is JSON");
        assert_eq!(tf["task"]["type"], env.role.name());
        assert_eq!(tf["task"]["index"], env.index);
        let own = if env.role == Role::Evaluator {
            &tf["cluster"]["evaluator"][0]
        } else {
            match &trainers_cluster {
                None => trainers_cluster = Some(tf["cluster"].clone()),
                Some(c) => assert_eq!(c, &tf["cluster"], "rank {rank} has another cluster"),
            }
            &tf["cluster"][env.role.name()][env.index as usize]
        };
        assert_eq!(
            own.as_str(),
            Some(env.endpoint.as_str()),
            "rank {rank} is not at its endpoint"
        );
        assert!(
            endpoints.insert(env.endpoint.clone()),
            "{} twice",
            env.endpoint
        );
        if let Some(jobs) = &jobs {
            assert_eq!(jobs[rank as usize], env.endpoint);
        }
        if let GpuAction::Set(list) = &env.gpus {
            for token in list.split(',').filter(|t| !t.is_empty()) {
                assert!(
                    gpus.is_some_and(|g| g.split(',').any(|t| t.trim() == token)),
                    "GPU {token} was not the node's"
                );
                assert!(
                    node_gpus[p.node as usize].insert(token.to_string()),
                    "GPU {token} given twice on node {}",
                    p.node
                );
            }
        }
    }
}
