//! LU factorisation with partial pivoting (P A = L U) of general square matrices, and the solves
//! built on it: [`Lu`] (the builder, with the run options of [`Cholesky`]), [`LuFactor`], [`solve`]
//! (LAPACK's ?gesv) and [`solve_mixed`] (dsgesv: f32 LU refined in f64).
//!
//! The factorisation is a task graph as Cholesky's ([`Algorithm::Lu`](crate::Algorithm::Lu): block
//! columns of the tile's width; a panel task per block column, an update task per block column
//! right of it, the panel's interchanges applied to the columns left of it as tasks of their own)
//! run by the runtime on the platform's clusters; a matrix of one block is factored by one panel
//! call. An exactly zero pivot is not an error of the factorisation (LAPACK's info > 0): the factor
//! is complete and says where ([`LuFactor::singular`]); its solves refuse with [`Error::Singular`].
//!
//! Input: the matrix is checked for NaN and infinities before any work ([`Error::NonFinite`]), in
//! the same pass that takes ||A||_1 (for [`LuFactor::rcond`]) and ||A||_inf (for the refinement's
//! test).

use std::sync::Arc;

use faer::{Mat, MatMut, MatRef, Par};
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{Platform, RunOptions, Trace};

use crate::check::{check_finite, check_square};
use crate::condition;
use crate::interop::{Matrix, MatrixMut, column_major};
use crate::mixed::{Refinable, Refinement, System, lowered, mixed_solve};
use crate::plan::{Plan, SINGLE_TILE_UP_TO};
use crate::run::{RunConfig, on_all_cores};
use crate::{Backend, ClusterSpec, Error, Result};

pub(crate) mod batch;
mod device;
#[cfg(feature = "mpi")]
pub(crate) mod distributed;
pub(crate) mod plan;
pub(crate) mod room;
mod small;
#[cfg(feature = "mpi")]
pub(crate) mod tiled;
pub(crate) mod work;

/// The block width LU uses for a matrix of order `n` on `backend` when none is given: the whole
/// matrix up to order 512 (one panel call), else 256 columns, and 384 from order 4096 on with faer
/// (whose product gains more from the wider inner dimension: 4.08 s against 4.27-4.36 s at n = 8192
/// on 2 cores, AVX-512; OpenBLAS's was as fast at 256; see the LU issue's note).
pub(crate) fn default_lu_tile(n: usize, backend: Backend) -> usize {
    if n <= SINGLE_TILE_UP_TO {
        n.max(1)
    } else if backend == Backend::Faer && n >= 4096 {
        384
    } else {
        256
    }
}

/// Configures and runs LU factorisations with partial pivoting on the runtime; the run options are
/// every builder's (backend, clusters, threads, scheduler, platform, as [`crate::Cholesky`]'s) plus
/// LU's block width, with other default clusters: one per core (`ClusterSpec::Level(Level::Core)`),
/// not `auto`. LU's panel is a narrow, latency-bound step on the critical path; with a cluster per
/// core one core factors the next panel while the others update (lookahead), where one cluster of
/// every core would run the panel on all of them and the updates after it (measured on 2 cores at n
/// = 8192: 0.88x OpenBLAS dgetrf per core against 0.80x as one cluster; see the LU issue's note).
///
/// ```
/// use faer::Mat;
/// let a = Mat::from_fn(3, 3, |i, j| if i == j { 1.0 } else { 2.0 + (i + j) as f64 });
/// let lu = hetla::Lu::new().factor(a.as_ref())?;
/// let x = lu.solve(Mat::<f64>::ones(3, 1).as_ref())?;
/// let r = &a * &x - Mat::<f64>::ones(3, 1);
/// assert!(r.norm_max() < 1e-14);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Lu {
    pub(crate) run: RunConfig,
    pub(crate) tile: Option<usize>,
}

impl Default for Lu {
    fn default() -> Self {
        Self {
            run: RunConfig::on(ClusterSpec::Level(hetla_clusters::Level::Core)),
            tile: None,
        }
    }
}

impl Lu {
    /// Default options: faer, the default block width ([`Lu::tile_size_for`]), a cluster per core,
    /// MCT.
    pub fn new() -> Self {
        Self::default()
    }

