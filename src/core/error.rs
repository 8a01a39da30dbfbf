//! Every way the core can refuse its input.
//!
//! Each message names what is wrong *and* what the user or admin should do about it: these
//! strings reach srun's stderr verbatim, and a user reading them has no other documentation at
//! hand. `tests/errors.rs` lists every variant with its exact message.

use thiserror::Error;

/// The allowed role names, in TensorFlow's rank order, for messages.
pub const ROLE_NAMES: &str = "chief, evaluator, master, ps, worker";

/// What a user can do when tfcluster cannot know how Slurm placed a step's tasks.
const PLACEMENT_ALTERNATIVES: &str = "run srun with -m cyclic or -m plane=N (placements Slurm \
    never reorders), or -m arbitrary with the hosts in rank order in a file named by \
    SLURM_HOSTFILE, or ask the admin to add CR_NO_DIST_TOPO_BLOCK to SelectTypeParameters";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    // ---- --tf-cluster spec ----------------------------------------------------------------
    #[error(
        "--tf-cluster: '{item}' is not ROLE:COUNT; write e.g. --tf-cluster=chief:1,ps:2,worker:*"
    )]
    SpecSyntax { item: String },
    #[error(
        "--tf-cluster= is empty (an unset shell variable, as in --tf-cluster=$ROLES?); give a spec \
         such as --tf-cluster=chief:1,worker:*, or write --tf-cluster without '=' for all workers"
    )]
    EmptySpec,
    #[error(
        "--tf-cluster was given without '=', so '{program}' became the program to run; \
         did you mean --tf-cluster={program}?"
    )]
    SpecAsProgram { program: String },
    #[error("--tf-cluster: unknown role '{role}'; allowed roles are {ROLE_NAMES}")]
    UnknownRole { role: String },
    #[error("--tf-cluster: count '{count}' for {role} is not a number >= 1 or '*'")]
    BadCount { role: String, count: String },
    #[error("--tf-cluster: role {role} is given twice; give each role once with its total count")]
    DuplicateRole { role: String },
    #[error("--tf-cluster: only one role may use '*' (all remaining tasks), but {first} and {second} both do")]
    SeveralWildcards { first: String, second: String },
    #[error("--tf-cluster: {role}:{count} asks for {count} {role} tasks; TensorFlow allows at most one {role}")]
    SingletonRole { role: String, count: u32 },
    #[error("--tf-cluster: chief and master cannot be used together (TensorFlow accepts one or the other); drop master:1 or chief:1")]
    ChiefAndMaster,
    #[error(
        "--tf-cluster: tuner=yes makes the chief Keras Tuner's oracle, and the spec has no chief; \
         add chief:1 (e.g. --tf-cluster=chief:1,worker:*,tuner=yes)"
    )]
    TunerWithoutChief,
    #[error(
        "--tf-cluster: torch=yes starts PyTorch, whose ranks are all workers, and the spec has {roles}; \
         write --tf-cluster='worker:*,torch=yes'"
    )]
    TorchRoles { roles: String },
    #[error("--tf-cluster: '{key}' is not a per-job setting; allowed: {allowed}")]
    UnknownOverride { key: String, allowed: String },
    #[error(
        "--tf-cluster asks for {requested} tasks ({spec}) but the step has {tasks}; \
         change the counts, use '*' for one role, or run srun with -n {requested}"
    )]
    CountMismatch {
        spec: String,
        requested: u64,
        tasks: u32,
    },
    #[error(
        "--tf-cluster: the fixed roles take {fixed} of the step's {tasks} tasks, leaving none for {role}:*; \
         run with more tasks (-n) or lower the fixed counts"
    )]
    NothingLeftForWildcard {
        role: String,
        fixed: u64,
        tasks: u32,
    },
    #[error(
        "--tf-cluster: {role}:* gives {rest} of the step's {tasks} tasks to {role}, but TensorFlow allows at most one {role}; \
         write {role}:1 and give '*' to worker"
    )]
    SingletonWildcard { role: String, rest: u32, tasks: u32 },

    // ---- hostlists and counts from Slurm ------------------------------------------------
    #[error("hostlist '{list}': {reason}")]
    Hostlist { list: String, reason: String },
    #[error("{var} '{value}' is not a Slurm count list like '2(x3),1': {reason}")]
    CountList {
        var: &'static str,
        value: String,
        reason: String,
    },

    // ---- heterogeneous jobs and steps ([`super::het`]) --------------------------------------
    #[error(
        "SLURM_HET_SIZE '{value}' is not a count of heterogeneous job components (1 to 128); \
         this job's environment is inconsistent: run srun inside the allocation salloc or sbatch \
         made, without setting SLURM_HET_SIZE"
    )]
    HetSize { value: String },
    #[error(
        "this heterogeneous step has no SLURM_STEP_NUM_TASKS, so its task count over all \
         components is unknown here and no TF_CONFIG can be right; run the step with srun, which \
         sets it"
    )]
    HetStepTasks,
    #[error(
        "SLURM_JOB_ID_HET_GROUP_{component} is missing or not a job id, so component \
         {component} of this heterogeneous job cannot be asked where its tasks run; run srun \
         inside the allocation salloc or sbatch made (they set it)"
    )]
    HetJobId { component: u32 },
    #[error(
        "job {job_id} ({named}) is not a component of heterogeneous job {leader} of this step's \
         user in slurmctld's records{reason}, so tfcluster asks about and stops no job for this \
         step and no TF_CONFIG can be right; SLURM_HET_SIZE and SLURM_JOB_ID_HET_GROUP_* are \
         Slurm's own: run srun inside the allocation salloc or sbatch made, without setting or \
         exporting them"
    )]
    HetJobNotVouched {
        job_id: u32,
        named: String,
        leader: u32,
        reason: String,
    },
    #[error(
        "slurmctld gave the layouts of components with {found} of the heterogeneous step's \
         {step_tasks} tasks (components it refused: {refused}), so where the other ranks run \
         is unknown and no TF_CONFIG can be right; a component whose tasks had all ended \
         before this node started has no layout left, so look for its error first; else run \
         the step again, and if this persists ask the admin whether the nodes reach slurmctld"
    )]
    HetLayoutsShort {
        found: u64,
        step_tasks: u32,
        refused: String,
    },
    #[error(
        "the layout slurmctld gave for component {component} of this heterogeneous step is \
         inconsistent ({reason}), so no TF_CONFIG can be right; report this with the Slurm \
         release"
    )]
    HetLayout { component: u32, reason: String },
    #[error(
        "node {host} fits {fitting} components of this heterogeneous step as slurmctld laid \
         them out, not one, so it cannot tell its tasks' ranks; give the components different \
         node or task counts, or ask the admin to make each node's NodeName its host name"
    )]
    HetOwnComponent { host: String, fitting: usize },

    // ---- layout -------------------------------------------------------------------------
    #[error(
        "the step lists {nodes} nodes (SLURM_STEP_NODELIST) but {counts} task counts \
         (SLURM_STEP_TASKS_PER_NODE); this step's environment is inconsistent"
    )]
    NodeCountMismatch { nodes: usize, counts: usize },
    #[error(
        "{var} '{value}' adds up to more than {limit} tasks, more than any TF_CONFIG can list; \
         run TensorFlow on fewer tasks"
    )]
    TooManyTasks {
        var: &'static str,
        value: String,
        limit: u64,
    },
    #[error("the step has no nodes (SLURM_STEP_NODELIST is empty)")]
    NoNodes,
    #[error(
        "SLURM_STEP_NODELIST '{list}' names node {host} twice, which Slurm never does; \
         do not set SLURM_STEP_NODELIST in the job's environment"
    )]
    NodeListedTwice { list: String, host: String },
    #[error(
        "distribution 'arbitrary' without SLURM_HOSTFILE (e.g. -m arbitrary -w LIST) places tasks \
         in an order tfcluster cannot see; list the hosts in a file named by SLURM_HOSTFILE, or use \
         -m block, cyclic or plane=N"
    )]
    ArbitraryDistribution,
    #[error(
        "--tf-cluster cannot reach tasks in Slurm's --container ({bundle}) on Slurm {release}: \
         this release writes the container's environment before plugins run, so every task \
         would start without TF_CONFIG, CUDA_VISIBLE_DEVICES and SLURM_PROCID and train alone; \
         run the container inside the task instead (srun --tf-cluster apptainer exec IMAGE \
         python train.py), or use Slurm 23.02 or later"
    )]
    ContainerTooOld { bundle: String, release: String },
    #[error(
        "-m arbitrary: the task order srun reads from SLURM_HOSTFILE did not reach this node \
         (SLURM_TFCLUSTER_TASK_HOSTS is not in the step's environment); srun must load tfcluster \
         too, the same version as the nodes (srun --help lists --tf-cluster)"
    )]
    TaskOrderMissing,
    #[error("SLURM_HOSTFILE lists {entries} hosts for {tasks} tasks; list one host per task")]
    HostfileTooShort { entries: usize, tasks: u32 },
    #[error(
        "SLURM_HOSTFILE puts task {rank} on {host}, which is not one of the step's nodes ({nodes})"
    )]
    TaskHostNotInStep {
        rank: usize,
        host: String,
        nodes: String,
    },
    #[error(
        "SLURM_HOSTFILE puts {listed} tasks on {host} but Slurm started {started} there; \
         refusing to hand out a wrong TF_CONFIG"
    )]
    TaskHostCount {
        host: String,
        listed: u32,
        started: u32,
    },
    #[error(
        "unknown task distribution '{value}' (SLURM_DISTRIBUTION); use -m block, cyclic or plane=N"
    )]
    UnknownDistribution { value: String },
    #[error("plane distribution needs a plane size >= 1, got SLURM_DIST_PLANESIZE='{value}'; use -m plane=N")]
    BadPlaneSize { value: String },
    #[error(
        "node {node} ({host}): Slurm placed global tasks [{actual}] here but tfcluster computed \
         [{expected}], so no TF_CONFIG of this step can be right and the whole step is stopped; \
         {PLACEMENT_ALTERNATIVES}"
    )]
    LayoutMismatch {
        node: usize,
        host: String,
        expected: String,
        actual: String,
    },
    #[error(
        "Slurm places a block-distributed step's tasks in the topology's node order \
         (TopologyPlugin={plugin}), which tfcluster cannot read here: {reason}; \
         {PLACEMENT_ALTERNATIVES}"
    )]
    TopologyUnreadable { plugin: String, reason: String },
    #[error("node index {node} is outside the step's {nodes} nodes")]
    NodeOutOfRange { node: usize, nodes: usize },
    #[error("local task {slot} is outside node {node}'s {tasks} tasks")]
    SlotOutOfRange {
        node: usize,
        slot: usize,
        tasks: usize,
    },

    // ---- ports --------------------------------------------------------------------------
    #[error(
        "node {host} runs {tasks} tasks but SLURM_STEP_RESV_PORTS reserved only {ports} ports; \
         use srun --resv-ports={tasks} or more"
    )]
    NotEnoughReservedPorts {
        host: String,
        tasks: usize,
        ports: usize,
    },
    #[error(
        "SLURM_STEP_RESV_PORTS '{value}' is not a list of distinct ports 1-65535 like 12000-12003,12010; \
         run srun with --resv-ports=0 to let tfcluster choose the ports"
    )]
    ReservedPortList { value: String },
    #[error(
        "slurmctld did not say which ports it reserved for this step ({reason}), so this node \
         cannot tell whether SLURM_STEP_RESV_PORTS is Slurm's, and its ports could differ from \
         the other nodes'; run the step again, and if this persists ask the admin whether the \
         nodes reach slurmctld"
    )]
    ReservationUnchecked { reason: String },
    #[error("port {base} + {tasks} tasks on one node goes past 65535; choose a lower port_base")]
    PortOverflow { base: u32, tasks: usize },
    #[error(
        "a node runs {tasks} tasks but the port range {lo}-{hi} has room for {room}; \
         the admin should widen port_range in plugstack.conf, or give port_base=N"
    )]
    PortRangeTooSmall {
        lo: u16,
        hi: u16,
        room: u32,
        tasks: usize,
    },

    // ---- GPUs ---------------------------------------------------------------------------
    #[error(
        "node {host} has {gpus} GPU(s) ({tokens}) for {tasks} GPU tasks; ask for at least {tasks} GPUs \
         per node (--gres=gpu:{tasks}), fewer tasks per node, or keep some roles off GPUs (gpu_roles=)"
    )]
    NotEnoughGpus {
        host: String,
        gpus: usize,
        tokens: String,
        tasks: usize,
    },
    #[error(
        "node {host} has {gpus} GPU(s), fewer than the {tasks} GPU tasks of the busiest node {busiest}: \
         even_gpus gives every GPU task the same count and takes every node to have as many GPUs; \
         ask for GPUs per node (--gres=gpu:N or --gpus-per-node=N, not --gpus=N), or set even_gpus=no"
    )]
    UnevenGpus {
        host: String,
        gpus: usize,
        busiest: String,
        tasks: usize,
    },
    #[error("CUDA_VISIBLE_DEVICES '{value}' lists GPU {token} twice; fix the GRES configuration or the job's environment")]
    RepeatedGpu { value: String, token: String },
    #[error("CUDA_VISIBLE_DEVICES '{value}' has an empty entry; fix the GRES configuration or the job's environment")]
    BadGpuList { value: String },

    // ---- TF_CONFIG ----------------------------------------------------------------------
    #[error(
        "{name} for {tasks} tasks would be {bytes} bytes, over Linux's limit of {limit} bytes for one \
         environment variable; use fewer tasks or shorter node addresses{hint}"
    )]
    EnvTooLarge {
        name: &'static str,
        tasks: u32,
        bytes: usize,
        limit: usize,
        hint: &'static str,
    },

    // ---- isolate=yes ---------------------------------------------------------------------
    #[error(
        "node address '{address}' does not resolve ({reason}); ask the admin to make every \
         node's address (the address= setting) resolve on every node"
    )]
    AddressUnresolved { address: String, reason: String },
    #[error(
        "isolate=yes: port {port} is outside the site's port_range {lo}-{hi}, the only ports \
         tfcluster's firewall covers (so that no step can close another service's port); drop \
         port_base, or pick one whose ports (port_base up to port_base + the busiest node's \
         tasks - 1) all lie in {lo}-{hi}"
    )]
    PortOutsideIsolatedRange { port: u32, lo: u16, hi: u16 },
    #[error(
        "port {port} is already a port of another step here (nftables table inet {table}): the \
         two steps' ports overlap, and the rules of one would act on the other's connections; \
         {fix}",
        fix = PORT_FIX
    )]
    PortInOtherTable { port: u16, table: String },
    #[error(
        "{whose} already hold {count} tfcluster tables on this node, the most \
         {who} ({max}): every table slows each packet of the node; {fix}",
        whose = if *yours { "your steps" } else { "the node's steps" },
        who = if *yours { "one user's steps may hold" } else { "a node holds" },
        fix = if *yours {
            "end some of your steps here, or run fewer at once, then run the step again"
        } else {
            "run the step again once steps here have ended; if this persists, ask the admin to \
             look at the node's tables (nft list tables)"
        }
    )]
    TooManyTables {
        count: usize,
        max: usize,
        yours: bool,
    },
    #[error(
        "net.ipv4.tcp_syncookies is 2 here: the kernel answers every connection attempt with a \
         SYN cookie, which has no owner, so the firewall would drop the handshakes of the \
         owner's own tasks; set it to 1, the kernel's default (cookies only while a listener's \
         queue is full): sysctl -w net.ipv4.tcp_syncookies=1, and the same in /etc/sysctl.d"
    )]
    SynCookiesAlways,
    #[error(
        "cannot tell whether the kernel answers connection attempts with SYN cookies ({reason}); \
         with cookies always on the firewall would drop the owner's own handshakes; check \
         sysctl net.ipv4.tcp_syncookies (0 or 1 works with isolate=yes)"
    )]
    SynCookiesUnknown { reason: String },
    #[error(
        "port {port} is already a port of job {job_id}'s step {step_id}, which runs here: the two \
         steps' ports met, and one step's server could not listen on it; {fix}",
        fix = PORT_FIX
    )]
    PortClaimed {
        port: u16,
        job_id: u32,
        step_id: u32,
    },
    #[error(
        "port {port} is already in use here (a socket of uid {uid} holds it, listening or \
         connected): the step's server could not listen on it, and its peers could connect to \
         that program; {fix}",
        fix = PORT_FIX
    )]
    PortListened { port: u16, uid: u32 },

    // ---- settings -----------------------------------------------------------------------
    #[error("plugstack.conf: unknown tfcluster setting '{key}'; known: {known}")]
    UnknownSetting { key: String, known: String },
    #[error("{origin}: {key}='{value}' is invalid: {expected}")]
    BadSetting {
        origin: &'static str,
        key: String,
        value: String,
        expected: &'static str,
    },
}

