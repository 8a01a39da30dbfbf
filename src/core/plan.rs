//! One step's plan: everything every task of the step needs, computed from plain values.
//!
//! The SPANK shell builds a [`StepPlan`] once per node (in slurmstepd, before the tasks fork),
//! checks it against the global ids Slurm gave this node, and then each task asks for its own
//! [`TaskEnv`]. Nothing here touches the environment or Slurm.

use super::error::{Error, Result};
use super::gpus::{self, GpuAction, GpuInputs};
use super::hostlist;
use super::layout::{parse_counts, Distribution, Layout};
use super::ports::StepPorts;
use super::settings::{EvaluatorCluster, GpuPolicy, Settings};
use super::spec::{Role, RoleTable, Spec};
use super::text;
use super::tf_config::{self, ClusterJson, TaskRenderer};
use super::topology::NodeRanks;

/// The variable DTensor's multi-client setup reads for its clients' addresses.
pub const DTENSOR_JOBS: &str = "DTENSOR_JOBS";

/// The step as Slurm describes it in the environment of slurmstepd.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepInputs<'a> {
    /// `SLURM_STEP_NODELIST`
    pub nodelist: &'a str,
    /// `SLURM_STEP_TASKS_PER_NODE`
    pub tasks_per_node: &'a str,
    /// `SLURM_DISTRIBUTION` (absent without `-m`)
    pub distribution: Option<&'a str>,
    /// `SLURM_DIST_PLANESIZE`
    pub plane_size: Option<&'a str>,
    /// `SLURM_STEP_RESV_PORTS`
    pub resv_ports: Option<&'a str>,
    /// Arbitrary distribution only: every task's host in rank order (comma separated), which
    /// srun reads from `SLURM_HOSTFILE` and passes on.
    pub task_hosts: Option<&'a str>,
    /// Slurm 26.05 and later, when the topology plugin ranks nodes: their ranks, by which
    /// Slurm orders a block step's nodes (`Err`: the ranking plugin could not be read).
    pub topology: Option<&'a Result<NodeRanks>>,
    pub job_id: u32,
    pub step_id: u32,
}

/// One slurmstepd's own step (from its SPANK items) next to the whole step srun launched (from
/// the step's environment). They differ only for a component of a heterogeneous step
/// (`srun A : B`): Slurm runs each component as a step of its own, with its own task ids from 0,
/// while the environment describes all components together; planning one component as the whole
/// step would hand two tasks the same role. `SLURM_HET_SIZE` marks heterogeneous jobs, whose
/// steps are launched per component too.
#[derive(Debug, Clone, Copy, Default)]
pub struct Component<'a> {
    /// `S_JOB_NNODES`
    pub nodes: u32,
    /// `S_JOB_TOTAL_TASK_COUNT`
    pub tasks: u32,
    /// `SLURM_STEP_NUM_NODES`
    pub step_nodes: Option<&'a str>,
    /// `SLURM_STEP_NUM_TASKS`
    pub step_tasks: Option<&'a str>,
    /// `SLURM_HET_SIZE`
    pub het_size: Option<&'a str>,
}

impl Component<'_> {
    /// Refuses a step that is one component of a heterogeneous job or step.
    pub fn check_whole_step(&self) -> Result<()> {
        if let Some(size) = self.het_size {
            return Err(Error::HeterogeneousJob { size: size.into() });
        }
        let count = |v: Option<&str>| v.and_then(text::decimal::<u32>);
        let (step_nodes, step_tasks) = (count(self.step_nodes), count(self.step_tasks));
        if step_nodes.is_some_and(|n| n != self.nodes)
            || step_tasks.is_some_and(|t| t != self.tasks)
        {
            return Err(Error::HeterogeneousStep {
                nodes: self.nodes,
                tasks: self.tasks,
                step_nodes: step_nodes.unwrap_or(self.nodes),
                step_tasks: step_tasks.unwrap_or(self.tasks),
            });
        }
        Ok(())
    }
}

/// The task that ends the step when it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decider {
    pub rank: u32,
    /// Its role (index 0 of it).
    pub role: Role,
    /// How many other tasks the step has.
    pub others: u32,
}

impl Decider {
    /// The line srun's user sees when it exits: `chief exited 0; stopping the step's other 5
    /// tasks`. `status` is the task's wait status, when Slurm gave it.
    pub fn exit_message(&self, status: Option<i32>) -> String {
        let who = match self.role {
            Role::Worker => "worker 0".to_string(),
            role => role.to_string(),
        };
        // A wait status: the exit code in bits 8-15, or the terminating signal in bits 0-6.
        let how = match status.map(|s| (s & 0x7f, (s >> 8) & 0xff)) {
            Some((0, code)) => format!("exited {code}"),
            Some((signal, _)) => format!("was killed by signal {signal}"),
            None => "ended".to_string(),
        };
        format!(
            "{who} {how}; stopping the step's other {} task{}",
            self.others,
            if self.others == 1 { "" } else { "s" }
        )
    }
}

