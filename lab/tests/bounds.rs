//! Bounds of the Cholesky plan from the `sirocco` model (the `hetla bound` command is tested with
//! the command line, in `cli/tests`; the bounds of real runs with the library).

mod common;

use common::{cholesky_bounds, grid};
use hetla_lab::{Error, PlatformModel};

#[test]
fn sirocco_bounds_are_ordered_and_favour_clusters_on_small_matrices() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    for tiles in [5, 10] {
        let n = tiles * 960;
        let clusters = cholesky_bounds(&sirocco, &grid(2, 10), 1, (n, 960)).unwrap();
        let cores = cholesky_bounds(&sirocco, &grid(20, 1), 1, (n, 960)).unwrap();
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
    let clusters = cholesky_bounds(&sirocco, &grid(2, 10), 1, (n, 960)).unwrap();
    let cores = cholesky_bounds(&sirocco, &grid(20, 1), 1, (n, 960)).unwrap();
    assert!(cores.mixed_gflops > clusters.mixed_gflops);
}

#[test]
fn sirocco_rejects_what_it_cannot_model() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let err = cholesky_bounds(&sirocco, &grid(2, 10), 1, (9600, 1000)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidOption { option: "tile", reason } if reason.contains("960")),
        "{err}"
    );
    let err = cholesky_bounds(&sirocco, &grid(2, 10), 5, (9600, 960)).unwrap_err();
    assert!(
        matches!(err, Error::InvalidOption { option: "gpus", .. }),
        "{err}"
    );
    // 4 GPUs leave 20 cores: 3 x 8 does not fit.
    let err = cholesky_bounds(&sirocco, &grid(3, 8), 4, (9600, 960)).unwrap_err();
    assert!(
        matches!(err, Error::Runtime(hetla_runtime::Error::Cluster(_))),
        "{err}"
    );
}
