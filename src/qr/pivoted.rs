//! Rank-revealing QR and least squares of any rank and shape: QR with column pivoting (A P = Q R,
//! LAPACK's ?geqp3 criterion, on faer's kernel) and the minimum-norm least-squares solution by a
//! complete orthogonal factorisation (LAPACK's ?gelsy).
//!
//! The effective rank r is the number of leading diagonal entries of R with |R_ii| > rcond |R_00|
//! (the pivoting makes |R_ii| non-increasing). With r = n the solution is R_11^-1 (Q^H B)_1; below
//! it the first r rows of R, [R_11 R_12] (r x n), are the last step: their adjoint, n x r, is
//! factored by a thin QR, [R_11 R_12]^H = Z S, so that [R_11 R_12] y = c has the minimum-norm
//! solution y = Z S^-H c, and x = P y. Q and Z are never formed: their reflectors are applied to
//! the right-hand sides (faer's blocked Householder sequences). Unlike the tiled QR the pivoted
//! factorisation runs as one faer call on the calling thread's pool (faer's column pivoting is not
//! blocked): [`lstsq_rank`] takes the tiled path first when m >= n, and pivots only the n x n R of
//! a matrix that is not clearly of full column rank.
//!
//! [`PivotedQr`]'s factors follow LAPACK's conventions in every precision, so that `A P = Q R` is
//! the QR factorisation [`crate::Qr`] gives for A P: faer's reflectors agree with LAPACK's for real
//! matrices; for complex ones faer makes R's diagonal complex where LAPACK makes it real, so there
//! the pivoting chooses P and the tiled QR of A P gives Q and R (R's diagonal real, as ?geqp3's;
//! scipy checks `qr(a, pivoting=True)` against `qr(a[:, p])`).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
    apply_block_householder_sequence_transpose_on_the_left_in_place_scratch,
    apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj,
};
use faer::linalg::qr::{col_pivoting, no_pivoting};
use faer::linalg::solvers::ColPivQr;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Conj, Mat, MatMut, MatRef, Par};
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
        crate::check::check_finite("A", a)?;
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
        let perm = qr.P().arrays().0.to_vec();
        if T::PRECISION.is_complex() {
            // R's diagonal real, as LAPACK's: the tiled QR of A P.
            let ap = Mat::from_fn(m, n, |i, j| a[(i, perm[j])]);
            let f = super::Qr::new().factor_owned(ap)?;
            let q = if full { f.full_q()? } else { f.thin_q()? };
            let r = upper_part(f.r().as_ref(), if full { m } else { k });
            return Ok(Self { q, r, perm });
        }
        let (q, rows) = if full {
            (qr.compute_Q(), m)
        } else {
            (qr.compute_thin_Q(), k)
        };
        let r = upper_part(qr.thin_R(), rows);
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

/// The `rows` x n upper trapezoid of `upper` (min(m, n) x n, read on and above its diagonal), zero
/// below the diagonal and in the rows past `upper`'s.
fn upper_part<T: Scalar>(upper: MatRef<'_, T>, rows: usize) -> Mat<T> {
    Mat::from_fn(rows, upper.ncols(), |i, j| {
        if i <= j && i < upper.nrows() {
            upper[(i, j)]
        } else {
            T::from_f64(0.0)
        }
    })
}

/// A minimum-norm least-squares solution X and A's effective rank ([`lstsq_rank`]'s result).
pub type RankedSolution<T> = (Mat<T>, usize);

/// The minimum-norm least-squares solution of min ||A X - B||_2 for an m x n A of any shape and
/// rank (LAPACK's ?gelsy), and A's effective rank: the number of diagonal entries of the pivoted R
/// above `rcond` times the largest (`None`: the precision's eps). With m >= n the tiled QR comes
/// first: a matrix clearly of full column rank (every |R_ii| above sqrt(rcond) times the largest)
/// is solved by it, x = R^-1 (Q^H B)_1 (as [`crate::lstsq`], which also refuses an R whose
/// condition estimate says it is numerically singular); any other case by the complete orthogonal
/// factorisation: the first r rows of R, [R_11 R_12], factored as [R_11 R_12]^H = Z S, and x = P Z
/// S^-H (Q^H B)_1.
pub fn lstsq_rank<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    rcond: Option<f64>,
) -> Result<RankedSolution<T>> {
    solve_tiled(a, b, Cutoff::Pivoted(checked_rcond(a, b, rcond)?))
}

