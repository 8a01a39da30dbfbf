//! The RPM as a RHEL-family site builds it: from tfcluster's source tarball (`make dist`) with
//! `rpmbuild -ta`, on a build host whose Slurm is SchedMD's source laid out as its RPMs lay it
//! out (the `slurm-X.Y.Z-rpm` root, tests/release/root.sh), with the network cut off; then
//! installed with `rpm` into a database that knows that Slurm, and a step run through it. Runs
//! on the release whose `install` is [`Install::Rpm`] (the others return at once).
//!
//! The database: rpm's own dependency generator (elfdeps, as for SchedMD's packages) makes the
//! provides of the Slurm installed in the root (`slurm`: libslurm.so.NN; `slurm-devel`: the
//! headers) and of its C library, packaged from the files already there and recorded with
//! `--justdb`, so what the package requires must resolve against what SchedMD's packages of the
//! same files provide.

mod common;
use common::cluster::{dir, tool, PlugStack};
use common::release::{self, Install};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `line` on the release's system (its root) for at most `seconds`: its exit status and its
/// output, stdout then stderr.
fn in_root(line: &str, seconds: u32) -> (bool, String) {
    let root = std::env::var("TFC_ROOT").expect("TFC_ROOT: run through tests/release/run.sh");
    let out = Command::new("timeout")
        .arg(seconds.to_string())
        .arg(repo().join("tests/release/root.sh"))
        .args(["exec", &root, "bash", "-c", line])
        .current_dir("/tmp")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// [`in_root`], which must succeed; its output.
fn ok(line: &str) -> String {
    let (success, text) = in_root(line, 300);
    assert!(success, "{line}:\n{text}");
    text
}

/// What the site's build made, built once for every test here.
struct Built {
    /// Where the build ran: the tarball, rpmbuild's tree, the database.
    work: PathBuf,
    rpm: String,
    srpm: String,
    /// rpm with the test's database (`--dbpath`), which knows the root's Slurm and C library.
    rpm_db: String,
    /// What the root's libslurm provides, by rpm's generator: `libslurm.so.NN()(64bit)`.
    libslurm: String,
    /// rpmbuild's output, for the failure messages.
    log: String,
}

/// On the release whose `install` is [`Install::Rpm`] (`None` on the others): the source
/// tarball made here, as the release manager makes it (`make dist`, with git and the network),
/// then everything else on the site's build host (the root).
fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Built> = OnceLock::new();
    if release::current().install != Install::Rpm {
        return None;
    }
    Some(BUILT.get_or_init(|| {
        let work = dir().join("rpm");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let dist = Command::new("make")
            .args(["-s", "dist"])
            .arg(format!("DIST_DIR={}", work.display()))
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(
            dist.status.success(),
            "make dist:\n{}",
            String::from_utf8_lossy(&dist.stderr)
        );
        let tarball = String::from_utf8(dist.stdout).unwrap().trim().to_string();
        let w = work.display();
        // A build host: a clean environment, a HOME of its own, and no network.
        let (success, log) = in_root(
            &format!(
                "mkdir -p {w}/home && unshare --net env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                 HOME={w}/home LANG=C rpmbuild -ta --nodeps --define '_topdir {w}/top' {tarball} 2>&1"
            ),
            1500,
        );
        assert!(success, "rpmbuild -ta {tarball}, offline:\n{log}");
        let find = |dir: &str| ok(&format!("ls {w}/top/{dir}/*/*.rpm {w}/top/{dir}/*.rpm 2>/dev/null || true"));
        let rpm = find("RPMS").trim().to_string();
        let srpm = find("SRPMS").trim().to_string();
        let rpm_db = format!("rpm --dbpath {w}/db");
        ok(&format!("{rpm_db} --initdb"));
        let libslurm = ok(
            "/usr/lib/rpm/elfdeps --provides /usr/lib64/libslurm.so | grep '^libslurm'",
        )
        .trim()
        .to_string();
        Built {
            work,
            rpm,
            srpm,
            rpm_db,
            libslurm,
            log,
        }
    }))
}

