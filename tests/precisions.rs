//! The library in every precision: tiled Cholesky on ragged tiles against faer's own Cholesky,
//! Hermitian inputs with complex off-diagonal entries, the checks on complex input, solves, and the
//! mixed-precision solve with its fallback.

use faer::{Mat, MatRef, Side};
use hetla::matgen::{random_hpd, random_hpd_conditioned};
use hetla::{Backend, Cholesky, RefinementPath, Scalar, c32, c64};

/// max |x - y| / max |y|, over the lower triangles.
fn lower_rel_diff<T: Scalar>(x: MatRef<'_, T>, y: MatRef<'_, T>) -> f64 {
    let (mut d, mut s) = (0.0_f64, 0.0_f64);
    for j in 0..y.ncols() {
        for i in j..y.nrows() {
            d = d.max((x[(i, j)].to_c64() - y[(i, j)].to_c64()).norm());
            s = s.max(y[(i, j)].abs_f64());
        }
    }
    d / s
}

/// ||A X - B||_max / (||A||_max ||X||_max n), A full.
fn backward_error<T: Scalar>(a: MatRef<'_, T>, x: MatRef<'_, T>, b: MatRef<'_, T>) -> f64 {
    let wide = |m: MatRef<'_, T>| Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, j)].to_c64());
    let (a, x, b) = (wide(a), wide(x), wide(b));
    let r = &a * &x - &b;
    let max = |m: &Mat<c64>| m.norm_max();
    max(&r) / (max(&a) * max(&x) * a.nrows() as f64)
}

fn factor_matches_faer<T: Scalar>(backend: Backend) {
    // Ragged: 300 = 4 tiles of 64 and one of 44.
    let n = 300;
    let a = random_hpd::<T>(n, 7);
    let ours = Cholesky::new()
        .backend(backend)
        .threads(2)
        .tile(64)
        .factor(a.as_ref())
        .unwrap();
    let theirs = a.as_ref().llt(Side::Lower).unwrap().L().to_owned();
    let diff = lower_rel_diff(ours.l().as_ref(), theirs.as_ref());
    let eps = T::PRECISION.epsilon();
    assert!(
        diff < 50.0 * eps * (n as f64).sqrt(),
        "{} {backend}: {diff:e}",
        T::PRECISION
    );
    // And a solve in the same precision.
    let b = Mat::from_fn(n, 3, |i, j| T::from_parts(i as f64 - j as f64, j as f64));
    let x = ours.solve(b.as_ref()).unwrap();
    let berr = backward_error(a.as_ref(), x.as_ref(), b.as_ref());
    assert!(
        berr < 10.0 * eps,
        "{} {backend} solve: {berr:e}",
        T::PRECISION
    );
    let x2 = hetla::solve_spd(a.as_ref(), b.as_ref()).unwrap();
    assert!(backward_error(a.as_ref(), x2.as_ref(), b.as_ref()) < 10.0 * eps);
}

#[test]
fn every_precision_factors_on_ragged_tiles_like_faer() {
    for backend in Backend::available() {
        factor_matches_faer::<f32>(backend);
        factor_matches_faer::<f64>(backend);
        factor_matches_faer::<c32>(backend);
        factor_matches_faer::<c64>(backend);
    }
}

#[test]
fn hermitian_inputs_have_complex_off_diagonals_and_real_diagonals() {
    let a = random_hpd::<c64>(50, 1);
    assert!((0..50).all(|i| a[(i, i)].im == 0.0));
    assert!(a[(7, 3)].im != 0.0 && a[(3, 7)] == a[(7, 3)].conj());
    // A transposed (not conjugated) factor would not reproduce A: the factor must be
    // L L^H, with the complex parts in place.
    let l = Cholesky::new().tile(16).factor(a.as_ref()).unwrap().l();
    let llh = &l * l.adjoint();
    assert!((&llh - &a).norm_max() < 1e-12 * a.norm_max());
    let llt = &l * l.transpose();
    assert!((&llt - &a).norm_max() > 1e-3 * a.norm_max());
}

