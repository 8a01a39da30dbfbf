//! Ports between jobs: how rarely two jobs' automatic ports meet on a shared node, and what a
//! node does when they do (or when another job's `port_base` or a program holds a port): the
//! step is refused before any task starts, with one line naming the node, the port and what to
//! do. First the rules from plain values ([`tfcluster::core::claims`]), then on the test cluster.

mod common;
use common::admin_guide_words;
use common::cluster::{dir, records, sh, sh_ok, srun_stopped_waiting, tool, PlugStack};
use tfcluster::core::claims::{
    binds_first, check_free, diag_reply, listeners, listening_request, node_dir, ports_request,
    Claim, DiagReply, Listener, Owner, Socket, CLAIMS_DIR, LOCK_FILE, LOCK_WAIT,
};
use tfcluster::core::ports::{PortPolicy, Reservation, StepPorts};
use tfcluster::core::run_dir::{action, chain, replace_file, Action, Found, RUN_DIR};
use tfcluster::core::Error;
use tfcluster::spank::error::ShellError;

/// How often two jobs' steps share a port with the default settings, over every ordered pair of
/// jobs 1 to 2000 (consecutive ids: the jobs that run side by side): (tasks on the busiest node
/// of the first step, of the second, at least this many pairs per pair that shares). Up to 8
/// tasks on a node, at most once in 1,000; 16 tasks take a quarter of a 64-port block, so
/// about once in 800.
#[rustfmt::skip]
#[test]
fn two_jobs_share_a_port_rarely() {
    let cases: &[(usize, usize, u64)] = &[
        (1,  1,  10_000),
        (2,  2,   5_000),
        (4,  4,   2_500),
        (8,  8,   1_000),
        (1,  8,   1_000),
        (4,  8,   1_000),
        (16, 16,    700),
    ];
    let defaults = tfcluster::core::Settings::default().ports();
    let jobs = 1..=2000u32;
    for &(a, b, at_least) in cases {
        let first = |job, tasks| StepPorts::plan(&defaults, None, job, 0, tasks, "n1").unwrap().of_slot(0);
        let firsts_a: Vec<u32> = jobs.clone().map(|job| first(job, a)).collect();
        let firsts_b: Vec<u32> = jobs.clone().map(|job| first(job, b)).collect();
        let (mut pairs, mut shared) = (0u64, 0u64);
        for (i, &pa) in firsts_a.iter().enumerate() {
            for (j, &pb) in firsts_b.iter().enumerate() {
                if i != j {
                    pairs += 1;
                    shared += u64::from(pa < pb + b as u32 && pb < pa + a as u32);
                }
            }
        }
        assert!(shared * at_least <= pairs, "{a} and {b} tasks: {shared} of {pairs} pairs share");
    }
}

/// Every port of a step lies in the range, each slot its own, for any job and step.
#[test]
fn automatic_ports_stay_in_the_range() {
    let range = PortPolicy::Range {
        lo: 20000,
        hi: 32767,
        block: 64,
    };
    for job in [0u32, 1, 77, 4242, 999_999, u32::MAX] {
        for step in [0u32, 1, 198, 199, u32::MAX - 1] {
            for tasks in [1usize, 3, 8, 64, 100] {
                let ports = StepPorts::plan(&range, None, job, step, tasks, "n1").unwrap();
                let all: std::collections::BTreeSet<u32> =
                    (0..tasks).map(|slot| ports.of_slot(slot)).collect();
                assert_eq!(all.len(), tasks, "job {job} step {step}");
                assert!(all.iter().all(|p| (20000..=32767).contains(p)), "{all:?}");
            }
        }
    }
}

/// The directory of a node's claims: (node name, directory). A name that could leave the
/// claims directory is never used as one.
#[rustfmt::skip]
#[test]
fn a_nodes_claims_directory() {
    let cases: &[(&str, &str)] = &[
        ("n9",      "/run/tfcluster/claims/n9"),
        ("gpu-a01", "/run/tfcluster/claims/gpu-a01"),
        ("..",      "/run/tfcluster/claims/_"),
        (".",       "/run/tfcluster/claims/_"),
        ("a/b",     "/run/tfcluster/claims/_"),
        ("",        "/run/tfcluster/claims/_"),
    ];
    for (node, dir) in cases {
        assert_eq!(node_dir(node), *dir, "{node}");
    }
}

/// What a node does with each directory on the way to its claims, found as `lstat` says, by
/// root (uid 0): makes it 0700, uses it, closes it where an older version left it open, or
/// refuses the step when it is not root's own directory; and which lock files it makes again
/// (one others could open may be held open by them already).
#[test]
fn the_directories_under_run_tfcluster_are_roots_alone() {
    let refused = |why: &str| Action::Refuse(format!("/run/tfcluster/claims {why}"));
    #[rustfmt::skip]
    let cases = [
        (Found::Missing,                          Action::Make),
        (Found::Dir { uid: 0, mode: 0o700 },      Action::Use),
        (Found::Dir { uid: 0, mode: 0o755 },      Action::Close),
        (Found::Dir { uid: 0, mode: 0o701 },      Action::Close),
        (Found::Dir { uid: 0, mode: 0o1777 },     Action::Close),
        (Found::Dir { uid: 1000, mode: 0o700 },   refused("belongs to uid 1000, not to root: remove it as root (and look at who made it); tfcluster makes it again")),
        (Found::Other,                            refused("is not a directory (a link or a file): remove it as root; tfcluster makes it again")),
    ];
    for (found, expected) in cases {
        assert_eq!(
            action("/run/tfcluster/claims", found, 0),
            expected,
            "{found:?}"
        );
    }
    assert_eq!(
        chain(&node_dir("n9")),
        [
            "/run/tfcluster",
            "/run/tfcluster/claims",
            "/run/tfcluster/claims/n9"
        ]
    );
    assert!(node_dir("n9").starts_with(RUN_DIR) && CLAIMS_DIR.starts_with(RUN_DIR));
    for (mode, replaced) in [(0o600, false), (0o644, true), (0o606, true), (0o640, true)] {
        assert_eq!(replace_file(mode), replaced, "{mode:o}");
    }
}

