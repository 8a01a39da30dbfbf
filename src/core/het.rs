//! Heterogeneous jobs and steps: one TF cluster over every component.
//!
//! Slurm launches each component of a heterogeneous step (`srun A : B`) or of a heterogeneous
//! job's step (`srun --het-group=0,1`) as a step of its own: a node's SPANK items describe only
//! its own component (task ids from 0), while the environment has only the union of the nodes.
//! Where each rank runs is known only to slurmctld, which made every component's layout. So each
//! node asks it for every component's layout (`slurm_job_step_layout_get`, once per component),
//! and rebuilds the same global map: the ranks srun hands out (`SLURM_PROCID`) are the
//! components' task ids, offset by the task counts of the components before them. Everything
//! here is pure: the shell does the asking ([`Component::kind`] says whether it must).

use super::error::{Error, Result};
use super::hostlist;
use super::layout::{Layout, TaskCounts, MAX_TASKS};
use super::text;

/// One component's layout, as slurmctld made it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ComponentLayout {
    /// Its nodes, a Slurm host list (`n[9-10]`).
    pub node_list: String,
    /// The component's task ids on each node of `node_list`, in its order.
    pub tids: Vec<Vec<u32>>,
    /// Its task count.
    pub tasks: u32,
}

/// One slurmstepd's own step (from its SPANK items) next to the whole step srun launched (from
/// the step's environment). `SLURM_HET_SIZE` marks a heterogeneous job, whose components are jobs
/// of their own; a component of a heterogeneous step inside a normal allocation shows only as
/// counts that differ from the environment's.
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

/// How the shell learns where every rank of the step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// A whole step: from the environment, as always.
    Whole,
    /// A step of a heterogeneous job of `size` components (`SLURM_HET_SIZE`): each is a job of
    /// its own, whose ids are in [`job_ids`]; the step may cover some of them (`--het-group`).
    HetJob { size: u32, step_tasks: u32 },
    /// A component of a heterogeneous step: the components are 0, 1, ... of this job's step,
    /// until their tasks add up to the step's.
    HetStep { step_tasks: u32 },
}

/// The most components a node asks slurmctld about: `SLURM_HET_SIZE` comes from the step's
/// environment, and each component costs every node one request. Slurm documents no maximum;
/// 128 is a bound for a broken environment, far above the two or three components of the
/// shapes heterogeneous jobs are for.
pub const MAX_COMPONENTS: u32 = 128;

impl Component<'_> {
    pub fn kind(&self) -> Result<StepKind> {
        let count = |v: Option<&str>| v.and_then(text::decimal::<u32>);
        let (step_nodes, step_tasks) = (count(self.step_nodes), count(self.step_tasks));
        if let Some(size) = self.het_size {
            let size = text::decimal::<u32>(size)
                .filter(|s| (1..=MAX_COMPONENTS).contains(s))
                .ok_or_else(|| Error::HetSize { value: size.into() })?;
            let step_tasks = step_tasks.ok_or(Error::HetStepTasks)?;
            return Ok(StepKind::HetJob { size, step_tasks });
        }
        if step_nodes.is_some_and(|n| n != self.nodes)
            || step_tasks.is_some_and(|t| t != self.tasks)
        {
            let step_tasks = step_tasks.ok_or(Error::HetStepTasks)?;
            return Ok(StepKind::HetStep { step_tasks });
        }
        Ok(StepKind::Whole)
    }
}

/// The job id of each component of a heterogeneous job: `SLURM_JOB_ID_HET_GROUP_g`, or the
/// older `SLURM_JOB_ID_PACK_GROUP_g` that srun alone sets when it makes the job itself.
pub fn job_ids(size: u32, env: impl Fn(&str) -> Option<String>) -> Result<Vec<u32>> {
    (0..size)
        .map(|g| {
            ["HET", "PACK"]
                .iter()
                .find_map(|kind| env(&format!("SLURM_JOB_ID_{kind}_GROUP_{g}")))
                .and_then(|id| text::decimal::<u32>(&id))
                .ok_or(Error::HetJobId { component: g })
        })
        .collect()
}

/// What a node asks slurmctld for one component's layout: `ask(job_id, component)`, where
/// `component` is `None` for a component of a heterogeneous job (a job of its own) and the
/// component's index for a heterogeneous step's.
pub type Ask<'a> = dyn FnMut(u32, Option<u32>) -> std::result::Result<ComponentLayout, String> + 'a;

