//! Who already holds a port on a node. Every `--tf-cluster` step claims its ports on each of its
//! nodes before its tasks start, and a node refuses the step, with one line naming the node, the
//! port and what to do, when one of them is claimed by a live step of another job or a program
//! listens on it. Without this, two jobs whose automatic ports meet on a shared node (rare:
//! [`super::ports`]), or two that pick the same `port_base`, start their tasks anyway: one
//! TensorFlow server dies of "address in use" and its peers connect to the other job's server.
//!
//! A claim is one file per step in the node's own directory ([`CLAIMS_DIR`]`/NODE/JOB_STEP`,
//! root's): the claiming slurmstepd's pid and start time, and the ports. The shell reads and
//! writes the files under a lock, so that two steps starting at once cannot both pass, and
//! removes its own when slurmstepd exits. A claim whose process is gone (a slurmstepd killed
//! with SIGKILL removes nothing) or is another process now is stale ([`Claim::is_live`]):
//! passed over, and removed by the next step that looks. The node's name is in the path
//! because several slurmds may share one host's /run (Slurm's multiple-slurmd mode, the test
//! cluster).
//!
//! This module only reads and writes the text; the shell does the files, the lock and the
//! kernel's list of listening sockets (tests/ports.rs).

use super::error::{Error, Result};
use super::netlink;
use super::text::decimal;
use std::time::Duration;

/// Where nodes keep their claims: a directory per node name under it.
pub const CLAIMS_DIR: &str = "/run/tfcluster/claims";

/// The file, in [`CLAIMS_DIR`], the lock on a node's claims is taken on.
pub const LOCK_FILE: &str = ".lock";

/// The longest a step waits for the lock on its node's claims. A step holds it for as long as
/// reading the claims and the listening sockets takes (milliseconds); past this, someone else
/// holds it, and the step is refused with a line instead of waiting without end.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The directory of node `node`'s claims, below [`CLAIMS_DIR`] ([`dir_name`]).
pub fn node_dir(node: &str) -> String {
    format!("{CLAIMS_DIR}/{}", dir_name(node))
}

/// Node `node`'s name as a directory below a root-owned one: a name that could leave it (empty,
/// a `/`, or `.` and `..`; Slurm's node names never are) is replaced by `_`.
pub fn dir_name(node: &str) -> &str {
    let safe = !node.is_empty() && !node.contains('/') && node != "." && node != "..";
    if safe {
        node
    } else {
        "_"
    }
}

/// The process that made a claim: a pid, and the process's start time (field 22 of
/// `/proc/PID/stat`), which tells it from a later process given the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub start: u64,
}

impl Owner {
    /// The process whose `/proc/PID/stat` is `stat`; `None` for text of another shape.
    pub fn from_stat(pid: u32, stat: &str) -> Option<Owner> {
        // The command name, in parentheses, may hold spaces and parentheses: fields are
        // counted after the last `)`, where field 3 (the state) comes first.
        let (_, after) = stat.rsplit_once(')')?;
        let start = decimal(after.split_whitespace().nth(22 - 3)?)?;
        Some(Owner { pid, start })
    }

    /// Whether this process still runs: `stat` gives `/proc/PID/stat` of a pid, `None` when
    /// there is no such process; a later process given the same pid has another start time.
    pub fn is_live(&self, stat: impl FnOnce(u32) -> Option<String>) -> bool {
        stat(self.pid)
            .and_then(|text| Owner::from_stat(self.pid, &text))
            .is_some_and(|now| now == *self)
    }
}

/// One step's claim on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub job_id: u32,
    pub step_id: u32,
    pub owner: Owner,
    pub ports: Vec<u16>,
}

impl Claim {
    /// The claim's file name: `JOB_STEP`.
    pub fn file_name(job_id: u32, step_id: u32) -> String {
        format!("{job_id}_{step_id}")
    }

    /// The file's text: `pid=P start=S ports=A,B,...`, one line.
    pub fn text(&self) -> String {
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        format!(
            "pid={} start={} ports={}\n",
            self.owner.pid,
            self.owner.start,
            ports.join(",")
        )
    }

    /// The claim in file `name` with text `text`; `None` for a file of another shape (never
    /// one of ours: it is passed over, not trusted).
    pub fn parse(name: &str, text: &str) -> Option<Claim> {
        let (job, step) = name.split_once('_')?;
        let mut words = text.trim_end_matches('\n').split(' ');
        let mut field = |key: &str| words.next()?.strip_prefix(key)?.strip_prefix('=');
        let (pid, start, ports) = (field("pid")?, field("start")?, field("ports")?);
        if words.next().is_some() {
            return None;
        }
        let ports = match ports {
            "" => Vec::new(),
            list => list.split(',').map(decimal).collect::<Option<_>>()?,
        };
        Some(Claim {
            job_id: decimal(job)?,
            step_id: decimal(step)?,
            owner: Owner {
                pid: decimal(pid)?,
                start: decimal(start)?,
            },
            ports,
        })
    }

