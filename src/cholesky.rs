//! The Cholesky factorisation and solve of symmetric positive definite matrices.
//!
//! Only the lower triangle of A is read (as LAPACK's `uplo = 'L'`); the factor L overwrites it and
//! the strict upper triangle is left as it was. An `n = 0` matrix is valid: it factors into an
//! empty factor, and solving with it returns an empty (0 x k) solution, as LAPACK's quick return
//! does.

use std::sync::Arc;

use faer::{Mat, MatMut, MatRef};
use hetla_clusters::ClusterSpec;
use hetla_kernels::{Backend, KernelError, Par, Precision, Scalar};
use hetla_runtime::{Platform, RunOptions, SchedulerKind, Trace};

use crate::pages::PageBuffer;
use crate::plan::{Algorithm, Plan, SINGLE_TILE_UP_TO, TileChoice, choose_tile, default_tile_size};
use crate::tiles::{Matrices, Storage, TileMajor, TiledMatrix, mat_from_slice};
use crate::{Error, Result};

/// Configures and runs tiled Cholesky factorisations on the runtime.
///
/// By default the platform is built at each call from the cluster spec (default `auto`) and the
/// backend; give a shared [`Platform`] with [`Cholesky::platform`] to reuse its pools and
/// performance models across calls.
///
/// ```
/// use faer::Mat;
/// let a = Mat::from_fn(3, 3, |i, j| if i == j { 4.0 } else { 1.0 });
/// let factor = hetla::Cholesky::new().tile(2).factor(a.as_ref())?;
/// let x = factor.solve(Mat::<f64>::ones(3, 1).as_ref())?;
/// assert!((x[(0, 0)] - 1.0 / 6.0).abs() < 1e-15);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Cholesky {
    pub(crate) tile: Option<usize>,
    backend: Backend,
    clusters: ClusterSpec,
    threads: Option<usize>,
    pub(crate) scheduler: SchedulerKind,
    platform: Option<Arc<Platform>>,
    pub(crate) progress_timeout: Option<std::time::Duration>,
    storage: Storage,
}

impl Cholesky {
    /// Default options: faer, the default tile size, `auto` clusters, MCT.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tile size b (tiles are b x b, the last row and column ragged). 0 is an error at
    /// factorisation time; a tile larger than n gives a single tile.
    pub fn tile(mut self, b: usize) -> Self {
        self.tile = Some(b);
        self
    }

    /// Where the kernels find the tiles: the caller's storage or a tile-major copy ([`Storage`];
    /// default [`Storage::Auto`]). The result is the same either way: L in the caller's lower
    /// triangle, the strict upper triangle untouched. A matrix of one tile is always factored in
    /// place (one kernel call).
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// Kernel backend (ignored when a platform is given: it has its own).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// How cores are grouped into clusters (ignored when a platform is given).
    pub fn clusters(mut self, spec: ClusterSpec) -> Self {
        self.clusters = spec;
        self
    }

    /// One cluster of `threads` cores: every kernel runs on all of them, one at a time.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// The scheduling policy.
    pub fn scheduler(mut self, scheduler: SchedulerKind) -> Self {
        self.scheduler = scheduler;
        self
    }

    /// Runs on this platform (its clusters, backend and models).
    pub fn platform(mut self, platform: Arc<Platform>) -> Self {
        self.platform = Some(platform);
        self
    }