/// What slurmctld's record of a job says of it (`slurm_load_job`): whom it belongs to, and
/// which heterogeneous job it is a component of (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRecord {
    pub user_id: u32,
    pub het_job_id: u32,
}

/// What a node asks slurmctld of one job: its record, `None` when slurmctld has no such job,
/// or why it did not answer.
pub type Lookup<'a> = dyn FnMut(u32) -> std::result::Result<Option<JobRecord>, String> + 'a;

/// The component jobs of a heterogeneous job's step, as far as slurmctld vouches for them: the
/// ids the step's environment names ([`job_ids`]), each checked against slurmctld's record
/// (`lookup`) before any of them is asked about or stopped.
///
/// The environment is the user's (`srun --export=ALL,SLURM_JOB_ID_HET_GROUP_1=J` sends any
/// value to every node), while slurmstepd runs as root, whom slurmctld lets ask about and stop
/// any job. So every named job, and the node's own job (`own_job`, `S_JOB_ID`: Slurm's launch
/// credential), must be a component of the heterogeneous job the first names, and belong to
/// the step's user (`uid`, `S_JOB_UID`), by slurmctld's records. Anything else is refused
/// with one line, the same whatever the job is, so that it tells nobody whose a job is.
pub fn vouched_job_ids(
    size: u32,
    env: impl Fn(&str) -> Option<String>,
    own_job: u32,
    uid: u32,
    lookup: &mut Lookup,
) -> Result<Vec<u32>> {
    let named = job_ids(size, env)?;
    let leader = named[0];
    let mut checked: Vec<u32> = Vec::with_capacity(named.len() + 1);
    for (job_id, name) in named
        .iter()
        .zip(0..)
        .map(|(&id, g)| (id, Some(g)))
        .chain([(own_job, None)])
    {
        if checked.contains(&job_id) {
            continue;
        }
        let refused = |reason: Option<String>| Error::HetJobNotVouched {
            job_id,
            named: name.map_or_else(
                || "the step's own job".to_string(),
                |g| format!("SLURM_JOB_ID_HET_GROUP_{g}"),
            ),
            leader,
            reason: reason.map_or_else(String::new, |r| format!(" (slurmctld: {r})")),
        };
        match lookup(job_id).map_err(|reason| refused(Some(reason)))? {
            Some(record) if record.user_id == uid && record.het_job_id == leader => {
                checked.push(job_id)
            }
            _ => return Err(refused(None)),
        }
    }
    Ok(named)
}

/// The step's ranks for a heterogeneous job or step, from every component's layout asked of
/// slurmctld through `ask`; `None` for a whole step, which asks nothing.
/// - A heterogeneous job's components are `jobs` ([`vouched_job_ids`]), each asked once: a
///   component the step does not cover (`--het-group`) is refused, and the task counts say
///   whether that mattered.
/// - A heterogeneous step's components are 0, 1, ... of this node's job, asked until one is
///   refused or their tasks add up to the step's, at most [`MAX_COMPONENTS`].
pub fn probe(kind: &StepKind, own: Own, jobs: &[u32], ask: &mut Ask) -> Result<Option<HetLayout>> {
    let (answers, step_tasks) = match *kind {
        StepKind::Whole => return Ok(None),
        StepKind::HetJob { step_tasks, .. } => {
            let answers = jobs
                .iter()
                .copied()
                .zip(0..)
                .map(|(job_id, component)| Answer {
                    component,
                    job_id,
                    layout: ask(job_id, None),
                })
                .collect::<Vec<_>>();
            (answers, step_tasks)
        }
        StepKind::HetStep { step_tasks } => {
            let mut answers: Vec<Answer> = Vec::new();
            let mut found = 0u64;
            for component in 0..MAX_COMPONENTS {
                let layout = ask(own.job_id, Some(component));
                let refused = layout.is_err();
                found += layout.as_ref().map_or(0, |l| u64::from(l.tasks));
                answers.push(Answer {
                    component,
                    job_id: own.job_id,
                    layout,
                });
                if refused || found >= u64::from(step_tasks) {
                    break;
                }
            }
            (answers, step_tasks)
        }
    };
    HetLayout::new(&answers, step_tasks, own).map(Some)
}

/// What slurmctld answered for one component: its layout, or why it has none (a component that
/// is not part of this step, or a failed request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The component: its index in the heterogeneous step, or its group in the job.
    pub component: u32,
    /// The job the component's step belongs to.
    pub job_id: u32,
    pub layout: std::result::Result<ComponentLayout, String>,
}

