//! The documentation holds together: README stays a five-minute read, every link between
//! README.md and docs/*.md reaches a file that exists and a heading that is there, and README's
//! cost row is docs/performance.md's measurement of the default configuration, not a second one.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, by path relative to the repository.
fn pages() -> BTreeMap<PathBuf, String> {
    let mut pages = BTreeMap::new();
    pages.insert(
        PathBuf::from("README.md"),
        std::fs::read_to_string(repo().join("README.md")).unwrap(),
    );
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path.strip_prefix(repo()).unwrap().to_path_buf();
            pages.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    pages
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| l.starts_with('#'))
        })
        .map(anchor)
        .collect()
}

/// `(target)` of every `[text](target)` link that is not to the web.
fn local_links(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split([')', ' ']).next())
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// A reader reads 220 words a minute.
const WORDS_A_MINUTE: usize = 220;

/// Fails when `text` (`what`) takes a reader more than `minutes`, with some margin.
fn read_within(what: &str, text: &str, minutes: f64) {
    let words = text.split_whitespace().count();
    let most = (minutes * WORDS_A_MINUTE as f64) as usize;
    assert!(words <= most, "{what} has {words} words, more than {minutes} minutes' {most}: move detail into the reference");
}

#[test]
fn readme_is_a_five_minute_read() {
    let readme = &pages()[Path::new("README.md")];
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; move detail into docs/"
    );
    // About 1,100 words, with a little margin.
    read_within("README.md", readme, 5.2);
}

