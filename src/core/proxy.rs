//! HTTP proxies and gRPC. Many HPC sites set `http_proxy`/`https_proxy` for their users; gRPC,
//! which TensorFlow's tasks talk to each other with, then sends task-to-task traffic through the
//! proxy, and training hangs with no error. gRPC skips the proxy for the hosts listed in
//! `no_grpc_proxy`, or, when that is unset or empty, in `no_proxy`: the first with a value is
//! used, so `no_grpc_proxy` replaces `no_proxy` rather than adding to it. tfcluster therefore
//! sets `no_grpc_proxy` to what the user had (either variable) plus every address in the
//! cluster, and only when a proxy is set.

/// The variable tfcluster sets.
pub const VAR: &str = "no_grpc_proxy";

/// The variables that make gRPC use a proxy (it reads the lower-case forms; the upper-case ones
/// are checked too, since other tools in the same job honour them and sites set both).
const PROXIES: &[&str] = &[
    "grpc_proxy",
    "https_proxy",
    "http_proxy",
    "HTTPS_PROXY",
    "HTTP_PROXY",
];

/// Where the user's own exceptions are, first one with a value wins: gRPC reads
/// `no_grpc_proxy`, else `no_proxy`; `NO_PROXY` is what other tools of the same job read.
const EXCEPTIONS: &[&str] = &["no_grpc_proxy", "no_proxy", "NO_PROXY"];

/// Every variable the proxy rules read: the shell looks these up in the job's environment.
pub const READ: [&str; 8] = [
    PROXIES[0],
    PROXIES[1],
    PROXIES[2],
    PROXIES[3],
    PROXIES[4],
    EXCEPTIONS[0],
    EXCEPTIONS[1],
    EXCEPTIONS[2],
];

/// The job's proxy variables: those of [`READ`] that are set, with their values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    vars: Vec<(&'static str, String)>,
}

impl ProxyEnv {
    /// Reads every variable of [`READ`] through `get` (`None`: unset).
    pub fn read<E>(
        mut get: impl FnMut(&'static str) -> std::result::Result<Option<String>, E>,
    ) -> std::result::Result<ProxyEnv, E> {
        let mut vars = Vec::new();
        for name in READ {
            if let Some(value) = get(name)? {
                vars.push((name, value));
            }
        }
        Ok(ProxyEnv { vars })
    }

    /// From `NAME=value` pairs (tests); names outside [`READ`] are ignored, as the shell never
    /// reads them.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> ProxyEnv {
        ProxyEnv::read::<()>(|name| {
            Ok(pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string()))
        })
        .expect("no error")
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.trim().is_empty())
    }

    /// Whether gRPC would send the cluster's traffic through a proxy.
    fn proxy_set(&self) -> bool {
        PROXIES.iter().any(|name| self.get(name).is_some())
    }

    /// The user's own exceptions.
    fn exceptions(&self) -> &str {
        EXCEPTIONS
            .iter()
            .find_map(|name| self.get(name))
            .unwrap_or("")
    }
}

/// The `no_grpc_proxy` a task needs, or `None` when it needs none (no proxy set). `addresses`
/// are the hosts TensorFlow dials (after the `address=` template), in any order; each is added
/// once.
pub fn no_grpc_proxy<S: AsRef<str>>(env: &ProxyEnv, addresses: &[S]) -> Option<String> {
    if !env.proxy_set() {
        return None;
    }
    let mut entries: Vec<&str> = env
        .exceptions()
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let mut seen: std::collections::HashSet<&str> = entries.iter().copied().collect();
    for address in addresses {
        let address = address.as_ref();
        if seen.insert(address) {
            entries.push(address);
        }
    }
    Some(entries.join(","))
}