/// The admin guide's wait for the claims' lock is the code's ([`LOCK_WAIT`]), not a second copy.
#[test]
fn the_admin_guide_says_how_long_a_step_waits_for_the_lock() {
    let flat = admin_guide_words();
    let phrase = format!(
        "A step waits at most {} s for the claims' lock",
        LOCK_WAIT.as_secs()
    );
    assert_eq!(flat.matches(&phrase).count(), 1, "{phrase}");
}

fn claim(job_id: u32, step_id: u32, ports: &[u16]) -> Claim {
    Claim {
        job_id,
        step_id,
        owner: Owner {
            pid: 4242,
            start: 987654,
        },
        ports: ports.to_vec(),
    }
}

/// A claim file: (its name, its text, the claim it is, or None for a file of another shape).
#[rustfmt::skip]
#[test]
fn a_claim_file() {
    let cases: Vec<(&str, &str, Option<Claim>)> = vec![
        ("57_3",  "pid=4242 start=987654 ports=20000,20001\n", Some(claim(57, 3, &[20000, 20001]))),
        ("57_3",  "pid=4242 start=987654 ports=\n",            Some(claim(57, 3, &[]))),
        ("57_3",  "pid=4242 start=987654 ports=20000",         Some(claim(57, 3, &[20000]))),
        ("57",    "pid=4242 start=987654 ports=20000\n",       None),
        ("57_x",  "pid=4242 start=987654 ports=20000\n",       None),
        ("57_3",  "pid=4242 ports=20000\n",                    None),
        ("57_3",  "pid=4242 start=987654 ports=70000\n",       None),
        ("57_3",  "pid=4242 start=987654 ports=20000 more\n",  None),
        ("57_3",  "",                                          None),
        (".lock", "",                                          None),
    ];
    for (name, text, expected) in &cases {
        assert_eq!(Claim::parse(name, text), *expected, "{name}: {text:?}");
    }
    let written = claim(57, 3, &[20000, 20001]);
    let name = Claim::file_name(57, 3);
    assert_eq!(Claim::parse(&name, &written.text()), Some(written));
}

/// Whether a claim's process still runs: (what, `/proc/4242/stat` now, live).
#[rustfmt::skip]
#[test]
fn a_claim_lives_as_long_as_its_process() {
    let stat = |start: &str| format!("4242 (slurmstepd) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 {start} 1 2 3");
    let cases: Vec<(&str, Option<String>, bool)> = vec![
        ("the same process",                 Some(stat("987654")), true),
        ("no such process",                  None,                 false),
        ("another process with that pid",    Some(stat("999999")), false),
        ("a name with spaces and a ')'",     Some("4242 (a) b) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1".into()), true),
        ("a stat of another shape",          Some("4242 slurmstepd".into()), false),
    ];
    for (what, now, live) in cases {
        assert_eq!(claim(57, 3, &[20000]).is_live(|_| now.clone()), live, "{what}");
    }
}

/// What refuses a node's ports for job 12's step 3: (what, its ports here, live claims, the
/// node's listening sockets, the port refused and by whom, or None).
#[rustfmt::skip]
#[test]
fn a_port_another_job_or_program_holds_refuses_the_step() {
    let other = |port| Listener { port, uid: 61002 };
    let claimed = |port, job_id, step_id| Some(Error::PortClaimed { port, job_id, step_id });
    let listened = |port| Some(Error::PortListened { port, uid: 61002 });
    type Case<'a> = (&'a str, &'a [u16], Vec<Claim>, Vec<Listener>, Option<Error>);
    let cases: Vec<Case> = vec![
        ("nothing else here",                 &[20000, 20001], vec![],                           vec![],             None),
        ("another job's claim, other ports",  &[20000, 20001], vec![claim(57, 0, &[20064])],     vec![],             None),
        ("another job's claim on one port",   &[20000, 20001], vec![claim(57, 0, &[20001])],     vec![],             claimed(20001, 57, 0)),
        ("an earlier step of the same job",   &[20000, 20001], vec![claim(12, 2, &[20000])],     vec![],             None),
        ("the other component of its job",    &[20000, 20001], vec![claim(13, 3, &[20000])],     vec![],             None),
        ("a listener on another port",        &[20000, 20001], vec![],                           vec![other(22)],    None),
        ("a listener on a step port",         &[20000, 20001], vec![],                           vec![other(20001)], listened(20001)),
        ("the first port held is named",      &[20000, 20001], vec![claim(57, 0, &[20001])],     vec![other(20000)], listened(20000)),
        ("a claim before a listener",         &[20000, 20001], vec![claim(57, 0, &[20000])],     vec![other(20000)], claimed(20000, 57, 0)),
        ("no port on this node",              &[],             vec![claim(57, 0, &[20000])],     vec![other(20000)], None),
    ];
    for (what, ports, claims, listening, refused) in cases {
        assert_eq!(check_free(ports, &[12, 13], &claims, &listening).err(), refused, "{what}");
    }
}

