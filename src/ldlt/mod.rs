//! Symmetric (complex: Hermitian) indefinite systems: [`Ldlt`] factors A = Q^T L T L^H Q by Aasen's
//! algorithm in blocks, T Hermitian block tridiagonal (LAPACK's ?sytrf_aa_2stage, PLASMA's and
//! SLATE's hesv), and [`LdltFactor`] solves with it, gives A's inertia and determinant;
//! [`solve_symmetric`] is LAPACK's ?sysv.
//!
//! The design, and where it stands:
//!
//! - Stage 1: the communication-avoiding Aasen of Ballard et al. (2014) in blocks of the tile's
//!   order, left-looking: n^3/3 flops (Cholesky's), in products; each block column's panel is an LU
//!   with partial pivoting (the LU family's panel kernel), and A is read through the permutation
//!   the panels build instead of being swapped. It runs as the task graph of
//!   [`Algorithm::Ldlt`](crate::Algorithm::Ldlt) (`hetla_factorizations::ldlt`: H's blocks, T's
//!   diagonal block, the next panel's blocks in parallel, the panel, the interchanges on L's
//!   earlier columns in parallel) on the platform's clusters, a cluster per core by default,
//!   through the family's work (`work.rs`); `aasen.rs` holds what it leaves and the solves.
//! - Stage 2 (`band`): T factored by LU with partial pivoting in block steps (?gbtrf on the band:
//!   O(n b^2) flops, a chain of n/b steps), which gives the solves and det A = det T (Q and L have
//!   determinant +-1 and 1). Its steps are tasks of the same graph, each as soon as the blocks of T
//!   it reads are made (step k after stage 1's panel k + 1), so that they overlap stage 1's updates
//!   and the factorisation ends a step after stage 1 (at n = 2048 on 2 cores, 6-12 ms after the
//!   graph on all cores before: ~0.06 s in all).
//! - The block order keeps LAPACK's ratio of the factor under 30: T grows with it through L(k,
//!   k)^-1, a unit lower triangle from the panel's partial pivoting scaling T's diagonal blocks on
//!   both sides, 3-4 times faster in a complex type (96 real, 32 complex below order 6144; see
//!   [`Ldlt::tile_size_for`]).
//! - Solves refined in the working precision (LAPACK's ?syrfs): a solve by the factor alone is
//!   20-2000 eps backward (see [`LdltFactor::solve_refined`]); the factor keeps a copy of A for the
//!   residuals. Where cond(A) times the factor's error is beyond 1 (KKT matrices of order 2000 and
//!   more in f32 and c32) the refinement stalls, and the solve is made again by a Bunch-Kaufman
//!   factorisation of A in double precision (`pivoted.rs`), kept for the next solves and the
//!   inertia.
//! - Inertia (Sylvester's law: A's signs are T's) from T's Schur complements block by block
//!   (Haynsworth), each by its eigenvalues; dense eigenvalues of T when a complement is nearly
//!   singular. Zero is decided on A's scale (by the condition estimate; A's eigenvalues when A is
//!   nearly singular), not on T's, whose eigenvalues L's congruence shrinks; T's signs are taken
//!   only where the factor is certified near A, else that Bunch-Kaufman factor's B gives them (see
//!   [`LdltFactor::inertia`]).
//!
//! - Stacks of small systems (`batch.rs`, [`Ldlt::solve_batch`]): one per core, each by
//!   Bunch-Kaufman in the working precision (LAPACK's ?sysv, a matrix of a batch being one block).
//! - [`Ldl`] (`ldl.rs`): Bunch-Kaufman with its factors explicit, Hermitian or complex symmetric
//!   (scipy's `ldl`).
//!
//! Only the lower triangle of A is read (its diagonal's imaginary parts are taken as zero). Input
//! is checked for NaN and infinities before any work. A singular A still factors (the factor says
//! where T's first zero pivot is, LAPACK's info); its solves refuse with [`Error::Singular`].

use faer::reborrow::*;
use faer::{Mat, MatMut, MatRef};
use hetla_kernels::{Precision, Scalar};

use crate::Plan;
use crate::check::check_square;
use crate::interop::Matrix;
use crate::run::RunConfig;
use crate::{Error, Result};
use hetla_runtime::{RunOptions, Trace};

