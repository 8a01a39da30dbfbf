//! The node's TCP sockets, asked of the kernel over `NETLINK_SOCK_DIAG` (what `ss` uses): the
//! request and the replies are the core's ([`crate::core::claims::ports_request`],
//! [`crate::core::claims::diag_reply`]); [`super::netlink`] sends and receives. A look at a step's
//! ports asks for those ports alone, filtered in the kernel; the claim's binds each port first
//! ([`unbound`]), and asks only where one does not bind. Where the kernel cannot answer (no
//! `inet_diag`), `/proc/net/tcp` and `tcp6` say who holds a port, at the cost of a walk over
//! every connection; the workers' watcher then sees no connection (it fails closed).

use super::netlink::set_option;
use crate::core::claims::{self, Listener, Socket};
use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Every listening TCP socket of this network namespace, IPv4 and IPv6.
pub fn listening() -> Vec<Listener> {
    match from_kernel(claims::LISTENING) {
        Some(found) => found.iter().map(Socket::listener).collect(),
        None => from_proc(claims::LISTENING),
    }
}

/// The sockets of this network namespace that hold one of `ports` ([`claims::HOLDING`]: every
/// state but TIME_WAIT), IPv4 and IPv6, the kernel passing over every other port. None where
/// each port binds ([`unbound`]; only ports the job's user could bind too:
/// [`claims::binds_first`]); otherwise the kernel's answer, which tells a TIME_WAIT (no holder)
/// from a socket that holds the port.
pub fn holding(ports: &[u16]) -> Vec<Listener> {
    let (Some(&lo), Some(&hi)) = (ports.iter().min(), ports.iter().max()) else {
        return Vec::new();
    };
    let start = std::fs::read_to_string(claims::UNPRIVILEGED_PORT_START).ok();
    if claims::binds_first(ports, start.as_deref()) && ports.iter().all(|&port| unbound(port)) {
        return Vec::new();
    }
    let found = match in_ports(claims::HOLDING, (lo, hi)) {
        Some(found) => found.iter().map(Socket::listener).collect(),
        None => from_proc(claims::HOLDING),
    };
    found
        .into_iter()
        .filter(|s| ports.contains(&s.port))
        .collect()
}

/// Whether one of `ports` has a listening socket of user `uid` in this network namespace: the
/// kernel answers from its listening sockets alone (no walk over the machine's connections).
pub fn listening_on(ports: &[u16], uid: u32) -> bool {
    let (Some(&lo), Some(&hi)) = (ports.iter().min(), ports.iter().max()) else {
        return false;
    };
    in_ports(claims::LISTENING, (lo, hi))
        .unwrap_or_default()
        .iter()
        .any(|s| s.uid == uid && ports.contains(&s.port))
}

/// The connections on one of `ports` that `uid` owns ([`claims::CONNECTED`] but TIME_WAIT,
/// which no one owns): each one's port. Empty where the kernel does not answer: then nothing
/// is seen.
pub fn connections(ports: &[u16], uid: u32) -> Vec<u16> {
    let (Some(&lo), Some(&hi)) = (ports.iter().min(), ports.iter().max()) else {
        return Vec::new();
    };
    in_ports(claims::CONNECTED & !claims::TIME_WAIT, (lo, hi))
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.uid == uid && ports.contains(&s.port))
        .map(|s| s.port)
        .collect()
}

/// Whether no socket of this network namespace is bound to `port`: a fresh TCP socket binds to it
/// on the wildcard address of both families (IPv6 with `IPV6_V6ONLY` off; IPv4 where the node has
/// no IPv6), with neither `SO_REUSEADDR` nor `SO_REUSEPORT`, and is closed unused. The kernel
/// answers a bind from the port's own list of sockets, which holds every socket on the port
/// (listening, connecting, connected, closing, TIME_WAIT, and bound but unused), where a look at
/// connections walks every connection bucket of the machine, whose number grows with the node's
/// memory (what each costs: benches/port-looks.py, docs/performance.md's "Cut in 0.16.2"). `false`
/// where the bind fails for any reason, a TIME_WAIT's among them: then the kernel's diagnostics
/// decide ([`holding`]), as before this look. A socket bound inside a VRF (an L3 master device) is
/// in a bind list of its own, which this bind does not see; nor does TensorFlow's own bind, so the
/// step's server still listens.
pub fn unbound(port: u16) -> bool {
    // SAFETY: a zeroed sockaddr_in6 (plain integers) is the wildcard address.
    let mut v6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    v6.sin6_port = port.to_be();
    // SAFETY: a zeroed sockaddr_in (plain integers) is the wildcard address.
    let mut v4: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    v4.sin_family = libc::AF_INET as libc::sa_family_t;
    v4.sin_port = port.to_be();
    match socket(libc::AF_INET6) {
        Some(fd) => {
            set_option(fd.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0) && binds(&fd, &v6)
        }
        None => socket(libc::AF_INET).is_some_and(|fd| binds(&fd, &v4)),
    }
}

/// A TCP socket of `family`, closed when dropped; `None` where the node has no such family.
fn socket(family: c_int) -> Option<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    // SAFETY: a descriptor socket(2) has just opened, owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `fd` binds to `addr` (a `sockaddr_in` or `sockaddr_in6`).
fn binds<T>(fd: &OwnedFd, addr: &T) -> bool {
    // SAFETY: `addr` is a valid socket address of its own type's length.
    unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        ) == 0
    }
}

/// `/proc/net/tcp` and `tcp6`'s sockets in one of `states`, where the kernel's diagnostics do
/// not answer (at the cost of a walk over every connection).
fn from_proc(states: u32) -> Vec<Listener> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|text| claims::sockets(&text, states))
        .collect()
}

/// The sockets in one of `states` as socket diagnostics report them, IPv4 and IPv6 (one
/// request: [`claims::listening_request`]); `None` when the kernel does not answer as it should.
pub fn from_kernel(states: u32) -> Option<Vec<Socket>> {
    dump(&claims::sockets_request(states))
}

/// [`from_kernel`], of the local ports `lo..=hi` alone, filtered in the kernel.
pub fn in_ports(states: u32, ports: (u16, u16)) -> Option<Vec<Socket>> {
    dump(&claims::ports_request(states, Some(ports)))
}

/// The sockets one request asks for, or `None` when the kernel does not answer as it should.
fn dump(request: &[u8]) -> Option<Vec<Socket>> {
    super::netlink::dump(libc::NETLINK_SOCK_DIAG, request, claims::diag_reply)
}
