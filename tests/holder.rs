//! The holder of ended tables (`isolate=yes`, the job's extern step: src/core/isolation/holding.rs says
//! why): first its lifecycle as the core decides it, a table of transitions from one look at
//! its directory and the node's tables; then the real holder (src/spank/isolation/holder.rs, its thread,
//! inotify and files) on the host, with slurmstepd's real side of the handover, and the node's
//! nftables and slurmctld passed in as stand-ins that behave as the kernel does: a table owned
//! by a libnftables context goes when the context does. On the test cluster, the same holder
//! runs with libnftables and slurmctld through an admin's day (tests/isolation.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tfcluster::core::claims::Owner;
use tfcluster::core::isolation::handover::{holder_text, Stage, HOLDER_FILE};
use tfcluster::core::isolation::holding::{
    reinstalled_line, step_exists_vouched, whose, Act, HolderFile, Holding, Look, StepKey,
    UNLOADED_LINE,
};
use tfcluster::core::isolation::tables::ended_table_name;
use tfcluster::spank::isolation::handover::{hand_over_in, Handed};
use tfcluster::spank::isolation::holder::{start, Holder, Passed, Tables};
use tfcluster::spank::process;

use HolderFile::{Mine, NoneLive, OtherLive};
use Stage::{Held, Left, Taking};

/// One look at a holder that holds `holds`: what it does.
struct Transition {
    what: &'static str,
    holds: &'static [StepKey],
    holder_file: HolderFile,
    files: &'static [(u32, u32, Stage)],
    /// The steps whose ended table is on the node; `None`: the node could not list them.
    tables: Option<&'static [StepKey]>,
    acts: &'static [Act],
}

#[rustfmt::skip]
const TRANSITIONS: &[Transition] = &[
    Transition { what: "nothing to hold",                          holds: &[],        holder_file: Mine,      files: &[],                                tables: Some(&[]),                acts: &[] },
    Transition { what: "a step leaves its table: take it",         holds: &[],        holder_file: Mine,      files: &[(12, 3, Left)],                   tables: Some(&[(12, 3)]),         acts: &[Act::Take((12, 3), Left)] },
    Transition { what: "a claim its holder did not finish",        holds: &[],        holder_file: Mine,      files: &[(12, 3, Taking)],                 tables: Some(&[(12, 3)]),         acts: &[Act::Take((12, 3), Taking)] },
    Transition { what: "held and there: ask about it",             holds: &[(12, 3)], holder_file: Mine,      files: &[(12, 3, Held)],                   tables: Some(&[(12, 3)]),         acts: &[Act::Ask((12, 3))] },
    Transition { what: "held, its table gone: install it again",   holds: &[(12, 3)], holder_file: Mine,      files: &[(12, 3, Held)],                   tables: Some(&[]),                acts: &[Act::Take((12, 3), Held), Act::Ask((12, 3))] },
    Transition { what: "held, the node cannot list its tables",    holds: &[(12, 3)], holder_file: Mine,      files: &[(12, 3, Held)],                   tables: None,                     acts: &[Act::Ask((12, 3))] },
    Transition { what: "held, its file gone: release it",          holds: &[(12, 3)], holder_file: Mine,      files: &[],                                tables: Some(&[(12, 3)]),         acts: &[Act::Release((12, 3))] },
    Transition { what: "a file says held, a holder gone held it",  holds: &[],        holder_file: Mine,      files: &[(12, 3, Held)],                   tables: Some(&[]),                acts: &[Act::Take((12, 3), Held)] },
    Transition { what: "two held: ask about the first",            holds: &[(12, 3), (12, 4)], holder_file: Mine, files: &[(12, 4, Held), (12, 3, Held)], tables: Some(&[(12, 3), (12, 4)]), acts: &[Act::Ask((12, 3))] },
    Transition { what: "another live holder's directory: yield",   holds: &[(12, 3)], holder_file: OtherLive, files: &[(12, 3, Held), (12, 4, Left)], tables: Some(&[(12, 3), (12, 4)]), acts: &[Act::Yield] },
    Transition { what: "its holder file gone: write it again",     holds: &[(12, 3)], holder_file: NoneLive,  files: &[(12, 3, Held)],                   tables: Some(&[(12, 3)]),         acts: &[Act::Reclaim, Act::Ask((12, 3))] },
];

