//! Bounds of the Cholesky graph from the `sirocco` model and from a run's own performance
//! models (the `hetla bound` command is tested with the command line, in `cli/tests`).

use std::sync::Arc;

use hetla::graph_bounds::{measured_cholesky_bounds, model_cholesky_bounds};
use hetla::model::PlatformModel;
use hetla::runtime::{ModelStore, Platform};
use hetla::{Backend, Cholesky, ClusterSpec, Error, matgen};

fn grid(count: usize, size: usize) -> ClusterSpec {
    ClusterSpec::Grid { count, size }
}

#[test]
fn sirocco_bounds_are_ordered_and_favour_clusters_on_small_matrices() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    for tiles in [5, 10] {
        let n = tiles * 960;
        let clusters =
            model_cholesky_bounds(&sirocco, &grid(2, 10), 1, n, 960, hetla::Precision::D).unwrap();
        let cores =
            model_cholesky_bounds(&sirocco, &grid(20, 1), 1, n, 960, hetla::Precision::D).unwrap();
        for b in [&clusters, &cores] {
            assert_eq!(b.tasks, tiles * (tiles + 1) * (tiles + 2) / 6);
            assert!(b.mixed_ms >= b.area_ms.max(b.cp_ms) * (1.0 - 1e-9));
            assert!(b.mixed_gflops <= b.area_gflops.min(b.cp_gflops) * (1.0 + 1e-9));
        }
        // Cojean et al. (2016), Fig. 9: with one GPU, small matrices are bounded higher with 2 x 10
        // clusters than with 20 single cores (a 10-core cluster runs POTRF three times
        // faster than the GPU and shortens the critical path).
        if tiles == 5 {
            assert!(
                clusters.mixed_gflops > 1.5 * cores.mixed_gflops,
                "2x10: {} Gflop/s, 20x1: {} Gflop/s",
                clusters.mixed_gflops,
                cores.mixed_gflops
            );
        }
    }
    // Large matrices: single cores are more efficient per core (Table 2: 7.77x on 10
    // cores), and the area bound decides.
    let n = 40 * 960;
    let clusters =
        model_cholesky_bounds(&sirocco, &grid(2, 10), 1, n, 960, hetla::Precision::D).unwrap();
    let cores =
        model_cholesky_bounds(&sirocco, &grid(20, 1), 1, n, 960, hetla::Precision::D).unwrap();
    assert!(cores.mixed_gflops > clusters.mixed_gflops);
}

#[test]
fn sirocco_rejects_what_it_cannot_model() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let err = model_cholesky_bounds(&sirocco, &grid(2, 10), 1, 9600, 1000, hetla::Precision::D)
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidOption { option: "tile", reason } if reason.contains("960")),
        "{err}"
    );
    let err = model_cholesky_bounds(&sirocco, &grid(2, 10), 5, 9600, 960, hetla::Precision::D)
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOption { option: "gpus", .. }),
        "{err}"
    );
    // 4 GPUs leave 20 cores: 3 x 8 does not fit.
    let err = model_cholesky_bounds(&sirocco, &grid(3, 8), 4, 9600, 960, hetla::Precision::D)
        .unwrap_err();
    assert!(matches!(err, Error::Cluster(_)), "{err}");
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
    let b = measured_cholesky_bounds(
        &platform.models(),
        platform.workers(),
        n,
        tile,
        hetla::Precision::D,
    )
    .unwrap();
    assert_eq!(b.tasks, 56);
    assert_eq!(b.classes.len(), 1);
    assert_eq!(b.classes[0].count, 2);
    assert!(b.cp_ms > 0.0 && b.mixed_ms >= b.area_ms.max(b.cp_ms) * (1.0 - 1e-9));
    std::fs::remove_dir_all(dir).ok();
}

/// The bounds from a run's own task durations are lower bounds of that run: its makespan
/// is never below the mixed bound (efficiency <= 1), on one class and on two.
#[test]
fn run_bounds_never_exceed_the_run() {
    use hetla::graph_bounds::run_cholesky_bounds;
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
        let b = run_cholesky_bounds(&trace, n, tile, hetla::Precision::D).unwrap();
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
