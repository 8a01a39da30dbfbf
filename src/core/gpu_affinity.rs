//! Which of a node's GPUs are closest to each task's CPUs (`gpus=split`'s choice).
//!
//! Slurm binds each task to CPUs before `task_init` (task/affinity, task/cgroup: by default a
//! node's tasks go to its sockets in turn, `-m block:cyclic`), and a GPU driven from the other
//! socket crosses the socket link, with the task's host memory on the wrong NUMA node. So each
//! task's slice is the GPUs whose local CPUs (the kernel's `local_cpulist` of the GPU's PCI
//! device) overlap its CPUs the most, the node's tasks choosing in slot order, each GPU at most
//! once. Every task of a node makes the same choice on its own, from what every one of them is
//! told alike: Slurm's binding of the node's tasks (`SLURM_CPU_BIND_TYPE` and
//! `SLURM_CPU_BIND_LIST`, checked against the task's own CPUs) and the node's PCI tree.
//!
//! Slurm's tokens are matched to PCI devices as Slurm numbers them: an index is the n-th NVIDIA
//! GPU in PCI bus order (NVML's order, which `AutoDetect=nvml` keeps; a hand-written gres.conf
//! numbers its `File=` lines in file-name order, which is the bus order where the driver's
//! minor numbers follow the bus, and the driver says when they do not); under
//! `ConstrainDevices` the tokens are local (0..n-1) and `SLURM_STEP_GPUS` holds the node's
//! indices in the same order; a UUID token is the GPU the driver says has it. Wherever any of
//! this is not known, the slices are contiguous, as before, and [`Contiguous`] says why
//! (`srun -v` prints it for each task, [`Basis::line`]). The tokens are matched once per node,
//! before the tasks fork ([`node_gpu_cpus`]); each task then only reads Slurm's binding.
//!
//! The choice stays inside the step's device cgroup: every task of a node can still reach the
//! node's other step GPUs (peer-to-peer transfers between them depend on it), unlike Slurm's
//! own `--gpu-bind=closest`, which gives each task a device cgroup of its own.

use super::topology::ConfFile;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where the kernel lists the node's PCI devices, one directory per address.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";
/// The PCI devices NVIDIA's driver drives, one entry per address among its own files: where it
/// is loaded, the few devices to look at instead of every device of the node.
pub const NVIDIA_DRIVER: &str = "/sys/bus/pci/drivers/nvidia";
/// Where NVIDIA's driver describes each GPU it drives (`ADDRESS/information`: its UUID and its
/// device minor), by PCI address.
pub const NVIDIA_GPUS: &str = "/proc/driver/nvidia/gpus";
/// Slurm's binding of the node's tasks (`mask_cpu:`, `map_cpu:`, `none`, ...), set per task.
pub const BIND_TYPE: &str = "SLURM_CPU_BIND_TYPE";
/// Each local task's CPUs, in local task order (cycled when shorter), as [`BIND_TYPE`] says.
pub const BIND_LIST: &str = "SLURM_CPU_BIND_LIST";
/// NVIDIA's PCI vendor id.
const NVIDIA: &str = "0x10de";
/// The PCI classes of a GPU: a VGA controller (0x0300) or a 3D controller (0x0302).
const GPU_CLASSES: [&str; 2] = ["0x0300", "0x0302"];
/// The highest CPU number a list may name: more than any node has, few enough that a set of
/// them is small.
pub const MAX_CPU: usize = 16383;
/// The most PCI devices read on a node (a large node has a few hundred).
pub const MAX_DEVICES: usize = 4096;

