//! One step's plan: everything every task of the step needs, computed from plain values.
//!
//! The SPANK shell builds a [`StepPlan`] once per node (in slurmstepd, before the tasks fork)
//! from the step's inputs ([`StepInputs`]), checks it against the global ids Slurm gave this
//! node, and then each task asks for its whole environment ([`StepPlan::task`]: every variable
//! to set, with its value). Nothing here touches the environment or Slurm. Each concern lives
//! in its own module; [`StepPlan::new`] only composes them.

use super::address::Endpoints;
use super::collectives;
use super::container::{self, ApptainerEnv, Runtimes};
use super::ending::{Decider, EndPolicy, StepEnd, WorkerSeen};
use super::error::{Error, Result};
use super::gpu_affinity::{Basis, Hardware};
use super::gpus::{self, Assigned, GpuAction, GpuInputs, GpuSpread};
use super::het::HetLayout;
use super::hostlist;
use super::isolation::rules::StepFirewall;
use super::jax::JaxStep;
use super::keras::{self, Keras};
use super::layout::{Distribution, Layout, TaskCounts, TASK_HOSTS_VAR};
use super::place::{NodeFacts, NodeGpus, Place};
use super::ports::StepPorts;
use super::proxy::{self, ProxyEnv};
use super::settings::{GpuPolicy, Settings};
use super::spec::{Role, RoleTable, Spec};
use super::text;
use super::tf_config::{self, Renderers, TfConfigs};
use super::topology::NodeRanks;
use super::torch::TorchStep;
use super::tuner::TunerStep;
use std::borrow::Cow;

/// The variables tfcluster sets only where the task's environment has none of its own: the
/// order CUDA numbers GPUs in, and the collectives' interface.
pub const DEFAULTED: [&str; 3] = [gpus::DEVICE_ORDER, collectives::NCCL, collectives::GLOO];

/// What a task loses when srun handed the task order over (`-m arbitrary`): it is not for the
/// program.
pub const HAND_OVER: [&str; 1] = [TASK_HOSTS_VAR];
/// What a task loses when no environment could be made for it: the hand-over, and a TF_CONFIG
/// it inherited (a stale one would be worse than none).
pub const UNSET_ON_ERROR: [&str; 2] = [tf_config::NAME, TASK_HOSTS_VAR];

/// The step as Slurm describes it in the environment of slurmstepd.
#[derive(Debug, Clone, Default)]
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
    /// srun reads from `SLURM_HOSTFILE` and passes on in [`TASK_HOSTS_VAR`].
    pub task_hosts: Option<&'a str>,
    /// Slurm 26.05 and later, when the topology plugin ranks nodes: their ranks, by which
    /// Slurm orders a block step's nodes (`Err`: the ranking plugin could not be read).
    pub topology: Option<&'a Result<NodeRanks>>,
    /// A heterogeneous job's or step's components, as slurmctld laid them out: then every
    /// rank's host comes from them, not from the fields above, and ports are never Slurm's
    /// (its reservation is per component, merged in `SLURM_STEP_RESV_PORTS`).
    pub het: Option<&'a HetLayout>,
    /// The job's proxy variables ([`proxy::READ`]).
    pub proxies: ProxyEnv,
    /// The node's job (`S_JOB_ID`); a heterogeneous job's ports follow its first component's
    /// ([`HetLayout::ports_job`]).
    pub job_id: u32,
    pub step_id: u32,
}

impl StepInputs<'_> {
    /// The step's hosts and where each rank runs: from its components' layouts for a
    /// heterogeneous job or step, from the environment otherwise.
    fn layout(&self) -> Result<(Vec<String>, Layout)> {
        if let Some(het) = self.het {
            return Ok((het.hosts.clone(), het.layout()?));
        }
        let hosts = hostlist::step_nodes(self.nodelist)?;
        let counts = TaskCounts::parse("SLURM_STEP_TASKS_PER_NODE", self.tasks_per_node)?;
        let dist = Distribution::parse(self.distribution, self.plane_size)?;
        let layout = Layout::for_step(&hosts, &counts, dist, self.task_hosts, self.topology)?;
        Ok((hosts, layout))
    }
}

