//! What a factor offers beyond a solve: log-determinant, condition estimate, L, rank-k updates and
//! downdates, and batches of small systems, in every precision, on known answers and on failure.

mod common;
use faer::Mat;
use faer::linalg::solvers::DenseSolveCore;
use hetla::matgen::{random_hpd, random_hpd_conditioned};
use hetla::{Backend, Cholesky, Error, Scalar, c32, c64};

/// A = L L^H with L integer lower triangular and diagonally dominant (diagonal 5..=7, entries in
/// -1..=1 (+-i for complex types) on three subdiagonals): every entry of A is an exact small
/// integer, A is well conditioned, and det A = prod L_kk^2 exactly.
fn integer_spd<T: Scalar>(n: usize, seed: u64) -> (Mat<T>, f64) {
    let seed = seed as usize;
    let entry = |i: usize, j: usize| ((i * 7 + j * 13 + seed * 5) % 3) as f64 - 1.0;
    let diag = |k: usize| (5 + (k + seed) % 3) as f64;
    let l = Mat::<T>::from_fn(n, n, |i, j| {
        if i == j {
            T::from_f64(diag(i))
        } else if matches!(i.wrapping_sub(j), 1 | 2 | 5) {
            T::from_parts(entry(i, j), entry(j, i))
        } else {
            T::from_f64(0.0)
        }
    });
    let a = &l * l.adjoint();
    let log_det = 2.0 * (0..n).map(|k| diag(k).ln()).sum::<f64>();
    (a, log_det)
}

fn log_det_is_exact<T: Scalar>() {
    for (n, tile) in [(1, 1), (40, 64), (150, 32)] {
        let (a, exact) = integer_spd::<T>(n, 3);
        let factor = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap();
        let error = (factor.log_det() - exact).abs() / exact.abs().max(1.0);
        // The factor of an exact integer matrix is exact to round-off in its own precision.
        let allowed = if T::PRECISION.epsilon() > 1e-10 {
            1e-5
        } else {
            1e-12
        };
        assert!(error < allowed, "{} n {n}: {error:e}", T::PRECISION);
    }
}

#[test]
fn log_det_matches_known_determinants_in_every_precision() {
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => log_det_is_exact::<T>());
    }
    // det: 2x2 [[4, 2], [2, 3]] has det 8; the 1-D Laplacian tridiag(-1, 2, -1) has det n + 1.
    let a = Mat::from_fn(2, 2, |i, j| [[4.0, 2.0], [2.0, 3.0]][i][j]);
    let det = Cholesky::new().factor(a.as_ref()).unwrap().det().unwrap();
    assert!((det - 8.0).abs() < 1e-14);
    let n = 500;
    let laplacian = Mat::from_fn(n, n, |i, j| match i.abs_diff(j) {
        0 => 2.0,
        1 => -1.0,
        _ => 0.0,
    });
    let factor = Cholesky::new().tile(96).factor(laplacian.as_ref()).unwrap();
    assert!((factor.det().unwrap() / (n + 1) as f64 - 1.0).abs() < 1e-12);
    // 0.01 I of order 400: det = 1e-800 underflows, its logarithm does not.
    let small = Mat::from_fn(400, 400, |i, j| if i == j { 0.01 } else { 0.0 });
    let factor = Cholesky::new().factor(small.as_ref()).unwrap();
    let expected = 400.0 * 0.01f64.ln();
    assert!((factor.log_det() / expected - 1.0).abs() < 1e-14);
    match factor.det() {
        Err(Error::DeterminantOutOfRange { log_det }) => assert_eq!(log_det, factor.log_det()),
        other => panic!("{other:?}"),
    }
    let empty = Cholesky::new()
        .factor(Mat::<f64>::zeros(0, 0).as_ref())
        .unwrap();
    assert_eq!((empty.log_det(), empty.det().unwrap()), (0.0, 1.0));
    assert_eq!(empty.rcond().unwrap(), 1.0);
}

