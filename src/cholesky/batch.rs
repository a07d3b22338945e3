//! Many small systems at once: each matrix is one task (factor, then solve) run by one core with
//! the sequential kernels, and the platform's CPU clusters share the batch, every core of each
//! taking the next matrix as it finishes one (dynamic, so mixed sizes balance). GPUs take no part:
//! a small system is not worth a transfer.
//!
//! Each matrix has its own result: a matrix that fails (not positive definite, wrong shape,
//! non-finite) is reported where it is, and the others are solved.

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::{Backend, Par, Scalar};

use hetla_kernels::real_diagonal;

use super::{Cholesky, Factor, factor_error};
use crate::Result;
use crate::batch::{on_every_core, on_every_core_beside, on_every_core_mut, one_per_matrix};
use crate::check::{
    check_finite, check_hermitian_lower, check_hermitian_lower_entries, check_output_shape,
    check_square,
};
use crate::interop::{Matrix, column_major};

/// Solves the SPD (complex: Hermitian positive definite) systems A_i X_i = B_i, of equal or mixed
/// sizes, with default options: [`Cholesky::solve_batch`].
///
/// ```
/// use faer::Mat;
/// let a: Vec<Mat<f64>> = (0..100).map(|i| hetla::matgen::random_spd(8 + i % 5, i as u64)).collect();
/// let b: Vec<Mat<f64>> = a.iter().map(|a| Mat::ones(a.nrows(), 1)).collect();
/// let x = hetla::solve_spd_batch(&a, &b)?;
/// assert!(x.iter().all(|x| x.is_ok()));
/// # Ok::<(), hetla::Error>(())
/// ```
pub fn solve_spd_batch<A, B>(a: &[A], b: &[B]) -> Result<Vec<Result<B::Owned>>>
where
    A: Matrix + Sync,
    B: Matrix<Elem = A::Elem> + Sync,
    B::Owned: Send,
{
    Cholesky::new().solve_batch(a, b)
}

impl Cholesky {
    /// Solves A_i X_i = B_i for every i, each system a single task on one core (see the module
    /// docs), spread over all the platform's CPU clusters. Only the lower triangles of the A_i are
    /// read; they are left unchanged.
    ///
    /// The outer error is for the call as a whole (`a` and `b` of different lengths, a platform
    /// that cannot be built); the i-th inner result is system i's: its X_i, or why it has none
    /// ([`Error::NotPositiveDefinite`](crate::Error::NotPositiveDefinite) with the column, a shape
    /// or non-finite entry). Any
    /// [`Matrix`]: each X_i comes back in B_i's kind of matrix.
    pub fn solve_batch<A, B>(&self, a: &[A], b: &[B]) -> Result<Vec<Result<B::Owned>>>
    where
        A: Matrix + Sync,
        B: Matrix<Elem = A::Elem> + Sync,
        B::Owned: Send,
    {
        if b.len() != a.len() {
            return Err(one_per_matrix("b", "right-hand sides", b.len(), a.len()));
        }
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        Ok(on_every_core(&platform, a.len(), |i| {
            let (a, b) = (a[i].view(), b[i].view());
            crate::check::check_system("A", (a.nrows(), a.ncols()), b.nrows())?;
            check_finite("B", b)?;
            check_hermitian_lower_entries("A", a)?;
            let l = factor_copy(backend, a)?;
            B::new_owned(b.nrows(), b.ncols(), |mut x| {
                x.copy_from(b);
                backend.solve_lower(l.as_ref(), false, x.as_mut(), Par::Seq)?;
                backend.solve_lower(l.as_ref(), true, x.as_mut(), Par::Seq)?;
                Ok(())
            })
        }))
    }

    /// Factors every A_i, each a single task on one core, spread over all the platform's CPU
    /// clusters (as [`Cholesky::solve_batch`]); the i-th result is A_i's factor (of one tile: its
    /// solves run on the calling thread or the first cluster) or why it has none.
    pub fn factor_batch<A: Matrix + Sync>(&self, a: &[A]) -> Result<Vec<Result<Factor<A::Elem>>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        let factors = on_every_core(&platform, a.len(), |i| {
            let a = a[i].view();
            check_square("A", a.nrows(), a.ncols())?;
            factor_one(backend, a)
        });
        Ok(factors
            .into_iter()
            .map(|factor| {
                factor.map(|(l, norm)| {
                    let tile = l.nrows().max(1);
                    self.made(l, tile, norm, platform.clone(), self.run.scheduler)
                })
            })
            .collect())
    }
}