pub(crate) mod aasen;
pub(crate) mod band;
mod batch;
mod columns;
mod ldl;
pub(crate) mod pivoted;
pub(crate) mod plan;
pub(crate) mod room;
pub(crate) mod work;

use aasen::Aasen;
use band::BandLu;
pub use band::Inertia;
pub use ldl::Ldl;
use pivoted::Pivoted;

/// How far above eps [`LdltFactor::rcond`] must be for [`LdltFactor::inertia`] to count no zero
/// eigenvalue (the estimate of ||A^-1||_1 is a lower bound, within a factor of about 3).
pub(crate) const NONSINGULAR: f64 = 10.0;

/// [`LdltFactor::inertia`] takes T's signs when ||F^-1 A - I||_2 is estimated below this (the power
/// method's estimate is from below: a margin).
const CERTIFIED: f64 = 0.25;

/// A refined solve whose backward error ||A x - b||_1 / (||A||_1 ||x||_1) is still above this many
/// eps is made again by A's Bunch-Kaufman factor (see [`LdltFactor::solve_refined`]).
const FALLBACK_BACKWARD_ERROR: f64 = 10.0;

/// The power method's steps for ||F^-1 A - I||_2.
const DISTANCE_STEPS: usize = 8;

/// The block order Aasen's factorisation uses for order `n` in `precision` when none is given: 96
/// in a real type and 32 in a complex one below order 6144, 192 from 6144 on.
///
/// The factor's error grows with the block: L(k, k)^-1, a unit lower triangle from the panel's
/// partial pivoting whose inverse grows with its order, scales T's diagonal blocks on both sides
/// (on a KKT matrix of order 4000, max |T| / max |A| reaches 100-300 at 128). LAPACK's ratio
/// ||A - Q^T L T L^H Q||_1 / (n ||A||_1 eps) on KKT matrices (`hetla ldlt --kind kkt`, order 4000,
/// AMD Zen 4): f64 23.2 at 96, 28.9 at 112, 31.8 at 128; c64 22.1 at 32, 30.5 at 40, 48.9 at 64,
/// 110 at 128 (complex types are 3-4 times real ones at the same block), so below 6144 the block
/// keeps it under LAPACK's 30. Speed (random, best of 3, 2 cores): f64 at 4000 0.563 s at 96
/// against 0.531 s at 128 (0.081/0.088 s at 2000); c64 at 4000 1.82 s at 32 against 1.53-1.55 s at
/// 64-128, c32 1.32 s against 0.83 s (at 2000: 0.32 s against 0.32 s in c64, 0.18 s against 0.15 s
/// in c32). From 6144 on the block is the speed's (f64 at 8192, two runs each: 1.64/1.62 s at 192,
/// 1.61/1.68 s at 160, 1.75/1.88 s at 224, 1.69/1.69 s at 256), and the ratio on KKT matrices is
/// above 30 (66 in f64 at 8192): the solves' refinement ([`LdltFactor::solve_refined`]) still
/// reaches LAPACK's backward error.
pub(crate) fn default_ldlt_tile(n: usize, precision: Precision) -> usize {
    match (n >= 6144, precision.is_complex()) {
        (true, _) => 192,
        (false, false) => 96,
        (false, true) => 32,
    }
}

/// Configures and runs symmetric indefinite factorisations: the run options every builder has
/// (backend, clusters, threads, scheduler, platform) and the block order.
///
/// ```
/// use faer::Mat;
/// // A KKT matrix [H A^T; A 0]: indefinite, 2 positive and 1 negative eigenvalue.
/// let a = Mat::from_fn(3, 3, |i, j| [[2.0, 0.0, 1.0], [0.0, 2.0, 1.0], [1.0, 1.0, 0.0]][i][j]);
/// let f = hetla::Ldlt::new().factor(a.as_ref())?;
/// let inertia = f.inertia()?;
/// assert_eq!((inertia.positive, inertia.negative, inertia.zero), (2, 1, 0));
/// let x = f.solve(Mat::<f64>::ones(3, 1).as_ref())?;
/// assert!((&a * &x - Mat::<f64>::ones(3, 1)).norm_max() < 1e-14);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ldlt {
    run: RunConfig,
    tile: Option<usize>,
}

