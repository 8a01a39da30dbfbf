//! What choosing each task's GPUs by its CPUs (`gpu_affinity=yes`) costs:
//! `cargo bench --bench gpu_affinity`.
//!
//! - **the node's PCI tree**, read once per node in slurmstepd: a tree written to a temporary
//!   directory like a large GPU node's (`DEVICES` PCI functions, 8 NVIDIA GPUs, 4 on each of two
//!   sockets), read through the file system as the shell reads `/sys/bus/pci/devices`, without
//!   NVIDIA's driver (every device looked at) and with it (its devices alone); and this
//!   machine's own tree, through the shell's own reader;
//! - **the task's own CPUs** (`sched_getaffinity`), once per task;
//! - **a task's environment** on a node of 8 tasks and 8 GPUs bound cyclically over the two
//!   sockets, with the choice and without it (a contiguous slice).

use std::path::{Path, PathBuf};
mod common;
use common::measure;
use tfcluster::core::gpu_affinity::{
    node_gpu_cpus, pci_gpus, CpuSet, Hardware, PciGpus, TaskCpus, NVIDIA_DRIVER, PCI_DEVICES,
};
use tfcluster::core::topology::ConfFile;
use tfcluster::core::{NodeFacts, Settings, Spec, StepInputs, StepPlan};

/// PCI functions of the large node: a dual-socket 8-GPU server lists about this many.
const DEVICES: usize = 300;

/// The large node's tree under `dir`, with NVIDIA's driver's directory or without it.
fn write_tree(dir: &Path, with_driver: bool) {
    for n in 0..DEVICES {
        let device = dir.join(format!("0000:{:02x}:{:02x}.{}", n / 8, n % 8, 0));
        std::fs::create_dir_all(&device).unwrap();
        let gpu = n % 37 == 5 && n / 37 < 8;
        let (vendor, class) = match gpu {
            true => ("0x10de", "0x030200"),
            false => ("0x8086", "0x060400"),
        };
        let cpus = if n < DEVICES / 2 { "0-63" } else { "64-127" };
        std::fs::write(device.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(device.join("class"), format!("{class}\n")).unwrap();
        std::fs::write(device.join("local_cpulist"), format!("{cpus}\n")).unwrap();
        if gpu && with_driver {
            let driver = dir.join("drivers-nvidia");
            std::fs::create_dir_all(&driver).unwrap();
            std::fs::write(driver.join(device.file_name().unwrap()), "").unwrap();
            std::fs::write(driver.join("bind"), "").unwrap();
        }
    }
}

/// `path` under `root` in place of the kernel's tree.
fn moved(path: &Path, root: &Path) -> PathBuf {
    if path == Path::new(NVIDIA_DRIVER) {
        return root.join("drivers-nvidia");
    }
    match path.strip_prefix(PCI_DEVICES) {
        Ok(rest) => root.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

fn read_tree(root: &Path) -> PciGpus {
    let list = |dir: &Path| {
        Ok(std::fs::read_dir(moved(dir, root))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect())
    };
    let read = |path: &Path| match std::fs::read_to_string(moved(path, root)) {
        Ok(text) => ConfFile::Text(text),
        Err(_) => ConfFile::Missing,
    };
    pci_gpus(list, read).unwrap()
}

fn main() {
    let dir = std::env::temp_dir().join(format!("tfc-bench-pci-{}", std::process::id()));
    let mut trees = Vec::new();
    for with_driver in [false, true] {
        write_tree(&dir, with_driver);
        assert_eq!(read_tree(&dir).0.len(), 8);
        trees.push(measure(|| read_tree(&dir)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    write_tree(&dir, true);
    let large = read_tree(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let own_tree = measure(tfcluster::spank::hardware::node_gpus);
    let own_count = std::fs::read_dir(PCI_DEVICES).map_or(0, |d| d.count());
    let own_cpus = measure(tfcluster::spank::hardware::own_cpus);

    // A node of 8 tasks, bound cyclically over the sockets, and its 8 GPUs.
    let spec = Spec::parse(Some("worker:*")).unwrap();
    let plan = StepPlan::new(
        &spec,
        &Settings::default(),
        &StepInputs {
            nodelist: "gpu-node[0001-0064]",
            tasks_per_node: "8(x64)",
            distribution: Some("block"),
            job_id: 421337,
            ..Default::default()
        },
    )
    .unwrap();
    let step_gpus = "0,1,2,3,4,5,6,7";
    let gpus = Some(step_gpus);
    let facts = NodeFacts {
        node: 31,
        gtids: plan.layout.node(31).unwrap(),
        step_gpus: gpus,
        slurm_gave_gpus: true,
    };
    let place = plan.place(None, &facts).unwrap();
    let masks = ["0x1", "0x2"]
        .repeat(4)
        .join(",")
        .replace("0x2", "0x10000000000000000");
    // Once per node, before the tasks fork.
    let gpu_cpus = node_gpu_cpus(Ok(large), step_gpus, None);
    let cpus = TaskCpus {
        bind_type: Some("mask_cpu:".into()),
        list: Some(masks),
        own: Some(CpuSet::from_cpus([64])),
        local: 3,
    };
    let mut renderers = plan.renderers();
    let mut task = |hardware: Option<Hardware>| {
        let env = plan
            .task(&place, 3, gpus, None, &|_| false, hardware, &mut renderers)
            .unwrap();
        assert!(env.gpu_basis.is_none() || hardware.is_some());
        env.set.len()
    };
    let hardware = Hardware {
        gpu_cpus: &gpu_cpus,
        cpus: &cpus,
        slots: &place.slots,
    };
    let with = measure(|| task(Some(hardware)));
    let without = measure(|| task(None));
    for (how, time) in ["no driver", "NVIDIA's driver"].iter().zip(&trees) {
        println!(
            "the node's PCI tree, {DEVICES} functions (8 GPUs), {how}, once per node: {:>8.1} us",
            time.as_secs_f64() * 1e6
        );
    }
    println!(
        "this machine's PCI tree, {own_count} functions, once per node:     {:>8.1} us",
        own_tree.as_secs_f64() * 1e6
    );
    println!(
        "the task's own CPUs (sched_getaffinity), per task:          {:>8.1} us",
        own_cpus.as_secs_f64() * 1e6
    );
    println!(
        "a task's environment, 8 tasks x 8 GPUs, by affinity:         {:>8.1} us",
        with.as_secs_f64() * 1e6
    );
    println!(
        "a task's environment, 8 tasks x 8 GPUs, contiguous:          {:>8.1} us",
        without.as_secs_f64() * 1e6
    );
}
