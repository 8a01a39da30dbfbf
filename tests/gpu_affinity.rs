//! Each task's GPUs follow the hardware (`gpus=split`, [`tfcluster::core::gpu_affinity`]): a
//! node's PCI tree written for the purpose (which GPU sits near which CPUs), Slurm's binding of
//! the node's tasks, and exactly the `CUDA_VISIBLE_DEVICES` each task of the node receives, with
//! why its slice is contiguous where it is. Then the same on the test cluster with two-socket
//! nodes (`TFC_SOCKETS=2` in tests/cluster/cluster.sh: Slurm binds the tasks, gres.conf's
//! `Cores=` and the node's PCI tree agree on where the GPUs sit), against Slurm's own
//! `--gpu-bind=closest`.

mod common;
use common::cluster::{parse, sh, summary, tool, Run};
use common::{place, plan, step, where_is};
use std::path::Path;
use tfcluster::core::gpu_affinity::{
    node_gpu_cpus, pci_gpus, Basis, Contiguous, CpuSet, Hardware, PciGpus, TaskCpus, NVIDIA_DRIVER,
    NVIDIA_GPUS, PCI_DEVICES,
};
use tfcluster::core::topology::ConfFile;
use tfcluster::core::GpuAction;

/// One PCI device: its address, vendor, class, local CPUs (`None`: the kernel gives none), and
/// what NVIDIA's driver says of it (UUID, device minor; `None`: no driver file).
type Device = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<(&'static str, u32)>,
);

const GPU: &str = "0x030200";
const VGA: &str = "0x030000";
const NV: &str = "0x10de";

/// Two sockets of 8 CPUs, GPUs 0-1 on the first, 2-3 on the second, and a network card.
#[rustfmt::skip]
const TWO_SOCKETS: &[Device] = &[
    ("0000:3d:00.0", NV,       GPU,        Some("0-7"),  None),
    ("0000:1a:00.0", NV,       GPU,        Some("0-7"),  None),
    ("0000:5e:00.0", "0x8086", "0x020000", Some("0-7"),  None),
    ("0000:b2:00.0", NV,       GPU,        Some("8-15"), None),
    ("0000:89:00.0", NV,       GPU,        Some("8-15"), None),
];
/// Eight NUMA nodes of 4 CPUs; the GPUs, in bus order, on NUMA nodes 3, 1, 7 and 5.
#[rustfmt::skip]
const NON_MONOTONIC: &[Device] = &[
    ("0000:07:00.0", NV, GPU, Some("12-15"), None),
    ("0000:0f:00.0", NV, GPU, Some("4-7"),   None),
    ("0000:47:00.0", NV, GPU, Some("28-31"), None),
    ("0000:4e:00.0", NV, GPU, Some("20-23"), None),
];
/// Eight GPUs, four on each socket of 16 CPUs.
#[rustfmt::skip]
const EIGHT: &[Device] = &[
    ("0000:18:00.0", NV, GPU, Some("0-15"),  None), ("0000:2a:00.0", NV, GPU, Some("0-15"),  None),
    ("0000:3a:00.0", NV, GPU, Some("0-15"),  None), ("0000:5d:00.0", NV, GPU, Some("0-15"),  None),
    ("0000:9a:00.0", NV, GPU, Some("16-31"), None), ("0000:ab:00.0", NV, GPU, Some("16-31"), None),
    ("0000:ba:00.0", NV, GPU, Some("16-31"), None), ("0000:db:00.0", NV, GPU, Some("16-31"), None),
];
/// Mixed models: a display-class NVIDIA GPU, another vendor's GPU (not Slurm's), a 3D-class one;
/// the driver gives UUIDs and minors in bus order.
#[rustfmt::skip]
const MIXED: &[Device] = &[
    ("0000:01:00.0", NV,       VGA, Some("0-7"),  Some(("GPU-aaaa", 0))),
    ("0000:02:00.0", "0x1002", VGA, Some("0-7"),  None),
    ("0000:81:00.0", NV,       GPU, Some("8-15"), Some(("GPU-bbbb", 1))),
];
/// The driver's minors against the bus order: Slurm's numbering depends on gres.conf.
#[rustfmt::skip]
const MINORS_SWAPPED: &[Device] = &[
    ("0000:01:00.0", NV, GPU, Some("0-7"),  Some(("GPU-aaaa", 1))),
    ("0000:81:00.0", NV, GPU, Some("8-15"), Some(("GPU-bbbb", 0))),
];
/// A network card alone.
const NO_GPU: &[Device] = &[("0000:5e:00.0", "0x8086", "0x020000", Some("0-7"), None)];
/// A kernel that gives no local CPUs for the second GPU.
#[rustfmt::skip]
const NO_LOCAL_CPUS: &[Device] = &[
    ("0000:01:00.0", NV, GPU, Some("0-7"), None),
    ("0000:81:00.0", NV, GPU, None,        None),
];

