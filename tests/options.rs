//! End to end on a real Slurm cluster: the option itself. Without it the plugin changes
//! nothing; the site's settings in plugstack.conf reach every task; `srun -v` shows what each
//! task got, in the core's words; gRPC bypasses the job's proxy for the cluster's own nodes.

mod common;
use common::cluster::{
    parse, plugin, plugstack_line, records, sh, sh_ok, summary, tool, PlugStack, Run,
    CLUSTER_SETTINGS,
};
use common::release;
use common::{environment_running, plan};
use tfcluster::core::{GpuAction, Role, Spec, TaskEnv};
use tfcluster::spank::hooks::OPTION_USAGE;

fn srun(args: &str) -> Run {
    parse(sh(&format!("srun {args} {}", report())))
}

fn report() -> String {
    tool("report.sh")
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn without_the_option_nothing_changes() {
    let names = |env: &str| -> Vec<String> {
        // One node for both runs: the environment names the node (SLURMD_NODENAME).
        let out = sh(&format!("{env} srun -w n011 -N1 -n2 --gres=gpu:4 env"));
        assert!(out.status.success());
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("SLURM_") && l.contains('='))
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    let with_plugin = names("");
    let stack = PlugStack::set("");
    let without_plugin = names("");
    drop(stack);
    assert_eq!(with_plugin, without_plugin);
    assert!(with_plugin.contains(&"CUDA_VISIBLE_DEVICES=0,1,2,3".to_string()));
    assert!(!with_plugin.iter().any(|l| l.starts_with("TF_CONFIG=")));
}

/// Each task's variables go into entries of its own environment, which slurmstepd makes empty
/// before the forks (`src/core/env_entries.rs`): a name the node's first task is given and
/// another task is not stays unset there; Slurm itself can still replace or unset them (a task
/// prolog's `export` and `unset`, after tfcluster's `task_init`); and the step's own
/// environment, which each task epilog gets, keeps none of them.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn each_task_writes_its_variables_into_entries_of_its_own() {
    let epilogs = common::cluster::dir().join("task-epilogs");
    #[rustfmt::skip]
    let rows: &[(&str, &str, [&str; 2])] = &[
        // what,                                       srun's options,                                               E|rank|TF_CONFIG|CUDA_DEVICE_ORDER|JAX_LOCAL_DEVICE_IDS, ranks 0 and 1
        ("the first task's names, not the second's",   "--tf-cluster=chief:1,worker:*,gpu_roles=chief,jax=yes",        ["E|0|json|PCI_BUS_ID|0,1",        "E|1|json|PCI_BUS_ID|unset"]),
        ("a task prolog replaces and unsets them",     "--task-prolog={prolog} --tf-cluster=chief:1,worker:*",         ["E|0|the-prologs|unset|unset",    "E|1|the-prologs|unset|unset"]),
    ];
    for (what, options, want) in rows {
        let _ = std::fs::remove_dir_all(&epilogs);
        std::fs::create_dir_all(&epilogs).unwrap();
        sh_ok(&format!("chmod 1777 {}", epilogs.display()));
        let options = options.replace("{prolog}", &tool("task_prolog.sh"));
        let stdout = sh_ok(&format!(
            "TFC_EPILOG_DIR={} srun -w n011 -N1 -n2 --gres=gpu:2 --task-epilog={} {options} {}",
            epilogs.display(),
            tool("task_epilog.sh"),
            tool("entries.sh")
        ));
        let mut got: Vec<&str> = stdout.lines().filter(|l| l.starts_with("E|")).collect();
        got.sort();
        assert_eq!(got, want, "{what}: {stdout}");
        let left: Vec<String> = std::fs::read_dir(&epilogs)
            .unwrap()
            .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
            .collect();
        assert_eq!(
            left,
            ["", ""],
            "{what}: the step's environment, as each task epilog saw it"
        );
    }
}

