//! TF_CONFIG text: `{"cluster":{ROLE:["addr:port",...],...},"task":{"type":ROLE,"index":N}}`,
//! plus `"rpc_layer"` when set; and DTensor's job list.
//!
//! [`TfConfigs`] holds what a step's tasks are handed: the cluster part, the same for every
//! trainer, rendered once per node ([`ClusterJson`]), the evaluator's own view, and the size
//! check every task's TF_CONFIG passes when the step is planned. Each task then only appends
//! its own `task` part ([`TaskRenderer`]). Lists are dense, keys in TensorFlow's job order.
//! Addresses go through serde_json once per node (any byte a host name may hold is escaped
//! correctly; [`super::address::Endpoints`]).

use super::address::Endpoints;
use super::error::{Error, Result};
use super::layout::Layout;
use super::settings::EvaluatorCluster;
use super::spec::{Role, RoleTable};
use super::text::{json_str_len, push_decimal, push_json_str};

/// Linux's `MAX_ARG_STRLEN`: the most bytes one environment string `NAME=value\0` may have.
pub const ENV_STRING_LIMIT: usize = 131072;
/// The variable TensorFlow's `TFConfigClusterResolver` reads.
pub const NAME: &str = "TF_CONFIG";
/// What srun puts in TF_CONFIG before launch, for the nodes' tfcluster to replace in every task.
/// A compute node that did not load the plugin (its file missing there, `optional` in
/// plugstack.conf) would otherwise start its tasks without a TF_CONFIG, and TensorFlow would
/// train each of them alone, silently. Not JSON, so `TFConfigClusterResolver` fails at once on
/// it; the text says why to whoever prints the variable.
pub const NOT_SET_ON_THIS_NODE: &str = "tfcluster did not run on this node: srun loaded it, this \
     compute node did not (its plugin file or plugstack.conf line is missing or wrong); ask the \
     admin to install it on every compute node";

/// The variables DTensor's multi-client setup reads: every client's `address:port` in rank
/// order, and this client's rank.
pub const DTENSOR_JOBS: &str = "DTENSOR_JOBS";
pub const DTENSOR_CLIENT_ID: &str = "DTENSOR_CLIENT_ID";

/// Every TF_CONFIG of one step.
#[derive(Debug, Clone)]
pub struct TfConfigs {
    /// The `cluster` object every trainer gets.
    pub trainers: String,
    /// The evaluator's own `cluster` object ([`EvaluatorCluster`]), when the spec has one.
    pub evaluator: Option<String>,
    pub rpc_layer: Option<String>,
    /// The step's task count (for messages).
    tasks: u32,
}

impl TfConfigs {
    /// Renders the step's cluster views and checks that every task's TF_CONFIG can be passed
    /// to `execve`: a step where one cannot fails as a whole, before any task starts.
    pub fn new(
        roles: &RoleTable,
        layout: &Layout,
        endpoints: &Endpoints,
        evaluator_cluster: EvaluatorCluster,
        rpc_layer: Option<String>,
        longest_name: &'static str,
    ) -> Result<TfConfigs> {
        let cluster_with = |listed: &dyn Fn(Role) -> bool| {
            let mut cluster =
                ClusterJson::with_capacity(layout.ranks.len() * endpoints.widest_json());
            for slice in roles.slices.iter().filter(|s| listed(s.role)) {
                cluster.job(slice.role);
                for rank in slice.start..slice.start + slice.count {
                    let p = layout.ranks[rank as usize];
                    cluster.endpoint(endpoints, p.node as usize, p.slot as usize);
                }
            }
            cluster.finish()
        };
        let trainers = cluster_with(&Role::in_cluster);
        let evaluator = roles.has(Role::Evaluator).then(|| match evaluator_cluster {
            EvaluatorCluster::Own => cluster_with(&|role| role == Role::Evaluator),
            EvaluatorCluster::Training => cluster_with(&|_| true),
        });
        let configs = TfConfigs {
            trainers,
            evaluator,
            rpc_layer,
            tasks: layout.tasks(),
        };
        // The longest TF_CONFIG of a role is its last index's (role names and index digits
        // both vary).
        for slice in &roles.slices {
            let bytes = env_string_len(
                configs.cluster_of(slice.role),
                slice.role,
                slice.count - 1,
                configs.rpc_layer.as_deref(),
            ) - NAME.len()
                + longest_name.len();
            check_env_size(longest_name, bytes, configs.tasks)?;
        }
        Ok(configs)
    }