/// The exact 1-norm condition number of a small Hermitian matrix, through its inverse.
fn exact_condition<T: Scalar>(a: &Mat<T>) -> f64 {
    let full = Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
        if i >= j {
            a[(i, j)]
        } else {
            T::conj_impl(&a[(j, i)])
        }
    });
    let inverse = full.as_ref().partial_piv_lu().inverse();
    let norm1 = |m: &Mat<T>| {
        (0..m.ncols())
            .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs_f64()).sum::<f64>())
            .fold(0.0, f64::max)
    };
    norm1(&full) * norm1(&inverse)
}

fn rcond_is_within_ten<T: Scalar>(conds: &[f64]) {
    for &cond in conds {
        for (n, tile) in [(60, 100), (200, 48)] {
            let a = random_hpd_conditioned::<T>(n, cond, 11);
            let factor = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap();
            let estimate = 1.0 / factor.rcond().unwrap();
            let exact = exact_condition(&a);
            assert!(
                estimate <= exact * 1.001 && estimate >= exact / 10.0,
                "{} n {n} cond {cond}: estimate {estimate:e}, exact {exact:e}",
                T::PRECISION
            );
        }
    }
}

#[test]
fn rcond_is_within_a_factor_ten_of_the_exact_condition() {
    rcond_is_within_ten::<f64>(&[10.0, 1e6, 1e12]);
    rcond_is_within_ten::<c64>(&[10.0, 1e6, 1e12]);
    rcond_is_within_ten::<f32>(&[10.0, 1e4]);
    rcond_is_within_ten::<c32>(&[10.0, 1e4]);
    // A = 0 is not positive definite; a 1x1 factor has rcond 1.
    let one = Cholesky::new()
        .factor(Mat::from_fn(1, 1, |_, _| 5.0).as_ref())
        .unwrap();
    assert_eq!(one.rcond().unwrap(), 1.0);
}

#[test]
fn the_rcond_of_a_factor_made_elsewhere_is_the_factors_own_and_bad_norms_are_refused() {
    for seed in 0..3 {
        let a = random_hpd_conditioned::<c64>(50, 1e6, seed);
        let f = Cholesky::new().factor(a.as_ref()).unwrap();
        let ours = hetla::cholesky_rcond(f.l().as_ref(), f.norm1().unwrap()).unwrap();
        let theirs = f.rcond().unwrap();
        assert!(
            (ours - theirs).abs() <= 1e-8 * theirs,
            "{ours} against {theirs}"
        );
        assert!(ours > 1e-7 && ours < 1e-5, "cond 1e6: {ours}");
    }
    let l = Mat::<f64>::identity(3, 3);
    assert_eq!(hetla::cholesky_rcond(l.as_ref(), 1.0).unwrap(), 1.0);
    assert_eq!(hetla::cholesky_rcond(l.as_ref(), 0.0).unwrap(), 0.0);
    assert!(hetla::cholesky_rcond(l.as_ref(), f64::NAN).is_err());
    assert!(hetla::cholesky_rcond(Mat::<f64>::zeros(2, 3).as_ref(), 1.0).is_err());
    let empty = Mat::<f64>::zeros(0, 0);
    assert_eq!(hetla::cholesky_rcond(empty.as_ref(), 1.0).unwrap(), 1.0);
}

#[cfg(feature = "openblas")]
#[test]
fn rcond_equals_lapack_dpocon_on_the_same_factor() {
    for (n, cond, tile) in [(50, 1e3, 64), (300, 1e8, 64), (700, 1e11, 256)] {
        let a = random_hpd_conditioned::<f64>(n, cond, 5);
        let factor = Cholesky::new()
            .backend(hetla::Backend::OpenBlas)
            .tile(tile)
            .factor(a.as_ref())
            .unwrap();
        let l = factor.l();
        let anorm = factor.norm1().unwrap();
        let rcond = common::lapack::dpocon(l.as_ref(), anorm);
        let ours = factor.rcond().unwrap();
        eprintln!("n {n} cond {cond:e}: hetla rcond {ours:.15e}, dpocon {rcond:.15e}");
        assert!(
            (ours / rcond - 1.0).abs() < 1e-10,
            "n {n}: hetla {ours:e}, dpocon {rcond:e}"
        );
    }
}

fn views<T: Scalar>(m: &[Mat<T>]) -> Vec<faer::MatRef<'_, T>> {
    m.iter().map(|m| m.as_ref()).collect()
}

