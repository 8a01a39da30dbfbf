//! One netlink dump: send the core's request, gather its replies as the core reads them
//! ([`crate::core::netlink`]); and one transaction over a socket the caller keeps
//! ([`transact`]: a step's table installed, or deleted by the socket that owns it). The TCP sockets of a step's ports ([`super::sock_diag`]) and the
//! node's nftables tables ([`super::isolation::nftables::node_tables`]) are asked this way.

use crate::core::netlink::Reply;
use std::ffi::c_int;

/// The longest a dump waits for one reply of the kernel.
const DEADLINE_SECONDS: libc::time_t = 2;

/// Every object a dump of `protocol` (`NETLINK_SOCK_DIAG`, `NETLINK_NETFILTER`) answers
/// `request` with, each reply read by `reply`; `None` when the kernel does not answer as it
/// should, or not within [`DEADLINE_SECONDS`] of the last reply.
pub fn dump<T>(
    protocol: c_int,
    request: &[u8],
    reply: impl Fn(&[u8]) -> Reply<T>,
) -> Option<Vec<T>> {
    // SAFETY: plain socket(2); the descriptor is closed by `Fd` below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return None;
    }
    let fd = Fd(fd);
    // Every wait has a deadline: a kernel that stops answering ends the dump as a failure.
    if !deadline(fd.0) {
        return None;
    }
    // SAFETY: `request` is valid for reads of its length; the socket is connected to nothing,
    // so a netlink socket sends to the kernel (port id 0).
    let sent = unsafe { libc::send(fd.0, request.as_ptr().cast(), request.len(), 0) };
    if sent != request.len() as isize {
        return None;
    }
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    // A dump ends with NLMSG_DONE; the bound keeps a kernel that never says so from holding
    // the step (each reply holds dozens of objects).
    for _ in 0..4096 {
        // SAFETY: `buf` is valid for writes of its length.
        let got = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got <= 0 {
            return None;
        }
        match reply(&buf[..got as usize]) {
            Reply::More(more) => found.extend(more),
            Reply::Done(more) => {
                found.extend(more);
                return Some(found);
            }
            Reply::Failed => return None,
        }
    }
    None
}

/// Sends the transaction `request(seq)` over `fd` (a netlink socket this process keeps) and
/// waits for the kernel's answer to it, [`DEADLINE_SECONDS`] at most; the errno it gave, or
/// why there was no answer. Messages of earlier requests still queued are passed over.
pub fn transact(fd: c_int, request: impl FnOnce(u32) -> Vec<u8>) -> Result<(), String> {
    // A sequence number no earlier request on the socket is likely to have had.
    let seq = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.subsec_nanos() | 1);
    let request = request(seq);
    if !deadline(fd) {
        return Err("cannot set a deadline on the netlink socket".into());
    }
    // A transaction goes in one send: a step's table over thousands of nodes is larger than
    // a socket's usual send buffer (root may raise its own). An error's answer carries no copy
    // of the request.
    let room = c_int::try_from(request.len() + 4096).unwrap_or(c_int::MAX);
    if request.len() > 32 * 1024 && !set_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, room) {
        return Err(format!(
            "cannot make room for {} bytes on the netlink socket",
            request.len()
        ));
    }
    let _ = set_option(fd, libc::SOL_NETLINK, NETLINK_CAP_ACK, 1);
    // SAFETY: `request` is valid for reads of its length; a netlink socket sends to the kernel.
    let sent = unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) };
    if sent != request.len() as isize {
        return Err(format!("send: {}", std::io::Error::last_os_error()));
    }
    let start = std::time::Instant::now();
    let mut buf = vec![0u8; 8 * 1024];
    while start.elapsed().as_secs() < DEADLINE_SECONDS as u64 {
        // SAFETY: `buf` is valid for writes of its length.
        let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got <= 0 {
            return Err(format!("no answer: {}", std::io::Error::last_os_error()));
        }
        match crate::core::netlink::acked(&buf[..got as usize], seq) {
            Some(Ok(())) => return Ok(()),
            Some(Err(errno)) => return Err(std::io::Error::from_raw_os_error(errno).to_string()),
            None => continue,
        }
    }
    Err(format!("no answer within {DEADLINE_SECONDS} s"))
}

/// `NETLINK_CAP_ACK`: the kernel's answers leave out the request they answer.
const NETLINK_CAP_ACK: c_int = 10;

/// Sets the integer socket option `name` of `level` on `fd` to `value`; whether it took.
pub fn set_option(fd: c_int, level: c_int, name: c_int, value: c_int) -> bool {
    // SAFETY: `value` is a valid int for the call's length.
    let set = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const c_int).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    set == 0
}

/// Sets [`DEADLINE_SECONDS`] as the longest any receive on `fd` waits.
fn deadline(fd: c_int) -> bool {
    let deadline = libc::timeval {
        tv_sec: DEADLINE_SECONDS,
        tv_usec: 0,
    };
    // SAFETY: `deadline` is a valid timeval for the call's length.
    let set = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&deadline as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    set == 0
}

/// A descriptor closed when dropped.
struct Fd(c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: a descriptor this module opened, closed once.
        unsafe { libc::close(self.0) };
    }
}