/// Records a package of files already in the root, as its distribution packaged them, in the
/// test's database: its provides are what rpm's generator finds in those files, and `provides`
/// (what the distribution's spec adds by hand).
fn record(b: &Built, name: &str, version: &str, files: &[&str], provides: &[&str]) {
    let w = b.work.display();
    let spec = format!(
        "Name: {name}\nVersion: {version}\nRelease: 1\nSummary: {name} as installed in the root\n\
         License: GPL-2.0-or-later\n{provides}%description\n{name}, from the files already installed.\n\
         %install\nfor f in {list}; do mkdir -p %{{buildroot}}$(dirname $f); cp -a $f %{{buildroot}}$f; done\n\
         %files\n{lines}\n",
        list = files.join(" "),
        lines = files.join("\n"),
        provides = provides.iter().map(|p| format!("Provides: {p}\n")).collect::<String>(),
    );
    std::fs::write(b.work.join(format!("{name}.spec")), spec).unwrap();
    ok(&format!(
        "rpmbuild -bb --quiet --define '_topdir {w}/provides' --define 'debug_package %{{nil}}' \
         --define '__os_install_post %{{nil}}' {w}/{name}.spec >/dev/null 2>&1 && \
         {db} -i --justdb --nodeps {w}/provides/RPMS/*/{name}-{version}-1.*.rpm",
        db = b.rpm_db
    ));
}

fn query(rpm: &str, what: &str) -> String {
    ok(&format!("rpm -qp {what} {rpm} 2>/dev/null"))
}

/// `rpmbuild -ta` of the tarball builds with no network, and makes a package named for the
/// Slurm release, for this machine's architecture, that requires the libslurm soname of the
/// Slurm it was built against, installs in Slurm's plugin directory, and an SRPM beside it.
#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn rpmbuild_ta_builds_the_tarball_offline_for_the_installed_slurm() {
    let Some(b) = built() else { return };
    let arch = ok("uname -m").trim().to_string();
    let name = format!(
        "slurm-spank-tfcluster-{}-1.slurm{}",
        env!("CARGO_PKG_VERSION"),
        release::current().version
    );
    assert!(
        b.rpm.ends_with(&format!("/{name}.{arch}.rpm")),
        "{}\n{}",
        b.rpm,
        b.log
    );
    assert!(b.srpm.ends_with(&format!("/{name}.src.rpm")), "{}", b.srpm);
    assert!(
        b.libslurm.starts_with("libslurm.so.") && b.libslurm.ends_with("()(64bit)"),
        "{}",
        b.libslurm
    );
    let requires = query(&b.rpm, "--requires");
    // (rpm makes a package with a %config file require its own `config(NAME) = VERSION`.)
    let slurm: Vec<&str> = requires
        .lines()
        .filter(|l| l.contains("slurm") && !l.starts_with("config("))
        .collect();
    assert_eq!(slurm, [b.libslurm.as_str()], "{requires}");
    // The Slurm of the build host is what its headers are packaged in.
    assert!(
        query(&b.srpm, "--requires")
            .lines()
            .any(|l| l == "/usr/include/slurm/spank.h"),
        "{}",
        query(&b.srpm, "--requires")
    );
    // isolate=yes, on in the packaged snippet, loads libnftables (RHEL: the nftables package).
    assert!(requires.lines().any(|l| l == "nftables"), "{requires}");
    assert_eq!(query(&b.rpm, "--suggests"), "");
    // Slurm's own plugins are where this package puts tfcluster.
    assert_eq!(
        ok(&format!(
            "{}/packaging/slurm-plugin-dir.sh 2>/dev/null",
            repo().display()
        )),
        "/usr/lib64/slurm\n"
    );
    // rpmbuild compresses the man page (brp-compress).
    let list = query(&b.rpm, "--list");
    let files: Vec<&str> = list
        .lines()
        .map(|l| l.strip_suffix(".gz").unwrap_or(l))
        .collect();
    assert_eq!(
        files,
        [
            "/etc/tfcluster",
            "/etc/tfcluster/tfcluster.conf",
            "/usr/lib64/slurm/spank_tfcluster.so",
            "/usr/share/doc/slurm-spank-tfcluster",
            "/usr/share/doc/slurm-spank-tfcluster/CHANGELOG.md",
            "/usr/share/doc/slurm-spank-tfcluster/README.md",
            "/usr/share/licenses/slurm-spank-tfcluster",
            "/usr/share/licenses/slurm-spank-tfcluster/LICENSE",
            "/usr/share/man/man8/spank-tfcluster.8",
            "/usr/share/tfcluster",
            "/usr/share/tfcluster/plugstack.conf.example",
            "/usr/share/tfcluster/tfcluster.conf",
        ],
        "{list}"
    );
    // The admin's settings file: %config(noreplace), kept as the admin edited it (c: config,
    // n: noreplace).
    let flags = query(&b.rpm, "--qf '[%{FILEFLAGS:fflags} %{FILENAMES}\\n]'");
    assert!(
        flags
            .lines()
            .any(|l| l == "cn /etc/tfcluster/tfcluster.conf"),
        "{flags}"
    );
}

