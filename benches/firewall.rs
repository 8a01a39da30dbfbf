//! What `isolate=yes` costs one node per step, phase by phase, and what other ways of
//! handing the same table to the kernel cost ([`Form`]): `benches/firewall.sh` (the libnftables
//! of each Debian root), or `cargo bench --bench firewall` as root.
//!
//! One node of the scale benchmark's step (benches/scale.sh: `srun -N64 -n4096`,
//! `--tf-cluster='chief:1,ps:8,worker:*'`, 64 tasks per node, one IPv4 address per node), in
//! an empty network namespace of its own. Each run is a new process, as each node's
//! slurmstepd is, doing what `crate::spank::isolation::firewall` does there (since 0.16.0,
//! [`Form::Messages`]: list, sets, install, ended, remove, all without libnftables; the other
//! forms through libnftables, with every phase below):
//! - **load**: load libnftables and make its context ([`Nft::open`]);
//! - **list**: the names of the node's tables, asked of the kernel
//!   ([`tables::dump_request`]: the step's own left by a requeue, other steps' ended tables);
//! - **sets**: each other step's table's ports (`list set inet TABLE ports`, one request per
//!   table, as the node compares its ports with them);
//! - **install**: the step's table (as the plugin does: `persist` where the library may know
//!   it, `Nft::may_persist`, else owned alone);
//! - **release**: the plugin lets libnftables go, keeping the socket that owns the table
//!   ([`Nft::release`]; the other forms keep the context);
//! - **ended**: as the tasks end, the table the node keeps until the step ends (the plugin
//!   loads libnftables again for it);
//! - **remove**: the step's own table (the plugin: through the socket that owns it);
//! - **epilog**: then a second process, as slurmd's job epilog: list, and remove the ended
//!   table with one hand-built request (no libnftables).
//!
//! Not here: resolving the 64 node names (getaddrinfo), the kernel's socket diagnostics for the
//! step's ports, the port claims, the extern step's holder: measured with the step at scale in
//! docs/performance.md. Per phase: the process's CPU (the scheduler's count) and wall time, the
//! median of the runs, the forms interleaved; and the kernel's part of the CPU (system time,
//! summed over the runs, since getrusage samples it at the clock's tick).
//!
//! `TFC_FIREWALL_OTHERS=N` (default 0) puts N other jobs' step tables on the node first (the
//! same rules under their own names), as a node at the tables' bound (`MAX_TABLES`, 128) holds
//! 127; the bench then also prints what libnftables' `list tables` would cost there, against
//! the kernel's dump of names.
//!
//! Every run first installs the table in each form and compares the kernel's listings (`--check`:
//! only that): a form the kernel does not take whole (libnftables 1.0.6 drops a table's flags
//! from JSON) is named there.

use std::process::Command;
use std::time::Instant;
use tfcluster::core::isolation::{rules, tables};
use tfcluster::core::{Settings, Spec, StepInputs, StepPlan};
use tfcluster::spank::isolation::nftables::{self, Nft};

const NODES: usize = 64;
const JOB: u32 = 4242;
const STEP: u32 = 0;
const UID: u32 = 61001;
/// The node whose table is measured: one in the middle of the step.
const NODE: usize = 31;

/// The node's two scripts: its step table and its ended table, in nft's syntax.
fn scripts() -> (String, String) {
    let spec = Spec::parse(Some("chief:1,ps:8,worker:*")).expect("spec");
    let settings = Settings::from_plugstack(&["isolate=yes"]).expect("settings");
    let (nodelist, tasks_per_node) = (format!("n[001-{NODES:03}]"), format!("64(x{NODES})"));
    let inputs = StepInputs {
        nodelist: &nodelist,
        tasks_per_node: &tasks_per_node,
        distribution: Some("block"),
        job_id: JOB,
        step_id: STEP,
        ..Default::default()
    };
    let plan = StepPlan::new(&spec, &settings, &inputs).expect("plan");
    let firewall = plan.isolation(JOB, STEP, UID, NODE).expect("isolate=yes");
    let resolve = |name: &str| -> Result<Vec<std::net::IpAddr>, String> {
        let n: u8 = name
            .trim_start_matches('n')
            .parse()
            .map_err(|_| name.to_string())?;
        Ok(vec![std::net::IpAddr::from([10, 77, 0, n])])
    };
    firewall.scripts(resolve).expect("scripts")
}

