//! Which port each task listens on. All tasks of a step compute the same answer from the same
//! inputs, so no task has to ask another.
//!
//! In order of precedence:
//! 1. `port_base=N` (admin or per job): TensorFlow's own scheme, `N + local slot`.
//! 2. `SLURM_STEP_RESV_PORTS` (srun `--resv-ports`): ports Slurm reserved for this step, the same
//!    list on every node; the task at local slot k takes the k-th. Collision-free by design.
//! 3. Otherwise a block of `port_block` ports inside the admin's `port_range`, chosen from the
//!    job and step ids: steps of one job take consecutive blocks, so two steps sharing a node
//!    get different ports; different jobs are spread by a multiplicative hash.

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
                let blocks = room / block;
                // Knuth's multiplicative hash spreads job ids; the step id is added after it so a
                // job's steps sit in consecutive blocks and never meet before `blocks` steps.
                let index = job_id.wrapping_mul(0x9E37_79B1).wrapping_add(step_id) % blocks;
                Ok(StepPorts::Consecutive {
                    base: u32::from(lo) + index * block,
                })
            }
        }
    }

    pub fn of_slot(&self, slot: usize) -> u32 {
        match self {
            StepPorts::Consecutive { base } => base + slot as u32,
            StepPorts::Reserved(ports) => u32::from(ports[slot]),
        }
    }
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
