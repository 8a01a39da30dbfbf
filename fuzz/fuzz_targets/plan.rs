//! A whole step plan from arbitrary inputs, checked against what every step must satisfy: every
//! rank placed exactly once, every trainer given the one shared cluster and finding itself in it
//! at its own node, the evaluator finding itself in its own, no endpoint twice, valid JSON,
//! DTensor's list in rank order, GPU slices disjoint within a node.
//!
//! Input: newline-separated fields: spec, plugstack words, SLURM_STEP_NODELIST,
//! SLURM_STEP_TASKS_PER_NODE, SLURM_DISTRIBUTION, SLURM_DIST_PLANESIZE, SLURM_STEP_RESV_PORTS,
//! the arbitrary task order, CUDA_VISIBLE_DEVICES (an empty field is an unset variable).
//! Steps of more than 256 tasks are only planned (each task is checked up to 256, so each input
//! runs in about a millisecond); steps over the core's limit must be refused with
//! `TooManyTasks`, never allocated.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::collections::HashSet;
use tfcluster::core::container::{self, Runtimes};

const APPTAINER_ONLY: Runtimes = Runtimes {
    apptainer: true,
    singularity: false,
};
use tfcluster::core::layout::{TaskCounts, MAX_TASKS};
use tfcluster::core::{
    Error, GpuAction, NodeFacts, ProxyEnv, Role, Settings, Spec, StepInputs, StepPlan,
};

/// Steps up to this many tasks are checked task by task.
const CHECKED_TASKS: u64 = 256;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Every field comes from a C string (the environment, plugstack.conf, the option), which
    // never holds a NUL.
    if text.contains('\0') {
        return;
    }
    let mut f = text.split('\n');
    let mut field = || f.next().unwrap_or("");
    let (spec, admin, nodelist, tpn) = (field(), field(), field(), field());
    let (dist, plane, resv, order, gpus) = (field(), field(), field(), field(), field());
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let (dist, plane, resv, order, gpus) =
        (some(dist), some(plane), some(resv), some(order), some(gpus));
    let total = match TaskCounts::parse("x", tpn) {
        Ok(counts) => counts.total(),
        Err(Error::TooManyTasks { .. }) => u32::MAX,
        Err(_) => return,
    };
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
        het: None,
        proxies: ProxyEnv::from_pairs(&[("http_proxy", "x")]),
        job_id: 42,
        step_id: 1,
    };
    let planned = StepPlan::new(&spec, &settings, &step);
    if u64::from(total) > MAX_TASKS {
        // Refused before anything was allocated from the counts (the hostlist or the spec may
        // be refused first).
        assert!(
            planned.is_err(),
            "a step of more than {MAX_TASKS} tasks was planned"
        );
        return;
    }
    let Ok(mut plan) = planned else {
        return;
    };
    // Apptainer on this node, SingularityCE not: the default sets one prefix only.
    plan.find_runtimes(|| APPTAINER_ONLY);
    if u64::from(total) <= CHECKED_TASKS {
        check(&plan, gpus.as_deref());
        check_firewall(&plan);
    }
});

/// With isolate=yes (forced here), every node's nftables script holds no byte of the inputs:
/// node names only go to the resolver, and the script is made of the resolved addresses, ports,
/// ids and fixed words, one statement per line, in a table its installer owns.
fn check_firewall(plan: &StepPlan) {
    let mut plan = plan.clone();
    plan.settings.isolate = true;
    plan.settings.port_range = (1, 65535);
    for node in 0..plan.hosts.len() {
        let script = plan
            .firewall(42, 1, 1000, node, |_| {
                Ok(vec![
                    "10.0.0.1".parse().unwrap(),
                    "fd00::1".parse().unwrap(),
                ])
            })
            .unwrap()
            .unwrap();
        assert!(
            script
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b" _.:{}@!=&|(),;\"\n".contains(&b)),
            "{script}"
        );
        assert!(script.starts_with("table inet tfcluster_42_1 {\nflags owner\n"));
    }
}

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
    let jobs: Option<Vec<&str>> = plan.dtensor_jobs().map(|j| j.split(',').collect());
    if let Some(jobs) = &jobs {
        assert_eq!(jobs.len(), tasks as usize);
    }
    let mut renderers = plan.renderers();
    for rank in 0..tasks {
        let p = plan.layout.ranks[rank as usize];
        // Every other task runs apptainer (apptainer_env=auto then adds Apptainer's names).
        let program = (rank % 2 == 1).then_some("/usr/bin/apptainer");
        let facts = NodeFacts {
            node: p.node as usize,
            gtids: plan.layout.node(p.node as usize).expect("placed"),
            step_gpus: gpus,
            slurm_gave_gpus: true,
        };
        let place = plan.place(None, &facts).expect("Slurm's ids are the plan's");
        let env = match plan.task(&place, p.slot as usize, gpus, program, &|_| false, None, &mut renderers) {
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
        let text = plan.tf_config(env.role, env.index);
        assert_eq!(
            env.get("TF_CONFIG"),
            Some(text.as_str()),
            "the node's buffer differs"
        );
        for (name, value) in &env.set {
            assert!(value.ends_with('\0'), "{name} is not NUL-terminated");
            assert!(
                !value[..value.len() - 1].contains('\0'),
                "{name}: a NUL inside"
            );
        }
        assert_eq!(
            env.get("no_grpc_proxy").is_some(),
            plan.settings.grpc_proxy_bypass
        );
        // The runtimes' names: for every plain variable, each runtime's the setting gives this
        // task (Apptainer's, SingularityCE's), with its value, and no other.
        let runtimes = plan
            .settings
            .apptainer_env
            .for_task(APPTAINER_ONLY, program);
        for (name, value) in &env.set {
            assert!(
                container::reaches_apptainer(name),
                "{name} is not in APPTAINER_NAMES"
            );
            let wanted = [runtimes.apptainer, runtimes.singularity];
            for (&other, wanted) in container::apptainer_names(name).iter().zip(wanted) {
                let got = env.get(other);
                assert_eq!(got.is_some(), wanted, "{other}");
                if let Some(got) = got {
                    assert_eq!(got, &value[..value.len() - 1], "{other}");
                }
            }
        }
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
