//! What tfcluster's code running as root reads from the job's environment: the threat model's
//! inventory of those names, each with who can set it and what root does with it.
//!
//! slurmstepd runs the plugin as root, and the job's environment is the user's: srun sends
//! what the user exported, and `srun --export=ALL,NAME=VALUE` any name and value. So a value read
//! from it may shape the user's own step (its TF_CONFIG, its tasks' variables), but may widen
//! what root does to anyone else (whom it stops, which ports it closes or claims, which jobs it
//! asks slurmctld about, which files it names) only once Slurm has vouched for it. The shell
//! reads no name this table does not list: [`job_env_listed`] is checked on every read in
//! slurmstepd (`crate::spank::handle::Spank::getenv` refuses any other), and docs/isolation.md's
//! table is this one ([`markdown`], tests/docs.rs).

/// One name of the job's environment that root reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobEnvInput {
    /// The name; one ending in `<n>` stands for that name with any component number.
    pub name: &'static str,
    /// Who sets it (the user always can, with `srun --export`).
    pub set_by: &'static str,
    /// What root does with it, and what keeps that to the user's own step.
    pub root_does: &'static str,
}

const SRUN: &str = "srun (the user, with --export)";

/// Every job-environment name code running as root reads, in the order a step reads them.
#[rustfmt::skip]
pub const JOB_ENV: &[JobEnvInput] = &[
    JobEnvInput { name: "SLURM_STEP_NUM_NODES", set_by: SRUN,
        root_does: "tells a heterogeneous step's component from a whole step; a component's layouts are asked of slurmctld for the node's own job (S_JOB_ID) only" },
    JobEnvInput { name: "SLURM_STEP_NUM_TASKS", set_by: SRUN,
        root_does: "the same, and the task count the layouts must add up to" },
    JobEnvInput { name: "SLURM_HET_SIZE", set_by: SRUN,
        root_does: "how many component jobs to check with slurmctld (at most 128)" },
    JobEnvInput { name: "SLURM_JOB_ID_HET_GROUP_<n>", set_by: SRUN,
        root_does: "a heterogeneous job's component job: asked about and stopped only once slurmctld's record says it is a component of the first's heterogeneous job, owned by the step's user (S_JOB_UID), as the node's own job is; else the step is refused" },
    JobEnvInput { name: "SLURM_JOB_ID_PACK_GROUP_<n>", set_by: "srun, for a heterogeneous job it makes itself (the user, with --export)",
        root_does: "as SLURM_JOB_ID_HET_GROUP_<n>" },
    JobEnvInput { name: "SLURM_STEP_NODELIST", set_by: SRUN,
        root_does: "the step's hosts in TF_CONFIG and its firewall's peers; checked against Slurm's ids for the node's tasks (a mismatch stops the node's own step); the table admits only the owner's processes to the owner's ports" },
    JobEnvInput { name: "SLURM_STEP_TASKS_PER_NODE", set_by: SRUN,
        root_does: "each node's task count in the plan; checked as SLURM_STEP_NODELIST" },
    JobEnvInput { name: "SLURM_DISTRIBUTION", set_by: SRUN,
        root_does: "where each rank runs in the plan; checked as SLURM_STEP_NODELIST" },
    JobEnvInput { name: "SLURM_DIST_PLANESIZE", set_by: SRUN,
        root_does: "the plane size of -m plane; checked as SLURM_STEP_NODELIST" },
    JobEnvInput { name: "SLURM_STEP_RESV_PORTS", set_by: "srun, when Slurm reserved ports (the user, with --export)",
        root_does: "the step's ports, which its claims and firewall hold, only when slurmctld's record of the step holds the same reservation; else port_range's, with a note" },
    JobEnvInput { name: "SLURM_TFCLUSTER_TASK_HOSTS", set_by: "tfcluster in srun, from SLURM_HOSTFILE (the user, with --export)",
        root_does: "the rank order of -m arbitrary; checked as SLURM_STEP_NODELIST" },
    JobEnvInput { name: "http_proxy", set_by: "the user", root_does: "copied into no_grpc_proxy for the user's own tasks" },
    JobEnvInput { name: "https_proxy", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "grpc_proxy", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "HTTP_PROXY", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "HTTPS_PROXY", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "no_grpc_proxy", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "no_proxy", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "NO_PROXY", set_by: "the user", root_does: "as http_proxy" },
    JobEnvInput { name: "PATH", set_by: "the user",
        root_does: "nothing: slurmstepd looks in it for Apptainer and Singularity with the user's privileges (user_init), for whether the user's own tasks also get APPTAINERENV_ copies; the check looks in the usual prefixes alone" },
    JobEnvInput { name: "CUDA_VISIBLE_DEVICES", set_by: "slurmstepd, from the step's GPUs (the user, where the step has none)",
        root_does: "the node's GPUs, split into the user's own tasks' slices" },
    JobEnvInput { name: "SLURM_STEP_GPUS", set_by: "slurmstepd, from the step's GPUs (the user, where the step has none)",
        root_does: "whether Slurm gave the step GPUs (a message's wording); the node's indices of the step's GPUs, for which GPU is closest to which of the user's own tasks" },
    JobEnvInput { name: "SLURM_CPU_BIND_TYPE", set_by: "slurmstepd, from the task's CPU binding",
        root_does: "whether the user's own tasks were bound to CPUs, for which of the step's GPUs each gets" },
    JobEnvInput { name: "SLURM_CPU_BIND_LIST", set_by: "slurmstepd, from the task's CPU binding",
        root_does: "each of the user's own tasks' CPUs (checked against the task's own), for which of the step's GPUs each gets" },
    JobEnvInput { name: "CUDA_DEVICE_ORDER", set_by: "the user",
        root_does: "whether the user's own tasks get CUDA_DEVICE_ORDER=PCI_BUS_ID (the user's own value is kept)" },
    JobEnvInput { name: "NCCL_SOCKET_IFNAME", set_by: "the user",
        root_does: "whether the user's own tasks get the node's interface for NCCL (the user's own value is kept)" },
    JobEnvInput { name: "GLOO_SOCKET_IFNAME", set_by: "the user",
        root_does: "as NCCL_SOCKET_IFNAME, for gloo" },
    JobEnvInput { name: "SRUN_DEBUG", set_by: SRUN, root_does: "whether each of the user's tasks prints what it got" },
    JobEnvInput { name: "SLURM_CONTAINER", set_by: "srun --container (the user, with --export)",
        root_does: "whether the step runs in Slurm's container: a warning about the node's oci.conf" },
    JobEnvInput { name: "TFCLUSTER_CHECK_SRUN", set_by: "tfcluster in srun, with --tf-cluster=check (the user, with --export)",
        root_does: "srun's copy, compared with the node's in the check's line to the user" },
    JobEnvInput { name: "TFCLUSTER_CHECK_SRUN_LINE", set_by: "tfcluster in srun, with --tf-cluster=check (the user, with --export)",
        root_does: "srun's plugstack.conf words, compared with the node's in the check's line to the user" },
    JobEnvInput { name: "TFCLUSTER_CHECK_SRUN_ISOLATE", set_by: "tfcluster in srun, with --tf-cluster=check (the user, with --export)",
        root_does: "srun's isolate=, compared with the node's in the check's line to the user" },
];

/// Whether root may read `name` from the job's environment: it is in [`JOB_ENV`] (a name there
/// ending in `<n>` stands for that name followed by a number).
pub fn job_env_listed(name: &str) -> bool {
    JOB_ENV
        .iter()
        .any(|input| match input.name.strip_suffix("<n>") {
            Some(prefix) => name
                .strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
            None => input.name == name,
        })
}

/// [`JOB_ENV`] as docs/isolation.md's table.
pub fn markdown() -> String {
    let mut table = String::from("| name | set by | what root does with it |\n|---|---|---|\n");
    for input in JOB_ENV {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            input.name, input.set_by, input.root_does
        ));
    }
    table
}