/// Whether the claim binds the step's ports before it asks the kernel's diagnostics: only ports
/// the job's user could bind too (at or above the kernel's unprivileged start, `port_base`
/// being the user's to set); where that start is unknown, none.
#[rustfmt::skip]
#[test]
fn the_claim_binds_only_ports_the_user_could() {
    let cases: &[(&str, &[u16], Option<&str>, bool)] = &[
        ("tfcluster's own ports",           &[29000, 29063], Some("1024\n"), true),
        ("port_base at the start",          &[1024, 1025],   Some("1024\n"), true),
        ("port_base below it",              &[1023, 1024],   Some("1024\n"), false),
        ("a site that raised the start",    &[1024, 1025],   Some("2048\n"), false),
        ("a site that opened every port",   &[80, 81],       Some("0\n"),    true),
        ("the start unreadable",            &[29000],        None,           false),
        ("the start of another shape",      &[29000],        Some("x\n"),    false),
        ("no port on this node",            &[],             Some("1024\n"), true),
    ];
    for &(what, ports, start, binds) in cases {
        assert_eq!(binds_first(ports, start), binds, "{what}");
    }
}

/// The listening sockets of `/proc/net/tcp` and `/proc/net/tcp6` as Linux writes them: (a
/// line, the listener it is). Only state 0A (LISTEN) counts.
#[rustfmt::skip]
#[test]
fn listening_sockets_from_proc_net_tcp() {
    let cases: &[(&str, Option<Listener>)] = &[
        ("   0: 00000000:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000 61002        0 2811 1 0000000000000000 100 0 0 10 0", Some(Listener { port: 20000, uid: 61002 })),
        ("   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2812 1 0000000000000000 100 0 0 10 0", Some(Listener { port: 8080, uid: 0 })),
        ("   0: 00000000000000000000000000000000:4E21 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 61001        0 99 1 0000000000000000 100 0 0 10 0", Some(Listener { port: 20001, uid: 61001 })),
        ("   2: 0B4D0A0A:4E20 0C4D0A0A:B2C4 01 00000000:00000000 00:00000000 00000000 61001        0 2813 1 0000000000000000 20 4 30 10 -1", None),
        ("   3: 0B4D0A0A:4E20 0C4D0A0A:B2C6 06 00000000:00000000 03:00000CC4 00000000     0        0 0 3 0000000000000000", None),
        ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode", None),
        ("", None),
    ];
    for (line, expected) in cases {
        assert_eq!(listeners(line), expected.iter().copied().collect::<Vec<_>>(), "{line}");
    }
}

/// The kernel's socket-diagnostics request for listening TCP sockets, byte for byte (Linux's
/// UAPI: `nlmsghdr` of type `TCPDIAG_GETSOCK`, then `inet_diag_req`: family `AF_UNSPEC`, which
/// the kernel answers with both families, and a zeroed socket id).
#[test]
fn the_listening_sockets_request() {
    let request = listening_request();
    let mut expected = Vec::new();
    expected.extend_from_slice(&76u32.to_ne_bytes()); // length
    expected.extend_from_slice(&18u16.to_ne_bytes()); // TCPDIAG_GETSOCK
    expected.extend_from_slice(&0x301u16.to_ne_bytes()); // NLM_F_REQUEST | NLM_F_DUMP
    expected.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    expected.extend_from_slice(&0u32.to_ne_bytes()); // port id
    expected.extend_from_slice(&[0, 0, 0, 0]); // AF_UNSPEC, no prefixes, no extensions
    expected.resize(68, 0); // the socket id
    expected.extend_from_slice(&1024u32.to_ne_bytes()); // 1 << TCP_LISTEN
    expected.extend_from_slice(&0u32.to_ne_bytes()); // tables
    assert_eq!(request, expected);
}

/// The request for a step's ports alone: the same header and request, its length grown by a
/// bytecode attribute (length 20, INET_DIAG_REQ_BYTECODE) of two port comparisons:
/// `sport >= 20000` (true: on to the next, 8 bytes on; false: 20, past the end: left out),
/// `sport <= 20003` (true: the end, kept; false: past it).
#[test]
fn the_request_for_a_steps_ports() {
    let request = ports_request(tfcluster::core::claims::HOLDING, Some((20000, 20003)));
    let mut expected = Vec::new();
    expected.extend_from_slice(&96u32.to_ne_bytes());
    expected.extend_from_slice(&18u16.to_ne_bytes());
    expected.extend_from_slice(&0x301u16.to_ne_bytes());
    expected.extend_from_slice(&1u32.to_ne_bytes());
    expected.extend_from_slice(&0u32.to_ne_bytes());
    expected.resize(68, 0);
    expected.extend_from_slice(&(0xffeu32 & !(1 << 6)).to_ne_bytes()); // every state but TIME_WAIT
    expected.extend_from_slice(&0u32.to_ne_bytes());
    expected.extend_from_slice(&20u16.to_ne_bytes());
    expected.extend_from_slice(&1u16.to_ne_bytes());
    for (code, no, port) in [(2u8, 20u16, 20000u16), (3, 12, 20003)] {
        expected.extend_from_slice(&[code, 8]);
        expected.extend_from_slice(&no.to_ne_bytes());
        expected.extend_from_slice(&[0, 0]);
        expected.extend_from_slice(&port.to_ne_bytes());
    }
    assert_eq!(request, expected);
}

