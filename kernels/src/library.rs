//! The libraries' whole-matrix calls (the peers hetla is measured against) and the sequential
//! kernels every parallel tile kernel is made of, for each [`Backend`].

use faer::{MatMut, MatRef, Par};

use crate::backend::Backend;
use crate::error::KernelError;
use crate::faer_impl;
use crate::op::Op;
use crate::product::Product;
use crate::scalar::Scalar;

/// Dispatches to the OpenBLAS implementation, or reports it as not built.
macro_rules! openblas {
    ($f:ident($($arg:expr),*)) => {{
        #[cfg(feature = "openblas")]
        {
            crate::openblas_impl::$f($($arg),*)
        }
        #[cfg(not(feature = "openblas"))]
        {
            let _ = ($($arg,)*);
            Err(crate::error::KernelError::BackendUnavailable { name: "openblas" })
        }
    }};
}

impl Backend {
    /// [`Backend::singular_values`]: faer's SVD without vectors, in `T`'s real type.
    pub(crate) fn singular_values_impl<T: Scalar>(self, a: MatRef<'_, T>) -> Option<Vec<T::Real>> {
        a.singular_values().ok()
    }

    /// The number of threads the library itself would use for its next call: OpenBLAS's
    /// process-wide count (1 whenever hetla's kernels run), `None` for faer (which uses the pool it
    /// is called from).
    pub fn library_threads(self) -> Option<usize> {
        match self {
            Backend::Faer => None,
            #[cfg(feature = "openblas")]
            Backend::OpenBlas => Some(crate::openblas_impl::get_threads()),
            #[cfg(not(feature = "openblas"))]
            Backend::OpenBlas => None,
        }
    }

    /// The library's own Cholesky of a whole matrix on `par` threads, as a user calling it directly
    /// would (faer's `cholesky_in_place`, LAPACK ?potrf with OpenBLAS's threads): the peer hetla is
    /// measured against, not a tile kernel.
    pub fn library_potrf<T: Scalar>(self, a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => faer_impl::library_potrf(a, par),
            Backend::OpenBlas => openblas!(library_potrf(a, par)),
        }
    }

    /// The library's own inverse of an SPD (Hermitian positive definite) matrix from its lower
    /// triangle, factorisation included, on `par` threads, as a user calling it directly would
    /// (faer's `llt` then `inverse`; LAPACK ?potrf then ?potri on OpenBLAS's threads): the peer of
    /// hetla's inverse. The lower triangle of `a` receives the inverse's.
    pub fn library_inverse<T: Scalar>(
        self,
        mut a: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => {
                use faer::linalg::solvers::DenseSolveCore;
                let global = faer::get_global_parallelism();
                faer::set_global_parallelism(par);
                let inverse = a.as_ref().llt(faer::Side::Lower).map(|llt| llt.inverse());
                faer::set_global_parallelism(global);
                let inverse = inverse.map_err(|e| match e {
                    faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } => {
                        KernelError::NotPositiveDefinite { index }
                    }
                })?;
                a.copy_from_triangular_lower(&inverse);
                Ok(())
            }
            Backend::OpenBlas => openblas!(library_inverse(a, par)),
        }
    }

    /// The library's own LU with partial pivoting of a whole square matrix on `par` threads, as a
    /// user calling it directly would (faer's `lu_in_place`, LAPACK ?getrf on OpenBLAS's threads):
    /// the peer of `hetla lu --compare`, not a tile kernel. Returns the first exactly zero pivot's
    /// column, if any (faer reports none).
    pub fn library_lu<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        par: Par,
    ) -> Result<Option<usize>, KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => Ok(faer_impl::library_lu(a, par)),
            Backend::OpenBlas => openblas!(library_lu(a, par)),
        }
    }

    /// The library's own symmetric (complex: Hermitian) indefinite factorisation of a whole
    /// matrix's lower triangle on `par` threads, as a user calling it directly would (faer's
    /// Bunch-Kaufman `lblt`, LAPACK ?sytrf / ?hetrf on OpenBLAS's threads): the peer of
    /// `hetla ldlt --compare`. Returns the first exactly zero pivot's column, if any (faer reports
    /// none).
    pub fn library_ldlt<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        par: Par,
    ) -> Result<Option<usize>, KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => {
                faer_impl::library_ldlt(a, par);
                Ok(None)
            }
            Backend::OpenBlas => openblas!(library_sytrf(a, par)),
        }
    }

    /// LAPACK's Aasen factorisation in two stages (?sytrf_aa_2stage / ?hetrf_aa_2stage) on
    /// OpenBLAS's threads: the other peer of `hetla ldlt --compare`. faer has none (an error).
    pub fn library_ldlt_aasen<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        par: Par,
    ) -> Result<Option<usize>, KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => Err(KernelError::Operands {
                op: Op::LuPanel,
                reason: "Aasen's two-stage factorisation as a library call is LAPACK's ?sytrf_aa_2stage (OpenBLAS); faer has none".into(),
            }),
            Backend::OpenBlas => openblas!(library_sytrf_aa(a, par)),
        }
    }

    /// The library's own Householder QR of a whole matrix on `par` threads (faer's blocked
    /// `qr_in_place`, LAPACK ?geqrf on OpenBLAS's threads): the peer of `hetla qr --compare`.
    pub fn library_qr<T: Scalar>(self, a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => {
                faer_impl::library_qr(a, par);
                Ok(())
            }
            Backend::OpenBlas => openblas!(library_qr(a, par)),
        }
    }

    /// LAPACK ?gels ('N', m >= n) of a whole matrix and its right-hand sides on OpenBLAS's threads:
    /// the solution in the first n rows of `b`; the first zero diagonal entry of R, if any. The
    /// least-squares peer of `hetla qr --compare`; OpenBLAS only (faer's is its `Qr`'s
    /// `solve_lstsq`).
    pub fn library_lstsq<T: Scalar>(
        self,
        a: MatMut<'_, T>,
        b: MatMut<'_, T>,
        par: Par,
    ) -> Result<Option<usize>, KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => Err(KernelError::Operands {
                op: Op::Geqrt,
                reason: "least squares as a library call is OpenBLAS's ?gels; faer's is Mat::qr().solve_lstsq".into(),
            }),
            Backend::OpenBlas => openblas!(library_lstsq(a, b, par)),
        }
    }

    /// The library's own C <- C - A B on `par` threads (faer's parallel `matmul`, OpenBLAS ?gemm
    /// with its threads): the peer of `--compare`. Give column-major A and B for the library's fast
    /// path.
    pub fn library_gemm_sub<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => {
                faer::linalg::matmul::matmul(c, faer::Accum::Add, a, b, T::from_f64(-1.0), par);
                Ok(())
            }
            Backend::OpenBlas => openblas!(library_gemm_sub(a, b, c, par)),
        }
    }

    /// The sequential kernels every parallel one is made of (one thread: OpenBLAS is told so before
    /// each call).
    pub(crate) fn matmul_seq<T: Scalar>(
        self,
        p: Product<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::matmul_scaled(p, c),
            Backend::OpenBlas => openblas!(gemm(p, c)),
        }
    }

    pub(crate) fn potrf_seq<T: Scalar>(self, a: MatMut<'_, T>) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::potrf(a),
            Backend::OpenBlas => openblas!(potrf(a)),
        }
    }

    pub(crate) fn trsm_seq<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        b: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::trsm(l, b),
            Backend::OpenBlas => openblas!(trsm(l, b)),
        }
    }

    pub(crate) fn syrk_seq<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::syrk(a, c),
            Backend::OpenBlas => openblas!(syrk(a, c)),
        }
    }

    pub(crate) fn solve_lower_seq<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        adjoint: bool,
        x: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::solve_lower(l, adjoint, x),
            Backend::OpenBlas => openblas!(solve_lower(l, adjoint, x)),
        }
    }

    /// An LU's triangular solve on the left, one thread: X <- L^-1 X with L the unit lower triangle
    /// of `t` (`Solve::LeftUnitLower`: its diagonal and upper triangle not read), or X <- U^-1 X
    /// with U its upper triangle (any other: its strict lower triangle not read).
    pub(crate) fn lu_solve_seq<T: Scalar>(
        self,
        t: MatRef<'_, T>,
        solve: crate::Solve,
        x: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        use faer::linalg::triangular_solve as faer_solve;
        if x.nrows() == 0 || x.ncols() == 0 {
            return Ok(());
        }
        let unit_lower = solve == crate::Solve::LeftUnitLower;
        match (self, unit_lower) {
            (Backend::Faer, true) => {
                faer_solve::solve_unit_lower_triangular_in_place(t, x, Par::Seq);
                Ok(())
            }
            (Backend::Faer, false) => {
                faer_solve::solve_upper_triangular_in_place(t, x, Par::Seq);
                Ok(())
            }
            (Backend::OpenBlas, true) => openblas!(solve_unit_lower(t, x)),
            (Backend::OpenBlas, false) => openblas!(solve_upper(t, x)),
        }
    }
}

