//! Rank-revealing QR and least squares of any rank and shape: QR with column pivoting (A P = Q R,
//! LAPACK's ?geqp3, on faer's kernel) and the minimum-norm least-squares solution by a complete
//! orthogonal factorisation (LAPACK's ?gelsy).
//!
//! The effective rank r is the number of leading diagonal entries of R with |R_ii| > rcond |R_00|
//! (the pivoting makes |R_ii| non-increasing). With r = n the solution is R_11^-1 (Q^H B)_1; below
//! it the first r rows of R, [R_11 R_12] (r x n), are the last step: their adjoint, n x r, is
//! factored by a thin QR, [R_11 R_12]^H = Z S, so that [R_11 R_12] y = c has the minimum-norm
//! solution y = Z S^-H c, and x = P y. Unlike the tiled QR this runs as one faer call on the
//! calling thread's pool (faer's column pivoting is not blocked): [`lstsq_rank`] takes the tiled
//! path when A clearly has full column rank and m >= n, as [`crate::lstsq`] does.

use faer::linalg::solvers::{ColPivQr, Qr as FaerQr};
use faer::{Mat, MatRef};
use hetla_kernels::Scalar;

use super::householder::check_rhs_rows;
use crate::{Error, Result};

/// A QR factorisation with column pivoting of an m x n matrix: A P = Q R, |R_ii| non-increasing.
#[derive(Debug, Clone)]
pub struct PivotedQr<T: Scalar> {
    q: Mat<T>,
    r: Mat<T>,
    perm: Vec<usize>,
}

impl<T: Scalar> PivotedQr<T> {
    /// Factors `a` (m x n, any shape; a non-finite entry is an error). `full`: Q m x m and R m x n,
    /// else the economic Q m x k and R k x n (k = min(m, n)).
    pub fn factor(a: MatRef<'_, T>, full: bool) -> Result<Self> {
        crate::cholesky::check_finite("A", a)?;
        let (m, n) = (a.nrows(), a.ncols());
        let k = m.min(n);
        if m == 0 || n == 0 {
            return Ok(Self {
                q: Mat::identity(m, if full { m } else { k }),
                r: Mat::zeros(if full { m } else { k }, n),
                perm: (0..n).collect(),
            });
        }
        let qr = ColPivQr::new(a);
        // R from its k x n upper part, in one pass: zeros below the diagonal and, when full, in
        // its last m - k rows.
        let upper = qr.thin_R();
        let (q, rows) = if full {
            (qr.compute_Q(), m)
        } else {
            (qr.compute_thin_Q(), k)
        };
        let r = Mat::from_fn(rows, n, |i, j| {
            if i <= j && i < k {
                upper[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        });
        let perm = qr.P().arrays().0.to_vec();
        Ok(Self { q, r, perm })
    }

    /// Q: m x m, or m x min(m, n) when economic.
    pub fn q(&self) -> MatRef<'_, T> {
        self.q.as_ref()
    }

    /// R: upper trapezoidal, m x n, or min(m, n) x n when economic.
    pub fn r(&self) -> MatRef<'_, T> {
        self.r.as_ref()
    }

    /// The column permutation: column j of A P is column `perm()[j]` of A (scipy's `P`).
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }
}

/// The minimum-norm least-squares solution of min ||A X - B||_2 for an m x n A of any shape and
/// rank (LAPACK's ?gelsy), and A's effective rank: the number of diagonal entries of the pivoted R
/// above `rcond` times the largest (`None`: the precision's eps). With m >= n the tiled QR comes
/// first: a matrix clearly of full column rank (every |R_ii| above sqrt(rcond) times the largest)
/// is solved by it as [`crate::lstsq`] does; any other case by the complete orthogonal
/// factorisation of the [module](self) documentation.
pub fn lstsq_rank<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    rcond: Option<f64>,
) -> Result<(Mat<T>, usize)> {
    let (m, n) = (a.nrows(), a.ncols());
    check_rhs_rows(b, m)?;
    crate::cholesky::check_finite("A", a)?;
    crate::cholesky::check_finite("B", b)?;
    let rcond = rcond.unwrap_or(T::PRECISION.epsilon());
    if !(rcond.is_finite()) {
        return Err(Error::InvalidOption {
            option: "rcond",
            reason: format!("must be a finite number, got {rcond}"),
        });
    }
    let k = b.ncols();
    if m == 0 || n == 0 {
        return Ok((Mat::zeros(n, k), 0));
    }
    if m >= n {
        // The tiled QR first: a matrix clearly of full column rank (no diagonal entry of R below
        // sqrt(rcond) times the largest) is solved by it. A doubtful one is pivoted through its R:
        // A = Q_1 R, so min ||A x - B|| is min ||R x - (Q_1^H B)_1|| (the rest of Q^H B is the
        // residual), and R P = Q_2 R_2 pivots as A P would, on n x n instead of m x n.
        let f = super::Qr::new().factor(a)?;
        let d: Vec<f64> = (0..n).map(|i| f.storage()[(i, i)].abs_f64()).collect();
        let (low, high) = d
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(l, h), &v| (l.min(v), h.max(v)));
        if high > 0.0 && low > rcond.max(0.0).sqrt() * high {
            return Ok((f.solve_least_squares(b)?, n));
        }
        let c = f.apply_qh(b)?;
        return minimum_norm(f.r().as_ref(), c.as_ref().subrows(0, n), rcond);
    }
    minimum_norm(a, b, rcond)
}

/// The minimum-norm least-squares solution and the effective rank by the complete orthogonal
/// factorisation of the [module](self) documentation (`a` m x n non-empty, `b` m x k, checked).
fn minimum_norm<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    rcond: f64,
) -> Result<(Mat<T>, usize)> {
    let (m, n, k) = (a.nrows(), a.ncols(), b.ncols());
    let qr = ColPivQr::new(a);
    let r = qr.thin_R();
    let largest = r[(0, 0)].abs_f64();
    let rank = (0..m.min(n))
        .take_while(|&i| largest > 0.0 && r[(i, i)].abs_f64() > rcond.max(0.0) * largest)
        .count();
    let mut x = Mat::<T>::zeros(n, k);
    if rank == 0 {
        return Ok((x, 0));
    }
    // c = (Q^H B), its first r rows.
    let q = qr.compute_thin_Q();
    let c = q.as_ref().subcols(0, rank).adjoint() * b;
    let top = r.subrows(0, rank);
    // [R_11 R_12]^H = Z S (n x r thin QR): y = Z S^-H c.
    let cot = FaerQr::new(top.adjoint());
    let z = cot.compute_thin_Q();
    let s = cot.thin_R();
    let mut w = c;
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        s.adjoint(),
        w.as_mut(),
        faer::Par::Seq,
    );
    let y = z.as_ref() * w.as_ref();
    // x = P y: row perm[j] of x is row j of y.
    let perm = qr.P().arrays().0;
    for (j, &p) in perm.iter().enumerate() {
        x.row_mut(p).copy_from(y.row(j));
    }
    Ok((x, rank))
}