    /// Whether the process that made the claim still runs: `stat` gives `/proc/PID/stat` of a
    /// pid, `None` when there is no such process.
    pub fn is_live(&self, stat: impl FnOnce(u32) -> Option<String>) -> bool {
        self.owner.is_live(stat)
    }
}

/// Refuses `ports` when a live claim (`claims`, stale ones already left out) of another job's
/// step or a socket (`holding`: listening, connecting or connected, [`HOLDING`]) holds one of
/// them. Claims of `own_jobs` (the step's job; a
/// heterogeneous job's components are jobs of their own, and may share a node) are passed
/// over: a job's concurrent steps never share automatic or reserved ports, and a step that has
/// just ended may not have given its claim back when the job's next one, with the same
/// `port_base`, starts. No task of the step runs yet, so any such socket is someone else's (a
/// concurrent step of the job on the same `port_base` among them). The first port held, in
/// `ports`' order.
pub fn check_free(
    ports: &[u16],
    own_jobs: &[u32],
    claims: &[Claim],
    holding: &[Listener],
) -> Result<()> {
    let others = || claims.iter().filter(|c| !own_jobs.contains(&c.job_id));
    for &port in ports {
        if let Some(c) = others().find(|c| c.ports.contains(&port)) {
            return Err(Error::PortClaimed {
                port,
                job_id: c.job_id,
                step_id: c.step_id,
            });
        }
        if let Some(l) = holding.iter().find(|l| l.port == port) {
            return Err(Error::PortListened { port, uid: l.uid });
        }
    }
    Ok(())
}

/// Where the kernel's unprivileged ports start in this network namespace, as
/// `/proc/sys/net/ipv4/ip_unprivileged_port_start` gives it.
pub const UNPRIVILEGED_PORT_START: &str = "/proc/sys/net/ipv4/ip_unprivileged_port_start";

/// Whether the claim may bind each of `ports` to see that nothing holds it
/// ([`crate::spank::sock_diag`]), before it asks the kernel's diagnostics: only where every
/// port is one the job's user could bind too, at or above `unprivileged_start` (the text of
/// [`UNPRIVILEGED_PORT_START`]). `port_base` is the user's to set: root binds no port for them
/// that they could not bind themselves. Unknown (unreadable, another shape): no bind.
pub fn binds_first(ports: &[u16], unprivileged_start: Option<&str>) -> bool {
    let Some(start) = unprivileged_start.and_then(|text| decimal::<u32>(text.trim())) else {
        return false;
    };
    ports.iter().all(|&port| u32::from(port) >= start)
}

/// A program listening for TCP connections on this node: a line of `/proc/net/tcp` or
/// `/proc/net/tcp6` in state LISTEN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub port: u16,
    pub uid: u32,
}

/// A TCP socket as the kernel's socket diagnostics report it: its local port, owner and state
/// (the kernel's number: 1 ESTABLISHED ... 10 LISTEN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    pub port: u16,
    pub uid: u32,
    pub state: u8,
}

impl Socket {
    pub fn listener(&self) -> Listener {
        Listener {
            port: self.port,
            uid: self.uid,
        }
    }
}

/// TCP states as the kernel numbers them, as a mask of `1 << state`: LISTEN (10).
pub const LISTENING: u32 = 1 << 10;
/// TIME_WAIT (6): a connection closed on this side, owned by no process (uid 0, inode 0).
pub const TIME_WAIT: u32 = 1 << 6;
/// Every state of a socket that holds its local port, a process's (listening, connecting,
/// connected or closing), all but TIME_WAIT ([`TIME_WAIT`]): TensorFlow's gRPC server binds
/// with `SO_REUSEADDR`, which a TIME_WAIT does not stop, where any other socket on the port
/// does. (A socket bound and never used is in no table the kernel dumps.)
pub const HOLDING: u32 = 0b1111_1111_1110 & !TIME_WAIT;
/// The states of a socket that has been connected (ESTABLISHED 1, FIN_WAIT1 4, FIN_WAIT2 5,
/// TIME_WAIT 6, CLOSE_WAIT 8, LAST_ACK 9, CLOSING 11): a connection to a port, seen while it
/// lasts or just after either end closed it.
pub const CONNECTED: u32 = 1 << 1 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 8 | 1 << 9 | 1 << 11;

/// The listening sockets in the text of `/proc/net/tcp` or `/proc/net/tcp6` (a header line,
/// then `sl local_address rem_address st ... uid ...` per socket, the local address
/// `HEXADDR:HEXPORT`, state `0A` for LISTEN). Lines of another shape are passed over.
pub fn listeners(proc_net_tcp: &str) -> Vec<Listener> {
    sockets(proc_net_tcp, LISTENING)
}

