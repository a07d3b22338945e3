//! No input panics a parser: cluster specs, CPU lists, GPU selections, GEMM strategies and
//! performance-model JSON, fed arbitrary text and near-miss mutations of valid inputs (the platform
//! files are `hetla-lab`'s). Each either parses or returns an error (whose message is not empty).

use hetla::ClusterSpec;
use hetla::Strategy as GemmStrategy;
use hetla_runtime::{GpuSelection, PerfModels};
use proptest::prelude::*;

/// Text near the parsers' grammar: digits, separators, keywords, and some noise.
fn near_grammar() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        "[0-9]{1,20}",
        Just("x".to_owned()),
        Just(",".to_owned()),
        Just("-".to_owned()),
        Just("/".to_owned()),
        Just(":".to_owned()),
        Just(" ".to_owned()),
        Just("auto".to_owned()),
        Just("none".to_owned()),
        Just("all".to_owned()),
        Just("emulated".to_owned()),
        Just("package".to_owned()),
        Just("core".to_owned()),
        Just("peri-sum".to_owned()),
        Just("rounded".to_owned()),
        Just("precise".to_owned()),
        Just("steal".to_owned()),
        Just("static".to_owned()),
        Just("18446744073709551615".to_owned()),
        "\\PC{0,3}",
    ];
    proptest::collection::vec(token, 0..8).prop_map(|t| t.concat())
}

fn no_panic<T, E: std::fmt::Display>(r: Result<T, E>) {
    if let Err(e) = r {
        assert!(!e.to_string().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn cluster_specs_cpu_lists_gpus_and_strategies_never_panic(s in near_grammar()) {
        no_panic(s.parse::<ClusterSpec>());
        no_panic(hetla_clusters::parse_cpu_list(&s));
        no_panic(s.parse::<GpuSelection>());
        no_panic(s.parse::<GemmStrategy>());
        // A spec that parses resolves on this machine or says why not.
        if let Ok(spec) = s.parse::<ClusterSpec>() {
            no_panic(spec.resolve(&hetla::Topology::synthetic(2, 1, 4, 1)));
        }
    }

    #[test]
    fn model_files_never_panic_and_keep_only_sound_values(
        samples in prop_oneof![Just("3".to_owned()), "-?[0-9]{1,22}", Just("1.5".to_owned())],
        mean in prop_oneof![Just("0.001".to_owned()), "-?[0-9]{1,3}(\\.[0-9]{1,3})?(e-?[0-9]{1,3})?", Just("null".to_owned())],
        m2 in prop_oneof![Just("0.0".to_owned()), "-?[0-9]{1,3}(\\.[0-9]{1,3})?"],
        shapes in prop_oneof![Just("[[64,64],[64,64],[64,64],[64,64]]".to_owned()), Just("[]".to_owned()), Just("[[0,64],[64,64],[64,64],[64,64]]".to_owned())],
        cut in 0usize..400,
    ) {
        let text = format!(
            r#"{{"format": 1, "backend": "faer", "models": [{{"op": "gemm", "shapes": {shapes}, "class": {{"kind": "cpu_cluster", "cores": 1}}, "samples": {samples}, "mean_s": {mean}, "m2": {m2}, "deviation_s": 0.0}}]}}"#
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("perfmodels-faer.json");
        // Whole, or truncated anywhere.
        let text = if cut < text.len() && cut % 2 == 1 { &text[..cut] } else { &text[..] };
        std::fs::write(&file, text).unwrap();
        let models = PerfModels::load(&file).unwrap();
        let key = hetla_runtime::KernelKey::square(hetla::Op::GemmNt, 64);
        let class = hetla_runtime::ResourceClass::CpuCluster { cores: 1 };
        if let Some(s) = models.get(&key, &class) {
            prop_assert!(s.samples >= 1 && s.mean > 0.0 && s.mean.is_finite() && s.m2 >= 0.0);
        }
    }
}
