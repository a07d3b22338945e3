//! The public API end to end: residuals and solve accuracy over sizes and tile sizes for every
//! backend this build has, and every user error.

mod common;
use faer::{Mat, Par};
use hetla::check::{RESIDUAL_THRESHOLD, cholesky_residual, solve_backward_error};
use hetla::{Backend, Cholesky, Error, Storage, matgen::random_spd, solve_spd};
use proptest::prelude::*;

/// For each n: tiles that divide n, that do not, and that exceed n (2999 is prime, so its only
/// dividing tiles are 1, too slow, and 2999 itself).
const CASES: [(usize, &[usize]); 6] = [
    (1, &[1, 4]),
    (2, &[1, 2, 3]),
    (7, &[1, 7, 3, 5, 8]),
    (100, &[25, 100, 32, 48, 128]),
    (1000, &[250, 200, 96, 384, 1024]),
    (2999, &[2999, 256, 512, 3000]),
];

fn rhs(n: usize, k: usize) -> Mat<f64> {
    Mat::from_fn(n, k, |i, j| ((i * 31 + j * 17) % 13) as f64 - 6.0)
}

#[test]
fn residuals_and_solves_are_accurate_for_every_size_tile_and_backend() {
    let par = Par::rayon(2);
    for (n, tiles) in CASES {
        let a = random_spd(n, n as u64);
        let b = rhs(n, 3);
        for backend in Backend::available() {
            for &tile in tiles {
                let factor = Cholesky::new()
                    .backend(backend)
                    .tile(tile)
                    .factor(a.as_ref())
                    .unwrap();
                assert_eq!(factor.tile(), tile);
                let residual = cholesky_residual(a.as_ref(), factor.storage(), par);
                assert!(
                    residual < RESIDUAL_THRESHOLD,
                    "{backend} n={n} b={tile}: residual {residual}"
                );
                let x = factor.solve(b.as_ref()).unwrap();
                let err = solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), par);
                assert!(
                    err < 1e-13,
                    "{backend} n={n} b={tile}: backward error {err}"
                );
                println!("{backend} n={n:5} b={tile:5}: residual {residual:.2e}, solve {err:.2e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn any_size_and_tile_factors_accurately(n in 1usize..90, tile in 1usize..40, seed in 0u64..1000) {
        let a = random_spd(n, seed);
        let f = Cholesky::new().tile(tile).threads(1).factor(a.as_ref()).unwrap();
        prop_assert!(cholesky_residual(a.as_ref(), f.storage(), Par::Seq) < RESIDUAL_THRESHOLD);
    }
}

#[test]
fn in_place_factor_reads_only_the_lower_triangle() {
    let n = 50;
    let a = random_spd(n, 3);
    let mut m = a.clone();
    for j in 0..n {
        for i in 0..j {
            m[(i, j)] = f64::NAN; // never read, never touched
        }
    }
    for backend in Backend::available() {
        let mut f = m.clone();
        Cholesky::new()
            .backend(backend)
            .tile(16)
            .factor_in_place(f.as_mut())
            .unwrap();
        assert!(cholesky_residual(a.as_ref(), f.as_ref(), Par::Seq) < RESIDUAL_THRESHOLD);
        assert!(
            (0..n).all(|j| (0..j).all(|i| f[(i, j)].is_nan())),
            "{backend} touched the upper triangle"
        );
    }
}

#[test]
fn every_storage_gives_the_same_factor_and_leaves_the_upper_triangle() {
    // 769 = 6 x 128 + 1: the last tile row and column one scalar wide. (The checks entry by entry
    // run in the test's debug build: larger orders took seconds for nothing more.)
    for (n, tile) in [(7, 3), (100, 32), (600, 96), (600, 256), (769, 128)] {
        let a = random_spd(n, 2);
        let mut marked = a.clone();
        for j in 0..n {
            for i in 0..j {
                marked[(i, j)] = f64::NAN;
            }
        }
        let mut factors = Vec::new();
        for storage in [Storage::InPlace, Storage::TileMajor, Storage::Auto] {
            let mut f = marked.clone();
            Cholesky::new()
                .tile(tile)
                .storage(storage)
                .factor_in_place(f.as_mut())
                .unwrap();
            let residual = cholesky_residual(a.as_ref(), f.as_ref(), Par::rayon(2));
            assert!(
                residual < RESIDUAL_THRESHOLD,
                "{storage} n={n} b={tile}: {residual}"
            );
            assert!(
                (0..n).all(|j| (0..j).all(|i| f[(i, j)].is_nan())),
                "{storage} n={n} b={tile} touched the upper triangle"
            );
            factors.push(f);
        }
        let scale = (0..n).map(|i| a[(i, i)]).fold(0.0, f64::max).sqrt();
        for f in &factors[1..] {
            let gap = (0..n)
                .flat_map(|j| (j..n).map(move |i| (i, j)))
                .map(|(i, j)| (f[(i, j)] - factors[0][(i, j)]).abs())
                .fold(0.0, f64::max);
            assert!(
                gap <= 1e-12 * scale,
                "n={n} b={tile}: factors differ by {gap}"
            );
        }
    }
}

/// `factor_into` and `factor` read A from where it lies (column-major, or a row-major view as a
/// transposed matrix is) and leave the output as a copy then `factor_in_place` would: A's strict
/// upper triangle, and the factor of `factor_in_place`, to the last bit, in every storage; A is
/// unchanged, and an output of another shape is refused before any work.
#[test]
fn factor_into_reads_a_where_it_lies_and_leaves_a_copy_factored_in_place() {
    for (n, tile) in [(7, 3), (7, 64), (300, 64), (500, 96)] {
        let a = random_spd(n, 3);
        let mut marked = a.clone();
        for j in 0..n {
            for i in 0..j {
                marked[(i, j)] = (i * n + j) as f64;
            }
        }
        // The same matrix stored by rows: its transpose's storage holds A^T.
        let rows = marked.transpose().to_owned();
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let options = Cholesky::new().tile(tile).storage(storage);
            let mut want = marked.clone();
            options.factor_in_place(want.as_mut()).unwrap();
            for source in [marked.as_ref(), rows.as_ref().transpose()] {
                let before = source.to_owned();
                let mut out = Mat::zeros(n, n);
                options.factor_into(source, out.as_mut()).unwrap();
                assert!(out == want, "{storage} n={n} b={tile}");
                assert!(source == before.as_ref(), "{storage} n={n}: A changed");
                // Into a row-major output.
                let mut out_rows = Mat::<f64>::zeros(n, n);
                options
                    .factor_into(source, out_rows.as_mut().transpose_mut())
                    .unwrap();
                assert!(out_rows.transpose() == want, "{storage} n={n} b={tile}");
            }
            let factor = options.factor(marked.as_ref()).unwrap();
            assert!(factor.storage() == want.as_ref(), "{storage} n={n}");
        }
        let mut wrong = Mat::<f64>::zeros(n, n + 1);
        let err = Cholesky::new()
            .factor_into(a.as_ref(), wrong.as_mut())
            .unwrap_err();
        assert!(err.to_string().contains("output"), "{err}");
        assert!(wrong.as_ref() == Mat::<f64>::zeros(n, n + 1), "touched");
    }
}

