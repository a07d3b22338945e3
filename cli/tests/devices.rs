//! GPU selection, device reports and device calibration from the command line (emulated devices on
//! a machine without GPUs).

mod common;

fn cores() -> usize {
    hetla::Topology::detect().unwrap().cores().len()
}

#[test]
fn the_command_line_selects_gpus_and_reports_bytes_per_gpu() {
    let (ok, out, err) = common::hetla(&["info", "--json"]);
    assert!(ok, "{err}");
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(info["gpus"].is_array());
    if cores() >= 2 {
        let (ok, out, err) = common::hetla(&[
            "cholesky",
            "--n",
            "600",
            "--tile",
            "100",
            "--clusters",
            "1x1",
            "--gpus",
            "emulated:1",
            "--gpu-memory",
            "1MiB",
            "--json",
        ]);
        assert!(ok, "{err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(r["residual_ok"].as_bool().unwrap());
        assert_eq!(r["gpus"][0]["budget_bytes"], 1 << 20);
        let links: Vec<&str> = r["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["link"].as_str().unwrap())
            .collect();
        assert!(links.contains(&"host->gpu0"), "{links:?}");
        let workers = r["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2);
        assert!(
            workers
                .iter()
                .all(|w| w["busy_fraction"].as_f64().unwrap() >= 0.0)
        );
    }
    let (ok, _, err) = common::hetla(&["cholesky", "--n", "100", "--gpus", "9"]);
    assert!(!ok && err.contains("no GPU 9"), "{err}");
    let (ok, _, err) = common::hetla(&["cholesky", "--n", "100", "--gpu-memory", "3XB"]);
    assert!(!ok && err.contains("unknown unit"), "{err}");
}

#[test]
fn calibration_measures_device_kernels_and_links() {
    let dir = std::env::temp_dir().join(format!("hetla-devcal-{}", std::process::id()));
    let (ok, _, err) = common::hetla(&[
        "calibrate",
        "--gpus",
        "emulated:1",
        "--clusters",
        "none",
        "--tile",
        "64",
        "--samples",
        "3",
        "--perfmodel-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let models = hetla_runtime::PerfModels::load(&dir.join("perfmodels-faer.json")).unwrap();
    let link = models.link("emulated").expect("the link was stored");
    assert!(link.h2d.gb_per_s > 0.0 && link.d2h.gb_per_s > 0.0);
    let gpu = hetla_runtime::ResourceClass::Gpu {
        name: "emulated".into(),
    };
    let key = hetla_runtime::KernelKey::square(hetla::Op::GemmNt, 64);
    assert_eq!(models.get(&key, &gpu).map(|s| s.samples), Some(3));
    let _ = std::fs::remove_dir_all(dir);
}
