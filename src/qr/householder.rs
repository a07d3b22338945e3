//! Householder QR of general m x n matrices and least squares built on it: [`Qr`] (the builder,
//! with the run options of [`Cholesky`]), [`QrFactor`] (R, Q applied from the left, the thin Q,
//! least-squares solutions) and [`lstsq`] (LAPACK's ?gels for m >= n).
//!
//! The factorisation is a task graph ([`Algorithm::Qr`](crate::Algorithm::Qr): PLASMA's tile QR,
//! each tile column's tiles eliminated by a flat tree for square matrices or a binary tree for tall
//! ones, see [`QrTree`]) run by the runtime on the platform's CPU clusters over the caller's
//! column-major storage (a copy of it for [`Qr::factor`]). The factored matrix holds R on and above
//! its diagonal and the reflectors below; the T's of the block reflectors are kept beside it, one
//! per tile factorisation. Q is never formed: [`QrFactor::apply_qh`] and [`QrFactor::apply_q`]
//! replay the graph's factorisations (in order, or in reverse) on the operand's row blocks, each
//! application on every core (O(m n k) flops for k columns, like the solves of
//! [`crate::LuFactor`]).
//!
//! Input: A and B are checked for NaN and infinities before any work ([`Error::NonFinite`]).

use std::sync::Arc;

use faer::reborrow::ReborrowMut;
use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::{Op, TaskGraph, TileRef, Tiling, qr_t_slot};
use hetla_kernels::{Precision, Scalar, Stack};
use hetla_runtime::{Platform, RunOptions, SchedulerKind, Trace};

use super::work::ReflectorWork;
use crate::check::check_finite;
use crate::interop::{Matrix, MatrixMut};
use crate::plan::Plan;
use crate::run::RunConfig;
use crate::run::on_all_cores;
use crate::{ClusterSpec, Error, Result};

use hetla_factorizations::QrTree;

/// The tile size QR uses for an `m x n` matrix when none is given: the whole matrix when it has at
/// most 256 rows and columns (one tile QR); 512 for a tall-skinny matrix of at most 512 columns
/// (tiles of 512 rows: 200000 x 256 on 2 cores took 0.73 s against 0.85 s in tiles of 256); else
/// 384 (the updates' products gain from the wider tiles: 20000 x 1000, 0.57 s against 0.64 s).
pub(crate) fn default_qr_tile(m: usize, n: usize) -> usize {
    if m.max(n) <= 256 {
        m.max(n).max(1)
    } else if n <= 512 && m >= 4 * n {
        512
    } else {
        384
    }
}

/// Configures and runs Householder QR factorisations on the runtime; the run options are every
/// builder's (backend, clusters, threads, scheduler, platform, as [`crate::Cholesky`]'s), with a
/// cluster per core by default as for [`crate::Lu`] (the tile kernels are many and small), plus the
/// tile size, the inner block size and the reduction tree.
///
/// ```
/// use faer::Mat;
/// let a = Mat::from_fn(6, 3, |i, j| 1.0 / (i + j + 1) as f64 + if i == j { 1.0 } else { 0.0 });
/// let b = Mat::from_fn(6, 1, |i, _| i as f64);
/// let x = hetla::Qr::new().factor(a.as_ref())?.solve_least_squares(b.as_ref())?;
/// // The residual is orthogonal to A's columns.
/// let r = &b - &a * &x;
/// assert!((a.transpose() * &r).norm_max() < 1e-12);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Qr {
    pub(crate) run: RunConfig,
    pub(crate) tile: Option<usize>,
    pub(crate) inner: usize,
    tree: QrTree,
}

impl Default for Qr {
    fn default() -> Self {
        Self {
            run: RunConfig::on(ClusterSpec::Level(hetla_clusters::Level::Core)),
            tile: None,
            inner: Qr::DEFAULT_INNER_BLOCK,
            tree: QrTree::Auto,
        }
    }
}