impl Error {
    /// What this error does to the step ([`OnError`]): a plan that Slurm's placement
    /// contradicts, or a heterogeneous step whose components cannot be put together, is wrong
    /// for every node, whose tasks may already start with it (stopped at once); a node that
    /// cannot give its task the GPUs the step needs starves that task's peers (each such task
    /// stops the step); anything else concerns the task alone.
    pub fn on_error(&self) -> OnError {
        match self {
            Error::LayoutMismatch { .. }
            | Error::TaskHostCount { .. }
            | Error::HetSize { .. }
            | Error::HetStepTasks
            | Error::HetJobId { .. }
            | Error::HetJobNotVouched { .. }
            | Error::ReservationUnchecked { .. }
            | Error::HetLayoutsShort { .. }
            | Error::HetLayout { .. }
            | Error::HetOwnComponent { .. } => OnError::StopNow,
            Error::NotEnoughGpus { .. } | Error::UnevenGpus { .. } => OnError::StopFromEachTask,
            _ => OnError::TaskOnly,
        }
    }
}

/// What to do when a node's port is held: the user's way (automatic ports follow the job and step
/// ids, so another step takes others), and the site's (Slurm hands out reserved ports once).
const PORT_FIX: &str = "drop port_base (or pick another), or run the step again (tfcluster's \
     own ports follow the job and step ids); a site avoids this altogether with Slurm's port \
     reservation (MpiParams=ports=, docs/admin-guide.md)";

pub type Result<T> = std::result::Result<T, Error>;

/// What an error does to the step beyond the task that meets it: one value per error, decided
/// where the error is defined ([`Error::on_error`], and the shell's own errors likewise),
/// acted on by the SPANK shell through the one stop it builds per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Only the task that meets it fails (its program never starts, whether the plugin is
    /// `required` or `optional`): the rest of the step is not affected.
    TaskOnly,
    /// Every task that meets it fails and stops the step: its peers on other nodes would wait
    /// for it (TensorFlow waits up to an hour for a task to register).
    StopFromEachTask,
    /// No task of the node runs, whether the plugin is `required` or `optional`; the node's
    /// first task says why and stops the step (a node that cannot isolate it).
    StopFromFirstTask,
    /// The plan is wrong for the whole step, and other nodes' tasks may be starting with it:
    /// found before the node's tasks fork, and the step is stopped at once.
    StopNow,
}
