//! The watcher of `fail_fast=auto` with ps (`tfcluster::spank::workers`), its own thread run on
//! this machine's kernel: a worker is marked once a connection to its server port is seen that
//! the job's user holds, and not before (one older than the step holds the port, and the node's
//! claim refuses the step); one more
//! look finds a connection that is closing; the thread ends by itself once every worker is
//! marked, or at its stop within one look, and says so; until a worker's port has a listener it
//! looks at the listeners alone; its thread starts at `run`, and where slurm.conf says Slurm may
//! run the hook that calls it in a child process, before the tasks fork.

mod common;
use common::cluster::within;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tfcluster::core::claims::check_free;
use tfcluster::core::error::Error;
use tfcluster::spank::sock_diag::{connections, holding, listening_on};
use tfcluster::spank::workers::Watcher;

/// This process's uid: the owner of its /proc entry (the job's user, for these watches).
fn me() -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap())
}

/// The watcher's looks at `ports` for this process's user, as slurmstepd's are for the job's:
/// the connections, and whether one of them has a listener yet.
#[allow(clippy::type_complexity)]
fn look(
    ports: &[u16],
) -> (
    impl Fn() -> Vec<u16> + Send + Sync + 'static,
    impl Fn() -> bool + Send + Sync + 'static,
) {
    look_as(ports, me())
}

/// [`look`], for the job of user `uid`.
#[allow(clippy::type_complexity)]
fn look_as(
    ports: &[u16],
    uid: u32,
) -> (
    impl Fn() -> Vec<u16> + Send + Sync + 'static,
    impl Fn() -> bool + Send + Sync + 'static,
) {
    let ports = ports.to_vec();
    let listened = ports.clone();
    (
        move || connections(&ports, uid),
        move || listening_on(&listened, uid),
    )
}

/// A watcher whose thread runs at once, as slurmstepd's does once the tasks have forked;
/// `None` when there is nothing to watch.
fn started(
    workers: Vec<(u32, u16)>,
    looks: (
        impl Fn() -> Vec<u16> + Send + Sync + 'static,
        impl Fn() -> bool + Send + Sync + 'static,
    ),
    every: Duration,
    say: impl Fn(&str) + Send + Sync + 'static,
) -> Option<Watcher> {
    let mut watcher = Watcher::new(workers, looks, every, say)?;
    watcher.run().unwrap();
    Some(watcher)
}

/// Looks that only count themselves: how many looks at connections (none found), how many at
/// listeners (each answering `listening`), and the two looks.
#[allow(clippy::type_complexity)]
fn counted(
    listening: Arc<AtomicBool>,
) -> (
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    (
        impl Fn() -> Vec<u16> + Send + Sync + 'static,
        impl Fn() -> bool + Send + Sync + 'static,
    ),
) {
    let (looks, listens) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (looked, asked) = (looks.clone(), listens.clone());
    let counting = (
        move || {
            looked.fetch_add(1, Ordering::SeqCst);
            Vec::new()
        },
        move || {
            asked.fetch_add(1, Ordering::SeqCst);
            listening.load(Ordering::SeqCst)
        },
    );
    (looks, listens, counting)
}

/// A server port on this machine, and a port no one listens on.
fn ports() -> (TcpListener, u16, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let unused = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    (listener, port, unused)
}

#[test]
fn a_worker_is_marked_once_a_connection_to_its_port_is_seen() {
    let (listener, port, unused) = ports();
    let (tx, said) = mpsc::channel();
    let say = move |line: &str| tx.send(line.to_string()).unwrap();
    let every = Duration::from_millis(50);
    let watcher = started(
        vec![(7, port), (8, unused)],
        look(&[port, unused]),
        every,
        say,
    )
    .unwrap();
    // Listening alone is no connection.
    std::thread::sleep(4 * every);
    assert!(!watcher.reached(7) && !watcher.reached(8));
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    assert!(
        within(5, || watcher.reached(7)),
        "the connection was not seen"
    );
    assert!(!watcher.reached(8), "a port without a connection");
    // Worker 8 is never reached: the thread runs until its stop, which it obeys within a look.
    assert!(said.try_recv().is_err(), "the thread ended early");
    let mut watcher = watcher;
    let started = Instant::now();
    watcher.stop();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the stop waited {:?}",
        started.elapsed()
    );
    let line = said.recv_timeout(Duration::from_secs(1)).unwrap();
    assert!(
        line.contains("stopped watching") && line.contains("the step ends here"),
        "{line}"
    );
}

#[test]
fn the_thread_ends_once_every_worker_is_marked() {
    let (listener, port, _) = ports();
    let (tx, said) = mpsc::channel();
    let say = move |line: &str| tx.send(line.to_string()).unwrap();
    let watcher = started(
        vec![(3, port)],
        look(&[port]),
        Duration::from_millis(50),
        say,
    )
    .unwrap();
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    let line = said.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        line.contains("the chief has connected to every one"),
        "{line}"
    );
    assert!(watcher.reached(3));
}

