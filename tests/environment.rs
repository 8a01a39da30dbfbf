//! Everything a task receives, whole: each row is a step (spec, plugstack.conf words, nodes,
//! tasks per node, the job's proxy variables, the node's CUDA_VISIBLE_DEVICES), a rank, and
//! exactly the variables `task_init` sets for it, in order, plus what it removes. The SPANK
//! shell only loops over this list, so these rows are what reaches the program.

mod common;
use common::{environment_running, place, where_is};
use tfcluster::core::container::{reaches_apptainer, Runtimes, APPTAINER_NAMES};

const NONE: Runtimes = Runtimes::NONE;
const APPTAINER: Runtimes = Runtimes {
    apptainer: true,
    singularity: false,
};
const SINGULARITY_CE: Runtimes = Runtimes {
    apptainer: false,
    singularity: true,
};
const BOTH: Runtimes = Runtimes::BOTH;
use tfcluster::core::{ProxyEnv, Settings, Spec, StepInputs, StepPlan};

struct Case {
    what: &'static str,
    spec: &'static str,
    admin: &'static [&'static str],
    nodes: &'static str,
    tasks_per_node: &'static str,
    proxies: &'static [(&'static str, &'static str)],
    gpus: Option<&'static str>,
    /// The container runtimes on the task's node.
    runtimes: Runtimes,
    /// The task's program (argv[0]); `None` for `python3`.
    program: Option<&'static str>,
    rank: u32,
    set: &'static [&'static str],
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    Case { what: "TF_CONFIG alone", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000"], nodes: "a",
           tasks_per_node: "2", proxies: &[], gpus: None, program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#] },
    Case { what: "the node's GPUs split", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000"], nodes: "a",
           tasks_per_node: "2", proxies: &[], gpus: Some("0,1,2,3"), program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#,
                  "CUDA_VISIBLE_DEVICES=2,3", "CUDA_DEVICE_ORDER=PCI_BUS_ID"] },
    Case { what: "gpus=keep: CUDA_VISIBLE_DEVICES untouched", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000", "gpus=keep"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0,1,2,3"), program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "a role kept off GPUs gets none", runtimes: NONE, spec: "chief:1,worker:*,gpu_roles=worker", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0,1"), program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"chief","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=PCI_BUS_ID"] },
    Case { what: "a proxy: gRPC bypasses it for the cluster", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "1(x2)", proxies: &[("https_proxy", "http://p:3128"), ("no_proxy", ".site")],
           gpus: None, program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","b:1000"]},"task":{"type":"worker","index":0}}"#,
                  "no_grpc_proxy=.site,a,b"] },
    Case { what: "a proxy, bypass off", runtimes: NONE, spec: "worker:*,grpc_proxy_bypass=no", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[("http_proxy", "http://p:3128")], gpus: None, program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "the address template, everywhere", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000", "address=%h-ib"],
           nodes: "a", tasks_per_node: "2", proxies: &[("http_proxy", "x")], gpus: None, program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a-ib:1000","a-ib:1001"]},"task":{"type":"worker","index":0}}"#,
                  "no_grpc_proxy=a-ib"] },
    Case { what: "DTensor", runtimes: NONE, spec: "worker:*,dtensor=yes", admin: &["port_base=1000"], nodes: "a", tasks_per_node: "2",
           proxies: &[], gpus: None, program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#,
                  "DTENSOR_JOBS=a:1000,a:1001", "DTENSOR_CLIENT_ID=1"] },
    Case { what: "everything at once", runtimes: NONE, spec: "worker:*,dtensor=yes", admin: &["port_base=1000"], nodes: "a",
           tasks_per_node: "2", proxies: &[("grpc_proxy", "x")], gpus: Some("5,7"), program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=5", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "no_grpc_proxy=a", "DTENSOR_JOBS=a:1000,a:1001", "DTENSOR_CLIENT_ID=0"] },
    Case { what: "keras=2: tf.keras is Keras 2 (tf_keras) in every task", runtimes: NONE, spec: "chief:1,worker:*,keras=2", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: None, program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"worker","index":0}}"#,
                  "TF_USE_LEGACY_KERAS=1"] },
    Case { what: "jax=yes: JAX's coordinator is rank 0, wherever it runs", runtimes: NONE, spec: "worker:*,jax=yes", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "2(x2)", proxies: &[], gpus: None, program: None, rank: 3,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001","b:1000","b:1001"]},"task":{"type":"worker","index":3}}"#,
                  "JAX_COORDINATOR_ADDRESS=a:1000"] },
    Case { what: "jax=yes with a GPU slice: JAX uses the whole slice", runtimes: NONE, spec: "worker:*,jax=yes", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0,1,2,3"), program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#,
                  "CUDA_VISIBLE_DEVICES=2,3", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "JAX_COORDINATOR_ADDRESS=a:1000", "JAX_LOCAL_DEVICE_IDS=0,1"] },
    Case { what: "jax=yes, a role kept off GPUs: no device ids", runtimes: NONE, spec: "chief:1,worker:*,gpu_roles=worker,jax=yes", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0,1"), program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"chief","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "JAX_COORDINATOR_ADDRESS=a:1000"] },
    Case { what: "keras=3: Keras's three and JAX's own", runtimes: NONE, spec: "worker:*,keras=3", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "1(x2)", proxies: &[], gpus: Some("0"), program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","b:1000"]},"task":{"type":"worker","index":1}}"#,
                  "CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "JAX_COORDINATOR_ADDRESS=a:1000", "JAX_LOCAL_DEVICE_IDS=0", "KERAS_BACKEND=jax",
                  "KERAS_DISTRIBUTION_JOB_ADDRESSES=a:1000", "KERAS_DISTRIBUTION_NUM_PROCESSES=2",
                  "KERAS_DISTRIBUTION_PROCESS_ID=1"] },
    Case { what: "torch=yes: torch's env:// variables from the real layout", runtimes: NONE, spec: "worker:*,torch=yes", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "2(x2)", proxies: &[], gpus: None, program: None, rank: 3,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001","b:1000","b:1001"]},"task":{"type":"worker","index":3}}"#,
                  "MASTER_ADDR=a", "MASTER_PORT=1000", "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                  "GROUP_RANK=1", "NODE_RANK=1"] },
    Case { what: "torch=yes, one task per node: torchrun's flags too, the node's GPUs", runtimes: NONE, spec: "worker:*,torch=yes",
           admin: &["port_base=1000", "address=%h-ib"], nodes: "a,b", tasks_per_node: "1(x2)", proxies: &[], gpus: Some("0,1"), program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a-ib:1000","b-ib:1000"]},"task":{"type":"worker","index":1}}"#,
                  "CUDA_VISIBLE_DEVICES=0,1", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "MASTER_ADDR=a-ib", "MASTER_PORT=1000", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0",
                  "LOCAL_WORLD_SIZE=1", "GROUP_RANK=1", "NODE_RANK=1", "PET_NNODES=2", "PET_NODE_RANK=1",
                  "PET_MASTER_ADDR=a-ib", "PET_MASTER_PORT=1000"] },
    Case { what: "tuner=yes: the chief is the oracle", runtimes: NONE, spec: "chief:1,worker:*,tuner=yes", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "2(x2)", proxies: &[], gpus: None, program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001","b:1000","b:1001"]},"task":{"type":"chief","index":0}}"#,
                  "KERASTUNER_TUNER_ID=chief", "KERASTUNER_ORACLE_IP=a", "KERASTUNER_ORACLE_PORT=1000"] },
    Case { what: "tuner=yes: the others are tuners in rank order", runtimes: NONE, spec: "chief:1,worker:*,tuner=yes", admin: &["port_base=1000"],
           nodes: "a,b", tasks_per_node: "2(x2)", proxies: &[], gpus: None, program: None, rank: 3,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001","b:1000","b:1001"]},"task":{"type":"worker","index":2}}"#,
                  "KERASTUNER_TUNER_ID=tuner2", "KERASTUNER_ORACLE_IP=a", "KERASTUNER_ORACLE_PORT=1000"] },
    Case { what: "tuner=yes with Apptainer: every name twice", runtimes: APPTAINER, spec: "chief:1,worker:*,tuner=yes,keras=3", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: None, program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"worker","index":0}}"#,
                  "JAX_COORDINATOR_ADDRESS=a:1000", "KERAS_BACKEND=jax", "KERAS_DISTRIBUTION_JOB_ADDRESSES=a:1000",
                  "KERAS_DISTRIBUTION_NUM_PROCESSES=2", "KERAS_DISTRIBUTION_PROCESS_ID=1",
                  "KERASTUNER_TUNER_ID=tuner0", "KERASTUNER_ORACLE_IP=a", "KERASTUNER_ORACLE_PORT=1000",
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"worker","index":0}}"#,
                  "APPTAINERENV_JAX_COORDINATOR_ADDRESS=a:1000", "APPTAINERENV_KERAS_BACKEND=jax",
                  "APPTAINERENV_KERAS_DISTRIBUTION_JOB_ADDRESSES=a:1000",
                  "APPTAINERENV_KERAS_DISTRIBUTION_NUM_PROCESSES=2", "APPTAINERENV_KERAS_DISTRIBUTION_PROCESS_ID=1",
                  "APPTAINERENV_KERASTUNER_TUNER_ID=tuner0", "APPTAINERENV_KERASTUNER_ORACLE_IP=a",
                  "APPTAINERENV_KERASTUNER_ORACLE_PORT=1000"] },
    Case { what: "keras=2 in plugstack.conf, keras=auto for this job", runtimes: NONE, spec: "worker:*,keras=auto", admin: &["port_base=1000", "keras=2"],
           nodes: "a", tasks_per_node: "1", proxies: &[], gpus: None, program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "the evaluator's own cluster", runtimes: NONE, spec: "chief:1,evaluator:1", admin: &["port_base=1000"], nodes: "a",
           tasks_per_node: "2", proxies: &[], gpus: None, program: None, rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"evaluator":["a:1001"]},"task":{"type":"evaluator","index":0}}"#] },
    // Apptainer and SingularityCE: every variable again under the names the node's runtimes
    // read, which reach the program through --cleanenv/--containall and win over the image's
    // definitions; nothing more on a node with neither.
    Case { what: "Apptainer on the node: each variable under its name too", runtimes: APPTAINER, spec: "worker:*", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0,1,2,3"), program: Some("/usr/bin/apptainer"), rank: 1,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#,
                  "CUDA_VISIBLE_DEVICES=2,3", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"worker":["a:1000","a:1001"]},"task":{"type":"worker","index":1}}"#,
                  "APPTAINERENV_CUDA_VISIBLE_DEVICES=2,3", "APPTAINERENV_CUDA_DEVICE_ORDER=PCI_BUS_ID"] },
    Case { what: "SingularityCE on the node, with every variable", runtimes: SINGULARITY_CE, spec: "worker:*,dtensor=yes,keras=2", admin: &["port_base=1000"], nodes: "a",
           tasks_per_node: "1", proxies: &[("http_proxy", "x")], gpus: None, program: Some("singularity"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  "no_grpc_proxy=a", "DTENSOR_JOBS=a:1000", "DTENSOR_CLIENT_ID=0", "TF_USE_LEGACY_KERAS=1",
                  r#"SINGULARITYENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  "SINGULARITYENV_no_grpc_proxy=a", "SINGULARITYENV_DTENSOR_JOBS=a:1000",
                  "SINGULARITYENV_DTENSOR_CLIENT_ID=0", "SINGULARITYENV_TF_USE_LEGACY_KERAS=1"] },
    Case { what: "both runtimes on the node: both names", runtimes: BOTH, spec: "chief:1,worker:*,gpu_roles=worker",
           admin: &["port_base=1000"], nodes: "a", tasks_per_node: "2", proxies: &[], gpus: Some("0"),
           program: Some("apptainer"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"chief","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"chief","index":0}}"#,
                  r#"SINGULARITYENV_TF_CONFIG={"cluster":{"chief":["a:1000"],"worker":["a:1001"]},"task":{"type":"chief","index":0}}"#,
                  "APPTAINERENV_CUDA_VISIBLE_DEVICES=", "SINGULARITYENV_CUDA_VISIBLE_DEVICES=", "APPTAINERENV_CUDA_DEVICE_ORDER=PCI_BUS_ID", "SINGULARITYENV_CUDA_DEVICE_ORDER=PCI_BUS_ID"] },
    Case { what: "apptainer_env=no: apptainer gets the plain variables only", runtimes: APPTAINER, spec: "worker:*,apptainer_env=no",
           admin: &["port_base=1000"], nodes: "a", tasks_per_node: "1", proxies: &[], gpus: None,
           program: Some("/usr/bin/apptainer"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "the default: a wrapper script that starts apptainer gets its names too", runtimes: APPTAINER, spec: "worker:*", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "1", proxies: &[], gpus: None, program: Some("./run-in-image.sh"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "the default, python itself: the names too (it may start apptainer later)", runtimes: APPTAINER, spec: "worker:*,keras=2", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "1", proxies: &[], gpus: Some("0"), program: None, rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "TF_USE_LEGACY_KERAS=1",
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  "APPTAINERENV_CUDA_VISIBLE_DEVICES=0", "APPTAINERENV_CUDA_DEVICE_ORDER=PCI_BUS_ID", "APPTAINERENV_TF_USE_LEGACY_KERAS=1"] },
    Case { what: "the default, no runtime on the node: nothing more, even for a program named apptainer", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "1", proxies: &[], gpus: Some("0"), program: Some("/opt/site/bin/apptainer"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  "CUDA_VISIBLE_DEVICES=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID"] },
    Case { what: "always: both names where no runtime was found", runtimes: NONE, spec: "worker:*,apptainer_env=always", admin: &["port_base=1000"],
           nodes: "a", tasks_per_node: "1", proxies: &[], gpus: None, program: Some("./run-in-image.sh"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  r#"SINGULARITYENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "auto: the program apptainer gets both names", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000", "apptainer_env=auto"], nodes: "a",
           tasks_per_node: "1", proxies: &[], gpus: None, program: Some("/opt/site/bin/apptainer"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  r#"APPTAINERENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#,
                  r#"SINGULARITYENV_TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
    Case { what: "auto: a program only named like it", runtimes: NONE, spec: "worker:*", admin: &["port_base=1000", "apptainer_env=auto"], nodes: "a",
           tasks_per_node: "1", proxies: &[], gpus: None, program: Some("/opt/apptainer/bin/train"), rank: 0,
           set: &[r#"TF_CONFIG={"cluster":{"worker":["a:1000"]},"task":{"type":"worker","index":0}}"#] },
];

/// The `NAME=value` strings the case's task gets, in order.
fn received(case: &Case) -> Vec<String> {
    let spec = Spec::parse(Some(case.spec)).unwrap();
    let admin = Settings::from_plugstack(case.admin).unwrap();
    let step = StepInputs {
        nodelist: case.nodes,
        tasks_per_node: case.tasks_per_node,
        proxies: ProxyEnv::from_pairs(case.proxies),
        job_id: 7,
        ..Default::default()
    };
    let mut plan = StepPlan::new(&spec, &admin, &step).unwrap();
    plan.find_runtimes(|| case.runtimes);
    let program = case.program.unwrap_or("python3");
    environment_running(&plan, case.rank, case.gpus, case.gpus, Some(program))
}

#[test]
fn each_task_gets_exactly_these_variables() {
    for case in CASES {
        assert_eq!(received(case), case.set, "{}", case.what);
    }
}

/// What a task loses: srun's hand-over of the `-m arbitrary` task order is not for the program.
#[test]
fn the_task_order_hand_over_is_removed() {
    let spec = Spec::parse(Some("worker:*")).unwrap();
    #[rustfmt::skip]
    let cases: &[(Option<&str>, Option<&str>, &[&str])] = &[
        (None,              None,            &[]),
        (Some("arbitrary"), Some("b,a,b"),   &["SLURM_TFCLUSTER_TASK_HOSTS"]),
    ];
    for (dist, order, unset) in cases {
        let step = StepInputs {
            nodelist: "a,b",
            tasks_per_node: "1,2",
            distribution: *dist,
            task_hosts: *order,
            ..Default::default()
        };
        let plan = StepPlan::new(&spec, &Settings::default(), &step).unwrap();
        let (node, slot) = where_is(&plan, 0);
        let mut renderers = plan.renderers();
        let env = plan
            .task(
                &place(&plan, node, None),
                slot,
                None,
                None,
                &|_| false,
                None,
                &mut renderers,
            )
            .unwrap();
        assert_eq!(env.unset, *unset, "{dist:?}");
    }
}

/// Every variable any row's task gets has Apptainer's names (or is one): a variable missing from
/// `APPTAINER_NAMES` would not reach a program under `--cleanenv`, and no row would show it.
#[test]
fn every_variable_a_task_gets_has_apptainer_names() {
    for case in CASES {
        for variable in received(case) {
            let name = variable.split_once('=').unwrap().0;
            assert!(
                reaches_apptainer(name),
                "{}: {name} has no Apptainer names: add it to APPTAINER_NAMES",
                case.what
            );
        }
    }
}

/// The Apptainer names are the runtimes' documented prefixes and the variable's own name.
#[test]
fn apptainer_names_are_the_prefixed_names() {
    for (name, names) in APPTAINER_NAMES {
        assert_eq!(
            names.map(String::from),
            [
                format!("APPTAINERENV_{name}"),
                format!("SINGULARITYENV_{name}")
            ]
        );
    }
}

/// (what, the names the job's environment sets itself, the variables tfcluster only defaults
/// that the task gets): each gives way to the job's own, by itself. The node `a` resolves its
/// address to 10.1.0.9, which its interface `ib0` holds.
#[rustfmt::skip]
const DEFAULTS: &[(&str, &[&str], &[&str])] = &[
    ("none of its own",     &[],                     &["CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_SOCKET_IFNAME==ib0", "GLOO_SOCKET_IFNAME=ib0"]),
    ("its own GPU order",   &["CUDA_DEVICE_ORDER"],  &["NCCL_SOCKET_IFNAME==ib0", "GLOO_SOCKET_IFNAME=ib0"]),
    ("its own NCCL",        &["NCCL_SOCKET_IFNAME"], &["CUDA_DEVICE_ORDER=PCI_BUS_ID", "GLOO_SOCKET_IFNAME=ib0"]),
    ("its own gloo",        &["GLOO_SOCKET_IFNAME"], &["CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_SOCKET_IFNAME==ib0"]),
];

#[test]
fn the_gpu_order_and_the_collectives_interface_give_way_to_the_jobs_own() {
    let step = StepInputs {
        nodelist: "a",
        tasks_per_node: "1",
        job_id: 7,
        ..Default::default()
    };
    let mut plan = common::plan("worker:*", &["port_base=1000"], &step);
    let interfaces = || {
        vec![
            ("lo".to_string(), "127.0.0.1".parse().unwrap()),
            ("ib0".to_string(), "10.1.0.9".parse().unwrap()),
        ]
    };
    let note =
        plan.find_collectives_interface(0, |_| Ok(vec!["10.1.0.9".parse().unwrap()]), interfaces);
    assert_eq!(
        note.as_deref(),
        Some("node a: the collectives use ib0, which holds a (NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME)")
    );
    for (what, own, want) in DEFAULTS {
        let mut renderers = plan.renderers();
        let env = plan
            .task(
                &place(&plan, 0, Some("0")),
                0,
                Some("0"),
                None,
                &|name| own.contains(&name),
                None,
                &mut renderers,
            )
            .unwrap();
        let got: Vec<String> = env
            .set
            .iter()
            .filter(|(name, _)| tfcluster::core::plan::DEFAULTED.contains(name))
            .map(|(name, value)| format!("{name}={}", value.trim_end_matches('\0')))
            .collect();
        assert_eq!(got, *want, "{what}");
    }
}

/// (what, spec, tasks on the node, a local task, whether its TF_CONFIG is rendered in the
/// first task's buffer)
#[rustfmt::skip]
const HEADS: &[(&str, &str, u32, usize, bool)] = &[
    ("the first task itself",          "chief:1,worker:*",             4, 0, true),
    ("a worker after the chief",       "chief:1,worker:*",             4, 1, true),
    ("a ps after the chief",           "chief:1,ps:1,worker:*",        4, 1, true),
    ("a worker of index 10",           "chief:1,worker:*",             12, 11, true),
    ("the evaluator: its own cluster", "chief:1,worker:2,evaluator:1", 4, 1, false),
];

/// A task's TF_CONFIG starts with its head: every byte before the task's own part, the same in
/// every TF_CONFIG rendered in the node's same buffer, and so in the first task's, which each
/// task rewrites its copy of from the head on (`rewrite` in src/core/env_entries.rs). Its
/// Apptainer copies share that head; no other value has one. The evaluator's TF_CONFIG, whose
/// cluster is its own, is rendered in a buffer of its own.
#[test]
fn a_tasks_tf_config_shares_its_head_with_every_tf_config_of_its_buffer() {
    let tf = "TF_CONFIG";
    for &(what, spec, tasks, local, shared) in HEADS {
        let step = StepInputs {
            nodelist: "a",
            tasks_per_node: Box::leak(tasks.to_string().into_boxed_str()),
            job_id: 7,
            ..Default::default()
        };
        let plan = common::plan(spec, &["port_base=1000", "apptainer_env=always"], &step);
        let place = place(&plan, 0, None);
        let mut renderers = plan.renderers();
        let mut task = |local: usize| {
            let env = plan
                .task(&place, local, None, None, &|_| false, None, &mut renderers)
                .unwrap();
            let value = env.get(tf).unwrap().to_string();
            let heads: Vec<(&str, usize)> = env
                .set
                .iter()
                .map(|(name, value)| (*name, env.head_of(value)))
                .collect();
            let at = env.set.iter().find(|(n, _)| *n == tf).unwrap().1.as_ptr() as usize;
            (value, env.tf_config_head, at, heads)
        };
        let (first, first_head, first_at, _) = task(0);
        let (value, head, at, heads) = task(local);
        assert_eq!(
            at == first_at,
            shared,
            "{what}: rendered in the first task's buffer"
        );
        assert_eq!(
            value.contains(r#""type":"evaluator""#),
            !shared,
            "{what}: {value}"
        );
        assert!(
            value[..head].ends_with(r#","task":{"type":"#),
            "{what}: the head ends where the task's own part begins: {}",
            &value[head.saturating_sub(40)..]
        );
        if shared {
            assert_eq!(
                (head, &value[..head]),
                (first_head, &first[..first_head]),
                "{what}"
            );
        }
        for (name, name_head) in heads {
            let copy = name == tf || name.ends_with("_TF_CONFIG");
            let want = if copy { head } else { 0 };
            assert_eq!(name_head, want, "{what}: {name}");
        }
    }
}
