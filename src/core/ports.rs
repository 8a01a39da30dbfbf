//! Which port each task listens on. All tasks of a step compute the same answer from the same
//! inputs, so no task has to ask another.
//!
//! In order of precedence:
//! 1. `port_base=N` (admin or per job): TensorFlow's own scheme, `N + local slot`.
//! 2. `SLURM_STEP_RESV_PORTS` (srun `--resv-ports`): ports Slurm reserved for this step, the same
//!    list on every node; the task at local slot k takes the k-th. Collision-free by design.
//! 3. Otherwise ports inside the admin's `port_range`, chosen from the job and step ids
//!    ([`Place`]): steps of one job take consecutive blocks of `port_block` ports, so two steps
//!    of a job sharing a node get different ports; different jobs are spread by a multiplicative
//!    hash, and inside its block a step takes only as many ports as its busiest node needs
//!    (rounded up to a power of two), at a place chosen from the job id. Two steps of different
//!    jobs then share a port only when both the blocks and the places meet: with the defaults
//!    and at most 8 tasks on a node, about once in 1,600 pairs (tests/settings.rs). A node
//!    refuses a step whose ports another live step or a listening program holds
//!    ([`super::claims`]), so a meeting is an error before any task starts, never a bind error.

use super::error::{Error, Result};
use super::hostlist::parse_ranges;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortPolicy {
    /// TensorFlow's scheme: base + local slot.
    Base(u32),
    /// A block per step inside `lo..=hi`, `block` ports wide.
    Range { lo: u16, hi: u16, block: u16 },
}

/// The ports of a step: the port of local slot k on any node is `ports.of_slot(k)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepPorts {
    Consecutive { base: u32 },
    Reserved(Vec<u16>),
}

impl StepPorts {
    /// Decides the step's ports. `max_local` is the most tasks any node of the step runs.
    pub fn plan(
        policy: &PortPolicy,
        resv_ports: Option<&str>,
        job_id: u32,
        step_id: u32,
        max_local: usize,
        busiest_host: &str,
    ) -> Result<StepPorts> {
        let resv = resv_ports.map(str::trim).filter(|s| !s.is_empty());
        match (policy, resv) {
            (PortPolicy::Base(base), _) => {
                check_base(*base, max_local)?;
                Ok(StepPorts::Consecutive { base: *base })
            }
            (PortPolicy::Range { .. }, Some(list)) => {
                let ports = parse_port_list(list)?;
                if ports.len() < max_local {
                    return Err(Error::NotEnoughReservedPorts {
                        host: busiest_host.to_string(),
                        tasks: max_local,
                        ports: ports.len(),
                    });
                }
                Ok(StepPorts::Reserved(ports))
            }
            (&PortPolicy::Range { lo, hi, block }, None) => {
                let room = u32::from(hi) - u32::from(lo) + 1;
                let block = u32::from(block).max(max_local as u32);
                if block > room {
                    return Err(Error::PortRangeTooSmall {
                        lo,
                        hi,
                        room,
                        tasks: max_local,
                    });
                }
                let place = Place::of(job_id, step_id, room, block, max_local);
                Ok(StepPorts::Consecutive {
                    base: u32::from(lo) + place.block * block + place.offset,
                })
            }
        }
    }

    /// The port of local slot `slot` on any node.
    pub fn of_slot(&self, slot: usize) -> u32 {
        match self {
            StepPorts::Consecutive { base } => base + slot as u32,
            StepPorts::Reserved(ports) => u32::from(ports[slot]),
        }
    }
}

/// Where a step's automatic ports lie in `port_range`: block `block` (of `block`-sized ones),
/// `offset` ports into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub block: u32,
    pub offset: u32,
}

