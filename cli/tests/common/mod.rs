//! Helpers shared by the integration tests.

use std::process::Command;

/// Runs the `hetla` binary with `args`: (success, stdout, stderr).
pub fn hetla(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hetla"))
        .args(args)
        .output()
        .expect("the hetla binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