    /// Block width b (block columns of b columns, the last one narrower). 0 is an error at
    /// factorisation time; b >= n factors the matrix as one panel.
    pub fn tile(mut self, b: usize) -> Self {
        self.tile = Some(b);
        self
    }

    crate::run::run_options!();
    crate::run::tuned_for!(crate::Family::Lu);
    crate::run::tensor_math!();

    /// The block width for a matrix of order `n`: the one given, else the default for the
    /// platform's backend: the whole matrix up to order 512 (one panel call), else 256 columns, and
    /// 384 from order 4096 on with faer (whose product gains more from the wider inner dimension).
    pub fn tile_size_for(&self, n: usize) -> usize {
        match self.resolve_platform() {
            Ok(platform) => self.tile_on(&platform, n),
            Err(_) => self
                .tile
                .unwrap_or_else(|| default_lu_tile(n, Backend::Faer)),
        }
    }

    /// The block width for order `n` on `platform` (already resolved).
    fn tile_on(&self, platform: &Platform, n: usize) -> usize {
        self.tile
            .unwrap_or_else(|| default_lu_tile(n, platform.backend()))
    }

    /// The plan of the LU factorisation of an `n x n` matrix in `precision`
    /// ([`Algorithm::Lu`](crate::Algorithm::Lu)), in the tile `hetla tune` saved on this machine
    /// near order `n` when this builder's user set nothing, as every call of the builder takes.
    pub fn plan(&self, n: usize, precision: Precision) -> Result<Plan> {
        let tile = self.tuned_for(n, precision).tile_size_for(n);
        Plan::new(crate::Algorithm::Lu { n }, tile, precision)
    }

    /// Factors a copy of `a` (left unchanged): any precision, any [`Matrix`]. An exactly singular
    /// matrix still factors (see [`LuFactor::singular`]).
    pub fn factor<A: Matrix>(&self, a: A) -> Result<LuFactor<A::Elem>> {
        let a = a.view();
        check_square("A", a.nrows(), a.ncols())?;
        let norms = norms(a)?;
        self.factor_checked(a.to_owned(), norms)
    }

    /// Factors `a` in place, taking ownership: no copy is made.
    pub fn factor_owned<T: Scalar>(&self, a: Mat<T>) -> Result<LuFactor<T>> {
        check_square("A", a.as_ref().nrows(), a.as_ref().ncols())?;
        let norms = norms(a.as_ref())?;
        self.factor_checked(a, norms)
    }

    /// LU with partial pivoting of `a`, of any shape `m x n`, in place, as LAPACK's ?getrf: P A = L
    /// U with L unit lower trapezoidal (m x min(m, n), below the diagonal) and U upper trapezoidal
    /// (min(m, n) x n). Returns the min(m, n) interchanges (0-based: row i was swapped with
    /// `ipiv[i]`) and the first column whose pivot is exactly zero (the factorisation is completed,
    /// as LAPACK completes it). A square matrix larger than a block goes through the task graph
    /// ([`Lu::factor`]'s); another through the recursive panel kernel on every core: the whole
    /// matrix when it is tall, the left square block of a wide one, its interchanges and L^-1 then
    /// applied to the rest. Any strides (a matrix whose columns are not contiguous goes through a
    /// column-major copy for the task graph). A non-finite entry is an error before any work.
    pub fn factor_in_place<T: Scalar>(
        &self,
        a: MatMut<'_, T>,
    ) -> Result<(Vec<usize>, Option<usize>)> {
        norms(a.as_ref())?;
        let n = a.ncols();
        if a.nrows() != n {
            let platform = self.resolve_platform()?;
            return self.factor_on(&platform, a, n);
        }
        let this = self.tuned_for(n, T::PRECISION);
        let platform = this.resolve_platform()?;
        let tile = this.checked_tile(&platform, n)?;
        this.factor_on(&platform, a, tile)
    }

    /// The tile of a square matrix of order `n` on `platform`; 0 is an error.
    fn checked_tile(&self, platform: &Platform, n: usize) -> Result<usize> {
        match self.tile_on(platform, n) {
            0 => Err(Error::ZeroTileSize),
            tile => Ok(tile),
        }
    }

