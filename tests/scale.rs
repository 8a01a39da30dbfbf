//! A 4096-task step on a 64-node test cluster, end to end, and the largest step whose TF_CONFIG
//! fits. tests/release/run.sh runs these on the release marked `scale` in tests/releases.tsv,
//! with 64 nodes named tfc-node-0001 ... tfc-node-0064 declaring 96 CPUs each.

mod common;
use common::cluster::{dir, one_cluster, records, sh, sh_ok, Placed};
use serde_json::Value;
use std::collections::HashSet;
use tfcluster::core::{Settings, Spec, StepInputs, StepPlan};

const SPEC: &str = "chief:1,ps:8,worker:*";

/// Each task prints its rank, node, `task` object and a checksum of its `cluster`; rank 0 also
/// writes its whole TF_CONFIG to `{file}` (srun would cut a 90 KB line into pieces).
const TASK: &str = r#"sh -c 'c=${TF_CONFIG%,\"task\"*}; t=${TF_CONFIG##*\"task\":}; echo "T|$SLURM_PROCID|$SLURMD_NODENAME|${t%\}}|$(printf %s "$c" | cksum)"; [ "$SLURM_PROCID" = 0 ] && printf %s "$TF_CONFIG" > {file}; true'"#;

#[test]
#[ignore = "needs the 64-node test cluster: run tests/run.sh"]
fn four_thousand_tasks_on_sixty_four_nodes() {
    let file = dir().join("scale-tf-config.json");
    let task = TASK.replace("{file}", &file.display().to_string());
    let stdout = sh_ok(&format!(
        "srun -N64 -n4096 --tf-cluster={SPEC},end_with_chief=no {task}"
    ));
    let tasks = records(&stdout, "T");
    assert_eq!(tasks.len(), 4096, "every task reported");
    let digests: HashSet<&str> = tasks.iter().map(|t| t[3]).collect();
    assert_eq!(
        digests.len(),
        1,
        "one identical cluster across all tasks: {digests:?}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let full: Value = serde_json::from_str(&text).unwrap();
    let cluster = &full["cluster"];
    let task_parts: Vec<Value> = tasks
        .iter()
        .map(|t| serde_json::from_str(t[2]).unwrap())
        .collect();
    let placed = tasks.iter().zip(&task_parts).map(|(t, task)| Placed {
        rank: t[0].parse().unwrap(),
        host: t[1],
        role: task["type"].as_str().unwrap(),
        index: task["index"].as_u64().unwrap(),
        cluster,
    });
    let listed = one_cluster("4096 tasks", placed);
    let seen: HashSet<(String, u64)> = task_parts
        .iter()
        .map(|t| {
            (
                t["type"].as_str().unwrap().to_string(),
                t["index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen.len(), 4096, "every role index once");
    let per_node: HashSet<&str> = tasks.iter().map(|t| t[1]).collect();
    assert_eq!(listed.len(), 4096);
    let count = |role: &str| seen.iter().filter(|(r, _)| r == role).count();
    assert_eq!((count("chief"), count("ps"), count("worker")), (1, 8, 4087));
    assert_eq!(per_node.len(), 64);
    eprintln!(
        "4096 tasks: one cluster, every role index once, TF_CONFIG {} bytes",
        text.len()
    );
}

/// The plan srun -N64 -nN makes on the test cluster: block, Slurm's counts (the first N mod 64
/// nodes one more), 5-digit ports as Slurm reserves them (MpiParams=ports=12000-12999).
fn fits(tasks: u32) -> Result<(), tfcluster::core::Error> {
    let nodes = 64;
    let counts: Vec<String> = (0..nodes)
        .map(|n| (tasks / nodes + u32::from(n < tasks % nodes)).to_string())
        .collect();
    let most = tasks.div_ceil(nodes);
    StepPlan::new(
        &Spec::parse(Some(SPEC))?,
        &Settings::default(),
        &StepInputs {
            nodelist: "tfc-node-[0001-0064]",
            tasks_per_node: &counts.join(","),
            resv_ports: Some(&format!("12000-{}", 12000 + most)),
            job_id: 1,
            ..Default::default()
        },
    )
    .map(|_| ())
}

#[test]
#[ignore = "needs the 64-node test cluster: run tests/run.sh"]
fn the_largest_step_that_fits_and_one_past_it() {
    // The core decides the limit; the cluster must agree on both sides of it.
    let (mut lo, mut hi) = (4096, 64 * 96);
    assert!(
        fits(lo).is_ok() && fits(hi).is_err(),
        "the limit lies between {lo} and {hi}"
    );
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid).is_ok() {
            lo = mid
        } else {
            hi = mid
        }
    }
    let stdout = sh_ok(&format!(
        "srun -N64 -n{lo} --tf-cluster={SPEC},end_with_chief=no sh -c 'echo \"S|${{#TF_CONFIG}}\"'"
    ));
    let lens: Vec<usize> = records(&stdout, "S")
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
    assert_eq!(
        lens.len(),
        lo as usize,
        "every task of the largest step got its TF_CONFIG"
    );
    let longest = lens.iter().max().unwrap() + "TF_CONFIG=".len() + 1;
    assert!(longest <= 131072, "{longest}");
    eprintln!("largest step: {lo} tasks, longest TF_CONFIG string {longest} bytes");

    let past = sh(&format!(
        "srun -N64 -n{hi} --tf-cluster={SPEC},end_with_chief=no true"
    ));
    let stderr = String::from_utf8_lossy(&past.stderr);
    assert_ne!(past.status.code(), Some(0));
    let want = fits(hi).unwrap_err().to_string();
    assert!(
        stderr.contains(&format!("tfcluster: {want}")),
        "{hi} tasks: expected\n{want}\nin:\n{}",
        stderr.lines().take(5).collect::<Vec<_>>().join("\n")
    );
}