impl Qr {
    /// The inner block size (columns of each block reflector) when none is given: PLASMA's default.
    pub const DEFAULT_INNER_BLOCK: usize = 32;

    /// Default options: faer, the tile of [`Qr::tile_size_for`], inner blocks of
    /// [`Qr::DEFAULT_INNER_BLOCK`], the tree by shape, a cluster per core, MCT.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tile size b (the last tile row and column ragged). 0 is an error at factorisation time.
    pub fn tile(mut self, b: usize) -> Self {
        self.tile = Some(b);
        self
    }

    /// Columns of each block reflector inside a tile (LAPACK's nb of ?geqrt; at least 1).
    pub fn inner_block(mut self, ib: usize) -> Self {
        self.inner = ib;
        self
    }

    /// The reduction tree ([`QrTree::Auto`] chooses by shape).
    pub fn tree(mut self, tree: QrTree) -> Self {
        self.tree = tree;
        self
    }

    crate::run::run_options!();
    crate::run::tuned_for!(crate::Family::Qr);

    /// The tile size for an `m x n` matrix: the one given, else the whole matrix when it has at
    /// most 256 rows and columns (one tile QR); 512 for a tall-skinny matrix of at most 512 columns
    /// (tiles of 512 rows: 200000 x 256 on 2 cores took 0.73 s against 0.85 s in tiles of 256);
    /// else 384 (the updates' products gain from the wider tiles: 20000 x 1000, 0.57 s against 0.64
    /// s).
    pub fn tile_size_for(&self, m: usize, n: usize) -> usize {
        self.tile.unwrap_or_else(|| default_qr_tile(m, n))
    }

    /// The plan of the QR factorisation of an `m x n` matrix in `precision`: the tiled QR
    /// ([`Algorithm::Qr`](crate::Algorithm::Qr)), its tree resolved for the platform's workers, or
    /// on a platform with GPUs and m >= n LAPACK's blocked QR in block columns
    /// ([`Algorithm::QrColumns`](crate::Algorithm::QrColumns): the panels on the CPU clusters, the
    /// applications of their reflectors on the GPUs too, MAGMA's hybrid); a square matrix's in the
    /// tile `hetla tune` saved on this machine near order `n` when this builder's user set nothing,
    /// as every call of the builder takes.
    pub fn plan(&self, m: usize, n: usize, precision: Precision) -> Result<Plan> {
        self.plan_with(m, n, 0, precision)
    }

    /// [`Qr::plan`] with `rhs` right-hand sides whose Q^H B the same graph computes.
    fn plan_with(&self, m: usize, n: usize, rhs: usize, precision: Precision) -> Result<Plan> {
        let tile = self.square_tuned(m, n, precision).tile_size_for(m, n);
        let algorithm = match self.run.on_devices() && m >= n {
            true => crate::Algorithm::QrColumns {
                m,
                n,
                rhs,
                inner: self.inner,
            },
            false => crate::Algorithm::Qr {
                m,
                n,
                rhs,
                tree: self.tree_for(m, n, tile),
            },
        };
        Plan::new(algorithm, tile, precision)
    }

    /// The tree for an `m x n` matrix in tiles of `tile` on this builder's platform
    /// ([`QrTree::for_shape`] with its workers).
    fn tree_for(&self, m: usize, n: usize, tile: usize) -> QrTree {
        let workers = self
            .resolve_platform()
            .map_or(1, |p| p.workers().len().max(1));
        let tiles = |x: usize| x.div_ceil(tile.max(1));
        self.tree.for_shape(tiles(m), tiles(n), workers)
    }

    /// Factors a copy of `a` (left unchanged): any precision, any [`Matrix`].
    pub fn factor<A: Matrix>(&self, a: A) -> Result<QrFactor<A::Elem>> {
        let a = a.view();
        check_finite("A", a)?;
        self.factor_checked(a.to_owned())
    }

