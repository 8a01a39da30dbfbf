//! The address TensorFlow dials for a node, and a task's endpoint (`address:port`).
//!
//! Slurm's node lists hold NodeNames, which are not always the name of the network TensorFlow
//! should use (InfiniBand interfaces are often `node12-ib`, or a separate domain). The admin sets
//! a template once; `%h` is the NodeName and `%%` a literal `%`.
//!
//! [`Endpoints`] renders every node's address once per step and is the only place an endpoint
//! is written, in the two forms TensorFlow reads: JSON strings in TF_CONFIG, plain text in
//! DTensor's job list.

use super::ports::StepPorts;
use super::text::{decimal, push_decimal, push_json_str};

/// A parsed `address=` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFormat {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Host,
}

impl Default for AddressFormat {
    fn default() -> Self {
        AddressFormat {
            parts: vec![Part::Host],
        }
    }
}

impl AddressFormat {
    /// `None` when the template has no `%h`, an unknown `%x`, or characters that cannot be in
    /// a host name or address (whitespace, `,`, `"`, `:`, `\`, NUL).
    pub fn parse(template: &str) -> Option<AddressFormat> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = template.chars();
        while let Some(c) = chars.next() {
            match c {
                '%' => match chars.next()? {
                    'h' => {
                        if !text.is_empty() {
                            parts.push(Part::Text(std::mem::take(&mut text)));
                        }
                        parts.push(Part::Host);
                    }
                    '%' => text.push('%'),
                    _ => return None,
                },
                c if c.is_whitespace() || matches!(c, ',' | '"' | ':' | '\\' | '\0') => {
                    return None
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        parts
            .contains(&Part::Host)
            .then_some(AddressFormat { parts })
    }

    pub fn render(&self, host: &str) -> String {
        let mut out = String::with_capacity(host.len() + 16);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Host => out.push_str(host),
            }
        }
        out
    }
}

/// Every task's endpoint of one step: node `n`'s address (the `address=` template applied once)
/// and the port of local slot `k` (the same on every node). Both halves are rendered once, so
/// writing an endpoint is two copies: a 4096-task cluster has 4096 endpoints but only as many
/// ports as its busiest node has tasks.
#[derive(Debug, Clone)]
pub struct Endpoints {
    addresses: Vec<String>,
    /// Each node's `"address:` (JSON-escaped, quote open).
    json_prefixes: Vec<String>,
    /// Each local slot's port, as digits.
    ports: Vec<String>,
}

impl Endpoints {
    /// `slots`: the most tasks any node runs.
    pub fn new(
        hosts: &[String],
        format: &AddressFormat,
        ports: &StepPorts,
        slots: usize,
    ) -> Endpoints {
        let addresses: Vec<String> = hosts.iter().map(|h| format.render(h)).collect();
        let json_prefixes = addresses
            .iter()
            .map(|address| {
                let mut out = String::with_capacity(address.len() + 3);
                push_json_str(&mut out, address);
                out.pop(); // the closing quote: the port and its quote follow
                out.push(':');
                out
            })
            .collect();
        let ports = (0..slots)
            .map(|slot| {
                let mut out = String::with_capacity(5);
                push_decimal(&mut out, ports.of_slot(slot).into(), 0);
                out
            })
            .collect();
        Endpoints {
            addresses,
            json_prefixes,
            ports,
        }
    }

    /// The address TensorFlow dials for node `node`.
    pub fn address(&self, node: usize) -> &str {
        &self.addresses[node]
    }

    /// Every node's address, in node order (a name may repeat only if the template makes two
    /// nodes one address).
    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// The longest endpoint as a JSON string, for sizing buffers.
    pub fn widest_json(&self) -> usize {
        self.json_prefixes
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0)
            + 7
    }

    /// The port of local slot `slot` (the same on every node), as digits.
    pub fn port(&self, slot: usize) -> &str {
        &self.ports[slot]
    }

    /// The ports of a node with `local` tasks: those of its first `local` slots.
    pub fn ports_of(&self, local: usize) -> Vec<u16> {
        self.ports[..local.min(self.ports.len())]
            .iter()
            .filter_map(|port| decimal(port))
            .collect()
    }

    /// Appends `"address:port"` of local slot `slot` on node `node`.
    pub fn push_json(&self, out: &mut String, node: usize, slot: usize) {
        out.push_str(&self.json_prefixes[node]);
        out.push_str(&self.ports[slot]);
        out.push('"');
    }

    /// Appends `address:port` of local slot `slot` on node `node`.
    pub fn push_plain(&self, out: &mut String, node: usize, slot: usize) {
        out.push_str(&self.addresses[node]);
        out.push(':');
        out.push_str(&self.ports[slot]);
    }

    /// `address:port` of local slot `slot` on node `node`.
    pub fn plain(&self, node: usize, slot: usize) -> String {
        let mut out = String::with_capacity(self.addresses[node].len() + 6);
        self.push_plain(&mut out, node, slot);
        out
    }
}

/// Whether `resolved`, what a node's own resolver gives for a step address, are addresses the
/// other nodes can reach: at least one, and none loopback (Debian's installer maps a host's own
/// name to `127.0.1.1`, which only the node itself reaches). JAX's coordinator binds such an
/// address alone ([`super::jax::JaxStep::bind`]), and the collectives' interface is the one that
/// holds it ([`super::collectives::interface`]).
pub fn reachable_by_peers(resolved: &[std::net::IpAddr]) -> bool {
    !resolved.is_empty() && resolved.iter().all(|a| !a.is_loopback())
}
