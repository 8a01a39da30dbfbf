//! End to end on a real Slurm cluster: where every task runs and what it is told. srun, sbatch
//! and salloc as users type them, every distribution, GPUs, ports; each row gives, for every
//! global rank, `role:index@node gpus` (`-` when CUDA_VISIBLE_DEVICES is unset, `none` when it is
//! empty), and every run also checks that all tasks share one cluster, each task finds itself in
//! it at its own node, and no two tasks of a node share a port. Node names are `n9 n10 n011
//! n012`, for which Slurm orders a full allocation as n[011-012,9-10]: neither lexicographic nor
//! numeric, and zero-padded.

#![allow(clippy::type_complexity)] // tables of cases

mod common;
use common::cluster::{dir, parse, records, sbatch, sh, sh_ok, srun_error, summary, tool, Run};
use std::collections::HashSet;
use std::process::Output;
use tfcluster::core::Spec;

fn srun(args: &str) -> Run {
    parse(sh(&format!("srun {args} {}", report())))
}

fn report() -> String {
    tool("report.sh")
}

#[rustfmt::skip]
const LAYOUTS: &[(&str, &str, &[&str])] = &[
    ("block, 2 per node",
     "-N4 -n8 --tf-cluster=chief:1,ps:1,worker:*",
     &["chief:0@n011 -", "ps:0@n011 -", "worker:0@n012 -", "worker:1@n012 -",
       "worker:2@n9 -", "worker:3@n9 -", "worker:4@n10 -", "worker:5@n10 -"]),
    ("cyclic",
     "-N4 -n8 -m cyclic --tf-cluster=chief:1,ps:1,worker:*",
     &["chief:0@n011 -", "ps:0@n012 -", "worker:0@n9 -", "worker:1@n10 -",
       "worker:2@n011 -", "worker:3@n012 -", "worker:4@n9 -", "worker:5@n10 -"]),
    ("plane=2",
     "-w n011,n012,n9 -N3 -n8 -m plane=2 --tf-cluster=worker:*",
     &["worker:0@n011 -", "worker:1@n011 -", "worker:2@n012 -", "worker:3@n012 -",
       "worker:4@n9 -", "worker:5@n9 -", "worker:6@n011 -", "worker:7@n011 -"]),
    ("packed uneven 5,1(x3)",
     "-p shared -N4 -n8 --tf-cluster=ps:1,worker:*",
     &["ps:0@n011 -", "worker:0@n011 -", "worker:1@n011 -", "worker:2@n011 -",
       "worker:3@n011 -", "worker:4@n012 -", "worker:5@n9 -", "worker:6@n10 -"]),
    ("packed uneven, cyclic",
     "-p shared -N4 -n8 -m cyclic --tf-cluster=ps:1,worker:*",
     &["ps:0@n011 -", "worker:0@n012 -", "worker:1@n9 -", "worker:2@n10 -",
       "worker:3@n011 -", "worker:4@n011 -", "worker:5@n011 -", "worker:6@n011 -"]),
    ("n9 before n10 (TensorFlow sorts n10 first)",
     "-w n9,n10 -N2 -n2 --tf-cluster",
     &["worker:0@n9 -", "worker:1@n10 -"]),
    ("no SPEC: all workers",
     "-w n011,n012 -N2 -n4 --tf-cluster",
     &["worker:0@n011 -", "worker:1@n011 -", "worker:2@n012 -", "worker:3@n012 -"]),
    ("ps:1,worker:3",
     "-w n011,n012 -N2 -n4 --tf-cluster=ps:1,worker:3",
     &["ps:0@n011 -", "worker:0@n011 -", "worker:1@n012 -", "worker:2@n012 -"]),
    ("an evaluator",
     "-w n011,n012 -N2 -n4 --tf-cluster=chief:1,evaluator:1,worker:*",
     &["chief:0@n011 -", "evaluator:0@n011 -", "worker:0@n012 -", "worker:1@n012 -"]),
    ("4 GPUs over 2 tasks",
     "-w n011 -N1 -n2 --gres=gpu:4 --tf-cluster",
     &["worker:0@n011 0,1", "worker:1@n011 2,3"]),
    ("4 GPUs over 3 tasks, one left unused",
     "-w n011 -N1 -n3 --gres=gpu:4 --tf-cluster",
     &["worker:0@n011 0", "worker:1@n011 1", "worker:2@n011 2"]),
    ("2 nodes x 4 GPUs over 2 tasks each",
     "-w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:*",
     &["chief:0@n011 0,1", "worker:0@n011 2,3", "worker:1@n012 0,1", "worker:2@n012 2,3"]),
    ("uneven: every worker gets the busiest node's share",
     "-w n011,n012 -N2 -n3 --gres=gpu:4 --tf-cluster",
     &["worker:0@n011 0,1", "worker:1@n011 2,3", "worker:2@n012 0,1"]),
    ("uneven with ps: each node splits its own",
     "-w n011,n012 -N2 -n3 --gres=gpu:4 --tf-cluster=chief:1,ps:1,worker:*",
     &["chief:0@n011 0,1", "ps:0@n011 2,3", "worker:0@n012 0,1,2,3"]),
    ("uneven, even_gpus=no",
     "-w n011,n012 -N2 -n3 --gres=gpu:4 --tf-cluster=worker:*,even_gpus=no",
     &["worker:0@n011 0,1", "worker:1@n011 2,3", "worker:2@n012 0,1,2,3"]),
    ("--gpus-per-task=1: Slurm's binding kept",
     "-w n011 -N1 -n4 --gpus-per-task=1 --tf-cluster",
     &["worker:0@n011 0", "worker:1@n011 1", "worker:2@n011 2", "worker:3@n011 3"]),
    ("parameter servers off GPUs",
     "-w n011 -N1 -n4 --gres=gpu:4 --tf-cluster=chief:1,ps:1,worker:*,gpu_roles=chief+worker",
     &["chief:0@n011 0", "ps:0@n011 none", "worker:0@n011 1", "worker:1@n011 2"]),
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn layouts_roles_and_gpus() {
    for (what, args, want) in LAYOUTS {
        assert_eq!(summary(&srun(args), what), *want, "{what}: srun {args}");
    }
}

/// (what, sbatch arguments with `{r}` for the task program, what each rank got)
#[rustfmt::skip]
const BATCH: &[(&str, &str, &[&str])] = &[
    ("a step on part of the allocation (-r1)",
     "-w n011,n012,n9 -N3 -n6 --wrap 'srun -N2 -n3 -r1 --tf-cluster=ps:1,worker:* {r}'",
     &["ps:0@n012 -", "worker:0@n012 -", "worker:1@n9 -"]),
    ("a bare #SBATCH --tf-cluster: all workers (sbatch passes it on as '(null)')",
     "-w n011,n012 -N2 -n2 --tf-cluster --wrap 'srun {r}'",
     &["worker:0@n011 -", "worker:1@n012 -"]),
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn batch_jobs() {
    for (i, (what, args, want)) in BATCH.iter().enumerate() {
        let run = sbatch(&format!("batch-{i}"), &args.replace("{r}", &report()));
        assert_eq!(summary(&run, what), *want, "{what}");
    }
}

/// A batch script under `#SBATCH --tf-cluster` runs a preparation step of one task: with
/// `--tf-cluster=off` it runs without TF_CONFIG, and the script's TensorFlow step still gets its
/// cluster; without the word srun refuses it (the spec does not fit) and says how to opt out.
/// The refusal comes last: Slurm keeps a step that srun refused after creating it until the job
/// ends, and a later step of the script would wait for its CPUs (docs/user-guide.md).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn one_step_of_a_batch_script_opts_out_with_off() {
    let script = dir().join("opt-out.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH --tf-cluster=chief:1,worker:3\n#SBATCH -w n011,n012 -N2 -n4\n\
             srun -N1 -n1 --tf-cluster=off sh -c 'echo \"PREPARED|${{TF_CONFIG-unset}}\"'\n\
             srun -N2 -n4 {r}\n\
             srun -N1 -n1 true 2>&1 | sed 's/^/REFUSED|/'\n",
            r = report()
        ),
    )
    .unwrap();
    let run = sbatch("opt-out", &script.display().to_string());
    let text = &run.stdout;
    let spec = Spec::parse(Some("chief:1,worker:3")).unwrap();
    let refusal = tfcluster::spank::error::ShellError::FromEnvironment {
        error: Box::new(spec.resolve(1).unwrap_err().into()),
    };
    assert!(
        text.contains(&format!("REFUSED|{}", srun_error(&refusal))),
        "{text}"
    );
    assert_eq!(records(text, "PREPARED"), [["unset"]], "{text}");
    assert_eq!(run.tasks.len(), 4, "{text}");
    assert!(run.tasks.iter().all(|t| t.tf.is_some()), "{text}");
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn sbatch_option_applies_to_every_step_but_not_the_batch_script() {
    let script = dir().join("two-steps.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH --tf-cluster=chief:1,worker:*\n#SBATCH -w n011,n012 -N2 -n4\n\
             echo \"BATCH|${{TF_CONFIG--}}\"\nsrun -N2 -n2 {r}\nsrun -N2 -n4 {r}\n",
            r = report()
        ),
    )
    .unwrap();
    let run = sbatch("two-steps", &script.display().to_string());
    let text = &run.stdout;
    assert!(
        text.contains("BATCH|-"),
        "the batch script must not get a TF_CONFIG:\n{text}"
    );
    let (first, second): (Vec<&str>, Vec<&str>) = {
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("TASK|")).collect();
        let (a, b) = lines.split_at(2);
        (a.to_vec(), b.to_vec())
    };
    let step = |lines: Vec<&str>| {
        let stdout = lines.join("\n").into_bytes();
        parse(Output {
            stdout,
            stderr: vec![],
            status: Default::default(), // sbatch succeeded
        })
    };
    assert_eq!(
        summary(&step(first), "step 0"),
        ["chief:0@n011 -", "worker:0@n012 -"]
    );
    assert_eq!(
        summary(&step(second), "step 1"),
        [
            "chief:0@n011 -",
            "worker:0@n011 -",
            "worker:1@n012 -",
            "worker:2@n012 -"
        ]
    );
}

