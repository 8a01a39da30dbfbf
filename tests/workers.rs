//! The watcher of `fail_fast=auto` with ps (`tfcluster::spank::workers`), its own thread run on
//! this machine's kernel: a worker is marked once a connection to its server port is seen, and
//! not before; one more look finds a connection that is closing; the thread ends by itself once
//! every worker is marked, or at its stop within one look, and says so.

mod common;
use common::cluster::within;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tfcluster::spank::sock_diag::connected_ports;
use tfcluster::spank::workers::Watcher;

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
    let watcher =
        Watcher::start(vec![(7, port), (8, unused)], connected_ports, every, say).unwrap();
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
    // A look an hour apart: only the connection, seen at the first look, can end it.
    let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    let watcher = Watcher::start(
        vec![(3, port)],
        connected_ports,
        Duration::from_secs(3600),
        say,
    )
    .unwrap();
    let line = said.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        line.contains("the chief has connected to every one"),
        "{line}"
    );
    assert!(watcher.reached(3));
}

#[test]
fn one_more_look_finds_a_connection_that_is_closing() {
    let (listener, port, _) = ports();
    // A look an hour apart, which has not seen the connection yet.
    let watcher =
        Watcher::start(vec![(5, port)], Vec::new, Duration::from_secs(3600), |_| {}).unwrap();
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (server, _) = listener.accept().unwrap();
    // The worker's end closes first, as when its process dies: its socket lingers (FIN_WAIT,
    // TIME_WAIT) under the server port.
    drop(server);
    let _ = client.read(&mut [0; 1]);
    drop(client);
    assert!(!watcher.reached(5));
    assert!(
        watcher.look_again(5, connected_ports),
        "{:?}",
        connected_ports()
    );
    assert!(watcher.reached(5));
}

#[test]
fn nothing_to_watch_starts_no_thread() {
    assert!(Watcher::start(Vec::new(), connected_ports, Duration::from_secs(1), |_| {}).is_none());
}