/// The node's GPUs as the shell would find them in `tree` (`None`: no PCI tree at all), where
/// NVIDIA's driver is not loaded.
fn node(tree: Option<&[Device]>) -> Result<PciGpus, Contiguous> {
    node_with_driver(tree, None)
}

/// The same, where NVIDIA's driver lists `driven` among its files.
fn node_with_driver(
    tree: Option<&[Device]>,
    driven: Option<&[&str]>,
) -> Result<PciGpus, Contiguous> {
    let list = |dir: &Path| match (tree, driven) {
        (Some(tree), _) if dir == Path::new(PCI_DEVICES) => {
            Ok(tree.iter().map(|d| d.0.to_string()).collect())
        }
        (_, Some(driven)) if dir == Path::new(NVIDIA_DRIVER) => {
            Ok(driven.iter().map(|d| d.to_string()).collect())
        }
        _ => Err("No such file or directory (os error 2)".to_string()),
    };
    let read = |path: &Path| {
        let text = path.to_str().unwrap();
        for &(address, vendor, class, cpus, driver) in tree.unwrap_or_default() {
            let file = |name: &str| format!("{PCI_DEVICES}/{address}/{name}");
            let value = match text {
                t if t == file("vendor") => Some(vendor.to_string()),
                t if t == file("class") => Some(class.to_string()),
                t if t == file("local_cpulist") => cpus.map(str::to_string),
                t if t == format!("{NVIDIA_GPUS}/{address}/information") => {
                    driver.map(|(uuid, minor)| {
                        format!("Model: \t\t A100\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n")
                    })
                }
                _ => continue,
            };
            return value.map_or(ConfFile::Missing, |v| ConfFile::Text(v + "\n"));
        }
        ConfFile::Missing
    };
    pci_gpus(list, read)
}

/// A node's step: its tasks' roles and GPUs, Slurm's binding, and what each task gets.
struct Row {
    what: &'static str,
    tree: Option<&'static [Device]>,
    spec: &'static str,
    tasks: u32,
    /// The step's `CUDA_VISIBLE_DEVICES` on the node, and `SLURM_STEP_GPUS`.
    gpus: &'static str,
    global: Option<&'static str>,
    /// `SLURM_CPU_BIND_TYPE` and `SLURM_CPU_BIND_LIST`.
    bind: (&'static str, &'static str),
    /// Each task's own CPUs, where they are not its entry of the list.
    own: Option<&'static str>,
    /// Each local task's `CUDA_VISIBLE_DEVICES`, space-separated (`-`: none).
    get: &'static str,
    /// Why the slices are contiguous (`""`: they are the closest).
    why: &'static str,
}

const MASKS_CYCLIC: (&str, &str) = ("mask_cpu:", "0x1,0x100,0x2,0x200");

