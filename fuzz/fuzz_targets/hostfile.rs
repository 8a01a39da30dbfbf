//! `SLURM_HOSTFILE` as srun reads it for `-m arbitrary`: the first byte is the task count.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tfcluster::core::hostlist::hostfile_task_hosts;

fuzz_target!(|data: &[u8]| {
    let Some((&tasks, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if let Ok(hosts) = hostfile_task_hosts(text, tasks.into()) {
        assert_eq!(hosts.len(), usize::from(tasks));
    }
});
