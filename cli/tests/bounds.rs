//! The `hetla bound` command and the bounds `hetla cholesky` reports.

mod common;

use common::hetla;
use hetla_lab::PlatformModel;

#[test]
fn bound_command_prints_the_documented_json() {
    // Sirocco with 2 x 10-core clusters and 4 GPUs, n = 9600 in tiles of 960.
    let bound_json = |platform: &str| -> serde_json::Value {
        let line = "--clusters 2x10 --gpus 4 --n 9600 --tile 960 --json";
        let args: Vec<&str> = ["bound", "--platform", platform]
            .into_iter()
            .chain(line.split(' '))
            .collect();
        let (ok, stdout, stderr) = hetla(&args);
        assert!(ok, "{stderr}");
        serde_json::from_str(&stdout).unwrap()
    };
    let v = bound_json("sirocco");
    for key in [
        "tasks",
        "cp_ms",
        "area_ms",
        "mixed_ms",
        "cp_gflops",
        "area_gflops",
        "mixed_gflops",
        "iterations",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["tasks"], 220);
    let mixed = v["mixed_ms"].as_f64().unwrap();
    assert!(mixed >= v["area_ms"].as_f64().unwrap() * (1.0 - 1e-9));

    // A platform file works like the preset it was written from.
    let file = std::env::temp_dir().join(format!("hetla-sirocco-{}.toml", std::process::id()));
    std::fs::write(&file, PlatformModel::preset("sirocco").unwrap().to_toml()).unwrap();
    let w = bound_json(file.to_str().unwrap());
    std::fs::remove_file(&file).ok();
    assert_eq!(w["mixed_ms"], v["mixed_ms"]);
}

#[test]
fn bound_command_errors_name_the_argument() {
    // Each bad command line, and words its error message must contain.
    let cases: [(&str, &[&str]); 3] = [
        (
            "--platform nowhere --n 960 --tile 960",
            &["nowhere", "sirocco"],
        ),
        ("--platform sirocco --n 960 --tile 512", &["tile", "1920"]),
        (
            "--platform sirocco --clusters 30x1 --n 960 --tile 960",
            &["30"],
        ),
    ];
    for (line, words) in cases {
        let args: Vec<&str> = std::iter::once("bound").chain(line.split(' ')).collect();
        let (ok, _, stderr) = hetla(&args);
        assert!(!ok, "{line} succeeded");
        for word in words {
            assert!(stderr.contains(word), "{line}: {stderr}");
        }
    }
}

#[test]
fn cholesky_command_reports_bounds_and_efficiency() {
    let dir = std::env::temp_dir().join(format!("hetla-cli-models-{}", std::process::id()));
    let v = common::json(&format!(
        "cholesky --n 400 --tile 100 --clusters 1x1 --perfmodel-dir {}",
        dir.display()
    ));
    std::fs::remove_dir_all(&dir).ok();
    let bounds = &v["bounds"];
    assert_eq!(bounds["tasks"], 20);
    assert!(bounds["mixed_gflops"].as_f64().unwrap() > 0.0);
    assert!(v["efficiency"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_bound_on_gpus_of_several_streams_says_so_and_a_tunes_unpredicted_default_has_no_figure() {
    // One stream: no key (as before); four: the key, and an area bound in which the panel kernels
    // take only their share of the GPU.
    let line = "bound --platform h200 --clusters none --gpus 1 --n 16384 --tile 4096";
    let one = common::json(line);
    assert!(one.get("compute_streams").is_none(), "{one}");
    let four = common::json(&format!("{line} --streams 4"));
    assert_eq!(four["compute_streams"], 4);
    assert!(four["area_ms"].as_f64().unwrap() < one["area_ms"].as_f64().unwrap());
    assert_eq!(four["cp_ms"], one["cp_ms"]);
    let (ok, _, err) = common::run(&format!("{line} --streams 17"));
    assert!(!ok && err.contains("from 1 to 16"), "{err}");
    // `hetla tune`'s default candidate: a prediction, or none at all (never 0 ms).
    let dir = std::env::temp_dir().join(format!("hetla-tune-default-{}", std::process::id()));
    let r = common::json(&format!(
        "tune --factorization cholesky --n 512 --perfmodel-dir {}",
        dir.display()
    ));
    let default = &r["default"];
    assert!(default.is_object(), "{r}");
    match default.get("predicted_ms") {
        Some(ms) => assert!(ms.as_f64().unwrap() > 0.0, "{default}"),
        None => assert!(default.get("gflops").is_none(), "{default}"),
    }
    std::fs::remove_dir_all(dir).ok();
}
