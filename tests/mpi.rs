//! Distributed matrices under `mpirun` (feature `mpi`): each test starts `mpirun -np K` on this
//! test binary, which then runs the rank's side (`rank_side`) on every rank.

#![cfg(feature = "mpi")]

use std::process::Command;

use faer::Mat;
use hetla::check::{RESIDUAL_THRESHOLD, cholesky_residual};
use hetla::distributed::{
    DistributedMatrix, DistributedRhs, ProcessGrid, Rank, probed_residual, solve_backward_error,
};
use hetla::matgen::random_hpd_block;
use hetla::{Cholesky, Error};

/// Set in the ranks' environment: which side to run.
const SIDE: &str = "HETLA_MPI_TEST_SIDE";

/// Runs `side` on `np` ranks (oversubscribed: this machine may have fewer cores); returns the job's
/// exit status and output. A directory of its own for one mpirun's session files. Open MPI makes
/// `$TMPDIR/ompi.<host>.<uid>` at start; two jobs started at once (the tests run in parallel) race
/// on that mkdir and one fails with "File exists".
fn session_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("hetla-mpi-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a session directory for mpirun");
    dir
}

fn mpirun(np: usize, side: &str) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let session = session_dir();
    let out = Command::new("mpirun")
        // A rank that fails ends the job; --timeout ends one that hangs.
        .args([
            "--oversubscribe",
            "--timeout",
            "120",
            "-np",
            &np.to_string(),
        ])
        .arg(&exe)
        .args([
            "--exact",
            "rank_side",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SIDE, side)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("TMPDIR", &session)
        .output()
        .expect("mpirun (apt: openmpi-bin) must be on the PATH for --features mpi");
    // Best effort: a rank killed by a test may leave files behind.
    let _ = std::fs::remove_dir_all(&session);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn tiles_round_trip_and_generate_where_they_live_on_1_2_and_4_ranks() {
    for (np, grid) in [(1, "1x1"), (2, "1x2"), (2, "2x1"), (4, "2x2")] {
        let (ok, out) = mpirun(np, &format!("round-trip {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
}

#[test]
fn a_grid_that_does_not_match_the_job_is_refused_on_every_rank() {
    let (ok, out) = mpirun(2, "wrong-grid");
    assert!(ok, "{out}");
    assert_eq!(
        out.matches("a 2x2 grid has 4 processes but the job has 2 ranks")
            .count(),
        2,
        "{out}"
    );
}

#[test]
fn a_tile_one_rank_gets_wrong_is_refused_by_all() {
    let (ok, out) = mpirun(2, "bad-tile");
    assert!(ok, "{out}");
    assert_eq!(out.matches("refused: ").count(), 2, "{out}");
    assert!(
        out.contains("rank 1: tile (1, 1) is 3x3, expected 4x4"),
        "{out}"
    );
    assert!(out.contains("rank 1: refused its part"), "{out}");
}

#[cfg(feature = "scalapack")]
#[test]
fn scalapack_lu_factors_and_solves_a_general_matrix_and_reports_a_zero_pivot_on_every_rank() {
    for (np, grid) in [(1, "1x1"), (2, "1x2"), (4, "2x2")] {
        let (ok, out) = mpirun(np, &format!("pdgetrf {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
    let (ok, out) = mpirun(2, "pdgetrf-singular");
    assert!(ok, "{out}");
    assert_eq!(
        out.matches("refused: the matrix is singular: the pivot of column 9")
            .count(),
        2,
        "{out}"
    );
}

#[cfg(feature = "scalapack")]
#[test]
fn scalapack_qr_factors_and_solves_least_squares_on_tall_matrices_in_every_precision() {
    for (np, grid) in [(1, "1x1"), (2, "1x2"), (2, "2x1"), (4, "2x2")] {
        let (ok, out) = mpirun(np, &format!("pgeqrf {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
    // A wide matrix is refused before any work, on every rank.
    let (ok, out) = mpirun(2, "pgeqrf-wide");
    assert!(ok, "{out}");
    assert_eq!(out.matches("refused: ").count(), 4, "{out}");
    assert!(out.contains("m >= n"), "{out}");
}

#[cfg(feature = "scalapack")]
#[test]
fn scalapack_factors_the_distributed_matrix_and_reports_a_failed_pivot_on_every_rank() {
    for (np, grid) in [(1, "1x1"), (2, "2x1"), (4, "2x2")] {
        let (ok, out) = mpirun(np, &format!("pdpotrf {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
    let (ok, out) = mpirun(2, "pdpotrf-not-spd");
    assert!(ok, "{out}");
    assert_eq!(
        out.matches("refused: the matrix is not positive definite: the pivot of column 9")
            .count(),
        2,
        "{out}"
    );
}

#[test]
fn distributed_lu_factors_every_precision_and_sends_each_panel_once_to_each_rank() {
    for (np, grid) in [
        (1, "1x1"),
        (2, "1x2"),
        (4, "1x4"),
        (2, "2x1"),
        (4, "4x1"),
        (4, "2x2"),
    ] {
        let (ok, out) = mpirun(np, &format!("lu {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
}

#[test]
fn distributed_lu_reports_a_zero_pivot_on_every_rank_and_refuses_what_it_cannot_factor() {
    let (ok, out) = mpirun(2, "lu-singular");
    assert!(ok, "{out}");
    // On 1 x 2 and on 2 x 1, by both ranks.
    assert_eq!(out.matches("singular at column 9").count(), 4, "{out}");
    let refused = "refused: the matrix is singular: the pivot of column 9";
    assert_eq!(out.matches(refused).count(), 4, "{out}");
    let (ok, out) = mpirun(2, "lu-refused");
    assert!(ok, "{out}");
    for reason in ["LU factors a square one", "LU factors a general matrix"] {
        assert_eq!(out.matches(reason).count(), 2, "{reason}: {out}");
    }
    // The rank with the NaN says where it is; the other names it.
    let nan = "rank 1: in its tile (0, 1): A has a non-finite entry NaN at row 2, column 1";
    assert_eq!(out.matches(nan).count(), 1, "{out}");
    assert_eq!(out.matches("rank 1: refused its part").count(), 1, "{out}");
}

#[test]
fn the_distributed_factorisation_is_right_and_sends_each_tile_once_per_rank() {
    for (np, grid, n, tile, clusters) in [
        (1, "1x1", 23, 4, "1x1"),
        (2, "1x2", 23, 4, "1x1"),
        (2, "2x1", 300, 32, "1x1"),
        (4, "2x2", 23, 4, "1x1"),
        (4, "2x2", 257, 16, "1x1"),
    ] {
        let (ok, out) = mpirun(np, &format!("factor {grid} {n} {tile} {clusters}"));
        assert!(ok, "np {np}, grid {grid}, n {n}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
}

#[test]
fn the_distributed_solve_is_right_and_its_checks_are_computed_where_the_tiles_live() {
    for (np, grid, n, tile, nrhs) in [
        (1, "1x1", 23, 4, 3),
        (2, "1x2", 23, 4, 2),
        (2, "2x1", 300, 32, 5),
        // 3 columns of right-hand-side tiles over 2 process columns.
        (4, "2x2", 257, 16, 40),
    ] {
        let (ok, out) = mpirun(np, &format!("solve {grid} {n} {tile} {nrhs}"));
        assert!(ok, "np {np}, grid {grid}, n {n}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
}

#[test]
fn every_precision_factors_and_solves_across_ranks_beside_scalapack() {
    for (np, grid) in [(2, "1x2"), (4, "2x2")] {
        for p in ["s", "c", "z"] {
            let (ok, out) = mpirun(np, &format!("precision {p} {grid}"));
            assert!(ok, "np {np}, grid {grid}, precision {p}:\n{out}");
            assert_eq!(out.matches("rank ok").count(), np, "{out}");
        }
    }
}

#[test]
fn a_failed_pivot_on_one_rank_is_the_same_error_on_every_rank() {
    for (np, grid) in [(2, "1x2"), (4, "2x2")] {
        let (ok, out) = mpirun(np, &format!("factor-not-spd {grid}"));
        assert!(ok, "{out}");
        assert_eq!(
            out.matches("refused: the matrix is not positive definite: the pivot of column 9")
                .count(),
            np,
            "{out}"
        );
    }
}

#[test]
fn distributed_qr_factors_every_precision_and_sends_each_panel_once_to_each_rank_right_of_it() {
    let grids = [
        (1, "1x1"),
        (2, "1x2"),
        (4, "1x4"),
        (2, "2x1"),
        (4, "4x1"),
        (4, "2x2"),
    ];
    for (np, grid) in grids {
        let (ok, out) = mpirun(np, &format!("qr {grid}"));
        assert!(ok, "np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
    for (np, grid) in grids {
        let (ok, out) = mpirun(np, &format!("lstsq {grid}"));
        assert!(ok, "least squares, np {np}, grid {grid}:\n{out}");
        assert_eq!(out.matches("rank ok").count(), np, "{out}");
    }
    let (ok, out) = mpirun(2, "qr-refused");
    assert!(ok, "{out}");
    for reason in [
        "the matrix is 9 x 23: a distributed QR factors one with at least as many rows",
        "QR factors a general matrix",
        "the right-hand sides are 22 x 2 in tiles of 4 on a 1x2 grid; A is 23 x 9",
    ] {
        assert_eq!(out.matches(reason).count(), 2, "{reason}: {out}");
    }
    let singular = "refused: A is rank deficient: R's diagonal entry at column 6 (0-based)";
    assert_eq!(out.matches(singular).count(), 2, "{out}");
    let doubled = "refused: A is rank deficient: R's diagonal entry at column 7 (0-based)";
    assert_eq!(out.matches(doubled).count(), 2, "{out}");
    let inf = "rank 1: in its tile (0, 1): A has a non-finite entry inf at row 1, column 0";
    assert_eq!(out.matches(inf).count(), 1, "{out}");
    assert_eq!(out.matches("rank 1: refused its part").count(), 1, "{out}");
}

#[test]
fn a_nan_on_one_rank_is_refused_by_every_rank_before_the_distributed_cholesky() {
    let (ok, out) = mpirun(2, "factor-nan");
    assert!(ok, "{out}");
    assert_eq!(out.matches("factored").count(), 2, "{out}");
    let nan = "rank 1: in its tile (1, 1): A has a non-finite entry NaN at row 2, column 1";
    assert_eq!(out.matches(nan).count(), 1, "{out}");
    assert_eq!(out.matches("rank 1: refused its part").count(), 1, "{out}");
}

#[test]
fn a_rank_that_dies_ends_the_job_with_a_message() {
    let started = std::time::Instant::now();
    let (ok, out) = mpirun(2, "factor-killed");
    assert!(!ok, "{out}");
    // mpirun names the rank that died, and ends the others, well before its timeout.
    assert!(out.contains("rank 1") && out.contains("signal 6"), "{out}");
    assert!(started.elapsed().as_secs() < 60, "{out}");
}

#[test]
fn a_rank_that_stops_answering_ends_the_wait_after_the_progress_timeout() {
    let (ok, out) = mpirun(2, "factor-stalled");
    assert!(!ok, "{out}");
    // Rank 1 stops inside a run (rank 0 names it), or, on a loaded machine, in a collective step
    // around one (a collective cannot say which rank is missing): either way rank 0's wait ends.
    assert!(
        out.contains("stalled: ")
            && (out.contains("nothing arrived for 3 s from rank(s) 1 ")
                || out.contains("nothing arrived for 3 s from some rank at "))
            && out.contains("presumed dead"),
        "{out}"
    );
    // A rank that stops before it calls: the others' collective check of the inputs ends.
    let (ok, out) = mpirun(2, "factor-stalled-before");
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "stalled: rank 0: nothing arrived for 3 s from some rank at the check of the inputs"
        ),
        "{out}"
    );
}

/// A rank's tiles of `a`, as a caller hands them over.
fn local_tiles(a: hetla::Result<DistributedMatrix>) -> Vec<((usize, usize), Mat<f64>)> {
    a.unwrap().tiles().clone().into_iter().collect()
}

/// A random general matrix of order `n` in tiles of `tile` (4: column 9 is column 1 of tile column
/// 2) whose column 9 is zero, so that U(9, 9) is exactly zero.
fn with_column_9_zero(
    world: &mpi::topology::SimpleCommunicator,
    grid: ProcessGrid,
    (n, tile, seed): (usize, usize, u64),
) -> DistributedMatrix {
    let a = DistributedMatrix::<f64>::random(world, (n, n), tile, grid, seed).unwrap();
    let tiles = a
        .tiles()
        .iter()
        .map(|(&(i, j), t)| {
            let mut t = t.clone();
            if j == 2 {
                t.col_mut(1).fill(0.0);
            }
            ((i, j), t)
        })
        .collect();
    DistributedMatrix::from_local_general_tiles(world, (n, n), tile, grid, tiles).unwrap()
}

/// One rank's side of the tests above (skipped unless `mpirun` started it).
#[test]
#[ignore = "run by mpirun from the tests above"]
fn rank_side() {
    let Ok(side) = std::env::var(SIDE) else {
        return;
    };
    let (universe, _) =
        mpi::initialize_with_threading(mpi::Threading::Funneled).expect("MPI is initialised once");
    let world = universe.world();
    let me = mpi::traits::Communicator::rank(&world) as usize;
    let words: Vec<&str> = side.split_whitespace().collect();
    let (n, tile, seed) = (23, 4, 11);
    match words[..] {
        ["round-trip", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let generated =
                DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            // Each rank holds exactly its block-cyclic tiles.
            let tiles = generated.tiles();
            let owned = DistributedMatrix::<f64>::owned(generated.tiling(), &grid, Rank(me));
            assert_eq!(tiles.keys().copied().collect::<Vec<_>>(), owned);
            assert!(
                tiles
                    .keys()
                    .all(|&(i, j)| (i % grid.rows()) * grid.cols() + j % grid.cols() == me)
            );
            // Gathered, they are the generator's matrix (the tiles on and below the diagonal).
            let gathered = generated.gather(&world).unwrap();
            let whole = random_hpd_block::<f64>(n, seed, 0..n, 0..n);
            let lower = Mat::from_fn(n, n, |i, j| {
                if i / tile >= j / tile {
                    whole[(i, j)]
                } else {
                    0.0
                }
            });
            assert_eq!(gathered.is_some(), me == 0);
            if let Some(g) = &gathered {
                assert_eq!(g, &lower);
            }
            // Scattered back from rank 0, each rank gets the same tiles again.
            let scattered = DistributedMatrix::<f64>::scatter(
                &world,
                gathered.as_ref().map(|g| g.as_ref()),
                n,
                tile,
                grid,
            )
            .unwrap();
            assert_eq!(scattered, generated);
            // And handed over as local tiles, too.
            let local = DistributedMatrix::<f64>::from_local_tiles(
                &world,
                n,
                tile,
                grid,
                tiles.clone().into_iter().collect(),
            )
            .unwrap();
            assert_eq!(local, generated);
            println!("rank ok");
        }
        ["wrong-grid"] => {
            let err =
                DistributedMatrix::<f64>::random_spd(&world, n, tile, "2x2".parse().unwrap(), seed)
                    .unwrap_err();
            assert!(
                matches!(err, Error::InvalidOption { option: "grid", .. }),
                "{err}"
            );
            println!("refused: {err}");
        }
        ["bad-tile"] => {
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut tiles = local_tiles(DistributedMatrix::<f64>::random_spd(
                &world, n, tile, grid, seed,
            ));
            if me == 1 {
                let t = tiles.iter_mut().find(|(t, _)| *t == (1, 1)).unwrap();
                t.1 = Mat::zeros(3, 3);
            }
            let err = DistributedMatrix::<f64>::from_local_tiles(&world, n, tile, grid, tiles)
                .unwrap_err();
            println!("refused: {err}");
        }
        #[cfg(feature = "scalapack")]
        ["pdpotrf", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            let runs = hetla::distributed::scalapack::potrf(&world, &a, 2).unwrap();
            assert_eq!(runs.seconds.len(), 2);
            let (a, l) = (
                a.gather(&world).unwrap(),
                runs.factor.gather(&world).unwrap(),
            );
            if let (Some(a), Some(l)) = (a, l) {
                // gather fills whole diagonal tiles: the residual reads the lower triangle.
                let residual =
                    hetla::check::cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq);
                assert!(
                    residual < hetla::check::RESIDUAL_THRESHOLD,
                    "residual {residual}"
                );
                assert!((0..n).all(|j| (0..j).all(|i| l[(i, j)] == 0.0)));
            }
            println!("rank ok");
        }
        #[cfg(feature = "scalapack")]
        ["pdgetrf", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let a = DistributedMatrix::<f64>::random(&world, (n, n), tile, grid, seed).unwrap();
            let b = DistributedRhs::<f64>::random(&world, (n, 3), tile, grid, seed + 1).unwrap();
            let lu = hetla::distributed::scalapack::getrf(&world, &a, 2).unwrap();
            assert_eq!(lu.seconds.len(), 2);
            let x = hetla::distributed::scalapack::getrs(&world, &lu, &b, 1)
                .unwrap()
                .x;
            let gathered = (
                a.gather(&world).unwrap(),
                b.gather(&world).unwrap(),
                x.gather(&world).unwrap(),
            );
            if let (Some(a), Some(b), Some(x)) = gathered {
                // LAPACK's dget02 ratio: ||B - A X||_1 / (||A||_1 ||X||_1 n eps).
                let norm1 = |m: &Mat<f64>| {
                    (0..m.ncols())
                        .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs()).sum::<f64>())
                        .fold(0.0, f64::max)
                };
                let r = &b - &a * &x;
                let ratio = norm1(&r) / (norm1(&a) * norm1(&x) * n as f64 * f64::EPSILON);
                assert!(ratio < RESIDUAL_THRESHOLD, "ratio {ratio}");
            }
            println!("rank ok");
        }
        #[cfg(feature = "scalapack")]
        ["pgeqrf", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            peer_qr_in_precision::<f32>(&world, grid, (37, 23));
            peer_qr_in_precision::<f64>(&world, grid, (37, 23));
            peer_qr_in_precision::<f64>(&world, grid, (23, 23));
            peer_qr_in_precision::<hetla::c32>(&world, grid, (37, 23));
            peer_qr_in_precision::<hetla::c64>(&world, grid, (37, 23));
            println!("rank ok");
        }
        #[cfg(feature = "scalapack")]
        ["pgeqrf-wide"] => {
            use hetla::distributed::scalapack::{gels, geqrf};
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let a = DistributedMatrix::<f64>::random(&world, (9, 23), tile, grid, seed).unwrap();
            let b = DistributedRhs::<f64>::random(&world, (9, 2), tile, grid, seed).unwrap();
            println!("refused: {}", geqrf(&world, &a, 1).unwrap_err());
            println!("refused: {}", gels(&world, &a, &b, 1).unwrap_err());
        }
        #[cfg(feature = "scalapack")]
        ["pdgetrf-singular"] => {
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let a = with_column_9_zero(&world, grid, (n, tile, seed));
            let err = hetla::distributed::scalapack::getrf(&world, &a, 1).unwrap_err();
            println!("refused: {err}");
        }
        #[cfg(feature = "scalapack")]
        ["pdpotrf-not-spd"] => {
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut tiles = local_tiles(DistributedMatrix::<f64>::random_spd(
                &world, n, tile, grid, seed,
            ));
            // Column 9 sits in tile column 2, on rank 0: a negative pivot there.
            for ((i, j), t) in &mut tiles {
                if (*i, *j) == (2, 2) {
                    t[(1, 1)] = -1.0;
                }
            }
            let a =
                DistributedMatrix::<f64>::from_local_tiles(&world, n, tile, grid, tiles).unwrap();
            let err = hetla::distributed::scalapack::potrf(&world, &a, 1).unwrap_err();
            println!("refused: {err}");
        }
        ["lu", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            lu_in_precision::<f32>(&world, grid, (23, 4));
            lu_in_precision::<f64>(&world, grid, (23, 4));
            lu_in_precision::<f64>(&world, grid, (150, 16));
            lu_in_precision::<hetla::c32>(&world, grid, (150, 16));
            lu_in_precision::<hetla::c64>(&world, grid, (150, 16));
            println!("rank ok");
        }
        ["qr", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            qr_in_precision::<f32>(&world, grid, (37, 23, 4));
            qr_in_precision::<f64>(&world, grid, (37, 23, 4));
            qr_in_precision::<f64>(&world, grid, (23, 23, 4));
            qr_in_precision::<f64>(&world, grid, (300, 150, 16));
            qr_in_precision::<hetla::c32>(&world, grid, (150, 100, 16));
            qr_in_precision::<hetla::c64>(&world, grid, (150, 100, 16));
            println!("rank ok");
        }
        ["lstsq", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            lstsq_in_precision::<f32>(&world, grid, (37, 23, 4));
            lstsq_in_precision::<f64>(&world, grid, (37, 23, 4));
            lstsq_in_precision::<f64>(&world, grid, (300, 150, 16));
            lstsq_in_precision::<hetla::c32>(&world, grid, (150, 100, 16));
            lstsq_in_precision::<hetla::c64>(&world, grid, (150, 100, 16));
            println!("rank ok");
        }
        ["qr-refused"] => {
            let qr = hetla::Qr::new().clusters("1x1".parse().unwrap());
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut a = DistributedMatrix::<f64>::random(&world, (9, n), tile, grid, seed).unwrap();
            println!(
                "refused: {}",
                qr.factor_distributed(&world, &mut a).unwrap_err()
            );
            let mut spd =
                DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            println!(
                "refused: {}",
                qr.factor_distributed(&world, &mut spd).unwrap_err()
            );
            // An infinity on rank 1 only: refused on both, before any work.
            let a = DistributedMatrix::<f64>::random(&world, (n, 9), tile, grid, seed).unwrap();
            let mut tiles = local_tiles(Ok(a));
            if me == 1 {
                tiles[0].1[(1, 0)] = f64::INFINITY;
            }
            let mut a =
                DistributedMatrix::from_local_general_tiles(&world, (n, 9), tile, grid, tiles)
                    .unwrap();
            println!(
                "refused: {}",
                qr.factor_distributed(&world, &mut a).unwrap_err()
            );
            // A zero column: R's diagonal is exactly zero there, reported by both ranks.
            let mut a = DistributedMatrix::<f64>::random(&world, (n, 9), tile, grid, seed).unwrap();
            let b = DistributedRhs::<f64>::random(&world, (n, 2), tile, grid, seed).unwrap();
            let zeroed: Vec<_> = a
                .tiles()
                .iter()
                .map(|(&(i, j), t)| {
                    let mut t = t.clone();
                    if j == 1 {
                        t.col_mut(2).fill(0.0);
                    }
                    ((i, j), t)
                })
                .collect();
            a = DistributedMatrix::from_local_general_tiles(&world, (n, 9), tile, grid, zeroed)
                .unwrap();
            let err = qr
                .least_squares_distributed(&world, &mut a, &b)
                .unwrap_err();
            println!("refused: {err}");
            // Two equal columns (6 and 7): R's entry at 7 is rounding, refused on both ranks.
            let a = DistributedMatrix::<f64>::random(&world, (n, 9), tile, grid, seed).unwrap();
            let doubled: Vec<_> = a
                .tiles()
                .iter()
                .map(|(&(i, j), t)| {
                    let mut t = t.clone();
                    if j == 1 {
                        let six = t.col(2).to_owned();
                        t.col_mut(3).copy_from(&six);
                    }
                    ((i, j), t)
                })
                .collect();
            let mut a =
                DistributedMatrix::from_local_general_tiles(&world, (n, 9), tile, grid, doubled)
                    .unwrap();
            let err = qr
                .least_squares_distributed(&world, &mut a, &b)
                .unwrap_err();
            println!("refused: {err}");
            // Right-hand sides with other rows: refused on both.
            let mut a = DistributedMatrix::<f64>::random(&world, (n, 9), tile, grid, seed).unwrap();
            let b = DistributedRhs::<f64>::random(&world, (n - 1, 2), tile, grid, seed).unwrap();
            let err = qr
                .least_squares_distributed(&world, &mut a, &b)
                .unwrap_err();
            println!("refused: {err}");
        }
        ["lu-singular"] => {
            // By block columns, then by tiles.
            for grid in ["1x2", "2x1"] {
                let grid: ProcessGrid = grid.parse().unwrap();
                let mut a = with_column_9_zero(&world, grid, (n, tile, seed));
                let lu = hetla::Lu::new()
                    .clusters("1x1".parse().unwrap())
                    .factor_distributed(&world, &mut a)
                    .unwrap();
                println!("singular at column {}", lu.singular.unwrap());
                // Its solve is refused on every rank, before any work.
                let b = DistributedRhs::<f64>::random(&world, (n, 1), tile, grid, 5).unwrap();
                let mut x = b.clone();
                let err = hetla::Lu::new()
                    .solve_distributed(&world, &a, &lu, &mut x)
                    .unwrap_err();
                assert_eq!(x, b);
                println!("refused: {err}");
            }
        }
        ["lu-refused"] => {
            let lu = hetla::Lu::new().clusters("1x1".parse().unwrap());
            let grid: ProcessGrid = "2x1".parse().unwrap();
            let mut a =
                DistributedMatrix::<f64>::random(&world, (n, n - 3), tile, grid, seed).unwrap();
            let before = a.clone();
            let err = lu.factor_distributed(&world, &mut a).unwrap_err();
            assert_eq!(a, before);
            println!("refused: {err}");
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut spd =
                DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            let err = lu.factor_distributed(&world, &mut spd).unwrap_err();
            println!("refused: {err}");
            // A NaN on rank 1 only: refused on both, before any work.
            let a = DistributedMatrix::<f64>::random(&world, (n, n), tile, grid, seed).unwrap();
            let mut tiles = local_tiles(Ok(a));
            if me == 1 {
                tiles[0].1[(2, 1)] = f64::NAN;
            }
            let mut a =
                DistributedMatrix::from_local_general_tiles(&world, (n, n), tile, grid, tiles)
                    .unwrap();
            let err = lu.factor_distributed(&world, &mut a).unwrap_err();
            println!("refused: {err}");
        }
        ["factor-nan"] => {
            // A NaN on rank 1 only, in the upper triangle of a diagonal tile (not read: factored)
            // and then below it (refused on both ranks, before any work).
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            let cholesky = Cholesky::new().clusters("1x1".parse().unwrap());
            for (row, col) in [(0, 2), (2, 1)] {
                let mut tiles = local_tiles(Ok(a.clone()));
                if me == 1 {
                    let diagonal = tiles.iter_mut().find(|((i, j), _)| i == j).unwrap();
                    diagonal.1[(row, col)] = f64::NAN;
                }
                let mut a =
                    DistributedMatrix::from_local_tiles(&world, n, tile, grid, tiles).unwrap();
                match cholesky.factor_distributed(&world, &mut a) {
                    Ok(_) => println!("factored"),
                    Err(err) => println!("refused: {err}"),
                }
            }
        }
        ["factor", grid, n, tile, clusters] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let (n, tile): (usize, usize) = (n.parse().unwrap(), tile.parse().unwrap());
            let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            let mut l = a.clone();
            let run = Cholesky::new()
                .clusters(clusters.parse().unwrap())
                .factor_distributed(&world, &mut l)
                .unwrap();
            // Each rank ran the tasks of the tiles it owns, and sent what the formula says.
            assert!(run.trace.tasks.iter().all(|e| e.end >= e.start));
            assert_eq!(run.bytes_sent_by_rank, run.bytes_expected_by_rank);
            assert_eq!(run.bytes_sent, run.bytes_sent_by_rank[me]);
            let (a, l) = (a.gather(&world).unwrap(), l.gather(&world).unwrap());
            if let (Some(a), Some(l)) = (a, l) {
                let residual = cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq);
                assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
                println!("residual {residual:.3e}, sent {:?}", run.bytes_sent_by_rank);
            }
            println!("rank ok");
        }
        ["solve", grid, n, tile, nrhs] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let [n, tile, nrhs] = [n, tile, nrhs].map(|w| w.parse::<usize>().unwrap());
            let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, seed).unwrap();
            let mut l = a.clone();
            let cholesky = Cholesky::new().clusters("1x1".parse().unwrap());
            cholesky.factor_distributed(&world, &mut l).unwrap();
            // The probed residual, computed where the tiles live, accepts the factor and
            // refuses it with one entry off by 1e-8 of the matrix's scale.
            let residual = probed_residual(&world, &a, &l, 3).unwrap();
            assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
            let mut tiles = local_tiles(Ok(l.clone()));
            if let Some((_, t)) = tiles.iter_mut().find(|((i, j), _)| (*i, *j) == (1, 0)) {
                t[(0, 0)] += 1e-8 * n as f64;
            }
            let wrong =
                DistributedMatrix::<f64>::from_local_tiles(&world, n, tile, grid, tiles).unwrap();
            let bad = probed_residual(&world, &a, &wrong, 3).unwrap();
            assert!(bad > RESIDUAL_THRESHOLD, "residual of a wrong factor {bad}");

            let b = DistributedRhs::<f64>::random(&world, (n, nrhs), tile, grid, 5).unwrap();
            let mut x = b.clone();
            let solve = cholesky.solve_distributed(&world, &l, &mut x).unwrap();
            assert_eq!(solve.bytes_sent_by_rank, solve.bytes_expected_by_rank);
            let berr = solve_backward_error(&world, &a, &x, &b).unwrap();
            assert!(berr < 1e-14, "backward error {berr}");
            // ScaLAPACK's pdpotrs with the same factor solves the same system.
            #[cfg(feature = "scalapack")]
            {
                let peer = hetla::distributed::scalapack::potrs(&world, &l, &b, 2).unwrap();
                assert_eq!(peer.seconds.len(), 2);
                let peer_berr = solve_backward_error(&world, &a, &peer.x, &b).unwrap();
                assert!(peer_berr < 1e-14, "pdpotrs's backward error {peer_berr}");
            }
            // The same solution as one process's.
            let (a, x) = (a.gather(&world).unwrap(), x.gather(&world).unwrap());
            if let (Some(a), Some(x)) = (a, x) {
                let b = hetla::matgen::random_in::<f64>(n, nrhs, 5);
                let reference = Cholesky::new()
                    .factor(a.as_ref())
                    .unwrap()
                    .solve(b.as_ref());
                let error = hetla::check::relative_error(x.as_ref(), reference.unwrap().as_ref());
                assert!(error < 1e-12, "error {error}");
                println!(
                    "residual {residual:.3e}, backward error {berr:.3e}, sent {:?}",
                    solve.bytes_sent_by_rank
                );
            }
            println!("rank ok");
        }
        ["precision", p, grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            match p {
                "s" => in_precision::<f32>(&world, grid),
                "c" => in_precision::<hetla::c32>(&world, grid),
                "z" => in_precision::<hetla::c64>(&world, grid),
                other => panic!("no precision {other}"),
            }
            println!("rank ok");
        }
        ["factor-not-spd", grid] => {
            let grid: ProcessGrid = grid.parse().unwrap();
            let mut tiles = local_tiles(DistributedMatrix::<f64>::random_spd(
                &world, n, tile, grid, seed,
            ));
            // Column 9 sits in tile (2, 2): a negative pivot there.
            for ((i, j), t) in &mut tiles {
                if (*i, *j) == (2, 2) {
                    t[(1, 1)] = -1.0;
                }
            }
            let mut a =
                DistributedMatrix::<f64>::from_local_tiles(&world, n, tile, grid, tiles).unwrap();
            let err = Cholesky::new()
                .clusters("1x1".parse().unwrap())
                .factor_distributed(&world, &mut a)
                .unwrap_err();
            println!("refused: {err}");
        }
        ["factor-killed"] => {
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut a =
                DistributedMatrix::<f64>::random_spd(&world, 2000, 100, grid, seed).unwrap();
            if me == 1 {
                std::thread::spawn(|| {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    std::process::abort();
                });
            }
            let _ = Cholesky::new()
                .clusters("1x1".parse().unwrap())
                .progress_timeout(std::time::Duration::from_secs(20))
                .factor_distributed(&world, &mut a);
            println!("rank {me} went on");
        }
        ["factor-stalled-before"] => {
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let mut a = DistributedMatrix::<f64>::random_spd(&world, 400, 100, grid, seed).unwrap();
            if me == 1 {
                let pid = std::process::id().to_string();
                let _ = Command::new("kill").args(["-STOP", &pid]).status();
            }
            let run = Cholesky::new()
                .progress_timeout(std::time::Duration::from_secs(3))
                .factor_distributed(&world, &mut a);
            if let Err(err) = run {
                println!("stalled: {err}");
                std::process::exit(3);
            }
        }
        ["factor-stalled"] => {
            // A run long enough (about 8 x the setup) that a stop timed from the previous run
            // lands inside it on a loaded machine: tiles of 200 keep the graph (and the setup)
            // of 20 x 20 tiles.
            let grid: ProcessGrid = "1x2".parse().unwrap();
            let a = DistributedMatrix::<f64>::random_spd(&world, 4000, 200, grid, seed).unwrap();
            let cholesky = Cholesky::new()
                .clusters("1x1".parse().unwrap())
                .progress_timeout(std::time::Duration::from_secs(3));
            // A first run builds the platforms; the progress timeout covers the run, not
            // the collective steps before it.
            cholesky.factor_distributed(&world, &mut a.clone()).unwrap();
            // A second, warm, run times the setup and the run.
            let called = std::time::Instant::now();
            let mut last = cholesky.factor_distributed(&world, &mut a.clone()).unwrap();
            let mut setup = called.elapsed().as_secs_f64() - last.seconds;
            // Rank 1 stops (not dies) a third of the way through its next run (after the setup
            // the last call took), while most of the tiles rank 0 waits for are still to come.
            // On a loaded machine the setup can take longer or shorter than the last one did:
            // a stop that lands in a collective step before or after the run ends rank 0's wait
            // there; one that would come after the call returned is not made (a flag under a
            // mutex), and both ranks try again, with the stop timed from that run, up to 6 times.
            for attempt in 1..=6 {
                let returned = std::sync::Arc::new(std::sync::Mutex::new(false));
                if me == 1 {
                    let delay = std::time::Duration::from_secs_f64(setup + last.seconds / 3.0);
                    println!(
                        "attempt {attempt}: setup {setup:.3} s, run {:.3} s",
                        last.seconds
                    );
                    let returned = returned.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(delay);
                        let returned = returned.lock().unwrap();
                        if !*returned {
                            let pid = std::process::id().to_string();
                            let _ = Command::new("kill").args(["-STOP", &pid]).status();
                        }
                    });
                }
                let called = std::time::Instant::now();
                let run = cholesky.factor_distributed(&world, &mut a.clone());
                *returned.lock().unwrap() = true;
                match run {
                    Err(err) => {
                        println!("stalled: {err}");
                        // Without its peer, MPI cannot end cleanly: exiting with an error has
                        // mpirun end the job.
                        std::process::exit(3);
                    }
                    Ok(run) => {
                        println!("rank {me}: attempt {attempt}: the stop came after the run");
                        setup = called.elapsed().as_secs_f64() - run.seconds;
                        last = run;
                    }
                }
            }
        }
        _ => panic!("unknown side {side:?}"),
    }
}

#[cfg(not(feature = "scalapack"))]
use hetla::distributed::Wire as TestScalar;
/// The scalars a distributed run of the tests computes in: with ScaLAPACK, those it has peers in.
#[cfg(feature = "scalapack")]
use hetla::distributed::scalapack::Scalapack as TestScalar;

/// A rank's side of a factorisation and a solve in precision `T` on `grid` (n = 150, tiles of 16):
/// bytes sent as the formula counts them in that precision, the factor's residual (probed where the
/// tiles live, and whole on rank 0), the solve's backward error, and ScaLAPACK's p?potrf and
/// p?potrs of the same precision on the same matrix.
fn in_precision<T: TestScalar>(world: &mpi::topology::SimpleCommunicator, grid: ProcessGrid) {
    let (n, tile, seed) = (150, 16, 7);
    let eps = T::PRECISION.epsilon();
    let a = DistributedMatrix::<T>::random_spd(world, n, tile, grid, seed).unwrap();
    let mut l = a.clone();
    let cholesky = Cholesky::new().clusters("1x1".parse().unwrap());
    let run = cholesky.factor_distributed(world, &mut l).unwrap();
    assert_eq!(run.precision, T::PRECISION);
    assert_eq!(run.bytes_sent_by_rank, run.bytes_expected_by_rank);
    let residual = probed_residual(world, &a, &l, 3).unwrap();
    assert!(residual < RESIDUAL_THRESHOLD, "probed residual {residual}");
    if let (Some(a), Some(l)) = (a.gather(world).unwrap(), l.gather(world).unwrap()) {
        let whole = cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq);
        assert!(whole < RESIDUAL_THRESHOLD, "residual {whole}");
        println!(
            "{}: residual {whole:.3e}, sent {:?}",
            T::PRECISION,
            run.bytes_sent_by_rank
        );
    }
    let b = DistributedRhs::<T>::random(world, (n, 3), tile, grid, 5).unwrap();
    let mut x = b.clone();
    let solve = cholesky.solve_distributed(world, &l, &mut x).unwrap();
    assert_eq!(solve.bytes_sent_by_rank, solve.bytes_expected_by_rank);
    let berr = solve_backward_error(world, &a, &x, &b).unwrap();
    assert!(berr < 10.0 * n as f64 * eps, "backward error {berr}");
    #[cfg(feature = "scalapack")]
    {
        let peer = hetla::distributed::scalapack::potrf(world, &a, 1).unwrap();
        let peer_residual = probed_residual(world, &a, &peer.factor, 3).unwrap();
        assert!(
            peer_residual < RESIDUAL_THRESHOLD,
            "p?potrf's residual {peer_residual}"
        );
        let solved = hetla::distributed::scalapack::potrs(world, &l, &b, 1).unwrap();
        let peer_berr = solve_backward_error(world, &a, &solved.x, &b).unwrap();
        assert!(
            peer_berr < 10.0 * n as f64 * eps,
            "p?potrs's backward error {peer_berr}"
        );
    }
}

/// ||M||_1 of a matrix in any precision.
fn norm1<T: TestScalar>(m: &Mat<T>) -> f64 {
    (0..m.ncols())
        .map(|j| {
            (0..m.nrows())
                .map(|i| m[(i, j)].to_c64().norm())
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}

/// How far the R in the QR factor `f` (LAPACK's layout) of the m x n `a` is from A's: R^H R = A^H A
/// whatever the reflectors, so ||A^H A - R^H R||_1 / (||A||_1^2 m eps), which LAPACK's scaling
/// keeps below 30 for a backward-stable QR.
fn r_ratio<T: TestScalar>(a: &Mat<T>, f: &Mat<T>) -> f64 {
    let (m, n) = (a.nrows(), a.ncols());
    let r = Mat::from_fn(
        n,
        n,
        |i, j| if i <= j { f[(i, j)] } else { T::from_f64(0.0) },
    );
    let gram = a.adjoint() * a - r.adjoint() * &r;
    norm1(&gram) / (norm1(a).powi(2) * m as f64 * T::PRECISION.epsilon())
}

/// A rank's side of a distributed QR in precision `T` on `grid` of an `m x n` matrix in tiles of
/// `tile`: bytes sent as the count says (on 1 x Q, each panel from its diagonal down with its T, to
/// every other rank holding a block column right of it; on P x 1, the rows of the domains' tops
/// that the pairwise merges of a step move: each surviving top's row to each merge's rank, an
/// eliminated top's back to it, and home; on P x Q, the split's count, tiles with the T's applied
/// on other ranks), R against A, and the reflectors below the diagonal (the factor is not A's upper
/// triangle).
fn qr_in_precision<T: TestScalar>(
    world: &mpi::topology::SimpleCommunicator,
    grid: ProcessGrid,
    (m, n, tile): (usize, usize, usize),
) {
    let a = DistributedMatrix::<T>::random(world, (m, n), tile, grid, 4).unwrap();
    let mut f = a.clone();
    let run = hetla::Qr::new()
        .clusters("1x1".parse().unwrap())
        .factor_distributed(world, &mut f)
        .unwrap();
    assert_eq!(run.precision, T::PRECISION);
    assert_eq!(run.bytes_sent_by_rank, run.bytes_expected_by_rank);
    let (p, q) = (grid.rows(), grid.cols());
    let mut count = vec![0; grid.size()];
    let (mt, nt) = (m.div_ceil(tile), n.div_ceil(tile));
    for k in (0..nt).filter(|_| p > 1 && q == 1) {
        // The domains' tops k, k + 1, ... merged pairwise: a merge runs where the eliminated top
        // lives, the surviving top's row goes there, the eliminated one's comes back there if it
        // left, and every row ends at home.
        let tops: Vec<usize> = (k..mt.min(k + p)).collect();
        let row_bytes = |t: usize| {
            let rows = tile.min(m - t * tile);
            (k..nt)
                .map(|j| rows * tile.min(n - j * tile))
                .sum::<usize>()
                * size_of::<T>()
        };
        let mut at: Vec<usize> = tops.iter().map(|t| t % p).collect();
        let mut s = 1;
        while s < tops.len() {
            for i in (0..tops.len())
                .step_by(2 * s)
                .filter(|i| i + s < tops.len())
            {
                let there = tops[i + s] % p;
                for x in [i, i + s] {
                    if at[x] != there {
                        count[at[x]] += row_bytes(tops[x]);
                        at[x] = there;
                    }
                }
            }
            s *= 2;
        }
        for (x, &t) in tops.iter().enumerate().filter(|&(x, &t)| at[x] != t % p) {
            count[at[x]] += row_bytes(t);
        }
    }
    for k in (0..nt).filter(|_| p == 1) {
        let width = tile.min(n - k * tile);
        let to: std::collections::BTreeSet<usize> = (k + 1..n.div_ceil(tile))
            .map(|j| j % q)
            .filter(|&r| r != k % q)
            .collect();
        // The panel's T has the default inner block's 32 rows, or the panel's width if fewer.
        let t_rows = 32.min(width);
        count[k % q] += to.len() * (m - k * tile + t_rows) * width * size_of::<T>();
    }
    if p == 1 || q == 1 {
        assert_eq!(run.bytes_sent_by_rank, count);
    }
    // Probed where the tiles live: below 30, and above it for A's own upper triangle as R (390 to
    // 8e12 at these sizes: the check's ||A||_1^2 grows as m^2).
    let probed = hetla::distributed::probed_qr_residual(world, &a, &f, 9).unwrap();
    assert!(probed < RESIDUAL_THRESHOLD, "probed R ratio {probed}");
    let unfactored = hetla::distributed::probed_qr_residual(world, &a, &a, 9).unwrap();
    assert!(
        unfactored > RESIDUAL_THRESHOLD,
        "probed R ratio of A itself {unfactored}"
    );
    if let (Some(a), Some(f)) = (a.gather(world).unwrap(), f.gather(world).unwrap()) {
        let ratio = r_ratio(&a, &f);
        assert!(
            ratio < RESIDUAL_THRESHOLD,
            "{}: R ratio {ratio}",
            T::PRECISION
        );
        assert!(f[(m - 1, 0)] != a[(m - 1, 0)]);
        println!(
            "{}: {m}x{n} R ratio {ratio:.3e}, sent {:?}",
            T::PRECISION,
            run.bytes_sent_by_rank
        );
    }
}

/// A rank's side of a distributed least-squares solve in precision `T` on `grid` of an `m x n`
/// matrix in tiles of `tile` with 3 right-hand sides: LAPACK's dqrt17 ratio of the gathered
/// solutions, the QR's bytes as the panels' count (each panel also to the ranks of B's block
/// columns), the substitution's as its count, and X beside ScaLAPACK's p?gels.
fn lstsq_in_precision<T: TestScalar>(
    world: &mpi::topology::SimpleCommunicator,
    grid: ProcessGrid,
    (m, n, tile): (usize, usize, usize),
) {
    let k = 3;
    let a = DistributedMatrix::<T>::random(world, (m, n), tile, grid, 4).unwrap();
    let b = DistributedRhs::<T>::random(world, (m, k), tile, grid, 5).unwrap();
    let mut f = a.clone();
    let solved = hetla::Qr::new()
        .clusters("1x1".parse().unwrap())
        .least_squares_distributed(world, &mut f, &b)
        .unwrap();
    assert_eq!(solved.x.tiling().rows(), n);
    assert_eq!(
        solved.run.bytes_sent_by_rank,
        solved.run.bytes_expected_by_rank
    );
    assert_eq!(
        solved.solve.bytes_sent_by_rank,
        solved.solve.bytes_expected_by_rank
    );
    // The ratio computed where the tiles live (and from the gathered matrices below).
    let distributed = hetla::distributed::least_squares_ratio(world, &a, &solved.x, &b).unwrap();
    assert!(
        distributed < RESIDUAL_THRESHOLD,
        "dqrt17 ratio {distributed}"
    );
    let gathered = (
        a.gather(world).unwrap(),
        b.gather(world).unwrap(),
        solved.x.gather(world).unwrap(),
    );
    #[cfg(feature = "scalapack")]
    let peer = hetla::distributed::scalapack::gels(world, &a, &b, 1)
        .unwrap()
        .x
        .gather(world)
        .unwrap();
    let (Some(a), Some(b), Some(x)) = gathered else {
        return;
    };
    let eps = T::PRECISION.epsilon();
    let normal = a.adjoint() * (&b - &a * &x);
    let ratio = norm1(&normal) / (norm1(&a) * norm1(&b) * m.max(k) as f64 * eps);
    assert!(
        ratio < RESIDUAL_THRESHOLD,
        "{}: dqrt17 ratio {ratio}",
        T::PRECISION
    );
    // Both measure rounding: of one order, not equal (the residual is summed in another order).
    let close = distributed < 10.0 * ratio.max(1e-3) && ratio < 10.0 * distributed.max(1e-3);
    assert!(
        close,
        "{distributed} where the tiles live, {ratio} gathered"
    );
    #[cfg(feature = "scalapack")]
    if let Some(peer) = peer {
        let difference = norm1(&(&x - &peer)) / norm1(&peer);
        assert!(
            difference < 1e3 * eps,
            "{}: X differs from p?gels's by {difference}",
            T::PRECISION
        );
    }
    println!(
        "{}: {m}x{n} least squares, dqrt17 ratio {ratio:.3e}",
        T::PRECISION
    );
}

/// A rank's side of ScaLAPACK's QR in precision `T` on `grid` of an `m x n` random matrix in tiles
/// of 4: p?geqrf's R against A (R^H R = A^H A, as LAPACK's checks scale it), and p?gels's solutions
/// by LAPACK's dqrt17 ratio ||A^H (B - A X)||_1 / (||A||_1 ||B||_1 max(m, n, nrhs) eps).
#[cfg(feature = "scalapack")]
fn peer_qr_in_precision<T: TestScalar>(
    world: &mpi::topology::SimpleCommunicator,
    grid: ProcessGrid,
    (m, n): (usize, usize),
) {
    use hetla::distributed::scalapack::{gels, geqrf};
    let (tile, nrhs, eps) = (4, 3, T::PRECISION.epsilon());
    let a = DistributedMatrix::<T>::random(world, (m, n), tile, grid, 5).unwrap();
    let b = DistributedRhs::<T>::random(world, (m, nrhs), tile, grid, 6).unwrap();
    let qr = geqrf(world, &a, 2).unwrap();
    assert_eq!(qr.seconds.len(), 2);
    let solved = gels(world, &a, &b, 2).unwrap();
    assert_eq!(solved.x.tiling().rows(), n);
    let gathered = (
        a.gather(world).unwrap(),
        qr.factor.gather(world).unwrap(),
        b.gather(world).unwrap(),
        solved.x.gather(world).unwrap(),
    );
    let (Some(a), Some(f), Some(b), Some(x)) = gathered else {
        return;
    };
    let ratio = r_ratio(&a, &f);
    assert!(
        ratio < RESIDUAL_THRESHOLD,
        "{}: R^H R ratio {ratio}",
        T::PRECISION
    );
    let residual = &b - &a * &x;
    let normal = a.adjoint() * &residual;
    let ratio = norm1(&normal) / (norm1(&a) * norm1(&b) * m.max(nrhs) as f64 * eps);
    assert!(
        ratio < RESIDUAL_THRESHOLD,
        "{}: dqrt17 ratio {ratio}",
        T::PRECISION
    );
}

/// A rank's side of a distributed LU in precision `T` on `grid` of an `n x n` matrix in tiles of
/// `tile`: bytes sent as the panels' count says, the same interchanges on every rank, LAPACK's
/// dget01 ratio of the gathered factor, and (with ScaLAPACK) p?getrs solving with hetla's factor.
/// The tiled LU's bytes on a P x Q grid, P > 1: the split's count (what every rank sends), which on
/// P x 1 grids is checked against the count by hand: at step k, each tile of the panel on another
/// process row goes to the panel's rank and back (factored), the pivots (w entries) to every other
/// process row with rows below k, and for each column j != k and each such process row the exchange
/// tile (b rows) up and the old top tile (k, j) down (but where the previous panel left it), and
/// U's tile (k, j), j > k, down.
fn tiled_lu_bytes<T: TestScalar>(grid: ProcessGrid, n: usize, tile: usize) -> usize {
    let plan = hetla::Plan::new(
        hetla::Algorithm::LuTiles {
            n,
            process_rows: grid.rows(),
        },
        tile,
        T::PRECISION,
    )
    .unwrap();
    let split = plan.split(&grid).unwrap();
    let bytes: usize = split.messages.iter().map(|m| plan.tile_bytes(m.tile)).sum();
    if grid.cols() == 1 {
        let (p, nt, size) = (grid.rows(), n.div_ceil(tile), size_of::<T>());
        let width = |j: usize| tile.min(n - j * tile);
        let mut hand = 0;
        for k in 0..nt {
            let (w, top) = (width(k), k % p);
            let others = (0..p)
                .filter(|&r| r != top && (k + 1..nt).any(|i| i % p == r))
                .count();
            let panel: usize = (k + 1..nt).filter(|i| i % p != top).map(width).sum();
            hand += 2 * panel * w * size + others * w * size;
            for j in (0..nt).filter(|&j| j != k) {
                let up_down = (tile + w) * width(j) * size;
                let u = if j > k { w * width(j) * size } else { 0 };
                hand += others * (up_down + u);
            }
            // But the old top tile (k, k - 1) is L as the previous panel left it, on that panel's
            // rank already.
            let previous = (k + p - 1) % p;
            if k > 0 && (k + 1..nt).any(|i| i % p == previous) {
                hand -= w * width(k - 1) * size;
            }
        }
        assert_eq!(bytes, hand, "{grid}, n {n}, tile {tile}");
    }
    bytes
}

fn lu_in_precision<T: TestScalar>(
    world: &mpi::topology::SimpleCommunicator,
    grid: ProcessGrid,
    (n, tile): (usize, usize),
) {
    use mpi::traits::{Communicator, CommunicatorCollectives, Root};
    let a = DistributedMatrix::<T>::random(world, (n, n), tile, grid, 3).unwrap();
    let mut lu = a.clone();
    let run = hetla::Lu::new()
        .clusters("1x1".parse().unwrap())
        .factor_distributed(world, &mut lu)
        .unwrap();
    assert_eq!(run.run.precision, T::PRECISION);
    assert_eq!(run.run.bytes_sent_by_rank, run.run.bytes_expected_by_rank);
    // ScaLAPACK's count on one process row: each panel, from its diagonal down, with its
    // interchanges, to every other rank (each holds a block column to update or to swap).
    let (entry, part) = (size_of::<T>(), size_of::<T>() / T::PARTS);
    let panels: usize = (0..n.div_ceil(tile))
        .map(|k| {
            let width = tile.min(n - k * tile);
            ((n - k * tile) * entry + part) * width
        })
        .sum();
    let total: usize = run.run.bytes_sent_by_rank.iter().sum();
    if grid.rows() == 1 {
        assert_eq!(total, panels * (grid.size() - 1));
    } else {
        assert_eq!(total, tiled_lu_bytes::<T>(grid, n, tile));
    }
    assert_eq!(run.singular, None);
    // The same interchanges on every rank: rank 0's, broadcast, are each rank's.
    let mut ipiv: Vec<u64> = run.ipiv.iter().map(|&p| p as u64).collect();
    world.process_at_rank(0).broadcast_into(&mut ipiv[..]);
    assert!(ipiv.iter().zip(&run.ipiv).all(|(&a, &b)| a as usize == b));
    // The residual probed where the tiles live accepts the factor, and refuses it with one
    // interchange undone.
    let probed = run.probed_residual(world, &a, &lu, 5).unwrap();
    assert!(probed < RESIDUAL_THRESHOLD, "probed residual {probed}");
    let mut wrong = run.clone();
    if let Some(i) = (0..n).find(|&i| wrong.ipiv[i] != i) {
        wrong.ipiv[i] = i;
        let bad = wrong.probed_residual(world, &a, &lu, 5).unwrap();
        assert!(
            bad > RESIDUAL_THRESHOLD,
            "residual with an interchange undone {bad}"
        );
    }
    // The solve: the backward error of LAPACK's ratio's order, what the count says sent.
    let b = DistributedRhs::<T>::random(world, (n, 3), tile, grid, 5).unwrap();
    let mut x = b.clone();
    let lu_builder = hetla::Lu::new().clusters("1x1".parse().unwrap());
    let solve = lu_builder
        .solve_distributed(world, &lu, &run, &mut x)
        .unwrap();
    assert_eq!(solve.bytes_sent_by_rank, solve.bytes_expected_by_rank);
    let eps = T::PRECISION.epsilon();
    let berr = solve_backward_error(world, &a, &x, &b).unwrap();
    assert!(berr < 10.0 * n as f64 * eps, "backward error {berr}");
    world.barrier();
    if let (Some(a), Some(f)) = (a.gather(world).unwrap(), lu.gather(world).unwrap()) {
        let residual = hetla::check::lu_residual(a.as_ref(), f.as_ref(), &run.ipiv);
        assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
        println!(
            "lu {} n {n} tile {tile}: residual {residual:.3e}, sent {:?}",
            T::PRECISION,
            run.run.bytes_sent_by_rank
        );
    }
}