    /// The factorisation of the checked `a` in place on `platform` (see [`Lu::factor_in_place`]): a
    /// square matrix of more than one block of `tile` through the task graph, any other through the
    /// panel kernels on every core, or with min(m, n) at most `small::SMALL_LU` on the calling core
    /// by a batch's kernel (`small.rs`).
    fn factor_on<T: Scalar>(
        &self,
        platform: &Platform,
        mut a: MatMut<'_, T>,
        tile: usize,
    ) -> Result<(Vec<usize>, Option<usize>)> {
        let (m, n) = (a.nrows(), a.ncols());
        if m == n && tile < n {
            return column_major(a, |a| self.run_plan(platform, a, tile));
        }
        let k = m.min(n);
        let (mf, nf, kf) = (m as f64, n as f64, k as f64);
        // ?getrf's count: m n k - (m + n) k^2 / 2 + k^3 / 3 multiply-adds.
        let flops = 2.0
            * (mf * nf * kf - (mf + nf) * kf * kf / 2.0 + kf.powi(3) / 3.0)
            * T::PRECISION.flop_factor();
        let mut ipiv = vec![0; k];
        let singular = on_all_cores(platform, flops, |backend, par| {
            let (mut left, right) = a.as_mut().split_at_col_mut(k);
            // A small matrix on the calling core, as a batch factors each of its matrices (the
            // same factors for a matrix alone and in a stack).
            let zero = if k <= small::SMALL_LU {
                small::small_lu(backend, left.as_mut(), None, &mut ipiv)?
            } else {
                backend.lu_panel(left.as_mut(), &mut ipiv, par)?
            };
            if n > k {
                // A wide matrix: its left k x k block is factored, the rest gets its
                // interchanges and U_12 = L_11^-1 A_12.
                backend.lu_update(left.as_ref(), &ipiv, right, par)?;
            }
            Ok::<_, hetla_kernels::KernelError>(zero)
        })?;
        Ok((ipiv, singular))
    }

    /// Factors `a` in place by `plan` (from [`Lu::plan`]) through the runtime, also for a matrix of
    /// one block; the trace, the interchanges (0-based, global: row i was swapped with `ipiv[i]`)
    /// and the first column with an exactly zero pivot. `a` is checked first as by [`Lu::factor`].
    pub fn factor_planned<T: Scalar>(
        &self,
        plan: &Plan,
        a: MatMut<'_, T>,
    ) -> Result<(Trace, Vec<usize>, Option<usize>)> {
        check_square("A", a.as_ref().nrows(), a.as_ref().ncols())?;
        norms(a.as_ref())?;
        let this = self.tuned_for(a.nrows(), T::PRECISION);
        let platform = this.resolve_platform()?;
        let options = RunOptions {
            scheduler: this.run.scheduler,
            tensor_math: this.run.tensor_math,
            ..RunOptions::default()
        };
        work::execute(plan, &platform, a, &options)
    }

    fn factor_checked<T: Scalar>(&self, mut a: Mat<T>, norms: Norms) -> Result<LuFactor<T>> {
        let this = self.tuned_for(a.nrows(), T::PRECISION);
        let platform = this.resolve_platform()?;
        let tile = this.checked_tile(&platform, a.nrows())?;
        let (ipiv, singular) = this.factor_on(&platform, a.as_mut(), tile)?;
        Ok(LuFactor {
            lu: a,
            ipiv,
            singular,
            norms,
            tile,
            platform,
        })
    }

    fn run_plan<T: Scalar>(
        &self,
        platform: &Platform,
        a: MatMut<'_, T>,
        tile: usize,
    ) -> Result<(Vec<usize>, Option<usize>)> {
        let plan = Plan::new(crate::Algorithm::Lu { n: a.nrows() }, tile, T::PRECISION)?;
        let options = RunOptions {
            scheduler: self.run.scheduler,
            tensor_math: self.run.tensor_math,
            ..RunOptions::default()
        };
        let (_, ipiv, singular) = work::execute(&plan, platform, a, &options)?;
        Ok((ipiv, singular))
    }

