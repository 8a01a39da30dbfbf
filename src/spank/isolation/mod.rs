//! `isolate=yes` in the shell: what carries out the core's lifecycle of a node's table
//! ([`crate::core::isolation`] has the table of states, and who acts in each). The kernel's
//! tables through libnftables ([`nftables`]), slurmstepd's side of a handover ([`handover`]),
//! the step's table installed before its tasks fork and left when they end ([`firewall`]), the
//! holder in the job's extern slurmstepd ([`holder`]) and what wakes it ([`watch`]). Which
//! process calls what is `crate::spank::hooks`'s: the step's slurmstepd installs and leaves its
//! table (`hooks::stepd`), the extern step holds (`hooks::extern_step`), slurmd's job epilog
//! removes what is left (`hooks::epilog`).

pub mod firewall;
pub mod handover;
pub mod holder;
pub mod nftables;
pub mod watch;