/// One task's place in the step and its whole environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnv<'r> {
    pub role: Role,
    pub index: u32,
    pub rank: u32,
    /// `address:port` this task listens on (the evaluator's is in its own `cluster`).
    pub endpoint: String,
    pub gpus: GpuAction,
    /// How the node's GPUs were split among its tasks, where they were.
    pub gpu_basis: Option<Basis>,
    /// Every variable to set, in order, each value followed by a NUL (TF_CONFIG is the node's
    /// render buffer, handed to Slurm as it is).
    pub set: Vec<(&'static str, Cow<'r, str>)>,
    /// The length of TF_CONFIG's head: its leading bytes, before the task's own part, that every
    /// TF_CONFIG rendered in the same buffer (at the same address) starts with
    /// ([`crate::core::tf_config::TaskRenderer`]). A task rewrites its copy of the first task's
    /// TF_CONFIG from there on (`rewrite` in [`crate::core::env_entries`]).
    pub tf_config_head: usize,
    /// Variables to remove.
    pub unset: &'static [&'static str],
}

/// Whether srun ran with `-v`: srun exports its log level in `SRUN_DEBUG`, above info (3) with
/// `-v`. Each task then reports what it got ([`TaskEnv::report`]).
pub fn reports_tasks(srun_debug: Option<&str>) -> bool {
    srun_debug
        .and_then(text::decimal::<u32>)
        .is_some_and(|level| level > 3)
}

/// A task's error line: the message, then the node and the local task, and that the task has no
/// TF_CONFIG. From 23.02 (SchedMD's builds) and 25.05 (all) Slurm no longer puts the node's name
/// before lines forwarded from slurmstepd, so the line names it.
pub fn task_error_line(message: &str, node: Option<&str>, local_task: Option<u32>) -> String {
    let node = node.map(|n| format!("node {n}"));
    let task = local_task.map(|t| format!("local task {t}"));
    let place: Vec<String> = [node, task].into_iter().flatten().collect();
    match place.is_empty() {
        true => format!("{message} [TF_CONFIG not set]"),
        false => format!("{message} [{}; TF_CONFIG not set]", place.join(", ")),
    }
}

impl TaskEnv<'_> {
    /// What `srun -v` prints for this task: its rank, role, endpoint and GPUs, where
    /// `task_gpus` is the `CUDA_VISIBLE_DEVICES` Slurm gave it (what it keeps when tfcluster
    /// leaves the variable alone).
    pub fn report(&self, task_gpus: Option<&str>) -> String {
        let gpus = match &self.gpus {
            GpuAction::Leave => task_gpus.unwrap_or("unset"),
            GpuAction::Set(value) if value.is_empty() => "none",
            GpuAction::Set(value) => value,
        };
        format!(
            "rank {} is {}:{} at {}, GPUs {gpus}",
            self.rank, self.role, self.index, self.endpoint
        )
    }

    /// The length of the head `value` shares with every TF_CONFIG rendered in its buffer
    /// ([`TaskEnv::tf_config_head`]): where `value` is this task's TF_CONFIG, under its own name
    /// or a container runtime's (the same buffer); 0 for any other value.
    pub fn head_of(&self, value: &str) -> usize {
        match self.set.iter().find(|(name, _)| *name == tf_config::NAME) {
            Some((_, tf_config)) if std::ptr::eq(tf_config.as_ptr(), value.as_ptr()) => {
                self.tf_config_head
            }
            _ => 0,
        }
    }

    /// The value `set` gives `name` (without its NUL).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.set
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| without_nul(v))
    }
}

fn without_nul(value: &str) -> &str {
    value.strip_suffix('\0').unwrap_or(value)
}

fn with_nul(mut value: String) -> Cow<'static, str> {
    value.push('\0');
    Cow::Owned(value)
}

