//! The command line as a careless or hostile user drives it: every bad input is a clear error
//! before any work (never a panic, an abort or a hang), no finished run is thrown away, and
//! concurrent runs never lose a performance-model sample.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory removed at the end of the test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hetla-rel-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn str(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn command(args: &[&str], models: &Path) -> Command {
    // HETLA_TEST_BIN runs these tests against another build (an older one, to see them fail).
    let bin = std::env::var_os("HETLA_TEST_BIN").unwrap_or(env!("CARGO_BIN_EXE_hetla").into());
    let mut c = Command::new(bin);
    c.args(args).env("HETLA_PERFMODEL_DIR", models);
    // Relative outputs (`--out x`) land in the test's scratch directory (which holds the models
    // directory), not in the source tree.
    if let Some(scratch) = models.parent().filter(|p| p.is_dir()) {
        c.current_dir(scratch);
    }
    c
}

/// Runs `hetla <line>` (arguments split on spaces; models in `models`): (exit code, stdout,
/// stderr); asserts it did not panic or die of a signal.
fn hetla_in(models: &Path, line: &str) -> (i32, String, String) {
    let args: Vec<&str> = line.split_whitespace().collect();
    let out: Output = command(&args, models).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !stderr.contains("panicked") && out.status.code().is_some_and(|c| c != 101),
        "hetla {args:?} crashed ({:?}): {stderr}",
        out.status
    );
    (out.status.code().unwrap(), stdout, stderr)
}

/// Asserts `hetla <line>` fails with `code` and a message containing each of `needles`, with
/// nothing on stdout but, under --json, the error object.
fn fails(models: &Path, line: &str, code: i32, needles: &[&str]) {
    let args: Vec<&str> = line.split_whitespace().collect();
    let (rc, out, err) = hetla_in(models, line);
    assert_eq!(rc, code, "hetla {args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "hetla {args:?}: {err:?} lacks {n:?}");
    }
    if args.contains(&"--json") {
        let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON error object");
        assert!(v["error"]["kind"].is_string() && v["error"]["message"].is_string());
    } else {
        assert!(out.is_empty(), "hetla {args:?} printed {out}");
    }
}

#[test]
fn sizes_that_cannot_fit_are_refused_up_front() {
    let s = Scratch::new("sizes");
    let m = s.path("models");
    for line in [
        "cholesky --n 1000000000",
        "gemm --m 1000000000 --n 1000 --k 1000",
        "cholesky --n 3000 --tile 8",
        "simulate --platform sirocco --n 100000000 --tile 960",
        "bound --platform sirocco --n 100000000 --tile 960",
        "gemm --platform sirocco --m 10000000 --n 10000000 --k 10000000 --tile 960",
        "calibrate --tile 1000000000 --samples 1 --clusters 1x1",
        // Nodes and grids of distributed simulations: their ranks' state is counted
        // before any is allocated.
        "simulate --platform sirocco --n 9600 --tile 960 --nodes 2000000000",
        "simulate --platform sirocco --n 9600 --tile 960 --grid 40000x40000",
        "sweep --platform sirocco --n 9600 --tile 960 --nodes 2000000000 --out x",
    ] {
        fails(&m, line, 1, &["does not fit this machine"]);
    }
    fails(
        &m,
        "simulate --platform sirocco --n 9600 --tile 960 --grid 100000x100000",
        2,
        &["more processes than MPI can number"],
    );
    let many = (1..=2000)
        .map(|i| (i * 960).to_string())
        .collect::<Vec<_>>();
    let line = format!(
        "sweep --platform sirocco --n {} --tile 960,1920 --gpus 0,1,2,3 --clusters 20x1,2x10,4x5,1x20,10x2,5x4,auto --out x",
        many.join(",")
    );
    fails(&m, &line, 1, &["combinations a sweep may run"]);
    fails(
        &m,
        "cholesky --n 100 --gpus emulated:100000",
        2,
        &["from 1 to 64"],
    );
    fails(&m, "cholesky --n 100 --gpus 0-99999999999", 2, &["--gpus"]);
    fails(
        &m,
        "calibrate --tile 64 --samples 1000000 --clusters 1x1",
        2,
        &["at most 100000"],
    );
    fails(&m, "info --clusters 0-1000000000000/1", 2, &["CPU number"]);
    fails(
        &m,
        "sweep --platform sirocco --n 1:1000000000000:1 --tile 960 --out x",
        2,
        &["at most 10000"],
    );
    // Platform files describing impossible machines.
    let sirocco = hetla_lab::PlatformModel::preset("sirocco")
        .unwrap()
        .to_toml();
    for packages in ["100000", "100000000"] {
        let name = format!("p{packages}.toml");
        let text = sirocco.replacen("packages = 2", &format!("packages = {packages}"), 1);
        std::fs::write(s.path(&name), text).unwrap();
        let line = format!("simulate --platform {} --n 9600 --tile 960", s.str(&name));
        fails(&m, &line, 1, &["at most 4096 cores"]);
    }
}

