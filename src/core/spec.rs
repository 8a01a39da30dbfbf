//! The user's `--tf-cluster[=SPEC]` value.
//!
//! `SPEC := ITEM ("," ITEM)*`, `ITEM := ROLE ":" COUNT | KEY "=" VALUE`, `COUNT := N>=1 | "*"`.
//! No SPEC at all means `worker:*`. `KEY=VALUE` items are per-job overrides of the admin's
//! settings (see `settings.rs`); they are kept as text here and checked there.
//!
//! Parsing is purely syntactic plus the rules that do not need the step (unknown roles,
//! duplicates, one `*`, singleton roles): srun can reject those in its option callback before
//! it even asks for an allocation. Fitting the counts to the step is [`Spec::resolve`].

use super::error::{Error, Result};
use super::text::decimal;
use std::fmt;

/// A TensorFlow job name. The declaration order is TensorFlow's rank order: the resolver sorts
/// job names alphabetically and hands out contiguous rank slices in that order, so `chief`
/// gets rank 0 when present.
/// `--tf-cluster=off`: the one word by which a step opts out of a batch script's
/// `#SBATCH --tf-cluster` (srun applies the script's option to every step inside it, and a
/// preparation step of one task would not fit the spec).
pub const OFF: &str = "off";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Chief,
    Evaluator,
    Master,
    Ps,
    Worker,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Chief,
        Role::Evaluator,
        Role::Master,
        Role::Ps,
        Role::Worker,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Chief => "chief",
            Role::Evaluator => "evaluator",
            Role::Master => "master",
            Role::Ps => "ps",
            Role::Worker => "worker",
        }
    }

    pub fn parse(s: &str) -> Result<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| Error::UnknownRole {
                role: s.to_string(),
            })
    }

    /// Roles TensorFlow allows at most once (Estimator, MultiWorkerMirroredStrategy).
    fn is_singleton(self) -> bool {
        matches!(self, Role::Chief | Role::Master | Role::Evaluator)
    }

    /// Whether the role is listed in the trainers' TF_CONFIG `cluster`. The evaluator is not:
    /// it is a side-car outside the training cluster, and ParameterServerStrategy's
    /// coordinator waits forever for a listed evaluator that runs no server (TensorFlow
    /// #46169). The evaluator's own `cluster` is decided by `evaluator_cluster`.
    pub fn in_cluster(self) -> bool {
        self != Role::Evaluator
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Fixed(u32),
    /// `*`: every task the fixed roles leave.
    Rest,
}

/// A parsed `--tf-cluster` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Roles in the order the user wrote them (only for messages; ranks follow [`Role`] order).
    pub roles: Vec<(Role, Count)>,
    /// `KEY=VALUE` items, in order; validated by `Settings::with_overrides`.
    pub overrides: Vec<(String, String)>,
}

impl Spec {
    /// The option's argument as Slurm hands it to the callback. sbatch and salloc pass a bare
    /// `--tf-cluster` on to the job's steps as the text `(null)` (C's rendering of a NULL
    /// argument), which means no argument.
    pub fn slurm_arg(raw: Option<&str>) -> Option<&str> {
        raw.filter(|a| *a != "(null)")
    }

    /// srun, sbatch, salloc: `--tf-cluster=` with nothing after the `=` is refused (it is
    /// typically `--tf-cluster=$ROLES` with `ROLES` unset), where a bare `--tf-cluster` means
    /// all workers. Only for the option as the user typed it (or set in the environment form),
    /// not in slurmstepd.
    pub fn check_typed(arg: Option<&str>) -> Result<()> {
        match arg {
            Some(text) if text.trim().is_empty() => Err(Error::EmptySpec),
            _ => Ok(()),
        }
    }

    /// srun, when `--tf-cluster` had no argument: `--tf-cluster ps:1,worker:3` (a space, not
    /// `=`) makes the spec the program, and every task would fail to exec it. `program` is
    /// the step's first word.
    pub fn check_program(program: &str) -> Result<()> {
        let looks_like_spec = program.contains(':')
            && Spec::parse(Some(program)).is_ok_and(|spec| !spec.roles.is_empty());
        if looks_like_spec {
            return Err(Error::SpecAsProgram {
                program: program.to_string(),
            });
        }
        Ok(())
    }

    /// Whether the option's argument is [`OFF`]: this step runs without tfcluster, whatever
    /// the job's environment (`#SBATCH --tf-cluster`) says.
    pub fn is_off(arg: Option<&str>) -> bool {
        arg.is_some_and(|a| a.trim() == OFF)
    }

    /// Parses the option's argument. `None` or an empty string is `worker:*`.
    pub fn parse(arg: Option<&str>) -> Result<Spec> {
        let mut spec = Spec {
            roles: Vec::new(),
            overrides: Vec::new(),
        };
        for item in arg.unwrap_or("").split(',').map(str::trim) {
            if item.is_empty() {
                continue;
            }
            if let Some((key, value)) = item.split_once('=') {
                spec.overrides
                    .push((key.trim().to_string(), value.trim().to_string()));
                continue;
            }
            let Some((name, count)) = item.split_once(':') else {
                return Err(Error::SpecSyntax {
                    item: item.to_string(),
                });
            };
            let role = Role::parse(name.trim())?;
            let count = parse_count(role, count.trim())?;
            spec.add(role, count)?;
        }
        if spec.roles.is_empty() {
            spec.roles.push((Role::Worker, Count::Rest));
        }
        if spec.has(Role::Chief) && spec.has(Role::Master) {
            return Err(Error::ChiefAndMaster);
        }
        Ok(spec)
    }

