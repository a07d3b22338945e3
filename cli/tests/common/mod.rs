//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
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

/// Runs `calibrate --tile 64 --samples 2 --perfmodel-dir DIR --output DIR/platform.toml --json`
/// plus `extra`, which must succeed: the platform file and the report. (Not every test file that
/// shares this module calibrates.)
#[allow(dead_code)]
pub fn calibrate_to_file(dir: &Path, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("platform.toml");
    let mut args = vec![
        "calibrate",
        "--tile",
        "64",
        "--samples",
        "2",
        "--perfmodel-dir",
        dir.to_str().unwrap(),
        "--output",
        file.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = hetla(&args);
    assert!(ok, "{err}");
    (file, serde_json::from_str(&out).unwrap())
}

/// Runs `hetla` with the words of `line` (split at white space): (success, stdout, stderr).
#[allow(dead_code)]
pub fn run(line: &str) -> (bool, String, String) {
    hetla(&line.split_whitespace().collect::<Vec<_>>())
}

/// Runs `hetla` with the words of `line` and `--json`, which must succeed: the report.
#[allow(dead_code)]
pub fn json(line: &str) -> serde_json::Value {
    let (ok, out, err) = run(&format!("{line} --json"));
    assert!(ok, "hetla {line}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("hetla {line}: {e} in {out}"))
}

/// The string `key` of each object in the array `list`.
#[allow(dead_code)]
pub fn each<'v>(list: &'v serde_json::Value, key: &str) -> Vec<&'v str> {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"));
    items
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}