/// The eigenvalues of the Hermitian matrix whose lower triangle is `m`'s (faer's, in c64), `None`
/// when the eigensolver does not converge. A plain function, compiled here (at this crate's
/// optimisation even in debug builds) for the O(n^3) inertia of a nearly singular matrix.
pub fn hermitian_eigenvalues(m: MatRef<'_, crate::scalar::c64>) -> Option<Vec<f64>> {
    m.self_adjoint_eigenvalues(faer::Side::Lower).ok()
}

/// The Bunch-Kaufman factor (faer's L B L^T, LAPACK's ?sytrf) of the symmetric matrix whose lower
/// triangle is `a`'s, as [`hermitian_eigenvalues`] compiled here: O(n^3) in double.
pub fn bunch_kaufman_real(a: faer::Mat<f64>) -> faer::linalg::solvers::Lblt<f64> {
    a.lblt(faer::Side::Lower)
}

/// The Bunch-Kaufman factor L B L^H of the Hermitian matrix whose lower triangle is `a`'s, as
/// [`bunch_kaufman_real`].
pub fn bunch_kaufman_complex(
    a: faer::Mat<crate::scalar::c64>,
) -> faer::linalg::solvers::Lblt<crate::scalar::c64> {
    a.lblt(faer::Side::Lower)
}

/// The eigenvalues and eigenvectors (as columns) of the Hermitian matrix whose lower triangle is
/// `m`'s, as [`hermitian_eigenvalues`].
pub fn hermitian_eigen(
    m: MatRef<'_, crate::scalar::c64>,
) -> Option<(Vec<f64>, faer::Mat<crate::scalar::c64>)> {
    let evd = m.self_adjoint_eigen(faer::Side::Lower).ok()?;
    let values = (0..m.nrows()).map(|i| evd.S()[i].re).collect();
    Some((values, evd.U().to_owned()))
}