/// What one task receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnv {
    pub role: Role,
    pub index: u32,
    pub rank: u32,
    /// `address:port` this task listens on (the evaluator's is in its own `cluster`).
    pub endpoint: String,
    pub gpus: GpuAction,
}

/// How a step's GPU tasks spread over its nodes (for `even_gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuSpread {
    /// The node with the most GPU tasks (the first of them).
    pub busiest: usize,
    /// Its GPU tasks: every GPU task gets the share a task of that node gets.
    pub most: usize,
    /// The fewest GPU tasks on a node that has any (0: no node has one).
    pub fewest: usize,
}

impl GpuSpread {
    fn of(gpu_tasks_per_node: impl Iterator<Item = usize>) -> GpuSpread {
        let mut spread = GpuSpread {
            busiest: 0,
            most: 0,
            fewest: 0,
        };
        for (node, count) in gpu_tasks_per_node.enumerate() {
            if count > spread.most {
                (spread.busiest, spread.most) = (node, count);
            }
            if count > 0 && (spread.fewest == 0 || count < spread.fewest) {
                spread.fewest = count;
            }
        }
        spread
    }
}

/// Where one node's tasks render their TF_CONFIG (see [`StepPlan::renderer`]).
#[derive(Debug, Clone)]
pub struct Renderers {
    trainers: TaskRenderer,
    evaluator: Option<TaskRenderer>,
}

#[derive(Debug, Clone)]
pub struct StepPlan {
    pub hosts: Vec<String>,
    pub layout: Layout,
    pub roles: RoleTable,
    pub ports: StepPorts,
    pub settings: Settings,
    /// The `cluster` object every trainer gets, rendered once.
    pub cluster_json: String,
    /// The evaluator's own `cluster` object (see [`EvaluatorCluster`]), when the spec has one.
    pub evaluator_json: Option<String>,
    /// With `even_gpus` on: how the step's GPU tasks spread over its nodes.
    pub gpu_spread: Option<GpuSpread>,
    /// With `dtensor=yes`: `DTENSOR_JOBS`, every task's `address:port` in rank order.
    pub dtensor_jobs: Option<String>,
}