/// A socket on a port, made for one row of [`the_kernel_filters_a_look_at_a_steps_ports`]: the
/// port, and what keeps the socket open (dropped once the row is checked).
type Holds = fn() -> (u16, Vec<Box<dyn std::any::Any>>);

/// What is on a port, and what the claim's two looks say of it: `binds`, whether a fresh socket
/// binds to it (the look that spares the kernel's walk: [`tfcluster::spank::sock_diag::unbound`]),
/// and `held`, whether the kernel's diagnostics, asked when it does not, name a socket holding
/// it (every state but TIME_WAIT).
struct OnAPort {
    what: &'static str,
    holds: Holds,
    binds: bool,
    held: bool,
}

/// A listener on the wildcard address (IPv4 and IPv6 where the machine has both), and its
/// port: one the kernel found free on every address. A port free on the loopback alone may be
/// a connection's on another address (the test cluster's, on its bridge).
fn wildcard_listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("[::]:0")
        .or_else(|_| std::net::TcpListener::bind("0.0.0.0:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// A listener on the loopback address, and its port.
fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[rustfmt::skip]
const ON_A_PORT: &[OnAPort] = &[
    OnAPort { what: "nothing",                        binds: true,  held: false, holds: || {
        let (_, port) = wildcard_listener();
        (port, vec![])
    } },
    OnAPort { what: "an IPv4 listener",               binds: false, held: true,  holds: || {
        let (l, port) = listener();
        (port, vec![Box::new(l)])
    } },
    OnAPort { what: "a connection's connecting side", binds: false, held: true,  holds: || {
        let (l, port) = listener();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        (client.local_addr().unwrap().port(), vec![Box::new(l), Box::new(client)])
    } },
    OnAPort { what: "a TIME_WAIT (the server's end closed first)", binds: false, held: false, holds: || {
        let (l, port) = wildcard_listener();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (server, _) = l.accept().unwrap();
        drop(server);
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(client);
        std::thread::sleep(std::time::Duration::from_millis(50));
        (port, vec![])
    } },
];

/// On this machine's kernel: the claim's looks at a port, for each thing that may be on it. A
/// port that binds is held by nothing; one that does not is asked of the kernel's diagnostics,
/// which find the sockets on it in any state but TIME_WAIT (a connection bound to a port holds
/// it as a listener does), IPv4 and IPv6 in one request, and no other port's.
#[test]
fn the_kernel_filters_a_look_at_a_steps_ports() {
    use tfcluster::spank::sock_diag::{holding, unbound};
    for row in ON_A_PORT {
        let (port, _guards) = (row.holds)();
        assert_eq!(unbound(port), row.binds, "binds: {}", row.what);
        let found = holding(&[port]);
        assert_eq!(!found.is_empty(), row.held, "held: {}: {found:?}", row.what);
        assert!(
            found.iter().all(|s| s.port == port),
            "{}: {found:?}",
            row.what
        );
    }
    // IPv6 alone on a port: the same request finds it (where this machine has IPv6 loopback).
    if let Ok(v6) = std::net::TcpListener::bind("[::1]:0") {
        let v6_port = v6.local_addr().unwrap().port();
        assert!(!unbound(v6_port), "an IPv6 listener binds");
        let found = holding(&[v6_port]);
        assert!(
            !found.is_empty() && found.iter().all(|s| s.port == v6_port),
            "an IPv6 listener: {found:?}"
        );
    }
}

/// A netlink message as the kernel sends it: header (length, type), then `body`.
fn message(kind: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(16 + body.len() as u32).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&[0; 10]);
    out.extend_from_slice(body);
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// An `inet_diag_msg` of a listening socket on `port` owned by `uid`.
fn listening_socket(port: u16, uid: u32) -> Vec<u8> {
    let mut body = vec![10, 10, 0, 0]; // AF_INET6, TCP_LISTEN
    body.extend_from_slice(&port.to_be_bytes());
    body.resize(64, 0);
    body.extend_from_slice(&uid.to_ne_bytes());
    body.extend_from_slice(&4242u32.to_ne_bytes()); // inode
    body
}

/// A listening socket as [`diag_reply`] reads [`listening_socket`]'s.
fn socket(port: u16, uid: u32) -> Socket {
    Socket {
        port,
        uid,
        state: 10,
    }
}

/// The kernel's replies: (what, the buffer, what it says).
#[rustfmt::skip]
#[test]
fn the_kernels_replies_about_listening_sockets() {
    let two = [message(18, &listening_socket(20000, 61002)), message(18, &listening_socket(22, 0))].concat();
    let cases: Vec<(&str, Vec<u8>, DiagReply)> = vec![
        ("two sockets, more to come", two.clone(),
         DiagReply::More(vec![socket(20000, 61002), socket(22, 0)])),
        ("two sockets, then the end", [two.clone(), message(3, &[0; 4])].concat(),
         DiagReply::Done(vec![socket(20000, 61002), socket(22, 0)])),
        ("the end alone",             message(3, &[0; 4]),             DiagReply::Done(vec![])),
        ("an error (no inet_diag)",   message(2, &[0xea, 0xff, 0xff, 0xff]), DiagReply::Failed),
        ("a message cut short",       message(18, &listening_socket(1, 1))[..40].to_vec(), DiagReply::Failed),
        ("a length of zero",          vec![0; 16],                     DiagReply::Failed),
        ("a header cut short",        vec![72, 0, 0],                  DiagReply::Failed),
        ("another message type",      message(16, &[0; 8]),            DiagReply::Failed),
    ];
    for (what, buf, says) in cases {
        assert_eq!(diag_reply(&buf), says, "{what}");
    }
}

/// On this machine's kernel: a socket this test listens on is among the node's listeners, with
/// its owner, and the kernel's answer agrees with `/proc/net/tcp` and `tcp6`. Other tests (and
/// the machine) open and close listeners meanwhile, so `/proc` is read before and after: the
/// kernel must list every listener both reads saw, and none that neither saw. A listener opened
/// and closed between the two reads is seen by neither: the look is taken again, five times at
/// most (a local CI run, 2026-11-30, had one such), and the last must agree.
#[test]
fn the_kernel_lists_a_listening_socket_with_its_owner() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // This process's uid: the owner of its /proc entry.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let proc = || -> Vec<Listener> {
        ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .flat_map(|text| listeners(&text))
            .collect()
    };
    let look = || {
        let before = proc();
        let found = tfcluster::spank::sock_diag::from_kernel(tfcluster::core::claims::LISTENING)
            .expect("socket diagnostics answer");
        let after = proc();
        let found: Vec<Listener> = found.iter().map(Socket::listener).collect();
        let missing = before
            .iter()
            .any(|l| after.contains(l) && !found.contains(l));
        let unseen = found
            .iter()
            .any(|l| !before.contains(l) && !after.contains(l));
        (!missing && !unseen, found, before, after)
    };
    let (mut agree, mut found, mut before, mut after) = look();
    for _ in 1..5 {
        if agree {
            break;
        }
        (agree, found, before, after) = look();
    }
    assert!(found.contains(&Listener { port, uid }), "{found:?}");
    assert!(
        agree,
        "kernel: {found:?}\n/proc before: {before:?}\n/proc after: {after:?}"
    );
}