/// Why a node's tasks get contiguous slices of its GPUs rather than the closest ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Contiguous {
    #[error("the node's PCI devices cannot be listed ({PCI_DEVICES}: {0})")]
    NoPciTree(String),
    #[error("{0} cannot be read ({1})")]
    Unreadable(String, String),
    #[error("{PCI_DEVICES} lists more than {MAX_DEVICES} devices")]
    TooManyDevices,
    #[error("{PCI_DEVICES} shows no NVIDIA GPU")]
    NoGpus,
    #[error(
        "the driver's device minors are not in PCI bus order, so Slurm's numbering depends on \
         gres.conf (AutoDetect=nvml numbers by bus)"
    )]
    MinorsOutOfBusOrder,
    #[error("GPU {token} is not one of the {count} NVIDIA GPUs {PCI_DEVICES} shows")]
    UnknownGpu { token: String, count: usize },
    #[error("the kernel gives no local CPUs for GPU {token} ({address})")]
    NoLocalCpus { token: String, address: String },
    #[error("Slurm bound the tasks to no CPUs ({BIND_TYPE}={0})")]
    NotBound(String),
    #[error("{BIND_LIST}={0} is not a list of CPUs")]
    BadBindList(String),
    #[error("{BIND_LIST} gives local task {local} CPUs {listed}, and it runs on CPUs {own}")]
    BindingDiffers {
        local: usize,
        listed: String,
        own: String,
    },
    #[error("the task's own CPUs cannot be read")]
    OwnCpusUnknown,
    #[error("the node's GPU list has {tokens} entries for this task and had {known} before the tasks forked")]
    ListChanged { tokens: usize, known: usize },
}

/// A set of CPU numbers (at most [`MAX_CPU`]).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CpuSet(Vec<u64>);

impl CpuSet {
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        let mut set = CpuSet::default();
        for cpu in cpus {
            set.insert(cpu);
        }
        set
    }

    /// The set a kernel CPU mask gives (`sched_getaffinity`'s words, CPU 0 in bit 0 of the
    /// first), without its trailing empty words, so that equal sets compare equal.
    pub fn from_words(mut words: Vec<u64>) -> CpuSet {
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet(words)
    }

    fn insert(&mut self, cpu: usize) {
        let word = cpu / 64;
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << (cpu % 64);
    }

    /// The kernel's list form, as in `local_cpulist`: `0-3,8-11` (empty: no CPU).
    pub fn parse_list(text: &str) -> Option<CpuSet> {
        let mut set = CpuSet::default();
        for part in text.trim().split(',').filter(|p| !p.is_empty()) {
            let (first, last) = part.split_once('-').unwrap_or((part, part));
            let decimal = |cpu: &str| cpu.parse().ok().filter(|&c| c <= MAX_CPU);
            let (first, last): (usize, usize) = (decimal(first)?, decimal(last)?);
            if first > last {
                return None;
            }
            (first..=last).for_each(|cpu| set.insert(cpu));
        }
        Some(set)
    }

    /// A hexadecimal mask, as in `mask_cpu:0x3` (the `0x` is optional).
    pub fn parse_mask(text: &str) -> Option<CpuSet> {
        let hex = text.trim();
        let hex = hex
            .strip_prefix("0x")
            .or_else(|| hex.strip_prefix("0X"))
            .unwrap_or(hex);
        if hex.is_empty() || hex.len() > MAX_CPU.div_ceil(4) {
            return None;
        }
        let mut set = CpuSet::default();
        for (position, digit) in hex.chars().rev().enumerate() {
            let value = digit.to_digit(16)?;
            (0..4)
                .filter(|bit| value & (1 << bit) != 0)
                .for_each(|bit| set.insert(position * 4 + bit));
        }
        Some(set)
    }

    /// How many CPUs the two sets share.
    pub fn overlap(&self, other: &CpuSet) -> u32 {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| (a & b).count_ones())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, bits)| {
            (0..64)
                .filter(move |b| bits & (1 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
}

/// One CPU number (decimal, or hexadecimal after `0x`, as Slurm's `map_cpu` takes).
fn cpu_number(text: &str) -> Option<usize> {
    let text = text.trim();
    let cpu = match text.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16).ok()?,
        None => text.parse().ok()?,
    };
    (cpu <= MAX_CPU).then_some(cpu)
}

/// The list form: `0-3,8`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus: Vec<usize> = self.cpus().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            parts.push(match i == j {
                true => cpus[i].to_string(),
                false => format!("{}-{}", cpus[i], cpus[j]),
            });
            i = j + 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