/// `inverse_into` writes what `inverse` returns into the caller's matrix, to the last bit, whatever
/// it held and however it is stored (both triangles written); one of another shape is refused
/// before any work and left as it was.
#[test]
fn inverse_into_writes_the_inverse_into_the_callers_matrix_of_any_layout() {
    for (n, tile) in [(7, 64), (300, 64), (500, 96)] {
        let a = random_spd(n, 4);
        let factor = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap();
        let want = factor.inverse().unwrap();
        let mut out = Mat::<f64>::from_fn(n, n, |_, _| f64::NAN);
        factor.inverse_into(out.as_mut()).unwrap();
        assert!(out == want, "n={n} b={tile}");
        let mut rows = Mat::<f64>::from_fn(n, n, |_, _| f64::NAN);
        factor.inverse_into(rows.as_mut().transpose_mut()).unwrap();
        assert!(rows.transpose() == want, "n={n} b={tile}: row-major");
        let mut wrong = Mat::<f64>::zeros(n + 1, n);
        let err = factor.inverse_into(wrong.as_mut()).unwrap_err();
        assert!(err.to_string().contains("output"), "{err}");
        assert!(wrong == Mat::<f64>::zeros(n + 1, n), "touched");
    }
}

#[test]
fn slices_with_a_leading_dimension_factor_like_matrices() {
    let (n, ld) = (37, 41);
    let a = random_spd(n, 5);
    let mut data = vec![-7.0; ld * n];
    for j in 0..n {
        for i in 0..n {
            data[i + j * ld] = a[(i, j)];
        }
    }
    Cholesky::new()
        .tile(8)
        .factor_slice(&mut data, n, ld)
        .unwrap();
    let reference = Cholesky::new().tile(8).factor(a.as_ref()).unwrap().l();
    for j in 0..n {
        for i in j..n {
            assert!((data[i + j * ld] - reference[(i, j)]).abs() < 1e-14);
        }
        assert!(
            (n..ld).all(|i| data[i + j * ld] == -7.0),
            "padding rows were written"
        );
    }
    // Storage that does not fit is an error, not a panic.
    let err = Cholesky::new()
        .factor_slice(&mut data, n, n - 1)
        .unwrap_err();
    assert!(matches!(err, Error::Layout { what: "A", .. }), "{err}");
    let err = Cholesky::new()
        .factor_slice(&mut data[..100], n, ld)
        .unwrap_err();
    assert!(err.to_string().contains("too few"), "{err}");
}