/// ||A' - L' L'^H||_max / ||A'||_max for the updated factor and the matrix it should factor.
fn factor_error<T: Scalar>(a: &Mat<T>, l: &Mat<T>) -> f64 {
    let product = l * l.adjoint();
    let mut worst = 0.0_f64;
    let mut scale = 0.0_f64;
    for j in 0..a.ncols() {
        for i in j..a.nrows() {
            worst = worst.max((product[(i, j)] - a[(i, j)]).abs_f64());
            scale = scale.max(a[(i, j)].abs_f64());
        }
    }
    worst / scale
}

fn updates_and_downdates<T: Scalar>() {
    let eps = T::PRECISION.epsilon();
    for (n, tile, k) in [(1, 1, 1), (90, 128, 1), (257, 64, 3)] {
        let a = random_hpd::<T>(n, 21);
        let w = Mat::<T>::from_fn(n, k, |i, j| {
            T::from_parts(((i * 3 + j) as f64 * 0.7).sin(), ((i + 5 * j) as f64).cos())
        });
        let updated = &a + &w * w.adjoint();
        let mut factor = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap();
        factor.update(w.as_ref()).unwrap();
        let error = factor_error(&updated, &factor.l());
        assert!(
            error < 50.0 * n as f64 * eps,
            "{} update n {n}: {error:e}",
            T::PRECISION
        );
        // And back: downdating the updated factor gives A's.
        factor.downdate(w.as_ref()).unwrap();
        let error = factor_error(&a, &factor.l());
        assert!(
            error < 200.0 * n as f64 * eps,
            "{} downdate n {n}: {error:e}",
            T::PRECISION
        );
        // The diagonal stays real and positive, and solves use the new factor.
        assert!((0..n).all(|i| factor.storage()[(i, i)].re_f64() > 0.0));
        assert!((0..n).all(|i| factor.storage()[(i, i)].to_c64().im == 0.0));
    }
}

#[test]
fn rank_k_updates_and_downdates_refactor_in_every_precision() {
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => updates_and_downdates::<T>());
    }
}

#[test]
fn a_downdate_that_loses_definiteness_leaves_the_factor_unchanged() {
    let n = 120;
    let a = random_hpd::<c64>(n, 4);
    for k in [1, 3] {
        let mut factor = Cholesky::new().tile(50).factor(a.as_ref()).unwrap();
        let before = factor.l();
        // Column k - 1 of W is large: removing it leaves an indefinite matrix.
        let w = Mat::<c64>::from_fn(n, k, |i, j| {
            let size = if j + 1 == k { 1e3 } else { 1e-2 };
            c64::new(size * (1.0 + i as f64 / n as f64), 0.5)
        });
        match factor.downdate(w.as_ref()) {
            Err(Error::DowndateNotPositiveDefinite { column, norm }) => {
                assert_eq!(column, k - 1);
                assert!(norm >= 1.0);
            }
            other => panic!("k {k}: {other:?}"),
        }
        assert!(factor.l() == before, "k {k}: the factor changed");
        // Norm exactly at 1 is not definite either: w = L e_1 gives A - w w^T singular.
        let mut real = Cholesky::new()
            .factor(hetla::matgen::random_spd(30, 2).as_ref())
            .unwrap();
        let w = real.l().col(0).as_mat().to_owned();
        let kept = real.l();
        assert!(real.downdate(w.as_ref()).is_err() || real.rcond().unwrap() < 1e-12);
        if real.l() != kept {
            // Accepted only as a (numerically) singular factor; nothing else changed shape.
            assert_eq!(real.n(), 30);
        }
    }
    let mut factor = Cholesky::new()
        .factor(hetla::matgen::random_spd(10, 1).as_ref())
        .unwrap();
    let before = factor.l();
    assert!(matches!(
        factor.update(Mat::<f64>::zeros(9, 1).as_ref()),
        Err(Error::DimensionMismatch { n: 10, rows: 9 })
    ));
    let mut nan = Mat::<f64>::zeros(10, 2);
    nan[(4, 1)] = f64::NAN;
    assert!(matches!(
        factor.downdate(nan.as_ref()),
        Err(Error::NonFinite {
            what: "W",
            row: 4,
            col: 1,
            ..
        })
    ));
    assert!(factor.l() == before);
    // After a change ||A||_1 is estimated from L L^H: still close to the exact norm.
    let a = hetla::matgen::random_spd(60, 8);
    let w = Mat::from_fn(60, 1, |i, _| (i as f64).sin());
    let mut factor = Cholesky::new().factor(a.as_ref()).unwrap();
    factor.update(w.as_ref()).unwrap();
    let updated = &a + &w * w.transpose();
    let exact = (0..60)
        .map(|j| {
            (0..60)
                .map(|i| updated[(i.max(j), i.min(j))].abs())
                .sum::<f64>()
        })
        .fold(0.0, f64::max);
    let estimate = factor.norm1().unwrap();
    assert!(estimate <= exact * (1.0 + 1e-12) && estimate >= exact / 3.0);
}