    /// Solves A X = B to double accuracy, factoring in single precision when that suffices
    /// (LAPACK's dsgesv and zcgesv): A rounded to `f32` (`c32`) is factored by the tiled LU, and
    /// the solution refined in double with residuals of the original A, to dsgesv's test (see
    /// [`crate::Cholesky::solve_refined`] for the loop), by GMRES-IR where classical refinement
    /// stalls. It falls back to an LU in double, and says why in [`Refinement::path`], when an
    /// entry of A overflows single precision, the single LU is singular, or neither refinement
    /// converges.
    pub fn solve_refined<A, B>(&self, a: A, b: B) -> Result<(B::Owned, Refinement)>
    where
        A: Matrix,
        A::Elem: Refinable,
        B: Matrix<Elem = A::Elem>,
    {
        let (a, b) = (a.view(), b.view());
        crate::check::check_system("A", (a.nrows(), a.ncols()), b.nrows())?;
        let norms = norms(a)?;
        check_finite("B", b)?;
        let (x, how) = self.refined(a, b, norms)?;
        Ok((B::owned_copy(x.as_ref())?, how))
    }

    fn refined<T: Refinable>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        norms: Norms,
    ) -> Result<(Mat<T>, Refinement)> {
        let platform = self.resolve_platform()?;
        let lu = self.clone().platform(platform.clone());
        let low = lowered(a);
        let overflow = (0..a.ncols())
            .flat_map(|j| (0..a.nrows()).map(move |i| (i, j)))
            .find(|&(i, j)| !low[(i, j)].finite());
        let system = System {
            b,
            norm: norms.inf,
            overflow: overflow.map(|(i, j)| (i, j, a[(i, j)].abs_f64())),
        };
        // Refined on the platform's first GPU where its budget holds A, A's widened factor and the
        // single one.
        if let Some(gpu) = lu.refinement_gpu::<T>(&platform, a.nrows(), b.ncols()) {
            return lu.refined_on_device(gpu, (a, norms), system, low);
        }
        let factor_low = || {
            let factor = lu.factor_checked(low, norms)?;
            Ok(match factor.singular {
                Some(column) => Err(zero_pivot::<T>(column)),
                None => {
                    let factor = std::rc::Rc::new(factor);
                    let (low, wide) = (factor.clone(), std::cell::OnceCell::new());
                    let precondition = move |x: MatMut<'_, T>| {
                        let wide = wide.get_or_init(|| factor.converted(T::widen));
                        wide.solve_in_place(x)
                    };
                    let solve_low = move |r: MatRef<'_, T::Low>| low.solve(r);
                    Ok(crate::mixed::LowFactor {
                        solve_low,
                        precondition,
                        shift: 0.0,
                    })
                }
            })
        };
        mixed_solve(
            system,
            factor_low,
            |x, b| general_residual(&platform, a, x, b),
            || lu.factor_checked(a.to_owned(), norms)?.solve(b),
        )
    }
}

/// Why a mixed solve's single LU is not enough: an exactly zero pivot at `column`.
fn zero_pivot<T: Refinable>(column: usize) -> String {
    format!(
        "the {} LU met an exactly zero pivot at column {column}",
        T::Low::PRECISION
    )
}

/// The LU factorisation with partial pivoting P A = L U of a square matrix: L unit lower triangular
/// and U upper triangular stored together (as LAPACK's ?getrf leaves them), with the row
/// interchanges.
#[derive(Clone)]
pub struct LuFactor<T: Scalar = f64> {
    lu: Mat<T>,
    ipiv: Vec<usize>,
    singular: Option<usize>,
    norms: Norms,
    tile: usize,
    platform: Arc<Platform>,
}

impl<T: Scalar> LuFactor<T> {
    /// The factors in another precision, each entry converted by `convert` (GMRES-IR's
    /// preconditioner: a low factor widened).
    pub(crate) fn converted<W: Scalar>(&self, convert: impl Fn(T) -> W) -> LuFactor<W> {
        let lu = &self.lu;
        LuFactor {
            lu: Mat::from_fn(lu.nrows(), lu.ncols(), |i, j| convert(lu[(i, j)])),
            ipiv: self.ipiv.clone(),
            singular: self.singular,
            norms: self.norms,
            tile: self.tile,
            platform: self.platform.clone(),
        }
    }
}

impl<T: Scalar> std::fmt::Debug for LuFactor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuFactor")
            .field("n", &self.n())
            .field("precision", &T::PRECISION)
            .field("tile", &self.tile)
            .field("singular", &self.singular)
            .finish()
    }
}

