//! The environment srun started with, to tell a variable srun set itself (after reading its
//! options) from one it inherited. /proc/self/environ shows the strings the kernel gave the
//! process at exec; setenv and unsetenv never change them.

use std::io::Read;

/// The environment of a process is at most a quarter of its stack limit (execve(2)); past
/// this, tfcluster does not read it and says it cannot tell.
const MAX_ENVIRON_BYTES: u64 = 16 << 20;

/// Whether `name` was in this process's starting environment; `None` when that cannot be read.
pub fn had(name: &str) -> Option<bool> {
    let mut bytes = Vec::new();
    std::fs::File::open("/proc/self/environ")
        .and_then(|f| f.take(MAX_ENVIRON_BYTES + 1).read_to_end(&mut bytes))
        .ok()?;
    if bytes.len() as u64 > MAX_ENVIRON_BYTES {
        return None;
    }
    let prefix = format!("{name}=");
    Some(
        bytes
            .split(|b| *b == 0)
            .any(|entry| entry.starts_with(prefix.as_bytes())),
    )
}