    /// The `cluster` object a task of `role` gets.
    fn cluster_of(&self, role: Role) -> &str {
        match (role, &self.evaluator) {
            (Role::Evaluator, Some(json)) => json,
            _ => &self.trainers,
        }
    }

    /// The TF_CONFIG of `role`'s task `index`, in a string of its own.
    pub fn render(&self, role: Role, index: u32) -> String {
        let mut renderer = TaskRenderer::new(self.cluster_of(role), self.rpc_layer.as_deref());
        renderer.render_nul(role, index);
        let mut out = renderer.buf;
        out.pop(); // the NUL
        out
    }

    /// The buffers a node renders its tasks' TF_CONFIG in ([`TaskRenderer`]): the trainers'
    /// made now, before the tasks fork; the evaluator's (another cluster) only in its own task.
    pub fn renderers(&self) -> Renderers {
        Renderers {
            trainers: TaskRenderer::new(&self.trainers, self.rpc_layer.as_deref()),
            evaluator: None,
        }
    }

    /// A task's TF_CONFIG followed by a NUL, rendered in the node's buffers, and its head's
    /// length ([`TaskRenderer::render_nul`]). Its size was checked for every task when the step
    /// was planned, so a task pays no check of its own.
    pub fn render_nul<'r>(
        &self,
        renderers: &'r mut Renderers,
        role: Role,
        index: u32,
    ) -> (&'r str, usize) {
        let renderer = match (role, &self.evaluator) {
            (Role::Evaluator, Some(json)) => renderers
                .evaluator
                .get_or_insert_with(|| TaskRenderer::new(json, self.rpc_layer.as_deref())),
            _ => &mut renderers.trainers,
        };
        renderer.render_nul(role, index)
    }
}

/// Where one node's tasks render their TF_CONFIG (see [`TfConfigs::renderers`]).
#[derive(Debug, Clone)]
pub struct Renderers {
    trainers: TaskRenderer,
    evaluator: Option<TaskRenderer>,
}

/// Every task's `address:port` in rank order (DTensor's `DTENSOR_JOBS`), checked against the
/// same limit as TF_CONFIG.
pub fn rank_endpoints(
    layout: &Layout,
    endpoints: &Endpoints,
    longest_name: &'static str,
) -> Result<String> {
    let mut jobs = String::with_capacity(layout.ranks.len() * endpoints.widest_json());
    for (rank, p) in layout.ranks.iter().enumerate() {
        if rank > 0 {
            jobs.push(',');
        }
        endpoints.push_plain(&mut jobs, p.node as usize, p.slot as usize);
    }
    check_env_size(
        longest_name,
        longest_name.len() + jobs.len() + 2,
        layout.tasks(),
    )?;
    Ok(jobs)
}

/// Builds the `{"ROLE":["addr:port",...],...}` object, role by role in TensorFlow's order.
pub struct ClusterJson {
    out: String,
    jobs: usize,
    tasks_in_job: usize,
}

impl ClusterJson {
    pub fn with_capacity(bytes: usize) -> ClusterJson {
        let mut out = String::with_capacity(bytes + 2);
        out.push('{');
        ClusterJson {
            out,
            jobs: 0,
            tasks_in_job: 0,
        }
    }