#[test]
fn every_link_between_the_pages_reaches_its_heading() {
    let pages = pages();
    let mut broken = Vec::new();
    for (page, text) in &pages {
        let dir = page.parent().unwrap_or(Path::new(""));
        for link in local_links(text) {
            let (file, heading) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                // Resolve `..` by hand: the pages are README.md and docs/*.md.
                let joined = dir.join(file);
                let mut parts = Vec::new();
                for c in joined.components() {
                    match c {
                        std::path::Component::ParentDir => {
                            parts.pop();
                        }
                        other => parts.push(other.as_os_str().to_owned()),
                    }
                }
                parts.iter().collect()
            };
            if !repo().join(&target).exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
            } else if !heading.is_empty() {
                match pages.get(&target) {
                    Some(text) if !anchors(text).iter().any(|a| a == heading) => {
                        broken.push(format!("{}: {link} (no such heading)", page.display()))
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The cells after the first of the table row of `text` whose first cell `is` picks.
fn row<'a>(text: &'a str, is: impl Fn(&str) -> bool) -> Vec<&'a str> {
    let cells =
        |l: &'a str| -> Vec<&'a str> { l.trim_matches('|').split(" | ").map(str::trim).collect() };
    let line = text
        .lines()
        .filter(|l| l.starts_with("| "))
        .find(|l| is(cells(l)[0]))
        .expect("the row");
    cells(line)[1..].to_vec()
}

/// The admin guide's way from a build to a checked cluster (its sections up to the
/// configuration reference) is a 15-minute read.
#[test]
fn the_admin_guides_install_path_is_a_fifteen_minute_read() {
    let guide = &pages()[Path::new("docs/admin-guide.md")];
    let path = guide.split("### Configuration reference").next().unwrap();
    read_within("the admin guide's install and operate path", path, 15.0);
}

/// README's "What it costs" gives what docs/performance.md's account measured, as its rows have
/// it: tfcluster's own CPU per node and step (the least and the most of the newest phase
/// table's "every hook" row, rounded), and each node's CPU against the floor: the releases
/// whose interval is within 1.05, over it, or holds it, by name (as performance.md's reading of
/// that row names them too), the rounds' medians (p/d, two decimals), and the intervals'
/// confidence.
#[test]
fn readmes_cost_is_the_performance_tables() {
    let pages = pages();
    let readme = &pages[Path::new("README.md")];
    let performance = &pages[Path::new("docs/performance.md")];
    let range = |values: Vec<f64>, decimals: usize| {
        let (least, most) = (
            values.iter().copied().fold(f64::MAX, f64::min),
            values.iter().copied().fold(0.0, f64::max),
        );
        format!("{least:.decimals$} to {most:.decimals$}")
    };
    let number = |cell: &str| -> f64 {
        let first = cell.split(' ').next().unwrap();
        first.trim_matches('*').parse().unwrap()
    };
    let numbers = |first: &str| -> Vec<f64> {
        row(performance, |c| c.starts_with(first))
            .into_iter()
            .map(number)
            .collect()
    };
    let releases = row(performance, |c| c.starts_with("CPU per node and step"));
    let against = row(performance, |c| {
        c.starts_with("p/d against the goal of 1.05")
    });
    let named = |verdict: &str| {
        let names: Vec<&str> = releases
            .iter()
            .zip(&against)
            .filter(|(_, a)| **a == verdict)
            .map(|(release, _)| release.trim_start_matches("Slurm "))
            .collect();
        match names.split_last() {
            None => None,
            Some((last, [])) => Some(last.to_string()),
            Some((last, rest)) => Some(format!("{} and {last}", rest.join(", "))),
        }
    };
    // The interval's confidence, as the row of the rounds' medians names it.
    let label = performance
        .lines()
        .find(|l| l.starts_with("| p/d, CPU per node: the rounds' median"))
        .expect("docs/performance.md has the rounds' medians");
    let confidence = label
        .split("holds it with ")
        .nth(1)
        .and_then(|rest| rest.split(" confidence").next())
        .expect("the row names its confidence");
    let section = readme.split("## What it costs").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap().replace('\n', " ");
    // Each cell of the "every hook" row is its launches' least and most CPU, then their page
    // faults: "10.4-10.5 (859-861)".
    let hooks: Vec<f64> = row(performance, |c| c == "**every hook**")
        .into_iter()
        .flat_map(|cell| {
            let ms = cell.split(' ').next().unwrap();
            ms.split('-').map(|n| n.parse::<f64>().unwrap())
        })
        .collect();
    let mut said = vec![
        format!("{} ms of CPU per node and step", range(hooks, 0)),
        format!(
            "the rounds' medians: {}",
            range(numbers("p/d, CPU per node: the rounds' median"), 2)
        ),
        format!("{confidence} confidence"),
    ];
    // README's words, and those of performance.md's reading of its own verdict row.
    let mut read = Vec::new();
    for (verdict, words, its_words) in [
        (
            "within 1.05",
            "within 1.05 on",
            "Within 1.05 of the floor on",
        ),
        ("over 1.05", "over it on", "over it on"),
        (
            "1.05 inside",
            "not told apart from 1.05 on",
            "not told apart from it on",
        ),
    ] {
        said.extend(named(verdict).map(|names| format!("{words} {names}")));
        read.extend(named(verdict).map(|names| format!("{its_words} {names}")));
    }
    for said in said {
        assert!(
            section.contains(&said),
            "README's cost does not say {said:?} (docs/performance.md's account):\n{section}"
        );
    }
    let reading = performance.split_whitespace().collect::<Vec<_>>().join(" ");
    for read in read {
        assert!(
            reading.contains(&read),
            "docs/performance.md's reading of its verdict row does not say {read:?}"
        );
    }
}

/// The admin guide's cost of `isolate=yes` per node and step is performance.md's measured one:
/// the bold "one node, one step" row of its firewall table, each library's, rounded to whole ms.
#[test]
fn the_admin_guides_firewall_cost_is_the_benchs() {
    let pages = pages();
    let performance = &pages[Path::new("docs/performance.md")];
    let guide = &pages[Path::new("docs/admin-guide.md")];
    let ms: Vec<f64> = row(performance, |c| c == "**one node, one step**")
        .iter()
        .map(|cell| cell.trim_matches('*').parse().unwrap())
        .collect();
    let (least, most) = (
        ms.iter().copied().fold(f64::MAX, f64::min).floor(),
        ms.iter().copied().fold(0.0, f64::max).ceil(),
    );
    let said = format!("| **What it costs** | {least} to {most} ms of CPU per node and step");
    assert!(
        guide.contains(&said),
        "the admin guide does not say {said:?} (docs/performance.md: {ms:?})"
    );
}

/// One version everywhere: CHANGELOG.md's newest section, and every package, tarball and
/// man-page name in README, docs/ and the man page, are Cargo.toml's version.
#[test]
fn every_page_names_the_crates_version() {
    let version = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let newest = changelog.lines().find(|l| l.starts_with("## ")).unwrap();
    assert!(
        newest.starts_with(&format!("## {version} ")),
        "CHANGELOG.md's newest section is {newest:?}, Cargo.toml says {version}"
    );
    let mut texts = pages();
    let man = PathBuf::from("packaging/spank-tfcluster.8");
    texts.insert(
        man.clone(),
        std::fs::read_to_string(repo().join(&man)).unwrap(),
    );
    let mut named = 0;
    for (page, text) in &texts {
        for prefix in ["tfcluster-", "tfcluster_", "tfcluster "] {
            for (at, _) in text.match_indices(prefix) {
                let rest = &text[at + prefix.len()..];
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let word = word.trim_end_matches('.');
                if word.matches('.').count() == 2 {
                    assert_eq!(word, version, "{}: {prefix}{word}", page.display());
                    named += 1;
                }
            }
        }
    }
    assert!(named > 0, "no page names a version");
}

/// The man page's ENVIRONMENT section: its text, from its heading to the next.
fn man_section(name: &str) -> String {
    let man = std::fs::read_to_string(repo().join("packaging/spank-tfcluster.8")).unwrap();
    let heading = format!(".SH {name}\n");
    let start = man
        .find(&heading)
        .unwrap_or_else(|| panic!("no {heading:?}"))
        + heading.len();
    let rest = &man[start..];
    rest[..rest.find("\n.SH ").unwrap_or(rest.len())].replace("\\-", "-")
}

/// The names the SPANK shell reads with a literal: `env("X")`, `getenv("X")`, `var("X")` and
/// `var_os("X")` anywhere in src/spank/.
fn names_read_in_the_shell() -> Vec<String> {
    let mut names = Vec::new();
    for path in rust_files(&repo().join("src/spank")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for call in ["env(\"", "getenv(\"", "var(\"", "var_os(\""] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                names.push(rest[..rest.find('"').unwrap()].to_string());
            }
        }
    }
    names
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The man page's ENVIRONMENT names every variable a task gets (the core's table of them, and
/// the runtimes' prefixes) and every one tfcluster reads (the core's named ones and the shell's
/// literals).
#[test]
fn the_man_page_names_every_variable_set_and_read() {
    use tfcluster::core::{container, gpus, layout, proxy};
    let section = man_section("ENVIRONMENT");
    let mut names: Vec<String> = container::APPTAINER_NAMES
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    names.extend(["APPTAINERENV_", "SINGULARITYENV_"].map(String::from));
    names.extend(proxy::READ.map(String::from));
    names.extend(
        [
            gpus::SLURM_STEP_GPUS,
            container::REQUEST_VAR,
            container::BUNDLE_VAR,
            layout::TASK_HOSTS_VAR,
            tfcluster::spank::error::ENV_OPTION,
        ]
        .map(String::from),
    );
    names.extend(names_read_in_the_shell());
    let words: Vec<&str> = section
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for name in &names {
        assert!(
            words
                .iter()
                .any(|w| w == name || (name.ends_with('_') && w.starts_with(name.as_str()))),
            "the man page's ENVIRONMENT does not name {name}"
        );
    }
    assert!(names.len() > 20, "{names:?}");
}

/// docs/testing.md's source map: a row per directory of src/ (`| \`src/core/\` | ...`) names
/// every module file in it (`` `stem` ``), and a row names each file at src/'s top.
#[test]
fn the_source_map_names_every_file_under_src() {
    let map = &pages()[Path::new("docs/testing.md")];
    let src = repo().join("src");
    for path in rust_files(&src) {
        let relative = path.strip_prefix(repo()).unwrap();
        let dir = relative.parent().unwrap();
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let (row, named) = match dir == Path::new("src") {
            true => (format!("| `{}` |", relative.display()), None),
            false => (
                format!("| `{}/` |", dir.display()),
                Some(format!("`{stem}`")),
            ),
        };
        let line = map.lines().find(|l| l.starts_with(&row));
        let line = line.unwrap_or_else(|| panic!("docs/testing.md has no row {row}"));
        if let Some(named) = named {
            assert!(
                stem == "mod" || line.contains(&named),
                "docs/testing.md's row {row} does not name {named}"
            );
        }
    }
}

/// The oldest Rust is one fact, Cargo.toml's `rust-version`: every "Rust X or later" in README
/// and docs/ says the same.
#[test]
fn every_page_names_cargos_rust_version() {
    let version = env!("CARGO_PKG_RUST_VERSION");
    let mut named = 0;
    for (page, text) in pages() {
        for (at, _) in text.match_indices("Rust ") {
            let rest = &text[at + "Rust ".len()..];
            if let Some((v, _)) = rest.split_once(" or later") {
                if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    assert_eq!(v, version, "{}: Rust {v} or later", page.display());
                    named += 1;
                }
            }
        }
    }
    assert!(named > 0, "no page names the oldest Rust");
}