    /// Distributed runs only: how long a rank waits for tiles from another with nothing else
    /// happening before it presumes that rank dead and ends with an error (default: ten minutes,
    /// `hetla::distributed::DEFAULT_PROGRESS_TIMEOUT` with feature `mpi`).
    pub fn progress_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.progress_timeout = Some(timeout);
        self
    }

    /// The tile size used for a matrix of order `n`: the one given, else the one the platform's
    /// performance models predict fastest (see [`Cholesky::plan`]; the first call for a new size
    /// may time the kernels on the candidate tiles), else [`default_tile_size`].
    pub fn tile_size_for(&self, n: usize) -> usize {
        self.tile_size_in(n, Precision::D)
    }

    /// [`Cholesky::tile_size_for`] a matrix in `precision` (on a platform with devices, other
    /// precisions than f64 take the given tile or [`default_tile_size`]).
    pub fn tile_size_in(&self, n: usize, precision: Precision) -> usize {
        match self.resolve_platform() {
            Ok(platform) => self.tile_and_choice(&platform, n, precision).map_or_else(
                |_| default_tile_size(n, platform.backend(), precision),
                |c| c.0,
            ),
            Err(_) => self
                .tile
                .unwrap_or_else(|| default_tile_size(n, self.backend, precision)),
        }
    }

    /// The plan of the factorisation of an `n x n` matrix in `precision` on this builder's
    /// platform: its graph, kernels, bytes and flops, and its tile: the one given, else the one the
    /// platform's performance models predict fastest in `precision` (timing first the candidates
    /// they lack, see [`TileChoice`]; on a platform with devices only in f64), else
    /// [`default_tile_size`]. Matrices up to 512 are one tile. [`Cholesky::factor_planned`] runs
    /// it.
    pub fn plan(&self, n: usize, precision: Precision) -> Result<Plan> {
        let platform = self.resolve_platform()?;
        let (tile, choice) = self.tile_and_choice(&platform, n, precision)?;
        Ok(Plan::cholesky(n, tile, precision)?.with_choice(choice))
    }

    /// The tile for order `n` in `precision` on `platform`, and the models' choice when they made
    /// it.
    fn tile_and_choice(
        &self,
        platform: &Arc<Platform>,
        n: usize,
        precision: Precision,
    ) -> Result<(usize, Option<TileChoice>)> {
        if let Some(b) = self.tile {
            return Ok((b, None));
        }
        if n <= SINGLE_TILE_UP_TO {
            return Ok((n.max(1), None));
        }
        // Devices run f64 kernels only: in another precision such a platform takes the default.
        if precision == Precision::D || platform.devices().is_empty() {
            let choice = choose_tile(platform, n, precision, Plan::cholesky)?;
            return Ok((choice.tile, Some(choice)));
        }
        Ok((default_tile_size(n, platform.backend(), precision), None))
    }

    /// The platform a run uses: the one given, or the process-wide one of the options' cluster spec
    /// and backend ([`Platform::shared`], built on first use).
    pub fn resolve_platform(&self) -> Result<Arc<Platform>> {
        if let Some(p) = &self.platform {
            return Ok(p.clone());
        }
        let spec = match self.threads {
            Some(0) => {
                return Err(Error::InvalidOption {
                    option: "threads",
                    reason: "must be at least 1".into(),
                });
            }
            Some(t) => ClusterSpec::Grid { count: 1, size: t },
            None => self.clusters.clone(),
        };
        Ok(Platform::shared(&spec, self.backend)?)
    }

    /// Factors a copy of `a` (left unchanged) and returns the factor. Any precision: `f32`, `f64`,
    /// or complex Hermitian [`c32`](crate::c32) and [`c64`](crate::c64).
    pub fn factor<T: Scalar>(&self, a: MatRef<'_, T>) -> Result<Factor<T>> {
        check_square("A", a.nrows(), a.ncols())?;
        self.factor_owned(a.to_owned())
    }

    /// Factors `a` in place, taking ownership: no copy of the matrix is made.
    pub fn factor_owned<T: Scalar>(&self, mut a: Mat<T>) -> Result<Factor<T>> {
        let platform = self.resolve_platform()?;
        let tile = self.factor_direct_or_tiled(&platform, a.as_mut())?;
        Ok(Factor {
            l: a,
            tile,
            platform,
            scheduler: self.scheduler,
        })
    }

    /// Factors `a` in place: on success its lower triangle holds L (its strict upper triangle is
    /// untouched). On error the lower triangle is partly overwritten.
    pub fn factor_in_place<T: Scalar>(&self, a: MatMut<'_, T>) -> Result<()> {
        let platform = self.resolve_platform()?;
        self.factor_direct_or_tiled(&platform, a).map(|_| ())
    }

    /// A matrix of one tile goes straight to the kernel (see [`direct`]); any other through its
    /// plan and the runtime. Returns the tile size.
    fn factor_direct_or_tiled<T: Scalar>(
        &self,
        platform: &Arc<Platform>,
        mut a: MatMut<'_, T>,
    ) -> Result<usize> {
        check_square("A", a.nrows(), a.ncols())?;
        let n = a.nrows();
        let (tile, choice) = self.tile_and_choice(platform, n, T::PRECISION)?;
        if tile >= n {
            check_finite_lower("A", a.as_ref())?;
            let flops = (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor();
            if let Some(result) = direct(platform, flops, |backend, par| {
                backend.potrf(a.as_mut(), par)
            }) {
                return result.map(|()| tile).map_err(|e| match e {
                    KernelError::NotPositiveDefinite { index } => {
                        Error::NotPositiveDefinite { column: index }
                    }
                    other => Error::Kernel(other),
                });
            }
        }
        let plan = Plan::cholesky(n, tile, T::PRECISION)?.with_choice(choice);
        self.factor_on(platform, &plan, a).map(|_| tile)
    }

    /// As [`Cholesky::factor_in_place`], and returns the trace of the run (always through the
    /// runtime, also for a matrix of one tile).
    pub fn factor_in_place_traced<T: Scalar>(&self, a: MatMut<'_, T>) -> Result<Trace> {
        check_square("A", a.nrows(), a.ncols())?;
        let plan = self.plan(a.nrows(), T::PRECISION)?;
        self.factor_planned(&plan, a)
    }

    /// Factors `a` in place by `plan` (from [`Cholesky::plan`]: a Cholesky factorisation of `a`'s
    /// order in `a`'s precision) on this builder's platform, always through the runtime; returns
    /// the trace of the run.
    pub fn factor_planned<T: Scalar>(&self, plan: &Plan, a: MatMut<'_, T>) -> Result<Trace> {
        let platform = self.resolve_platform()?;
        self.factor_on(&platform, plan, a)
    }

    /// Factors in place an `n x n` column-major matrix stored in `data` with leading dimension `ld`
    /// (>= n), as LAPACK's ?potrf does.
    pub fn factor_slice<T: Scalar>(&self, data: &mut [T], n: usize, ld: usize) -> Result<()> {
        self.factor_in_place(mat_from_slice(data, n, n, ld, "A")?)
    }

    /// Factors the square `a` by `plan` through its task graph and the runtime.
    fn factor_on<T: Scalar>(
        &self,
        platform: &Platform,
        plan: &Plan,
        a: MatMut<'_, T>,
    ) -> Result<Trace> {
        check_square("A", a.nrows(), a.ncols())?;
        if plan.algorithm() != (Algorithm::Cholesky { n: a.nrows() }) {
            return Err(Error::InvalidOption {
                option: "plan",
                reason: format!(
                    "the plan is a {} of order {:?}, the matrix of order {}",
                    plan.algorithm().name(),
                    plan.algorithm(),
                    a.nrows()
                ),
            });
        }
        check_finite_lower("A", a.as_ref())?;
        let options = RunOptions {
            scheduler: self.scheduler,
            ..RunOptions::default()
        };
        match self.storage.resolve::<T>(a.nrows(), plan.tile()) {
            Storage::TileMajor => {
                let spare = platform.reclaim::<PageBuffer<T>>();
                let tiles = TileMajor::lower(a.as_ref(), plan.tile(), spare)?;
                let run = plan.execute(platform, &tiles, &options);
                // Also after a failure: the caller gets the partial factor, as in place.
                tiles.copy_out(a);
                platform.keep(tiles.into_buffer());
                run
            }
            _ => {
                let a = TiledMatrix::new(a, plan.tile(), "A")?;
                plan.execute(platform, &Matrices(&[&a]), &options)
            }
        }
    }
}

