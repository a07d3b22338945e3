//! Stacks of LU problems (issue 73's batches): each matrix one task on one core with the sequential
//! panel kernel, the platform's cores sharing the batch ([`crate::batch::on_every_core`]), as
//! Cholesky's batch. Each matrix has its own result: one that fails (a non-finite entry, a wrong
//! shape, a singular U in a solve) is reported where it is, and the others are done.

use faer::{MatMut, MatRef, Par};
use hetla_kernels::Scalar;

use super::small::small_lu;
use super::{Lu, Trans, check_factored, getrs};
use crate::batch::{on_every_core_beside, on_every_core_mut, one_per_matrix};
use crate::check::{check_finite, check_output_shape};
use crate::condition;
use crate::interop::column_major;
use crate::{Error, Result};

/// What an LU of one matrix of a batch leaves besides its factors: its min(m, n) interchanges
/// (0-based: row i was swapped with row `pivots[i]`, LAPACK's ipiv) and the first column whose
/// pivot is exactly zero, if any (LAPACK's info; the factors are still complete).
pub type LuPivots = (Vec<usize>, Option<usize>);

impl Lu {
    /// Factors every A_i (any shape) in place by LU with partial pivoting, as LAPACK's ?getrf and
    /// [`Lu::factor_in_place`] leave one: each a single task on one core with the sequential panel
    /// kernel, the batch spread over all the platform's CPU clusters, every core taking the next
    /// matrix as it finishes one. A matrix whose columns are not contiguous goes through a
    /// column-major copy written back. The outer error is for the call (a platform that cannot be
    /// built); the i-th result is A_i's interchanges and first zero pivot, or why it has none (a
    /// non-finite entry, checked before it is touched).
    ///
    /// ```
    /// use faer::Mat;
    /// let mut a: Vec<Mat<f64>> = (0..20).map(|i| hetla::matgen::random_in(16, 16, i)).collect();
    /// let mut views: Vec<_> = a.iter_mut().map(|a| a.as_mut()).collect();
    /// let done = hetla::Lu::new().factor_batch_in_place(&mut views)?;
    /// assert!(done.iter().all(|r| matches!(r, Ok((pivots, None)) if pivots.len() == 16)));
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn factor_batch_in_place<T: Scalar>(
        &self,
        a: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<LuPivots>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        Ok(on_every_core_mut(&platform, a, |_, a| {
            // Checked where its columns are contiguous (a refused matrix is written back as it
            // was).
            column_major(a, |a| factor_one(backend, a, None))
        }))
    }