/// (what, command with `{r}` for the task program, what each rank got)
#[rustfmt::skip]
const ALLOCATIONS: &[(&str, &str, &[&str])] = &[
    ("salloc with a spec",
     "salloc -w n011,n012 -N2 -n2 --tf-cluster=chief:1,worker:* srun {r}",
     &["chief:0@n011 -", "worker:0@n012 -"]),
    ("salloc with a bare --tf-cluster (Slurm passes it on as '(null)')",
     "salloc -w n011,n012 -N2 -n2 --tf-cluster srun {r}",
     &["worker:0@n011 -", "worker:1@n012 -"]),
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn salloc_option_applies_to_its_steps() {
    for (what, command, want) in ALLOCATIONS {
        let run = parse(sh(&command.replace("{r}", &report())));
        assert_eq!(summary(&run, what), *want, "{what}");
    }
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_environment_variable_form() {
    let run = parse(sh(&format!(
        "SLURM_SPANK__SLURM_SPANK_OPTION_tfcluster_tf_cluster=ps:1,worker:* srun -w n011,n012 -N2 -n2 {}",
        report()
    )));
    assert_eq!(
        summary(&run, "env form"),
        ["ps:0@n011 -", "worker:0@n012 -"]
    );
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn arbitrary_distribution_follows_the_host_file() {
    // Rank k runs on the k-th line's host; Slurm lists the nodes as n[011-012,9].
    let file = dir().join("hostfile");
    std::fs::write(&file, "n012\nn9\nn012\nn011\nn9\n").unwrap();
    let hostfile = format!("SLURM_HOSTFILE={}", file.display());
    let arbitrary = [
        "ps:0@n012 -",
        "worker:0@n9 -",
        "worker:1@n012 -",
        "worker:2@n011 -",
        "worker:3@n9 -",
    ];
    // Whatever the job's environment policy: srun hands the order over in a SLURM_* variable,
    // which srun forwards in every case.
    for env in ["", "--export=NONE", "--export=PATH", "--export=ALL,FOO=1"] {
        let run = parse(sh(&format!(
            "{hostfile} srun {env} -m arbitrary -n5 --tf-cluster=ps:1,worker:* {}",
            report()
        )));
        assert_eq!(summary(&run, env), arbitrary, "srun {env}");
    }
    let run = parse(sh(&format!(
        "{hostfile} SLURM_EXPORT_ENV=NONE srun -m arbitrary -n5 --tf-cluster=ps:1,worker:* {}",
        report()
    )));
    assert_eq!(summary(&run, "SLURM_EXPORT_ENV=NONE"), arbitrary);
    // srun's hand-over to the nodes does not reach the program: every task runs and finds it
    // unset.
    let stdout = sh_ok(&format!(
        "{hostfile} srun -m arbitrary -n5 --tf-cluster sh -c 'echo \"H|${{SLURM_TFCLUSTER_TASK_HOSTS-unset}}\"'"
    ));
    assert_eq!(records(&stdout, "H"), vec![vec!["unset"]; 5], "{stdout}");
}

/// (what, srun arguments, what each rank got) with `--export=NONE`
#[rustfmt::skip]
const EXPORT_NONE: &[(&str, &str, &[&str])] = &[
    ("block", "--export=NONE -w n011,n012 -N2 -n4 --tf-cluster=chief:1,ps:1,worker:*",
     &["chief:0@n011 -", "ps:0@n011 -", "worker:0@n012 -", "worker:1@n012 -"]),
    ("cyclic", "--export=NONE -w n011,n012 -N2 -n4 -m cyclic --tf-cluster=chief:1,ps:1,worker:*",
     &["chief:0@n011 -", "ps:0@n012 -", "worker:0@n011 -", "worker:1@n012 -"]),
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn export_none_changes_nothing() {
    for (what, args, want) in EXPORT_NONE {
        assert_eq!(summary(&srun(args), what), *want, "{what}: srun {args}");
    }
    let script = dir().join("export-none.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH --export=NONE\n#SBATCH --tf-cluster=chief:1,worker:*\n\
             #SBATCH -w n011,n012 -N2 -n2\nsrun {}\n",
            report()
        ),
    )
    .unwrap();
    let run = sbatch("export-none", &script.display().to_string());
    assert_eq!(
        summary(&run, "sbatch --export=NONE"),
        ["chief:0@n011 -", "worker:0@n012 -"]
    );
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_user_who_is_not_root() {
    let run = parse(sh(&format!(
        "runuser -u nobody -- srun -w n011,n012 -N2 -n2 --tf-cluster=chief:1,worker:* {}",
        report()
    )));
    assert_eq!(
        summary(&run, "as nobody"),
        ["chief:0@n011 -", "worker:0@n012 -"]
    );
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn two_steps_sharing_a_node_get_different_ports() {
    let bind = tool("bind_port.py");
    let step = format!("srun --overlap --resv-ports=0 -n2 --tf-cluster /usr/bin/python3 {bind} &");
    let out = dir().join("ports.out");
    // A bash script, as users write them: SchedMD's 25.05.8 starts batch scripts with SIGCHLD
    // blocked, and dash's `wait` (sbatch --wrap runs /bin/sh) then never returns, plugin or not.
    let script = dir().join("two-steps.sh");
    std::fs::write(&script, format!("#!/bin/bash\n{step}\n{step}\nwait\n")).unwrap();
    let run = sh(&format!(
        "chmod a+rx {s}; sbatch --wait -N1 -n4 -o {} {s}",
        out.display(),
        s = script.display()
    ));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let bound: Vec<(&str, u32)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("BOUND|"))
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            (f[0], f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(
        bound.len(),
        4,
        "every task of both steps bound its port:\n{text}"
    );
    let steps: HashSet<&str> = bound.iter().map(|(s, _)| *s).collect();
    let ports: HashSet<u32> = bound.iter().map(|(_, p)| *p).collect();
    assert_eq!((steps.len(), ports.len()), (2, 4), "{text}");
    assert!(
        ports.iter().all(|p| (20000..=32767).contains(p)),
        "{ports:?}"
    );
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn ports_come_from_slurm_reservations_when_present() {
    // The test cluster sets MpiParams=ports=12000-12999, so Slurm reserves ports for each step.
    let run = srun("-N2 -n4 --tf-cluster");
    summary(&run, "reserved ports");
    let tf = run.tasks[0].tf.as_ref().unwrap();
    for entry in tf["cluster"]["worker"].as_array().unwrap() {
        let port: u32 = entry
            .as_str()
            .unwrap()
            .rsplit_once(':')
            .unwrap()
            .1
            .parse()
            .unwrap();
        assert!((12000..=12999).contains(&port), "{entry}");
    }
}