/// This process's CPU so far, in microseconds: in all (the scheduler's exact count), and the
/// user and system parts (sampled at the clock's tick, so exact only summed over many runs).
fn cpu() -> [i64; 3] {
    // SAFETY: clock_gettime and getrusage fill the structs they are given.
    let (time, usage) = unsafe {
        let mut time: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time);
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        (time, usage)
    };
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    [
        time.tv_sec * 1_000_000 + time.tv_nsec / 1000,
        us(usage.ru_utime),
        us(usage.ru_stime),
    ]
}

/// The values of one phase of one run: CPU, its user and system parts, and wall time, in
/// microseconds.
type Sample = [i64; 4];

/// Prints one `phase cpu user system wall` line (a [`Sample`]) per phase it times.
struct Phases;

impl Phases {
    fn time<T>(&self, phase: &str, f: impl FnOnce() -> T) -> T {
        let before = cpu();
        let wall = Instant::now();
        let out = f();
        let after = cpu();
        let d = |i: usize| after[i] - before[i];
        println!(
            "{phase} {} {} {} {}",
            d(0),
            d(1),
            d(2),
            wall.elapsed().as_micros()
        );
        out
    }
}

fn run(nft: &mut Nft, script: &str) {
    if let Err(e) = nft.run(script) {
        panic!("nftables refused: {e}");
    }
}

/// The ways a node can hand its step table to the kernel, each a list of scripts tried in turn
/// (the first the kernel takes is the table), then the ended table's script.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Form {
    /// What the plugin does since 0.16.0: the kernel's own messages, written from the script
    /// (`nftables::install`, `persist` tried first), through a socket of its own that owns
    /// the table; no libnftables loaded; the ended table the same way; the other steps' ports
    /// a dump of their sets (`nftables::set_ports`).
    Messages,
    /// What the plugin did from 0.15.0 to 0.15.3: `persist` where the library may know it
    /// (`Nft::may_persist`), else the owned table alone, in nft's syntax; libnftables
    /// let go before the tasks would fork, and loaded again for the ended table; the table
    /// removed through the socket that owns it.
    Text,
    /// Only the script this node takes, the context kept throughout (as the plugin did before
    /// 0.15.0, but for its `persist` try where the library refuses the word).
    TextKnown,
    /// libnftables' JSON of the table this node takes: what skipping nft's parser saves.
    Json,
}

const FORMS: [Form; 4] = [Form::Messages, Form::Text, Form::TextKnown, Form::Json];

/// Each form's scripts, worked out once in the bench's namespace: for JSON, what libnftables
/// lists for each table installed from its text, handed back as is.
fn forms() -> Vec<(Form, Vec<String>, String)> {
    let (script, ended) = scripts();
    let persistent = rules::persistent(&script);
    let mut nft = Nft::open().expect("libnftables");
    let table = tables::table_name(JOB, STEP);
    let ended_table = tables::ended_table_name(JOB, STEP);
    let taken = if nft.run(&persistent).is_ok() {
        run(&mut nft, &tables::removal(&table));
        persistent.clone()
    } else {
        script.clone()
    };
    // libnftables 1.0.6 lists a table's flags in text alone: they are put back into the JSON
    // as the text has them (whether the kernel then keeps them is what `check` shows).
    let flags: Vec<&str> = if taken == persistent {
        vec!["owner", "persist"]
    } else {
        vec!["owner"]
    };
    let as_json = |nft: &mut Nft, script: &str, table: &str| {
        run(nft, script);
        nft.set_json(true).expect("JSON");
        let listed = nft.run(&format!("list table inet {table}")).expect("list");
        nft.set_json(false).expect("text");
        run(nft, &tables::removal(table));
        let mut listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
        let owned = script.contains(rules::OWNED) || script.contains(rules::OWNED_PERSISTENT);
        if let Some(objects) = listed["nftables"].as_array_mut() {
            for object in objects.iter_mut().filter(|o| o.get("table").is_some()) {
                if owned {
                    object["table"]["flags"] = serde_json::json!(flags);
                }
            }
        }
        listed.to_string()
    };
    let json = (
        as_json(&mut nft, &taken, &table),
        as_json(&mut nft, &ended, &ended_table),
    );
    vec![
        (
            Form::Messages,
            vec![persistent.clone(), script.clone()],
            ended.clone(),
        ),
        (Form::Text, vec![persistent, script], ended.clone()),
        (Form::TextKnown, vec![taken], ended),
        (Form::Json, vec![json.0], json.1),
    ]
}