#[test]
fn the_imaginary_parts_of_a_complex_diagonal_are_not_read_and_factors_have_real_diagonals() {
    // As LAPACK: only the real part of a Hermitian matrix's diagonal is read (a matrix computed in
    // single precision and widened carries round-off there; scipy and numpy factor it).
    fn check<T: Scalar>(tilt: impl Fn(T) -> T) {
        let p = T::PRECISION;
        let a = random_hpd::<T>(300, 2);
        let mut tilted = a.clone();
        for k in [5, 150, 299] {
            tilted[(k, k)] = tilt(tilted[(k, k)]);
        }
        for tile in [64, 300] {
            let l = Cholesky::new().tile(tile).factor(a.as_ref()).unwrap().l();
            let f = Cholesky::new().tile(tile).factor(tilted.as_ref()).unwrap();
            assert_eq!(f.l(), l, "{p} tile {tile}: the imaginary parts were read");
            // Exactly real diagonals: L's and the inverse's (numpy's tests require 0).
            let inverse = f.inverse().unwrap();
            for k in 0..300 {
                assert_eq!(l[(k, k)].to_c64().im, 0.0, "{p} tile {tile}: L ({k}, {k})");
                assert_eq!(
                    inverse[(k, k)].to_c64().im,
                    0.0,
                    "{p} tile {tile}: inverse ({k}, {k})"
                );
            }
        }
        // And in a batch (faer's own call on each matrix).
        let batch = Cholesky::new().factor_batch(&[a.as_ref()]).unwrap();
        let batched = batch[0].as_ref().unwrap().l();
        assert!(
            (0..300).all(|k| batched[(k, k)].to_c64().im == 0.0),
            "{p}: batch"
        );
        // And after a rank-2 update and downdate.
        let mut f = Cholesky::new().tile(64).factor(a.as_ref()).unwrap();
        let w = hetla::matgen::random_in::<T>(300, 2, 9);
        f.update(w.as_ref()).unwrap();
        let updated = f.l();
        f.downdate(w.as_ref()).unwrap();
        let downdated = f.l();
        for k in 0..300 {
            assert_eq!(
                updated[(k, k)].to_c64().im,
                0.0,
                "{p}: updated L ({k}, {k})"
            );
            assert_eq!(
                downdated[(k, k)].to_c64().im,
                0.0,
                "{p}: downdated L ({k}, {k})"
            );
        }
        let x = hetla::solve_spd(tilted.as_ref(), Mat::<T>::ones(300, 1).as_ref()).unwrap();
        let y = hetla::solve_spd(a.as_ref(), Mat::<T>::ones(300, 1).as_ref()).unwrap();
        assert_eq!(x, y, "{p}");
    }
    check::<c32>(|z| c32::new(z.re, 0.5));
    check::<c64>(|z| c64::new(z.re, -1e-3));
}

#[test]
fn mixed_precision_refines_to_double_accuracy() {
    let n = 400;
    for cond in [1.0e2, 1.0e5] {
        let a = random_hpd_conditioned::<f64>(n, cond, 3);
        let b = Mat::from_fn(n, 2, |i, j| (i as f64 * 0.37 + j as f64).sin());
        let (x, how) = Cholesky::new()
            .tile(96)
            .solve_refined(a.as_ref(), b.as_ref())
            .unwrap();
        assert_eq!(how.path, RefinementPath::Mixed, "cond {cond}");
        assert_eq!(how.factored_in, hetla::Precision::S);
        assert!(how.factor_seconds.is_some_and(|s| s > 0.0), "{how:?}");
        assert!(how.iterations >= 1 && how.iterations <= 10, "{how:?}");
        let berr = backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        let x64 = hetla::solve_spd(a.as_ref(), b.as_ref()).unwrap();
        let berr64 = backward_error(a.as_ref(), x64.as_ref(), b.as_ref());
        assert!(
            berr <= 4.0 * berr64.max(f64::EPSILON / 8.0),
            "cond {cond}: {berr:e} vs {berr64:e}"
        );
    }
    // Complex: c32 factor, c64 refinement.
    let a = random_hpd_conditioned::<c64>(200, 1e3, 4);
    let b = Mat::from_fn(200, 1, |i, _| c64::new(1.0, i as f64 / 200.0));
    let (x, how) = hetla::solve_spd_mixed(a.as_ref(), b.as_ref()).unwrap();
    assert_eq!(
        (how.path, how.factored_in),
        (RefinementPath::Mixed, hetla::Precision::C)
    );
    assert!(backward_error(a.as_ref(), x.as_ref(), b.as_ref()) < 1e-15);
}

