//! `--precision` on every command that takes it: the report says which precision ran, complex rates
//! count 4 real flops per complex one, and what cannot be done in a precision is an error that says
//! so.

mod common;
use common::hetla;

/// The report's rate counts the precision's flops: `real` in a real precision, 4 times that in a
/// complex one.
fn assert_counts_flops(v: &serde_json::Value, precision: &str, real: f64) {
    let flops = v["gflops"].as_f64().unwrap() * v["seconds"].as_f64().unwrap() * 1e9;
    let expected = if precision == "c" || precision == "z" {
        4.0 * real
    } else {
        real
    };
    assert!(
        (flops / expected - 1.0).abs() < 1e-9,
        "{precision}: {flops} flops"
    );
}

fn models_dir(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("hetla-cli-{name}-{}", std::process::id()));
    dir.to_str().unwrap().to_owned()
}

#[test]
fn cholesky_runs_in_every_precision_with_its_peers() {
    let dir = models_dir("precisions");
    for p in ["s", "d", "c", "z"] {
        let v = common::json(&format!(
            "cholesky --n 300 --tile 64 --clusters 1x1 --precision {p} --compare cpu \
             --perfmodel-dir {dir}"
        ));
        assert_eq!(v["precision"], p);
        assert_eq!(v["residual_ok"], true, "{p}: {}", v["residual"]);
        assert_eq!(v["bounds"]["tasks"], 35, "{p}");
        let names: Vec<&str> = common::each(&v["peers"], "name");
        assert!(names.contains(&"faer-llt"), "{names:?}");
        assert!(
            names.contains(&format!("faer-{p}gemm").as_str()),
            "{names:?}"
        );
        assert_counts_flops(&v, p, 300.0_f64.powi(3) / 3.0);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cholesky_inverse_is_timed_checked_and_compared_in_every_precision() {
    let dir = models_dir("inverse");
    for p in ["s", "d", "c", "z"] {
        let v = common::json(&format!(
            "cholesky --n 260 --tile 64 --precision {p} --inverse --compare cpu --perfmodel-dir \
             {dir}"
        ));
        let inverse = &v["inverse"];
        assert_eq!(inverse["residual_ok"], true, "{p}: {inverse}");
        let names: Vec<&str> = common::each(&inverse["peers"], "name");
        assert!(names.contains(&"faer-llt-inverse"), "{names:?}");
        assert!(inverse["ratio_to_best_peer"].as_f64().unwrap() > 0.0);
        assert_counts_flops(inverse, p, 260.0_f64.powi(3));
    }
    for refused in [
        &["cholesky", "--inverse", "--precision", "ds"][..],
        &["cholesky", "--inverse", "--grid", "1x1"][..],
    ] {
        let (ok, _, stderr) = hetla(refused);
        assert!(!ok && stderr.contains("inverse"), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cholesky_ds_refines_an_f32_factor_to_f64_accuracy() {
    let v = common::json("cholesky --n 600 --clusters 1x1 --precision ds --cond 1e4");
    assert_eq!(v["precision"], "ds");
    assert_eq!(v["refinement"]["path"], "mixed");
    assert_eq!(v["refinement"]["factored_in"], "s");
    let (mixed, double) = (
        v["backward_error"].as_f64().unwrap(),
        v["double_backward_error"].as_f64().unwrap(),
    );
    assert!(
        mixed < 1e-15 && mixed <= 4.0 * double.max(1e-17),
        "{mixed} {double}"
    );
    // Beyond what f32 can refine: the report says it fell back, and why.
    let v = common::json("cholesky --n 300 --clusters 1x1 --precision ds --cond 1e12");
    assert_eq!(v["refinement"]["path"], "fallback");
    assert_eq!(v["refinement"]["factored_in"], "d");
    assert!(v["refinement"]["reason"].as_str().unwrap().len() > 10);
    let (ok, _, stderr) = common::run("cholesky --precision ds --cond 0.5");
    assert!(!ok && stderr.contains("condition number"), "{stderr}");
    // What the mixed solve cannot honour is refused, naming it, before any file is written.
    let trace = std::env::temp_dir().join(format!("hetla-ds-trace-{}.json", std::process::id()));
    let line = format!(
        "cholesky --n 300 --precision ds --trace {} --compare",
        trace.display()
    );
    let (ok, _, stderr) = common::run(&line);
    assert!(
        !ok && stderr.contains("drop --trace, --compare"),
        "{stderr}"
    );
    assert!(!trace.exists());
}

#[test]
fn gemm_runs_and_simulates_in_every_precision() {
    for p in ["s", "c", "z"] {
        let v = common::json(&format!(
            "gemm --m 130 --n 70 --k 90 --tile 32 --transb --beta 0.5 --clusters 1x1 --precision \
             {p}"
        ));
        assert_eq!(v["precision"], p);
        let tolerance = if p == "z" { 1e-13 } else { 1e-5 };
        assert!(
            v["relative_error"].as_f64().unwrap() < tolerance,
            "{p}: {v}"
        );
    }
    let sim = |p: &str| {
        common::json(&format!(
            "gemm --platform sirocco --m 7680 --n 7680 --k 7680 --precision {p}"
        ))
    };
    // sirocco's presets assume single precision 2x (cores) and 3x (K40m) faster.
    let (s, d) = (sim("s"), sim("d"));
    assert!(s["seconds"].as_f64().unwrap() < 0.6 * d["seconds"].as_f64().unwrap());
}

#[test]
fn simulate_and_bound_take_the_precision_of_the_platform() {
    let args = |command: &str, p: &str| {
        common::json(&format!(
            "{command} --platform sirocco --clusters 2x10 --gpus 4 --n 9600 --tile 960 \
             --precision {p}"
        ))
    };
    let (s, d, z) = (
        args("simulate", "s"),
        args("simulate", "d"),
        args("simulate", "z"),
    );
    let ms = |v: &serde_json::Value| v["makespan_ms"].as_f64().unwrap();
    assert_eq!(s["precision"], "s");
    assert!(ms(&s) < ms(&d), "{} {}", ms(&s), ms(&d));
    // z runs at d's real-flop rates with 4 times the flops, and 2x the bytes.
    assert!(ms(&z) > 3.0 * ms(&d), "{} {}", ms(&z), ms(&d));
    let bound = args("bound", "c");
    assert_eq!(bound["precision"], "c");
    // A calibrated file with f64 rates only names what it has.
    let dir = std::env::temp_dir().join(format!("hetla-cli-prec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("d-only.toml");
    let text = "name = \"t\"\n[cpu]\npackages = 1\ncores_per_package = 2\n\
        [[cpu.kernels]]\nop = \"potrf\"\ntile = 100\ncore_gflops = 1.0\n\
        [[cpu.kernels]]\nop = \"trsm\"\ntile = 100\ncore_gflops = 1.0\n\
        [[cpu.kernels]]\nop = \"syrk\"\ntile = 100\ncore_gflops = 1.0\n\
        [[cpu.kernels]]\nop = \"gemm\"\ntile = 100\ncore_gflops = 1.0\n";
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap();
    let common = [
        "--platform",
        f,
        "--clusters",
        "1x2",
        "--n",
        "400",
        "--tile",
        "100",
    ];
    let ok: Vec<&str> = ["simulate"].into_iter().chain(common).collect();
    assert!(hetla(&ok).0);
    for command in ["simulate", "bound"] {
        let args: Vec<&str> = [command]
            .into_iter()
            .chain(common)
            .chain(["--precision", "s"])
            .collect();
        let (ok, _, stderr) = hetla(&args);
        assert!(!ok, "{command}");
        assert!(
            stderr.contains("no kernel rates in precision s") && stderr.contains("it has d"),
            "{command}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn gpu_workers_compute_in_every_precision() {
    // Emulated GPUs only (no CPU cluster): every tile moves to a device in its precision
    // and every kernel runs there.
    let v =
        common::json("cholesky --n 300 --tile 64 --clusters none --gpus emulated:2 --precision s");
    assert_eq!(v["precision"], "s");
    assert_eq!(v["residual_ok"], true, "{}", v["residual"]);
    let v = common::json(
        "gemm --m 130 --n 70 --k 90 --tile 32 --transb --clusters none --gpus emulated:1 \
         --precision z",
    );
    assert_eq!(v["precision"], "z");
    assert!(v["relative_error"].as_f64().unwrap() < 1e-13, "{v}");
}

#[test]
fn a_precision_that_does_not_exist_is_refused_before_any_work() {
    let (ok, _, stderr) = common::run("cholesky --precision q");
    assert!(!ok && stderr.contains("--precision"), "{stderr}");
}

#[test]
fn distributed_simulations_send_tiles_in_their_precision() {
    let run = |p: &str| {
        common::json(&format!(
            "simulate --platform sirocco --clusters 2x10 --n 3840 --tile 960 --nodes 2 \
             --precision {p}"
        ))
    };
    let sent = |v: &serde_json::Value| v["bytes_sent"].as_u64().unwrap();
    let (s, d, z) = (run("s"), run("d"), run("z"));
    // The key is there when the precision is not d's.
    assert_eq!(
        (s["precision"].as_str(), d.get("precision")),
        (Some("s"), None)
    );
    assert_eq!(z["precision"], "z");
    // Tiles of 4, 8 and 16 bytes an entry, the same messages.
    assert_eq!((2 * sent(&s), 2 * sent(&d)), (sent(&d), sent(&z)));
    for v in [&s, &d, &z] {
        for node in v["ranks"].as_array().unwrap() {
            assert_eq!(node["bytes_sent"], node["bytes_expected"], "{v}");
        }
        assert!(v["efficiency"].as_f64().unwrap() <= 1.0 + 1e-9);
    }
}

#[test]
fn ldlt_factors_in_every_precision_with_its_inertia_and_peers() {
    for p in ["s", "d", "c", "z"] {
        let v = common::json(&format!(
            "ldlt --n 150 --tile 32 --kind kkt --precision {p} --compare"
        ));
        assert_eq!(v["precision"], p);
        assert_eq!(v["residual_ok"], true, "{p}: {v}");
        // A KKT matrix of order 150: 113 positive eigenvalues, 37 negative ones.
        assert_eq!(v["inertia"]["positive"], 113, "{v}");
        assert_eq!(v["inertia"]["negative"], 37, "{v}");
        let names = common::each(&v["peers"], "name");
        assert!(names.contains(&"faer-lblt"), "{names:?}");
        assert_counts_flops(&v, p, 150.0_f64.powi(3) / 3.0);
    }
    let (ok, _, err) = common::run("ldlt --n 100 --precision ds");
    assert!(!ok && err.contains("mixed"), "{err}");
}