/// Each look at the holder's directory decides every step's next act: taken as its file is
/// left, checked and installed again while a file says it is held, released once no file
/// names it, and nothing at all where another live holder owns the directory.
#[test]
fn what_the_holder_does_after_one_look() {
    for row in TRANSITIONS {
        let mut holding = Holding::new(Duration::from_secs(1));
        for &key in row.holds {
            holding.took(key, true);
        }
        let look = Look {
            holder_file: row.holder_file,
            files: row.files,
            tables: row.tables,
            now: Duration::ZERO,
        };
        assert_eq!(holding.acts(look), row.acts, "{}", row.what);
    }
}

/// slurmctld hears from a holder once per `ask` at most, about one table at a time, the one
/// asked about longest ago, however many it holds; it sleeps only while it holds nothing.
#[test]
fn the_holder_asks_slurmctld_once_per_interval_about_one_table() {
    let ask = Duration::from_secs(1);
    let files = &[(12, 3, Held), (12, 4, Held)];
    let mut holding = Holding::new(ask);
    holding.took((12, 3), true);
    holding.took((12, 4), true);
    let look = |ms| Look {
        holder_file: Mine,
        files,
        tables: Some(&[(12, 3), (12, 4)]),
        now: Duration::from_millis(ms),
    };
    #[rustfmt::skip]
    let looks: &[(u64, &[Act])] = &[
        (0,    &[Act::Ask((12, 3))]),
        (500,  &[]),
        (1000, &[Act::Ask((12, 4))]),
        (1999, &[]),
        (2000, &[Act::Ask((12, 3))]),
    ];
    for &(ms, acts) in looks {
        assert_eq!(holding.acts(look(ms)), acts, "at {ms} ms");
    }
    assert_eq!(holding.sleep(), Some(ask));
    assert_eq!(Holding::new(ask).sleep(), None, "holding nothing");
}

/// Whose a holder file is: this holder's, another process's that runs (pid 1), or nobody's.
/// One answer of slurmctld's about a held table's step, and what the holder takes from it.
struct Vouched {
    what: &'static str,
    step: Option<bool>,
    /// Its answer about the holder's own job, asked only where it has no such step.
    job: Option<Option<bool>>,
    /// Whether the step exists, as slurmctld vouches for it.
    exists: Option<bool>,
}

#[rustfmt::skip]
const VOUCHED: &[Vouched] = &[
    Vouched { what: "the step runs",                             step: Some(true),  job: None,              exists: Some(true) },
    Vouched { what: "no answer",                                 step: None,        job: None,              exists: None },
    Vouched { what: "the step has ended, the job runs on",       step: Some(false), job: Some(Some(true)),  exists: Some(false) },
    Vouched { what: "no such step, nor the holder's own job",    step: Some(false), job: Some(Some(false)), exists: None },
    Vouched { what: "no such step, and no answer about the job", step: Some(false), job: Some(None),        exists: None },
];

/// A held table goes only once slurmctld says its step has ended while it still knows the
/// holder's own job, which runs as long as the holder does.
#[test]
fn a_step_has_ended_only_as_a_slurmctld_that_knows_the_job_says() {
    for Vouched {
        what,
        step,
        job,
        exists,
    } in VOUCHED
    {
        let asked = std::cell::Cell::new(false);
        let got = step_exists_vouched(*step, || {
            asked.set(true);
            job.expect("asked only where slurmctld has no such step")
        });
        assert_eq!(got, *exists, "{what}");
        assert_eq!(asked.get(), job.is_some(), "{what}: the job asked about");
    }
}