// ---- on the test cluster ---------------------------------------------------------------------

const OWNER: &str = "tfc-owner";
const OTHER: &str = "tfc-other";

/// What already holds port 20000 on n9 when the owner's step asks for it there
/// (`port_base=20000`: two jobs forced onto the same ports), held by a job in partition
/// `shared`, with and without `isolate=yes`.
struct Holder {
    what: &'static str,
    isolate: bool,
    /// Whose job holds the port.
    user: &'static str,
    /// The holding job's program (`{probe}`: the probe script, `{d}`: the test's directory,
    /// where the holder touches `endpoints` once it holds the port and ends once `stop` is
    /// there).
    holds: &'static str,
    /// Why n9 refuses, from the holding job's id and its user's uid.
    refusal: fn(job: u32, uid: u32) -> Error,
}

const STEP_ON_20000: &str = "--tf-cluster=worker:*,port_base=20000";
/// A step that holds its ports, its server not yet listening (TensorFlow takes seconds to
/// import before it listens).
const CLAIM_ONLY: &str = "--tf-cluster=worker:*,port_base=20000 sh -c 'touch {d}/endpoints; while [ ! -e {d}/stop ]; do sleep 0.1; done'";
const SERVING: &str = "--tf-cluster=worker:*,port_base=20000 {probe} serve {d}";
const LISTENING: &str = "{probe} listen {d} 20000";

#[rustfmt::skip]
const HOLDERS: &[Holder] = &[
    Holder { what: "another user's step, its server not yet listening", isolate: false, user: OTHER, holds: CLAIM_ONLY,
             refusal: |job, _| Error::PortClaimed { port: 20000, job_id: job, step_id: 0 } },
    Holder { what: "another user's step, its server listening",         isolate: false, user: OTHER, holds: SERVING,
             refusal: |job, _| Error::PortClaimed { port: 20000, job_id: job, step_id: 0 } },
    Holder { what: "the owner's other job's step",                      isolate: false, user: OWNER, holds: CLAIM_ONLY,
             refusal: |job, _| Error::PortClaimed { port: 20000, job_id: job, step_id: 0 } },
    Holder { what: "another user's program listening first",            isolate: false, user: OTHER, holds: LISTENING,
             refusal: |_, uid| Error::PortListened { port: 20000, uid } },
    Holder { what: "another job's isolated step",                       isolate: true,  user: OTHER, holds: SERVING,
             refusal: |job, _| Error::PortClaimed { port: 20000, job_id: job, step_id: 0 } },
    Holder { what: "another user's program, with isolate=yes",          isolate: true,  user: OTHER, holds: LISTENING,
             refusal: |_, uid| Error::PortListened { port: 20000, uid } },
];