#[derive(Debug, Clone)]
pub struct StepPlan {
    pub hosts: Vec<String>,
    pub layout: Layout,
    pub roles: RoleTable,
    pub endpoints: Endpoints,
    pub settings: Settings,
    pub tf_configs: TfConfigs,
    /// What a task's end means for the step ([`super::ending`]).
    pub end_policy: EndPolicy,
    /// With `even_gpus` on: how the step's GPU tasks spread over its nodes.
    pub gpu_spread: Option<GpuSpread>,
    /// With `dtensor=yes`: `DTENSOR_JOBS`, every task's `address:port` in rank order; and
    /// `no_grpc_proxy`, when the job's environment sets a proxy. The same for every task, so
    /// kept NUL-terminated and lent to each ([`Self::dtensor_jobs`], [`Self::no_grpc_proxy`]).
    dtensor_jobs: Option<String>,
    no_grpc_proxy: Option<String>,
    /// With `jax=yes` or `keras=3`: JAX's and Keras's variables ([`super::jax`]).
    jax: Option<JaxStep>,
    /// With `torch=yes`: PyTorch's variables ([`super::torch`]).
    torch: Option<TorchStep>,
    /// With `tuner=yes`: the oracle's place ([`super::tuner`]).
    tuner: Option<TunerStep>,
    /// With `socket_ifname=yes`: this node's interface for the collectives, once the node has
    /// found it ([`Self::find_collectives_interface`]), as NCCL and gloo name it.
    collectives_ifname: Option<[String; 2]>,
    /// srun handed the task order over in the environment (`-m arbitrary`): each task drops it.
    task_hosts_passed: bool,
    /// The ports are Slurm's reservation for the step (`SLURM_STEP_RESV_PORTS`).
    ports_reserved: bool,
    /// The container runtimes this node has, once the node has looked
    /// ([`Self::find_runtimes`]); none until then.
    runtimes: Runtimes,
}

impl StepPlan {
    /// `settings` are the admin's; the spec's per-job overrides are applied here.
    pub fn new(spec: &Spec, admin: &Settings, step: &StepInputs) -> Result<StepPlan> {
        let settings = admin.with_overrides(&spec.overrides)?;
        let (hosts, layout) = step.layout()?;
        let roles = spec.resolve(layout.tasks())?;
        let (busiest, max_local) = layout.busiest();
        let ports = StepPorts::plan(
            &settings.ports(),
            step.resv_ports.filter(|_| step.het.is_none()),
            step.het.map_or(step.job_id, HetLayout::ports_job),
            step.step_id,
            max_local,
            &hosts[busiest],
        )?;
        let endpoints = Endpoints::new(&hosts, &settings.address, &ports, max_local);
        // Each variable is checked under the longest name a task may get it by.
        let apptainer = settings.apptainer_env != ApptainerEnv::No;
        // DTensor's list first: it is the shorter, so its own error names it.
        let dtensor_jobs = match settings.dtensor {
            true => Some(
                tf_config::rank_endpoints(
                    &layout,
                    &endpoints,
                    container::longest_name(tf_config::DTENSOR_JOBS, apptainer),
                )? + "\0",
            ),
            false => None,
        };
        let keras3 = settings.keras == Keras::Three;
        let jax = JaxStep::new(settings.jax, keras3, &layout, &endpoints);
        let torch = TorchStep::new(settings.torch, &roles, &layout, &endpoints)?;
        let tuner = TunerStep::new(settings.tuner, &roles, &layout, &endpoints)?;
        let tf_configs = TfConfigs::new(
            &roles,
            &layout,
            &endpoints,
            settings.evaluator_cluster,
            settings.rpc_layer.clone(),
            container::longest_name(tf_config::NAME, apptainer),
        )?;
        let gpu_spread = (settings.even_gpus)
            .on(!roles.has(Role::Ps) || settings.dtensor || jax.is_some())
            .then(|| GpuSpread::of_step(&layout, &roles, settings.gpu_roles));
        let no_grpc_proxy = match settings.grpc_proxy_bypass {
            true => proxy::no_grpc_proxy(&step.proxies, endpoints.addresses()).map(|v| v + "\0"),
            false => None,
        };
        let end_policy = EndPolicy::new(&roles, &settings, layout.tasks());
        Ok(StepPlan {
            end_policy,
            hosts,
            layout,
            roles,
            endpoints,
            settings,
            tf_configs,
            gpu_spread,
            dtensor_jobs,
            no_grpc_proxy,
            jax,
            torch,
            tuner,
            collectives_ifname: None,
            task_hosts_passed: step.task_hosts.is_some(),
            ports_reserved: matches!(ports, StepPorts::Reserved(_)),
            runtimes: Runtimes::NONE,
        })
    }