    /// Factors `a` in place, taking ownership: no copy is made.
    pub fn factor_owned<T: Scalar>(&self, a: Mat<T>) -> Result<QrFactor<T>> {
        check_finite("A", a.as_ref())?;
        self.factor_checked(a)
    }

    /// Factors `a` in place by `plan` (from [`Qr::plan`]) through the runtime; the trace and the
    /// block reflectors' T's (what a [`QrFactor`] keeps). `a` is checked first as by
    /// [`Qr::factor`].
    pub fn factor_planned<T: Scalar>(&self, plan: &Plan, a: MatMut<'_, T>) -> Result<Trace> {
        check_finite("A", a.as_ref())?;
        let this = self.square_tuned(a.nrows(), a.ncols(), T::PRECISION);
        let platform = this.resolve_platform()?;
        Ok(this.run_plan(&platform, plan, a, None)?.0)
    }

    /// [`Qr::tuned_for`] an `m x n` matrix: tuned configurations are of square ones.
    fn square_tuned(&self, m: usize, n: usize, precision: Precision) -> std::borrow::Cow<'_, Self> {
        match m == n {
            true => self.tuned_for(n, precision),
            false => std::borrow::Cow::Borrowed(self),
        }
    }

    /// Runs `plan` over `a`, and over `b` (overwritten by Q^H B) when the plan has right-hand
    /// sides: tiled or in block columns, as the plan says.
    fn run_plan<T: Scalar>(
        &self,
        platform: &Platform,
        plan: &Plan,
        a: MatMut<'_, T>,
        b: Option<MatMut<'_, T>>,
    ) -> Result<(Trace, Vec<Option<Mat<T>>>)> {
        match plan.algorithm() {
            crate::Algorithm::QrColumns { .. } => {
                super::work::execute_columns(plan, platform, a, b, &self.options())
            }
            _ => super::work::execute(plan, platform, a, b, self.inner, &self.options()),
        }
    }

    fn options(&self) -> RunOptions {
        RunOptions {
            scheduler: self.run.scheduler,
            ..RunOptions::default()
        }
    }

    fn factor_checked<T: Scalar>(&self, mut a: Mat<T>) -> Result<QrFactor<T>> {
        let (m, n) = (a.nrows(), a.ncols());
        let this = self.square_tuned(m, n, T::PRECISION);
        let platform = this.resolve_platform()?;
        let plan = this.plan(m, n, T::PRECISION)?;
        let (_, ts) = this.run_plan(&platform, &plan, a.as_mut(), None)?;
        Ok(QrFactor::new(&this, a, ts, &plan, platform))
    }

    /// The least-squares solution of min ||A X - B||_2 (m >= n, A of full column rank; LAPACK
    /// ?gels) in one graph: A factored and Q^H applied to B by the same tasks' steps
    /// ([`Algorithm::Qr`](crate::Algorithm::Qr)), then R X = (Q^H B)'s first n rows. A and B are
    /// read, not changed; any [`Matrix`], the result in B's kind.
    pub fn solve_least_squares<A, B>(&self, a: A, b: B) -> Result<B::Owned>
    where
        A: Matrix,
        B: Matrix<Elem = A::Elem>,
    {
        let (a, b) = (a.view(), b.view());
        let (m, n) = (a.nrows(), a.ncols());
        if m < n {
            return Err(Error::Underdetermined { rows: m, cols: n });
        }
        check_rhs_rows(b, m)?;
        check_finite("A", a)?;
        check_finite("B", b)?;
        let platform = self.resolve_platform()?;
        let (mut f, mut c) = (a.to_owned(), b.to_owned());
        if b.ncols() > 0 {
            let plan = self.plan_with(m, n, b.ncols(), A::Elem::PRECISION)?;
            self.run_plan(&platform, &plan, f.as_mut(), Some(c.as_mut()))?;
        }
        let x = upper_solve(&platform, f.as_ref(), c.as_ref())?;
        B::owned_copy(x.as_ref())
    }
}