#[test]
fn into_l_is_l_without_a_copy() {
    let a = random_hpd::<c32>(70, 9);
    let factor = Cholesky::new().tile(32).factor(a.as_ref()).unwrap();
    let l = factor.l();
    assert!(factor.into_l() == l);
}

#[test]
fn a_hermitian_product_with_round_off_on_its_diagonal_factors() {
    // The case: L lower triangular with complex entries and a positive real diagonal; L
    // L^H as computed carries imaginary round-off on its diagonal.
    let n = 200;
    let l = Mat::<c64>::from_fn(n, n, |i, j| {
        if i == j {
            c64::new(2.0 + (i % 7) as f64, 0.0)
        } else if i > j {
            c64::new(((i * j) as f64).sin(), ((i + 2 * j) as f64).cos() / 3.0)
        } else {
            c64::new(0.0, 0.0)
        }
    });
    let a = &l * l.adjoint();
    assert!(
        (0..n).any(|i| a[(i, i)].im != 0.0),
        "the product is exact here"
    );
    for tile in [n, 64] {
        let factor = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap();
        let error = factor_error(&a, &factor.l());
        assert!(error < 1e-13, "tile {tile}: {error:e}");
    }
    let single = a.as_ref().to_owned();
    let single = Mat::<c32>::from_fn(n, n, |i, j| {
        c32::new(single[(i, j)].re as f32, single[(i, j)].im as f32)
    });
    assert!(Cholesky::new().factor(single.as_ref()).is_ok());
    assert!(hetla::solve_spd_mixed(a.as_ref(), Mat::<c64>::ones(n, 1).as_ref()).is_ok());
}

#[test]
fn a_batch_solves_each_system_and_reports_each_failure_where_it_is() {
    let sizes = [1, 8, 64, 33, 100, 5, 64, 64, 17, 0];
    let mut a: Vec<Mat<f64>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| hetla::matgen::random_spd(n, i as u64))
        .collect();
    let b: Vec<Mat<f64>> = sizes
        .iter()
        .map(|&n| Mat::from_fn(n, 2, |i, j| (i + j) as f64))
        .collect();
    // System 3 has a non-positive pivot at column 20; system 6 a NaN; system 7 a B of the wrong
    // size.
    a[3][(20, 20)] = -1.0;
    a[6][(10, 3)] = f64::NAN;
    let mut b = b;
    b[7] = Mat::zeros(63, 1);
    let results = hetla::solve_spd_batch(&views(&a), &views(&b)).unwrap();
    assert_eq!(results.len(), sizes.len());
    for (i, result) in results.iter().enumerate() {
        match (i, result) {
            (3, Err(Error::NotPositiveDefinite { column })) => assert_eq!(*column, 20),
            (
                6,
                Err(Error::NonFinite {
                    row: 10, col: 3, ..
                }),
            ) => {}
            (7, Err(Error::DimensionMismatch { n: 64, rows: 63 })) => {}
            (3 | 6 | 7, other) => panic!("system {i}: {other:?}"),
            (_, Ok(x)) => {
                let berr = hetla::check::solve_backward_error(
                    a[i].as_ref(),
                    x.as_ref(),
                    b[i].as_ref(),
                    faer::Par::Seq,
                );
                assert!(berr < 1e-14, "system {i}: {berr:e}");
            }
            (_, Err(e)) => panic!("system {i}: {e}"),
        }
    }
    assert!(matches!(
        hetla::solve_spd_batch(&views(&a), &views(&b[..3])),
        Err(Error::InvalidOption { option: "b", .. })
    ));
    // On a platform of two clusters of one core, complex, and as factors.
    let z: Vec<Mat<c64>> = (0..40)
        .map(|i| random_hpd::<c64>(10 + i % 9, i as u64))
        .collect();
    let zb: Vec<Mat<c64>> = z.iter().map(|a| Mat::ones(a.nrows(), 3)).collect();
    let two = Cholesky::new().clusters("2x1".parse().unwrap());
    let zv = z.iter().map(|m| m.as_ref()).collect::<Vec<_>>();
    let zbv = zb.iter().map(|m| m.as_ref()).collect::<Vec<_>>();
    let solved = two.solve_batch(&zv, &zbv).unwrap();
    let factors = two.factor_batch(&zv).unwrap();
    for i in 0..40 {
        let one = hetla::solve_spd(z[i].as_ref(), zb[i].as_ref()).unwrap();
        let x = solved[i].as_ref().unwrap();
        assert!((x - &one).norm_max() < 1e-12 * one.norm_max());
        let factor = factors[i].as_ref().unwrap();
        let y = factor.solve(zb[i].as_ref()).unwrap();
        assert!((&y - &one).norm_max() < 1e-12 * one.norm_max());
    }
}

