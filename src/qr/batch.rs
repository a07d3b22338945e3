//! Stacks of QR and least-squares problems (issue 73's batches): each matrix one task on one core
//! with the sequential tile kernels, the platform's cores sharing the batch
//! ([`crate::batch::on_every_core`]), as LU's and Cholesky's batches. A small matrix is one tile:
//! its QR is one ?geqrt of the whole matrix (the kernel the tiled QR runs on its tiles, LAPACK's
//! reflectors and R, a real diagonal in complex types), with no task graph around it. Each matrix
//! has its own result: one that fails (a non-finite entry, a wrong shape) is reported where it is,
//! and the others are done.

use faer::{Mat, MatMut, MatRef, Par};
use hetla_kernels::{Backend, Scalar};

use super::Qr;
use super::householder::check_rhs_rows;
use super::pivoted::{RankedSolution, checked_rcond, least_squares_by};
use crate::Result;
use crate::batch::{on_every_core, on_every_core_mut, one_per_matrix};
use crate::check::check_finite;
use crate::interop::column_major;

impl Qr {
    /// Factors every A_i (any shape) in place by Householder QR as LAPACK's ?geqrt leaves one: R on
    /// and above the diagonal, the reflectors below, in block reflectors of the builder's inner
    /// block ([`Qr::inner_block`], 32 by default); the i-th result is A_i's T's (ib x min(m, n),
    /// block j's ib x ib upper triangle in columns j ib..; ib the inner block, at most min(m, n)),
    /// which [`Qr::q_batch`] takes. Each matrix a single task on one core, the batch spread over
    /// all the platform's CPU clusters; a matrix whose columns are not contiguous goes through a
    /// column-major copy written back. The outer error is for the call (a platform that cannot be
    /// built); a non-finite entry is matrix i's error, found before it is touched.
    ///
    /// ```
    /// use faer::Mat;
    /// let a: Vec<Mat<f64>> = (0..20).map(|i| hetla::matgen::random_in(16, 8, i)).collect();
    /// let mut h = a.clone();
    /// let mut views: Vec<_> = h.iter_mut().map(|h| h.as_mut()).collect();
    /// let qr = hetla::Qr::new();
    /// let t: Vec<Mat<f64>> = qr.factor_batch_in_place(&mut views)?.into_iter().collect::<Result<_, _>>()?;
    /// let mut q: Vec<Mat<f64>> = (0..20).map(|_| Mat::zeros(16, 8)).collect();
    /// let h: Vec<_> = h.iter().map(|h| h.as_ref()).collect();
    /// let t: Vec<_> = t.iter().map(|t| t.as_ref()).collect();
    /// let mut views: Vec<_> = q.iter_mut().map(|q| q.as_mut()).collect();
    /// qr.q_batch(&h, &t, &mut views)?.into_iter().collect::<Result<Vec<_>, _>>()?;
    /// // A_3 = Q_3 R_3 (R the upper triangle of the factored matrix).
    /// let r = Mat::from_fn(8, 8, |i, j| if i <= j { h[3][(i, j)] } else { 0.0 });
    /// assert!((&q[3] * &r - &a[3]).norm_max() < 1e-12);
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn factor_batch_in_place<T: Scalar>(
        &self,
        a: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<Mat<T>>>> {
        let platform = self.resolve_platform()?;
        let (backend, inner) = (platform.backend(), self.inner);
        Ok(on_every_core_mut(&platform, a, |_, mut a| {
            check_finite("A", a.as_ref())?;
            column_major(a.as_mut(), |a| factor_one(backend, inner, a))
        }))
    }

    /// Writes the first `q[i].ncols()` columns of A_i's Q into `q[i]` (m_i rows, at most m_i
    /// columns; whatever it held is overwritten) for every i, from the factored matrices and T's
    /// that [`Qr::factor_batch_in_place`] left (LAPACK's ?orgqr of each, as
    /// [`QrFactor::q_into`](crate::QrFactor::q_into)): each a single task on one core, the batch
    /// spread as the factorisation's. The outer error is for the call (`factored`, `t` and `q` of
    /// different lengths, a platform that cannot be built); the i-th result is matrix i's (a `q[i]`
    /// or `t[i]` of the wrong shape).
    pub fn q_batch<T: Scalar>(
        &self,
        factored: &[MatRef<'_, T>],
        t: &[MatRef<'_, T>],
        q: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<()>>> {
        if t.len() != factored.len() {
            return Err(one_per_matrix("t", "sets of T's", t.len(), factored.len()));
        }
        if q.len() != factored.len() {
            return Err(one_per_matrix("q", "outputs", q.len(), factored.len()));
        }
        let platform = self.resolve_platform()?;
        let backend = platform.backend();
        Ok(on_every_core_mut(&platform, q, |i, mut q| {
            let (h, t) = (factored[i], t[i]);
            check_rhs_rows(q.as_ref(), h.nrows())?;
            if q.ncols() > h.nrows() {
                return Err(crate::Error::InvalidOption {
                    option: "q",
                    reason: format!(
                        "matrix {i}'s has {} columns, but its Q has only {} (its rows)",
                        q.ncols(),
                        h.nrows()
                    ),
                });
            }
            column_major(q.as_mut(), |mut q| {
                q.fill(T::from_f64(0.0));
                q.as_mut()
                    .diagonal_mut()
                    .column_vector_mut()
                    .fill(T::from_f64(1.0));
                if t.ncols() > 0 {
                    backend.qr_apply(h, t, q, false, Par::Seq)?;
                }
                Ok(())
            })
        }))
    }

    /// The minimum-norm least-squares solutions of min ||A_i X_i - B_i||_2 for every i, of any
    /// shape and rank, and each A_i's effective rank, as [`crate::lstsq_rank`] gives one (LAPACK's
    /// ?gelsy; `rcond` as there), each problem a single task on one core with the sequential
    /// kernels (the QR of [`Qr::factor_batch_in_place`], then the pivoted one only for a matrix not
    /// clearly of full column rank), the batch spread as the factorisation's. The outer error is
    /// for the call (`a` and `b` of different lengths, a platform that cannot be built); the i-th
    /// result is problem i's (B_i's rows, a non-finite entry, an `rcond` that is not finite).
    ///
    /// ```
    /// use faer::Mat;
    /// let a: Vec<Mat<f64>> = (0..10).map(|i| hetla::matgen::random_in(12, 4, i)).collect();
    /// let b: Vec<Mat<f64>> = a.iter().map(|a| a * Mat::<f64>::ones(4, 1)).collect();
    /// let a_views: Vec<_> = a.iter().map(|a| a.as_ref()).collect();
    /// let b_views: Vec<_> = b.iter().map(|b| b.as_ref()).collect();
    /// for solved in hetla::Qr::new().lstsq_rank_batch(&a_views, &b_views, None)? {
    ///     let (x, rank) = solved?;
    ///     assert_eq!(rank, 4);
    ///     assert!((x - Mat::<f64>::ones(4, 1)).norm_max() < 1e-12);
    /// }
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn lstsq_rank_batch<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        b: &[MatRef<'_, T>],
        rcond: Option<f64>,
    ) -> Result<Vec<Result<RankedSolution<T>>>> {
        if b.len() != a.len() {
            return Err(one_per_matrix("b", "right-hand sides", b.len(), a.len()));
        }
        let platform = self.resolve_platform()?;
        let (backend, inner) = (platform.backend(), self.inner);
        Ok(on_every_core(&platform, a.len(), |i| {
            let rcond = checked_rcond(a[i], b[i], rcond)?;
            least_squares_by(a[i], b[i], rcond, Par::Seq, |a, b| {
                let mut h = a.to_owned();
                let t = factor_one(backend, inner, h.as_mut())?;
                let mut c = b.to_owned();
                if t.ncols() > 0 {
                    backend.qr_apply(h.as_ref(), t.as_ref(), c.as_mut(), true, Par::Seq)?;
                }
                let n = h.ncols();
                let r = Mat::from_fn(
                    n,
                    n,
                    |i, j| if i <= j { h[(i, j)] } else { T::from_f64(0.0) },
                );
                Ok((r, c))
            })
        }))
    }
}

impl Qr {
    /// The singular values of every A_i (any shape) in non-increasing order, in its real precision
    /// ([`Backend::singular_values`], faer's SVD without vectors compiled in the kernels' crate:
    /// scipy's `s` of a stacked `lstsq` with its SVD drivers), each matrix a single task on one
    /// core, the batch spread as [`Qr::factor_batch_in_place`]'s. The i-th result is A_i's, or why
    /// it has none (a non-finite entry, an SVD that did not converge).
    pub fn singular_values_batch<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
    ) -> Result<Vec<Result<Vec<T::Real>>>> {
        let platform = self.resolve_platform()?;
        Ok(on_every_core(&platform, a.len(), |i| {
            check_finite("A", a[i])?;
            Backend::Faer
                .singular_values(a[i])
                .ok_or(crate::Error::NoConvergence {
                    what: "singular values of A",
                })
        }))
    }
}

/// ?geqrt of the column-major `a` on the calling core, in block reflectors of `inner` columns (at
/// most min(m, n)): its T's.
fn factor_one<T: Scalar>(backend: Backend, inner: usize, a: MatMut<'_, T>) -> Result<Mat<T>> {
    let k = a.nrows().min(a.ncols());
    let mut t = Mat::zeros(inner.min(k).max(1), k);
    if k > 0 {
        backend.qr_tile(a, t.as_mut(), Par::Seq)?;
    }
    Ok(t)
}