/// The default `apptainer_env` on the nodes: each task gets the variables again under the names
/// of the container runtimes installed on its node, found by the node itself (Debian's
/// apptainer, whose `singularity` is a link to it, where the release's root has it), and
/// nothing more where there is none. Then `always` and `no` as the setting says.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn the_runtime_names_follow_what_the_node_has() {
    let found: &[&str] = match release::current().has_apptainer {
        true => &["APPTAINERENV_TF_CONFIG"],
        false => &[],
    };
    #[rustfmt::skip]
    let cases: &[(&str, &[&str])] = &[
        ("--tf-cluster",                          found),
        ("--tf-cluster=worker:*,apptainer_env=always", &["APPTAINERENV_TF_CONFIG", "SINGULARITYENV_TF_CONFIG"]),
        ("--tf-cluster=worker:*,apptainer_env=no",     &[]),
    ];
    for (option, names) in cases {
        let out = sh_ok(&format!("srun -w n011,n012 -N2 -n4 {option} env"));
        // Every one of the 4 tasks, each name once.
        let mut got: Vec<&str> = out
            .lines()
            .filter_map(|l| l.split_once('=').map(|(name, _)| name))
            .filter(|name| name.ends_with("ENV_TF_CONFIG"))
            .collect();
        got.sort();
        let mut want: Vec<&str> = names.iter().flat_map(|n| [*n; 4]).collect();
        want.sort();
        assert_eq!(got, want, "{option}: {out}");
        let tasks = out.lines().filter(|l| l.starts_with("TF_CONFIG=")).count();
        assert_eq!(tasks, 4, "{option}");
    }
}

/// Which tfcluster is loaded, for which Slurm: `srun -v` says so, and so does each slurmd's log
/// from its start (the version is Cargo.toml's, as the packages' and the tarball's).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn srun_v_and_slurmds_log_name_the_version() {
    let line = release::current().loaded_line();
    let out = sh("srun -v -w n011 -N1 -n1 true");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("srun: {line}")), "{stderr}");
    let log = std::fs::read_to_string(common::cluster::dir().join("log/slurmd-n011.log")).unwrap();
    assert!(log.contains(&line), "slurmd-n011.log lacks {line}");
}

/// `srun --help` lists the option with its line, which says to write the `=` (Slurm wraps the
/// line to the terminal's width: compared word by word).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn srun_help_says_to_write_the_equals_sign() {
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = words(&sh_ok("srun --help"));
    assert!(help.contains("--tf-cluster=SPEC"), "{help}");
    assert!(help.contains(&words(OPTION_USAGE)), "{help}");
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn admin_settings_from_plugstack_conf() {
    let stack = PlugStack::set(&format!(
        "required {} address=%h.tfc port_base=9000 rpc_layer=grpc",
        plugin()
    ));
    let run = srun("-w n011,n012 -N2 -n2 --tf-cluster=chief:1,worker:*");
    drop(stack);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.tasks[1].tf.as_ref().unwrap().to_string(),
        r#"{"cluster":{"chief":["n011.tfc:9000"],"worker":["n012.tfc:9000"]},"rpc_layer":"grpc","task":{"index":0,"type":"worker"}}"#
    );
}

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn srun_verbose_shows_what_each_task_got() {
    let spec = "chief:1,worker:*";
    let run = parse(sh(&format!(
        "srun -v -w n011,n012 -N2 -n2 --gres=gpu:2 --tf-cluster={spec} {}",
        report()
    )));
    summary(&run, "srun -v");
    let roles = Spec::parse(Some(spec)).unwrap().resolve(2).unwrap();
    let mut lines = vec![format!("srun: tfcluster: {}", roles.report())];
    // Each task's line, as the core words it, for what the task received: its endpoint in its
    // TF_CONFIG and its CUDA_VISIBLE_DEVICES.
    for task in &run.tasks {
        let tf = task.tf.as_ref().unwrap();
        let (role, index) = (
            tf["task"]["type"].as_str().unwrap(),
            tf["task"]["index"].as_u64().unwrap(),
        );
        let got = TaskEnv {
            role: Role::parse(role).unwrap(),
            index: index as u32,
            rank: task.rank,
            endpoint: tf["cluster"][role][index as usize].as_str().unwrap().into(),
            gpus: GpuAction::Set(task.gpus.clone()),
            gpu_basis: None,
            set: vec![],
            tf_config_head: 0,
            unset: &[],
        };
        lines.push(format!("tfcluster: {}", got.report(None)));
    }
    let release = release::current();
    for line in lines {
        assert!(
            release.printed(&run.stderr, &line),
            "expected {line:?} in:\n{}",
            run.stderr
        );
    }
}

