//! The network interface the collectives use (`socket_ifname`). NCCL and gloo, the
//! collectives under TensorFlow's MultiWorkerMirroredStrategy, JAX and PyTorch, pick an
//! interface of their own: NCCL the first that is not loopback or docker's (on a node with a
//! management network and a fast one, often the wrong one, and then the ranks hang), gloo the
//! one its host name resolves to (Debian's installer maps that name to 127.0.1.1, and gloo then
//! fails to connect across nodes). Each reads one variable that names the interface:
//! `NCCL_SOCKET_IFNAME` and `GLOO_SOCKET_IFNAME`. tfcluster sets both, on each node, to the
//! interface that holds the node's step address (the one TF_CONFIG, `MASTER_ADDR` and the
//! firewall name, `address=` honoured), as the node resolves it: the network the admin chose
//! for the step's traffic, which every other task already dials. A task whose job sets either
//! variable keeps its own ([`crate::core::plan::TaskEnv`]).

use std::net::IpAddr;

/// NCCL's interface.
pub const NCCL: &str = "NCCL_SOCKET_IFNAME";
/// gloo's interface (PyTorch's, and JAX's on CPU).
pub const GLOO: &str = "GLOO_SOCKET_IFNAME";

/// The values of [`NCCL`] and [`GLOO`] that name interface `ifname`, NUL-terminated: NCCL
/// takes a bare name as a prefix (`eth0` would match `eth0.100` too) and an exact name after
/// `=`; gloo takes the name.
pub fn values(ifname: &str) -> [String; 2] {
    [format!("={ifname}\0"), format!("{ifname}\0")]
}

/// The interface, among the node's `interfaces` (each name with one of its addresses), that
/// holds the node's step address, given what that address resolves to on the node
/// (`resolved`). None where it resolves to nothing, to a loopback address, to no address of an
/// interface, or to addresses of two interfaces (which one the peers reach is not known): the
/// libraries' own choice stays.
pub fn interface(
    resolved: &Result<Vec<IpAddr>, String>,
    interfaces: &[(String, IpAddr)],
) -> Result<String, String> {
    let addresses = resolved
        .as_ref()
        .map_err(|e| format!("the node's address does not resolve here ({e})"))?;
    if !addresses.is_empty() && !super::address::reachable_by_peers(addresses) {
        return Err("the node's address resolves to a loopback address here".into());
    }
    let mut holding: Vec<&str> = interfaces
        .iter()
        .filter(|(_, a)| addresses.contains(a))
        .map(|(name, _)| name.as_str())
        .collect();
    holding.sort_unstable();
    holding.dedup();
    match holding[..] {
        [one] => Ok(one.to_string()),
        [] => Err("no interface of the node holds the node's address".into()),
        _ => Err(format!(
            "the node's address is on several interfaces ({})",
            holding.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the node's address resolves to: its addresses, or the resolver's error.
    type Resolved = Result<&'static [&'static str], &'static str>;
    /// The node's interfaces: (name, address).
    type Interfaces = &'static [(&'static str, &'static str)];

    /// (what, what the address resolves to, the node's interfaces, the interface or why not)
    #[rustfmt::skip]
    const CASES: &[(&str, Resolved, Interfaces, Result<&str, &str>)] = &[
        ("the address's interface",        Ok(&["10.1.0.9"]),           &[("lo", "127.0.0.1"), ("eth0", "192.168.0.9"), ("ib0", "10.1.0.9")], Ok("ib0")),
        ("IPv4 and IPv6 on one interface", Ok(&["10.1.0.9", "fd00::9"]), &[("ib0", "10.1.0.9"), ("ib0", "fd00::9")],                          Ok("ib0")),
        ("Debian's 127.0.1.1",             Ok(&["127.0.1.1"]),          &[("lo", "127.0.0.1"), ("eth0", "192.168.0.9")],                     Err("the node's address resolves to a loopback address here")),
        ("on no interface",                Ok(&["10.1.0.9"]),           &[("eth0", "192.168.0.9")],                                          Err("no interface of the node holds the node's address")),
        ("resolves to nothing",            Ok(&[]),                     &[("eth0", "192.168.0.9")],                                          Err("no interface of the node holds the node's address")),
        ("on two interfaces",              Ok(&["10.1.0.9", "10.2.0.9"]), &[("ib0", "10.1.0.9"), ("ib1", "10.2.0.9")],                        Err("the node's address is on several interfaces (ib0, ib1)")),
        ("does not resolve",               Err("no such host"),         &[("eth0", "192.168.0.9")],                                          Err("the node's address does not resolve here (no such host)")),
    ];

    #[test]
    fn the_interface_that_holds_the_nodes_address() {
        for &(what, resolved, interfaces, want) in CASES {
            let resolved = resolved
                .map(|list| list.iter().map(|a| a.parse().unwrap()).collect())
                .map_err(str::to_string);
            let interfaces: Vec<(String, IpAddr)> = interfaces
                .iter()
                .map(|(n, a)| (n.to_string(), a.parse().unwrap()))
                .collect();
            let got = interface(&resolved, &interfaces);
            assert_eq!(
                got.as_deref(),
                want.map_err(|e| e.to_string()).as_deref(),
                "{what}"
            );
        }
    }
}