/// The minimum-norm least-squares solution of min ||A X - B||_2 for an m x n A of any shape and
/// rank, A's effective rank and its singular values, as LAPACK's ?gelsd and ?gelss define them (and
/// scipy's `lstsq` returns them): the rank is the number of singular values above `rcond` (`None`:
/// the precision's eps) times the largest, a decision that does not hang on the rounding of a
/// pivoted R's diagonal at the level of `rcond` (where [`lstsq_rank`]'s can, for a matrix exactly
/// rank-deficient and `rcond` near eps). The values are faer's SVD without vectors (an O(m n min(m,
/// n)) pass); the solution is [`lstsq_rank`]'s at that rank: the tiled QR's when it is n, else the
/// complete orthogonal factorisation truncated to r rows.
///
/// ```
/// use faer::mat;
/// // Rank 3: the columns' alternating sum is zero.
/// let a = mat![[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0_f64]];
/// let b = mat![[1.0], [2.0], [3.0], [4.0_f64]];
/// let (x, rank, s) = hetla::lstsq_svd(a.as_ref(), b.as_ref(), None)?;
/// assert_eq!(rank, 3);
/// assert!(s[3] < 1e-15 && (s[0] - 2.0).abs() < 1e-15);
/// assert!((x - mat![[0.25], [1.25], [2.25], [1.25]]).norm_max() < 1e-14);
/// # Ok::<(), hetla::Error>(())
/// ```
pub fn lstsq_svd<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    rcond: Option<f64>,
) -> Result<SvdSolution<T>> {
    let rcond = checked_rcond(a, b, rcond)?;
    let singular = singular_values_of(a)?;
    let cutoff = Cutoff::Given(rank_of_singular_values::<T>(&singular, rcond));
    let (x, rank) = solve_tiled(a, b, cutoff)?;
    Ok((x, rank, singular))
}

/// The solution of checked operands at `cutoff`, the tiled QR first where m >= n, on faer's global
/// parallelism.
fn solve_tiled<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    cutoff: Cutoff,
) -> Result<RankedSolution<T>> {
    least_squares_by(a, b, cutoff, faer::get_global_parallelism(), tiled_qr)
}

/// A minimum-norm least-squares solution X, A's effective rank and its singular values
/// ([`lstsq_svd`]'s result).
pub type SvdSolution<T> = (Mat<T>, usize, Vec<<T as faer::traits::ComplexField>::Real>);

/// A's singular values in non-increasing order (faer's SVD without vectors; A checked by
/// [`checked_rcond`]).
pub(super) fn singular_values_of<T: Scalar>(
    a: MatRef<'_, T>,
) -> Result<Vec<<T as faer::traits::ComplexField>::Real>> {
    hetla_kernels::Backend::Faer
        .singular_values(a)
        .ok_or(Error::NoConvergence {
            what: "singular values of A",
        })
}

/// The tiled QR of `a` (m >= n): R and Q^H `b`.
fn tiled_qr<T: Scalar>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<(Mat<T>, Mat<T>)> {
    let f = super::Qr::new().factor(a)?;
    Ok((f.r(), f.apply_qh(b)?))
}

/// `rcond` (`None`: the precision's eps) once A (m x n) and B (m x k) are checked: B's rows,
/// neither with a non-finite entry, `rcond` finite.
pub(super) fn checked_rcond<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    rcond: Option<f64>,
) -> Result<f64> {
    check_rhs_rows(b, a.nrows())?;
    crate::check::check_finite("A", a)?;
    crate::check::check_finite("B", b)?;
    let rcond = rcond.unwrap_or(T::PRECISION.epsilon());
    if !(rcond.is_finite()) {
        return Err(Error::InvalidOption {
            option: "rcond",
            reason: format!("must be a finite number, got {rcond}"),
        });
    }
    Ok(rcond)
}