/// The column at which the upper triangular `r` (n x n, from the QR of an `m x n` matrix) is
/// numerically singular, if it is: an exactly zero diagonal entry (LAPACK ?gels's info), or a
/// reciprocal 1-norm condition number, estimated as LAPACK's ?trcon does (Higham's estimate of
/// ||R^-1||_1, [`condition::estimate_norm1`]), below max(m, n) eps (numpy's and scipy's default
/// cutoff for the rank): then the first diagonal entry at most that cutoff times the largest one,
/// else the smallest. A solution through such an R is rounding error magnified past 1 / eps.
pub(crate) fn rank_deficient_column<T: Scalar>(
    r: MatRef<'_, T>,
    m: usize,
) -> Result<Option<usize>> {
    let n = r.ncols();
    let diagonal: Vec<f64> = (0..n).map(|j| r[(j, j)].abs_f64()).collect();
    if let Some(column) = diagonal.iter().position(|&d| d == 0.0) {
        return Ok(Some(column));
    }
    if n == 0 {
        return Ok(None);
    }
    let cutoff = m.max(n) as f64 * T::PRECISION.epsilon();
    let r_norm = (0..n)
        .map(|j| (0..=j).map(|i| r[(i, j)].abs_f64()).sum::<f64>())
        .fold(0.0, f64::max);
    let inverse_norm = crate::condition::estimate_norm1(n, |mut x: MatMut<'_, T>, adjoint| {
        let par = faer::Par::Seq;
        match adjoint {
            false => {
                faer::linalg::triangular_solve::solve_upper_triangular_in_place(r, x.as_mut(), par)
            }
            true => faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                r.adjoint(),
                x.as_mut(),
                par,
            ),
        }
        Ok(())
    })?;
    let rcond = 1.0 / (r_norm * inverse_norm);
    if rcond.is_nan() || rcond >= cutoff {
        return Ok(None);
    }
    let largest = diagonal.iter().copied().fold(0.0, f64::max);
    let column = (diagonal.iter())
        .position(|&d| d <= cutoff * largest)
        .unwrap_or_else(|| {
            (0..n)
                .min_by(|&i, &j| diagonal[i].total_cmp(&diagonal[j]))
                .unwrap_or(0)
        });
    Ok(Some(column))
}

/// R X = C's first n rows, R the upper triangle of the factored `f`'s first n rows (m >= n): R
/// numerically singular ([`rank_deficient_column`]) is [`Error::RankDeficient`].
fn upper_solve<T: Scalar>(
    platform: &Platform,
    f: MatRef<'_, T>,
    c: MatRef<'_, T>,
) -> Result<Mat<T>> {
    let n = f.ncols();
    if let Some(column) = rank_deficient_column(f.submatrix(0, 0, n, n), f.nrows())? {
        return Err(Error::RankDeficient { column });
    }
    let mut x = c.subrows(0, n).to_owned();
    let r = f.submatrix(0, 0, n, n);
    let flops = (n * n * x.ncols()) as f64 * T::PRECISION.flop_factor();
    on_all_cores(platform, flops, |_, par| {
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(r, x.as_mut(), par)
    });
    Ok(x)
}

/// A QR factorisation A = Q R of an m x n matrix (see the module documentation).
#[derive(Debug, Clone)]
pub struct QrFactor<T: Scalar> {
    qr: Mat<T>,
    ts: Vec<Option<Mat<T>>>,
    graph: TaskGraph,
    tiling: Tiling,
    tile: usize,
    inner: usize,
    tree: QrTree,
    /// Whether it was factored in block columns ([`Algorithm::QrColumns`](crate::Algorithm)): each
    /// panel's reflectors are then its block column's rows from its diagonal down.
    columns: bool,
    scheduler: SchedulerKind,
    platform: Arc<Platform>,
}