/// The factor and its interchanges, for [`Plan::residual`] of an LU plan.
impl<'a, T: Scalar> From<&'a LuFactor<T>> for crate::plan::Outcome<'a, T> {
    fn from(f: &'a LuFactor<T>) -> Self {
        crate::plan::Outcome::Pivoted {
            lu: f.lu.as_ref(),
            ipiv: &f.ipiv,
        }
    }
}

impl<T: Scalar> LuFactor<T> {
    /// Order of the factored matrix.
    pub fn n(&self) -> usize {
        self.lu.nrows()
    }

    /// The block width used.
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// L (strictly below the diagonal; its unit diagonal is implied) and U (on and above it) in one
    /// matrix, as LAPACK's ?getrf leaves them.
    pub fn storage(&self) -> MatRef<'_, T> {
        self.lu.as_ref()
    }

    /// The row interchanges, LAPACK's `ipiv` 0-based: at step i, row i was swapped with row
    /// `pivots()[i]` (>= i).
    pub fn pivots(&self) -> &[usize] {
        &self.ipiv
    }

    /// The first column (0-based) whose pivot is exactly zero (LAPACK's info - 1): U is then
    /// singular and the solves refuse with [`Error::Singular`]; `None` otherwise.
    pub fn singular(&self) -> Option<usize> {
        self.singular
    }

    /// L, unit lower triangular, copied.
    pub fn l(&self) -> Mat<T> {
        let n = self.n();
        Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => self.lu[(i, j)],
            std::cmp::Ordering::Equal => T::from_f64(1.0),
            std::cmp::Ordering::Less => T::from_f64(0.0),
        })
    }

    /// U, upper triangular, copied.
    pub fn u(&self) -> Mat<T> {
        let n = self.n();
        Mat::from_fn(n, n, |i, j| {
            if i <= j {
                self.lu[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        })
    }

    /// The row permutation as an array: row i of P A is row `permutation()[i]` of A.
    pub fn permutation(&self) -> Vec<usize> {
        let mut perm: Vec<usize> = (0..self.n()).collect();
        for (i, &p) in self.ipiv.iter().enumerate() {
            perm.swap(i, p);
        }
        perm
    }

    /// ln |det A| = sum ln |U_kk| (minus infinity for a singular matrix); it neither overflows nor
    /// underflows where det A would.
    pub fn log_abs_det(&self) -> f64 {
        (0..self.n()).map(|k| self.lu[(k, k)].abs_f64().ln()).sum()
    }

    /// det A = (-1)^(interchanges) prod U_kk, when its modulus is a normal `f64` (0 for a singular
    /// matrix); else [`Error::DeterminantOutOfRange`] with ln |det A|, whose sign
    /// [`LuFactor::slogdet`] gives.
    pub fn det(&self) -> Result<T> {
        if self.singular.is_some() {
            return Ok(T::from_f64(0.0));
        }
        let (sign, log_det) = self.slogdet();
        let modulus = log_det.exp();
        if !modulus.is_normal() {
            return Err(Error::DeterminantOutOfRange { log_det });
        }
        let det = sign.to_c64() * modulus;
        Ok(T::from_parts(det.re, det.im))
    }

    /// ||A||_1 of the factored matrix (exact: taken from the input while it was checked); a
    /// `Result` as [`Factor::norm1`](crate::Factor::norm1)'s, which may have to estimate it.
    pub fn norm1(&self) -> Result<f64> {
        Ok(self.norms.one)
    }

    /// numpy's `slogdet`: det A = sign exp(ln |det A|), the sign of unit modulus (+-1 for a real
    /// matrix, e^(i theta) for a complex one; 0 for a singular matrix) and ln |det A| (minus
    /// infinity for a singular one), which neither overflow nor underflow where det A would.
    pub fn slogdet(&self) -> (T, f64) {
        if self.singular.is_some() {
            return (T::from_f64(0.0), f64::NEG_INFINITY);
        }
        let swaps = self
            .ipiv
            .iter()
            .enumerate()
            .filter(|(i, p)| i != *p)
            .count();
        let mut phase = faer::c64::new(if swaps % 2 == 0 { 1.0 } else { -1.0 }, 0.0);
        for k in 0..self.n() {
            let u = self.lu[(k, k)];
            phase *= u.to_c64() / u.abs_f64();
        }
        (T::from_parts(phase.re, phase.im), self.log_abs_det())
    }

    /// A^-1, from the factors (n solves: A X = I, as LAPACK's ?getri computes it); a singular
    /// factor is [`Error::Singular`].
    pub fn inverse(&self) -> Result<Mat<T>> {
        self.solve(Mat::<T>::identity(self.n(), self.n()).as_ref())
    }

    /// The reciprocal condition number 1 / (||A||_1 ||A^-1||_1), with ||A^-1||_1 estimated as
    /// LAPACK's ?gecon does (Hager's method refined by Higham, ?lacn2: a few solves with A and A^H,
    /// each O(n^2)). 0 for a singular factor, 1 for `n = 0`.
    pub fn rcond(&self) -> Result<f64> {
        let n = self.n();
        if n == 0 {
            return Ok(1.0);
        }
        if self.singular.is_some() || self.norms.one == 0.0 {
            return Ok(0.0);
        }
        // ||A^-1||_1 = ||U^-1 L^-1 P||_1 = ||U^-1 L^-1||_1 (P permutes columns): as ?gecon, the
        // estimate sees U^-1 L^-1 and its adjoint, without the interchanges.
        let inverse = condition::estimate_norm1(n, |x, adjoint| {
            let trans = if adjoint { Trans::Adjoint } else { Trans::No };
            self.triangular_solves(x, trans, false)
        })?;
        Ok(condition::reciprocal(inverse, self.norms.one))
    }

    /// Solves A X = B (the columns of `b`, any [`Matrix`]); X comes back in `b`'s kind.
    pub fn solve<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        self.solve_new(b, Trans::No)
    }

    /// Solves A^T X = B (the transpose, not conjugated: for a complex A see
    /// [`LuFactor::solve_adjoint`]).
    pub fn solve_transposed<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        self.solve_new(b, Trans::Transpose)
    }

    /// Solves A^H X = B (the conjugate transpose; A^T for a real type).
    pub fn solve_adjoint<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        self.solve_new(b, Trans::Adjoint)
    }

    /// Solves A X = B in place: `b` is overwritten with X. Allocates nothing unless B's columns are
    /// not contiguous (a C-ordered ndarray: then a column-major copy written back).
    pub fn solve_in_place<B: MatrixMut<Elem = T>>(&self, mut b: B) -> Result<()> {
        column_major(b.view_mut(), |b| self.solve_column_major(b, Trans::No))
    }

    fn solve_new<B: Matrix<Elem = T>>(&self, b: B, trans: Trans) -> Result<B::Owned> {
        crate::interop::solved(b, self.n(), |x| {
            column_major(x, |x| self.solve_column_major(x, trans))
        })
    }

    /// X <- op(A)^-1 X with the factors (LAPACK ?getrs): for A, the interchanges, then L, then U;
    /// for A^T or A^H, U^T then L^T (conjugated for A^H), then the interchanges backwards.
    fn solve_column_major(&self, b: MatMut<'_, T>, trans: Trans) -> Result<()> {
        self.triangular_solves(b, trans, true)
    }

    /// [`LuFactor::solve_column_major`], with the interchanges applied only when `permute`.
    fn triangular_solves(&self, b: MatMut<'_, T>, trans: Trans, permute: bool) -> Result<()> {
        crate::check::check_rows(self.n(), b.nrows())?;
        if let Some(column) = self.singular {
            return Err(Error::Singular { column });
        }
        check_finite("B", b.as_ref())?;
        let n = self.n();
        let flops = 2.0 * (n * n * b.ncols()) as f64 * T::PRECISION.flop_factor();
        let ipiv = permute.then_some(self.ipiv.as_slice());
        on_all_cores(&self.platform, flops, |_, par| {
            getrs(self.lu.as_ref(), ipiv, b, trans, par)
        });
        Ok(())
    }
}