impl Default for Ldlt {
    fn default() -> Self {
        let mut run = RunConfig::on(hetla_clusters::ClusterSpec::Level(
            hetla_clusters::Level::Core,
        ));
        run.scheduler = hetla_runtime::SchedulerKind::Eager;
        Self { run, tile: None }
    }
}

impl Ldlt {
    /// Default options: faer, the default block order ([`Ldlt::tile_size_for`]), a cluster per core
    /// (its steps' products and panels are a core's size: on 2 cores, AVX-512, f64, n = 2048, 0.069
    /// s against 0.130 s on one cluster of both), the eager scheduler (one queue by priority: on
    /// clusters alike, the most urgent ready task to whichever core is idle; on 2 cores at n =
    /// 8192, efficiency 0.93 against MCT's 0.87-0.90, 1.61-1.73 s against 1.65-1.90 s; alike at
    /// 2048 and 4096).
    pub fn new() -> Self {
        Self::default()
    }

    crate::run::run_options!();
    crate::run::tuned_for!(crate::Family::Ldlt);

    /// The block order b (T's band is b wide). 0 is an error at factorisation time.
    pub fn tile(mut self, b: usize) -> Self {
        self.tile = Some(b);
        self
    }

    /// The block order for a matrix of order `n` in `precision`: the one given (at most n), else 96
    /// in a real type and 32 in a complex one below order 6144, 192 from 6144 on: the largest that
    /// keeps LAPACK's ratio of the factor under 30 on KKT matrices to order 4000, and above it the
    /// fastest (see the measurements at `default_ldlt_tile` in the source).
    pub fn tile_size_for(&self, n: usize, precision: Precision) -> usize {
        self.tile
            .unwrap_or_else(|| default_ldlt_tile(n, precision))
            .min(n.max(1))
    }

    /// The plan of the factorisation of a matrix of order `n` in `precision`
    /// ([`Algorithm::Ldlt`](crate::Algorithm::Ldlt), on a platform with GPUs in block columns,
    /// [`Algorithm::LdltColumns`](crate::Algorithm::LdltColumns): its products and interchanges on
    /// the GPUs; in the block tuned on this machine when this builder's user set nothing, as every
    /// call takes): what `simulate` and `bound` take, and [`Ldlt::factor_planned`] runs.
    pub fn plan(&self, n: usize, precision: Precision) -> Result<Plan> {
        let tile = self.tuned_for(n, precision).tile_size_for(n, precision);
        let algorithm = match self.run.on_devices() {
            true => crate::Algorithm::LdltColumns { n },
            false => crate::Algorithm::Ldlt { n },
        };
        Plan::new(algorithm, tile, precision)
    }

    /// Factors the Hermitian matrix whose lower triangle is `a`'s (left unchanged): any precision,
    /// any [`Matrix`]. A singular matrix still factors (see [`LdltFactor::singular`]).
    pub fn factor<A: Matrix>(&self, a: A) -> Result<LdltFactor<A::Elem>> {
        let a = a.view();
        check_square("A", a.nrows(), a.ncols())?;
        let this = self.tuned_for(a.nrows(), A::Elem::PRECISION);
        let plan = this.plan(a.nrows(), A::Elem::PRECISION)?;
        Ok(this.factor_planned(&plan, a)?.1)
    }

