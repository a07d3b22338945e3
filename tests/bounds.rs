//! Bounds of plans from a platform's performance models and from a run's own task durations (the
//! bounds of modelled machines are `hetla-lab`'s).

use std::sync::Arc;

use hetla::{Backend, Cholesky, ClusterSpec, ModelStore, Plan, Platform, Precision, matgen};

fn grid(count: usize, size: usize) -> ClusterSpec {
    ClusterSpec::Grid { count, size }
}

#[test]
fn a_run_reports_bounds_from_its_own_models() {
    let dir = std::env::temp_dir().join(format!("hetla-bounds-test-{}", std::process::id()));
    let platform = Arc::new(
        Platform::with_store(&grid(2, 1), Backend::Faer, ModelStore::Dir(dir.clone())).unwrap(),
    );
    let (n, tile) = (600, 100);
    let a = matgen::random_spd(n, 3);
    Cholesky::new()
        .platform(platform.clone())
        .tile(tile)
        .factor(a.as_ref())
        .unwrap();
    let b = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D)
        .unwrap()
        .bounds_from_models(
            &platform.models(),
            platform.workers(),
            platform.compute_streams(),
        )
        .unwrap();
    assert_eq!(b.tasks, 56);
    assert_eq!(b.classes.len(), 1);
    assert_eq!(b.classes[0].count, 2);
    assert!(b.cp_ms > 0.0 && b.mixed_ms >= b.area_ms.max(b.cp_ms) * (1.0 - 1e-9));
    std::fs::remove_dir_all(dir).ok();
}

/// The bounds from a run's own task durations are lower bounds of that run: its makespan is never
/// below the mixed bound (efficiency <= 1), on one class and on two.
#[test]
fn run_bounds_never_exceed_the_run() {
    let (n, tile) = (700, 100);
    let a = matgen::random_spd(n, 5);
    for spec in [grid(2, 1), grid(1, 2), grid(1, 1)] {
        let platform =
            Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::None).unwrap());
        let mut m = a.clone();
        let trace = Cholesky::new()
            .platform(platform)
            .tile(tile)
            .factor_in_place_traced(m.as_mut())
            .unwrap();
        let b = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D)
            .unwrap()
            .run_bounds(&trace)
            .unwrap();
        assert_eq!(b.tasks, trace.tasks.len());
        assert!(b.mixed_ms > 0.0);
        assert!(
            b.mixed_ms * 1e-3 <= trace.makespan * (1.0 + 1e-9),
            "{spec}: mixed bound {} ms above the run's makespan {} ms",
            b.mixed_ms,
            trace.makespan * 1e3
        );
    }
}
