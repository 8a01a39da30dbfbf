//! `timing=yes` (plugstack.conf, off by default): each hook says how much CPU tfcluster spent in
//! it, and how many page faults its thread took, by phase, in one line of slurmd's log
//! (slurmstepd, its tasks, the epilog) or of srun's output with `srun -v`: `tfcluster timing:
//! slurm_spank_init_post_opt slurmstepd: 4210 us CPU (shape 10, plan 310, claims 120, firewall
//! 3610, rest 170) 41 faults (shape 0, plan 30, claims 2, firewall 9, rest 0)`. The CPU is the
//! hook's thread's own (`CLOCK_THREAD_CPUTIME_ID`): what slurmstepd's other threads do meanwhile
//! is not counted, but each of tfcluster's own threads says its whole CPU as it ends
//! ([`thread_end`]). The account of a launch in docs/performance.md adds these lines up
//! (benches/account.sh).

use super::handle::{self, Context};
use super::log;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static ON: AtomicBool = AtomicBool::new(false);

/// A timed hook's phases so far (each with its CPU, ns, and its page faults) and this thread's
/// CPU and page faults at the last mark.
type Timed = (Vec<(&'static str, u64, u64)>, u64, u64);

thread_local! {
    /// The hook being timed on this thread.
    static HOOK: RefCell<Option<Timed>> = const { RefCell::new(None) };
}

/// Where a thread's line goes, and the process it runs in: set as timing is turned on, in a
/// hook. The threads' code reaches Slurm's log only through it, so that the test binaries that
/// run those threads (and never turn timing on) need no Slurm function.
static THREAD_LINE: OnceLock<ThreadLine> = OnceLock::new();

/// A log function and a process's name ([`THREAD_LINE`]).
type ThreadLine = (fn(&str), &'static str);

/// plugstack.conf's `timing`, once `init` has read it.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
    if on {
        let _ = THREAD_LINE.set((log::info, context()));
    }
}

/// This thread's CPU time, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    match rc {
        0 => ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
        _ => 0,
    }
}

/// This thread's page faults so far (`RUSAGE_THREAD`: minor and major). A task's process,
/// just forked, faults on the first write to each page it shares with slurmstepd: counted
/// apart, because a fault costs this VM's kernel microseconds that no line of code shows.
fn thread_faults() -> u64 {
    // SAFETY: getrusage writes one rusage into the zeroed value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD is this thread's own.
    match unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } {
        0 => (usage.ru_minflt + usage.ru_majflt) as u64,
        _ => 0,
    }
}

/// The CPU and page faults since the hook began, or since its last phase, were phase `name`'s
/// (nothing when timing is off, or outside a timed hook).
pub fn phase(name: &'static str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let (now, faults) = (thread_cpu_ns(), thread_faults());
    let _ = HOOK.try_with(|hook| {
        if let Some((phases, mark, mark_faults)) = hook.borrow_mut().as_mut() {
            phases.push((
                name,
                now.saturating_sub(*mark),
                faults.saturating_sub(*mark_faults),
            ));
            (*mark, *mark_faults) = (now, faults);
        }
    });
}

/// The hooks that may turn timing on themselves: `init` (which reads plugstack.conf) and the
/// job epilog (which reads its own words). They are timed from their start whatever the setting,
/// at the cost of one clock read; every other hook only with timing on.
const TURN_IT_ON: [&str; 2] = ["slurm_spank_init", "slurm_spank_job_epilog"];

/// Runs hook `name`, and with timing on by its end, logs its CPU by phase.
pub fn hook<T>(name: &str, f: impl FnOnce() -> T) -> T {
    if !ON.load(Ordering::Relaxed) && !TURN_IT_ON.contains(&name) {
        return f();
    }
    // srun calls `slurm_spank_exit` from `exit()`, after this thread's locals are gone: the hook
    // is then timed as a whole, without phases (`try_with`, never a panic). The phases' room
    // and this thread's slot are written before the first mark, so that the hook's first phase
    // does not count timing's own writes (in a task just forked, a page fault each); a hook
    // timed before timing is on (`TURN_IT_ON`, in every job) allocates nothing for it.
    let room = match ON.load(Ordering::Relaxed) {
        true => Vec::with_capacity(16),
        false => Vec::new(),
    };
    let _ = HOOK.try_with(|hook| *hook.borrow_mut() = Some((room, 0, 0)));
    let (start, start_faults) = (thread_cpu_ns(), thread_faults());
    let _ = HOOK.try_with(|hook| {
        if let Some((_, mark, mark_faults)) = hook.borrow_mut().as_mut() {
            (*mark, *mark_faults) = (start, start_faults);
        }
    });
    let result = f();
    let (phases, mark, mark_faults) = HOOK
        .try_with(|hook| hook.borrow_mut().take())
        .ok()
        .flatten()
        .unwrap_or((Vec::new(), start, start_faults));
    if !ON.load(Ordering::Relaxed) {
        return result;
    }
    let (end, end_faults) = (thread_cpu_ns(), thread_faults());
    let mut line = format!(
        "tfcluster timing: {name} {}: {} us CPU",
        context(),
        end.saturating_sub(start) / 1000
    );
    let rest = (
        "rest",
        end.saturating_sub(mark),
        end_faults.saturating_sub(mark_faults),
    );
    let all = || phases.iter().chain([&rest]);
    if !phases.is_empty() {
        let parts: Vec<String> = all()
            .map(|(phase, ns, _)| format!("{phase} {}", ns / 1000))
            .collect();
        line += &format!(" ({})", parts.join(", "));
    }
    line += &format!(" {} faults", end_faults.saturating_sub(start_faults));
    if !phases.is_empty() {
        let parts: Vec<String> = all()
            .map(|(phase, _, faults)| format!("{phase} {faults}"))
            .collect();
        line += &format!(" ({})", parts.join(", "));
    }
    log::info(&line);
    result
}

/// A thread of tfcluster's ends (the workers' watcher, the stop, the extern step's holder): with
/// timing on, logs its whole CPU as hook `thread_NAME`, since no hook's line counts it.
pub fn thread_end(name: &str) {
    if let (true, Some((say, context))) = (ON.load(Ordering::Relaxed), THREAD_LINE.get()) {
        say(&format!(
            "tfcluster timing: thread_{name} {context}: {} us CPU",
            thread_cpu_ns() / 1000
        ));
    }
}

/// The process a line comes from, by Slurm's context.
fn context() -> &'static str {
    match handle::context() {
        Context::Local => "srun",
        Context::Remote => "slurmstepd",
        Context::Allocator => "sbatch or salloc",
        Context::Slurmd => "slurmd",
        Context::Other => "prolog or epilog",
    }
}
