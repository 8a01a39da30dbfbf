//! The node's TCP sockets, asked of the kernel over `NETLINK_SOCK_DIAG` (what `ss` uses): the
//! request and the replies are the core's ([`crate::core::claims::ports_request`],
//! [`crate::core::claims::diag_reply`]); [`super::netlink`] sends and receives. A look at a step's
//! ports asks for those ports alone, filtered in the kernel. Where the kernel cannot answer (no
//! `inet_diag`), `/proc/net/tcp` and `tcp6` say who holds a port, at the cost of a walk over
//! every connection; the workers' watcher then sees no connection (it fails closed).

use crate::core::claims::{self, Listener, Socket};

/// Every listening TCP socket of this network namespace, IPv4 and IPv6.
pub fn listening() -> Vec<Listener> {
    match from_kernel(claims::LISTENING) {
        Some(found) => found.iter().map(Socket::listener).collect(),
        None => from_proc(claims::LISTENING),
    }
}

/// The sockets of this network namespace that hold one of `ports` ([`claims::HOLDING`]: every
/// state but TIME_WAIT), IPv4 and IPv6, the kernel passing over every other port.
pub fn holding(ports: &[u16]) -> Vec<Listener> {
    let (Some(&lo), Some(&hi)) = (ports.iter().min(), ports.iter().max()) else {
        return Vec::new();
    };
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
