//! A task's variables written into its own environment's entries
//! ([`crate::core::env_entries`] says why): slurmstepd's empty presets before the forks, each
//! task's writes into its copy of them, and the presets' removal.

use crate::core::env_entries;
use crate::spank::handle::Spank;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// libslurm's `slurm_xcalloc(count, size, clear, try, file, line, func)`: every entry of a
/// Slurm environment comes from it, and Slurm frees an entry it replaces or unsets with
/// `slurm_xfree(&pointer)`. The same prototype on every release tfcluster builds for (22.05 to
/// 26.05); in slurmstepd, which has libslurm loaded.
type XCalloc = unsafe extern "C" fn(
    usize,
    usize,
    bool,
    bool,
    *const c_char,
    c_int,
    *const c_char,
) -> *mut c_void;
type XFree = unsafe extern "C" fn(*mut *mut c_void);

/// The two functions' names in libslurm (tests/abi.rs finds them in each release's).
pub const ALLOCATOR_SYMBOLS: [&CStr; 2] = [c"slurm_xcalloc", c"slurm_xfree"];

struct Allocator {
    xcalloc: XCalloc,
    xfree: XFree,
}

static ALLOCATOR: OnceLock<Option<Allocator>> = OnceLock::new();

/// Slurm's allocator, looked up once in slurmstepd before the forks ([`preset`]; a forked task
/// must not look up symbols, whose lock another thread may have held as it forked). `None`
/// where libslurm does not have it: then nothing is preset, and every variable is set through
/// Slurm as before.
fn allocator() -> Option<&'static Allocator> {
    ALLOCATOR
        .get_or_init(|| {
            // SAFETY: dlsym with the process's global scope and two NUL-terminated names.
            let [xcalloc, xfree] = ALLOCATOR_SYMBOLS
                .map(|name| unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) });
            if xcalloc.is_null() || xfree.is_null() {
                return None;
            }
            // SAFETY: both symbols are libslurm's functions of the prototypes above.
            unsafe {
                Some(Allocator {
                    xcalloc: std::mem::transmute::<*mut c_void, XCalloc>(xcalloc),
                    xfree: std::mem::transmute::<*mut c_void, XFree>(xfree),
                })
            }
        })
        .as_ref()
}

/// A task's `NAME=value` string made before the forks, from Slurm's allocator, holding the
/// first task's value ([`env_entries::rewrite`] says why). slurmstepd frees it once the tasks
/// have forked ([`free`]); each task rewrites its own copy and hands it to its environment.
pub struct Premade {
    name: String,
    entry: *mut u8,
    capacity: usize,
    /// Where the first task's value was (its address), and the length of its head that every
    /// value rendered there shares ([`crate::core::plan::TaskEnv::head_of`]).
    source: usize,
    head: usize,
}

// SAFETY: the string is this process's alone; only slurmstepd's hooks, under the step's lock,
// and each forked task, in its own copy, touch it.
unsafe impl Send for Premade {}

/// slurmstepd, once per node before the forks: makes each of `names` (the names the node's
/// tasks will be given that the step's environment lacks, [`env_entries::presets`]) in the
/// step's environment, empty, and the string of each of the first task's values `large`, each
/// with the length of its head ([`Premade`]; TF_CONFIG's too, whose entry srun's placeholder
/// makes). Returns the names made and the strings: none without Slurm's allocator.
pub fn preset(
    sp: &Spank,
    names: Vec<String>,
    large: &[(&str, &str, usize)],
) -> (Vec<String>, Vec<Premade>) {
    let Some(alloc) = allocator() else {
        return (Vec::new(), Vec::new());
    };
    let names: Vec<String> = names
        .into_iter()
        .filter(|name| sp.setenv(name, "").is_ok())
        .collect();
    let premade = large
        .iter()
        .filter_map(|&(name, value_with_nul, head)| {
            let capacity =
                env_entries::entry_len(name, value_with_nul) + env_entries::PREMADE_SLACK;
            let entry = allocate(alloc, capacity)?;
            // SAFETY: `entry` has `capacity` writable bytes, ours alone.
            let out = unsafe { std::slice::from_raw_parts_mut(entry, capacity) };
            let len = env_entries::entry_len(name, value_with_nul);
            env_entries::write_entry(&mut out[..len], name, value_with_nul);
            Some(Premade {
                name: name.to_string(),
                entry,
                capacity,
                source: value_with_nul.as_ptr() as usize,
                head,
            })
        })
        .collect();
    (names, premade)
}

/// slurmstepd, once the tasks have forked: frees the strings made before the forks.
pub fn free(premade: Vec<Premade>) {
    let Some(alloc) = ALLOCATOR.get().and_then(Option::as_ref) else {
        return;
    };
    for p in premade {
        let mut entry = p.entry.cast::<c_void>();
        // SAFETY: a string of Slurm's allocator that no one else points at in this process.
        unsafe { (alloc.xfree)(&mut entry) };
    }
}

