//! The node's own name resolution, for the addresses the step's plan names.

use std::net::{IpAddr, ToSocketAddrs};

/// The addresses `address` resolves to on this node (getaddrinfo: /etc/hosts, DNS, or whatever
/// nsswitch.conf names), as the node's processes would find them.
pub fn resolve(address: &str) -> Result<Vec<IpAddr>, String> {
    (address, 0)
        .to_socket_addrs()
        .map(|found| found.map(|a| a.ip()).collect())
        .map_err(|e| e.to_string())
}