impl StepPlan {
    /// `settings` are the admin's; the spec's per-job overrides are applied here.
    pub fn new(spec: &Spec, admin: &Settings, step: &StepInputs) -> Result<StepPlan> {
        let settings = admin.with_overrides(&spec.overrides)?;
        let hosts = hostlist::expand(step.nodelist)?;
        if hosts.is_empty() {
            return Err(Error::NoNodes);
        }
        // Two nodes of one name would get the same endpoints. Slurm never lists a node twice.
        let mut seen = std::collections::HashSet::with_capacity(hosts.len());
        if let Some(host) = hosts.iter().find(|h| !seen.insert(h.as_str())) {
            return Err(Error::NodeListedTwice {
                list: step.nodelist.to_string(),
                host: host.clone(),
            });
        }
        let counts = parse_counts("SLURM_STEP_TASKS_PER_NODE", step.tasks_per_node)?;
        if counts.len() != hosts.len() {
            return Err(Error::NodeCountMismatch {
                nodes: hosts.len(),
                counts: counts.len(),
            });
        }
        let dist = Distribution::parse(step.distribution, step.plane_size)?;
        let layout = match (dist, step.task_hosts, step.topology) {
            (Distribution::Arbitrary, Some(list), _) => {
                Layout::from_task_hosts(&hosts, &counts, &hostlist::expand(list)?)?
            }
            // srun refuses -m arbitrary without SLURM_HOSTFILE, so here the order was lost.
            (Distribution::Arbitrary, None, _) => return Err(Error::TaskOrderMissing),
            (Distribution::Block, _, Some(topology)) if hosts.len() > 1 => {
                let ranks = topology.as_ref().map_err(Clone::clone)?;
                Layout::block_in_order(&counts, &ranks.order(&hosts)?)?
            }
            _ => Layout::build(&counts, dist)?,
        };
        let tasks = layout.ranks.len() as u32;
        let roles = spec.resolve(tasks)?;

        let (busiest, max_local) = layout
            .nodes()
            .enumerate()
            .map(|(n, gtids)| (n, gtids.len()))
            .max_by_key(|&(n, len)| (len, std::cmp::Reverse(n)))
            .expect("at least one node");
        let ports = StepPorts::plan(
            &settings.ports(),
            step.resv_ports,
            step.job_id,
            step.step_id,
            max_local,
            &hosts[busiest],
        )?;

        // Each node's escaped `"address:` once; an endpoint is that plus the port.
        let prefixes: Vec<String> = hosts
            .iter()
            .map(|h| tf_config::endpoint_prefix(&settings.address.render(h)))
            .collect();
        let suffixes: Vec<String> = (0..max_local)
            .map(|slot| tf_config::endpoint_suffix(ports.of_slot(slot)))
            .collect();
        let widest = prefixes.iter().map(String::len).max().unwrap_or(0) + 7;
        let cluster_with = |listed: &dyn Fn(Role) -> bool| {
            let mut cluster = ClusterJson::with_capacity(layout.ranks.len() * widest);
            for slice in roles.slices.iter().filter(|s| listed(s.role)) {
                cluster.job(slice.role);
                for rank in slice.start..slice.start + slice.count {
                    let p = layout.ranks[rank as usize];
                    cluster.endpoint(&prefixes[p.node as usize], &suffixes[p.slot as usize]);
                }
            }
            cluster.finish()
        };
        let cluster_json = cluster_with(&Role::in_cluster);
        let has_evaluator = roles.slices.iter().any(|s| s.role == Role::Evaluator);
        let evaluator_json = has_evaluator.then(|| match settings.evaluator_cluster {
            EvaluatorCluster::Own => cluster_with(&|role| role == Role::Evaluator),
            EvaluatorCluster::Training => cluster_with(&|_| true),
        });
        let has_ps = roles.slices.iter().any(|s| s.role == Role::Ps);
        let gpu_spread = settings.even_gpus.on(!has_ps || settings.dtensor).then(|| {
            let gpu_tasks = layout.nodes().map(|gtids| {
                let gpu_task = |&&g: &&u32| {
                    let role = roles.of_rank(g).expect("roles cover every rank").0;
                    settings.gpu_roles.contains(role)
                };
                gtids.iter().filter(gpu_task).count()
            });
            GpuSpread::of(gpu_tasks)
        });
        let dtensor_jobs = if settings.dtensor {
            let mut jobs = String::with_capacity(layout.ranks.len() * widest);
            for (rank, p) in layout.ranks.iter().enumerate() {
                if rank > 0 {
                    jobs.push(',');
                }
                jobs.push_str(&settings.address.render(&hosts[p.node as usize]));
                jobs.push(':');
                text::push_decimal(&mut jobs, ports.of_slot(p.slot as usize).into(), 0);
            }
            tf_config::check_env_size(DTENSOR_JOBS, DTENSOR_JOBS.len() + jobs.len() + 2, tasks)?;
            Some(jobs)
        } else {
            None
        };
        let plan = StepPlan {
            hosts,
            layout,
            roles,
            ports,
            settings,
            cluster_json,
            evaluator_json,
            gpu_spread,
            dtensor_jobs,
        };
        // Fail for the whole step now if any task's TF_CONFIG cannot be passed to execve: the
        // longest is some role's last index (role names and index digits both vary).
        for slice in &plan.roles.slices {
            tf_config::check_size(
                plan.cluster_of(slice.role),
                slice.role,
                slice.count - 1,
                plan.settings.rpc_layer.as_deref(),
                plan.tasks(),
            )?;
        }
        Ok(plan)
    }

    /// The `cluster` object a task of `role` gets.
    fn cluster_of(&self, role: Role) -> &str {
        match (role, &self.evaluator_json) {
            (Role::Evaluator, Some(json)) => json,
            _ => &self.cluster_json,
        }
    }

    /// When `even_gpus` leaves some node's GPUs unused, the line that tells the user why, given
    /// the node's `CUDA_VISIBLE_DEVICES` (every node is taken to have as many GPUs).
    pub fn gpu_note(&self, step_gpus: Option<&str>) -> Option<String> {
        let GpuSpread {
            busiest,
            most,
            fewest,
        } = self.gpu_spread?;
        let gpus = step_gpus?
            .split(',')
            .filter(|t| !t.trim().is_empty())
            .count();
        if self.settings.gpus != GpuPolicy::Split || most == 0 || gpus < most {
            return None;
        }
        let each = gpus / most;
        if fewest == 0 || gpus / fewest == each {
            return None;
        }
        Some(format!(
            "every GPU task gets {each} GPU{}, the share of the busiest node ({}: {most} GPU tasks \
             for {gpus} GPUs), because all-reduce training needs the same count on every worker; \
             nodes with fewer tasks leave GPUs unused. Put as many tasks on every node \
             (--ntasks-per-node) to use them all, or set even_gpus=no",
            if each == 1 { "" } else { "s" },
            self.hosts[busiest],
        ))
    }

    pub fn tasks(&self) -> u32 {
        self.layout.ranks.len() as u32
    }