    fn has(&self, role: Role) -> bool {
        self.roles.iter().any(|(r, _)| *r == role)
    }

    fn add(&mut self, role: Role, count: Count) -> Result<()> {
        if self.has(role) {
            return Err(Error::DuplicateRole {
                role: role.to_string(),
            });
        }
        if count == Count::Rest {
            if let Some((first, _)) = self.roles.iter().find(|(_, c)| *c == Count::Rest) {
                return Err(Error::SeveralWildcards {
                    first: first.to_string(),
                    second: role.to_string(),
                });
            }
        }
        if let Count::Fixed(n) = count {
            if n > 1 && role.is_singleton() {
                return Err(Error::SingletonRole {
                    role: role.to_string(),
                    count: n,
                });
            }
        }
        self.roles.push((role, count));
        Ok(())
    }

    /// The spec as the user would write it, roles only (for messages).
    pub fn roles_text(&self) -> String {
        let items: Vec<String> = self
            .roles
            .iter()
            .map(|(r, c)| match c {
                Count::Fixed(n) => format!("{r}:{n}"),
                Count::Rest => format!("{r}:*"),
            })
            .collect();
        items.join(",")
    }

    /// Fits the counts to a step of `tasks` tasks.
    pub fn resolve(&self, tasks: u32) -> Result<RoleTable> {
        let fixed: u64 = self
            .roles
            .iter()
            .map(|(_, c)| match c {
                Count::Fixed(n) => u64::from(*n),
                Count::Rest => 0,
            })
            .sum();
        let wildcard = self
            .roles
            .iter()
            .find(|(_, c)| *c == Count::Rest)
            .map(|(r, _)| *r);
        let rest = match wildcard {
            Some(role) if fixed >= u64::from(tasks) => {
                return Err(Error::NothingLeftForWildcard {
                    role: role.to_string(),
                    fixed,
                    tasks,
                })
            }
            Some(role) => {
                let rest = u32::try_from(u64::from(tasks) - fixed).expect("fits: below tasks");
                if rest > 1 && role.is_singleton() {
                    return Err(Error::SingletonWildcard {
                        role: role.to_string(),
                        rest,
                        tasks,
                    });
                }
                rest
            }
            None if fixed != u64::from(tasks) => {
                return Err(Error::CountMismatch {
                    spec: self.roles_text(),
                    requested: fixed,
                    tasks,
                })
            }
            None => 0,
        };
        let mut counts: Vec<(Role, u32)> = self
            .roles
            .iter()
            .map(|(r, c)| match c {
                Count::Fixed(n) => (*r, *n),
                Count::Rest => (*r, rest),
            })
            .collect();
        counts.sort_by_key(|(r, _)| *r);
        let mut slices = Vec::with_capacity(counts.len());
        let mut start = 0;
        for (role, count) in counts {
            slices.push(RoleSlice { role, start, count });
            start += count;
        }
        Ok(RoleTable { slices })
    }
}

fn parse_count(role: Role, text: &str) -> Result<Count> {
    if text == "*" {
        return Ok(Count::Rest);
    }
    match decimal::<u32>(text) {
        Some(n) if n >= 1 => Ok(Count::Fixed(n)),
        _ => Err(Error::BadCount {
            role: role.to_string(),
            count: text.to_string(),
        }),
    }
}

/// One role's contiguous range of global ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleSlice {
    pub role: Role,
    pub start: u32,
    pub count: u32,
}

/// Global rank -> (role, index within the role), in TensorFlow's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleTable {
    pub slices: Vec<RoleSlice>,
}

impl RoleTable {
    /// What `srun -v` prints once per step before launch: the task count and each role's
    /// share, in rank order (`4 tasks as chief:1,worker:3`).
    pub fn report(&self) -> String {
        let roles: Vec<String> = self
            .slices
            .iter()
            .map(|s| format!("{}:{}", s.role, s.count))
            .collect();
        let tasks: u32 = self.slices.iter().map(|s| s.count).sum();
        format!("{tasks} tasks as {}", roles.join(","))
    }

    /// The role and index of global rank `rank`, or `None` past the end.
    pub fn of_rank(&self, rank: u32) -> Option<(Role, u32)> {
        self.slices
            .iter()
            .find(|s| rank >= s.start && rank - s.start < s.count)
            .map(|s| (s.role, rank - s.start))
    }

    pub fn total(&self) -> u32 {
        self.slices.iter().map(|s| s.count).sum()
    }

    /// Whether the step has tasks of `role`.
    pub fn has(&self, role: Role) -> bool {
        self.slices.iter().any(|s| s.role == role)
    }
}