/// This slurmstepd's own component, from its SPANK items: the component whose layout has
/// these tasks at this node index. slurmstepd knows no node name before the tasks start, and a
/// heterogeneous step's components all have the node's job id: two components of equal shape
/// (say one node and two tasks each) are told apart by the machine's host name.
#[derive(Debug, Clone, Copy)]
pub struct Own<'a> {
    /// `S_JOB_ID`
    pub job_id: u32,
    /// `S_JOB_NODEID`: this node's index in its component.
    pub node: usize,
    /// `S_JOB_NNODES`, `S_JOB_TOTAL_TASK_COUNT`: its component's.
    pub nodes: u32,
    pub tasks: u32,
    /// The component's task ids on this node (`S_JOB_LOCAL_TO_GLOBAL_ID`).
    pub gtids: &'a [u32],
    /// The machine's host name (short), when it can be read.
    pub hostname: Option<&'a str>,
}

impl Own<'_> {
    /// Whether `layout` (of `job_id`, over `nodes`) can be this node's component; `by_name`
    /// also requires the node at this index to have the machine's host name.
    fn fits(&self, job_id: u32, nodes: &[String], layout: &ComponentLayout, by_name: bool) -> bool {
        job_id == self.job_id
            && nodes.len() == self.nodes as usize
            && layout.tasks == self.tasks
            && layout.tids.get(self.node).is_some_and(|t| t == self.gtids)
            && (!by_name || nodes.get(self.node).map(String::as_str) == self.hostname)
    }
}

/// Every rank of a heterogeneous step, rebuilt from its components' layouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HetLayout {
    /// The step's hosts: each component's nodes in its order, each host once.
    pub hosts: Vec<String>,
    /// Every rank's host index in `hosts`, in rank order.
    rank_hosts: Vec<usize>,
    /// This node's component: its index among the step's components, and its first rank.
    pub own_component: usize,
    pub own_offset: u32,
    /// This node's index in `hosts`.
    own_node: usize,
    /// Every job whose step must end when the step ends (one for a heterogeneous step).
    pub jobs: Vec<u32>,
}

impl HetLayout {
    /// The step's components in order: those slurmctld had a layout for, each rank
    /// `offset + task id`, until their tasks add up to `step_tasks`. A missing component whose
    /// tasks the step lacks, a layout that does not add up, or a node whose own tasks differ
    /// from the rebuilt map is an error: the step stops rather than run a wrong cluster.
    pub fn new(answers: &[Answer], step_tasks: u32, own: Own) -> Result<HetLayout> {
        let present = present(answers, step_tasks)?;
        let mut step = Rebuilding {
            hosts: Vec::new(),
            index: std::collections::HashMap::new(),
            rank_hosts: vec![usize::MAX; step_tasks as usize],
            jobs: Vec::new(),
            fitting: Vec::new(),
        };
        let mut offset = 0u32;
        for (i, (answer, layout)) in present.into_iter().enumerate() {
            step.add(i, answer, layout, offset, &own)?;
            offset += layout.tasks;
        }
        let (own_component, own_offset, own_node) = step.own(&own)?;
        Ok(HetLayout {
            hosts: step.hosts,
            rank_hosts: step.rank_hosts,
            own_component,
            own_offset,
            own_node,
            jobs: step.jobs,
        })
    }

    /// The job the step's ports follow: the first component's (each component of a
    /// heterogeneous job is a job of its own, and every node must pick the same ports). `jobs`
    /// is never empty: [`HetLayout::new`] found this node's component among them.
    pub fn ports_job(&self) -> u32 {
        self.jobs.first().copied().unwrap_or_default()
    }

    /// The step's layout over `hosts`: each host's ranks in rank order.
    pub fn layout(&self) -> Result<Layout> {
        let mut counts = vec![0u32; self.hosts.len()];
        for &h in &self.rank_hosts {
            counts[h] += 1;
        }
        let task_hosts: Vec<String> = self
            .rank_hosts
            .iter()
            .map(|&h| self.hosts[h].clone())
            .collect();
        Layout::from_task_hosts(&self.hosts, &TaskCounts::from_counts(counts), &task_hosts)
    }

    /// This node's index in [`Self::hosts`].
    pub fn own_node(&self) -> usize {
        self.own_node
    }

    /// The slot in `layout` (this step's, from [`Self::layout`]) of each of this node's tasks,
    /// given their component task ids: components that share the node share its slots.
    pub fn slots(&self, layout: &Layout, gtids: &[u32]) -> Vec<usize> {
        gtids
            .iter()
            .map(|&t| layout.ranks[(self.own_offset + t) as usize].slot as usize)
            .collect()
    }
}