#[test]
fn whose_a_holder_file_is() {
    let me = process::me().unwrap();
    let init = init();
    let gone = Owner {
        start: me.start + 1,
        ..me
    };
    #[rustfmt::skip]
    let cases: &[(&str, Option<String>, HolderFile)] = &[
        ("this holder's",           Some(holder_text(me)),   Mine),
        ("another that runs",       Some(holder_text(init)), OtherLive),
        ("a process gone",          Some(holder_text(gone)), NoneLive),
        ("missing",                 None,                    NoneLive),
        ("of another shape",        Some("pid=1\n".into()),  NoneLive),
    ];
    for (what, text, expected) in cases {
        assert_eq!(
            whose(text.as_deref(), me, process::stat),
            *expected,
            "{what}"
        );
    }
}

/// The process with pid 1, which runs for as long as the test does.
fn init() -> Owner {
    Owner::from_stat(1, &process::stat(1).unwrap()).unwrap()
}

/// The node's tables as the holder sees them through [`Tables`]: each table with the context
/// that owns it; a context's tables go when it is dropped, as the kernel removes an owned
/// table when its owner's netlink socket closes.
#[derive(Default)]
struct Kernel {
    tables: BTreeMap<String, u32>,
    /// Tables the kernel refuses to install.
    refused: Vec<String>,
    /// How long each script takes.
    slow: Duration,
}

/// One libnftables context on [`Kernel`].
struct Context {
    id: u32,
    kernel: Arc<Mutex<Kernel>>,
}

impl Tables for Context {
    fn names(&mut self) -> Result<Vec<String>, String> {
        Ok(self.kernel.lock().unwrap().tables.keys().cloned().collect())
    }
    fn run(&mut self, script: &str) -> Result<String, String> {
        let slow = self.kernel.lock().unwrap().slow;
        std::thread::sleep(slow);
        let mut kernel = self.kernel.lock().unwrap();
        let mut next = kernel.tables.clone();
        for line in script.lines() {
            if let Some(name) = line.strip_prefix("delete table inet ") {
                match next.get(name) {
                    Some(&owner) if owner == self.id || owner == 0 => next.remove(name),
                    Some(_) => return Err(format!("{name}: Operation not permitted")),
                    None => return Err(format!("{name}: No such file or directory")),
                };
            } else if let Some(name) = line.strip_prefix("table inet ") {
                let name = name.trim_end_matches(" {");
                if kernel.refused.iter().any(|t| t == name) {
                    return Err(format!("{name}: Operation not supported"));
                }
                next.insert(name.to_string(), self.id);
            }
        }
        kernel.tables = next;
        Ok(String::new())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let id = self.id;
        self.kernel
            .lock()
            .unwrap()
            .tables
            .retain(|_, owner| *owner != id);
    }
}

/// A real holder in a directory of its own, on a [`Kernel`] that already has step 12.3's ended
/// table as slurmstepd installed it (context 0), with what it says and which steps slurmctld
/// still has.
struct Node {
    dir: PathBuf,
    kernel: Arc<Mutex<Kernel>>,
    said: Arc<Mutex<Vec<String>>>,
    steps: Arc<Mutex<Vec<StepKey>>>,
    holder: Option<Holder>,
}

/// What slurmstepd leaves for step 12.3: its ended table's script.
const ENDED: &str = "table inet tfcluster_12_3_ended {\n\tchain output {\n\t}\n}\n";

/// How often these holders ask slurmctld (a node asks every [`tfcluster::core::isolation::holding::ASK`]).
const ASK: Duration = Duration::from_millis(20);