/// Beyond classical refinement with a single factor, within GMRES-IR's reach, in d and z (it fell
/// back to double before GMRES-IR), LAPACK's backward error met: M^H M with M's last column nearly
/// its first (condition number about 1e14, one eigenvalue far below the others). In d the single
/// factorisation meets a non-positive pivot, and the factor of A with its diagonal raised
/// preconditions GMRES; in z its rounding gives a positive pivot, classical refinement stalls, and
/// GMRES-IR starts from that factor.
#[test]
fn gmres_ir_refines_where_classical_refinement_stalls_in_every_double_precision() {
    fn check<T: hetla::Refinable>() {
        let n = 300;
        let mut m = Mat::from_fn(n, n, |i, j| {
            let v = ((i * 13 + j * 7) % 11) as f64 / 11.0 - 0.5;
            T::from_parts(if i == j { 10.0 } else { v }, 0.1 * v)
        });
        for i in 0..n {
            m[(i, n - 1)] = m[(i, 0)] + T::from_f64(1e-7 * ((i * 7 % 5) as f64 - 2.0));
        }
        let a = m.adjoint() * &m;
        let b = Mat::from_fn(n, 1, |i, _| T::from_parts(1.0 + i as f64 * 1e-3, 0.5));
        let (x, how) = Cholesky::new()
            .tile(100)
            .solve_refined(a.as_ref(), b.as_ref())
            .unwrap();
        let what = T::PRECISION;
        let RefinementPath::GmresIr { shift, gmres_steps } = how.path else {
            panic!("{what}: {how:?}")
        };
        assert_eq!(shift > 0.0, !what.is_complex(), "{what}: {how:?}");
        assert!(gmres_steps <= 20, "{what}: {how:?}");
        assert_eq!(how.factored_in, T::Low::PRECISION);
        let berr = backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        assert!(berr < 30.0 * f64::EPSILON, "{what}: {berr:e}");
    }
    check::<f64>();
    check::<c64>();
}

#[test]
fn too_ill_conditioned_or_too_large_for_single_falls_back_to_double() {
    let n = 300;
    // cond 1e10: far beyond 1 / eps(f32) ~ 1.7e7.
    let a = random_hpd_conditioned::<f64>(n, 1e10, 5);
    let b = Mat::from_fn(n, 1, |i, _| 1.0 + i as f64);
    let (x, how) = Cholesky::new()
        .tile(64)
        .solve_refined(a.as_ref(), b.as_ref())
        .unwrap();
    let RefinementPath::Fallback { reason } = &how.path else {
        panic!("expected a fallback: {how:?}")
    };
    assert!(
        reason.contains("non-positive pivot") || reason.contains("did not converge"),
        "{reason}"
    );
    assert_eq!(how.factored_in, hetla::Precision::D);
    let berr = backward_error(a.as_ref(), x.as_ref(), b.as_ref());
    assert!(berr < 1e-15, "{berr:e}");
    // An entry beyond f32's range.
    let mut big = random_hpd::<f64>(50, 6);
    big *= faer::Scale(1e38);
    let rhs = Mat::<f64>::ones(50, 1);
    let (x, how) = hetla::solve_spd_mixed(big.as_ref(), rhs.as_ref()).unwrap();
    let RefinementPath::Fallback { reason } = &how.path else {
        panic!("expected a fallback: {how:?}")
    };
    assert!(reason.contains("overflows s"), "{reason}");
    assert_eq!(how.factor_seconds, None, "no single factorisation was made");
    assert!(backward_error(big.as_ref(), x.as_ref(), rhs.as_ref()) < 1e-15);
}

#[test]
fn the_conditioned_generator_has_the_condition_it_was_asked_for() {
    let a = random_hpd_conditioned::<f64>(60, 1e4, 9);
    let eig = a.as_ref().self_adjoint_eigenvalues(Side::Lower).unwrap();
    let (lo, hi) = (eig[0], eig[59]);
    assert!(
        (hi - 1.0).abs() < 1e-10 && (hi / lo / 1e4 - 1.0).abs() < 1e-6,
        "{lo} {hi}"
    );
}

