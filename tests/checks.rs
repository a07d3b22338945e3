//! The library's LAPACK-style checks (`hetla::check`), which the tests, the command line and Python
//! share: each ratio small for a right answer and large for one entry made wrong, in every
//! precision.

use faer::Mat;
use hetla::Scalar;
use hetla::check::{
    RESIDUAL_THRESHOLD, backward_error, least_squares_residual, lu_growth, lu_residual,
    orthogonality, qr_residual,
};

/// `m` with entry (i, j) tripled.
fn spoiled<T: Scalar>(m: &Mat<T>, i: usize, j: usize) -> Mat<T> {
    let mut m = m.clone();
    m[(i, j)] *= T::from_f64(3.0);
    m
}

fn case<T: Scalar>() {
    let what = T::PRECISION;
    let (n, k) = (60, 3);
    let a = hetla::matgen::random_in::<T>(n, n, 1);
    let b = hetla::matgen::random_in::<T>(n, k, 2);
    // LU: the factor and its interchanges; the growth of partial pivoting stays small.
    let f = hetla::Lu::new().tile(16).factor(a.as_ref()).unwrap();
    let (lu, ipiv) = (f.storage().to_owned(), f.pivots().to_vec());
    assert!(
        lu_residual(a.as_ref(), lu.as_ref(), &ipiv) < RESIDUAL_THRESHOLD,
        "{what}"
    );
    let wrong = spoiled(&lu, 40, 50);
    assert!(
        lu_residual(a.as_ref(), wrong.as_ref(), &ipiv) > 100.0,
        "{what}"
    );
    let growth = lu_growth(a.as_ref(), lu.as_ref());
    assert!(growth > 0.5 && growth < 100.0, "{what}: growth {growth}");
    // A solve's backward error.
    let x = f.solve(b.as_ref()).unwrap();
    assert!(
        backward_error(a.as_ref(), x.as_ref(), b.as_ref()) < RESIDUAL_THRESHOLD,
        "{what}"
    );
    let wrong = spoiled(&x, 7, 1);
    assert!(
        backward_error(a.as_ref(), wrong.as_ref(), b.as_ref()) > 100.0,
        "{what}"
    );
    // QR of a tall matrix: residual, orthogonality, and the least-squares residual's.
    let tall = hetla::matgen::random_in::<T>(90, 30, 3);
    let rhs = hetla::matgen::random_in::<T>(90, 2, 4);
    let q = hetla::Qr::new().tile(16).factor(tall.as_ref()).unwrap();
    let (thin, r) = (q.thin_q().unwrap(), q.r());
    assert!(qr_residual(tall.as_ref(), thin.as_ref(), r.as_ref()) < RESIDUAL_THRESHOLD);
    assert!(orthogonality(thin.as_ref()) < RESIDUAL_THRESHOLD, "{what}");
    let wrong = spoiled(&thin, 5, 5);
    assert!(
        qr_residual(tall.as_ref(), wrong.as_ref(), r.as_ref()) > 100.0,
        "{what}"
    );
    assert!(orthogonality(wrong.as_ref()) > 100.0, "{what}");
    let x = hetla::lstsq(tall.as_ref(), rhs.as_ref()).unwrap();
    let ls = |x: &Mat<T>| least_squares_residual(tall.as_ref(), x.as_ref(), rhs.as_ref());
    assert!(ls(&x) < RESIDUAL_THRESHOLD, "{what}: {}", ls(&x));
    assert!(
        ls(&spoiled(&x, 3, 0)) > 100.0,
        "{what}: {}",
        ls(&spoiled(&x, 3, 0))
    );
}

#[test]
fn each_check_is_small_for_a_right_answer_and_large_for_a_wrong_one_in_every_precision() {
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
    // Empty and zero matrices check as exact.
    let empty = Mat::<f64>::zeros(0, 0);
    assert_eq!(lu_residual(empty.as_ref(), empty.as_ref(), &[]), 0.0);
    let zero = Mat::<f64>::zeros(3, 3);
    assert_eq!(
        backward_error(zero.as_ref(), zero.as_ref(), zero.as_ref()),
        0.0
    );
}