impl Node {
    fn new(name: &str) -> Node {
        let dir = std::env::temp_dir().join(format!("tfc-holder-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let kernel = Arc::new(Mutex::new(Kernel::default()));
        let table = ended_table_name(12, 3);
        kernel.lock().unwrap().tables.insert(table, 0);
        Node {
            dir,
            kernel,
            said: Default::default(),
            steps: Arc::new(Mutex::new(vec![(12, 3)])),
            holder: None,
        }
    }

    /// Starts a holder (as this process) with a context of id `id`.
    fn start(&mut self, id: u32) -> Result<(), String> {
        let (kernel, steps, said) = (self.kernel.clone(), self.steps.clone(), self.said.clone());
        let passed = Passed {
            open: Box::new(move || Ok(Context { id, kernel })),
            step_exists: Box::new(move |job, step| {
                Some(steps.lock().unwrap().contains(&(job, step)))
            }),
            say: Arc::new(move |line: &str| said.lock().unwrap().push(line.to_string())),
            ask: ASK,
        };
        let me = process::me().unwrap();
        self.holder = Some(start(&self.dir, me, "job 12's extern step", passed)?);
        Ok(())
    }

    /// slurmstepd of step 12.3 hands its table over, waiting `limit` where a node waits 2 s.
    fn hand_over(&self, limit: Duration) -> Handed {
        hand_over_in(&self.dir, (12, 3), ENDED, limit)
    }

    /// The files in the directory, but the holder's.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != HOLDER_FILE)
            .collect();
        names.sort();
        names
    }

    /// Which context owns step 12.3's ended table (`None`: there is none).
    fn owner(&self) -> Option<u32> {
        let kernel = self.kernel.lock().unwrap();
        kernel.tables.get(&ended_table_name(12, 3)).copied()
    }

    fn said(&self) -> String {
        self.said.lock().unwrap().join("\n")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        drop(self.holder.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `done` holds within a second, asked every 2 ms.
fn soon(done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    done()
}

/// The whole life of a held table: slurmstepd hands it over and the holder owns it, in one
/// transaction; once slurmctld says its step has ended, the holder removes its file and the
/// table; when the holder stops (the job has ended), its directory goes.
#[test]
fn the_holder_owns_a_handed_table_until_its_step_ends() {
    let mut node = Node::new("life");
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::Held);
    assert_eq!(node.files(), ["step_12.3.held"]);
    assert_eq!(node.owner(), Some(7), "the holder's context owns it");
    std::thread::sleep(5 * ASK);
    assert_eq!(node.owner(), Some(7), "held while slurmctld has the step");
    node.steps.lock().unwrap().clear();
    assert!(
        soon(|| node.owner().is_none()),
        "released once the step ended"
    );
    assert_eq!(node.files(), Vec::<String>::new());
    drop(node.holder.take());
    assert!(!node.dir.exists(), "the holder's directory goes with it");
    assert_eq!(node.said(), "");
}

/// A table the holder's file says is held, gone from the node (removed by something that is
/// not its owner's context, or lost with a holder gone): installed again, owned, with a line.
#[test]
fn a_held_table_that_is_gone_is_installed_again() {
    let mut node = Node::new("gone");
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::Held);
    node.kernel.lock().unwrap().tables.clear();
    assert!(soon(|| node.owner() == Some(7)), "installed again");
    assert!(node.said().contains(&reinstalled_line(12, 3)));
    assert_eq!(node.files(), ["step_12.3.held"]);
}

/// When the node refuses the holder's copy, slurmstepd hears it was not taken, no file says it
/// is held, and the holder says why.
#[test]
fn a_table_the_holder_cannot_install_is_not_said_to_be_held() {
    let mut node = Node::new("refused");
    node.kernel.lock().unwrap().refused = vec![ended_table_name(12, 3)];
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::NotTaken);
    assert_eq!(node.files(), Vec::<String>::new());
    assert_eq!(
        node.owner(),
        Some(0),
        "slurmstepd's own, which it keeps until it exits"
    );
    assert!(node.said().contains("cannot hold the table of step 12.3"));
}

/// A holder that has claimed the table but is slow to install it: slurmstepd waits for the
/// outcome (so no table ends up held with no file to say so); one that has not claimed it in
/// time (busy, here with a first look as slow): slurmstepd withdraws it, and a later claim
/// finds nothing.
#[test]
fn slurmstepd_waits_for_a_claimed_table_and_withdraws_an_unclaimed_one() {
    let mut node = Node::new("slow");
    node.start(7).unwrap();
    node.kernel.lock().unwrap().slow = Duration::from_millis(300);
    assert_eq!(node.hand_over(Duration::from_millis(200)), Handed::Held);
    assert_eq!(node.files(), ["step_12.3.held"]);
    assert_eq!(node.owner(), Some(7));

    let node = Node::new("late");
    std::fs::create_dir_all(&node.dir).unwrap();
    let me = process::me().unwrap();
    std::fs::write(node.dir.join(HOLDER_FILE), holder_text(me)).unwrap();
    assert_eq!(
        node.hand_over(Duration::from_millis(50)),
        Handed::NotTaken,
        "no claim"
    );
    assert_eq!(node.files(), Vec::<String>::new(), "withdrawn");
}

/// slurmstepd finds no holder where the holder file names a process gone, or there is none.
#[test]
fn a_holder_file_of_a_process_gone_is_no_holder() {
    let node = Node::new("dead");
    std::fs::create_dir_all(&node.dir).unwrap();
    assert_eq!(
        node.hand_over(Duration::from_millis(50)),
        Handed::NoHolder,
        "no file"
    );
    let me = process::me().unwrap();
    let gone = Owner {
        start: me.start + 1,
        ..me
    };
    std::fs::write(node.dir.join(HOLDER_FILE), holder_text(gone)).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(50)), Handed::NoHolder);
    assert_eq!(node.files(), Vec::<String>::new());
}