/// One NVIDIA GPU of the node, as its PCI tree and its driver describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciGpu {
    /// `DOMAIN:BUS:DEVICE.FUNCTION`, e.g. `0000:3b:00.0`.
    pub address: String,
    /// The CPUs local to it (`local_cpulist`); `None` where the kernel does not say.
    pub cpus: Option<CpuSet>,
    /// Its UUID, where the driver gives one (`GPU-...`).
    pub uuid: Option<String>,
    /// Its device minor (`/dev/nvidiaN`), where the driver gives one.
    pub minor: Option<u32>,
}

/// The node's NVIDIA GPUs in PCI bus order: Slurm's index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciGpus(pub Vec<PciGpu>);

/// The node's NVIDIA GPUs from its PCI tree ([`PCI_DEVICES`]; of its devices, those
/// [`NVIDIA_DRIVER`] lists where the driver is loaded, every one otherwise: a node lists a few
/// hundred, and each costs a read) and NVIDIA's driver ([`NVIDIA_GPUS`]), each directory listed
/// through `list` and each file read through `read`.
pub fn pci_gpus(
    list: impl Fn(&Path) -> Result<Vec<String>, String>,
    read: impl Fn(&Path) -> ConfFile,
) -> Result<PciGpus, Contiguous> {
    let root = Path::new(PCI_DEVICES);
    let mut addresses = match list(Path::new(NVIDIA_DRIVER)) {
        // The driver's directory also holds its own files (bind, module, new_id, ...).
        Ok(entries) => entries
            .into_iter()
            .filter(|e| e.contains(':') && e.contains('.'))
            .collect(),
        Err(_) => list(root).map_err(Contiguous::NoPciTree)?,
    };
    if addresses.len() > MAX_DEVICES {
        return Err(Contiguous::TooManyDevices);
    }
    // PCI bus order: the addresses are fixed-width lowercase hexadecimal.
    addresses.sort();
    let text = |path: PathBuf| match read(&path) {
        ConfFile::Text(text) => Ok(Some(text)),
        ConfFile::Missing => Ok(None),
        ConfFile::Unreadable(why) => Err(Contiguous::Unreadable(path.display().to_string(), why)),
    };
    let mut gpus = Vec::new();
    for address in addresses {
        let device = root.join(&address);
        // The class first: most devices are no GPU, and one read tells.
        let class = text(device.join("class"))?;
        let gpu_class = |c: String| GPU_CLASSES.iter().any(|g| c.trim().starts_with(g));
        if !class.is_some_and(gpu_class) {
            continue;
        }
        let nvidia = |v: String| v.trim() == NVIDIA;
        if !text(device.join("vendor"))?.is_some_and(nvidia) {
            continue;
        }
        let cpus = text(device.join("local_cpulist"))?
            .and_then(|list| CpuSet::parse_list(&list))
            .filter(|set| !set.is_empty());
        let driver = text(Path::new(NVIDIA_GPUS).join(&address).join("information"))?;
        let field = |name: &str| {
            driver.as_deref().and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim_start_matches(':').trim().to_string())
            })
        };
        gpus.push(PciGpu {
            cpus,
            uuid: field("GPU UUID"),
            minor: field("Device Minor").and_then(|m| m.parse().ok()),
            address,
        });
    }
    if gpus.is_empty() {
        return Err(Contiguous::NoGpus);
    }
    let minors: Vec<u32> = gpus.iter().filter_map(|g| g.minor).collect();
    if minors.len() == gpus.len() && minors.windows(2).any(|w| w[0] > w[1]) {
        return Err(Contiguous::MinorsOutOfBusOrder);
    }
    Ok(PciGpus(gpus))
}

/// The local CPUs of each token of `step_gpus` (the step's `CUDA_VISIBLE_DEVICES` on the node),
/// once per node: from the node's GPUs (`pci`, [`pci_gpus`]) and `step_global`
/// (`SLURM_STEP_GPUS`), or why they are not known. A task whose own list differs keeps Slurm's
/// binding and needs none of it ([`super::gpus::assign`]).
pub fn node_gpu_cpus(
    pci: Result<PciGpus, Contiguous>,
    step_gpus: &str,
    step_global: Option<&str>,
) -> Result<Vec<CpuSet>, Contiguous> {
    let tokens: Vec<&str> = step_gpus.split(',').map(str::trim).collect();
    pci?.token_cpus(&tokens, step_global)
}

