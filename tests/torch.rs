//! PyTorch across the test cluster's nodes, with the real library on CPU (gloo), as its guides
//! write the programs: `torch.distributed.init_process_group()` with no rendezvous arguments,
//! and `torchrun --nproc-per-node=N` with no rendezvous flags, under `torch=yes`. Every step
//! runs with `srun --export=NONE`, so the variables reach the tasks only through tfcluster.
//! Runs on the releases marked `torch` in tests/releases.tsv, with the virtualenv of
//! tests/torch/setup.sh (TFC_TORCH_PYTHON); tests/options.rs checks every task's variables on
//! every release.

mod common;
use common::cluster::{dir, records, sh, tool, PlugStack};
use std::collections::HashSet;

fn python() -> String {
    std::env::var("TFC_TORCH_PYTHON").expect("TFC_TORCH_PYTHON (tests/run.sh sets it)")
}

/// torchrun, beside the virtualenv's python.
fn torchrun() -> String {
    python().replace("/bin/python", "/bin/torchrun")
}

/// The host file that puts rank 0 on n10, the second of the step's nodes (Slurm lists them as
/// n[9-10]), where the hand-written recipes look for it: `tasks` ranks, alternating.
fn rank_0_on_n10(tasks: usize) -> String {
    let file = dir().join(format!("torch-hostfile-{tasks}"));
    let hosts: Vec<&str> = ["n10", "n9"].into_iter().cycle().take(tasks).collect();
    std::fs::write(&file, hosts.join("\n") + "\n").unwrap();
    format!("SLURM_HOSTFILE={} ", file.display())
}

/// srun's status, stdout, stderr and seconds of `before srun -t 3 --export=NONE srun_args
/// program`.
fn run(before: &str, srun_args: &str, program: &str) -> (i32, String, String, u64) {
    let started = std::time::Instant::now();
    let out = sh(&format!(
        "{before}srun -t 3 --export=NONE {srun_args} {program}"
    ));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed().as_secs(),
    )
}

/// Where torchrun's agents keep their logs ([`TorchrunLogs`]), which would otherwise be a new
/// `/tmp/torchelastic_*` directory of each agent's, left behind on the node.
fn torchrun_logs() -> std::path::PathBuf {
    dir().join("torchrun-logs")
}

/// Removes [`torchrun_logs`] when the test ends, passed or not.
struct TorchrunLogs;

impl Drop for TorchrunLogs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(torchrun_logs());
    }
}

/// `allreduce.py` with `args`, run by the virtualenv's python (`torchrun`: by torchrun with
/// 2 processes per task, its logs in [`torchrun_logs`]).
fn allreduce(torchrun_: bool, args: &str) -> String {
    let program = tool("allreduce.py");
    match torchrun_ {
        true => format!(
            "{} --nproc-per-node=2 --log-dir={} {program} {args}",
            torchrun(),
            torchrun_logs().display()
        ),
        false => format!("{} {program} {args}", python()),
    }
}

/// One step of `allreduce.py`: 4 ranks over n9 and n10, whether they meet (each prints the
/// sum 1+2+3+4), and where rank 0's store is.
struct Meeting {
    what: &'static str,
    /// Rank 0 on n10 ([`rank_0_on_n10`]), else block order.
    rank_0_on_n10: bool,
    /// One task per node, each running torchrun with 2 processes.
    torchrun: bool,
    spec: &'static str,
    args: &'static str,
    meet: bool,
    master: &'static str,
}

#[rustfmt::skip]
const MEETINGS: &[Meeting] = &[
    Meeting { what: "init_process_group(), block placement",  rank_0_on_n10: false, torchrun: false, spec: "worker:*,torch=yes", args: "",                  meet: true,  master: "n9" },
    Meeting { what: "init_process_group(), rank 0 on n10",    rank_0_on_n10: true,  torchrun: false, spec: "worker:*,torch=yes", args: "",                  meet: true,  master: "n10" },
    // What sites write by hand: the first host of the node list, where rank 0 is not.
    Meeting { what: "the hand-written recipe, rank 0 on n10", rank_0_on_n10: true,  torchrun: false, spec: "worker:*",           args: "recipe=first-node timeout=8", meet: false, master: "" },
    Meeting { what: "torchrun, one task per node",            rank_0_on_n10: false, torchrun: true,  spec: "worker:*,torch=yes", args: "",                  meet: true,  master: "n9" },
    Meeting { what: "torchrun, node rank 0 on n10",           rank_0_on_n10: true,  torchrun: true,  spec: "worker:*,torch=yes", args: "",                  meet: true,  master: "n10" },
];

/// The ranks meet wherever Slurm put rank 0, with no rendezvous argument: each of the 4 gets
/// the sum over all of them, and the store is rank 0's (torchrun's: node rank 0's agent's);
/// the recipe sites write by hand looks for it on the first node of the list, and its ranks
/// never meet.
#[test]
#[ignore = "needs the test cluster and PyTorch: run tests/run.sh"]
fn ranks_meet_wherever_rank_0_runs() {
    let _defaults = PlugStack::defaults();
    let _logs = TorchrunLogs;
    for case in MEETINGS {
        let tasks = if case.torchrun { 2 } else { 4 };
        let (before, place) = match case.rank_0_on_n10 {
            true => (rank_0_on_n10(tasks), "-m arbitrary"),
            false => (String::new(), "-w n9,n10 -N2"),
        };
        let (status, stdout, stderr, _) = run(
            &before,
            &format!("{place} -n{tasks} --tf-cluster={}", case.spec),
            &allreduce(case.torchrun, case.args),
        );
        let what = format!("{}:\n{stdout}\n{stderr}", case.what);
        let sums = records(&stdout, "SUM");
        if !case.meet {
            assert!(sums.is_empty(), "{what}");
            assert_ne!(status, 0, "{what}");
            continue;
        }
        assert_eq!(status, 0, "{what}");
        let ranks: HashSet<&str> = sums.iter().map(|r| r[0]).collect();
        assert_eq!(ranks, HashSet::from(["0", "1", "2", "3"]), "{what}");
        for r in &sums {
            assert_eq!((r[1], r[2]), ("4", "10"), "{what}");
            let host = r[3].rsplit_once(':').map_or(r[3], |(h, _)| h);
            assert_eq!(host, case.master, "{what}");
        }
        let rank_0_host = sums.iter().find(|r| r[0] == "0").map(|r| r[4]);
        assert_eq!(rank_0_host, Some(case.master), "{what}");
    }
}