    pub fn job(&mut self, role: Role) {
        if self.jobs > 0 {
            self.out.push_str("],");
        }
        self.jobs += 1;
        self.tasks_in_job = 0;
        push_json_str(&mut self.out, role.name());
        self.out.push_str(":[");
    }

    /// One endpoint: local slot `slot` of node `node`.
    pub fn endpoint(&mut self, endpoints: &Endpoints, node: usize, slot: usize) {
        if self.tasks_in_job > 0 {
            self.out.push(',');
        }
        self.tasks_in_job += 1;
        endpoints.push_json(&mut self.out, node, slot);
    }

    pub fn finish(mut self) -> String {
        if self.jobs > 0 {
            self.out.push(']');
        }
        self.out.push('}');
        self.out
    }
}

/// The length `TF_CONFIG=<value>\0` will have, without rendering it.
fn env_string_len(cluster: &str, role: Role, index: u32, rpc_layer: Option<&str>) -> usize {
    let rpc = rpc_layer.map_or(0, |r| ",\"rpc_layer\":".len() + json_str_len(r));
    NAME.len() + 1 // TF_CONFIG=
        + "{\"cluster\":".len() + cluster.len() + rpc
        + ",\"task\":{\"type\":".len() + json_str_len(role.name())
        + ",\"index\":".len() + digits(index) + "}}".len()
        + 1 // NUL
}

/// Refuses an environment string `NAME=value\0` of `bytes` bytes that Linux would not let
/// `execve` pass (`tasks`: the step's, for the message). `name` may be one of Apptainer's
/// names for the variable; the message then says how to drop them.
pub fn check_env_size(name: &'static str, bytes: usize, tasks: u32) -> Result<()> {
    if bytes > ENV_STRING_LIMIT {
        let apptainer = super::container::APPTAINER_NAMES
            .iter()
            .any(|(_, names)| names.contains(&name));
        return Err(Error::EnvTooLarge {
            name,
            tasks,
            bytes,
            limit: ENV_STRING_LIMIT,
            hint: if apptainer {
                " (or apptainer_env=no, without Apptainer's copies of each variable)"
            } else {
                ""
            },
        });
    }
    Ok(())
}

/// Renders the TF_CONFIG of one task after another into one buffer that already holds
/// everything before the task's own part. slurmstepd makes it once per node, before the tasks
/// fork; each task process then rewrites only the tail, so the pages before it stay shared with
/// slurmstepd instead of being copied, and the NUL-terminated text goes to Slurm as it is. At
/// 4096 tasks this saves each task two fresh copies of a 90 KB string.
#[derive(Debug, Clone)]
pub struct TaskRenderer {
    buf: String,
    prefix: usize,
}

impl TaskRenderer {
    pub fn new(cluster: &str, rpc_layer: Option<&str>) -> TaskRenderer {
        // Room for the longest task part: a role name, ten digits, the closing braces, a NUL.
        let mut buf = String::with_capacity(cluster.len() + rpc_layer.map_or(0, str::len) + 96);
        buf.push_str("{\"cluster\":");
        buf.push_str(cluster);
        if let Some(rpc) = rpc_layer {
            buf.push_str(",\"rpc_layer\":");
            push_json_str(&mut buf, rpc);
        }
        buf.push_str(",\"task\":{\"type\":");
        let prefix = buf.len();
        TaskRenderer { buf, prefix }
    }

    /// One task's TF_CONFIG followed by a NUL (JSON text never holds a raw NUL), and the length
    /// of its head: the bytes before the task's own part, the same in every TF_CONFIG this
    /// renderer renders, at the start of the same buffer.
    pub fn render_nul(&mut self, role: Role, index: u32) -> (&str, usize) {
        self.buf.truncate(self.prefix);
        push_json_str(&mut self.buf, role.name());
        self.buf.push_str(",\"index\":");
        push_decimal(&mut self.buf, index.into(), 0);
        self.buf.push_str("}}\0");
        (&self.buf, self.prefix)
    }
}

fn digits(mut n: u32) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}