/// Without Slurm in the database rpm refuses the package, naming libslurm's soname; with the
/// root's Slurm and C library recorded as their packages provide them, `rpm -i` installs it, a
/// step runs through the snippet it installs, and `rpm -e` removes every file.
#[test]
#[ignore = "needs root and the test cluster: run tests/run.sh"]
fn the_rpm_installs_against_slurms_provides_runs_a_step_and_removes() {
    let Some(b) = built() else { return };
    let (installed, refused) = in_root(&format!("{} -i --test {}", b.rpm_db, b.rpm), 60);
    assert!(!installed, "installed without Slurm:\n{refused}");
    assert!(
        refused.contains(&format!("{} is needed by", b.libslurm)),
        "{refused}"
    );
    // `slurm 25.11.7`
    let version = ok("sinfo -V");
    let version = version.trim().rsplit(' ').next().unwrap();
    // The C library and loader slurmd runs with, whatever the architecture.
    let libc = ok(
        "ldd /usr/sbin/slurmd | awk '/libc\\.so|ld-linux/ {print $1 ~ /^\\// ? $1 : $3}' | xargs readlink -f",
    );
    let libc: Vec<&str> = libc.lines().collect();
    // RHEL's glibc.spec provides rtld(GNU_HASH) by hand; the generator requires it of every
    // library linked with GNU hash tables.
    record(b, "glibc", "2.36", &libc, &["rtld(GNU_HASH)"]);
    record(b, "slurm", version, &["/usr/lib64/libslurm.so.*"], &[]);
    // The root's libnftables, as RHEL's nftables package carries it.
    let nftables = ok("ldconfig -p | awk '$1 == \"libnftables.so.1\" {print $NF; exit}'");
    record(b, "nftables", "1.0.6", &[nftables.trim()], &[]);
    record(
        b,
        "slurm-devel",
        version,
        &["/usr/include/slurm", "/usr/lib64/libslurm.so"],
        &[],
    );
    // What the source package's build requires of Slurm resolves too.
    assert_eq!(
        ok(&format!(
            "{} -q --qf '%{{NAME}}' --whatprovides /usr/include/slurm/spank.h",
            b.rpm_db
        )),
        "slurm-devel"
    );
    ok(&format!("{} -i {}", b.rpm_db, b.rpm));
    let plugin = "/usr/lib64/slurm/spank_tfcluster.so";
    let here = in_root(&format!("test -f {plugin}"), 30).0;
    let stack = PlugStack::set("include /etc/tfcluster/tfcluster.conf");
    let (ran, out) = in_root(
        &format!(
            "cd /tmp && srun -N1 -n2 --tf-cluster=chief:1,worker:1 {}",
            tool("report.sh")
        ),
        120,
    );
    drop(stack);
    ok(&format!("{} -e slurm-spank-tfcluster", b.rpm_db));
    assert!(here, "rpm -i: no {plugin}");
    assert!(ran, "the step:\n{out}");
    let configs: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("TASK|"))
        .map(|l| l.rsplit('|').next().unwrap())
        .collect();
    assert_eq!(configs.len(), 2, "{out}");
    assert!(
        configs
            .iter()
            .all(|c| c.starts_with("{\"cluster\":{\"chief\":[")),
        "{configs:?}"
    );
    for gone in [
        plugin,
        "/usr/share/tfcluster/tfcluster.conf",
        "/etc/tfcluster/tfcluster.conf",
    ] {
        assert!(
            !in_root(&format!("test -e {gone}"), 30).0,
            "rpm -e left {gone}"
        );
    }
}

/// The spec builds for the build host's architecture and keeps rpm's own dependency generator
/// (no `BuildArch`, no `AutoReqProv: no`): what it requires of Slurm is the one line it adds,
/// and libnftables (loaded with dlopen, which the generator cannot see) the other.
#[test]
fn the_spec_names_no_fixed_architecture_and_keeps_rpms_dependencies() {
    let spec =
        std::fs::read_to_string(repo().join("packaging/slurm-spank-tfcluster.spec.in")).unwrap();
    let keys: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim()))
        .collect();
    for banned in ["BuildArch", "ExclusiveArch", "AutoReqProv", "AutoReq"] {
        assert!(!keys.contains(&banned), "{banned} in the spec");
    }
    assert_eq!(
        spec.lines()
            .filter(|l| l.starts_with("Requires:"))
            .collect::<Vec<_>>(),
        [
            "Requires:       %{slurm_soname}",
            "Requires:       nftables"
        ]
    );
}
