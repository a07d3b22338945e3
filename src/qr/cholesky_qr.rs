//! CholeskyQR2 for tall-skinny matrices (Fukaya, Nakatsukasa, Yanagisawa and Yamamoto's, as SLATE
//! offers it): Q and R from the Gram matrix instead of reflectors. One pass is W = A^H A, L L^H = W
//! (POTRF), Q = A L^-H (TRSM), R = L^H: three level-3 steps over A, all of them products that run
//! at the machine's rate, against Householder QR's panels. One pass loses orthogonality as
//! cond(A)^2 eps; the second pass on Q restores it while cond(A) stays below about 1/sqrt(eps) (1e8
//! in double). When a Gram matrix is not numerically positive definite (its POTRF fails: A is too
//! ill-conditioned), the factorisation falls back to Householder QR ([`Qr`]) and says so
//! ([`CholeskyQrPath`]).

use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Mat, MatRef};
use hetla_kernels::{KernelError, Op, Scalar};
use serde::Serialize;

use super::householder::{Qr, check_rhs_rows};
use crate::check::check_finite;
use crate::interop::Matrix;
use crate::run::on_all_cores;
use crate::{Error, Result};

/// Which way a [`CholeskyQr`] factorisation went.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "path")]
pub enum CholeskyQrPath {
    /// Two passes of CholeskyQR.
    CholeskyQr2,
    /// Householder QR, because the Gram matrix of this pass (1 or 2) was not numerically positive
    /// definite.
    Householder {
        /// The pass whose POTRF failed.
        pass: usize,
        /// The column of that Gram matrix whose pivot failed.
        column: usize,
    },
}

/// Configures CholeskyQR2 factorisations of tall-skinny matrices (m >= n); the run options (and the
/// fallback's) are [`Qr`]'s.
///
/// ```
/// use faer::Mat;
/// let a = Mat::from_fn(1000, 8, |i, j| ((i * 7 + j * 3) % 11) as f64 + if i == j { 5.0 } else { 0.0 });
/// let f = hetla::CholeskyQr::new().factor(a.as_ref())?;
/// assert_eq!(f.path(), &hetla::CholeskyQrPath::CholeskyQr2);
/// assert!((f.thin_q()? * f.r() - &a).norm_max() < 1e-10);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct CholeskyQr {
    fallback: Qr,
}

impl CholeskyQr {
    /// Default options: [`Qr`]'s.
    pub fn new() -> Self {
        Self::default()
    }

    /// The run options, and the Householder QR a failed pass falls back to.
    pub fn with(qr: Qr) -> Self {
        Self { fallback: qr }
    }

    /// Q (m x n, orthonormal columns) and R (n x n, upper triangular) of a copy of `a` (m >= n).
    pub fn factor<A: Matrix>(&self, a: A) -> Result<CholeskyQrFactor<A::Elem>> {
        let a = a.view();
        let (m, n) = (a.nrows(), a.ncols());
        if m < n {
            return Err(Error::Underdetermined { rows: m, cols: n });
        }
        check_finite("A", a)?;
        match self.two_passes(a)? {
            Ok((q, r)) => Ok(CholeskyQrFactor {
                q,
                r,
                path: CholeskyQrPath::CholeskyQr2,
            }),
            Err((pass, column)) => {
                let f = self.fallback.factor(a)?;
                Ok(CholeskyQrFactor {
                    q: f.thin_q()?,
                    r: f.r(),
                    path: CholeskyQrPath::Householder { pass, column },
                })
            }
        }
    }