/// `capacity` bytes from Slurm's allocator, zeroed (the callers see the whole block as a byte
/// slice, which must not span memory never written), `None` where it has none (`try` set: no
/// abort).
fn allocate(alloc: &Allocator, capacity: usize) -> Option<*mut u8> {
    // SAFETY: Slurm's allocator, its prototype above.
    let new = unsafe {
        (alloc.xcalloc)(
            1,
            capacity,
            true,
            true,
            c"tfcluster".as_ptr(),
            0,
            c"task_env".as_ptr(),
        )
    };
    (!new.is_null()).then_some(new.cast::<u8>())
}

/// slurmstepd, once the tasks have forked (each has its own copy): the presets leave the
/// step's environment, which the task epilog and the other plugins' later hooks read.
pub fn unpreset(sp: &Spank, names: &[String]) {
    for name in names {
        if entry(sp, name).is_some_and(|(_, empty)| empty) {
            let _ = sp.unsetenv(name);
        }
    }
}

/// Whether the environment Slurm holds for this hook has an entry of `name`.
pub fn has(sp: &Spank, name: &str) -> bool {
    entry(sp, name).is_some()
}

/// The task: points its entry of `name` at a `name=value` string from Slurm's allocator (its
/// copy of the string made before the forks, rewritten, where there is one that fits; a new
/// one otherwise) and frees the old one. A value at the address the first task's was rendered
/// at (the node's buffer, forked with the task) starts with the same head, which the rewrite
/// skips. `false` where the task's environment has no entry of
/// `name`, or where the allocation fails: the caller sets it through Slurm. Each name once.
pub fn write(sp: &Spank, name: &str, value_with_nul: &str, premade: &[Premade]) -> bool {
    let Some(alloc) = ALLOCATOR.get().and_then(Option::as_ref) else {
        return false;
    };
    let Some((slot, _)) = entry(sp, name) else {
        return false;
    };
    let rewritten = premade.iter().find(|p| p.name == name).and_then(|p| {
        // SAFETY: the task's own copy of a string of `capacity` bytes; no one else in this
        // process points at it, and this task hands it over once (each name once).
        let out = unsafe { std::slice::from_raw_parts_mut(p.entry, p.capacity) };
        let known_same = match value_with_nul.as_ptr() as usize == p.source {
            true => p.head,
            false => 0,
        };
        env_entries::rewrite(out, name, value_with_nul, known_same).then_some(p.entry)
    });
    let new = match rewritten {
        Some(entry) => entry,
        None => {
            let len = env_entries::entry_len(name, value_with_nul);
            let Some(new) = allocate(alloc, len) else {
                return false;
            };
            // SAFETY: `new` has `len` writable bytes, ours alone.
            let out = unsafe { std::slice::from_raw_parts_mut(new, len) };
            env_entries::write_entry(out, name, value_with_nul);
            new
        }
    };
    // SAFETY: `slot` is an entry of the task's environment array (`entry`), which only this
    // thread of this process touches before `execve`; its old string came from Slurm's
    // allocator, as every entry does, and nothing points at it once replaced.
    unsafe {
        let mut old = (*slot).cast::<c_void>();
        *slot = new.cast::<c_char>();
        (alloc.xfree)(&mut old);
    }
    true
}

/// Unsets each of the task's presets it was not given (`given`), where still empty.
pub fn unset_leftovers(sp: &Spank, presets: &[String], given: &[&str]) {
    for name in env_entries::leftovers(presets, given) {
        if entry(sp, name).is_some_and(|(_, empty)| empty) {
            let _ = sp.unsetenv(name);
        }
    }
}

/// The slot of `name`'s entry in the environment Slurm holds for this hook, and whether it is
/// empty. Reads at most the name's length and two bytes of each entry: an entry can be 128 KB.
fn entry(sp: &Spank, name: &str) -> Option<(*mut *mut c_char, bool)> {
    let env = sp.env_array().ok().filter(|env| !env.is_null())?;
    let mut head = Vec::with_capacity(name.len() + 2);
    for i in 0.. {
        // SAFETY: Slurm's array ends with a null pointer; `i` has not passed it (the loop
        // returns there).
        let slot = unsafe { env.add(i) };
        // SAFETY: as above.
        let entry = unsafe { *slot };
        if entry.is_null() {
            return None;
        }
        head.clear();
        for j in 0..name.len() + 2 {
            // SAFETY: a NUL-terminated string, read up to its NUL at the most.
            let byte = unsafe { *entry.add(j) } as u8;
            if byte == 0 {
                break;
            }
            head.push(byte);
        }
        if env_entries::is_entry_of(&head, name) {
            return Some((slot, env_entries::is_empty_entry_of(&head, name)));
        }
    }
    None
}