/// What never marks a worker: a connection another user holds, and no connection at all. A
/// connection older than the step never reaches the watch: it holds the worker's port, and the
/// node's claim, made just before the watch, refuses the step.
#[test]
fn a_connection_older_than_the_step_refuses_it_and_another_users_marks_nothing() {
    let (listener, port, _) = ports();
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    // The server's end, its listener gone, as a worker's of an earlier step would be.
    drop(listener);
    let held = holding(&[port]);
    assert!(
        matches!(check_free(&[port], &[1], &[], &held), Err(Error::PortListened { port: p, .. }) if p == port),
        "the claim's look: {held:?}"
    );
    let every = Duration::from_millis(20);
    let other = me() + 61002;
    let watcher = started(vec![(3, port)], look_as(&[port], other), every, |_| {}).unwrap();
    std::thread::sleep(10 * every);
    assert!(!watcher.reached(3), "another user's look");
    assert!(!watcher.look_again(3));
    // The same connection, looked for as its owner's: the kernel's answer names its owner.
    assert!(connections(&[port], me()).contains(&port));
    assert!(connections(&[port], other).is_empty());
}

#[test]
fn one_more_look_finds_a_connection_that_is_closing() {
    let (listener, port, _) = ports();
    // A look an hour apart, whose first (just after the start) comes before the connection.
    let watcher = started(
        vec![(5, port)],
        look(&[port]),
        Duration::from_secs(3600),
        |_| {},
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (server, _) = listener.accept().unwrap();
    // The worker's end closes first, as when its process dies: its socket lingers (FIN_WAIT)
    // under the server port while the chief's end is open.
    drop(server);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!watcher.reached(5));
    assert!(watcher.look_again(5), "{:?}", connections(&[port], me()));
    assert!(watcher.reached(5));
    drop(client);
}

#[test]
fn nothing_to_watch_starts_no_thread() {
    assert!(Watcher::new(Vec::new(), look(&[]), Duration::from_secs(1), |_| {}).is_none());
}

/// Until one of the workers' ports has a listener, the thread asks for listeners alone (no
/// connection comes before one; a look at connections walks every connection of the machine).
#[test]
fn no_look_at_connections_before_a_port_listens() {
    let listening = Arc::new(AtomicBool::new(false));
    let (looks, listens, counting) = counted(listening.clone());
    let every = Duration::from_millis(20);
    let watcher = started(vec![(3, 1)], counting, every, |_| {}).unwrap();
    std::thread::sleep(10 * every);
    // No look at connections at all.
    assert_eq!(looks.load(Ordering::SeqCst), 0);
    assert!(listens.load(Ordering::SeqCst) >= 3);
    listening.store(true, Ordering::SeqCst);
    assert!(
        within(5, || looks.load(Ordering::SeqCst) >= 2),
        "no look once a port listens"
    );
    drop(watcher);
}

/// The watch is made at `new`, which looks at nothing (the node's claim has just seen the
/// step's ports free), its thread started only at `run` (once the tasks have forked:
/// slurmstepd's `task_post_fork`), once however often run.
#[test]
fn the_thread_starts_at_run_and_once() {
    let (looks, listens, counting) = counted(Arc::new(AtomicBool::new(false)));
    let (tx, said) = mpsc::channel();
    let every = Duration::from_millis(20);
    let mut watcher = Watcher::new(vec![(3, 1)], counting, every, move |line: &str| {
        tx.send(line.to_string()).unwrap()
    })
    .unwrap();
    std::thread::sleep(10 * every);
    assert_eq!(looks.load(Ordering::SeqCst), 0, "a look before the tasks");
    assert_eq!(listens.load(Ordering::SeqCst), 0, "a thread before run");
    assert!(!watcher.running());
    assert!(watcher.run().is_ok() && watcher.running());
    assert!(
        within(5, || listens.load(Ordering::SeqCst) >= 3),
        "no thread after run"
    );
    assert!(watcher.run().is_ok(), "a second run");
    drop(watcher);
    // One thread, one line at its end.
    assert!(said.recv_timeout(Duration::from_secs(1)).is_ok());
    assert!(said.recv_timeout(Duration::from_millis(200)).is_err());
}

/// (slurm.conf, whether slurmstepd runs `task_post_fork` in a child process where no thread
/// outlives the hook, so that the watcher's thread must start before the tasks fork): Slurm
/// (24.05 and later) looks for `contain_spank` anywhere in `SlurmdParameters`, in any case.
#[rustfmt::skip]
const CONTAIN_SPANK: &[(&str, Result<bool, &str>)] = &[
    ("SlurmdParameters=config_overrides",                                 Ok(false)),
    ("SlurmdParameters=contain_spank",                                    Ok(true)),
    ("slurmdparameters=config_overrides,CONTAIN_SPANK # a comment",       Ok(true)),
    ("#SlurmdParameters=contain_spank",                                   Ok(false)),
    ("SlurmdParameters=contain_spank\nSlurmdParameters=config_overrides", Ok(false)), // the last line wins
    ("Include site.conf",                                                 Ok(true)),  // site.conf sets it
    ("Include gone.conf",                                                 Err("/etc/slurm/gone.conf does not exist")),
];

#[test]
fn where_the_watchers_thread_must_start_before_the_tasks_fork() {
    use std::path::Path;
    use tfcluster::core::topology::{read_slurm_conf, ConfFile};
    for (text, want) in CONTAIN_SPANK {
        let read = |path: &Path| match path.to_str().unwrap() {
            "/etc/slurm/slurm.conf" => ConfFile::Text(text.to_string()),
            "/etc/slurm/site.conf" => ConfFile::Text("SlurmdParameters=contain_spank".into()),
            _ => ConfFile::Missing,
        };
        let got = read_slurm_conf(Path::new("/etc/slurm/slurm.conf"), read)
            .map(|conf| conf.contain_spank());
        assert_eq!(got, want.map_err(String::from), "{text:?}");
    }
}
