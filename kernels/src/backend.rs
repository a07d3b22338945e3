//! Run-time choice of the library that executes the tile kernels.

use std::{fmt, str::FromStr};

use faer::{Conj, MatMut, MatRef, Par};

use crate::any::each_precision;
use crate::scalar::adjoint_conj;
use crate::{AnyMut, AnyRef};
use crate::{KernelError, Op, Scalar, faer_impl, split};

/// The library that runs the CPU tile kernels. Chosen at run time; a backend not compiled
/// into this build reports [`KernelError::BackendUnavailable`] instead of running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// faer, pure Rust, always available (the default).
    #[default]
    Faer,
    /// OpenBLAS (cargo feature `openblas`, system library `libopenblas`).
    OpenBlas,
}

impl Backend {
    /// Every backend hetla knows, compiled in or not.
    pub const ALL: [Backend; 2] = [Backend::Faer, Backend::OpenBlas];

    /// The backend's name, which is also the value `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Faer => "faer",
            Backend::OpenBlas => "openblas",
        }
    }

    /// Whether this build can run the backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Faer => true,
            Backend::OpenBlas => cfg!(feature = "openblas"),
        }
    }

    /// The backends this build can run.
    pub fn available() -> Vec<Backend> {
        Self::ALL.into_iter().filter(|b| b.is_available()).collect()
    }

    /// `Ok(self)` when compiled in, else the error that says how to enable it.
    pub fn ensure_available(self) -> Result<Self, KernelError> {
        if self.is_available() {
            Ok(self)
        } else {
            Err(KernelError::BackendUnavailable { name: self.name() })
        }
    }

    /// Runs `op` on its operands: `reads` (in the order [`Op`] documents) and the tile it
    /// overwrites, in any precision (complex: the Hermitian forms, see [`crate::Scalar`]).
    /// Checks counts and shapes first, so a mistake is an error, not a panic.
    pub fn run<T: Scalar>(
        self,
        op: Op,
        reads: &[MatRef<'_, T>],
        write: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let mut shapes: Vec<_> = reads.iter().map(|m| (m.nrows(), m.ncols())).collect();
        shapes.push((write.nrows(), write.ncols()));
        op.check_shapes(&shapes)
            .map_err(|reason| KernelError::Operands { op, reason })?;
        self.ensure_available()?;
        let plain = Conj::No;
        // An operand used as its adjoint: the transposed view, conjugated.
        fn adjoint<T: Scalar>(m: MatRef<'_, T>) -> (MatRef<'_, T>, Conj) {
            (m.transpose(), adjoint_conj::<T>())
        }
        match op {
            Op::Potrf => self.potrf(write, par),
            Op::Trsm => self.trsm(reads[0], write, par),
            Op::Syrk => self.syrk(reads[0], write, par),
            Op::GemmNt => self.product((reads[0], plain), adjoint(reads[1]), write, -1.0, 1.0, par),
            Op::SolveLower => self.solve_lower(reads[0], false, write, par),
            Op::SolveLowerTrans => self.solve_lower(reads[0], true, write, par),
            Op::Update => self.product((reads[0], plain), (reads[1], plain), write, -1.0, 1.0, par),
            Op::UpdateTrans => {
                self.product(adjoint(reads[0]), (reads[1], plain), write, -1.0, 1.0, par)
            }
            Op::Add => {
                faer::zip!(write, reads[0]).for_each(|faer::unzip!(y, x)| *y += *x);
                Ok(())
            }
            Op::MatMul(p) => {
                let a = if p.trans_a {
                    adjoint(reads[0])
                } else {
                    (reads[0], plain)
                };
                let b = if p.trans_b {
                    adjoint(reads[1])
                } else {
                    (reads[1], plain)
                };
                self.product(a, b, write, p.alpha(), p.beta(), par)
            }
        }
    }

    /// [`Backend::run`] on tiles whose precision is known at run time only: every operand
    /// must have the written tile's precision (an error names the one that has not).
    pub fn run_any(
        self,
        op: Op,
        reads: &[AnyRef<'_>],
        write: AnyMut<'_>,
        par: Par,
    ) -> Result<(), KernelError> {
        fn typed<T: Scalar>(
            backend: Backend,
            op: Op,
            reads: &[AnyRef<'_>],
            write: MatMut<'_, T>,
            par: Par,
        ) -> Result<(), KernelError> {
            let reads = reads
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    T::of_any_ref(*r).ok_or_else(|| KernelError::Operands {
                        op,
                        reason: format!(
                            "operand {i} is in precision {} but the written tile is in {}",
                            r.precision(),
                            T::PRECISION
                        ),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            backend.run(op, &reads, write, par)
        }
        each_precision!(write, AnyMut, w => typed(self, op, reads, w, par))
    }

    /// C <- alpha A B + beta C. A and B may be transposed views (plain transposes, not
    /// conjugated). With beta = 0 the old C is not read; with an empty inner dimension or
    /// alpha = 0 only the scaling happens. With `Par::Rayon(p)` the product runs as `p`
    /// sequential pieces on the current rayon pool (see the `split` module).
    pub fn matmul<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
        alpha: f64,
        beta: f64,
        par: Par,
    ) -> Result<(), KernelError> {
        self.product((a, Conj::No), (b, Conj::No), c, alpha, beta, par)
    }

    /// [`Backend::matmul`] with operands conjugated where their `Conj` says so.
    fn product<T: Scalar>(
        self,
        a: (MatRef<'_, T>, Conj),
        b: (MatRef<'_, T>, Conj),
        c: MatMut<'_, T>,
        alpha: f64,
        beta: f64,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        if a.0.ncols() == 0 || alpha == 0.0 {
            faer_impl::scale(c, beta);
            return Ok(());
        }
        self.split_matmul(a, b, c, alpha, beta, par)
    }

    /// A <- L, the lower Cholesky factor (A = L L^H) of the square tile A (upper triangle
    /// untouched).
    pub fn potrf<T: Scalar>(self, a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
        self.ensure_available()?;
        if split::threads(par) == 1 || a.nrows() < 2 * split::POTRF_BLOCK {
            self.potrf_seq(a)
        } else {
            self.split_potrf(a, par)
        }
    }

    /// B <- B L^-H with L lower triangular.
    pub fn trsm<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        b: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        self.split_trsm(l, b, par)
    }

    /// C <- C - A A^H on the lower triangle of C (SYRK; HERK for a complex type).
    pub fn syrk<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        if a.ncols() == 0 {
            return Ok(());
        }
        self.split_syrk(a, c, par)
    }

    /// C <- C - A B. A and B may be transposed views (`.transpose()`, not conjugated): the
    /// BLAS backend passes them as transpose flags, faer packs a transposed B into
    /// column-major scratch (its fast layout).
    pub fn gemm_sub<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.matmul(a, b, c, -1.0, 1.0, par)
    }

    /// X <- L^-1 X, or X <- L^-H X when `adjoint`, with L lower triangular.
    pub fn solve_lower<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        adjoint: bool,
        x: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        self.split_solve_lower(l, adjoint, x, par)
    }

    /// The library's own Cholesky of a whole matrix on `par` threads, as a user calling it
    /// directly would (faer's `cholesky_in_place`, LAPACK ?potrf with OpenBLAS's threads):
    /// the peer hetla is measured against, not a tile kernel.
    pub fn library_potrf<T: Scalar>(self, a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
        self.ensure_available()?;
        match self {
            Backend::Faer => faer_impl::library_potrf(a, par),
            Backend::OpenBlas => openblas!(library_potrf(a, par)),
        }
    }

    /// The library's own C <- C - A B on `par` threads (faer's parallel `matmul`, OpenBLAS
    /// ?gemm with its threads): the peer of `--compare`. Give column-major A and B for the
    /// library's fast path.
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

    /// The number of threads the library itself would use for its next call: OpenBLAS's
    /// process-wide count (1 whenever hetla's kernels run), `None` for faer (which uses the
    /// pool it is called from).
    pub fn library_threads(self) -> Option<usize> {
        match self {
            Backend::Faer => None,
            #[cfg(feature = "openblas")]
            Backend::OpenBlas => Some(crate::openblas_impl::get_threads()),
            #[cfg(not(feature = "openblas"))]
            Backend::OpenBlas => None,
        }
    }

    /// The sequential kernels every parallel one is made of (one thread: OpenBLAS is told
    /// so before each call).
    pub(crate) fn matmul_seq<T: Scalar>(
        self,
        a: (MatRef<'_, T>, Conj),
        b: (MatRef<'_, T>, Conj),
        c: MatMut<'_, T>,
        alpha: f64,
        beta: f64,
    ) -> Result<(), KernelError> {
        match self {
            Backend::Faer => faer_impl::matmul_scaled(a, b, c, alpha, beta),
            Backend::OpenBlas => openblas!(gemm(a, b, c, alpha, beta)),
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
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| KernelError::UnknownBackend {
                given: s.to_string(),
            })
    }
}