#[rustfmt::skip]
const ROWS: &[Row] = &[
    Row { what: "block:cyclic: sockets 0,1,0,1, each task its socket's GPU", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 4,
          gpus: "0,1,2,3", global: None, bind: MASKS_CYCLIC, own: None, get: "0 2 1 3", why: "" },
    Row { what: "block:block: sockets 0,0,1,1, the same as contiguous", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 4,
          gpus: "0,1,2,3", global: None, bind: ("mask_cpu:", "0x1,0x2,0x100,0x200"), own: None, get: "0 1 2 3", why: "" },
    Row { what: "two tasks, two GPUs each, bound the other way round", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "2,3 0,1", why: "" },
    Row { what: "a task over both sockets takes the first free ones", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("mask_cpu:", "0xffff,0x100"), own: None, get: "0,1 2,3", why: "" },
    Row { what: "ConstrainDevices: local tokens, the node's indices in SLURM_STEP_GPUS", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1", global: Some("1,2"), bind: ("mask_cpu:", "0x100,0x1"), own: None, get: "1 0", why: "" },
    Row { what: "GPUs on NUMA nodes 3,1,7,5", tree: Some(NON_MONOTONIC), spec: "worker:*", tasks: 4,
          gpus: "0,1,2,3", global: None, bind: ("mask_cpu:", "0xf0,0xf000,0xf00000,0xf0000000"), own: None, get: "1 0 3 2", why: "" },
    Row { what: "eight GPUs, four tasks cyclic over two sockets", tree: Some(EIGHT), spec: "worker:*", tasks: 4,
          gpus: "0,1,2,3,4,5,6,7", global: None, bind: ("mask_cpu:", "0x1,0x10000,0x2,0x20000"), own: None, get: "0,1 4,5 2,3 6,7", why: "" },
    Row { what: "a ps outside gpu_roles: the workers share the GPUs", tree: Some(TWO_SOCKETS), spec: "ps:1,worker:*,gpu_roles=worker", tasks: 3,
          gpus: "0,1,2,3", global: None, bind: ("mask_cpu:", "0x1,0x100,0x1"), own: None, get: "- 2,3 0,1", why: "" },
    Row { what: "mixed models: UUID tokens, another vendor's GPU left out", tree: Some(MIXED), spec: "worker:*", tasks: 2,
          gpus: "GPU-aaaa,GPU-bbbb", global: None, bind: ("map_cpu:", "9,1"), own: None, get: "GPU-bbbb GPU-aaaa", why: "" },
    Row { what: "mixed models: index tokens", tree: Some(MIXED), spec: "worker:*", tasks: 2,
          gpus: "0,1", global: None, bind: ("map_cpu:", "9,1"), own: None, get: "1 0", why: "" },
    // Where the node or Slurm does not say: contiguous, and why.
    Row { what: "no PCI tree", tree: None, spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "0,1 2,3",
          why: "the node's PCI devices cannot be listed (/sys/bus/pci/devices: No such file or directory (os error 2))" },
    Row { what: "a PCI tree without NVIDIA GPUs", tree: Some(NO_GPU), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "0,1 2,3",
          why: "/sys/bus/pci/devices shows no NVIDIA GPU" },
    Row { what: "minors out of bus order", tree: Some(MINORS_SWAPPED), spec: "worker:*", tasks: 2,
          gpus: "0,1", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "0 1",
          why: "the driver's device minors are not in PCI bus order, so Slurm's numbering depends on gres.conf (AutoDetect=nvml numbers by bus)" },
    Row { what: "no local CPUs for a GPU", tree: Some(NO_LOCAL_CPUS), spec: "worker:*", tasks: 2,
          gpus: "0,1", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "0 1",
          why: "the kernel gives no local CPUs for GPU 1 (0000:81:00.0)" },
    Row { what: "an index beyond the node's GPUs", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,4", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "0 4",
          why: "GPU 4 is not one of the 4 NVIDIA GPUs /sys/bus/pci/devices shows" },
    Row { what: "a UUID the driver does not give", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "GPU-aaaa,GPU-bbbb", global: None, bind: ("map_cpu:", "8,0"), own: None, get: "GPU-aaaa GPU-bbbb",
          why: "GPU GPU-aaaa is not one of the 4 NVIDIA GPUs /sys/bus/pci/devices shows" },
    Row { what: "--cpu-bind=none", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("none", ""), own: Some("0-15"), get: "0,1 2,3",
          why: "Slurm bound the tasks to no CPUs (SLURM_CPU_BIND_TYPE=none)" },
    Row { what: "bound by NUMA domain", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("map_ldom:", "1,0"), own: Some("0-15"), get: "0,1 2,3",
          why: "Slurm bound the tasks to no CPUs (SLURM_CPU_BIND_TYPE=map_ldom:)" },
    Row { what: "a list that is not the tasks' CPUs", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("map_cpu:", "8,0"), own: Some("0-15"), get: "0,1 2,3",
          why: "SLURM_CPU_BIND_LIST gives local task 0 CPUs 8, and it runs on CPUs 0-15" },
    Row { what: "a list that is no list", tree: Some(TWO_SOCKETS), spec: "worker:*", tasks: 2,
          gpus: "0,1,2,3", global: None, bind: ("mask_cpu:", "0x1,zz"), own: Some("0"), get: "0,1 2,3",
          why: "SLURM_CPU_BIND_LIST=0x1,zz is not a list of CPUs" },
];

/// A task's own CPUs: its entry of the list (Slurm gives task i entry i, cycling), or `own`.
fn own_cpus(row: &Row, local: usize) -> CpuSet {
    if let Some(own) = row.own {
        return CpuSet::parse_list(own).unwrap();
    }
    let entries: Vec<&str> = row.bind.1.split(',').collect();
    let entry = entries[local % entries.len()];
    match row.bind.0 {
        "mask_cpu:" => CpuSet::parse_mask(entry).unwrap(),
        _ => CpuSet::parse_list(entry).unwrap(),
    }
}

#[test]
fn each_task_gets_the_gpus_closest_to_its_cpus() {
    for row in ROWS {
        // Once per node, before the tasks fork.
        let gpu_cpus = node_gpu_cpus(node(row.tree), row.gpus, row.global);
        let plan = plan(
            row.spec,
            &["port_base=1000"],
            &step("a", &row.tasks.to_string(), None),
        );
        let place = place(&plan, 0, Some(row.gpus));
        let mut got = Vec::new();
        let mut why = None;
        for rank in 0..row.tasks {
            let (node, slot) = where_is(&plan, rank);
            assert_eq!(node, 0);
            let cpus = TaskCpus {
                bind_type: Some(row.bind.0.to_string()),
                list: Some(row.bind.1.to_string()),
                own: Some(own_cpus(row, slot)),
                local: slot,
            };
            let hardware = Hardware {
                gpu_cpus: &gpu_cpus,
                cpus: &cpus,
                slots: &place.slots,
            };
            let mut renderers = plan.renderers();
            let env = plan
                .task(
                    &place,
                    slot,
                    Some(row.gpus),
                    None,
                    &|_| false,
                    Some(hardware),
                    &mut renderers,
                )
                .unwrap();
            got.push(match &env.gpus {
                GpuAction::Set(v) if v.is_empty() => "-".to_string(),
                GpuAction::Set(v) => v.clone(),
                GpuAction::Leave => "leave".to_string(),
            });
            // The first GPU task's reason (each task checks its own CPUs).
            match (&why, &env.gpu_basis) {
                (None, Some(Basis::Affinity)) => why = Some(String::new()),
                (None, Some(Basis::Contiguous(reason))) => why = Some(reason.to_string()),
                _ => {}
            }
        }
        assert_eq!(got.join(" "), row.get, "{}", row.what);
        assert_eq!(why.as_deref(), Some(row.why), "{}", row.what);
    }
}

/// Where NVIDIA's driver is loaded, the devices it drives are the ones looked at (a node lists
/// a few hundred others); its own files in that directory are no device.
#[test]
fn where_the_driver_is_loaded_its_devices_are_the_gpus_looked_at() {
    let driven = ["bind", "module", "new_id", "0000:b2:00.0", "0000:3d:00.0"];
    let addresses = |pci: Result<PciGpus, Contiguous>| -> Vec<String> {
        pci.unwrap().0.into_iter().map(|g| g.address).collect()
    };
    assert_eq!(
        addresses(node_with_driver(Some(TWO_SOCKETS), Some(&driven))),
        ["0000:3d:00.0", "0000:b2:00.0"]
    );
    assert_eq!(
        addresses(node(Some(TWO_SOCKETS))),
        [
            "0000:1a:00.0",
            "0000:3d:00.0",
            "0000:89:00.0",
            "0000:b2:00.0"
        ]
    );
}

/// Local task 0 of two on a two-socket node bound `map_cpu:8,0`, whose node matched
/// `node_tokens` to its PCI tree before the tasks forked: its GPUs given its own list
/// `task_gpus` (the node's list is `0,1,2,3`), and the `srun -v` line about them on node `a`.
fn first_of_two(node_tokens: &str, task_gpus: &str) -> (GpuAction, Option<String>) {
    let gpu_cpus = node_gpu_cpus(node(Some(TWO_SOCKETS)), node_tokens, None);
    let plan = plan("worker:*", &["port_base=1000"], &step("a", "2", None));
    let place = place(&plan, 0, Some("0,1,2,3"));
    let cpus = TaskCpus {
        bind_type: Some("map_cpu:".into()),
        list: Some("8,0".into()),
        own: CpuSet::parse_list("8"),
        local: 0,
    };
    let hardware = Hardware {
        gpu_cpus: &gpu_cpus,
        cpus: &cpus,
        slots: &place.slots,
    };
    let mut renderers = plan.renderers();
    let env = plan
        .task(
            &place,
            0,
            Some(task_gpus),
            None,
            &|_| false,
            Some(hardware),
            &mut renderers,
        )
        .unwrap();
    (env.gpus, env.gpu_basis.map(|b| b.line("a", 0)))
}

/// Slurm's own per-task binding (`--gpu-bind`, `--gpus-per-task`) stays: the task's list is
/// no longer the node's, and tfcluster leaves it.
#[test]
fn slurms_own_per_task_binding_is_kept() {
    assert_eq!(first_of_two("0,1,2,3", "0,1"), (GpuAction::Leave, None));
}

/// The CPU lists and masks the kernel and Slurm write: (text, as a list, as a mask).
#[rustfmt::skip]
const CPU_TEXTS: &[(&str, Option<&str>, Option<&str>)] = &[
    ("0-3,8-11",   Some("0-3,8-11"), None),
    ("0xf0f",      None,             Some("0-3,8-11")),
    ("F",          None,             Some("0-3")),
    ("5",          Some("5"),        Some("0,2")),
    ("",           Some(""),         None),
    ("3-1",        None,             None),
    ("0-99999",    None,             None),
    ("0x",         None,             None),
];

#[test]
fn cpu_lists_and_masks_read_as_the_kernel_and_slurm_write_them() {
    for &(text, list, mask) in CPU_TEXTS {
        assert_eq!(
            CpuSet::parse_list(text).map(|s| s.to_string()).as_deref(),
            list,
            "list {text:?}"
        );
        assert_eq!(
            CpuSet::parse_mask(text).map(|s| s.to_string()).as_deref(),
            mask,
            "mask {text:?}"
        );
    }
}

/// A step on the two-socket nodes n9 and n10 (2 tasks on each): its srun options, each
/// rank's GPUs (space-separated), and the end of each task's `srun -v` line about them.
#[rustfmt::skip]
const ON_THE_CLUSTER: &[(&str, &str, &str)] = &[
    ("-m block:cyclic",                 "0,1 2,3 0,1 2,3", "GPUs are the closest to its CPUs"),
    ("-m block:block",                  "0,1 2,3 0,1 2,3", "GPUs are the closest to its CPUs"),
    ("--cpu-bind=map_cpu:1,0",          "2,3 0,1 2,3 0,1", "GPUs are the closest to its CPUs"),
    ("--cpu-bind=mask_cpu:0x2,0x1",     "2,3 0,1 2,3 0,1", "GPUs are the closest to its CPUs"),
    ("--cpu-bind=none",                 "0,1 2,3 0,1 2,3", "GPUs are a contiguous slice: Slurm bound the tasks to no CPUs (SLURM_CPU_BIND_TYPE=none)"),
];

fn step_on_two_sockets(options: &str) -> Run {
    parse(sh(&format!(
        "srun -v -w n9,n10 -N2 -n4 --gres=gpu:4 {options} --tf-cluster {}",
        tool("report.sh")
    )))
}

#[test]
#[ignore = "needs the two-socket test cluster: run tests/run.sh"]
fn on_two_socket_nodes_each_task_gets_its_sockets_gpus() {
    for &(options, gpus, line) in ON_THE_CLUSTER {
        let run = step_on_two_sockets(options);
        summary(&run, options);
        assert_eq!(run.code, 0, "{options}: {}", run.stderr);
        let got: Vec<&str> = run.tasks.iter().map(|t| t.gpus.as_str()).collect();
        assert_eq!(got.join(" "), gpus, "{options}: {}", run.stderr);
        for task in &run.tasks {
            let said = format!("rank {}'s {line}", task.rank);
            assert!(
                run.stderr.contains(&said),
                "{options}: no {said:?} in:\n{}",
                run.stderr
            );
        }
    }
}

/// Where Slurm binds the tasks, each task's slice is what Slurm's own `--gpu-bind=closest`
/// gives it, though tfcluster leaves every task the node's whole device cgroup.
#[test]
#[ignore = "needs the two-socket test cluster: run tests/run.sh"]
fn the_choice_agrees_with_slurms_gpu_bind_closest() {
    for &(options, _, line) in ON_THE_CLUSTER {
        if line.contains("contiguous") {
            continue;
        }
        let ours = step_on_two_sockets(options);
        let slurms = parse(sh(&format!(
            "srun -w n9,n10 -N2 -n4 --gres=gpu:4 {options} --gpu-bind=closest {}",
            tool("report.sh")
        )));
        assert_eq!(slurms.code, 0, "{options}: {}", slurms.stderr);
        let gpus = |run: &Run| run.tasks.iter().map(|t| t.gpus.clone()).collect::<Vec<_>>();
        assert_eq!(
            gpus(&ours),
            gpus(&slurms),
            "{options}: tfcluster's, then Slurm's closest"
        );
    }
}

/// A kernel mask's trailing empty words do not make a set another: the task's own CPUs
/// (`sched_getaffinity`'s words) equal the list's entry for it.
#[test]
fn a_kernel_mask_equals_the_same_cpus_listed() {
    assert_eq!(
        CpuSet::from_words(vec![0b11, 0, 0, 0]),
        CpuSet::parse_list("0-1").unwrap()
    );
    assert_eq!(
        CpuSet::from_words(vec![0, 1, 0]),
        CpuSet::parse_mask("0x10000000000000000").unwrap()
    );
}

/// Each GPU task is given the node's tokens as they were when the node matched them to its PCI
/// tree; a list that changed since is not matched again, and says so.
#[test]
fn a_list_that_changed_since_the_node_matched_it_stays_contiguous() {
    assert_eq!(
        first_of_two("0,1", "0,1,2,3"),
        (
            GpuAction::Set("0,1".into()),
            Some("node a: rank 0's GPUs are a contiguous slice: the node's GPU list has 4 entries for this task and had 2 before the tasks forked".into())
        )
    );
}

/// The user guide quotes `srun -v`'s lines about GPU slices as [`Basis::line`] words them.
#[test]
fn the_user_guide_quotes_the_gpu_lines() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/user-guide.md"),
    )
    .unwrap();
    for line in [
        Basis::Affinity.line("n9", 1),
        Basis::Contiguous(Contiguous::NotBound("none".into())).line("n10", 3),
    ] {
        assert!(
            guide.contains(&format!("tfcluster: {line}")),
            "docs/user-guide.md does not quote {line:?}"
        );
    }
}