    /// When `even_gpus` leaves some node's GPUs unused, the line that tells the user why, given
    /// the node's `CUDA_VISIBLE_DEVICES`.
    pub fn gpu_note(&self, step_gpus: Option<&str>) -> Option<String> {
        if self.settings.gpus != GpuPolicy::Split {
            return None;
        }
        self.gpu_spread?.note(&self.hosts, step_gpus)
    }

    pub fn tasks(&self) -> u32 {
        self.layout.tasks()
    }

    /// `DTENSOR_JOBS` (with `dtensor=yes`).
    pub fn dtensor_jobs(&self) -> Option<&str> {
        self.dtensor_jobs.as_deref().map(without_nul)
    }

    /// `no_grpc_proxy` (when a proxy is set and `grpc_proxy_bypass` is on).
    pub fn no_grpc_proxy(&self) -> Option<&str> {
        self.no_grpc_proxy.as_deref().map(without_nul)
    }

    /// The task whose exit ends the step (`end_with_chief`; [`EndPolicy`]).
    pub fn decider(&self) -> Option<Decider> {
        self.end_policy.decider
    }

    /// What global rank `rank`'s end with wait status `status` means for the step
    /// ([`EndPolicy::ending`]; `seen`: what the node saw of it, asked when a worker failed).
    pub fn ending(
        &self,
        rank: u32,
        status: Option<i32>,
        oom_killed: impl FnOnce() -> bool,
        seen: impl FnOnce() -> WorkerSeen,
    ) -> Option<StepEnd> {
        let task = |rank: u32| {
            let (role, index) = self.roles.of_rank(rank)?;
            let node = self.layout.ranks.get(rank as usize)?.node as usize;
            Some((role, index, self.hosts.get(node)?.as_str()))
        };
        self.end_policy.ending(rank, status, task, oom_killed, seen)
    }

    /// With [`EndPolicy::watches_workers`], the server ports of node `node`'s workers that the
    /// node watches for the chief's connection, by global rank (`place`: the node's place);
    /// empty otherwise.
    pub fn watched_workers(&self, place: &Place) -> Vec<(u32, u16)> {
        if !self.end_policy.watches_workers() {
            return Vec::new();
        }
        let ranks = self.layout.node(place.node).unwrap_or(&[]);
        place
            .slots
            .iter()
            .filter_map(|&slot| {
                let rank = *ranks.get(slot)?;
                let (role, _) = self.roles.of_rank(rank)?;
                let port = text::decimal(self.endpoints.port(slot))?;
                (role == Role::Worker).then_some((rank, port))
            })
            .collect()
    }

    /// With `isolate=yes`, the nftables script that installs node `node`'s firewall for this
    /// step ([`super::isolation`]); `None` without it.
    pub fn firewall(
        &self,
        job_id: u32,
        step_id: u32,
        uid: u32,
        node: usize,
        resolve: impl FnMut(&str) -> std::result::Result<Vec<std::net::IpAddr>, String>,
    ) -> Result<Option<String>> {
        self.isolation(job_id, step_id, uid, node)
            .map(|firewall| firewall.script(resolve))
            .transpose()
    }

    /// With `jax=yes` or `keras=3`, on node `node`: rank 0's coordinator binds rank 0's address
    /// alone where the node resolves it (`resolve`) to addresses others reach
    /// ([`JaxStep::bind`]). Whether it does.
    pub fn bind_jax_coordinator(
        &mut self,
        node: usize,
        resolve: impl FnOnce(&str) -> std::result::Result<Vec<std::net::IpAddr>, String>,
    ) -> bool {
        self.jax.as_mut().is_some_and(|jax| jax.bind(node, resolve))
    }