impl Place {
    /// Knuth's multiplicative hash spreads job ids over the `room / block` blocks; the step id is
    /// added after it, so a job's steps sit in consecutive blocks and never meet before that
    /// many steps. Inside the block the step takes a run of `max_local` rounded up to a power
    /// of two (runs of such sizes nest, so two runs overlap only when the larger holds the
    /// smaller), the run chosen by a second hash of the job id ([`mix`]), independent of the
    /// first.
    pub fn of(job_id: u32, step_id: u32, room: u32, block: u32, max_local: usize) -> Place {
        let blocks = room / block;
        let index = job_id.wrapping_mul(0x9E37_79B1).wrapping_add(step_id) % blocks;
        let run = (max_local.max(1) as u32).next_power_of_two().min(block);
        let runs = block / run;
        let offset = mix(job_id) % runs * run;
        Place {
            block: index,
            offset,
        }
    }
}

/// MurmurHash3's 32-bit finaliser: every bit of `x` moves every bit of the result, so the run a
/// job takes in its block is independent of which block the multiplicative hash gave it.
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^ (x >> 16)
}

/// `port_base=N` with `max_local` tasks on the busiest node: the last one listens on
/// `N + max_local - 1`, which must be a port. srun checks it with the fewest tasks the busiest
/// node can have (tasks / nodes, rounded up), each node again with its real count.
pub fn check_base(base: u32, max_local: usize) -> Result<()> {
    if u64::from(base) + max_local as u64 > 65536 {
        return Err(Error::PortOverflow {
            base,
            tasks: max_local,
        });
    }
    Ok(())
}

/// Parses a port list such as `12000-12003,12010` (the format of `SLURM_STEP_RESV_PORTS`).
pub fn parse_port_list(list: &str) -> Result<Vec<u16>> {
    let fail = || Error::ReservedPortList {
        value: list.to_string(),
    };
    let mut ports = Vec::new();
    let mut seen = vec![false; 65536];
    for range in parse_ranges(list).map_err(|_| fail())? {
        if range.lo == 0 || range.hi > 65535 {
            return Err(fail());
        }
        for port in range.lo..=range.hi {
            // Two slots on one port would collide; Slurm never reserves a port twice.
            if std::mem::replace(&mut seen[port as usize], true) {
                return Err(fail());
            }
            ports.push(port as u16);
        }
    }
    Ok(ports)
}

/// `SLURM_STEP_RESV_PORTS` as far as slurmctld vouches for it: the job's environment is the
/// user's (`srun --export=ALL,SLURM_STEP_RESV_PORTS=7100` sends any list, and srun writes the
/// variable only when Slurm did reserve ports), while the ports a step takes become its
/// firewall's and its claims', which act on every user of the node. So the list is the step's
/// only when slurmctld's record of the step (`slurmctld`, asked only when the variable is set)
/// holds the same ports; otherwise the step takes its ports from `port_range`, and the note
/// says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The reserved ports the step takes, or `None` for `port_range`'s.
    pub ports: Option<String>,
    /// Why a list in the environment was not taken.
    pub note: Option<String>,
}

impl Reservation {
    /// The reservation the step takes. Where slurmctld does not answer, the step is refused
    /// ([`Error::ReservationUnchecked`]): each node asks for itself, and a node that fell back
    /// to `port_range` while the others took the reservation would plan other ports than
    /// theirs, a TF_CONFIG silently wrong.
    pub fn vouched(
        env: Option<&str>,
        slurmctld: impl FnOnce() -> std::result::Result<Option<String>, String>,
    ) -> Result<Reservation> {
        let Some(env) = env.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Reservation {
                ports: None,
                note: None,
            });
        };
        let held = slurmctld().map_err(|reason| Error::ReservationUnchecked { reason })?;
        let same = |held: &str| {
            let (held, env) = (parse_port_list(held).ok(), parse_port_list(env).ok());
            held.is_some() && held == env
        };
        let said = match &held {
            Some(held) if same(held) => {
                return Ok(Reservation {
                    ports: Some(env.to_string()),
                    note: None,
                })
            }
            Some(held) => format!("it holds {held}"),
            None => "it holds none".to_string(),
        };
        Ok(Reservation {
            ports: None,
            note: Some(format!(
                "note: SLURM_STEP_RESV_PORTS='{env}' is not the reservation slurmctld holds for \
                 this step ({said}), so the step's ports come from port_range instead; Slurm sets \
                 this variable itself when it reserves ports (srun --resv-ports, MpiParams=ports): \
                 do not set or export it"
            )),
        })
    }
}