#[test]
fn releases_agree_with_the_runner() {
    // tests/releases.tsv (what tests/run.sh runs, in which root) and tests/common/release.rs
    // (what each release shows users) list the same releases.
    let tsv = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/releases.tsv"))
        .unwrap();
    let runner: Vec<(&str, &str, bool)> = tsv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0],
                f[1],
                f[2].split(',').any(|extra| extra == "apptainer"),
            )
        })
        .collect();
    let table: Vec<(&str, &str, bool)> = release::RELEASES
        .iter()
        .map(|r| (r.version, r.root, r.has_apptainer))
        .collect();
    assert_eq!(runner, table);
}

/// (the job's environment, what every task's no_grpc_proxy is: `-` when unset)
#[rustfmt::skip]
const PROXIES: &[(&str, &str, &str)] = &[
    ("",                                                      "--tf-cluster",                         "-"),
    ("http_proxy=http://127.0.0.1:9",                         "--tf-cluster",                         "n011,n012"),
    ("https_proxy=http://127.0.0.1:9 no_proxy=localhost,.site", "--tf-cluster",                       "localhost,.site,n011,n012"),
    ("http_proxy=http://127.0.0.1:9 no_grpc_proxy=10.1.0.0/16", "--tf-cluster",                       "10.1.0.0/16,n011,n012"),
    ("http_proxy=http://127.0.0.1:9",                         "--tf-cluster=worker:*,grpc_proxy_bypass=no", "-"),
    ("http_proxy=http://127.0.0.1:9",                         "",                                     "-"), // no option: untouched
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn grpc_bypasses_a_proxy_for_the_cluster() {
    for (env, option, want) in PROXIES {
        let stdout = sh_ok(&format!(
            "{env} srun -w n011,n012 -N2 -n2 {option} sh -c 'echo \"P|${{no_grpc_proxy--}}\"'"
        ));
        let got: Vec<Vec<&str>> = records(&stdout, "P");
        assert_eq!(got, vec![vec![*want]; 2], "{env} srun {option}");
    }
}

/// Every task of a `keras=3,tuner=yes` step on the two GPU nodes gets exactly the JAX, Keras and
/// Keras Tuner variables the core gives its rank (with the ports Slurm reserved for the step,
/// and rank 0's coordinator bound to its address), on every release; tests/jax.rs shows the libraries reading them.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn jax_keras_and_tuner_variables_reach_every_task() {
    let spec = "chief:1,worker:*,keras=3,tuner=yes";
    let stdout = sh_ok(&format!(
        "srun -w n011,n012 -N2 -n4 --gres=gpu:4 --tf-cluster={spec} {}",
        tool("jax_env.sh")
    ));
    let tasks = records(&stdout, "V");
    assert_eq!(tasks.len(), 4, "{stdout}");
    for task in tasks {
        let [rank, job, step, ports, got] = task[..] else {
            panic!("{task:?}")
        };
        let mut inputs = common::step("n011,n012", "2(x2)", None);
        inputs.job_id = job.parse().unwrap();
        inputs.step_id = step.parse().unwrap();
        inputs.resv_ports = (ports != "-").then_some(ports);
        let mut plan = plan(spec, CLUSTER_SETTINGS, &inputs);
        // n011, rank 0's node, resolves its name to its own address, which other nodes reach.
        plan.bind_jax_coordinator(0, |_| Ok(vec![std::net::Ipv4Addr::new(10, 0, 0, 1).into()]));
        let gpus = Some("0,1,2,3");
        let mut want: Vec<String> =
            environment_running(&plan, rank.parse().unwrap(), gpus, gpus, None)
                .into_iter()
                .filter(|v| v.starts_with("JAX") || v.starts_with("KERAS"))
                .collect();
        want.sort();
        assert_eq!(got, want.join(";"), "rank {rank}");
    }
}