impl Lu {
    /// Solves op(A) X = B in place (`b` is overwritten with X) from an LU factorisation given as
    /// LAPACK's ?getrf leaves it (as scipy's `lu_factor` returns it): `lu` holds L below the
    /// diagonal (unit diagonal implied) and U on and above it, `pivots` the row interchanges
    /// 0-based (at step i row i was swapped with `pivots[i]`, i <= `pivots[i]` < n). LAPACK's
    /// ?getrs, on this builder's platform's cores. Checked first: `lu` square and finite, `pivots`
    /// of length n and in range, B's rows and entries; a zero on U's diagonal is
    /// [`Error::Singular`].
    ///
    /// ```
    /// use faer::Mat;
    /// let a = Mat::from_fn(3, 3, |i, j| if i == j { 4.0 } else { (i + 2 * j) as f64 });
    /// let f = hetla::Lu::new().factor(a.as_ref())?;
    /// let mut x = Mat::<f64>::ones(3, 1);
    /// hetla::Lu::new().solve_factored(f.storage(), f.pivots(), x.as_mut(), hetla::Trans::No)?;
    /// assert!((f.solve(Mat::<f64>::ones(3, 1).as_ref())? - &x).norm_max() < 1e-14);
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn solve_factored<L: Matrix, B: MatrixMut<Elem = L::Elem>>(
        &self,
        lu: L,
        pivots: &[usize],
        mut b: B,
        trans: Trans,
    ) -> Result<()> {
        let lu = lu.view();
        let mut b = b.view_mut();
        check_factored(lu, pivots, b.as_ref())?;
        let n = lu.nrows();
        let platform = self.resolve_platform()?;
        let flops = 2.0 * (n * n * b.ncols()) as f64 * L::Elem::PRECISION.flop_factor();
        column_major(b.as_mut(), |b| {
            on_all_cores(&platform, flops, |_, par| {
                getrs(lu, Some(pivots), b, trans, par)
            });
            Ok(())
        })
    }
}

