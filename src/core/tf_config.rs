//! TF_CONFIG text: `{"cluster":{ROLE:["addr:port",...],...},"task":{"type":ROLE,"index":N}}`,
//! plus `"rpc_layer"` when set.
//!
//! The cluster part is the same for every task of a step, so it is rendered once per node
//! ([`ClusterJson`]) and each task only appends its own `task` part ([`render`]). Lists are
//! dense, keys in TensorFlow's job order. Addresses go through serde_json once per node (any
//! byte a host name may hold is escaped correctly); ports are digits and need no escaping, so
//! an endpoint is the node's escaped `"address:` prefix followed by the port.

use super::error::{Error, Result};
use super::spec::Role;
use super::text::push_decimal;

/// Linux's `MAX_ARG_STRLEN`: the most bytes one environment string `NAME=value\0` may have.
pub const ENV_STRING_LIMIT: usize = 131072;
const NAME: &str = "TF_CONFIG";

/// `"address:` (JSON-escaped, quote opened): the prefix of every endpoint of one node.
pub fn endpoint_prefix(address: &str) -> String {
    let mut out = String::with_capacity(address.len() + 3);
    push_json_str(&mut out, address);
    out.pop(); // the closing quote: the port and its quote follow
    out.push(':');
    out
}

/// `PORT"`: the end of every endpoint of one local slot. A step has as many distinct ports as
/// tasks on its busiest node, so they are rendered once, not once per endpoint.
pub fn endpoint_suffix(port: u32) -> String {
    let mut out = String::with_capacity(7);
    push_decimal(&mut out, port.into(), 0);
    out.push('"');
    out
}

/// Builds the `{"ROLE":["addr:port",...],...}` object, role by role in TensorFlow's order.
pub struct ClusterJson {
    out: String,
    jobs: usize,
    tasks_in_job: usize,
}

impl ClusterJson {
    pub fn with_capacity(bytes: usize) -> ClusterJson {
        let mut out = String::with_capacity(bytes + 2);
        out.push('{');
        ClusterJson {
            out,
            jobs: 0,
            tasks_in_job: 0,
        }
    }

    pub fn job(&mut self, role: Role) {
        if self.jobs > 0 {
            self.out.push_str("],");
        }
        self.jobs += 1;
        self.tasks_in_job = 0;
        push_json_str(&mut self.out, role.name());
        self.out.push_str(":[");
    }

    /// One endpoint: a node's [`endpoint_prefix`] and a slot's [`endpoint_suffix`].
    pub fn endpoint(&mut self, prefix: &str, suffix: &str) {
        if self.tasks_in_job > 0 {
            self.out.push(',');
        }
        self.tasks_in_job += 1;
        self.out.push_str(prefix);
        self.out.push_str(suffix);
    }

    pub fn finish(mut self) -> String {
        if self.jobs > 0 {
            self.out.push(']');
        }
        self.out.push('}');
        self.out
    }
}

/// The length `TF_CONFIG=<value>\0` will have, without rendering it.
pub fn env_string_len(cluster: &str, role: Role, index: u32, rpc_layer: Option<&str>) -> usize {
    let rpc = rpc_layer.map_or(0, |r| ",\"rpc_layer\":".len() + json_str_len(r));
    NAME.len() + 1 // TF_CONFIG=
        + "{\"cluster\":".len() + cluster.len() + rpc
        + ",\"task\":{\"type\":".len() + json_str_len(role.name())
        + ",\"index\":".len() + digits(index) + "}}".len()
        + 1 // NUL
}

/// Refuses a TF_CONFIG that Linux would not let `execve` pass.
pub fn check_size(
    cluster: &str,
    role: Role,
    index: u32,
    rpc_layer: Option<&str>,
    tasks: u32,
) -> Result<()> {
    check_env_size(NAME, env_string_len(cluster, role, index, rpc_layer), tasks)
}

/// Refuses an environment string `NAME=value\0` of `bytes` bytes that Linux would not let
/// `execve` pass (`tasks`: the step's, for the message).
pub fn check_env_size(name: &'static str, bytes: usize, tasks: u32) -> Result<()> {
    if bytes > ENV_STRING_LIMIT {
        return Err(Error::EnvTooLarge {
            name,
            tasks,
            bytes,
            limit: ENV_STRING_LIMIT,
        });
    }
    Ok(())
}

/// Renders the TF_CONFIG of one task after another into one buffer that already holds
/// everything before the task's own part. slurmstepd makes it once per node, before the tasks
/// fork; each task process then rewrites only the tail, so the pages before it stay shared with
/// slurmstepd instead of being copied, and the NUL-terminated text goes to Slurm as it is. At
/// 4096 tasks this saves each task two fresh copies of a 90 KB string.
#[derive(Debug, Clone)]
pub struct TaskRenderer {
    buf: String,
    prefix: usize,
}

impl TaskRenderer {
    pub fn new(cluster: &str, rpc_layer: Option<&str>) -> TaskRenderer {
        // Room for the longest task part: a role name, ten digits, the closing braces, a NUL.
        let mut buf = String::with_capacity(cluster.len() + rpc_layer.map_or(0, str::len) + 96);
        buf.push_str("{\"cluster\":");
        buf.push_str(cluster);
        if let Some(rpc) = rpc_layer {
            buf.push_str(",\"rpc_layer\":");
            push_json_str(&mut buf, rpc);
        }
        buf.push_str(",\"task\":{\"type\":");
        let prefix = buf.len();
        TaskRenderer { buf, prefix }
    }

    /// One task's TF_CONFIG followed by a NUL (JSON text never holds a raw NUL).
    pub fn render_nul(&mut self, role: Role, index: u32) -> &str {
        self.buf.truncate(self.prefix);
        push_json_str(&mut self.buf, role.name());
        self.buf.push_str(",\"index\":");
        push_decimal(&mut self.buf, index.into(), 0);
        self.buf.push_str("}}\0");
        &self.buf
    }
}

/// The whole TF_CONFIG of one task, in a string of its own.
pub fn render(
    cluster: &str,
    role: Role,
    index: u32,
    rpc_layer: Option<&str>,
    tasks: u32,
) -> Result<String> {
    check_size(cluster, role, index, rpc_layer, tasks)?;
    let mut renderer = TaskRenderer::new(cluster, rpc_layer);
    renderer.render_nul(role, index);
    let mut out = renderer.buf;
    out.pop(); // the NUL
    debug_assert_eq!(
        NAME.len() + 1 + out.len() + 1,
        env_string_len(cluster, role, index, rpc_layer)
    );
    Ok(out)
}

fn is_plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

fn push_json_str(out: &mut String, s: &str) {
    // Plain names (the common case) need no escaping; serde_json handles the rest.
    if is_plain(s) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

fn json_str_len(s: &str) -> usize {
    if is_plain(s) {
        s.len() + 2
    } else {
        serde_json::Value::from(s).to_string().len()
    }
}

fn digits(mut n: u32) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}