/// Two holders never act on one directory: a holder does not start where another live one
/// holds, and one whose holder file comes to name another live holder stops with a line,
/// leaving the directory (and the files that say held) to it; its tables go with it, and the
/// other installs them again.
#[test]
fn two_holders_never_act_on_one_directory() {
    let mut node = Node::new("two");
    std::fs::create_dir_all(&node.dir).unwrap();
    std::fs::write(node.dir.join(HOLDER_FILE), holder_text(init())).unwrap();
    let refused = node.start(7).unwrap_err();
    assert!(
        refused.contains("names another holder that still runs"),
        "{refused}"
    );
    assert!(
        node.dir.join(HOLDER_FILE).exists(),
        "the other's file stays"
    );

    std::fs::remove_file(node.dir.join(HOLDER_FILE)).unwrap();
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::Held);
    std::fs::write(node.dir.join(HOLDER_FILE), holder_text(init())).unwrap();
    assert!(soon(|| node
        .said()
        .contains("names another holder that runs")));
    assert!(soon(|| node.owner().is_none()), "its table went with it");
    assert!(node.files().contains(&"step_12.3.held".to_string()));
    assert!(Path::new(&node.dir).join(HOLDER_FILE).exists());
    drop(node.holder.take());
    assert_eq!(
        std::fs::read_to_string(node.dir.join(HOLDER_FILE)).unwrap(),
        holder_text(init()),
        "a holder that gave way leaves the directory to the other when it stops"
    );
}

/// A holder whose holder file is removed writes it again, so steps still find it.
#[test]
fn a_holder_whose_file_is_removed_writes_it_again() {
    let mut node = Node::new("reclaim");
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::Held);
    std::fs::remove_file(node.dir.join(HOLDER_FILE)).unwrap();
    let me = process::me().unwrap();
    let file = node.dir.join(HOLDER_FILE);
    assert!(soon(
        || std::fs::read_to_string(&file).ok() == Some(holder_text(me))
    ));
}

/// A holder stopped as the plugin is unloaded without its exit hook (the plugin's `.fini_array`
/// hook does this; tests/isolation.rs shows it on the cluster) says so, and its tables and
/// directory go as at an ordinary stop.
#[test]
fn a_holder_stopped_at_unload_says_so() {
    let mut node = Node::new("unload");
    node.start(7).unwrap();
    assert_eq!(node.hand_over(Duration::from_millis(500)), Handed::Held);
    node.holder.take().unwrap().stop_unloaded();
    assert!(node.said().contains(UNLOADED_LINE));
    assert_eq!(node.owner(), None);
    assert!(!node.dir.exists());
}