impl<T: Scalar> QrFactor<T> {
    pub(super) fn new(
        qr: &Qr,
        a: Mat<T>,
        ts: Vec<Option<Mat<T>>>,
        plan: &Plan,
        platform: Arc<Platform>,
    ) -> Self {
        let tree = match plan.algorithm() {
            crate::Algorithm::Qr { tree, .. } => tree,
            _ => QrTree::Auto,
        };
        Self {
            qr: a,
            ts,
            graph: plan.graph().clone(),
            tiling: *plan
                .blocks(hetla_factorizations::FACTOR)
                .expect("a QR plan tiles its matrix"),
            tile: plan.tile(),
            inner: qr.inner,
            tree,
            columns: matches!(plan.algorithm(), crate::Algorithm::QrColumns { .. }),
            scheduler: qr.run.scheduler,
            platform,
        }
    }

    /// Rows of A.
    pub fn nrows(&self) -> usize {
        self.qr.nrows()
    }

    /// Columns of A.
    pub fn ncols(&self) -> usize {
        self.qr.ncols()
    }

    /// The factored matrix: R on and above the diagonal, the reflectors below (their T's are kept
    /// apart).
    pub fn storage(&self) -> MatRef<'_, T> {
        self.qr.as_ref()
    }

    /// R: min(m, n) x n, upper trapezoidal.
    pub fn r(&self) -> Mat<T> {
        let k = self.nrows().min(self.ncols());
        Mat::from_fn(k, self.ncols(), |i, j| {
            if i <= j {
                self.qr[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        })
    }

    /// Q^H B (B with m rows), in B's kind.
    pub fn apply_qh<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        self.applied(b, true)
    }

    /// Q B (B with m rows), in B's kind.
    pub fn apply_q<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        self.applied(b, false)
    }

    /// B <- Q^H B in place (B with m rows, any [`MatrixMut`], as [`LuFactor::solve_in_place`]'s;
    /// one whose columns are not contiguous goes through a column-major copy written back).
    ///
    /// [`LuFactor::solve_in_place`]: crate::LuFactor::solve_in_place
    pub fn apply_qh_in_place<B: MatrixMut<Elem = T>>(&self, mut b: B) -> Result<()> {
        self.apply_in_place(b.view_mut(), true, false)
    }

    /// B <- Q B in place (B with m rows, any [`MatrixMut`]).
    pub fn apply_q_in_place<B: MatrixMut<Elem = T>>(&self, mut b: B) -> Result<()> {
        self.apply_in_place(b.view_mut(), false, false)
    }

    /// The thin Q: the first min(m, n) columns of Q (m x min(m, n), orthonormal columns), formed as
    /// LAPACK's ?orgqr forms it (each panel's reflectors applied to the columns they change).
    pub fn thin_q(&self) -> Result<Mat<T>> {
        self.q_columns(self.nrows().min(self.ncols()))
    }

    /// The whole Q, m x m (unitary), formed as [`QrFactor::thin_q`] is.
    pub fn full_q(&self) -> Result<Mat<T>> {
        self.q_columns(self.nrows())
    }

    /// Writes the first `q.ncols()` columns of Q into `q` (m rows, at most m columns; whatever it
    /// held is overwritten), formed as [`QrFactor::thin_q`] is, in the caller's memory (a NumPy
    /// array, part of a bigger matrix) instead of a matrix of its own.
    pub fn q_into<Q: MatrixMut<Elem = T>>(&self, mut q: Q) -> Result<()> {
        let mut q = q.view_mut();
        self.check_rows(q.as_ref())?;
        if q.ncols() > self.nrows() {
            return Err(Error::InvalidOption {
                option: "q",
                reason: format!(
                    "has {} columns, but Q has only {} (its rows)",
                    q.ncols(),
                    self.nrows()
                ),
            });
        }
        q.fill(T::from_f64(0.0));
        q.rb_mut()
            .diagonal_mut()
            .column_vector_mut()
            .fill(T::from_f64(1.0));
        self.apply_in_place(q, false, true)
    }

    /// The first `k` columns of Q, from those of the identity.
    fn q_columns(&self, k: usize) -> Result<Mat<T>> {
        let mut q = Mat::<T>::zeros(self.nrows(), k);
        self.q_into(&mut q)?;
        Ok(q)
    }

    /// The least-squares solution X of min ||A X - B||_2 (m >= n, A of full column rank; LAPACK
    /// ?gels): X = R^-1 (Q^H B)[..n]. An R that is numerically singular (an exactly zero diagonal
    /// entry, or a condition estimate beyond 1 / (max(m, n) eps), the cutoff numpy and scipy use
    /// for the rank) is [`Error::RankDeficient`] with the column, never a solution of rounding
    /// error; for A of any rank, [`crate::lstsq_rank`] gives the minimum-norm solution and the
    /// rank. m < n is [`Error::Underdetermined`].
    pub fn solve_least_squares<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        let (m, n) = (self.nrows(), self.ncols());
        if m < n {
            return Err(Error::Underdetermined { rows: m, cols: n });
        }
        if let Some(column) = rank_deficient_column(self.qr.as_ref().submatrix(0, 0, n, n), m)? {
            return Err(Error::RankDeficient { column });
        }
        let b = b.view();
        self.check_rows(b)?;
        check_finite("B", b)?;
        let mut c = b.to_owned();
        self.apply_in_place(c.as_mut(), true, false)?;
        let x = upper_solve(&self.platform, self.qr.as_ref(), c.as_ref())?;
        B::owned_copy(x.as_ref())
    }

    fn check_rows(&self, b: MatRef<'_, T>) -> Result<()> {
        check_rhs_rows(b, self.nrows())
    }

    fn applied<B: Matrix<Elem = T>>(&self, b: B, adjoint: bool) -> Result<B::Owned> {
        let b = b.view();
        self.check_rows(b)?;
        check_finite("B", b)?;
        let mut c = b.to_owned();
        self.apply_in_place(c.as_mut(), adjoint, false)?;
        B::owned_copy(c.as_ref())
    }

    /// B <- Q^H B (`adjoint`) or Q B in place, by replaying the graph's factorisations on B's row
    /// blocks: in order for Q^H, in reverse for Q. `from_identity`: B holds the first columns of
    /// the identity (Q's thin part is being formed, as LAPACK's ?orgqr does): the reflectors of
    /// panel k, applied last to first, then touch only B's columns from k's first on (the ones
    /// before are still unit vectors, which those reflectors' rows leave alone), about half the
    /// flops.
    fn apply_in_place(
        &self,
        mut b: MatMut<'_, T>,
        adjoint: bool,
        from_identity: bool,
    ) -> Result<()> {
        self.check_rows(b.as_ref())?;
        if b.ncols() == 0 {
            return Ok(());
        }
        if adjoint && !self.columns {
            // Q^H B as a graph of the applications, B's tile columns in parallel.
            let (m, n) = (self.nrows(), self.ncols());
            let plan = Plan::new(
                crate::Algorithm::QrApply {
                    m,
                    n,
                    rhs: b.ncols(),
                    tree: self.tree,
                },
                self.tile,
                T::PRECISION,
            )?;
            let options = RunOptions {
                scheduler: self.scheduler,
                ..RunOptions::default()
            };
            return crate::interop::column_major(b, |b| {
                super::work::execute_apply(
                    &plan,
                    &self.platform,
                    self.qr.as_ref(),
                    &self.ts,
                    b,
                    self.inner,
                    &options,
                )
                .map(|_| ())
            });
        }
        let (m, cols) = (self.nrows(), b.ncols());
        let k = m.min(self.ncols());
        let flops = 4.0 * (m * k * cols) as f64 * T::PRECISION.flop_factor();
        let tasks: Vec<usize> = (0..self.graph.len())
            .filter(|&t| matches!(self.graph.tasks()[t].op, Op::Geqrt | Op::Tsqrt | Op::Ttqrt))
            .collect();
        let mut order = tasks;
        if !adjoint {
            order.reverse();
        }
        // The rows a factorisation's tile row spans; in block columns, a panel's from its diagonal.
        let rows = |t: TileRef| match self.columns {
            true => (self.tiling.offset(t.col), m - self.tiling.offset(t.col)),
            false => (
                self.tiling.offset(t.row),
                self.tiling.tile_shape(t.row, 0).0,
            ),
        };
        on_all_cores(&self.platform, flops, |backend, par| {
            for t in order {
                let task = &self.graph.tasks()[t];
                let (slot_tile, pair) = qr_t_slot(task);
                let Some(ts) = &self.ts[ReflectorWork::<T>::slot(&self.tiling, slot_tile, pair)]
                else {
                    continue;
                };
                let tile = |n: usize| task.accesses[n].tile;
                let from = if from_identity {
                    self.tiling.offset(tile(0).col)
                } else {
                    0
                };
                let width = b.ncols() - from;
                let mut b = b.rb_mut().subcols_mut(from, width);
                let view = |t: TileRef| {
                    let ((start, r), c) = (rows(t), self.tiling.tile_cols(t.col));
                    (self.qr.as_ref()).submatrix(start, self.tiling.offset(t.col), r, c)
                };
                match Stack::of(task.op) {
                    None => {
                        let (start, len) = rows(tile(0));
                        let bi = b.rb_mut().subrows_mut(start, len);
                        backend.qr_apply(view(tile(0)), ts.as_ref(), bi, adjoint, par)?;
                    }
                    Some(stack) => {
                        let ((p0, _), (q0, ql)) = (rows(tile(0)), rows(tile(1)));
                        // Rows p0 .. p0 + k of the top block and the bottom block's: disjoint.
                        let (top, bottom) = b.rb_mut().split_at_row_mut(q0);
                        let top = top.subrows_mut(p0, ts.ncols());
                        let bottom = bottom.subrows_mut(0, ql);
                        backend.qr_stacked_apply(
                            view(tile(1)),
                            stack,
                            ts.as_ref(),
                            (top, bottom),
                            adjoint,
                            par,
                        )?;
                    }
                }
            }
            Ok::<(), hetla_kernels::KernelError>(())
        })?;
        Ok(())
    }
}