#[test]
fn solve_handles_many_right_hand_sides_and_ragged_tiles() {
    let n = 45;
    let a = random_spd(n, 9);
    let b = rhs(n, 11);
    for backend in Backend::available() {
        let f = Cholesky::new()
            .backend(backend)
            .tile(8)
            .factor(a.as_ref())
            .unwrap();
        let x = f.solve(b.as_ref()).unwrap();
        assert!(solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), Par::Seq) < 1e-13);
    }
    let x = solve_spd(a.as_ref(), b.as_ref()).unwrap();
    assert!(solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), Par::Seq) < 1e-13);
}

#[test]
fn not_positive_definite_names_the_global_column() {
    // Tiles of one scalar on a matrix of 24 (a graph of 2600 tasks; of 171700 on one of 100).
    let cases = [0, 5, 37, 63, 64, 99]
        .map(|column| (100, column, &[7, 32, 64, 100, 128][..]))
        .into_iter()
        .chain([0, 5, 23].map(|column| (24, column, &[1][..])));
    for (n, column, tiles) in cases {
        let mut a = random_spd(n, 11);
        // The leading principal minors before `column` stay positive; this pivot is negative.
        a[(column, column)] = -1.0;
        for backend in Backend::available() {
            for &tile in tiles {
                let builder = Cholesky::new().backend(backend).tile(tile);
                let context = format!("{backend} tile {tile}");
                common::assert_not_positive_definite_at(builder, &a, column, &context);
            }
        }
    }
}

#[test]
fn bad_input_gives_the_matching_error() {
    let a = random_spd(6, 1);
    let rect = Mat::<f64>::zeros(4, 5);
    assert_eq!(
        Cholesky::new().factor(rect.as_ref()).unwrap_err(),
        Error::NotSquare {
            what: "A",
            rows: 4,
            cols: 5
        }
    );
    assert!(matches!(
        solve_spd(rect.as_ref(), rhs(4, 1).as_ref()),
        Err(Error::NotSquare { .. })
    ));

    let f = Cholesky::new().factor(a.as_ref()).unwrap();
    assert_eq!(
        f.solve(rhs(5, 2).as_ref()).unwrap_err(),
        Error::DimensionMismatch { n: 6, rows: 5 }
    );
    assert_eq!(
        solve_spd(a.as_ref(), rhs(7, 1).as_ref()).unwrap_err(),
        Error::DimensionMismatch { n: 6, rows: 7 }
    );

    let mut bad = a.clone();
    bad[(4, 2)] = f64::INFINITY;
    match Cholesky::new().factor(bad.as_ref()).unwrap_err() {
        Error::NonFinite {
            what: "A",
            row: 4,
            col: 2,
            value,
        } => assert!(value.is_infinite()),
        other => panic!("unexpected {other:?}"),
    }
    // NaN in the unread upper triangle is fine; in B it is not.
    bad[(4, 2)] = a[(4, 2)];
    bad[(1, 3)] = f64::NAN;
    assert!(Cholesky::new().factor(bad.as_ref()).is_ok());
    let mut b = rhs(6, 2);
    b[(5, 1)] = f64::NAN;
    assert!(matches!(
        f.solve(b.as_ref()),
        Err(Error::NonFinite {
            what: "B",
            row: 5,
            col: 1,
            ..
        })
    ));

    assert_eq!(
        Cholesky::new().tile(0).factor(a.as_ref()).unwrap_err(),
        Error::ZeroTileSize
    );
    assert!(matches!(
        Cholesky::new().threads(0).factor(a.as_ref()).unwrap_err(),
        Error::InvalidOption {
            option: "threads",
            ..
        }
    ));
    if !Backend::OpenBlas.is_available() {
        let err = Cholesky::new()
            .backend(Backend::OpenBlas)
            .factor(a.as_ref())
            .unwrap_err();
        assert!(err.to_string().contains("--features openblas"), "{err}");
    }
}