/// Two jobs on one node on the same ports: the owner's step is refused before any of its tasks
/// starts, with one line naming the node, the port and what to do; the holding job runs on
/// undisturbed and ends well; once it has ended, the same step runs (its claim went with it).
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_port_another_job_holds_refuses_the_step_before_any_task_starts() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    for holder in HOLDERS {
        let _plugstack = holder.isolate.then(|| PlugStack::isolated(""));
        let uid: u32 = sh_ok(&format!("id -u {}", holder.user))
            .trim()
            .parse()
            .unwrap();
        let d = dir().join("ports-held");
        let d = d.display();
        let holds = holder
            .holds
            .replace("{probe}", &probe)
            .replace("{d}", &d.to_string());
        let owner = format!(
            "runuser -u {OWNER} -- srun -p shared -w n9 -N1 -n1 -t 1 {STEP_ON_20000} sh -c"
        );
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {} -- srun -p shared -w n9 -N1 -n1 -t 2 -J holder {holds} >{d}/holder.out 2>{d}/holder.err &
holder=$!
for i in $(seq 1800); do [ -e {d}/endpoints ] && break; kill -0 $holder 2>/dev/null || break; sleep 0.1; done
echo \"JOB|$(squeue -h -n holder -o %i)\"
echo \"HELD|$([ -e {d}/endpoints ] && echo yes || echo no)\"
{owner} 'echo RAN'
echo \"OWNER|$?\"
touch {d}/stop; wait $holder; echo \"HOLDER|$?\"
{owner} 'echo \"AFTER|ran\"'",
            holder.user
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("{}:\n{stdout}\n{stderr}", holder.what);
        let job: u32 = records(&stdout, "JOB")[0][0].parse().expect(&what);
        assert_eq!(
            records(&stdout, "HELD"),
            [["yes"]],
            "the holder never started: {what}"
        );
        assert!(!stdout.contains("RAN"), "a task ran: {what}");
        if !srun_stopped_waiting(&stderr) {
            assert_ne!(records(&stdout, "OWNER"), [["0"]], "{what}");
        }
        assert_eq!(records(&stdout, "HOLDER"), [["0"]], "{what}");
        assert_eq!(records(&stdout, "AFTER"), [["ran"]], "{what}");
        let line = ShellError::Ports {
            node: "n9".into(),
            reason: (holder.refusal)(job, uid).to_string(),
        };
        assert_eq!(
            stderr.matches(&format!("tfcluster: {line}")).count(),
            1,
            "{what}"
        );
    }
}

/// A 2-node step whose ports another job holds on one of its nodes only (n9): n9 says so once
/// and stops the step, so n10's task, which may have started, ends within seconds instead of
/// running its program (`sleep 20`) with a TF_CONFIG that names the other job's port on n9;
/// with and without isolate=yes. When n9 refused only its own task, n10's ran its 20 s (22.05,
/// 24.11, 26.05). (The step's length is the test: a program that printed after its sleep was
/// seen to print once the stop had killed the sleep but not yet its shell, 26.05.)
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn ports_held_on_one_node_stop_the_whole_step() {
    let d = dir().join("ports-one-node");
    let d = d.display();
    for isolate in [false, true] {
        let _plugstack = isolate.then(|| PlugStack::isolated(""));
        let holds = CLAIM_ONLY.replace("{d}", &d.to_string());
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OTHER} -- srun -p shared -w n9 -N1 -n1 -t 2 -J holder {holds} >{d}/holder.out 2>&1 &
holder=$!
for i in $(seq 1800); do [ -e {d}/endpoints ] && break; kill -0 $holder 2>/dev/null || break; sleep 0.1; done
echo \"JOB|$(squeue -h -n holder -o %i)\"
echo \"HELD|$([ -e {d}/endpoints ] && echo yes || echo no)\"
start=$EPOCHREALTIME
runuser -u {OWNER} -- srun -p shared -w n9,n10 -N2 -n2 -t 1 {STEP_ON_20000} sleep 20
echo \"OWNER|$?|$(awk -v a=$start -v b=$EPOCHREALTIME 'BEGIN {{print b - a}}')\"
touch {d}/stop; wait $holder"
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("isolate {isolate}:\n{stdout}\n{stderr}");
        let job: u32 = records(&stdout, "JOB")[0][0].parse().expect(&what);
        assert_eq!(
            records(&stdout, "HELD"),
            [["yes"]],
            "the holder never started: {what}"
        );
        let owner = &records(&stdout, "OWNER")[0];
        if !srun_stopped_waiting(&stderr) {
            assert_ne!(owner[0], "0", "{what}");
        }
        let seconds: f64 = owner[1].parse().expect(&what);
        assert!(seconds < 15.0, "the step lasted {seconds} s: {what}");
        let line = ShellError::Ports {
            node: "n9".into(),
            reason: Error::PortClaimed {
                port: 20000,
                job_id: job,
                step_id: 0,
            }
            .to_string(),
        };
        assert_eq!(
            stderr.matches(&format!("tfcluster: {line}")).count(),
            1,
            "{what}"
        );
    }
}