impl PciGpus {
    /// The local CPUs of each of Slurm's `tokens` (the step's `CUDA_VISIBLE_DEVICES` on the
    /// node), where `step_global` is `SLURM_STEP_GPUS`: the node's indices of the same GPUs,
    /// in the same order, which under `ConstrainDevices` differ from the tokens.
    pub fn token_cpus(
        &self,
        tokens: &[&str],
        step_global: Option<&str>,
    ) -> Result<Vec<CpuSet>, Contiguous> {
        let global: Vec<&str> = step_global
            .map(|g| g.split(',').map(str::trim).collect())
            .unwrap_or_default();
        let indices = match global.len() == tokens.len() {
            true => &global,
            false => tokens,
        };
        tokens
            .iter()
            .zip(indices)
            .map(|(&token, &index)| {
                let unknown = || Contiguous::UnknownGpu {
                    token: token.to_string(),
                    count: self.0.len(),
                };
                let gpu = match index.parse::<usize>() {
                    Ok(n) => self.0.get(n),
                    Err(_) => self.0.iter().find(|g| g.uuid.as_deref() == Some(token)),
                }
                .ok_or_else(unknown)?;
                gpu.cpus.clone().ok_or_else(|| Contiguous::NoLocalCpus {
                    token: token.to_string(),
                    address: gpu.address.clone(),
                })
            })
            .collect()
    }
}

impl PciGpus {
    /// What `--tf-cluster=check` says of the node's GPUs: how many, and Slurm's indices of
    /// those near each set of CPUs (`CPUs 0-7: 0,1; CPUs 8-15: 2,3`).
    pub fn summary(&self) -> String {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (index, gpu) in self.0.iter().enumerate() {
            let near = gpu
                .cpus
                .as_ref()
                .map_or("local CPUs unknown".to_string(), |c| format!("CPUs {c}"));
            match groups.iter_mut().find(|(n, _)| *n == near) {
                Some((_, indices)) => indices.push(index),
                None => groups.push((near, vec![index])),
            }
        }
        let groups: Vec<String> = groups
            .iter()
            .map(|(near, indices)| {
                let indices: Vec<String> = indices.iter().map(usize::to_string).collect();
                format!("{near}: {}", indices.join(","))
            })
            .collect();
        format!("{} NVIDIA GPUs ({})", self.0.len(), groups.join("; "))
    }
}

/// What a task is told of Slurm's binding, and its own CPUs.
#[derive(Debug, Clone, Default)]
pub struct TaskCpus {
    /// [`BIND_TYPE`].
    pub bind_type: Option<String>,
    /// [`BIND_LIST`].
    pub list: Option<String>,
    /// The CPUs the task runs on (`sched_getaffinity`).
    pub own: Option<CpuSet>,
    /// Its local task id.
    pub local: usize,
}

impl TaskCpus {
    /// The CPUs of each of the node's `tasks` local tasks, as Slurm bound them: only a binding
    /// to CPUs (`mask_cpu`, `map_cpu`, which Slurm's automatic binding becomes), and only where
    /// the list's entry for this task is the CPUs it runs on (a list in Slurm's abstract
    /// numbering, or one a task prolog changed, is not the tasks' binding).
    pub fn masks(&self, tasks: usize) -> Result<Vec<CpuSet>, Contiguous> {
        let kind = self.bind_type.as_deref().unwrap_or("none");
        let parse: fn(&str) -> Option<CpuSet> = if kind.contains("mask_cpu") {
            CpuSet::parse_mask
        } else if kind.contains("map_cpu") {
            |cpu| cpu_number(cpu).map(|c| CpuSet::from_cpus([c]))
        } else {
            return Err(Contiguous::NotBound(kind.to_string()));
        };
        let list = self.list.as_deref().unwrap_or_default();
        let entries: Option<Vec<CpuSet>> = list.split(',').map(parse).collect();
        let entries = entries
            .filter(|e| !e.is_empty() && e.iter().all(|s| !s.is_empty()))
            .ok_or_else(|| Contiguous::BadBindList(list.to_string()))?;
        // Slurm gives local task i the entry i, cycling through a shorter list.
        let masks: Vec<CpuSet> = (0..tasks)
            .map(|t| entries[t % entries.len()].clone())
            .collect();
        let own = self.own.as_ref().ok_or(Contiguous::OwnCpusUnknown)?;
        let listed = &entries[self.local % entries.len()];
        if listed != own {
            return Err(Contiguous::BindingDiffers {
                local: self.local,
                listed: listed.to_string(),
                own: own.to_string(),
            });
        }
        Ok(masks)
    }
}