    /// With `apptainer_env=yes` (the default): the container runtimes the node has
    /// ([`container::Runtimes::find`], which `find` looks up), whose names its tasks then get;
    /// not asked with any other value.
    pub fn find_runtimes(&mut self, find: impl FnOnce() -> Runtimes) {
        if self.settings.apptainer_env == container::ApptainerEnv::Found {
            self.runtimes = find();
        }
    }

    /// With `socket_ifname=yes`, on node `node`: the interface its tasks' collectives use, the
    /// one that holds the node's address as the node resolves it (`resolve`), among the node's
    /// `interfaces` ([`collectives::interface`]); neither is asked without the setting. The
    /// line `srun -v` prints for the node.
    pub fn find_collectives_interface(
        &mut self,
        node: usize,
        resolve: impl FnOnce(&str) -> std::result::Result<Vec<std::net::IpAddr>, String>,
        interfaces: impl FnOnce() -> Vec<(String, std::net::IpAddr)>,
    ) -> Option<String> {
        if !self.settings.socket_ifname {
            return None;
        }
        let host = &self.hosts[node];
        let address = self.endpoints.address(node);
        match collectives::interface(&resolve(address), &interfaces()) {
            Ok(ifname) => {
                let line = format!(
                    "node {host}: the collectives use {ifname}, which holds {address} ({} and {})",
                    collectives::NCCL,
                    collectives::GLOO
                );
                self.collectives_ifname = Some(collectives::values(&ifname));
                Some(line)
            }
            Err(why) => Some(format!(
                "node {host}: {} and {} not set: {why}; NCCL and gloo choose",
                collectives::NCCL,
                collectives::GLOO
            )),
        }
    }

    /// The ports node `node`'s tasks listen on: what the node claims ([`super::claims`]).
    pub fn node_ports(&self, node: usize) -> Vec<u16> {
        let local = self.layout.node(node).map_or(0, <[u32]>::len);
        self.endpoints.ports_of(local)
    }

