//! The plan a driver builds: its tile chosen from the platform's models (timing first the
//! candidates they lack), remembered per platform and order, and not inherited by another platform.

use std::sync::Arc;

use hetla::{Algorithm, Backend, Cholesky, ClusterSpec, ModelStore, Platform, Precision, matgen};

fn platform() -> Arc<Platform> {
    let spec = ClusterSpec::Grid { count: 1, size: 1 };
    Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::None).unwrap())
}

#[test]
fn the_tile_is_chosen_from_the_models_once_per_platform_and_order() {
    let n = 1100;
    let first = platform();
    let builder = Cholesky::new().platform(first.clone());
    let plan = builder.plan(n, Precision::D).unwrap();
    assert_eq!(plan.algorithm(), Algorithm::Cholesky { n });
    let choice = plan
        .tile_choice()
        .expect("the models chose the tile")
        .clone();
    // 2 to 32 tiles per side of 1100: 256, 384 and 512; none was in the empty models.
    let candidates: Vec<usize> = choice.predictions.iter().map(|p| p.0).collect();
    assert_eq!(candidates, [256, 384, 512]);
    assert_eq!(choice.calibrated, [256, 384, 512]);
    assert!(candidates.contains(&choice.tile));
    assert_eq!(plan.tile(), choice.tile);
    assert!(
        choice
            .predictions
            .iter()
            .all(|p| p.1 > 0.0 && p.1.is_finite())
    );
    // The predicted makespan of the chosen tile is the smallest.
    let best = choice
        .predictions
        .iter()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    assert!(
        choice
            .predictions
            .iter()
            .any(|p| p.0 == choice.tile && p.1 == best)
    );

    // Asked again on the same platform: the same answer, nothing timed.
    let again = builder.plan(n, Precision::D).unwrap();
    assert_eq!(again.tile_choice(), Some(&choice));
    assert_eq!(builder.tile_size_for(n), choice.tile);

    // The plan factors: the factor's residual by the plan's own check.
    let a = matgen::random_spd(n, 11);
    let mut l = a.clone();
    builder.factor_planned(&again, l.as_mut()).unwrap();
    let residual = again
        .residual(a.as_ref(), l.as_ref(), faer::Par::Seq)
        .unwrap();
    assert!(
        residual < hetla::check::RESIDUAL_THRESHOLD,
        "residual {residual}"
    );

    // Another platform has no models yet: it times its own candidates.
    let second = platform();
    let other = Cholesky::new()
        .platform(second)
        .plan(n, Precision::D)
        .unwrap();
    assert_eq!(other.tile_choice().unwrap().calibrated, [256, 384, 512]);

    // A given tile is not a choice; small matrices are one tile; other precisions take the
    // default.
    let given = Cholesky::new().platform(first.clone()).tile(300);
    assert_eq!(given.plan(n, Precision::D).unwrap().tile(), 300);
    assert!(given.plan(n, Precision::D).unwrap().tile_choice().is_none());
    let small = Cholesky::new()
        .platform(first.clone())
        .plan(400, Precision::D)
        .unwrap();
    assert_eq!(small.tile(), 400);
    let single = Cholesky::new()
        .platform(first)
        .plan(n, Precision::S)
        .unwrap();
    assert_eq!(
        single.tile(),
        hetla::default_tile_size(n, Backend::Faer, Precision::S)
    );
}
