//! Triangular systems: op(A) X = B for a triangular A, reading only the triangle named (LAPACK's
//! ?trtrs), with the reciprocal condition estimate of op(A) in the 1-norm (?trcon's, by the same
//! Hager-Higham estimator as the other factors' `rcond`). This is what scipy's
//! `solve(assume_a="upper triangular" | "lower triangular")` runs: no factorisation, one
//! substitution (faer's blocked triangular solve on the global thread pool), n^2 k flops.
//!
//! A zero on the diagonal is [`Error::Singular`] with its column (?trtrs's info), found before any
//! work; a NaN or infinity in the triangle read is [`Error::NonFinite`]. The other triangle is
//! never read, as in LAPACK.

use faer::{MatMut, MatRef};
use hetla_kernels::Scalar;

use crate::condition::estimate_norm1;
use crate::interop::{Matrix, MatrixMut};
use crate::{Error, Result, Trans};

/// Which triangle of a square matrix holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Triangle {
    /// On and below the diagonal.
    Lower,
    /// On and above the diagonal.
    Upper,
}

/// Solves op(A) X = B in place (`b` becomes X) for the triangular A held in `triangle` of `a` (n x
/// n; the other triangle is not read), op by `trans`. Returns the reciprocal condition estimate of
/// op(A) in the 1-norm (LAPACK's ?trcon with norm '1' on op(A)), for a warning when it is below the
/// precision's eps.
pub fn solve_triangular<A, B>(a: A, triangle: Triangle, trans: Trans, mut b: B) -> Result<f64>
where
    A: Matrix,
    B: MatrixMut<Elem = A::Elem>,
{
    let a = a.view();
    let mut b = b.view_mut();
    let n = a.nrows();
    crate::check::check_system("A", (n, a.ncols()), b.nrows())?;
    crate::check::check_finite_triangle("A", a, triangle == Triangle::Lower)?;
    crate::check::check_finite("B", b.as_ref())?;
    if let Some(column) = (0..n).find(|&k| a[(k, k)] == A::Elem::from_f64(0.0)) {
        return Err(Error::Singular { column });
    }
    if n == 0 {
        return Ok(f64::INFINITY);
    }
    // op(A) as a view of A or A^T, whether it is conjugated, and whether it is lower triangular.
    let (op, conj, lower) = match trans {
        Trans::No => (a, false, triangle == Triangle::Lower),
        Trans::Transpose => (a.transpose(), false, triangle == Triangle::Upper),
        Trans::Adjoint => (a.transpose(), true, triangle == Triangle::Upper),
    };
    substitute(op, conj, lower, b.as_mut());
    // ||op(A)||_1 over the triangle, and ||op(A)^-1||_1 estimated by solves with op(A), op(A)^H.
    let norm = (0..n)
        .map(|j| {
            let rows = if lower { j..n } else { 0..j + 1 };
            rows.map(|i| op[(i, j)].abs_f64()).sum::<f64>()
        })
        .fold(0.0, f64::max);
    let inverse = estimate_norm1(n, |x, adjoint| {
        if adjoint {
            substitute(op.transpose(), !conj, !lower, x);
        } else {
            substitute(op, conj, lower, x);
        }
        Ok(())
    })?;
    Ok(if norm == 0.0 || inverse == 0.0 {
        0.0
    } else {
        1.0 / norm / inverse
    })
}

/// x <- t^-1 x for the triangular `t` (conjugated when `conj`; its `lower` or upper triangle read).
fn substitute<T: Scalar>(t: MatRef<'_, T>, conj: bool, lower: bool, x: MatMut<'_, T>) {
    use faer::linalg::triangular_solve::{
        solve_lower_triangular_in_place as lower_solve,
        solve_upper_triangular_in_place as upper_solve,
    };
    let par = faer::get_global_parallelism();
    match (lower, conj) {
        (true, false) => lower_solve(t, x, par),
        (true, true) => lower_solve(t.conjugate(), x, par),
        (false, false) => upper_solve(t, x, par),
        (false, true) => upper_solve(t.conjugate(), x, par),
    }
}
