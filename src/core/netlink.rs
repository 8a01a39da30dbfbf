//! Netlink dumps as the kernel answers them, without the socket: a dump's request header, and
//! the walk over one reply's messages. Two dumps use it: the TCP sockets of a step's ports
//! (`NETLINK_SOCK_DIAG`, [`super::claims::diag_reply`]) and the node's nftables tables
//! (`NETLINK_NETFILTER`, [`super::isolation::table_dump`]). The shell sends and receives
//! (`crate::spank::netlink`).

/// `nlmsghdr`'s length: length, type, flags, sequence and port id.
pub const HEADER: usize = 16;
/// `NLMSG_ERROR`: the kernel refused the request (its errno follows).
pub const ERROR: u16 = 2;
/// `NLMSG_DONE`: the dump is over.
pub const DONE: u16 = 3;
/// `NLM_F_REQUEST | NLM_F_DUMP`: a request for every object of its kind.
const DUMP: u16 = 0x1 | 0x300;
/// `NLM_F_DUMP_INTR`: the objects changed while the kernel dumped them, so the dump may have
/// missed some: the whole dump is asked again.
const DUMP_INTR: u16 = 0x10;

/// `NLM_F_REQUEST`: a message to the kernel.
const REQUEST: u16 = 0x1;
/// `NLM_F_ACK`: the kernel answers the message with an `NLMSG_ERROR` whose error is 0 when
/// it succeeded.
const ACK: u16 = 0x4;

/// One request message: its header (`kind`, `flags` besides `NLM_F_REQUEST`, `seq`; the port
/// id is left for the kernel to fill) and its `body`, padded to 4 bytes.
pub fn message(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let length = HEADER + body.len();
    let mut out = Vec::with_capacity(length.next_multiple_of(4));
    out.extend_from_slice(&(length as u32).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&(REQUEST | flags).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(body);
    out.resize(length.next_multiple_of(4), 0);
    out
}

/// [`message`] with `NLM_F_ACK`: the kernel answers it either way ([`acked`]).
pub fn acked_message(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    message(kind, ACK, seq, body)
}

/// One attribute (`nlattr`) of type `kind` holding `value`, padded to 4 bytes.
pub fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
    let length = 4 + value.len();
    let mut out = Vec::with_capacity(length.next_multiple_of(4));
    out.extend_from_slice(&(length as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(length.next_multiple_of(4), 0);
    out
}

/// The kernel's answer to message `seq` ([`acked_message`]) in one reply, if it is there:
/// `Ok` where it succeeded, else the errno it gave. `None`: not in this buffer (or the buffer is
/// not of netlink's shape), so the caller reads on.
pub fn acked(buf: &[u8], seq: u32) -> Option<std::result::Result<(), i32>> {
    let mut at = 0;
    while at + HEADER <= buf.len() {
        let word = |from: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                buf.get(from..from + 4)?.try_into().ok()?,
            ))
        };
        let length = word(at)? as usize;
        let kind = u16::from_ne_bytes(buf.get(at + 4..at + 6)?.try_into().ok()?);
        if length < HEADER {
            return None;
        }
        if kind == ERROR && word(at + 8)? == seq {
            let error = i32::from_ne_bytes(buf.get(at + HEADER..at + HEADER + 4)?.try_into().ok()?);
            return Some(match error {
                0 => Ok(()),
                e => Err(-e),
            });
        }
        at += length.next_multiple_of(4);
    }
    None
}

/// What one reply (a buffer of netlink messages) of a dump says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    /// Objects; more replies follow.
    More(Vec<T>),
    /// The last objects; the dump is over.
    Done(Vec<T>),
    /// The kernel refused the request, the dump was interrupted, or the reply is not of its
    /// shape.
    Failed,
}

/// A dump request of message `kind` with `body` ([`message`] with `NLM_F_DUMP`, sequence 1).
pub fn dump_request(kind: u16, body: &[u8]) -> Vec<u8> {
    message(kind, DUMP & !REQUEST, 1, body)
}

/// Walks one reply: `object` reads each message of type `kind` (its body, after the header)
/// into an object, or `None` when the body is not of its shape.
pub fn reply<T>(buf: &[u8], kind: u16, object: impl Fn(&[u8]) -> Option<T>) -> Reply<T> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let Some(length) = buf
            .get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
        else {
            return Reply::Failed;
        };
        let (Some(body), Some(got), Some(flags)) = (
            (length >= HEADER)
                .then(|| buf.get(at + HEADER..at + length))
                .flatten(),
            u16_at(at + 4),
            u16_at(at + 6),
        ) else {
            return Reply::Failed;
        };
        if flags & DUMP_INTR != 0 {
            return Reply::Failed;
        }
        match got {
            DONE => return Reply::Done(found),
            g if g == kind => match object(body) {
                Some(o) => found.push(o),
                None => return Reply::Failed,
            },
            _ => return Reply::Failed,
        }
        // Messages are 4-byte aligned.
        at += length.next_multiple_of(4);
    }
    Reply::More(found)
}

/// The attributes (`nlattr`: length, type, value, 4-byte aligned) in `body`, each as its type
/// (the nested and byte-order flags cleared) and value; a malformed one ends the walk.
pub fn attributes(body: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = body;
    std::iter::from_fn(move || {
        let length = u16::from_ne_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(rest.get(2..4)?.try_into().ok()?) & 0x3fff;
        let value = rest.get(4..length)?;
        rest = rest.get(length.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind, value))
    })
}
