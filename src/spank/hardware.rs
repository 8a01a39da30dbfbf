//! What the GPU choice ([`crate::core::gpu_affinity`]) reads from the node: its PCI tree and
//! NVIDIA's driver files, at fixed paths (never one the job names), once per node before the
//! tasks fork; and each task's own CPUs, in the task.

use crate::core::gpu_affinity::{self, Contiguous, CpuSet, PciGpus, MAX_CPU};
use crate::spank::slurm_conf;
use std::path::Path;

/// The node's NVIDIA GPUs in PCI bus order, or why they are not known.
pub fn node_gpus() -> Result<PciGpus, Contiguous> {
    // Each file is a line or a few: the configuration files' bounded reader serves.
    gpu_affinity::pci_gpus(list, slurm_conf::read)
}

/// The names in a directory.
fn list(dir: &Path) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    Ok(entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .take(gpu_affinity::MAX_DEVICES + 1)
        .collect())
}

/// The CPUs the calling task may run on (`sched_getaffinity`): by `task_init`, Slurm's binding.
pub fn own_cpus() -> Option<CpuSet> {
    // cpu_set_t's 1024 CPUs first; the kernel says EINVAL where it has more.
    let mut words = vec![0u64; 16];
    loop {
        let bytes = words.len() * std::mem::size_of::<u64>();
        // SAFETY: the kernel writes at most `bytes` bytes into `words`, which has that many.
        let rc = unsafe {
            libc::sched_getaffinity(0, bytes, words.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            break;
        }
        if words.len() * 64 > MAX_CPU {
            return None;
        }
        words.resize(words.len() * 4, 0);
    }
    Some(CpuSet::from_words(words))
}
