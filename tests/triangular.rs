//! Triangular solves (`hetla::solve_triangular`, LAPACK's ?trtrs with ?trcon's estimate): LAPACK's
//! residual ratio in every precision, triangle and op; the other triangle never read; zero
//! diagonals, non-finite entries and bad shapes refused before any work.

use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef};
use hetla::{Error, Scalar, Trans, Triangle, c32, c64, solve_triangular};

/// ||A||_1 of the `lower` or upper triangle of `a`.
fn norm1_of<T: Scalar>(a: MatRef<'_, T>) -> f64 {
    (0..a.ncols())
        .map(|j| (0..a.nrows()).map(|i| a[(i, j)].abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// A well-conditioned triangle (diagonal 2..3 in size, off-diagonal entries small), NaN elsewhere.
fn triangle<T: Scalar>(n: usize, which: Triangle, seed: u64) -> (Mat<T>, Mat<T>) {
    let r = hetla::matgen::random_in::<T>(n, n, seed);
    let keep = |i: usize, j: usize| match which {
        Triangle::Lower => i >= j,
        Triangle::Upper => i <= j,
    };
    let dense = Mat::from_fn(n, n, |i, j| {
        if i == j {
            r[(i, j)] + T::from_f64(if r[(i, j)].re_f64() >= 0.0 { 2.0 } else { -2.0 })
        } else if keep(i, j) {
            r[(i, j)] * T::from_f64(1.0 / n as f64)
        } else {
            T::from_f64(0.0)
        }
    });
    let stored = Mat::from_fn(n, n, |i, j| {
        if keep(i, j) {
            dense[(i, j)]
        } else {
            T::from_f64(f64::NAN)
        }
    });
    (dense, stored)
}

fn case<T: Scalar>(n: usize, k: usize) {
    for which in [Triangle::Lower, Triangle::Upper] {
        for trans in [Trans::No, Trans::Transpose, Trans::Adjoint] {
            let (dense, stored) = triangle::<T>(n, which, n as u64 + 3);
            let b = hetla::matgen::random_in::<T>(n, k, 5);
            let mut x = b.clone();
            let rcond = solve_triangular(stored.as_ref(), which, trans, x.as_mut()).unwrap();
            let op = match trans {
                Trans::No => dense.clone(),
                Trans::Transpose => dense.transpose().to_owned(),
                Trans::Adjoint => dense.adjoint().to_owned(),
            };
            // LAPACK's ratio ||op(A) X - B||_1 / (n ||A||_1 ||X||_1 eps) < 30.
            let residual = &op * &x - &b;
            let eps = T::PRECISION.epsilon();
            let ratio = norm1_of(residual.as_ref())
                / (n as f64 * norm1_of(op.as_ref()) * norm1_of(x.as_ref()) * eps);
            let what = format!("{} {which:?} {trans:?} n {n}", T::PRECISION);
            assert!(ratio < 30.0, "{what}: ratio {ratio}");
            // The estimate is of ?trcon's kind: never above the true reciprocal condition number
            // (||op(A)^-1||_1 is estimated from below), and within a factor 10 of it here.
            let inverse = op.as_ref().partial_piv_lu().solve(Mat::<T>::identity(n, n));
            let exact = 1.0 / (norm1_of(op.as_ref()) * norm1_of(inverse.as_ref()));
            assert!(
                rcond >= exact * (1.0 - 1e-4) && rcond <= 10.0 * exact,
                "{what}: rcond {rcond}, exact {exact}"
            );
        }
    }
}

#[test]
fn triangular_solves_reach_lapacks_ratio_in_every_precision_triangle_and_op_reading_one_triangle() {
    for (n, k) in [(1, 1), (7, 3), (90, 4), (300, 2)] {
        case::<f64>(n, k);
        case::<f32>(n, k);
        case::<c64>(n, k);
        case::<c32>(n, k);
    }
}

#[test]
fn zero_diagonals_non_finite_entries_and_bad_shapes_are_refused_before_any_work() {
    let (_, mut a) = triangle::<f64>(6, Triangle::Upper, 1);
    let b = hetla::matgen::random_in::<f64>(6, 2, 2);
    a[(3, 3)] = 0.0;
    let mut x = b.clone();
    let e = solve_triangular(a.as_ref(), Triangle::Upper, Trans::No, x.as_mut()).unwrap_err();
    assert!(matches!(e, Error::Singular { column: 3 }), "{e}");
    assert_eq!(x, b, "nothing written before the error");
    a[(3, 3)] = 1.0;
    a[(1, 4)] = f64::INFINITY;
    let e = solve_triangular(a.as_ref(), Triangle::Upper, Trans::No, x.as_mut()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NonFinite {
                what: "A",
                row: 1,
                col: 4,
                ..
            }
        ),
        "{e}"
    );
    // The same entry in the triangle not read is not looked at.
    let e = solve_triangular(a.as_ref(), Triangle::Lower, Trans::No, x.as_mut()).unwrap_err();
    assert!(matches!(e, Error::NonFinite { row: 1, col: 0, .. }), "{e}");
    let wide = Mat::<f64>::zeros(3, 4);
    let e = solve_triangular(wide.as_ref(), Triangle::Lower, Trans::No, x.as_mut()).unwrap_err();
    assert!(matches!(e, Error::NotSquare { .. }), "{e}");
    let mut short = Mat::<f64>::zeros(5, 1);
    let e = solve_triangular(a.as_ref(), Triangle::Upper, Trans::No, short.as_mut()).unwrap_err();
    assert!(
        matches!(e, Error::DimensionMismatch { n: 6, rows: 5 }),
        "{e}"
    );
    let empty = Mat::<f64>::zeros(0, 0);
    let mut none = Mat::<f64>::zeros(0, 3);
    assert_eq!(
        solve_triangular(empty.as_ref(), Triangle::Lower, Trans::No, none.as_mut()).unwrap(),
        f64::INFINITY
    );
}