/// The checks of a solve from LU factors: `lu` square and finite, one interchange per row, each in
/// range (LAPACK's: at step i in i..n), no zero on U's diagonal ([`Error::Singular`]), `b`'s rows
/// and entries.
fn check_factored<T: Scalar>(lu: MatRef<'_, T>, pivots: &[usize], b: MatRef<'_, T>) -> Result<()> {
    check_square("LU", lu.nrows(), lu.ncols())?;
    let n = lu.nrows();
    check_finite("LU", lu)?;
    if pivots.len() != n {
        return Err(Error::InvalidOption {
            option: "pivots",
            reason: format!(
                "{} interchanges for a matrix of order {n}: give one per row",
                pivots.len()
            ),
        });
    }
    if let Some((i, &p)) = pivots.iter().enumerate().find(|&(i, &p)| p < i || p >= n) {
        return Err(Error::InvalidOption {
            option: "pivots",
            reason: format!(
                "interchange {i} names row {p}; at step {i} it must be in {i}..{n} (0-based)"
            ),
        });
    }
    if let Some(column) = (0..n).find(|&k| lu[(k, k)] == T::from_f64(0.0)) {
        return Err(Error::Singular { column });
    }
    crate::check::check_rows(n, b.nrows())?;
    check_finite("B", b)
}

/// X <- op(A)^-1 X from A's LU factors (LAPACK ?getrs, inputs checked): for A, the interchanges
/// (when given), then L, then U; for A^T or A^H, U^T then L^T (conjugated for A^H), then the
/// interchanges backwards.
fn getrs<T: Scalar>(
    lu: MatRef<'_, T>,
    ipiv: Option<&[usize]>,
    mut b: MatMut<'_, T>,
    trans: Trans,
    par: Par,
) {
    use faer::linalg::triangular_solve as ts;
    let n = lu.nrows();
    let conj = match trans {
        Trans::Adjoint if T::PRECISION.is_complex() => faer::Conj::Yes,
        _ => faer::Conj::No,
    };
    if n <= small::SMALL_SOLVE
        && b.ncols() == 1
        && lu.row_stride() == 1
        && let Some(x) = b.as_mut().col_mut(0).try_as_col_major_mut()
    {
        let transposed = (trans != Trans::No).then_some(conj);
        small::small_getrs(lu, ipiv, x.as_slice_mut(), transposed);
        return;
    }
    match trans {
        Trans::No => {
            if let Some(ipiv) = ipiv {
                hetla_kernels::swap_rows(b.as_mut(), ipiv);
            }
            ts::solve_unit_lower_triangular_in_place(lu, b.as_mut(), par);
            ts::solve_upper_triangular_in_place(lu, b, par);
        }
        Trans::Transpose | Trans::Adjoint => {
            ts::solve_lower_triangular_in_place_with_conj(lu.transpose(), conj, b.as_mut(), par);
            ts::solve_unit_upper_triangular_in_place_with_conj(
                lu.transpose(),
                conj,
                b.as_mut(),
                par,
            );
            if let Some(ipiv) = ipiv {
                for (i, &p) in ipiv.iter().enumerate().rev() {
                    hetla_kernels::swap_rows(b.as_mut().subrows_mut(i, n - i), &[p - i]);
                }
            }
        }
    }
}