/// The components slurmctld had a layout for, once their tasks are known to add up to the
/// step's (`step_tasks` bounded first, before anything is allocated from it).
fn present(answers: &[Answer], step_tasks: u32) -> Result<Vec<(&Answer, &ComponentLayout)>> {
    if u64::from(step_tasks) > MAX_TASKS {
        return Err(Error::TooManyTasks {
            var: "SLURM_STEP_NUM_TASKS",
            value: step_tasks.to_string(),
            limit: MAX_TASKS,
        });
    }
    let present: Vec<(&Answer, &ComponentLayout)> = answers
        .iter()
        .filter_map(|a| Some((a, a.layout.as_ref().ok()?)))
        .collect();
    let total: u64 = present.iter().map(|(_, l)| u64::from(l.tasks)).sum();
    if total != u64::from(step_tasks) {
        let refused = answers
            .iter()
            .filter_map(|a| Some(format!("{}: {}", a.component, a.layout.as_ref().err()?)))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Error::HetLayoutsShort {
            found: total,
            step_tasks,
            refused: if refused.is_empty() {
                "none".into()
            } else {
                refused
            },
        });
    }
    Ok(present)
}

/// A component that has this node's tasks.
#[derive(Debug, Clone, Copy)]
struct Fitting {
    /// Its index among the present components, its first rank, its node's index in the step's
    /// hosts.
    component: usize,
    offset: u32,
    node: usize,
    /// Its node at this index has the machine's host name.
    named: bool,
}

/// The step as [`HetLayout::new`] puts it together, one component at a time.
struct Rebuilding {
    hosts: Vec<String>,
    index: std::collections::HashMap<String, usize>,
    rank_hosts: Vec<usize>,
    jobs: Vec<u32>,
    fitting: Vec<Fitting>,
}

impl Rebuilding {
    /// Places component `i`'s ranks (`offset + task id`) on its hosts, after checking its
    /// layout, and notes whether it can be this node's.
    fn add(
        &mut self,
        i: usize,
        answer: &Answer,
        layout: &ComponentLayout,
        offset: u32,
        own: &Own,
    ) -> Result<()> {
        let nodes = hostlist::expand(&layout.node_list)?;
        let bad = |reason: String| Error::HetLayout {
            component: answer.component,
            reason,
        };
        if nodes.len() != layout.tids.len() {
            return Err(bad(format!(
                "{} nodes ({}) but task ids for {}",
                nodes.len(),
                layout.node_list,
                layout.tids.len()
            )));
        }
        let mut seen = vec![false; layout.tasks as usize];
        for (node, tids) in nodes.iter().zip(&layout.tids) {
            let at = self.host(node);
            for &tid in tids {
                match seen.get_mut(tid as usize) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(bad(format!(
                            "task id {tid} is out of its {} tasks or listed twice",
                            layout.tasks
                        )))
                    }
                }
                self.rank_hosts[(offset + tid) as usize] = at;
            }
        }
        if seen.iter().any(|s| !*s) {
            return Err(bad("some task ids are on no node".into()));
        }
        if own.fits(answer.job_id, &nodes, layout, false) {
            self.fitting.push(Fitting {
                component: i,
                offset,
                node: self.index[&nodes[own.node]],
                named: own.fits(answer.job_id, &nodes, layout, true),
            });
        }
        if !self.jobs.contains(&answer.job_id) {
            self.jobs.push(answer.job_id);
        }
        Ok(())
    }

    /// `node`'s index in the step's hosts, added at the end the first time it is seen.
    fn host(&mut self, node: &str) -> usize {
        if let Some(&at) = self.index.get(node) {
            return at;
        }
        self.hosts.push(node.to_string());
        self.index.insert(node.to_string(), self.hosts.len() - 1);
        self.hosts.len() - 1
    }

    /// This node's component (its index, first rank and node): the only one that fits, or
    /// the only one that fits under the machine's host name.
    fn own(&self, own: &Own) -> Result<(usize, u32, usize)> {
        let named: Vec<Fitting> = self.fitting.iter().filter(|f| f.named).copied().collect();
        match (self.fitting.as_slice(), named.as_slice()) {
            ([only], _) | (_, [only]) => Ok((only.component, only.offset, only.node)),
            _ => Err(Error::HetOwnComponent {
                host: own.hostname.unwrap_or("?").into(),
                fitting: self.fitting.len(),
            }),
        }
    }
}
