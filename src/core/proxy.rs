//! HTTP proxies and gRPC. Many HPC sites set `http_proxy`/`https_proxy` for their users; gRPC,
//! which TensorFlow's tasks talk to each other with, then sends task-to-task traffic through the
//! proxy, and training hangs with no error. gRPC skips the proxy for the hosts listed in
//! `no_grpc_proxy`, or, when that is unset or empty, in `no_proxy`: the first with a value is
//! used, so `no_grpc_proxy` replaces `no_proxy` rather than adding to it. tfcluster therefore
//! sets `no_grpc_proxy` to what the user had (either variable) plus every address in the
//! cluster, and only when a proxy is set.

/// The variables that make gRPC use a proxy (it reads the lower-case forms; the upper-case ones
/// are checked too, since other tools in the same job honour them and sites set both).
pub const PROXY_VARS: &[&str] = &[
    "grpc_proxy",
    "https_proxy",
    "http_proxy",
    "HTTPS_PROXY",
    "HTTP_PROXY",
];

/// The proxy variables gRPC reads, as the task's environment has them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProxyEnv<'a> {
    /// `grpc_proxy`, `https_proxy`, `http_proxy` (and their upper-case forms): any non-empty.
    pub proxy_set: bool,
    /// `no_grpc_proxy`
    pub no_grpc_proxy: Option<&'a str>,
    /// `no_proxy` (or `NO_PROXY`)
    pub no_proxy: Option<&'a str>,
}

/// The `no_grpc_proxy` a task needs, or `None` when it needs none (no proxy set). `addresses`
/// are the hosts TensorFlow dials (after the `address=` template), in any order.
pub fn no_grpc_proxy<S: AsRef<str>>(env: &ProxyEnv, addresses: &[S]) -> Option<String> {
    if !env.proxy_set {
        return None;
    }
    let users = [env.no_grpc_proxy, env.no_proxy]
        .into_iter()
        .flatten()
        .find(|v| !v.trim().is_empty())
        .unwrap_or("");
    let mut entries: Vec<&str> = users
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    for address in addresses {
        let address = address.as_ref();
        if !entries.contains(&address) {
            entries.push(address);
        }
    }
    Some(entries.join(","))
}