/// Which system a solve with an LU factor solves (LAPACK's `trans`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trans {
    /// A X = B.
    No,
    /// A^T X = B (not conjugated).
    Transpose,
    /// A^H X = B (A^T for a real type).
    Adjoint,
}

/// ||A||_1 and ||A||_inf of a matrix, from its input check.
#[derive(Debug, Clone, Copy)]
struct Norms {
    one: f64,
    inf: f64,
}

/// The input check of LU: the first non-finite entry is [`Error::NonFinite`]; ||A||_1 and
/// ||A||_inf come from the same pass (columns spread over the rayon pool).
fn norms<T: Scalar>(a: MatRef<'_, T>) -> Result<Norms> {
    use rayon::prelude::*;
    let n = a.nrows();
    let (cols, rows) = (0..a.ncols())
        .into_par_iter()
        .with_min_len(16)
        .fold(
            || (0.0_f64, vec![0.0_f64; n]),
            |(one, mut rows), j| {
                let mut sum = 0.0;
                for (i, x) in a.col(j).iter().enumerate() {
                    let v = x.abs_f64();
                    sum += v;
                    rows[i] += v;
                }
                (if sum.is_nan() { sum } else { one.max(sum) }, rows)
            },
        )
        .reduce(
            || (0.0, vec![0.0; n]),
            |(a, mut r), (b, s)| {
                r.iter_mut().zip(&s).for_each(|(x, y)| *x += y);
                (
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.max(b)
                    },
                    r,
                )
            },
        );
    let inf = rows.iter().copied().fold(0.0_f64, f64::max);
    if !cols.is_finite() || !inf.is_finite() || rows.iter().any(|r| r.is_nan()) {
        check_finite("A", a)?;
    }
    Ok(Norms { one: cols, inf })
}

/// R = B - A X for a general A, on every core.
fn general_residual<T: Scalar>(
    platform: &Platform,
    a: MatRef<'_, T>,
    x: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<Mat<T>> {
    let mut r = b.to_owned();
    let flops = 2.0 * (a.nrows() * a.ncols() * x.ncols()) as f64 * T::PRECISION.flop_factor();
    on_all_cores(platform, flops, |backend, par| {
        backend.matmul(a, x, r.as_mut(), -1.0, 1.0, par)
    })?;
    Ok(r)
}

/// Solves the general square system A X = B with default options (LAPACK's ?gesv: LU with partial
/// pivoting, then the two triangular solves), in the precision of A and B; any [`Matrix`], X in
/// `b`'s kind. A singular A is [`Error::Singular`].
pub fn solve<A: Matrix, B: Matrix<Elem = A::Elem>>(a: A, b: B) -> Result<B::Owned> {
    let (av, bv) = (a.view(), b.view());
    crate::check::check_system("A", (av.nrows(), av.ncols()), bv.nrows())?;
    check_finite("B", bv)?;
    Lu::new().factor(av)?.solve(b)
}

/// Solves A X = B to double accuracy with default options, factoring in single precision when that
/// suffices ([`Lu::solve_refined`], LAPACK's dsgesv).
pub fn solve_mixed<A, B>(a: A, b: B) -> Result<(B::Owned, Refinement)>
where
    A: Matrix,
    A::Elem: Refinable,
    B: Matrix<Elem = A::Elem>,
{
    Lu::new().solve_refined(a, b)
}