/// Where the site reserves ports (the test cluster: `MpiParams=ports=12000-12999`), two jobs
/// that run side by side on one node get Slurm's reservation, without asking, and never the
/// same port: the collision-free setup the admin guide recommends.
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn jobs_on_one_node_get_slurms_reserved_ports_which_never_meet() {
    let d = dir().join("ports-reserved");
    let d = d.display();
    // Each job's tasks report, then hold the node until both jobs have reported.
    let job = |name: &str| {
        format!(
            "runuser -u {OWNER} -- srun -p shared -w n9 -N1 -n2 -t 1 --tf-cluster sh -c \
             '{report}; touch {d}/m/{name}.$SLURM_PROCID; while [ $(ls {d}/m | wc -l) -lt 4 ]; do sleep 0.1; done' >{d}/{name}.out",
            report = tool("report.sh")
        )
    };
    sh_ok(&format!(
        "rm -rf {d}; mkdir -m 1777 {d} {d}/m; ({}) & ({}) & wait",
        job("a"),
        job("b")
    ));
    let ports = |name: &str| -> Vec<u64> {
        let text = std::fs::read_to_string(format!("{d}/{name}.out")).unwrap();
        let tf: serde_json::Value = text
            .lines()
            .find_map(|l| l.strip_prefix("TASK|"))
            .and_then(|l| l.splitn(4, '|').nth(3))
            .map(|json| serde_json::from_str(json).unwrap())
            .unwrap_or_else(|| panic!("{name}: {text}"));
        tf["cluster"]["worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e.as_str()
                    .unwrap()
                    .rsplit_once(':')
                    .unwrap()
                    .1
                    .parse()
                    .unwrap()
            })
            .collect()
    };
    let (a, b) = (ports("a"), ports("b"));
    for port in a.iter().chain(&b) {
        assert!((12000..=12999).contains(port), "not reserved: {a:?} {b:?}");
    }
    assert!(
        a.iter().all(|p| !b.contains(p)),
        "the jobs met: {a:?} {b:?}"
    );
}

/// `/run/tfcluster` is root's alone, also where an older version left it open (0.2 to 0.7 made
/// it 0755 and the claims' lock 0644): another user who opened that lock and holds it does not
/// hold up the owner's step (the lock is made again, an inode they never had), and afterwards
/// can neither read, lock, create nor replace anything there. A lock still held after
/// [`LOCK_WAIT`] (here root's own `flock`, as a stuck process would) refuses the step with a
/// line naming the file, instead of a wait without end. (Each holder runs in a process group
/// of its own, so that ending it ends its `sleep`, which holds the lock too.)
#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn no_other_user_can_hold_up_a_nodes_steps() {
    let d = node_dir("n9");
    let lock = format!("{d}/{LOCK_FILE}");
    let step = format!(
        "runuser -u {OWNER} -- srun -p shared -w n9 -N1 -n1 -t 1 --tf-cluster=worker:* echo"
    );
    let held = format!("for i in $(seq 50); do flock -n {lock} true || break; sleep 0.1; done");
    let out = sh(&format!(
        "{step} made
chmod 755 {RUN_DIR} {CLAIMS_DIR} {d}; chmod 644 {lock}
setsid runuser -u {OTHER} -- flock {lock} sleep 60 & other=$!
{held}
{step} RAN_PAST_OTHER
kill -- -$other; wait $other 2>/dev/null
stat -c 'MODE|%n|%a|%U' {RUN_DIR} {CLAIMS_DIR} {d} {lock}
for try in 'cat {lock}' 'flock -n {lock} true' 'touch {d}/x' 'ln -sf /tmp {d}/y' 'mv {lock} {d}/z'; do
    runuser -u {OTHER} -- sh -c \"$try\" 2>/dev/null; echo \"OTHER|$try|$?\"
done
setsid flock {lock} sleep 60 & root=$!
{held}
{step} RAN_PAST_ROOT
echo \"STEP|$?\"
kill -- -$root; wait $root 2>/dev/null"
    ));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let what = format!("{stdout}\n{stderr}");
    assert!(stdout.contains("RAN_PAST_OTHER"), "{what}");
    let modes = records(&stdout, "MODE");
    let expected: Vec<Vec<String>> = [RUN_DIR, CLAIMS_DIR, &d]
        .iter()
        .map(|p| vec![p.to_string(), "700".into(), "root".into()])
        .chain([vec![lock.clone(), "600".into(), "root".into()]])
        .collect();
    assert_eq!(modes, expected, "{what}");
    for attempt in records(&stdout, "OTHER") {
        assert_ne!(
            attempt[1], "0",
            "another user could: {}\n{what}",
            attempt[0]
        );
    }
    assert!(!stdout.contains("RAN_PAST_ROOT"), "{what}");
    if !srun_stopped_waiting(&stderr) {
        assert_ne!(records(&stdout, "STEP"), [["0"]], "{what}");
    }
    let line = format!(
        "is still locked after {} s: another process holds it (as root: fuser -v {lock})",
        LOCK_WAIT.as_secs()
    );
    assert_eq!(stderr.matches(&line).count(), 1, "{what}");
}