    /// The hosts TensorFlow dials (the node names after the `address=` template), once each.
    pub fn cluster_addresses(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.hosts
            .iter()
            .map(|h| self.settings.address.render(h))
            .filter(|a| seen.insert(a.clone()))
            .collect()
    }

    /// The task whose exit decides the job's result and ends the step (the `end_with_chief`
    /// setting; `auto` when the spec has `ps`): the chief, or the master, else worker 0, as
    /// Kubeflow's TFJob decides success. `None` when the step is not ended that way.
    pub fn decider(&self) -> Option<Decider> {
        let on =
            (self.settings.end_with_chief).on(self.roles.slices.iter().any(|s| s.role == Role::Ps));
        if !on || self.tasks() < 2 {
            return None;
        }
        [Role::Chief, Role::Master, Role::Worker]
            .into_iter()
            .find_map(|role| self.roles.slices.iter().find(|s| s.role == role))
            .map(|slice| Decider {
                rank: slice.start,
                role: slice.role,
                others: self.tasks() - 1,
            })
    }

    /// Checks this plan against the global ids Slurm really put on `node` (from
    /// `S_JOB_LOCAL_TO_GLOBAL_ID`). A difference means the reconstruction is wrong for this
    /// step, and no TF_CONFIG may be handed out.
    pub fn check_node(&self, node: usize, slurm_gtids: &[u32]) -> Result<()> {
        let ours = self.node(node)?;
        if ours != slurm_gtids {
            return Err(Error::LayoutMismatch {
                node,
                host: self.hosts[node].clone(),
                expected: join(ours),
                actual: join(slurm_gtids),
            });
        }
        Ok(())
    }

    fn node(&self, node: usize) -> Result<&[u32]> {
        self.layout.node(node).ok_or(Error::NodeOutOfRange {
            node,
            nodes: self.hosts.len(),
        })
    }

    /// The TF_CONFIG of a task, in a string of its own.
    pub fn tf_config(&self, role: Role, index: u32) -> Result<String> {
        tf_config::render(
            self.cluster_of(role),
            role,
            index,
            self.settings.rpc_layer.as_deref(),
            self.tasks(),
        )
    }

    /// The buffers a node renders its tasks' TF_CONFIG in ([`TaskRenderer`]): the trainers'
    /// made now, before the tasks fork; the evaluator's (another cluster) only in its own task.
    pub fn renderer(&self) -> Renderers {
        Renderers {
            trainers: TaskRenderer::new(&self.cluster_json, self.settings.rpc_layer.as_deref()),
            evaluator: None,
        }
    }

    /// A task's TF_CONFIG followed by a NUL, rendered in the node's buffers. Its size was
    /// checked for every task when the plan was made, so a task pays no check of its own.
    pub fn tf_config_nul<'r>(
        &self,
        renderers: &'r mut Renderers,
        role: Role,
        index: u32,
    ) -> &'r str {
        let rpc = self.settings.rpc_layer.as_deref();
        let renderer = match (role, &self.evaluator_json) {
            (Role::Evaluator, Some(json)) => renderers
                .evaluator
                .get_or_insert_with(|| TaskRenderer::new(json, rpc)),
            _ => &mut renderers.trainers,
        };
        renderer.render_nul(role, index)
    }

    /// The environment of the task at local `slot` on `node`. `step_gpus` is the node's
    /// `CUDA_VISIBLE_DEVICES` before the tasks forked, `task_gpus` the task's own now.
    pub fn task(
        &self,
        node: usize,
        slot: usize,
        step_gpus: Option<&str>,
        task_gpus: Option<&str>,
    ) -> Result<TaskEnv> {
        let gtids = self.node(node)?;
        let &rank = gtids.get(slot).ok_or(Error::SlotOutOfRange {
            node,
            slot,
            tasks: gtids.len(),
        })?;
        let (role, index) = self.roles.of_rank(rank).expect("roles cover every rank");
        let gpus = if step_gpus.is_none() || self.settings.gpus == GpuPolicy::Keep {
            // Nothing to split: spare the task the node's roles.
            GpuAction::Leave
        } else {
            let node_roles: Vec<Role> = gtids
                .iter()
                .map(|&g| self.roles.of_rank(g).expect("covered").0)
                .collect();
            gpus::assign(
                self.settings.gpus,
                self.settings.gpu_roles,
                &GpuInputs {
                    host: &self.hosts[node],
                    step: step_gpus,
                    task: task_gpus,
                    node_roles: &node_roles,
                    slot,
                    busiest: self
                        .gpu_spread
                        .map(|s| (self.hosts[s.busiest].as_str(), s.most)),
                },
            )?
        };
        Ok(TaskEnv {
            role,
            index,
            rank,
            endpoint: format!(
                "{}:{}",
                self.settings.address.render(&self.hosts[node]),
                self.ports.of_slot(slot)
            ),
            gpus,
        })
    }
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}
