//! Per-step network isolation (`isolate=yes`): what it protects against, and the life of a
//! node's table for a step, in one place. The rules are [`rules`], the kernel's messages that
//! install them [`messages`], the tables' names and what the node lists [`tables`], the files of a handover [`handover`], and the holder's decisions
//! [`holding`]; all pure, from plain values. The shell carries them out
//! (`crate::spank::isolation`), from the processes `crate::spank::hooks` names.
//!
//! **The threat.** TensorFlow's gRPC servers listen on every interface, with no authentication,
//! and run any graph they are sent (TensorFlow's SECURITY.md), so on a shared cluster anyone who
//! reaches a port can run code as the job's owner. Each node of the step gets an nftables table
//! of its own, before any task starts, that lets a connection reach a step's server only from
//! the job's uid on a node of the step, and only at the step's own addresses ([`rules`]). It
//! does not cover the owner's other jobs (same uid), root on a node, or connections that NCCL
//! and gloo open themselves (not TensorFlow's servers' ports).
//!
//! **The life of a table**, for step `J.S` on one node (each row names who acts, and where the
//! rule is coded):
//!
//! | state      | the table                  | owned by                      | enters when                                                                 | coded in |
//! |------------|----------------------------|-------------------------------|-----------------------------------------------------------------------------|----------|
//! | refused    | none                       | -                             | another step's table holds a port, `tcp_syncookies=2`, a port outside `port_range`, an address that resolves to nothing: no task starts | [`tables::check_tables`], [`rules::check_syncookies`], [`rules::check_ports`], [`rules::StepFirewall::scripts`] |
//! | installed  | `tfcluster_J_S`            | the step's slurmstepd (`flags owner`, and `persist` where the kernel has it) | slurmstepd's `init_post_opt`, before the tasks fork | [`rules::StepFirewall::scripts`], [`rules::persistent`] |
//! | ended      | `tfcluster_J_S_ended`      | the step's slurmstepd         | its tasks here have all ended while the step runs on elsewhere: one transaction puts in only what keeps other users here away from the step's other nodes | [`rules::StepFirewall::scripts`] |
//! | left       | same                       | the step's slurmstepd         | it leaves the ended table's script in the job's holder directory, and waits at most `HANDOVER` | [`handover::stage_file`] |
//! | taking     | same                       | the step's slurmstepd         | the job's extern step's holder claims the file                               | [`holding::Holding`] (`Act::Take`) |
//! | held       | same, installed again      | the holder (the job's extern slurmstepd) | one transaction replaces the table with the same rules, owned by the holder; slurmstepd exits | [`handover::take_over`] |
//! | unheld     | same                       | no process                    | no live holder (no `PrologFlags=Contain`), or none claimed it in time: one line says so | [`handover::no_holder_line`] |
//! | released   | none                       | -                             | slurmctld says the step ended (the holder asks about one table per `ASK`); the job ends (the extern step's tables go with it); the job's epilog removes whatever the job left | [`holding::Holding`] (`Act::Release`), [`tables::job_tables`] |
//!
//! What an admin does to a node meets it there:
//! - `nft flush ruleset` (nftables.service's start, reload and stop) leaves an owned table;
//!   only an unheld one goes with it, and its line said so.
//! - slurmd's restart, reconfigure (which from 23.11 starts a new slurmd) and upgrade touch no
//!   table: slurmd holds nothing, the step's and the extern step's slurmstepds live on.
//! - A held table that is gone all the same is installed again at the holder's next look, with a
//!   line ([`holding::reinstalled_line`]).
//! - Two holders for one directory, a holder file naming a dead process, a claim left half-done:
//!   each look decides from what it sees ([`holding::Holding`], a table of transitions in
//!   tests/holder.rs, which also runs the shell's holder on the host).
//!
//! Every step, isolated or not, first claims its ports on the node ([`super::claims`]).

pub mod handover;
pub mod holding;
pub mod messages;
pub mod rules;
pub mod tables;