/// Whether the reservation in the step's environment is Slurm's: the table of
/// [`Reservation::vouched`] (what the environment says, what slurmctld holds for the step, the
/// ports the step takes, whether a note says why not).
#[rustfmt::skip]
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn only_the_reservation_slurmctld_holds_is_the_steps() {
    // (what, SLURM_STEP_RESV_PORTS, slurmctld's record, the ports taken and whether a note says
    // why not, or the refusal)
    let unchecked = Error::ReservationUnchecked { reason: "Unable to contact slurm controller".into() };
    let rows: [(&str, Option<&str>, Result<Option<&str>, &str>, Result<(Option<&str>, bool), Error>); 7] = [
        ("no variable: slurmctld is not asked", None, Err("not asked"), Ok((None, false))),
        ("Slurm's own reservation", Some("12000-12001"), Ok(Some("12000-12001")), Ok((Some("12000-12001"), false))),
        ("the same ports written otherwise", Some("12000,12001"), Ok(Some("12000-12001")), Ok((Some("12000,12001"), false))),
        ("exported by the user, Slurm reserved none", Some("7100"), Ok(None), Ok((None, true))),
        ("other ports than Slurm's", Some("7100-7101"), Ok(Some("12000-12001")), Ok((None, true))),
        ("slurmctld did not answer: refused, as the other nodes may have had its answer",
         Some("12000-12001"), Err("Unable to contact slurm controller"), Err(unchecked)),
        ("a list that is no list", Some("x"), Ok(Some("12000")), Ok((None, true))),
    ];
    for (what, env, record, want) in rows {
        let mut asked = false;
        let got = Reservation::vouched(env, || {
            asked = true;
            record.map(|r| r.map(String::from)).map_err(String::from)
        });
        let got = got.map(|r| (r.ports, r.note.is_some()));
        assert_eq!(got, want.map(|(ports, noted)| (ports.map(String::from), noted)), "{what}");
        assert_eq!(asked, env.is_some(), "{what}: slurmctld asked");
    }
    let note = Reservation::vouched(Some("7100"), || Ok(None)).unwrap().note.unwrap();
    assert_eq!(
        note,
        "note: SLURM_STEP_RESV_PORTS='7100' is not the reservation slurmctld holds for this step \
         (it holds none), so the step's ports come from port_range instead; Slurm sets this \
         variable itself when it reserves ports (srun --resv-ports, MpiParams=ports): do not set \
         or export it"
    );
}

/// From another user's side: a user who sends `SLURM_STEP_RESV_PORTS` with a step Slurm
/// reserved no ports for (`--resv-ports=0`) does not get those ports, which `isolate=yes` would
/// close to every other user of the node, and is told why; a step Slurm did reserve ports for
/// keeps them. (what, srun's words before `--tf-cluster`, whether the ports are Slurm's).
#[rustfmt::skip]
const RESERVATIONS: &[(&str, &str, bool)] = &[
    ("srun --export", "srun --resv-ports=0 --export=ALL,SLURM_STEP_RESV_PORTS=7100-7101", false),
    ("exported in srun's environment", "SLURM_STEP_RESV_PORTS=7100-7101 srun --resv-ports=0", false),
    ("Slurm's own reservation", "srun --resv-ports=2", true),
];

#[test]
#[ignore = "needs the test cluster: run tests/run.sh"]
fn a_reservation_slurm_did_not_make_is_not_the_steps() {
    let _isolated = PlugStack::isolated("");
    for (what, srun, slurms) in RESERVATIONS {
        let line = format!(
            "runuser -u {OWNER} -- bash -c '{srun} -p shared -w n9 -N1 -n2 -t 1 --tf-cluster {}'",
            tool("report.sh")
        );
        let out = sh(&line);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("{what}: {line}\n{stdout}\n{stderr}");
        assert!(out.status.success(), "{what}");
        let ports: Vec<u64> = records(&stdout, "TASK")
            .iter()
            .flat_map(|t| {
                let tf: serde_json::Value = serde_json::from_str(t[3]).unwrap();
                let rank = tf["task"]["index"].as_u64().unwrap() as usize;
                let entry = tf["cluster"]["worker"][rank].as_str().unwrap().to_string();
                entry.rsplit_once(':').map(|(_, p)| p.parse().unwrap())
            })
            .collect();
        assert_eq!(ports.len(), 2, "{what}");
        let noted = stderr.contains("is not the reservation slurmctld holds for this step");
        if *slurms {
            assert!(
                ports.iter().all(|p| (12000..=12999).contains(p)),
                "{what}: {ports:?}"
            );
            assert!(!noted, "{what}");
        } else {
            assert!(
                ports.iter().all(|p| !(7100..=7101).contains(p)),
                "{what}: {ports:?}"
            );
            assert!(noted, "{what}");
        }
    }
}

/// Every file tfcluster writes under `/run/tfcluster` (claims, the holder's files, a handed-over
/// table) is root's alone: mode 0600, also where an older version left it 0644, and never
/// written through a symbolic link.
#[test]
fn files_under_run_tfcluster_are_written_0600() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use tfcluster::spank::run_dir::write_private;
    let d = std::env::temp_dir().join(format!("tfc-private-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    let new = d.join("new");
    write_private(&new, "a").unwrap();
    assert_eq!(
        (mode(&new), std::fs::read_to_string(&new).unwrap()),
        (0o600, "a".into())
    );
    let old = d.join("old");
    std::fs::write(&old, "longer text").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_private(&old, "b").unwrap();
    assert_eq!(
        (mode(&old), std::fs::read_to_string(&old).unwrap()),
        (0o600, "b".into())
    );
    let target = d.join("target");
    std::fs::write(&target, "kept").unwrap();
    std::os::unix::fs::symlink(&target, d.join("link")).unwrap();
    assert!(write_private(&d.join("link"), "c").is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    std::fs::remove_dir_all(&d).unwrap();
}