/// How a least-squares solve decides A's effective rank r.
#[derive(Clone, Copy, Debug)]
pub(super) enum Cutoff {
    /// ?gelsy's: the leading diagonal entries of the pivoted R above `rcond` times the largest.
    Pivoted(f64),
    /// Given by the caller (?gelsd's: from A's singular values), at most min(m, n).
    Given(usize),
}

/// The effective rank ?gelsd and ?gelss give A from its `singular` values (non-increasing): those
/// above `rcond` times the largest (`rcond` checked finite).
pub(super) fn rank_of_singular_values<T: Scalar>(
    singular: &[<T as faer::traits::ComplexField>::Real],
    rcond: f64,
) -> usize {
    let size = |v| T::from_real_impl(v).re_f64();
    let largest = singular.first().map_or(0.0, size);
    singular
        .iter()
        .take_while(|&v| largest > 0.0 && size(v) > rcond.max(0.0) * largest)
        .count()
}

/// [`lstsq_rank`]'s solution of checked operands, its triangular solves and pivoted QRs on `par`;
/// with m >= n A's QR comes from `qr(a, b)`: R (n x n, upper) and Q^H B (m x k).
pub(super) fn least_squares_by<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    cutoff: Cutoff,
    par: Par,
    qr: impl FnOnce(MatRef<'_, T>, MatRef<'_, T>) -> Result<(Mat<T>, Mat<T>)>,
) -> Result<RankedSolution<T>> {
    let (m, n) = (a.nrows(), a.ncols());
    if m == 0 || n == 0 || matches!(cutoff, Cutoff::Given(0)) {
        return Ok((Mat::zeros(n, b.ncols()), 0));
    }
    if m >= n {
        // The QR first: a matrix clearly of full column rank (no diagonal entry of R below
        // sqrt(rcond) times the largest; or of rank n by its singular values) is solved by it. A
        // doubtful one is pivoted through its R: A = Q_1 R, so min ||A x - B|| is min ||R x -
        // (Q_1^H B)_1|| (the rest of Q^H B is the residual), and R P = Q_2 R_2 pivots as A P
        // would, on n x n instead of m x n.
        let (r, mut c) = qr(a, b)?;
        let full = match cutoff {
            Cutoff::Pivoted(rcond) => {
                let (low, high) = (0..n)
                    .map(|i| r[(i, i)].abs_f64())
                    .fold((f64::INFINITY, 0.0_f64), |(l, h), v| (l.min(v), h.max(v)));
                high > 0.0 && low > rcond.max(0.0).sqrt() * high
            }
            Cutoff::Given(rank) => rank >= n,
        };
        if full {
            let mut x = c.subrows(0, n).to_owned();
            faer::linalg::triangular_solve::solve_upper_triangular_in_place(
                r.as_ref(),
                x.as_mut(),
                par,
            );
            return Ok((x, n));
        }
        return minimum_norm(r, c.as_mut().subrows_mut(0, n), cutoff, par);
    }
    minimum_norm(a.to_owned(), b.to_owned().as_mut(), cutoff, par)
}

/// faer's blocked Householder QR `f` (m x n, factored in place) with its block factors: Q^H `b`
/// (`adjoint`) or Q `b`, in place, on `par`.
fn apply_reflectors<T: Scalar>(
    f: MatRef<'_, T>,
    factors: MatRef<'_, T>,
    adjoint: bool,
    b: MatMut<'_, T>,
    par: Par,
) {
    let basis = f.subcols(0, f.nrows().min(f.ncols()));
    let (rows, block, k) = (basis.nrows(), factors.nrows(), b.ncols());
    let need = if adjoint {
        apply_block_householder_sequence_transpose_on_the_left_in_place_scratch::<T>(rows, block, k)
    } else {
        apply_block_householder_sequence_on_the_left_in_place_scratch::<T>(rows, block, k)
    };
    let mut buffer = MemBuffer::new(need);
    let stack = MemStack::new(&mut buffer);
    if adjoint {
        apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj(
            basis,
            factors,
            Conj::Yes,
            b,
            par,
            stack,
        );
    } else {
        apply_block_householder_sequence_on_the_left_in_place_with_conj(
            basis,
            factors,
            Conj::No,
            b,
            par,
            stack,
        );
    }
}

