//! The `hetla gemm` command on modelled platforms.

#[test]
fn on_a_modelled_platform_gpus_is_a_count_and_presets_run_with_their_defaults() {
    // `hetla <line>`: (success, stdout, stderr).
    let hetla = |line: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hetla"))
            .args(line.split_whitespace())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let gemm = |gpus: &str, n: usize| {
        format!("gemm --platform a100x8 --gpus {gpus} --m {n} --n {n} --k {n}")
    };
    let json = |gpus: &str| {
        let (ok, out, err) = hetla(&format!("{} --json", gemm(gpus, 8192)));
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let devices = |r: &serde_json::Value| r["bytes_moved"]["per_device"].as_array().unwrap().len();
    // "8" is eight GPUs, not GPU number 8; "all" is the same run; a100x8 has no CPU rates,
    // so its default is GPUs only, said in the report.
    let (eight, all) = (json("8"), json("all"));
    assert_eq!(devices(&eight), 8);
    assert_eq!(eight["seconds"], all["seconds"]);
    assert!(
        eight["note"]
            .as_str()
            .unwrap()
            .contains("no CPU kernel rates")
    );
    assert_eq!(eight["clusters"], "none");
    assert_eq!(devices(&json("2")), 2);
    for (gpus, needle) in [
        ("0,1", "a number of GPUs"),
        ("9", "has 8 GPU(s)"),
        ("emulated:2", "a number of GPUs"),
    ] {
        let (ok, _, err) = hetla(&gemm(gpus, 64));
        assert!(!ok && err.contains(needle), "{gpus}: {err}");
    }
}