/// The sockets in one of `states` ([`LISTENING`], [`CONNECTED`]) in the text of
/// `/proc/net/tcp` or `/proc/net/tcp6`, by their local port and owner.
pub fn sockets(proc_net_tcp: &str, states: u32) -> Vec<Listener> {
    proc_net_tcp
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, uid) = (fields.get(1)?, fields.get(3)?, fields.get(7)?);
            let port = local.rsplit_once(':')?.1;
            let state = u32::from_str_radix(state, 16).ok().filter(|s| *s < 32)?;
            match states & (1 << state) != 0 {
                true => Some(Listener {
                    port: u16::from_str_radix(port, 16).ok()?,
                    uid: decimal(uid)?,
                }),
                false => None,
            }
        })
        .collect()
}

/// The request for this node's listening TCP sockets over the kernel's socket-diagnostics
/// netlink (`NETLINK_SOCK_DIAG`): asking for LISTEN sockets alone makes the kernel walk only
/// its listening hash, where `/proc/net/tcp` walks every connection's bucket (8 ms a read on
/// the test machine, on every node of every step).
///
/// The request is the kernel's first form, `TCPDIAG_GETSOCK`, which answers IPv4 and IPv6 in
/// one walk of the kernel's tables (it asks for family `AF_UNSPEC`, as Linux has done for it
/// since 3.3); `SOCK_DIAG_BY_FAMILY` asks for one family, and two of them walk the tables
/// twice (what a walk costs: docs/performance.md, "Cut in 0.15.3"). Linux's UAPI layout:
/// `nlmsghdr` (length, type `TCPDIAG_GETSOCK`, flags `NLM_F_REQUEST | NLM_F_DUMP`, sequence,
/// port id), then `inet_diag_req` (family, source and destination prefix lengths, extensions,
/// a zeroed 48-byte socket id, states `1 << TCP_LISTEN`, tables 0).
pub fn listening_request() -> Vec<u8> {
    sockets_request(LISTENING)
}

/// [`listening_request`] for the sockets in one of `states` ([`CONNECTED`]).
pub fn sockets_request(states: u32) -> Vec<u8> {
    ports_request(states, None)
}

/// [`sockets_request`], the kernel passing over every socket whose local port is outside
/// `ports` (`lo..=hi`), so that a look at a step's few ports walks no other socket's reply:
/// an `INET_DIAG_REQ_BYTECODE` attribute after the request, two port comparisons of
/// `inet_diag_bc_op`s (code, the jump when true, the jump when false, then an op that holds
/// the port): `sport >= lo`, then `sport <= hi`; a false one jumps past the end (the socket is
/// left out), the end accepts it.
pub fn ports_request(states: u32, ports: Option<(u16, u16)>) -> Vec<u8> {
    const S_GE: u8 = 2;
    const S_LE: u8 = 3;
    const BYTECODE: u16 = 1;
    let bytecode: Vec<u8> = match ports {
        None => Vec::new(),
        Some((lo, hi)) => [
            [S_GE, 8].as_slice(),
            &20u16.to_ne_bytes(),
            &[0, 0],
            &lo.to_ne_bytes(),
            &[S_LE, 8],
            &12u16.to_ne_bytes(),
            &[0, 0],
            &hi.to_ne_bytes(),
        ]
        .concat(),
    };
    let attribute = match bytecode.is_empty() {
        true => 0,
        false => 4 + bytecode.len(),
    };
    // Family AF_UNSPEC (0), no prefixes, no extensions, and the zeroed socket id.
    let mut body = vec![0u8; 52];
    body.extend_from_slice(&states.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes()); // tables
    if attribute > 0 {
        body.extend_from_slice(&(attribute as u16).to_ne_bytes());
        body.extend_from_slice(&BYTECODE.to_ne_bytes());
        body.extend_from_slice(&bytecode);
    }
    netlink::dump_request(TCPDIAG_GETSOCK, &body)
}

/// The netlink message type of [`ports_request`] and of each socket the kernel answers with.
const TCPDIAG_GETSOCK: u16 = 18;

/// What one reply of the kernel to [`sockets_request`] says.
pub type DiagReply = netlink::Reply<Socket>;

/// One reply (a buffer of netlink messages) to [`listening_request`]. Each `inet_diag_msg`
/// holds family, state, timer, retransmits, the socket id (source port first, in network
/// order), expiry, queues, then the owner's uid (host order) at byte 64 of the message.
pub fn diag_reply(buf: &[u8]) -> DiagReply {
    netlink::reply(buf, TCPDIAG_GETSOCK, |message| {
        let port = message.get(4..6)?;
        Some(Socket {
            port: u16::from_be_bytes([port[0], port[1]]),
            uid: u32::from_ne_bytes(message.get(64..68)?.try_into().ok()?),
            state: message[1],
        })
    })
}