/// A `torch=yes` step: where it runs (before srun, srun's placement), and each rank's host and
/// exactly the PyTorch and torchrun variables it gets, sorted (`{port}`: rank 0's port of the
/// step, as its TF_CONFIG endpoint names it).
struct TorchStep {
    what: &'static str,
    before: &'static str,
    srun: &'static str,
    ranks: &'static [(&'static str, &'static str)],
}

const TORCH_HOSTFILE: &str = "torch-hostfile";

#[rustfmt::skip]
const TORCH_STEPS: &[TorchStep] = &[
    TorchStep { what: "block", before: "", srun: "-w n9,n10 -N2 -n4 --tf-cluster=worker:*,torch=yes {r}", ranks: &[
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 RANK=0 WORLD_SIZE=4"),
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 RANK=1 WORLD_SIZE=4"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 RANK=2 WORLD_SIZE=4"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 RANK=3 WORLD_SIZE=4")] },
    TorchStep { what: "cyclic", before: "", srun: "-w n9,n10 -N2 -n4 -m cyclic --tf-cluster=worker:*,torch=yes {r}", ranks: &[
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 RANK=0 WORLD_SIZE=4"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 RANK=1 WORLD_SIZE=4"),
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 RANK=2 WORLD_SIZE=4"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 RANK=3 WORLD_SIZE=4")] },
    // The host file n10,n9,n10,n9: rank 0 and node 0 on n10, the second of the step's nodes.
    TorchStep { what: "rank 0 on the second node", before: "SLURM_HOSTFILE={hostfile}", srun: "-n4 -m arbitrary --tf-cluster=worker:*,torch=yes {r}", ranks: &[
        ("n10", "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n10 MASTER_PORT={port} NODE_RANK=0 RANK=0 WORLD_SIZE=4"),
        ("n9",  "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n10 MASTER_PORT={port} NODE_RANK=1 RANK=1 WORLD_SIZE=4"),
        ("n10", "GROUP_RANK=0 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n10 MASTER_PORT={port} NODE_RANK=0 RANK=2 WORLD_SIZE=4"),
        ("n9",  "GROUP_RANK=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n10 MASTER_PORT={port} NODE_RANK=1 RANK=3 WORLD_SIZE=4")] },
    // torchrun's shape, with the job's own MASTER_ADDR and MASTER_PORT, which tfcluster's win over.
    TorchStep { what: "one task per node, the job's own MASTER_*", before: "MASTER_ADDR=n10 MASTER_PORT=1", srun: "-w n9,n10 -N2 -n2 --tf-cluster=worker:*,torch=yes {r}", ranks: &[
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 PET_MASTER_ADDR=n9 PET_MASTER_PORT={port} PET_NNODES=2 PET_NODE_RANK=0 RANK=0 WORLD_SIZE=2"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 PET_MASTER_ADDR=n9 PET_MASTER_PORT={port} PET_NNODES=2 PET_NODE_RANK=1 RANK=1 WORLD_SIZE=2")] },
    TorchStep { what: "--export=NONE", before: "", srun: "--export=NONE -w n9,n10 -N2 -n2 --tf-cluster=worker:*,torch=yes {r}", ranks: &[
        ("n9",  "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=0 PET_MASTER_ADDR=n9 PET_MASTER_PORT={port} PET_NNODES=2 PET_NODE_RANK=0 RANK=0 WORLD_SIZE=2"),
        ("n10", "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=n9 MASTER_PORT={port} NODE_RANK=1 PET_MASTER_ADDR=n9 PET_MASTER_PORT={port} PET_NNODES=2 PET_NODE_RANK=1 RANK=1 WORLD_SIZE=2")] },
    // A heterogeneous step: rank 0 on cpu2 (component 0), the node list cpu2,n9.
    TorchStep { what: "a heterogeneous step", before: "", srun: "-p cpu -w cpu2 -n1 --tf-cluster=worker:*,torch=yes {r} : -p gpu -w n9 -n2 {r}", ranks: &[
        ("cpu2", "GROUP_RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=cpu2 MASTER_PORT={port} NODE_RANK=0 RANK=0 WORLD_SIZE=3"),
        ("n9",   "GROUP_RANK=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=cpu2 MASTER_PORT={port} NODE_RANK=1 RANK=1 WORLD_SIZE=3"),
        ("n9",   "GROUP_RANK=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=cpu2 MASTER_PORT={port} NODE_RANK=1 RANK=2 WORLD_SIZE=3")] },
];