/// One node's slurmstepd for one step (`node`), or its job epilog (`epilog`), with the scripts
/// of `dir` (the form's, as [`main`] wrote them).
fn one(role: &str, dir: &str) {
    let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).expect("a script");
    let json = read("json") == "1";
    let plugin = read("plugin") == "1";
    let messages = read("messages") == "1";
    let tries: Vec<String> = (0..read("tries").parse::<usize>().expect("tries"))
        .map(|i| read(&format!("step.{i}")))
        .collect();
    let ended = read("ended");
    let (table, ended_table) = (
        tables::table_name(JOB, STEP),
        tables::ended_table_name(JOB, STEP),
    );
    let phases = Phases;
    if role == "epilog" {
        // As src/spank/hooks/epilog.rs: the kernel's names, then one hand-built request.
        phases.time("list", || nftables::node_tables().expect("list"));
        phases.time("remove", || {
            nftables::delete_table(&ended_table).expect("removed")
        });
        return;
    }
    if messages {
        // As src/spank/isolation/firewall.rs since 0.16.0: no libnftables.
        let names = phases.time("list", || nftables::node_tables().expect("list"));
        phases.time("sets", || {
            for table in tables::other_tables(&names, &[JOB], STEP) {
                nftables::set_ports(table).expect("a set");
            }
        });
        let socket = phases.time("install", || {
            let mut installed = tries.iter().map(|s| nftables::install(s));
            installed.find_map(|i| i.ok().flatten()).expect("installed")
        });
        phases.time("ended", || {
            nftables::install(&ended)
                .expect("installed")
                .expect("the core's script")
        });
        phases.time("remove", || socket.delete(&table).expect("removed"));
        return;
    }
    let mut nft = phases.time("load", || Nft::open().expect("libnftables"));
    let names = phases.time("list", || nftables::node_tables().expect("list"));
    phases.time("sets", || {
        for table in tables::other_tables(&names, &[JOB], STEP) {
            nft.run(&format!("list set inet {table} ports"))
                .expect("a set");
        }
    });
    nft.set_json(json).expect("JSON");
    if plugin {
        phases.time("install", || {
            let persist = nft.may_persist();
            run(&mut nft, &tries[usize::from(!persist)]);
        });
        let Ok(socket) = phases.time("release", || nft.release()) else {
            panic!("the context's socket is not told apart");
        };
        phases.time("ended", || {
            run(&mut Nft::open().expect("libnftables"), &ended);
        });
        phases.time("remove", || socket.delete(&table).expect("removed"));
        return;
    }
    phases.time("install", || {
        assert!(
            tries.iter().any(|script| nft.run(script).is_ok()),
            "no form installed"
        );
    });
    phases.time("ended", || run(&mut nft, &ended));
    nft.set_json(false).expect("text");
    phases.time("remove", || run(&mut nft, &tables::removal(&table)));
}

/// Whether every form installs the same table (the kernel's listing of each, in text).
fn check(forms: &[(Form, Vec<String>, String)]) -> bool {
    let mut nft = Nft::open().expect("libnftables");
    let table = tables::table_name(JOB, STEP);
    let mut listings = Vec::new();
    for (form, tries, _) in forms {
        let (taken, listed) = if *form == Form::Messages {
            let mut installed = tries.iter().map(|s| nftables::install(s));
            let socket = installed.find_map(|i| i.ok().flatten());
            let listed = nft.run(&format!("list table inet {table}"));
            let _ = socket.as_ref().map(|s| s.delete(&table));
            (socket.map(drop), listed.unwrap_or_default())
        } else {
            nft.set_json(*form == Form::Json).expect("JSON");
            let taken = tries.iter().find(|script| nft.run(script).is_ok());
            nft.set_json(false).expect("text");
            let listed = nft
                .run(&format!("list table inet {table}"))
                .unwrap_or_default();
            let _ = nft.run(&tables::removal(&table));
            (taken.map(drop), listed)
        };
        println!(
            "{form:?}: {} script(s) of {} bytes; installed: {}",
            tries.len(),
            tries.iter().map(String::len).sum::<usize>(),
            taken.is_some()
        );
        listings.push(listed);
    }
    let same = listings.windows(2).all(|w| w[0] == w[1]) && !listings[0].is_empty();
    println!("the kernel lists the same table for every form: {same}");
    for ((form, ..), listing) in forms.iter().zip(&listings).skip(1) {
        let lines = |text: &str| -> Vec<String> { text.lines().map(str::to_string).collect() };
        let (first, this) = (lines(&listings[0]), lines(listing));
        for line in first.iter().filter(|l| !this.contains(l)) {
            println!("{form:?} lacks: {}", line.trim());
        }
        for line in this.iter().filter(|l| !first.contains(l)) {
            println!("{form:?} adds: {}", line.trim());
        }
    }
    same
}