#[test]
fn the_real_hpd_generator_is_the_spd_one() {
    assert_eq!(random_hpd::<f64>(70, 11), hetla::matgen::random_spd(70, 11));
}

/// The matrices of LAPACK's Cholesky tests, in precision `T`: random, ill-conditioned (up to about
/// 1/sqrt(eps) and 1/eps^0.8 where the precision can hold it), graded (D A D, D spanning 1e-4 ..
/// 1e4), scaled near the largest and the smallest numbers, each factored in place and in a
/// tile-major copy (where OpenBLAS solves the panels through inverted diagonal tiles): the scaled
/// residual stays below LAPACK's threshold; a failing matrix names its column.
fn lapack_kinds<T: Scalar>(eps: f64, big: f64, small: f64) {
    use hetla::check::{RESIDUAL_THRESHOLD, cholesky_residual};
    use hetla::{Cholesky, Error, Storage};
    let n = 300;
    let random = random_hpd::<T>(n, 1);
    let d = |i: usize| T::from_f64(10f64.powf(8.0 * i as f64 / n as f64 - 4.0));
    let graded = faer::Mat::from_fn(n, n, |i, j| d(i) * random[(i, j)] * d(j));
    let scaled = |s: f64| faer::Mat::from_fn(n, n, |i, j| random[(i, j)] * T::from_f64(s));
    let kinds = [
        ("random", random.clone()),
        (
            "cond 1/sqrt(eps)",
            random_hpd_conditioned::<T>(n, eps.sqrt().recip(), 2),
        ),
        (
            "cond 1/eps^0.8",
            random_hpd_conditioned::<T>(n, eps.powf(-0.8), 3),
        ),
        ("graded", graded),
        ("scaled up", scaled(big)),
        ("scaled down", scaled(small)),
    ];
    for backend in Backend::available() {
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let chol = Cholesky::new().backend(backend).tile(64).storage(storage);
            for (kind, a) in &kinds {
                let mut l = a.clone();
                chol.factor_in_place(l.as_mut()).unwrap();
                let r = cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq);
                assert!(
                    r < RESIDUAL_THRESHOLD,
                    "{} {backend} {storage} {kind}: residual {r}",
                    T::PRECISION
                );
            }
            let mut failing = random.clone();
            failing[(200, 200)] = T::from_f64(-1.0);
            let err = chol.factor_in_place(failing.as_mut()).unwrap_err();
            assert_eq!(err, Error::NotPositiveDefinite { column: 200 });
        }
    }
}

/// A = L L^T with L unit lower triangular, -1.15 on the first subdiagonal and small entries below:
/// the diagonal tiles' unit factors have cond_1 around 1.15^64 ~ 8e3 at tile 64, too
/// ill-conditioned to be applied through their inverses; those panels keep the triangular solve and
/// the residual stays at the solve's level.
#[test]
fn ill_conditioned_diagonal_tiles_are_solved_not_inverted() {
    use hetla::check::cholesky_residual;
    let n = 128;
    let l = Mat::<f64>::from_fn(n, n, |i, j| match i.wrapping_sub(j) {
        0 => 1.0,
        1 => -1.15,
        k if k < n => ((i * 7 + j * 13) % 17) as f64 / 1700.0,
        _ => 0.0,
    });
    let a = &l * l.transpose();
    for backend in Backend::available() {
        let mut f = a.clone();
        Cholesky::new()
            .backend(backend)
            .tile(64)
            .storage(hetla::Storage::TileMajor)
            .factor_in_place(f.as_mut())
            .unwrap();
        let r = cholesky_residual(a.as_ref(), f.as_ref(), faer::Par::Seq);
        // Through the inverses this residual is 0.38 with OpenBLAS on AVX-512, by the solve 0.01.
        assert!(r < 0.1, "{backend}: residual {r}");
    }
}

#[test]
fn lapack_test_matrices_keep_the_residual_below_the_threshold_in_every_precision() {
    lapack_kinds::<f64>(f64::EPSILON, 1e150, 1e-150);
    lapack_kinds::<c64>(f64::EPSILON, 1e150, 1e-150);
    lapack_kinds::<f32>(f32::EPSILON as f64, 1e18, 1e-18);
    lapack_kinds::<c32>(f32::EPSILON as f64, 1e18, 1e-18);
}