/// Every task of a `torch=yes` step gets exactly these variables, from the step's real layout,
/// on every release; tests/torch.rs shows PyTorch and torchrun meeting on them.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn torch_variables_follow_the_real_layout() {
    let hostfile = common::cluster::dir().join(TORCH_HOSTFILE);
    std::fs::write(&hostfile, "n10\nn9\nn10\nn9\n").unwrap();
    for step in TORCH_STEPS {
        let before = step
            .before
            .replace("{hostfile}", &hostfile.display().to_string());
        let srun = step.srun.replace("{r}", &tool("torch_env.sh"));
        let stdout = sh_ok(&format!("{before} srun {srun}"));
        let mut tasks = records(&stdout, "T");
        tasks.sort_by_key(|t| t[0].parse::<u32>().unwrap_or(u32::MAX));
        let rank_0 = tasks.first().map_or("", |t| t[3]);
        // {"cluster":{"worker":["HOST:PORT",...
        let port = rank_0
            .split_once("\"worker\":[\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .and_then(|(endpoint, _)| endpoint.rsplit_once(':'))
            .map_or("?", |(_, port)| port);
        let got: Vec<(&str, &str)> = tasks.iter().map(|t| (t[1], t[2])).collect();
        let want: Vec<(&str, String)> = step
            .ranks
            .iter()
            .map(|(host, vars)| (*host, vars.replace("{port}", port)))
            .collect();
        let want: Vec<(&str, &str)> = want.iter().map(|(h, v)| (*h, v.as_str())).collect();
        assert_eq!(got, want, "{}:\n{stdout}", step.what);
    }
}

/// (what, the job's environment, srun's arguments, what every task has: CUDA_DEVICE_ORDER,
/// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME, `-` when unset). Each node's one interface is
/// `eth0` (tests/cluster/cluster.sh), which holds the node's address (`=eth0` for NCCL: that
/// name exactly).
#[rustfmt::skip]
const DEFAULTED: &[(&str, &str, &str, &str)] = &[
    ("GPUs split",                 "",                                               "-w n011 -N1 -n2 --gres=gpu:4 --tf-cluster",                       "PCI_BUS_ID|=eth0|eth0"),
    ("the job's own win",          "CUDA_DEVICE_ORDER=FASTEST_FIRST NCCL_SOCKET_IFNAME=ib9", "-w n011 -N1 -n2 --gres=gpu:4 --tf-cluster",               "FASTEST_FIRST|ib9|eth0"),
    ("socket_ifname=no",           "",                                               "-w n011 -N1 -n2 --gres=gpu:4 --tf-cluster=worker:*,socket_ifname=no", "PCI_BUS_ID|-|-"),
    ("a node without GPUs",        "",                                               "-p cpu -w cpu1 -N1 -n2 --tf-cluster",                             "-|=eth0|eth0"),
    ("without the option",         "",                                               "-w n011 -N1 -n2 --gres=gpu:4",                                    "-|-|-"),
];