/// The minimum-norm least-squares solution and the effective rank by the complete orthogonal
/// factorisation of the [module](self) documentation (`a` m x n non-empty, `b` m x k, checked; both
/// overwritten), on `par`.
fn minimum_norm<T: Scalar>(
    mut a: Mat<T>,
    mut b: MatMut<'_, T>,
    cutoff: Cutoff,
    par: Par,
) -> Result<RankedSolution<T>> {
    let (m, n, k) = (a.nrows(), a.ncols(), b.ncols());
    let size = m.min(n);
    // A P = Q R in place; then b <- Q^H b.
    let block = no_pivoting::factor::recommended_block_size::<T>(m, n);
    let mut factors = Mat::<T>::zeros(block, size);
    let (mut perm, mut perm_inv) = (vec![0usize; n], vec![0usize; n]);
    let mut buffer = MemBuffer::new(col_pivoting::factor::qr_in_place_scratch::<usize, T>(
        m,
        n,
        block,
        par,
        Default::default(),
    ));
    col_pivoting::factor::qr_in_place(
        a.as_mut(),
        factors.as_mut(),
        &mut perm,
        &mut perm_inv,
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    let rank = match cutoff {
        Cutoff::Pivoted(rcond) => {
            let largest = a[(0, 0)].abs_f64();
            (0..size)
                .take_while(|&i| largest > 0.0 && a[(i, i)].abs_f64() > rcond.max(0.0) * largest)
                .count()
        }
        Cutoff::Given(rank) => rank.min(size),
    };
    let mut x = Mat::<T>::zeros(n, k);
    if rank == 0 {
        return Ok((x, 0));
    }
    apply_reflectors(a.as_ref(), factors.as_ref(), true, b.rb_mut(), par);
    // y (n x k): its first `rank` rows solve the triangle; below them, zero.
    let mut y = Mat::<T>::zeros(n, k);
    y.as_mut()
        .subrows_mut(0, rank)
        .copy_from(b.rb().subrows(0, rank));
    if rank == n {
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            a.as_ref().submatrix(0, 0, n, n),
            y.as_mut(),
            par,
        );
    } else {
        // [R_11 R_12]^H = Z S (n x r): y = Z [S^-H c; 0].
        let mut top = Mat::from_fn(n, rank, |i, j| {
            if j <= i {
                faer::traits::ComplexField::conj_impl(&a[(j, i)])
            } else {
                T::from_f64(0.0)
            }
        });
        let block = no_pivoting::factor::recommended_block_size::<T>(n, rank);
        let mut z_factors = Mat::<T>::zeros(block, rank);
        let mut buffer = MemBuffer::new(no_pivoting::factor::qr_in_place_scratch::<T>(
            n,
            rank,
            block,
            par,
            Default::default(),
        ));
        no_pivoting::factor::qr_in_place(
            top.as_mut(),
            z_factors.as_mut(),
            par,
            MemStack::new(&mut buffer),
            Default::default(),
        );
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            top.as_ref().submatrix(0, 0, rank, rank).adjoint(),
            y.as_mut().subrows_mut(0, rank),
            par,
        );
        apply_reflectors(top.as_ref(), z_factors.as_ref(), false, y.as_mut(), par);
    }
    // x = P y: row perm[j] of x is row j of y.
    for (j, &p) in perm.iter().enumerate() {
        x.row_mut(p).copy_from(y.row(j));
    }
    Ok((x, rank))
}
