//! The node's listening TCP sockets, asked of the kernel over `NETLINK_SOCK_DIAG` (what `ss -lt`
//! uses): the request and the replies are the core's ([`crate::core::claims::listening_request`],
//! [`crate::core::claims::diag_reply`]); this file only sends and receives. Where the kernel
//! cannot answer (no `inet_diag`), `/proc/net/tcp` and `tcp6` say the same, at the cost of a
//! walk over every connection.

use crate::core::claims::{self, DiagReply, Listener};
use std::ffi::c_int;

/// Every listening TCP socket of this network namespace, IPv4 and IPv6.
pub fn listening() -> Vec<Listener> {
    in_states(claims::LISTENING)
}

/// The local ports of every TCP socket of this network namespace that is or was just connected
/// ([`claims::CONNECTED`]), IPv4 and IPv6.
pub fn connected_ports() -> Vec<u16> {
    in_states(claims::CONNECTED)
        .into_iter()
        .map(|s| s.port)
        .collect()
}

/// The sockets in one of `states`, from the kernel, else from `/proc/net/tcp` and `tcp6`.
fn in_states(states: u32) -> Vec<Listener> {
    match from_kernel(states) {
        Some(found) => found,
        None => ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .flat_map(|text| claims::sockets(&text, states))
            .collect(),
    }
}

/// The sockets in one of `states` as socket diagnostics report them, IPv4 and IPv6; `None`
/// when the kernel does not answer as it should.
pub fn from_kernel(states: u32) -> Option<Vec<Listener>> {
    let families = [libc::AF_INET, libc::AF_INET6].map(|family| dump(family as u8, states));
    Some(families.into_iter().collect::<Option<Vec<_>>>()?.concat())
}

/// One family's sockets in one of `states`, or `None` when the kernel does not answer as it
/// should.
fn dump(family: u8, states: u32) -> Option<Vec<Listener>> {
    // SAFETY: plain socket(2); the descriptor is closed by `Fd` below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    let fd = Fd(fd);
    let request = claims::sockets_request(family, states);
    // SAFETY: `request` is valid for reads of its length; the socket is connected to nothing,
    // so a netlink socket sends to the kernel (port id 0).
    let sent = unsafe { libc::send(fd.0, request.as_ptr().cast(), request.len(), 0) };
    if sent != request.len() as isize {
        return None;
    }
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    // A dump ends with NLMSG_DONE; the bound keeps a kernel that never says so from holding
    // the step (each reply holds dozens of sockets).
    for _ in 0..4096 {
        // SAFETY: `buf` is valid for writes of its length.
        let got = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got <= 0 {
            return None;
        }
        match claims::diag_reply(&buf[..got as usize]) {
            DiagReply::More(more) => found.extend(more),
            DiagReply::Done(more) => {
                found.extend(more);
                return Some(found);
            }
            DiagReply::Failed => return None,
        }
    }
    None
}

/// A descriptor closed when dropped.
struct Fd(c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: a descriptor this module opened, closed once.
        unsafe { libc::close(self.0) };
    }
}