    /// Factors `a` (its lower triangle, left unchanged) by `plan` (from [`Ldlt::plan`]) through the
    /// runtime: the trace of the run (stage 1, the task graph) and the factor. `a` is checked first
    /// as by [`Ldlt::factor`].
    pub fn factor_planned<A: Matrix>(
        &self,
        plan: &Plan,
        a: A,
    ) -> Result<(Trace, LdltFactor<A::Elem>)> {
        let a = a.view();
        check_square("A", a.nrows(), a.ncols())?;
        let n = a.nrows();
        let columns = crate::Algorithm::LdltColumns { n };
        if ![crate::Algorithm::Ldlt { n }, columns].contains(&plan.algorithm()) {
            return Err(Error::InvalidOption {
                option: "plan",
                reason: format!(
                    "the plan is a {} ({:?}), the matrix {n}x{n}: give Ldlt::plan({n}, ..)'s",
                    plan.algorithm().name(),
                    plan.algorithm()
                ),
            });
        }
        let norm1 = crate::check::check_hermitian_lower("A", a)?;
        let this = self.tuned_for(n, A::Elem::PRECISION);
        let platform = this.resolve_platform()?;
        let stride = crate::pages::padded_stride::<A::Elem>(n);
        // The buffer of a factor dropped earlier on this platform when it fits (`KeptFactors`).
        let spare = platform.reclaim::<KeptFactors<A::Elem>>().map(|k| k.0);
        let mut factors = crate::pages::PageBuffer::reuse(spare, stride * n, "the factors")?;
        let options = RunOptions {
            scheduler: this.run.scheduler,
            ..RunOptions::default()
        };
        let run = if n == 0 {
            work::AasenRun {
                trace: Trace::new(Vec::new(), Vec::new(), 0.0),
                pivots: Vec::new(),
                band: Vec::new(),
            }
        } else {
            let run = MatMut::from_column_major_slice_with_stride_mut(
                factors.as_mut_slice(),
                n,
                n,
                stride,
            );
            match plan.algorithm() == columns {
                true => columns::execute(plan, &platform, a, run, &options)?,
                false => work::execute(plan, &platform, a, run, &options)?,
            }
        };
        let blocks = aasen::Blocks { n, b: plan.tile() };
        let aasen = Aasen::from_run(factors, stride, blocks, &run.pivots, a);
        let factor = LdltFactor {
            aasen,
            band: BandLu::from_steps(blocks, run.band),
            norm1,
            platform,
            rcond: std::sync::OnceLock::new(),
            pivoted: std::sync::OnceLock::new(),
        };
        Ok((run.trace, factor))
    }
}

/// A factored symmetric indefinite matrix, A = Q^T L T L^H Q: Q a permutation (LAPACK's
/// interchanges), L unit lower triangular, T Hermitian block tridiagonal (see [`Ldlt`]).
#[derive(Debug, Clone)]
pub struct LdltFactor<T: Scalar> {
    aasen: Aasen<T>,
    band: BandLu<T>,
    /// ||A||_1, for the condition estimate.
    norm1: f64,
    /// Where the factorisation ran: the residuals run on its first CPU cluster.
    platform: std::sync::Arc<hetla_runtime::Platform>,
    /// [`LdltFactor::rcond`], once asked for.
    rcond: std::sync::OnceLock<f64>,
    /// A's Bunch-Kaufman factor in double precision, once a solve or the inertia needed it.
    pivoted: std::sync::OnceLock<Pivoted>,
}

/// The buffer of a dropped [`LdltFactor`], kept by its platform ([`Platform::keep`]) for the next
/// factorisation there of an order it fits: a factor of order 8192 in f64 is 537 MB, and on a guest
/// whose first touch of memory is slow fresh pages cost more than a tenth of the call (0.4-0.8 s of
/// core time on 2 Zen 4 cores, where the call took 3.5 s). The run needs no zeros: each task writes
/// a block before any task reads it, and [`Aasen::from_run`] writes every block the factor reads
/// afterwards that the run left as workspace (tested by a poisoned kept buffer).
///
/// [`Platform::keep`]: hetla_runtime::Platform::keep
struct KeptFactors<T: Scalar>(crate::pages::PageBuffer<T>);

impl<T: Scalar> Drop for LdltFactor<T> {
    /// Gives the factor's buffer to its platform when it is a large mapping (`KeptFactors`; a small
    /// one costs little to allocate, and the many of a batch would only take turns there).
    fn drop(&mut self) {
        if self.aasen.a.huge() {
            self.platform.keep(KeptFactors(self.aasen.a.take()));
        }
    }
}

impl<T: Scalar> LdltFactor<T> {
    /// The order n.
    pub fn n(&self) -> usize {
        self.aasen.blocks.n
    }

    /// The precision.
    pub fn precision(&self) -> Precision {
        T::PRECISION
    }

    /// The first column (0-based, of T) whose pivot in T's LU is exactly zero: A is singular
    /// (LAPACK's info). `None` for a nonsingular A.
    pub fn singular(&self) -> Option<usize> {
        self.band.singular
    }