/// The variables tfcluster only defaults: the GPUs' order wherever it sets the GPUs, the
/// collectives' interface on every node, each unless the job sets its own; `srun -v` names the
/// interface on each node.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn gpu_order_and_the_collectives_interface() {
    for (what, env, args, want) in DEFAULTED {
        let stdout = sh_ok(&format!(
            "{env} srun {args} sh -c 'echo \"D|${{CUDA_DEVICE_ORDER--}}|${{NCCL_SOCKET_IFNAME--}}|${{GLOO_SOCKET_IFNAME--}}\"'"
        ));
        let got: Vec<String> = records(&stdout, "D").iter().map(|r| r.join("|")).collect();
        assert_eq!(got, vec![want.to_string(); 2], "{what}: srun {args}");
    }
    let run = sh(&format!(
        "srun -v -w n011,n012 -N2 -n2 --tf-cluster {}",
        tool("report.sh")
    ));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let release = release::current();
    for node in ["n011", "n012"] {
        let line = format!("tfcluster: node {node}: the collectives use eth0, which holds {node} (NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME)");
        assert!(
            release.printed(&stderr, &line),
            "expected {line:?} in:\n{stderr}"
        );
    }
}

/// `timing=yes` (for measuring): each hook's line of CPU by phase, and each of tfcluster's
/// threads' as it ends, in the node's slurmd log (slurmstepd, its tasks, the epilog) and in
/// srun's output; without it, no such line.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn timing_yes_logs_each_hooks_cpu_by_phase() {
    let log =
        || std::fs::read_to_string(common::cluster::dir().join("log/slurmd-n012.log")).unwrap();
    let timed = |line: &str| {
        let before = log().len();
        let _stack = PlugStack::set(line);
        // With ps, the workers' watcher's thread runs from the tasks' forks to the step's end.
        let run =
            sh("srun -v -w n012 -N1 -n3 --tf-cluster=chief:1,ps:1,worker:*,end_with_chief=no true");
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        // The job's epilog, once the job has ended.
        std::thread::sleep(std::time::Duration::from_secs(2));
        (
            log()[before..].to_string(),
            String::from_utf8_lossy(&run.stderr).into_owned(),
        )
    };
    let (node, srun) = timed(&format!("{} timing=yes", plugstack_line()));
    for said in [
        "tfcluster timing: slurm_spank_init_post_opt slurmstepd: ",
        " us CPU (shape ",
        // And the page faults its thread took, by the same phases.
        " faults (shape ",
        ", components ",
        ", plan ",
        ", claims ",
        "tfcluster timing: slurm_spank_task_init slurmstepd: ",
        "tfcluster timing: slurm_spank_exit slurmstepd: ",
        // A thread's whole CPU, as it ends.
        "tfcluster timing: thread_workers slurmstepd: ",
    ] {
        assert!(node.contains(said), "no {said:?} in n012's log:\n{node}");
    }
    // srun's last hook runs from exit(), after its thread's locals are gone: timed all the same,
    // and no panic caught on the way.
    for said in [
        "tfcluster timing: slurm_spank_local_user_init srun: ",
        "tfcluster timing: slurm_spank_exit srun: ",
    ] {
        assert!(srun.contains(said), "no {said:?} in srun's output:\n{srun}");
    }
    assert!(!srun.contains("internal error"), "{srun}");
    let (node, srun) = timed(&plugstack_line());
    assert!(!node.contains("tfcluster timing:"), "{node}");
    assert!(!srun.contains("tfcluster timing:"), "{srun}");
}