/// srun's placeholder TF_CONFIG is the core's text: the man page and the admin guide quote its
/// first clause, which is what a user sees when printing the variable.
#[test]
fn the_docs_quote_srun_placeholder_tf_config() {
    let text = tfcluster::core::tf_config::NOT_SET_ON_THIS_NODE;
    let first = text.split(':').next().unwrap();
    let man = std::fs::read_to_string(repo().join("packaging/spank-tfcluster.8")).unwrap();
    let guide = &pages()[Path::new("docs/admin-guide.md")];
    for (page, body) in [
        ("the man page", man.as_str()),
        ("the admin guide", guide.as_str()),
    ] {
        assert!(body.contains(first), "{page} does not quote {first:?}");
    }
}

/// README and the admin guide quote the line slurmd's log and `srun -v` print for the plugin
/// loaded (`loaded_line`, up to the release it names, which the quotes give as an example): a
/// changed text fails here, not in an admin's check after an install.
#[test]
fn the_docs_quote_the_loaded_line() {
    let line = format!("tfcluster: {}", tfcluster::spank::hooks::loaded_line());
    let (before_release, _) = line.rsplit_once(' ').unwrap();
    let pages = pages();
    for page in ["README.md", "docs/admin-guide.md"] {
        let body = &pages[Path::new(page)];
        assert!(
            body.contains(&format!("{before_release} ")),
            "{page} does not quote {before_release:?}"
        );
    }
}