    /// X with A X = B (n x k), of B's kind (a faer `Mat` for a faer view, an ndarray for an
    /// ndarray...), refined to the backward error of LAPACK's ?sysv
    /// ([`LdltFactor::solve_refined`]).
    pub fn solve<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        crate::interop::solved(b, self.n(), |x| self.solve_in_place(x))
    }

    /// B <- A^-1 B, refined as [`LdltFactor::solve_refined`].
    pub fn solve_in_place(&self, b: MatMut<'_, T>) -> Result<()> {
        self.refined_in_place(b).map(|_| ())
    }

    /// X with A X = B and what its refinement did. The block Aasen factor's T grows with the block
    /// (max |T| reaches 100-300 max |A| at blocks of 128 on KKT matrices), and a solve with the
    /// factor alone leaves a backward error ||A x - b|| / (||A|| ||x||) of 20-2000 eps (LAPACK's
    /// own ?sysv_aa_2stage: 50-45000 eps on the same matrices) where ?sysv's Bunch-Kaufman leaves a
    /// few. Each solve is therefore refined in the working precision (LAPACK's ?syrfs, normwise): R
    /// = B - A X from A itself, D = A^-1 R by the factor, X += D, while a step at least halves the
    /// largest residual and the backward error is above eps, at most 5 steps, each O(n^2 k); the
    /// path is [`Working`](crate::RefinementPath::Working).
    ///
    /// Refinement converges while cond(A) times the factor's backward error stays below 1. Beyond
    /// it (KKT matrices of order 4000 in f32 and c32, cond ~1e4: the refinement stalled at 800-1600
    /// eps; GMRES preconditioned by the factor, tried in its place, needed more than 100 iterations
    /// and still left hundreds of eps in f32) a solve whose backward error is still above 10 eps is
    /// made again by a Bunch-Kaufman factorisation of A in double precision (faer's, n^3/3 flops in
    /// double, made once and kept by this factor), refined with it in the working precision; the
    /// path is [`BunchKaufman`](crate::RefinementPath::BunchKaufman), with the backward error at
    /// which the first refinement stalled. The iterations are the steps that improved X.
    pub fn solve_refined<B: Matrix<Elem = T>>(
        &self,
        b: B,
    ) -> Result<(B::Owned, crate::Refinement)> {
        let mut how = None;
        let x = crate::interop::solved(b, self.n(), |x| {
            how = Some(self.refined_in_place(x)?);
            Ok(())
        })?;
        Ok((x, how.expect("set by the solve")))
    }

    /// B <- A^-1 B refined (see [`LdltFactor::solve_refined`]); what the refinement did.
    fn refined_in_place(&self, mut b: MatMut<'_, T>) -> Result<crate::Refinement> {
        crate::check::check_rows(self.n(), b.nrows())?;
        crate::check::check_finite("B", b.rb())?;
        if let Some(column) = self.band.singular {
            return Err(Error::Singular { column });
        }
        let mut how = crate::Refinement {
            path: crate::RefinementPath::Working,
            iterations: 0,
            factored_in: T::PRECISION,
            factor_seconds: None,
            device: None,
        };
        if b.ncols() == 0 || self.n() == 0 {
            return Ok(how);
        }
        let rhs = b.to_owned();
        self.unrefined_in_place(b.rb_mut());
        // R = B - A X in one blocked pass (the residual of both refinements below).
        let residual = |x: MatRef<'_, T>| {
            crate::mixed::residual(&self.platform, self.aasen.input(), x, rhs.as_ref())
        };
        let refined = crate::mixed::refine_working(
            b.rb_mut(),
            self.norm1,
            |d| {
                self.unrefined_in_place(d);
                Ok(())
            },
            residual,
        )?;
        how.iterations = refined.steps;
        if refined.backward_error <= FALLBACK_BACKWARD_ERROR {
            return Ok(how);
        }
        let pivoted = self.pivoted();
        let mut x = rhs.clone();
        pivoted.solve(x.as_mut());
        let again = crate::mixed::refine_working(
            x.as_mut(),
            self.norm1,
            |d| {
                pivoted.solve(d);
                Ok(())
            },
            residual,
        )?;
        // The better of the two (a matrix beyond even the second factor keeps the first's X).
        if again.backward_error < refined.backward_error {
            b.copy_from(&x);
            how.iterations += again.steps;
            how.path = crate::RefinementPath::BunchKaufman {
                stalled_at: refined.backward_error,
            };
            how.factored_in = pivoted.precision();
        }
        Ok(how)
    }

    /// A X, from A's lower triangle (the residual's blocked product, on the platform's backend; for
    /// the power method of [`LdltFactor::inertia`]'s certificate).
    fn product(&self, x: MatRef<'_, T>) -> Result<Mat<T>> {
        let zero = Mat::<T>::zeros(x.nrows(), x.ncols());
        Ok(-crate::mixed::residual(
            &self.platform,
            self.aasen.input(),
            x,
            zero.as_ref(),
        )?)
    }

    /// A's Bunch-Kaufman factor in double precision, made on first use.
    fn pivoted(&self) -> &Pivoted {
        self.pivoted.get_or_init(|| Pivoted::of(self.aasen.input()))
    }

    /// B <- A^-1 B by the factor alone (no checks: the caller's).
    fn unrefined_in_place(&self, mut b: MatMut<'_, T>) {
        let par = faer::get_global_parallelism();
        self.aasen.permute(b.rb_mut());
        self.aasen.solve_l(b.rb_mut(), par);
        self.band.solve(b.rb_mut(), par);
        self.aasen.solve_lh(b.rb_mut(), par);
        self.aasen.unpermute(b);
    }

    /// A's inertia: its counts of positive, negative and zero eigenvalues, zero meaning at most eps
    /// ||A||_1 in modulus (a rounding of A's scale). Sylvester's law gives it from the factor's T,
    /// when the factor F = Q^T L T L^H Q is near enough to A, and T's eigenvalues are A's scaled by
    /// L's congruence (a KKT matrix of order 2000 in c32: A's smallest |eigenvalue| 0.12, T's
    /// 2.5e-4, under eps ||A||_1 = 3e-4), so both are decided on A's side:
    ///
    /// - rcond > 10 eps ([`LdltFactor::rcond`]): A has no eigenvalue within eps ||A||_1 (its
    ///   smallest is at least rcond ||A||_1), so none is zero. The signs are T's (its Schur
    ///   complements block by block, Haynsworth, O(n b^2)) when ||F^-1 A - I||_2, estimated by a
    ///   few steps of the power method (O(n^2) each), is below 1/4: no Hermitian matrix between F
    ///   and A is then singular, so F and A have the same inertia. Otherwise (T grew too much for
    ///   A's condition: a KKT matrix of order 4000 in f32 had 6 signs wrong) they are those of a
    ///   Bunch-Kaufman factorisation of A in double precision (faer's, O(n^3 / 3)).
    /// - Else (A singular or nearly so): A's own eigenvalues, in double precision (O(n^3)).
    pub fn inertia(&self) -> Result<Inertia> {
        let eps = T::PRECISION.epsilon();
        if self.band.singular.is_some() || self.rcond()? <= NONSINGULAR * eps {
            return band::hermitian_inertia(self.aasen.input(), eps * self.norm1);
        }
        if self.distance_to_a()? < CERTIFIED {
            return band::inertia(self.aasen.blocks, &self.aasen.diag, &self.aasen.sub);
        }
        Ok(self.pivoted().inertia())
    }

    /// An estimate (from below) of ||F^-1 A - I||_2, F the factor: the power method on it from a
    /// fixed start, [`DISTANCE_STEPS`] steps, the largest ||M v|| / ||v|| seen.
    fn distance_to_a(&self) -> Result<f64> {
        let n = self.n();
        let mut v = Mat::<T>::from_fn(n, 1, |i, _| {
            // A fixed, sign-varying start (no zero entries).
            T::from_f64(1.0 + ((i * 7919) % 13) as f64 / 13.0 * if i % 2 == 0 { 1.0 } else { -1.0 })
        });
        // ||v||_2 in f64 (faer's `norm_l2` answers in T's real type).
        let norm = |m: &Mat<T>| {
            m.col(0)
                .iter()
                .map(|x| x.abs_f64().powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let mut largest = 0.0_f64;
        for _ in 0..DISTANCE_STEPS {
            let length = norm(&v);
            if length == 0.0 {
                break;
            }
            // F^-1 (A v) - v.
            let mut w = self.product(v.as_ref())?;
            self.unrefined_in_place(w.as_mut());
            faer::zip!(w.as_mut(), v.as_ref()).for_each(|faer::unzip!(w, v)| *w -= *v);
            let next = norm(&w);
            largest = largest.max(next / length);
            // Scaled back to unit length, so that a large M neither overflows nor underflows.
            if next > 0.0 {
                let scale = T::from_f64(1.0 / next);
                faer::zip!(w.as_mut()).for_each(|faer::unzip!(w)| *w *= scale);
            }
            v = w;
        }
        Ok(largest)
    }

    /// ||A||_1.
    pub fn norm1(&self) -> f64 {
        self.norm1
    }

    /// The reciprocal of A's condition number in the 1-norm, estimated as LAPACK's ?sycon does: 1 /
    /// (||A||_1 est(||A^-1||_1)), the estimate by Hager's and Higham's method through this factor's
    /// solves (A^-1 is Hermitian: one solve serves both products). 0 for a singular A, 1 for an
    /// empty one.
    pub fn rcond(&self) -> Result<f64> {
        if let Some(&rcond) = self.rcond.get() {
            return Ok(rcond);
        }
        let n = self.n();
        let rcond = if n == 0 {
            1.0
        } else if self.band.singular.is_some() || self.norm1 == 0.0 {
            0.0
        } else {
            let inverse = crate::condition::estimate_norm1::<T>(n, |x, _| {
                self.unrefined_in_place(x);
                Ok(())
            })?;
            if inverse > 0.0 {
                1.0 / (self.norm1 * inverse)
            } else {
                0.0
            }
        };
        Ok(*self.rcond.get_or_init(|| rcond))
    }

    /// ln |det A| (minus infinity for a singular A).
    pub fn log_abs_det(&self) -> f64 {
        self.band.log_abs_det().0
    }

    /// The sign of det A (A is Hermitian: det A is real): 1, -1, or 0 for a singular A.
    pub fn det_sign(&self) -> f64 {
        self.band.log_abs_det().1
    }

    /// det A (real: A is Hermitian), or [`Error::DeterminantOutOfRange`] when it is no normal f64.
    pub fn det(&self) -> Result<f64> {
        let (log, sign) = self.band.log_abs_det();
        if sign == 0.0 {
            return Ok(0.0);
        }
        let det = sign * log.exp();
        if det.is_normal() {
            Ok(det)
        } else {
            Err(Error::DeterminantOutOfRange { log_det: log })
        }
    }

    /// LAPACK's dchksy_aa ratio of this factor of `a` (the Hermitian matrix of its lower
    /// triangle): ||A - Q^T L T L^H Q||_1 / (n ||A||_1 eps), below 30 for a sound factor. O(n^3): a
    /// check, not part of a solve.
    pub fn residual<A: Matrix<Elem = T>>(&self, a: A) -> Result<f64> {
        let a = a.view();
        let n = self.n();
        check_square("A", a.nrows(), a.ncols())?;
        crate::check::check_rows(n, a.nrows())?;
        if n == 0 {
            return Ok(0.0);
        }
        let (l, t) = (self.l(), self.t());
        let m = &l * &t * l.adjoint();
        // Q^T M Q entry (i, j) is M's (order[i], order[j]): the interchanges undone on an index
        // vector, then A - Q^T M Q gathered column by column from slices (no row swap of M).
        let mut order: Vec<usize> = (0..n).collect();
        for (i, &p) in self.aasen.swaps.iter().enumerate().rev() {
            order.swap(i, p);
        }
        let mut full = a.to_owned();
        crate::copy::mirror_lower(full.as_mut());
        let mut d = full.clone();
        for (j, &oj) in order.iter().enumerate() {
            let m_col = m
                .col(oj)
                .try_as_col_major()
                .expect("an owned matrix's column")
                .as_slice();
            let d_col = d
                .as_mut()
                .col_mut(j)
                .try_as_col_major_mut()
                .expect("an owned matrix's column");
            for (x, &oi) in d_col.as_slice_mut().iter_mut().zip(&order) {
                *x -= m_col[oi];
            }
        }
        let eps = T::PRECISION.epsilon();
        Ok(crate::check::norm1(d.as_ref()) / (n as f64 * crate::check::norm1(full.as_ref()) * eps))
    }

    /// L, unit lower triangular (n x n).
    pub fn l(&self) -> Mat<T> {
        self.aasen.l()
    }

    /// T, Hermitian block tridiagonal (n x n, dense).
    pub fn t(&self) -> Mat<T> {
        let blocks = self.aasen.blocks;
        let mut t = Mat::<T>::zeros(blocks.n, blocks.n);
        for (k, d) in self.aasen.diag.iter().enumerate() {
            let s = blocks.start(k);
            t.as_mut()
                .submatrix_mut(s, s, d.nrows(), d.ncols())
                .copy_from(d);
            if let Some(c) = self.aasen.sub.get(k) {
                let below = blocks.start(k + 1);
                t.as_mut()
                    .submatrix_mut(below, s, c.nrows(), c.ncols())
                    .copy_from(c);
                t.as_mut()
                    .submatrix_mut(s, below, c.ncols(), c.nrows())
                    .copy_from(c.adjoint());
            }
        }
        t
    }

    /// The interchanges Q is made of, in the order they apply: row i swapped with `swaps()[i]` (>=
    /// i), 0-based, as LAPACK's ipiv.
    pub fn swaps(&self) -> &[usize] {
        &self.aasen.swaps
    }
}

/// X with A X = B for a Hermitian (real: symmetric) indefinite A given by its lower triangle
/// (LAPACK's ?sysv / ?hesv, through [`Ldlt`] with default options).
pub fn solve_symmetric<A: Matrix, B: Matrix<Elem = A::Elem>>(a: A, b: B) -> Result<B::Owned> {
    // `solve` checks the same, but only after the O(n^3) factorisation: fail first.
    let (av, bv) = (a.view(), b.view());
    crate::check::check_system("A", (av.nrows(), av.ncols()), bv.nrows())?;
    Ldlt::new().factor(av)?.solve(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Platform, c32, c64};
    use std::sync::Arc;

    /// A factor's buffer, dropped, is kept by its platform and taken by the next factorisation
    /// there, whatever it holds: poisoned with NaN, the second factor is the first one bit for bit
    /// (no task reads an entry before a task wrote it), and the buffer is taken, not left.
    fn a_reused_buffer_gives_the_same_factor<T: Scalar>() {
        // f32's 800 x 800 is 2.6 MB: large enough to be a mapping, which a dropped factor keeps.
        let n = 800;
        let spec = "2x1".parse().expect("a cluster shape");
        let platform = Arc::new(Platform::new(&spec, Backend::Faer).expect("a platform"));
        let builder = Ldlt::new().platform(platform.clone()).tile(96);
        let a = crate::matgen::random_hermitian::<T>(n, 11);
        let b = crate::matgen::random_in::<T>(n, 2, 12);
        let first = builder.factor(a.as_ref()).expect("the first factor");
        let (l, t, swaps) = (first.l(), first.t(), first.swaps().to_vec());
        let x = first.solve(b.as_ref()).expect("the first solve");
        drop(first);
        let mut kept = platform
            .reclaim::<KeptFactors<T>>()
            .expect("the dropped factor's buffer is kept");
        kept.0.as_mut_slice().fill(T::from_f64(f64::NAN));
        platform.keep(kept);
        let again = builder.factor(a.as_ref()).expect("the second factor");
        assert!(
            platform.reclaim::<KeptFactors<T>>().is_none(),
            "the second factor took the kept buffer"
        );
        assert!(again.l() == l, "L differs ({})", T::PRECISION);
        assert!(again.t() == t, "T differs ({})", T::PRECISION);
        assert_eq!(again.swaps(), &swaps[..]);
        let residual = again.residual(a.as_ref()).expect("the residual");
        assert!(
            residual < 30.0,
            "residual ratio {residual} ({})",
            T::PRECISION
        );
        assert!(again.solve(b.as_ref()).expect("the second solve") == x);
    }

    #[test]
    fn a_reused_buffer_gives_the_same_factor_in_every_precision() {
        let each: [fn(); 4] = [
            a_reused_buffer_gives_the_same_factor::<f32>,
            a_reused_buffer_gives_the_same_factor::<f64>,
            a_reused_buffer_gives_the_same_factor::<c32>,
            a_reused_buffer_gives_the_same_factor::<c64>,
        ];
        each.iter().for_each(|check| check());
    }
}
