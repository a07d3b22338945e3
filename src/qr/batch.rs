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
use super::pivoted::{
    Cutoff, RankedSolution, SvdSolution, checked_rcond, least_squares_by, rank_of_singular_values,
    singular_values_of,
};
use crate::Result;
use crate::batch::{on_every_core, on_every_core_each, on_every_core_mut, one_per_matrix};
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
        Ok(on_every_core_mut(&platform, q, |i, q| {
            check_q_shape(i, q.as_ref(), factored[i].nrows())?;
            form_q(backend, factored[i], t[i], q)
        }))
    }

    /// A_i = Q_i R_i for every A_i (any shape and strides, left unchanged): R_i into `r[i]` (n_i
    /// columns and min(m_i, n_i) to m_i rows: the upper triangle, zeros below it), and with `q` the
    /// first `q[i].ncols()` columns of Q_i into `q[i]` (m_i rows, at most m_i columns), as
    /// [`Qr::factor_batch_in_place`] then [`Qr::q_batch`] give them, but each matrix a single task
    /// on one core that copies A_i into a column-major scratch, factors it and writes R_i and Q_i
    /// while it is in cache (one pass over the batch's memory where those two take three; scipy's
    /// `qr` of a stack). Whatever the outputs held is overwritten. The outer error is for the call
    /// (`r` or `q` of another length than `a`, a platform that cannot be built); the i-th result is
    /// A_i's (a non-finite entry, an output of the wrong shape), found before A_i is factored.
    ///
    /// ```
    /// use faer::Mat;
    /// let a: Vec<Mat<f64>> = (0..20).map(|i| hetla::matgen::random_in(16, 8, i)).collect();
    /// let views: Vec<_> = a.iter().map(|a| a.as_ref()).collect();
    /// let (mut q, mut r): (Vec<Mat<f64>>, Vec<Mat<f64>>) =
    ///     (0..20).map(|_| (Mat::zeros(16, 8), Mat::zeros(8, 8))).unzip();
    /// let mut q_views: Vec<_> = q.iter_mut().map(|q| q.as_mut()).collect();
    /// let mut r_views: Vec<_> = r.iter_mut().map(|r| r.as_mut()).collect();
    /// let done = hetla::Qr::new().factor_batch_into(&views, &mut r_views, Some(&mut q_views))?;
    /// assert!(done.iter().all(|d| d.is_ok()));
    /// assert!((&q[3] * &r[3] - &a[3]).norm_max() < 1e-12);
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn factor_batch_into<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        r: &mut [MatMut<'_, T>],
        q: Option<&mut [MatMut<'_, T>]>,
    ) -> Result<Vec<Result<()>>> {
        if r.len() != a.len() {
            return Err(one_per_matrix("r", "outputs", r.len(), a.len()));
        }
        let mut outputs: Vec<(MatMut<'_, T>, Option<MatMut<'_, T>>)> = match q {
            Some(q) if q.len() != a.len() => {
                return Err(one_per_matrix("q", "outputs", q.len(), a.len()));
            }
            Some(q) => r
                .iter_mut()
                .zip(q.iter_mut())
                .map(|(r, q)| (r.as_mut(), Some(q.as_mut())))
                .collect(),
            None => r.iter_mut().map(|r| (r.as_mut(), None)).collect(),
        };
        let platform = self.resolve_platform()?;
        let (backend, inner) = (platform.backend(), self.inner);
        Ok(on_every_core_each(&platform, &mut outputs, |i, (r, q)| {
            let a = a[i];
            let (m, n) = (a.nrows(), a.ncols());
            let k = m.min(n);
            if r.ncols() != n || r.nrows() < k || r.nrows() > m {
                return Err(crate::Error::InvalidOption {
                    option: "r",
                    reason: format!(
                        "matrix {i}'s R is {}x{}, but its A is {m}x{n}: R has {n} columns and {k} to {m} rows",
                        r.nrows(),
                        r.ncols()
                    ),
                });
            }
            if let Some(q) = q {
                check_q_shape(i, q.as_ref(), m)?;
            }
            check_finite("A", a)?;
            let mut h = Mat::zeros(m, n);
            crate::copy::copy(a, h.as_mut());
            let t = factor_one(backend, inner, h.as_mut())?;
            r.fill(T::from_f64(0.0));
            for j in 0..n {
                let rows = (j + 1).min(k);
                r.as_mut()
                    .col_mut(j)
                    .subrows_mut(0, rows)
                    .copy_from(h.col(j).subrows(0, rows));
            }
            match q {
                Some(q) => form_q(backend, h.as_ref(), t.as_ref(), q.as_mut()),
                None => Ok(()),
            }
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
        self.each_least_squares(a, b, rcond, |i, rcond, qr| {
            least_squares_by(a[i], b[i], Cutoff::Pivoted(rcond), Par::Seq, qr)
        })
    }

    /// [`crate::lstsq_svd`] of every problem (A_i of any shape and rank): each minimum-norm
    /// solution, A_i's effective rank by its singular values (?gelsd's) and the values, each
    /// problem a single task on one core as [`Qr::lstsq_rank_batch`]'s. The outer error is for the
    /// call (`a` and `b` of different lengths, a platform that cannot be built); the i-th result is
    /// problem i's.
    pub fn lstsq_svd_batch<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        b: &[MatRef<'_, T>],
        rcond: Option<f64>,
    ) -> Result<Vec<Result<SvdSolution<T>>>> {
        self.each_least_squares(a, b, rcond, |i, rcond, qr| {
            let singular = singular_values_of(a[i])?;
            let cutoff = Cutoff::Given(rank_of_singular_values::<T>(&singular, rcond));
            let (x, rank) = least_squares_by(a[i], b[i], cutoff, Par::Seq, qr)?;
            Ok((x, rank, singular))
        })
    }

    /// `solve(i, rcond, qr)` for every problem i on every core, with problem i's `rcond` checked
    /// and `qr` the QR of a problem on the calling core (R and Q^H B); the lengths of `a` and `b`
    /// checked first.
    fn each_least_squares<T: Scalar, R: Send>(
        &self,
        a: &[MatRef<'_, T>],
        b: &[MatRef<'_, T>],
        rcond: Option<f64>,
        solve: impl Fn(usize, f64, &OneCoreQr<T>) -> Result<R> + Sync,
    ) -> Result<Vec<Result<R>>> {
        if b.len() != a.len() {
            return Err(one_per_matrix("b", "right-hand sides", b.len(), a.len()));
        }
        let platform = self.resolve_platform()?;
        let (backend, inner) = (platform.backend(), self.inner);
        let qr = move |a: MatRef<'_, T>, b: MatRef<'_, T>| one_core_qr(backend, inner, a, b);
        Ok(on_every_core(&platform, a.len(), |i| {
            let rcond = checked_rcond(a[i], b[i], rcond)?;
            solve(i, rcond, &qr)
        }))
    }
}

/// A least-squares problem's QR on the calling core: R and Q^H B of A (m >= n) and B.
type OneCoreQr<T> = dyn Fn(MatRef<'_, T>, MatRef<'_, T>) -> Result<(Mat<T>, Mat<T>)> + Sync;

/// The QR of `a` (m >= n) on the calling core: R (n x n) and Q^H `b`.
fn one_core_qr<T: Scalar>(
    backend: Backend,
    inner: usize,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<(Mat<T>, Mat<T>)> {
    let mut h = a.to_owned();
    let t = factor_one(backend, inner, h.as_mut())?;
    let mut c = b.to_owned();
    if t.ncols() > 0 {
        backend.qr_apply(h.as_ref(), t.as_ref(), c.as_mut(), true, Par::Seq)?;
    }
    let n = h.ncols();
    let mut r = Mat::zeros(n, n);
    r.as_mut()
        .copy_from_triangular_upper(h.as_ref().subrows(0, n));
    Ok((r, c))
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

/// Matrix i's `q` (rows those of its factored A, at most as many columns), checked.
fn check_q_shape<T: Scalar>(i: usize, q: MatRef<'_, T>, m: usize) -> Result<()> {
    check_rhs_rows(q, m)?;
    if q.ncols() > m {
        return Err(crate::Error::InvalidOption {
            option: "q",
            reason: format!(
                "matrix {i}'s has {} columns, but its Q has only {m} (its rows)",
                q.ncols()
            ),
        });
    }
    Ok(())
}

/// Writes the first `q.ncols()` columns of Q into `q` (shape checked by [`check_q_shape`]) from the
/// factored `h` and its T's (LAPACK's ?orgqr), on the calling core.
fn form_q<T: Scalar>(
    backend: Backend,
    h: MatRef<'_, T>,
    t: MatRef<'_, T>,
    q: MatMut<'_, T>,
) -> Result<()> {
    column_major(q, |mut q| {
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
}