/// Each GPU task's GPUs (positions in the node's list), given each GPU's local CPUs
/// (`gpu_cpus`, by position) and each GPU task's CPUs (`task_cpus`, in slot order): in slot
/// order, each task takes the `per_task` free GPUs that share the most CPUs with it (ties: the
/// first in Slurm's list), so that tasks bound alike get the same GPUs contiguous slices would
/// give them. Each slice is in Slurm's order.
pub fn closest(gpu_cpus: &[CpuSet], task_cpus: &[CpuSet], per_task: usize) -> Vec<Vec<usize>> {
    let mut free: Vec<usize> = (0..gpu_cpus.len()).collect();
    task_cpus
        .iter()
        .map(|cpus| {
            let mut ranked = free.clone();
            // Stable: equal overlaps keep Slurm's order.
            ranked.sort_by_key(|&g| std::cmp::Reverse(gpu_cpus[g].overlap(cpus)));
            let mut slice: Vec<usize> = ranked.into_iter().take(per_task).collect();
            free.retain(|g| !slice.contains(g));
            slice.sort_unstable();
            slice
        })
        .collect()
}

/// How a node's slices were chosen (`srun -v` says it for each task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Basis {
    /// By each task's CPUs ([`closest`]).
    Affinity,
    /// In Slurm's order, for this reason.
    Contiguous(Contiguous),
}

impl Basis {
    /// The `srun -v` line of node `host`'s task `rank`.
    pub fn line(&self, host: &str, rank: u32) -> String {
        match self {
            Basis::Affinity => {
                format!("node {host}: rank {rank}'s GPUs are the closest to its CPUs")
            }
            Basis::Contiguous(why) => {
                format!("node {host}: rank {rank}'s GPUs are a contiguous slice: {why}")
            }
        }
    }
}

/// What a task knows of where its node's GPUs sit and where Slurm bound the node's tasks.
#[derive(Debug, Clone, Copy)]
pub struct Hardware<'a> {
    /// The local CPUs of each of the node's GPU tokens ([`node_gpu_cpus`], once per node before
    /// the tasks fork), or why they are not known.
    pub gpu_cpus: &'a Result<Vec<CpuSet>, Contiguous>,
    /// The task's binding.
    pub cpus: &'a TaskCpus,
    /// Each local task's slot ([`super::place::Place::slots`]).
    pub slots: &'a [usize],
}

impl Hardware<'_> {
    /// Each GPU task's slice ([`closest`]) of the node's `tokens` tokens, given the GPU tasks'
    /// slots (`gpu_slots`, in slot order), or why the slices stay contiguous.
    pub fn slices(
        &self,
        tokens: usize,
        gpu_slots: &[usize],
        per_task: usize,
    ) -> Result<Vec<Vec<usize>>, Contiguous> {
        let gpu_cpus = self.gpu_cpus.as_ref().map_err(Clone::clone)?;
        if gpu_cpus.len() != tokens {
            return Err(Contiguous::ListChanged {
                tokens,
                known: gpu_cpus.len(),
            });
        }
        let masks = self.cpus.masks(self.slots.len())?;
        let task_cpus: Vec<CpuSet> = gpu_slots
            .iter()
            .map(|&slot| {
                let local = self.slots.iter().position(|&s| s == slot).unwrap_or(slot);
                masks.get(local).cloned().unwrap_or_default()
            })
            .collect();
        Ok(closest(gpu_cpus, &task_cpus, per_task))
    }
}