/// The least-squares solution of min ||A X - B||_2 for A m x n, m >= n, of full column rank
/// (LAPACK's ?gels): a tiled QR of a copy of A with the default options, then
/// [`QrFactor::solve_least_squares`]. Any [`Matrix`]; the result in B's kind. A numerically rank
/// deficient A (two equal columns) is [`Error::RankDeficient`] naming the column, not a solution of
/// norm 1e13: [`crate::lstsq_rank`] solves it.
pub fn lstsq<A, B>(a: A, b: B) -> Result<B::Owned>
where
    A: Matrix,
    B: Matrix<Elem = A::Elem>,
{
    let a = a.view();
    if a.nrows() < a.ncols() {
        return Err(Error::Underdetermined {
            rows: a.nrows(),
            cols: a.ncols(),
        });
    }
    Qr::new().solve_least_squares(a, b)
}

/// B of a least-squares problem or a product with Q has A's `m` rows, or [`Error::RowsMismatch`].
pub(super) fn check_rhs_rows<T: Scalar>(b: MatRef<'_, T>, m: usize) -> Result<()> {
    if b.nrows() == m {
        Ok(())
    } else {
        Err(Error::RowsMismatch {
            what: "B",
            rows: b.nrows(),
            expected: m,
            of: "A",
        })
    }
}