    /// Factors every A_i (any shape and strides, left unchanged) by LU with partial pivoting into
    /// `out[i]` (A_i's shape), as [`Lu::factor_batch_in_place`] leaves them in place, but each
    /// matrix a single task on one core that copies A_i into `out[i]` and factors it there while it
    /// is in cache (scipy's `lu_factor` of a C-ordered stack: no pass of its own for the copy).
    /// Whatever `out[i]` held is overwritten. The outer error is for the call (`out` of another
    /// length than `a`, a platform that cannot be built); the i-th result is A_i's, as
    /// [`Lu::factor_batch_in_place`]'s, or `out[i]` of another shape than A_i.
    ///
    /// ```
    /// use faer::Mat;
    /// let a: Vec<Mat<f64>> = (0..20).map(|i| hetla::matgen::random_in(16, 16, i)).collect();
    /// let views: Vec<_> = a.iter().map(|a| a.transpose()).collect();
    /// let mut lu: Vec<Mat<f64>> = (0..20).map(|_| Mat::zeros(16, 16)).collect();
    /// let mut outputs: Vec<_> = lu.iter_mut().map(|m| m.as_mut()).collect();
    /// let done = hetla::Lu::new().factor_batch_into(&views, &mut outputs)?;
    /// assert!(done.iter().all(|r| matches!(r, Ok((pivots, None)) if pivots.len() == 16)));
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn factor_batch_into<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        out: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<LuPivots>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        on_every_core_beside(&platform, a, ("out", "outputs", out), |i, a, mut out| {
            check_output_shape(&format!("output {i}"), out.shape(), a.shape())?;
            crate::copy::copy(a, out.as_mut());
            column_major(out, |out| factor_one(backend, out, Some(a)))
        })
    }

    /// Solves op(A_i) X_i = B_i in place in `b[i]` for every i from the factors and interchanges
    /// [`Lu::factor_batch_in_place`] left (LAPACK's ?getrs each, as [`Lu::solve_factored`]): each a
    /// single task on one core, the batch spread as the factorisation's. The outer error is for the
    /// call (`lu`, `pivots` and `b` of different lengths, a platform that cannot be built); the
    /// i-th result is system i's, with [`Lu::solve_factored`]'s checks ([`Error::Singular`] for a
    /// zero on U's diagonal, B_i untouched).
    pub fn solve_factored_batch<T: Scalar>(
        &self,
        lu: &[MatRef<'_, T>],
        pivots: &[&[usize]],
        b: &mut [MatMut<'_, T>],
        trans: Trans,
    ) -> Result<Vec<Result<()>>> {
        if pivots.len() != lu.len() {
            return Err(one_per_matrix(
                "pivots",
                "sets of interchanges",
                pivots.len(),
                lu.len(),
            ));
        }
        if b.len() != lu.len() {
            return Err(one_per_matrix("b", "right-hand sides", b.len(), lu.len()));
        }
        let platform = self.resolve_platform()?;
        Ok(on_every_core_mut(&platform, b, |i, mut b| {
            check_factored(lu[i], pivots[i], b.as_ref())?;
            column_major(b.as_mut(), |b| {
                getrs(lu[i], Some(pivots[i]), b, trans, Par::Seq);
                Ok(())
            })
        }))
    }

    /// Solves op(A_i) X_i = B_i in place in `b[i]` for every i by LU with partial pivoting of a
    /// copy of A_i (the A_i are left unchanged; scipy's stacked `solve`): each system a single task
    /// on one core, the batch spread as [`Lu::factor_batch_in_place`]'s. The i-th result is A_i's
    /// reciprocal condition estimate in the 1-norm (?gecon's, as
    /// [`LuFactor::rcond`](crate::LuFactor::rcond)), or why system i has no solution:
    /// [`Error::Singular`] with the first exactly zero pivot's column (B_i untouched), a shape or a
    /// non-finite entry (checked before any work). The outer error is for the call (`a` and `b` of
    /// different lengths, a platform that cannot be built).
    pub fn solve_batch<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        b: &mut [MatMut<'_, T>],
        trans: Trans,
    ) -> Result<Vec<Result<f64>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        on_every_core_beside(&platform, a, ("b", "right-hand sides", b), |_, a, mut b| {
            crate::check::check_system("A", (a.nrows(), a.ncols()), b.nrows())?;
            // Checked on the column-major copy the factorisation works on (a blocked copy: faer's
            // `to_owned` of a C-ordered A went entry by entry).
            let mut lu = faer::Mat::zeros(a.nrows(), a.ncols());
            crate::copy::copy(a, lu.as_mut());
            check_finite("A", lu.as_ref())?;
            check_finite("B", b.as_ref())?;
            let n = a.nrows();
            let norm = crate::check::norm1(lu.as_ref());
            let mut pivots = vec![0; n];
            if let Some(column) = small_lu(backend, lu.as_mut(), Some(a), &mut pivots)? {
                return Err(Error::Singular { column });
            }
            column_major(b.as_mut(), |b| {
                getrs(lu.as_ref(), Some(&pivots), b, trans, Par::Seq);
                Ok(())
            })?;
            if n == 0 || norm == 0.0 {
                return Ok(if n == 0 { 1.0 } else { 0.0 });
            }
            // ||A^-1||_1 = ||U^-1 L^-1||_1 (the interchanges permute columns), as ?gecon.
            let inverse = condition::estimate_norm1(n, |x, adjoint| {
                let trans = if adjoint { Trans::Adjoint } else { Trans::No };
                getrs(lu.as_ref(), None, x, trans, Par::Seq);
                Ok(())
            })?;
            Ok(condition::reciprocal(inverse, norm))
        })
    }
}

/// LU with partial pivoting of one matrix of a batch in place (column-major), A's entries checked
/// first; `original`: A where the caller still has it (see [`small_lu`]).
fn factor_one<T: Scalar>(
    backend: hetla_kernels::Backend,
    mut a: MatMut<'_, T>,
    original: Option<MatRef<'_, T>>,
) -> Result<LuPivots> {
    check_finite("A", a.as_ref())?;
    let (n, k) = (a.ncols(), a.nrows().min(a.ncols()));
    let mut pivots = vec![0; k];
    let (mut left, right) = a.as_mut().split_at_col_mut(k);
    let zero = small_lu(
        backend,
        left.as_mut(),
        original.map(|a| a.subcols(0, k)),
        &mut pivots,
    )?;
    if n > k {
        // A wide matrix: the rest gets the interchanges and U_12 = L_11^-1 A_12.
        backend.lu_update(left.as_ref(), &pivots, right, Par::Seq)?;
    }
    Ok((pivots, zero))
}
