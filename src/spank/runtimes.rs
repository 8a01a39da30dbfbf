//! The file look behind [`crate::core::container::Runtimes::find`]: which container runtimes a
//! node has, asked once per node and step by slurmstepd.

use std::os::unix::fs::PermissionsExt;

/// The file name of the executable `path` leads to, links followed; `None` when there is none
/// (or slurmstepd may not see it).
pub fn program_at(path: &str) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let executable = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
    executable.then(|| real.file_name()?.to_str().map(str::to_string))?
}
