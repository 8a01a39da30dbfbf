//! The test command from any clone (tests/readable.sh): where other users cannot read the
//! checkout (a clone in root's home, mode 0700), it stops at once and says which directory is
//! closed and what to change, instead of failing every test that runs srun as another user.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn readable(dir: &std::path::Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/readable.sh"))
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_checkout_other_users_cannot_read_stops_the_test_command_at_once() {
    let (ok, said) = readable(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(ok, "this checkout: {said}");
    let home = std::env::temp_dir().join(format!("tfc-readable-{}", std::process::id()));
    let clone = home.join("tfcluster");
    std::fs::create_dir_all(clone.join("tests")).unwrap();
    std::fs::write(clone.join("Cargo.toml"), "").unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (ok, said) = readable(&clone);
    std::fs::remove_dir_all(&home).unwrap();
    assert!(!ok, "a clone under a 0700 directory passed");
    let closed = home.display().to_string();
    assert!(
        said.contains(&format!("{closed} is closed to them (mode 700)"))
            && said.contains(&format!("chmod o+x {closed}")),
        "{said}"
    );
}