#[test]
fn empty_matrices_factor_and_solve_to_empty_results() {
    let a = Mat::<f64>::zeros(0, 0);
    let f = Cholesky::new().factor(a.as_ref()).unwrap();
    assert_eq!(f.n(), 0);
    let x = f.solve(Mat::<f64>::zeros(0, 3).as_ref()).unwrap();
    assert_eq!((x.nrows(), x.ncols()), (0, 3));
    assert_eq!(cholesky_residual(a.as_ref(), f.storage(), Par::Seq), 0.0);
}

/// A matrix of one tile takes the direct kernel path (no graph, no runtime): small ones on the
/// calling thread, larger ones on the shared platform's cluster. Both solve as the tiled path does
/// and name the failing column; calls without a platform share one.
#[test]
fn one_tile_matrices_take_the_direct_path_with_the_same_results() {
    let spec: hetla::ClusterSpec = "auto".parse().unwrap();
    let first = hetla::Platform::shared(&spec, Backend::Faer).unwrap();
    let again = hetla::Platform::shared(&spec, Backend::Faer).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    for n in [1, 64, 300, 512] {
        let a = random_spd(n, 11);
        let b = rhs(n, 3);
        let x = solve_spd(a.as_ref(), b.as_ref()).unwrap();
        assert!(solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), Par::Seq) < 1e-13);
        // The same system through the runtime (two tiles) agrees.
        let tiled = Cholesky::new()
            .tile(n.div_ceil(2).max(1))
            .factor(a.as_ref())
            .unwrap();
        let y = tiled.solve(b.as_ref()).unwrap();
        assert!(
            (&x - &y).norm_max() <= 1e-12 * x.norm_max().max(1.0),
            "n = {n}"
        );
        // A pivot that fails in the middle is named by its global column.
        let mut bad = a.clone();
        let col = n / 2;
        bad[(col, col)] = -1.0;
        match solve_spd(bad.as_ref(), b.as_ref()) {
            Err(Error::NotPositiveDefinite { column }) => assert_eq!(column, col, "n = {n}"),
            other => panic!("n = {n}: expected NotPositiveDefinite, got {other:?}"),
        }
    }
}

/// With OpenBLAS, a plan inverts the diagonal tile of each panel of four solves or more in a task
/// of its own, and the panel's solves are products with the inverse: the factor is as accurate in
/// every precision and storage, also where a tile is too ill-conditioned to be inverted.
#[test]
fn openblas_plans_invert_long_panels_in_tasks_of_their_own_and_stay_accurate() {
    if !Backend::OpenBlas.is_available() {
        return;
    }
    fn check<T: hetla::Scalar>(cond: Option<f64>) {
        let (n, tile) = (700, 100);
        let a: Mat<T> = match cond {
            Some(c) => hetla::matgen::random_hpd_conditioned(n, c, 3),
            None => hetla::matgen::random_hpd(n, 3),
        };
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let builder = Cholesky::new()
                .backend(Backend::OpenBlas)
                .tile(tile)
                .storage(storage);
            let plan = builder.plan(n, T::PRECISION).unwrap();
            // Seven tile rows: panels 0, 1 and 2 have 6, 5 and 4 solves.
            let inverses = plan
                .graph()
                .tasks()
                .iter()
                .filter(|t| t.op == hetla::Op::PanelInverse);
            assert_eq!(inverses.count(), 3);
            let mut l = a.clone();
            let trace = builder.factor_planned(&plan, l.as_mut()).unwrap();
            let kernels = trace.summary().kernels;
            assert!(
                kernels
                    .iter()
                    .any(|k| k.op == "panel_inverse" && k.count == 3)
            );
            // The store's strict upper triangle is the caller's: never written.
            assert!((0..n).all(|j| (0..j).all(|i| l[(i, j)] == a[(i, j)])));
            let r = cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq);
            assert!(
                r < RESIDUAL_THRESHOLD,
                "{} {storage:?} cond {cond:?}: {r}",
                T::PRECISION
            );
        }
    }
    check::<f32>(None);
    check::<f64>(None);
    check::<hetla::c32>(None);
    check::<hetla::c64>(None);
    check::<f64>(Some(1e12));
}
