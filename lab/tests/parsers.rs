//! No platform file panics its parser: near-miss mutations of a valid file either parse (and the
//! model then gives bounds or a clear error) or are refused with a message.

use hetla::{ClusterSpec, Plan, Precision};
use hetla_lab::{Modelled, PlatformModel};
use proptest::prelude::*;

fn no_panic<T, E: std::fmt::Display>(r: Result<T, E>) {
    if let Err(e) = r {
        assert!(!e.to_string().is_empty());
    }
}

/// A valid platform file with one field replaced by `value`.
fn mutated_platform(field: usize, value: &str) -> String {
    let toml = PlatformModel::preset("sirocco").unwrap().to_toml();
    let lines: Vec<&str> = toml.lines().collect();
    let numbered: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(" = "))
        .collect();
    let i = numbered[field % numbered.len()];
    let key = lines[i].split(" = ").next().unwrap();
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out[i] = format!("{key} = {value}");
    out.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn platform_files_never_panic(field in 0usize..200, value in prop_oneof![
        "-?[0-9]{1,25}",
        "-?[0-9]{1,5}\\.[0-9]{0,5}(e[0-9]{1,3})?",
        Just("nan".to_owned()), Just("inf".to_owned()), Just("\"x\"".to_owned()),
        Just("[]".to_owned()), Just("{}".to_owned()), "\\PC{0,8}",
    ]) {
        let text = mutated_platform(field, &value);
        if let Ok(model) = PlatformModel::from_toml(&text) {
            // A model that is accepted can be used: its classes and a bound either work or
            // are a clear error.
            for gpus in [0, model.gpu_count()] {
                let machine = Modelled::new(&model, &ClusterSpec::Auto, gpus);
                let plan = Plan::new(hetla::Algorithm::Cholesky { n: 1920 }, 960, Precision::D).unwrap();
                no_panic(hetla_lab::bounds(&plan, &machine));
            }
        }
    }
}