/// Puts `TFC_FIREWALL_OTHERS` other jobs' step tables on the node, owned by the context it
/// returns (kept until the bench ends), and prints what a look at the node's table names costs
/// there: libnftables' `list tables` against the kernel's dump (the median of 21, in ms of CPU).
fn install_others() -> Nft {
    let count: u32 = std::env::var("TFC_FIREWALL_OTHERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let (script, _) = scripts();
    let mut nft = Nft::open().expect("libnftables");
    let ours = tables::table_name(JOB, STEP);
    for i in 0..count {
        let other = tables::table_name(JOB + 1 + i, STEP);
        run(&mut nft, &script.replace(&ours, &other));
    }
    let cpu_ms = |f: &mut dyn FnMut()| {
        let samples = (0..21)
            .map(|_| {
                let before = cpu()[0];
                f();
                cpu()[0] - before
            })
            .collect();
        median(samples) as f64 / 1000.0
    };
    let listed = cpu_ms(&mut || {
        nft.run("list tables").expect("list tables");
    });
    let dumped = cpu_ms(&mut || {
        nftables::node_tables().expect("the kernel's dump");
    });
    println!(
        "{count} other tables on the node: libnftables' list tables {listed:.2} ms of CPU, the kernel's dump of names {dumped:.3} ms"
    );
    nft
}

fn median(mut values: Vec<i64>) -> i64 {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        let arg = |n: usize| args.get(i + n).map_or("", String::as_str);
        one(arg(1), arg(2));
        return;
    }
    // SAFETY: unshare with a constant flag; this process is single-threaded here.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        eprintln!(
            "benches/firewall.rs: cannot make a network namespace ({}): run it as root",
            std::io::Error::last_os_error()
        );
        std::process::exit(1);
    }
    let forms = forms();
    let same = check(&forms);
    let _others = install_others();
    if args.iter().any(|a| a == "--check") {
        std::process::exit(i32::from(!same));
    }
    let runs: usize = std::env::var("TFC_FIREWALL_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(50);
    let dir = std::env::temp_dir().join(format!("tfcluster-firewall-bench.{}", std::process::id()));
    for (form, tries, ended) in &forms {
        let d = dir.join(format!("{form:?}"));
        std::fs::create_dir_all(&d).expect("a directory");
        let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
        write("json", if *form == Form::Json { "1" } else { "0" });
        write("plugin", if *form == Form::Text { "1" } else { "0" });
        write("messages", if *form == Form::Messages { "1" } else { "0" });
        write("tries", &tries.len().to_string());
        for (i, script) in tries.iter().enumerate() {
            write(&format!("step.{i}"), script);
        }
        write("ended", ended);
    }
    let me = std::env::current_exe().expect("the bench's path");
    // (form, process, phase) -> the runs' (user, system, wall) in microseconds.
    let mut rows: Rows = Vec::new();
    for _ in 0..runs {
        for form in FORMS {
            for role in ["node", "epilog"] {
                let d = dir.join(format!("{form:?}"));
                let out = Command::new(&me)
                    .args(["--one", role, &d.display().to_string()])
                    .output()
                    .expect("a run");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let mut total: Sample = [0; 4];
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    let f: Vec<&str> = line.split(' ').collect();
                    let n = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
                    let value: Sample = [n(1), n(2), n(3), n(4)];
                    (0..4).for_each(|i| total[i] += value[i]);
                    push(&mut rows, (form, role, f[0].to_string()), value);
                }
                push(&mut rows, (form, role, "all".to_string()), total);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{runs} runs of each; CPU and wall time: the median, in ms; the kernel's part of the CPU \
         (system time): over all runs"
    );
    println!("| form | process | phase | CPU | wall | kernel's part |");
    println!("|---|---|---|---:|---:|---:|");
    for ((form, role, phase), values) in &rows {
        let ms = |i: usize| median(values.iter().map(|v| v[i]).collect()) as f64 / 1000.0;
        let sum = |i: usize| values.iter().map(|v| v[i]).sum::<i64>() as f64;
        let kernel = 100.0 * sum(2) / (sum(1) + sum(2)).max(1.0);
        println!(
            "| {form:?} | {role} | {phase} | {:.2} | {:.2} | {kernel:.0} % |",
            ms(0),
            ms(3)
        );
    }
}

type Rows<'a> = Vec<((Form, &'a str, String), Vec<Sample>)>;

fn push<'a>(rows: &mut Rows<'a>, key: (Form, &'a str, String), value: Sample) {
    match rows.iter_mut().find(|(k, _)| *k == key) {
        Some((_, v)) => v.push(value),
        None => rows.push((key, vec![value])),
    }
}