    /// With `isolate=yes`, node `node`'s firewall for this step: its script and its own ports.
    pub fn isolation(
        &self,
        job_id: u32,
        step_id: u32,
        uid: u32,
        node: usize,
    ) -> Option<StepFirewall<'_>> {
        self.settings.isolate.then_some(StepFirewall {
            job_id,
            step_id,
            uid,
            node,
            layout: &self.layout,
            endpoints: &self.endpoints,
            port_range: (!self.ports_reserved).then_some(self.settings.port_range),
        })
    }

    /// This node's place in the plan ([`Place::new`]): `het` for a heterogeneous job's or
    /// step's component, `facts` what Slurm says of the node.
    pub fn place(&self, het: Option<&HetLayout>, facts: &NodeFacts) -> Result<Place> {
        Place::new(&self.layout, &self.hosts, het, facts)
    }

    fn node(&self, node: usize) -> Result<&[u32]> {
        self.layout.node(node).ok_or(Error::NodeOutOfRange {
            node,
            nodes: self.hosts.len(),
        })
    }

    /// The TF_CONFIG of `role`'s task `index`, in a string of its own.
    pub fn tf_config(&self, role: Role, index: u32) -> String {
        self.tf_configs.render(role, index)
    }

    /// The buffers this node's tasks render their TF_CONFIG in, made before they fork.
    pub fn renderers(&self) -> Renderers {
        self.tf_configs.renderers()
    }

    /// The whole environment of this node's local task `local` ([`Place`]: the node's place):
    /// its TF_CONFIG (rendered in `renderers`), GPU slice, `no_grpc_proxy`, DTensor variables,
    /// `TF_USE_LEGACY_KERAS`, JAX's and Keras's variables, PyTorch's and Keras Tuner's, and each of them
    /// again under the container runtimes' names when `apptainer_env` says so. `task_gpus` is
    /// the task's own `CUDA_VISIBLE_DEVICES` now, `program` the task's argv\[0\], `own` whether
    /// the task's environment has its own value of a name: the variables tfcluster only
    /// defaults ([`DEFAULTED`]) are set only where it has none; `hardware` what the task knows
    /// of its node's GPUs and CPUs (`None`: nothing, and its slice is contiguous).
    #[allow(clippy::too_many_arguments)]
    pub fn task<'r>(
        &'r self,
        place: &Place,
        local: usize,
        task_gpus: Option<&str>,
        program: Option<&str>,
        own: &dyn Fn(&str) -> bool,
        hardware: Option<Hardware>,
        renderers: &'r mut Renderers,
    ) -> Result<TaskEnv<'r>> {
        let node = place.node;
        let gtids = self.node(node)?;
        let outside = || Error::SlotOutOfRange {
            node,
            slot: local,
            tasks: gtids.len(),
        };
        let slot = *place.slots.get(local).ok_or_else(outside)?;
        let &rank = gtids.get(slot).ok_or_else(outside)?;
        let (role, index) = self.roles.of_rank(rank).expect("roles cover every rank");
        let Assigned {
            action: gpus,
            basis: gpu_basis,
        } = match &place.gpus {
            NodeGpus::Step(step_gpus) => self.gpus(
                node,
                slot,
                gtids,
                (step_gpus.as_deref(), task_gpus),
                hardware,
            )?,
            NodeGpus::Hidden => GpuAction::Set(String::new()).into(),
        };
        let mut set = Vec::with_capacity(12);
        let (tf_config, tf_config_head) = self.tf_configs.render_nul(renderers, role, index);
        set.push((tf_config::NAME, Cow::Borrowed(tf_config)));
        if let GpuAction::Set(value) = &gpus {
            set.push((gpus::VAR, with_nul(value.clone())));
            if !own(gpus::DEVICE_ORDER) {
                set.push((gpus::DEVICE_ORDER, Cow::Borrowed(gpus::PCI_BUS_ORDER)));
            }
        }
        if let Some(values) = &self.collectives_ifname {
            for (name, value) in [collectives::NCCL, collectives::GLOO]
                .into_iter()
                .zip(values)
            {
                if !own(name) {
                    set.push((name, Cow::Borrowed(value.as_str())));
                }
            }
        }
        if let Some(value) = &self.no_grpc_proxy {
            set.push((proxy::VAR, Cow::Borrowed(value.as_str())));
        }
        if let Some(jobs) = &self.dtensor_jobs {
            set.push((tf_config::DTENSOR_JOBS, Cow::Borrowed(jobs.as_str())));
            set.push((
                tf_config::DTENSOR_CLIENT_ID,
                Cow::Owned(text::decimal_nul(rank)),
            ));
        }
        if let Some(value) = self.settings.keras.value_nul() {
            set.push((keras::VAR, Cow::Borrowed(value)));
        }
        if let Some(jax) = &self.jax {
            let slice = match &gpus {
                GpuAction::Set(value) => Some(value.as_str()),
                GpuAction::Leave => None,
            };
            jax.add(&mut set, rank, slice);
        }
        if let Some(torch) = &self.torch {
            torch.add(&mut set, rank, node, slot, gtids.len());
        }
        if let Some(tuner) = &self.tuner {
            tuner.add(&mut set, rank);
        }
        let runtimes = self.settings.apptainer_env.for_task(self.runtimes, program);
        container::add_apptainer_names(&mut set, runtimes);
        Ok(TaskEnv {
            role,
            index,
            rank,
            endpoint: self.endpoints.plain(node, slot),
            gpus,
            gpu_basis,
            set,
            tf_config_head,
            unset: if self.task_hosts_passed {
                &HAND_OVER
            } else {
                &[]
            },
        })
    }

    fn gpus(
        &self,
        node: usize,
        slot: usize,
        gtids: &[u32],
        (step_gpus, task_gpus): (Option<&str>, Option<&str>),
        hardware: Option<Hardware>,
    ) -> Result<Assigned> {
        if step_gpus.is_none() || self.settings.gpus == GpuPolicy::Keep {
            // Nothing to split: spare the task the node's roles.
            return Ok(GpuAction::Leave.into());
        }
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
                hardware,
            },
        )
    }
}