#[test]
fn outputs_are_checked_before_the_work_and_a_failed_save_keeps_the_run() {
    let s = Scratch::new("outputs");
    let m = s.path("models");
    std::fs::write(s.path("a-file"), "x").unwrap();
    let missing = s.str("no-such-dir/t.json");
    let file = s.str("a-file");
    for (line, option) in [
        (format!("cholesky --n 200 --trace {missing}"), "--trace"),
        (
            format!("simulate --platform sirocco --n 9600 --tile 960 --gantt {missing}"),
            "--gantt",
        ),
        (
            format!("gemm --m 64 --n 64 --k 64 --trace {missing}"),
            "--trace",
        ),
        // calibrate --output in a missing directory: refused before anything is timed.
        (
            format!("calibrate --tile 64 --output {missing}"),
            "--output",
        ),
    ] {
        fails(&m, &line, 1, &[option, "does not exist"]);
    }
    assert!(
        !m.join("perfmodels-faer.json").exists(),
        "nothing was calibrated"
    );
    let sweep = format!("sweep --platform sirocco --n 9600 --tile 960 --out {file}");
    fails(&m, &sweep, 1, &["--out", "is a file"]);
    // Two outputs on one file, or on the model file.
    let same = s.str("same.out");
    fails(
        &m,
        &format!("cholesky --n 200 --trace {same} --gantt {same}"),
        1,
        &["same file"],
    );
    std::fs::create_dir_all(&m).unwrap();
    let models_file = m.join("perfmodels-faer.json").display().to_string();
    let line = format!("cholesky --n 200 --trace {models_file}");
    fails(&m, &line, 1, &["performance-model file"]);
    // A model store that cannot be written: the run's report and status are kept.
    let unwritable = s.path("a-file").join("models");
    let (rc, out, err) = hetla_in(&unwritable, "cholesky --n 300 --json");
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("warning") && err.contains("not saved"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["residual_ok"], true);
    // gemm --trace and --gantt are written on real runs too.
    let (trace, gantt) = (s.str("g.json"), s.str("g.svg"));
    let line = format!("gemm --m 96 --n 96 --k 96 --tile 32 --trace {trace} --gantt {gantt}");
    let (rc, _, err) = hetla_in(&m, &line);
    assert_eq!(rc, 0, "{err}");
    let events: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(events["traceEvents"].as_array().unwrap().len() >= 27);
    assert!(std::fs::read_to_string(&gantt).unwrap().contains("<svg"));
    // No temporary or probe file is left beside the outputs.
    let left: Vec<_> = std::fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn nonsense_options_are_refused_with_what_would_be_right() {
    let s = Scratch::new("nonsense");
    let m = s.path("models");
    let small = "--m 8 --n 8 --k 8";
    for (line, code, needles) in [
        (
            "cholesky --n 100 --gpus emulated:1 --gpu-memory 0.5",
            2,
            &["less than one byte"][..],
        ),
        (
            &format!("gemm {small} --strategy peri-sum:rounded:static:steal"),
            2,
            &["contradicts"],
        ),
        (
            &format!("gemm {small} --strategy peri-sum:precise:precise"),
            2,
            &["repeats"],
        ),
        (
            "simulate --platform sirocco --clusters none --gpus 0 --n 9600 --tile 960",
            1,
            &["leaves nothing to run", "give a cluster spec"],
        ),
        (
            "bound --platform sirocco --clusters none --gpus 0 --n 9600 --tile 960",
            1,
            &["leaves nothing to run", "give a cluster spec"],
        ),
        // n = 0 means the same everywhere: not a matrix order.
        ("cholesky --n 0", 2, &["at least 1"]),
        (
            "simulate --platform sirocco --n 0 --tile 960",
            2,
            &["at least 1"],
        ),
        (
            "bound --platform sirocco --n 0 --tile 960",
            2,
            &["at least 1"],
        ),
        (
            "sweep --platform sirocco --n 0 --tile 960 --out x",
            2,
            &["at least 1"],
        ),
        // --json errors are one object on stdout; usage errors keep status 2.
        ("cholesky --n x --json", 2, &["--n"]),
        ("cholesky --n 20 --clusters 99x99 --json", 1, &["99x99"]),
    ] {
        fails(&m, line, code, needles);
    }
    // Platform files: duplicate kernels, speedups beyond the cores, and a GPU too small,
    // which must not tell a `simulate` user to raise `--gpu-memory` alone.
    let sirocco = hetla_lab::PlatformModel::preset("sirocco")
        .unwrap()
        .to_toml();
    let kernel = &sirocco[sirocco.find("[[cpu.kernels]]").unwrap()..];
    let first = &kernel[..kernel[1..].find("[[").map_or(kernel.len(), |i| i + 1)];
    let twice = format!("{first}[[cpu.kernels]]");
    let small_gpu = sirocco.replacen("memory_gb = 12.0", "memory_gb = 0.000001", 1);
    assert_ne!(
        small_gpu, sirocco,
        "the preset's GPU memory moved; update this test"
    );
    for (name, text, args, needle) in [
        (
            "dup.toml",
            sirocco.replacen("[[cpu.kernels]]", &twice, 1),
            "",
            "given twice",
        ),
        (
            "speedup.toml",
            sirocco.replacen("speedup = 7.77", "speedup = 17.7", 1),
            "",
            "speedup in (0, cores]",
        ),
        (
            "small.toml",
            small_gpu,
            "--clusters none --gpus 1",
            "memory_gb",
        ),
    ] {
        std::fs::write(s.path(name), text).unwrap();
        let line = format!(
            "simulate --platform {} {args} --n 1920 --tile 960",
            s.str(name)
        );
        fails(&m, &line, 1, &[needle]);
    }
}

#[test]
fn a_closed_pipe_ends_the_process_quietly() {
    let s = Scratch::new("pipe");
    for args in [
        &["info"][..],
        &["cholesky", "--n", "300"],
        &[
            "bound",
            "--platform",
            "sirocco",
            "--n",
            "9600",
            "--tile",
            "960",
            "--json",
        ],
    ] {
        let mut child = command(args, &s.path("models"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before anything is printed
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.success() || out.status.signal() == Some(13),
            "{args:?}: {:?} {err}",
            out.status
        );
    }
}

#[test]
fn corrupt_or_impossible_models_never_block_a_run() {
    let s = Scratch::new("corrupt");
    let m = s.path("models");
    std::fs::create_dir_all(&m).unwrap();
    let file = m.join("perfmodels-faer.json");
    let run = || {
        let (rc, out, err) = hetla_in(&m, "cholesky --n 400 --tile 100 --clusters 1x1 --json");
        assert_eq!(rc, 0, "{err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        (r, err)
    };
    let (_, _) = run();
    let good = std::fs::read_to_string(&file).unwrap();
    // Truncated: moved aside (kept, named), the run goes on and saves fresh models.
    std::fs::write(&file, &good[..good.len() / 2]).unwrap();
    let (r, err) = run();
    assert_eq!(r["residual_ok"], true);
    assert!(err.contains("corrupt") && err.contains("moved to"), "{err}");
    let aside: Vec<_> = std::fs::read_dir(&m)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(hetla_runtime::PerfModels::load(&file).is_ok());
    // Garbage values: entries that cannot be right are left out, the others kept.
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = text.replacen("\"mean_s\": ", "\"mean_s\": -", 1);
    std::fs::write(&file, bad).unwrap();
    let (_, err) = run();
    assert!(
        err.contains("left out") && err.contains("not a positive duration"),
        "{err}"
    );
    let loaded = hetla_runtime::PerfModels::load(&file).unwrap();
    assert!(!loaded.is_empty());
    let predicted = run().0["predicted_bounds"]["mixed_gflops"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(predicted < 1000.0, "a 1-core bound of {predicted} Gflop/s");
}

/// Total samples in a model file.
fn samples_in(file: &Path) -> u64 {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["samples"].as_u64().unwrap())
        .sum()
}

#[test]
fn concurrent_runs_keep_every_sample() {
    let s = Scratch::new("concurrent");
    let m = s.path("models");
    let line = "cholesky --n 600 --tile 100 --clusters 1x1 --json";
    let args: Vec<&str> = line.split_whitespace().collect();
    let mut made = 0;
    for _round in 0..3 {
        let children: Vec<_> = (0..3)
            .map(|_| {
                command(&args, &m)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            made += r["tasks"].as_u64().unwrap();
        }
    }
    let kept = samples_in(&m.join("perfmodels-faer.json"));
    assert_eq!(kept, made, "samples kept / made");
}