/// ||A X - I||_1 / (n ||A||_1 ||X||_1 eps), LAPACK's test ratio of an inverse (dpot03).
fn inverse_ratio<T: Scalar>(a: &Mat<T>, x: &Mat<T>) -> f64 {
    let n = a.nrows();
    let full = Mat::from_fn(n, n, |i, j| {
        if i >= j {
            a[(i, j)]
        } else {
            T::conj_impl(&a[(j, i)])
        }
    });
    let r = &full * x - Mat::<T>::identity(n, n);
    let norm1 = |m: &Mat<T>| {
        (0..m.ncols())
            .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs_f64()).sum::<f64>())
            .fold(0.0, f64::max)
    };
    norm1(&r) / (n as f64 * norm1(&full) * norm1(x) * T::PRECISION.epsilon())
}

fn inverses<T: Scalar>() {
    for (n, tile, cond) in [(1, 1, 1.0), (70, 128, 1e3), (250, 64, 1e5), (301, 48, 10.0)] {
        let a = random_hpd_conditioned::<T>(n, cond, 13);
        for spec in ["1x1", "2x1"] {
            let factor = Cholesky::new()
                .clusters(spec.parse().unwrap())
                .tile(tile)
                .factor(&a)
                .unwrap();
            let x = factor.inverse().unwrap();
            let ratio = inverse_ratio(&a, &x);
            assert!(
                ratio < 30.0,
                "{} n {n} tile {tile} on {spec}: {ratio}",
                T::PRECISION
            );
            // Hermitian, both triangles.
            for j in 0..n {
                for i in 0..j {
                    assert_eq!(x[(i, j)], T::conj_impl(&x[(j, i)]));
                }
            }
            // The factor is still the factor.
            assert!(factor.solve(Mat::<T>::ones(n, 1).as_ref()).is_ok());
        }
    }
}

#[test]
fn the_inverse_passes_lapacks_test_in_every_precision() {
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => inverses::<T>());
    }
    // Of order 0: empty.
    let empty = Cholesky::new()
        .factor(Mat::<f64>::zeros(0, 0).as_ref())
        .unwrap();
    assert_eq!(empty.inverse().unwrap().nrows(), 0);
}