    /// Q and R by two passes, or the pass and column whose Gram matrix was not positive definite.
    #[allow(clippy::type_complexity)]
    fn two_passes<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
    ) -> Result<std::result::Result<(Mat<T>, Mat<T>), (usize, usize)>> {
        let platform = self.fallback.resolve_platform()?;
        let (m, n) = (a.nrows(), a.ncols());
        // Per pass: the Gram matrix (m n^2), the solve (m n^2), the POTRF (n^3/3).
        let flops = 2.0 * (m * n * n) as f64 * T::PRECISION.flop_factor();
        let mut q = a.to_owned();
        let mut r = Mat::<T>::identity(n, n);
        let conj = if T::PRECISION.is_complex() {
            faer::Conj::Yes
        } else {
            faer::Conj::No
        };
        for pass in 1..=2 {
            let step = on_all_cores(&platform, flops, |backend, par| {
                let mut w = gram(q.as_ref(), conj, par);
                match backend.run(Op::Potrf, &[], w.as_mut(), par) {
                    Ok(()) => {}
                    Err(KernelError::NotPositiveDefinite { index }) => return Ok(Err(index)),
                    Err(e) => return Err(e),
                }
                let l = Mat::from_fn(
                    n,
                    n,
                    |i, j| if i >= j { w[(i, j)] } else { T::from_f64(0.0) },
                );
                // Q <- Q L^-H, R <- L^H R.
                backend.run(Op::Trsm, &[l.as_ref()], q.as_mut(), par)?;
                let mut next = Mat::<T>::zeros(n, n);
                faer::linalg::matmul::matmul_with_conj(
                    next.as_mut(),
                    faer::Accum::Replace,
                    l.as_ref().transpose(),
                    conj,
                    r.as_ref(),
                    faer::Conj::No,
                    T::from_f64(1.0),
                    par,
                );
                r = next;
                Ok(Ok(()))
            })?;
            if let Err(column) = step {
                return Ok(Err((pass, column)));
            }
        }
        Ok(Ok((q, r)))
    }
}

/// W = Q^H Q, its lower triangle only (SYRK/HERK: half a product's flops; POTRF reads no more): the
/// sum of the Gram matrices of Q's row bands, one band per thread, each a sequential product with
/// the band's whole height as its inner dimension (one parallel product of the whole of Q split its
/// small output instead, and ran at a third of the rate).
fn gram<T: Scalar>(q: MatRef<'_, T>, conj: faer::Conj, par: faer::Par) -> Mat<T> {
    use rayon::prelude::*;
    let (m, n) = (q.nrows(), q.ncols());
    let threads = par.degree().max(1).min(m.div_ceil(n.max(1)).max(1));
    let rows = m.div_ceil(threads);
    let partial = |start: usize| {
        let band = q.subrows(start, rows.min(m - start));
        let mut w = Mat::<T>::zeros(n, n);
        faer::linalg::matmul::triangular::matmul_with_conj(
            w.as_mut(),
            BlockStructure::TriangularLower,
            faer::Accum::Replace,
            band.transpose(),
            BlockStructure::Rectangular,
            conj,
            band,
            BlockStructure::Rectangular,
            faer::Conj::No,
            T::from_f64(1.0),
            faer::Par::Seq,
        );
        w
    };
    let starts: Vec<usize> = (0..m).step_by(rows.max(1)).collect();
    let partials: Vec<Mat<T>> = if starts.len() > 1 {
        starts
            .into_par_iter()
            .with_max_len(1)
            .map(partial)
            .collect()
    } else {
        starts.into_iter().map(partial).collect()
    };
    let mut w = Mat::<T>::zeros(n, n);
    for p in &partials {
        for j in 0..n {
            for i in j..n {
                w[(i, j)] += p[(i, j)];
            }
        }
    }
    w
}

/// Q and R of a [`CholeskyQr`] factorisation, and which way it went.
#[derive(Debug, Clone)]
pub struct CholeskyQrFactor<T: Scalar> {
    q: Mat<T>,
    r: Mat<T>,
    path: CholeskyQrPath,
}

impl<T: Scalar> CholeskyQrFactor<T> {
    /// The thin Q: m x n, orthonormal columns (a copy of the one the factorisation formed; the same
    /// name and type as [`QrFactor::thin_q`](crate::QrFactor::thin_q)'s).
    pub fn thin_q(&self) -> Result<Mat<T>> {
        Ok(self.q.clone())
    }

    /// R: n x n, upper triangular.
    pub fn r(&self) -> &Mat<T> {
        &self.r
    }

    /// CholeskyQR2, or the fallback and why.
    pub fn path(&self) -> &CholeskyQrPath {
        &self.path
    }

    /// The least-squares solution of min ||A X - B||_2: X = R^-1 Q^H B. An exactly zero diagonal
    /// entry of R is [`Error::RankDeficient`].
    pub fn solve_least_squares<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        let b = b.view();
        let (m, n) = (self.q.nrows(), self.q.ncols());
        check_rhs_rows(b, m)?;
        check_finite("B", b)?;
        if let Some(column) = (0..n).find(|&j| self.r[(j, j)] == T::from_f64(0.0)) {
            return Err(Error::RankDeficient { column });
        }
        let mut x = self.q.adjoint() * b;
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.r.as_ref(),
            x.as_mut(),
            faer::get_global_parallelism(),
        );
        B::owned_copy(x.as_ref())
    }
}
