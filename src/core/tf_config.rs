//! TF_CONFIG text: `{"cluster":{ROLE:["addr:port",...],...},"task":{"type":ROLE,"index":N}}`,
//! plus `"rpc_layer"` when set.
//!
//! The cluster part is the same for every task of a step, so it is rendered once per node
//! ([`render_cluster`]) and each task only appends its own `task` part ([`render`]). Lists are
//! dense, keys in TensorFlow's job order. Strings go through serde_json, so any byte a host name
//! may hold is escaped correctly.

use super::error::{Error, Result};
use super::spec::Role;

/// Linux's `MAX_ARG_STRLEN`: the most bytes one environment string `NAME=value\0` may have.
pub const ENV_STRING_LIMIT: usize = 131072;
const NAME: &str = "TF_CONFIG";

/// Renders the `{"ROLE":[...],...}` object from `(role, addresses)` in TensorFlow's order.
pub fn render_cluster<'a, I, A>(jobs: I) -> String
where
    I: IntoIterator<Item = (Role, A)>,
    A: IntoIterator<Item = &'a str>,
{
    let mut out = String::with_capacity(4096);
    out.push('{');
    for (i, (role, addresses)) in jobs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(&mut out, role.name());
        out.push_str(":[");
        for (j, address) in addresses.into_iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            push_json_str(&mut out, address);
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// The whole TF_CONFIG of one task; refuses values Linux would not let `execve` pass.
pub fn render(
    cluster: &str,
    role: Role,
    index: u32,
    rpc_layer: Option<&str>,
    tasks: u32,
) -> Result<String> {
    let mut out = String::with_capacity(cluster.len() + 64);
    out.push_str("{\"cluster\":");
    out.push_str(cluster);
    if let Some(rpc) = rpc_layer {
        out.push_str(",\"rpc_layer\":");
        push_json_str(&mut out, rpc);
    }
    out.push_str(",\"task\":{\"type\":");
    push_json_str(&mut out, role.name());
    out.push_str(",\"index\":");
    out.push_str(&index.to_string());
    out.push_str("}}");
    let bytes = NAME.len() + 1 + out.len() + 1;
    if bytes > ENV_STRING_LIMIT {
        return Err(Error::TfConfigTooLarge {
            tasks,
            bytes,
            limit: ENV_STRING_LIMIT,
        });
    }
    Ok(out)
}

fn push_json_str(out: &mut String, s: &str) {
    // Plain names (the common case) need no escaping; serde_json handles the rest.
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}