#[test]
fn batches_factor_in_place_and_into_outputs_as_the_single_factorisation_does() {
    fn check<T: Scalar>(backend: Backend) {
        let a: Vec<Mat<T>> = (0..30)
            .map(|i| random_hpd::<T>(5 + i % 11, 100 + i as u64))
            .collect();
        let chol = Cholesky::new()
            .backend(backend)
            .clusters("2x1".parse().unwrap());
        let single: Vec<Mat<T>> = a
            .iter()
            .map(|a| chol.factor(a.as_ref()).unwrap().l())
            .collect();
        let tol = 100.0 * T::PRECISION.epsilon();
        let lower_eq = |l: &Mat<T>, got: &Mat<T>| {
            let n = l.nrows();
            (0..n).all(|j| {
                (j..n).all(|i| {
                    (l[(i, j)] - got[(i, j)]).abs_f64() <= tol * (1.0 + l[(i, j)].abs_f64())
                })
            })
        };
        let upper_kept = |a: &Mat<T>, got: &Mat<T>| {
            let n = a.nrows();
            (0..n).all(|j| (0..j).all(|i| a[(i, j)] == got[(i, j)]))
        };
        // In place: the lower triangles become L, the strict upper ones are left alone.
        let mut work = a.clone();
        let mut views: Vec<_> = work.iter_mut().map(|m| m.as_mut()).collect();
        let done = chol.factor_batch_in_place(&mut views).unwrap();
        assert!(done.iter().all(|r| r.is_ok()));
        for i in 0..a.len() {
            assert!(lower_eq(&single[i], &work[i]), "in place, matrix {i}");
            assert!(
                upper_kept(&a[i], &work[i]),
                "in place, matrix {i}: upper triangle changed"
            );
        }
        // Into outputs: A whole, then L in the lower triangle; A unchanged.
        let mut out: Vec<Mat<T>> = a.iter().map(|a| Mat::zeros(a.nrows(), a.ncols())).collect();
        let sources: Vec<_> = a.iter().map(|m| m.as_ref()).collect();
        let mut outs: Vec<_> = out.iter_mut().map(|m| m.as_mut()).collect();
        let done = chol.factor_batch_into(&sources, &mut outs).unwrap();
        assert!(done.iter().all(|r| r.is_ok()));
        for i in 0..a.len() {
            assert!(lower_eq(&single[i], &out[i]), "into, matrix {i}");
            assert!(
                upper_kept(&a[i], &out[i]),
                "into, matrix {i}: upper triangle not A's"
            );
        }
    }
    check::<f64>(Backend::Faer);
    check::<c32>(Backend::Faer);
    #[cfg(feature = "openblas")]
    {
        check::<f64>(Backend::OpenBlas);
        check::<c64>(Backend::OpenBlas);
    }
}

#[test]
fn a_failing_matrix_of_a_batch_into_outputs_is_reported_where_it_is() {
    let mut a: Vec<Mat<f64>> = (0..6).map(|i| random_hpd::<f64>(8, i)).collect();
    a[3][(5, 5)] = -1.0;
    a[4][(2, 1)] = f64::NAN;
    let sources: Vec<_> = a.iter().map(|m| m.as_ref()).collect();
    let mut out: Vec<Mat<f64>> = (0..6).map(|_| Mat::zeros(8, 8)).collect();
    let mut outs: Vec<_> = out.iter_mut().map(|m| m.as_mut()).collect();
    let done = Cholesky::new()
        .factor_batch_into(&sources, &mut outs)
        .unwrap();
    assert!(
        matches!(done[3], Err(Error::NotPositiveDefinite { column: 5 })),
        "{:?}",
        done[3]
    );
    assert!(
        matches!(done[4], Err(Error::NonFinite { .. })),
        "{:?}",
        done[4]
    );
    assert!(
        done.iter()
            .enumerate()
            .all(|(i, r)| r.is_ok() == !matches!(i, 3 | 4))
    );
    // Lengths and shapes that do not match are refused.
    let mut short: Vec<_> = out[..2].iter_mut().map(|m| m.as_mut()).collect();
    assert!(matches!(
        Cholesky::new().factor_batch_into(&sources, &mut short),
        Err(Error::InvalidOption { option: "out", .. })
    ));
    let mut wrong = [Mat::<f64>::zeros(7, 7)];
    let mut wrong: Vec<_> = wrong.iter_mut().map(|m| m.as_mut()).collect();
    let done = Cholesky::new()
        .factor_batch_into(&sources[..1], &mut wrong)
        .unwrap();
    assert!(matches!(
        done[0],
        Err(Error::InvalidOption { option: "out", .. })
    ));
}