/// A Cholesky factor A = L L^H (L L^T for a real type), ready to solve systems.
pub struct Factor<T: Scalar = f64> {
    l: Mat<T>,
    tile: usize,
    platform: Arc<Platform>,
    scheduler: SchedulerKind,
}

impl<T: Scalar> std::fmt::Debug for Factor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factor")
            .field("n", &self.n())
            .field("precision", &T::PRECISION)
            .field("tile", &self.tile)
            .field("platform", &self.platform)
            .finish()
    }
}

impl<T: Scalar> Factor<T> {
    /// Order of the factored matrix.
    pub fn n(&self) -> usize {
        self.l.nrows()
    }

    /// The tile size used.
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// The storage of the factor: L in the lower triangle; the strict upper triangle is whatever
    /// the input had there.
    pub fn storage(&self) -> MatRef<'_, T> {
        self.l.as_ref()
    }

    /// L as a lower triangular matrix (zeros above the diagonal).
    pub fn l(&self) -> Mat<T> {
        Mat::from_fn(self.n(), self.n(), |i, j| {
            if i >= j {
                self.l[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        })
    }

    /// Solves A X = B for one or many right-hand sides (the columns of `b`).
    pub fn solve(&self, b: MatRef<'_, T>) -> Result<Mat<T>> {
        let mut x = b.to_owned();
        self.solve_in_place(x.as_mut())?;
        Ok(x)
    }

    /// Solves A X = B in place: `b` is overwritten with X.
    pub fn solve_in_place(&self, b: MatMut<'_, T>) -> Result<()> {
        if b.nrows() != self.n() {
            return Err(Error::DimensionMismatch {
                n: self.n(),
                rows: b.nrows(),
            });
        }
        check_finite("B", b.as_ref())?;
        let n = self.n();
        if self.tile >= n {
            let flops = 2.0 * (n * n * b.ncols()) as f64 * T::PRECISION.flop_factor();
            let mut b = b;
            if let Some(result) = direct(&self.platform, flops, |backend, par| {
                backend.solve_lower(self.l.as_ref(), false, b.as_mut(), par)?;
                backend.solve_lower(self.l.as_ref(), true, b.as_mut(), par)
            }) {
                return result.map_err(Error::Kernel);
            }
            self.solve_tiled(b)
        } else {
            self.solve_tiled(b)
        }
    }

    fn solve_tiled(&self, b: MatMut<'_, T>) -> Result<()> {
        let plan = Plan::cholesky_solve(self.n(), b.ncols(), self.tile, T::PRECISION)?;
        let l = TiledMatrix::read_only(self.l.as_ref(), self.tile, "L")?;
        let rhs = TiledMatrix::new(b, self.tile, "B")?;
        let options = RunOptions {
            scheduler: self.scheduler,
            ..RunOptions::default()
        };
        plan.execute(&self.platform, &Matrices(&[&l, &rhs]), &options)
            .map(|_| ())
    }
}

/// Below this many flops a one-tile kernel runs on the calling thread: handing it to a pool costs
/// more than it gains (a thread wake-up is several microseconds).
const DIRECT_ON_CALLER_FLOPS: f64 = 4.0e6;

/// Runs the kernels of a matrix that is one tile directly, without graph or runtime: on the calling
/// thread when small, else on the platform's first CPU cluster with all its cores (holding the
/// platform's run lock). `None` when the platform has no CPU cluster.
pub(crate) fn direct<R: Send>(
    platform: &Platform,
    flops: f64,
    f: impl FnOnce(Backend, Par) -> R + Send,
) -> Option<R> {
    let cluster = platform.clusters().first()?;
    let backend = platform.backend();
    if flops < DIRECT_ON_CALLER_FLOPS {
        return Some(f(backend, Par::Seq));
    }
    let _busy = platform.lock_run();
    Some(
        cluster
            .pool()
            .install(|| f(backend, hetla_kernels::par_for(cluster.size()))),
    )
}

/// Solves the SPD (complex: Hermitian positive definite) system A X = B with default options (A's
/// lower triangle is read), in the precision of A and B.
pub fn solve_spd<T: Scalar>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Mat<T>> {
    // `solve` checks the same, but only after the O(n^3) factorisation: fail first.
    check_square("A", a.nrows(), a.ncols())?;
    if b.nrows() != a.nrows() {
        return Err(Error::DimensionMismatch {
            n: a.nrows(),
            rows: b.nrows(),
        });
    }
    Cholesky::new().factor(a)?.solve(b)
}

fn check_square(what: &'static str, rows: usize, cols: usize) -> Result<()> {
    if rows == cols {
        Ok(())
    } else {
        Err(Error::NotSquare { what, rows, cols })
    }
}

fn non_finite<T: Scalar>(
    what: &'static str,
    m: MatRef<'_, T>,
    rows_from: impl Fn(usize) -> usize,
) -> Result<()> {
    for j in 0..m.ncols() {
        for i in rows_from(j)..m.nrows() {
            let value = m[(i, j)];
            if !value.finite() {
                let z = value.to_c64();
                return Err(Error::NonFinite {
                    what,
                    row: i,
                    col: j,
                    value: if z.re.is_finite() { z.im } else { z.re },
                });
            }
        }
    }
    Ok(())
}

/// The first non-finite entry of the lower triangle (the part a factorisation reads), and for a
/// complex matrix the first diagonal entry that is not real.
pub(crate) fn check_finite_lower<T: Scalar>(what: &'static str, m: MatRef<'_, T>) -> Result<()> {
    non_finite(what, m, |j| j)?;
    if T::PRECISION.is_complex() {
        for index in 0..m.nrows().min(m.ncols()) {
            let imag = m[(index, index)].to_c64().im;
            if imag != 0.0 {
                return Err(Error::NotHermitian { what, index, imag });
            }
        }
    }
    Ok(())
}

pub(crate) fn check_finite<T: Scalar>(what: &'static str, m: MatRef<'_, T>) -> Result<()> {
    non_finite(what, m, |_| 0)
}