/// The admin guide's table of what each plugin fault does is the one tests/plugstack.rs runs on
/// every release (printed on failure, to paste).
#[test]
fn the_admin_guides_plugstack_table_is_the_tested_one() {
    let guide = std::fs::read_to_string(repo().join("docs/admin-guide.md")).unwrap();
    let table = common::plugstack::guide_table();
    assert!(
        guide.contains(&table),
        "docs/admin-guide.md lacks the table tests/plugstack.rs runs:\n{table}"
    );
}

/// The admin guide's quote of `srun --help` is the option's usage text as the code registers
/// it (`OPTION_USAGE`), wrapped as Slurm wraps it: a changed text fails here, not in an admin's
/// terminal.
#[test]
fn the_admin_guide_quotes_srun_help() {
    let guide = std::fs::read_to_string(repo().join("docs/admin-guide.md")).unwrap();
    let block = guide
        .split_once("`srun --help` shows it as")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("the admin guide quotes srun --help");
    let words: Vec<&str> = block.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"--tf-cluster=SPEC"), "{block}");
    let usage: Vec<&str> = tfcluster::spank::hooks::OPTION_USAGE
        .split_whitespace()
        .collect();
    assert_eq!(words[1..], usage[..], "{block}");
}

/// Every srun line the docs give quotes what a shell would expand: a spec with `*` (zsh stops
/// with "no matches found", bash passes it on only while no file matches) and a node list with
/// `[...]`. `#SBATCH` lines are not read by a shell.
#[test]
fn every_srun_example_quotes_its_spec() {
    let mut texts = pages();
    for other in [
        "plugstack.conf.example",
        "packaging/spank-tfcluster.8",
        "tests/demo.sh",
    ] {
        texts.insert(
            PathBuf::from(other),
            std::fs::read_to_string(repo().join(other)).unwrap(),
        );
    }
    let unquoted = |word: &str| {
        !word.starts_with(['\'', '"'])
            && (word.contains('*') || word.contains('[') && word.contains(']'))
    };
    for (path, text) in &texts {
        for (n, line) in text.lines().enumerate() {
            if !line.contains("srun ") || line.contains("#SBATCH") || line.contains("(SPEC is") {
                continue;
            }
            // The words a shell reads: past a `--tf-cluster=` or `-w `.
            let words = line
                .split_whitespace()
                .flat_map(|w| w.split_once("cluster=").map(|(_, v)| v))
                .chain(
                    line.split(" -w ")
                        .skip(1)
                        .filter_map(|r| r.split(' ').next()),
                );
            for word in words {
                assert!(
                    !unquoted(word),
                    "{}:{}: quote {word}: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
    }
}

/// build.rs's newest tested release, above which a build warns, is the last line of
/// tests/releases.tsv.
#[test]
fn the_build_knows_the_newest_tested_release() {
    let build = std::fs::read_to_string(repo().join("build.rs")).unwrap();
    let newest = build
        .lines()
        .find_map(|l| l.strip_prefix("const NEWEST_TESTED: (u32, u32) = ("))
        .and_then(|rest| rest.strip_suffix(");"))
        .expect("build.rs: const NEWEST_TESTED");
    let (major, minor) = newest.split_once(", ").unwrap();
    let releases = std::fs::read_to_string(repo().join("tests/releases.tsv")).unwrap();
    let last = releases
        .lines()
        .rev()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .and_then(|l| l.split('\t').next())
        .unwrap();
    assert_eq!(
        format!("{major}.{:02}", minor.parse::<u32>().unwrap()),
        last
    );
}

/// The admin guide's "Check every node" table has a row for each part of a node's line as
/// `core::check` writes it (an all-well node's line, split at ` | `).
#[test]
fn the_admin_guide_names_each_part_of_the_checks_line() {
    use tfcluster::core::check::{Isolation, NodeCheck, Slurmd};
    use tfcluster::core::container::{ApptainerEnv, Runtimes};
    let line = NodeCheck {
        node: "n9",
        copy: "0.12.0 24.11",
        srun: Some("0.12.0 24.11"),
        srun_isolates: Some(true),
        lines: (Some("isolate=yes"), &["isolate=yes".to_string()]),
        slurmd: Slurmd::ThisFile,
        claims: Ok(()),
        steps: (Vec::new(), false),
        settings: Ok(()),
        isolation: Isolation::Works { held: true },
        gpus: None,
        apptainer: (ApptainerEnv::Found, Runtimes::NONE),
        oci: None,
        run_dir: Vec::new(),
    }
    .verdict()
    .line;
    let guide = &pages()[Path::new("docs/admin-guide.md")];
    let parts: Vec<&str> = line.split(" | ").collect();
    assert!(parts.len() > 5, "{line}");
    for part in &parts[1..parts.len() - 1] {
        let head = part.split(':').next().unwrap_or(part);
        assert!(
            guide.contains(&format!("| `{head}")),
            "docs/admin-guide.md's check table has no row for {head:?} (of {line})"
        );
    }
}

/// The threat model's inventory of what root reads from the job's environment
/// ([`tfcluster::core::root_inputs`]): docs/isolation.md's table is the code's, every name the
/// shell reads from the job's environment (its literals, and the core's named ones it passes)
/// is listed, and a name that is not listed is refused (as `Spank::getenv` refuses it).
#[test]
fn the_inventory_of_roots_inputs_is_the_codes() {
    use tfcluster::core::root_inputs::{job_env_listed, markdown};
    use tfcluster::core::{check, container, gpu_affinity, gpus, layout, proxy};
    let guide = &pages()[Path::new("docs/isolation.md")];
    assert!(
        guide.contains(&markdown()),
        "docs/isolation.md's table of what root reads is not root_inputs::markdown():\n{}",
        markdown()
    );
    let mut read: Vec<String> = names_read_in_the_shell()
        .into_iter()
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    // The process's own environment (srun's, slurmstepd's): not the job's.
    read.retain(|name| {
        ![
            "SLURMD_NODENAME",
            "SLURM_CONF",
            "SLURM_DISTRIBUTION",
            "SLURM_HOSTFILE",
        ]
        .contains(&name.as_str())
            || job_env_listed(name)
    });
    read.extend(proxy::READ.map(String::from));
    read.extend(
        [
            gpus::VAR,
            gpus::SLURM_STEP_GPUS,
            gpu_affinity::BIND_TYPE,
            gpu_affinity::BIND_LIST,
            container::BUNDLE_VAR,
            layout::TASK_HOSTS_VAR,
            check::SRUN_VAR,
            check::SRUN_ISOLATE_VAR,
            "SLURM_JOB_ID_HET_GROUP_0",
            "SLURM_JOB_ID_PACK_GROUP_127",
        ]
        .map(String::from),
    );
    for name in &read {
        assert!(
            job_env_listed(name),
            "root reads {name}, which root_inputs::JOB_ENV does not list"
        );
    }
    #[rustfmt::skip]
    let refused = ["SLURMD_NODENAME", "SLURM_JOB_ID", "SLURM_JOB_ID_HET_GROUP_", "SLURM_JOB_ID_HET_GROUP_1x", "LD_PRELOAD", ""];
    for name in refused {
        assert!(!job_env_listed(name), "{name:?} is listed");
    }
}

/// The admin guide's at-a-glance box gives the tables' bounds the code has
/// (`core::isolation::tables`).
#[test]
fn the_admin_guide_gives_the_tables_bounds() {
    use tfcluster::core::isolation::tables::{MAX_TABLES, MAX_TABLES_PER_USER};
    let guide = &pages()[Path::new("docs/admin-guide.md")];
    let said = format!(
        "a node at its bound of {MAX_TABLES} tfcluster tables or the user's jobs at {MAX_TABLES_PER_USER} there"
    );
    assert!(
        guide.contains(&said),
        "docs/admin-guide.md does not say: {said}"
    );
}

/// Each version in CHANGELOG.md has its git tag, `vX.Y.Z`, on a commit whose Cargo.toml is
/// that version: what the admin guide tells a site to check out for a version's tarball. A tree
/// with no tag at all (a release tarball, a clone without tags) has nothing to check.
#[test]
fn every_changelog_version_has_its_tag() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let tags = git(&["tag", "-l", "v*"]).unwrap_or_default();
    if tags.trim().is_empty() {
        eprintln!("no git tags here (a tarball or a clone without tags): nothing to check");
        return;
    }
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let versions: Vec<&str> = changelog
        .lines()
        .filter_map(|l| l.strip_prefix("## ")?.split(' ').next())
        .collect();
    assert!(!versions.is_empty());
    for version in versions {
        let tag = format!("v{version}");
        assert!(
            tags.lines().any(|t| t == tag),
            "CHANGELOG.md's {version} has no tag {tag}: git tag -a {tag} on its last commit"
        );
        let toml = git(&["show", &format!("{tag}:Cargo.toml")]).unwrap_or_default();
        assert!(
            toml.lines()
                .any(|l| l == format!("version = \"{version}\"")),
            "{tag}'s Cargo.toml is not version {version}"
        );
    }
}

/// Where the docs say which releases a kind of test runs on, they name exactly the releases
/// that tests/releases.tsv marks for it. (page, the words before the releases, the markers a
/// release needs, all of them)
#[rustfmt::skip]
const RELEASES_NAMED: &[(&str, &str, &[&str])] = &[
    ("README.md",           "real TensorFlow, JAX and PyTorch on", &["tensorflow", "jax", "torch"]),
    ("docs/admin-guide.md", "the `contain_spank` runs on",         &["contain_spank"]),
];

#[test]
fn the_docs_name_the_releases_the_release_table_marks() {
    let table = std::fs::read_to_string(repo().join("tests/releases.tsv")).unwrap();
    let pages = pages();
    for (page, words, markers) in RELEASES_NAMED {
        let marked: Vec<&str> = table
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let fields: Vec<&str> = l.split('\t').collect();
                let on: Vec<&str> = fields.get(2)?.split(',').collect();
                markers.iter().all(|m| on.contains(m)).then_some(fields[0])
            })
            .collect();
        let named = match marked.as_slice() {
            [one] => one.to_string(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            [] => panic!("no release is marked {markers:?}"),
        };
        let text = pages[Path::new(page)].replace('\n', " ");
        assert!(
            text.contains(&format!("{words} {named}")),
            "{page} must say: {words} {named}"
        );
    }
}