/// Two steps of one job on the same nodes at once: each has its own store, on its own port of
/// the step, and both meet (a port from the job id would be the same for both).
#[test]
#[ignore = "needs the test cluster and PyTorch: run tests/run.sh"]
fn two_steps_of_one_job_each_have_their_own_store() {
    let _defaults = PlugStack::defaults();
    let step = format!(
        "srun --jobid=$job --overlap -t 3 --export=NONE -w n9,n10 -N2 -n4 --tf-cluster=worker:*,torch=yes {}",
        allreduce(false, "")
    );
    let out = sh(&format!(
        "job=$(salloc --no-shell -w n9,n10 -N2 -n4 -t 5 2>&1 | sed -n 's/.*Granted job allocation \\([0-9]*\\).*/\\1/p')
{step} > {d}/torch-a.out 2>&1 &
a=$!
{step} > {d}/torch-b.out 2>&1
b=$?
wait $a; echo \"A|$?\"; echo \"B|$b\"
scancel $job
cat {d}/torch-a.out {d}/torch-b.out",
        d = dir().display()
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(records(&stdout, "A"), [["0"]], "{stdout}");
    assert_eq!(records(&stdout, "B"), [["0"]], "{stdout}");
    let sums = records(&stdout, "SUM");
    assert_eq!(sums.len(), 8, "{stdout}");
    assert!(sums.iter().all(|r| r[2] == "10"), "{stdout}");
    let stores: HashSet<&str> = sums.iter().map(|r| r[3]).collect();
    assert_eq!(stores.len(), 2, "a store per step: {stdout}");
}

/// A rank that dies before `init_process_group` ends the step in seconds, its rank named, while
/// the others wait for it (torch alone waits out its store timeout: 30 minutes by default).
#[test]
#[ignore = "needs the test cluster and PyTorch: run tests/run.sh"]
fn a_rank_that_dies_before_joining_ends_the_step_in_seconds() {
    let _defaults = PlugStack::defaults();
    let (status, stdout, stderr, seconds) = run(
        "",
        "-w n9,n10 -N2 -n4 --tf-cluster=worker:*,torch=yes",
        &allreduce(false, "die=2 timeout=1800"),
    );
    let what = format!("{seconds} s, status {status}:\n{stdout}\n{stderr}");
    assert_ne!(status, 0, "{what}");
    assert!(seconds < 60, "{what}");
    assert!(
        stderr.contains("rank 2 (worker:2 on n10) exited 3"),
        "{what}"
    );
}

const OWNER: &str = "tfc-owner";
const OTHER: &str = "tfc-other";

/// With `isolate=yes`, torch's store (rank 0's `MASTER_PORT`) admits the job owner's ranks
/// alone: all 4 join, while another user's connection to it from the other node is refused;
/// without it, the same connection is open (torch's store unpickles what it receives).
#[test]
#[ignore = "needs the test cluster and PyTorch: run tests/run.sh"]
fn with_isolate_only_the_owner_reaches_the_store() {
    let probe = format!("/usr/bin/python3 {}", tool("isolation_probe.py"));
    for (isolate, reached) in [(true, "refused"), (false, "open")] {
        let _plugstack = isolate.then(|| PlugStack::isolated(""));
        let d = dir().join(format!("torch-isolate-{isolate}"));
        let d = d.display();
        let out = sh(&format!(
            "rm -rf {d}; mkdir -m 1777 {d}
runuser -u {OWNER} -- srun -p shared -t 3 --export=NONE -w n9,n10 -N2 -n4 --tf-cluster=worker:*,torch=yes {program} >{d}/step.out 2>{d}/step.err &
step=$!
for i in $(seq 600); do [ -e {d}/endpoints ] && break; kill -0 $step 2>/dev/null || break; sleep 0.1; done
runuser -u {OTHER} -- srun -p shared -t 1 -w n10 -N1 -n1 {probe} probe {d} OTHER
touch {d}/stop; wait $step; echo \"SRUN|$?\"
cat {d}/step.out; cat {d}/step.err >&2",
            program = allreduce(false, &format!("hold={d}")),
        ));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("isolate={isolate}:\n{stdout}\n{stderr}");
        assert_eq!(records(&stdout, "SRUN"), [["0"]], "{what}");
        let sums = records(&stdout, "SUM");
        assert_eq!(sums.len(), 4, "the owner's ranks all join: {what}");
        let other = records(&stdout, "OTHER");
        assert_eq!(other.len(), 1, "{what}");
        assert_eq!(other[0][1], reached, "{what}");
        assert!(other[0][0].starts_with("n9:"), "{what}");
    }
}