impl Cholesky {
    /// Factors every A_i in place, each a single task on one core (as [`Cholesky::factor_batch`]),
    /// without copies for column-major matrices (a matrix whose columns are not contiguous goes
    /// through a column-major copy written back): on success the lower triangle of each holds its
    /// L, the strict upper triangle is left as it was. The i-th result is A_i's: `Ok`, or why it
    /// has no factor (its lower triangle then partly overwritten, as ?potrf leaves it).
    ///
    /// ```
    /// use faer::Mat;
    /// let mut a: Vec<Mat<f64>> = (0..10).map(|i| hetla::matgen::random_spd(16, i)).collect();
    /// let mut views: Vec<_> = a.iter_mut().map(|a| a.as_mut()).collect();
    /// let done = hetla::Cholesky::new().factor_batch_in_place(&mut views)?;
    /// assert!(done.iter().all(|r| r.is_ok()));
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn factor_batch_in_place<T: Scalar>(
        &self,
        a: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<()>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        Ok(on_every_core_mut(&platform, a, |_, a| {
            factor_checked_in_place(backend, a)
        }))
    }

    /// Factors every A_i into `out[i]` (of the same shape), each a single task on one core that
    /// copies its matrix and factors the copy while it is in cache (one pass over the batch's
    /// memory, where a copy then [`Cholesky::factor_batch_in_place`] take two): `out[i]` receives
    /// A_i whole, then L in its lower triangle. The A_i are left unchanged. The outer error is for
    /// the call (`a` and `out` of different lengths, a platform that cannot be built), the i-th
    /// result A_i's.
    pub fn factor_batch_into<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        out: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<()>>> {
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        on_every_core_beside(&platform, a, ("out", "outputs", out), |i, a, mut out| {
            check_output_shape(&format!("output {i}"), out.shape(), a.shape())?;
            check_square("A", a.nrows(), a.ncols())?;
            check_hermitian_lower("A", a)?;
            out.copy_from(a);
            real_diagonal(out.as_mut());
            column_major(out.as_mut(), |mut out| match backend {
                // faer's own call is the fastest on a small matrix but may use the strict upper
                // triangle as scratch: it is put back from A_i, still in cache.
                Backend::Faer => {
                    let done = backend.library_potrf(out.as_mut(), Par::Seq);
                    for j in 1..out.ncols() {
                        out.as_mut()
                            .col_mut(j)
                            .subrows_mut(0, j)
                            .copy_from(a.col(j).subrows(0, j));
                    }
                    done.map_err(factor_error)
                }
                Backend::OpenBlas => backend.potrf(out, Par::Seq).map_err(factor_error),
            })
        })
    }
}

/// Checks the square `a` and factors it in place by the sequential tile kernel, which leaves the
/// strict upper triangle as it was (faer's own call may use it as scratch); a matrix whose columns
/// are not contiguous goes through a column-major copy written back.
fn factor_checked_in_place<T: Scalar>(backend: Backend, mut a: MatMut<'_, T>) -> Result<()> {
    check_square("A", a.nrows(), a.ncols())?;
    check_hermitian_lower("A", a.as_ref())?;
    real_diagonal(a.as_mut());
    column_major(a, |a| backend.potrf(a, Par::Seq).map_err(factor_error))
}

/// A copy of the square `a` factored by the sequential kernel, and ||A||_1.
fn factor_one<T: Scalar>(backend: Backend, a: MatRef<'_, T>) -> Result<(Mat<T>, f64)> {
    let norm = check_hermitian_lower("A", a)?;
    Ok((factor_copy(backend, a)?, norm))
}

/// A copy of the square, checked `a` factored by the sequential kernel.
fn factor_copy<T: Scalar>(backend: Backend, a: MatRef<'_, T>) -> Result<Mat<T>> {
    let mut l = a.to_owned();
    real_diagonal(l.as_mut());
    // The copy is ours: faer's own factorisation may use its strict upper triangle as scratch
    // (the tile kernel saves and restores it, for callers who factor in place). OpenBLAS's tile
    // kernel is LAPACK's ?potrf, which leaves it alone anyway (and its library call would set the
    // process-wide thread count under the other cores' feet).
    let kernel = match backend {
        Backend::Faer => backend.library_potrf(l.as_mut(), Par::Seq),
        Backend::OpenBlas => backend.potrf(l.as_mut(), Par::Seq),
    };
    kernel.map_err(factor_error)?;
    Ok(l)
}
