//! The Cholesky factorisation and solve of symmetric positive definite matrices.
//!
//! Only the lower triangle of A is read (as LAPACK's `uplo = 'L'`); the factor L overwrites it and
//! the strict upper triangle is left as it was. An `n = 0` matrix is valid: it factors into an
//! empty factor, and solving with it returns an empty (0 x k) solution, as LAPACK's quick return
//! does.

use std::sync::Arc;

use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::Tail;
use hetla_kernels::{KernelError, Op, Par, Precision, Scalar, real_diagonal};
use hetla_runtime::{HostMemory, Platform, RunOptions, SchedulerKind, Trace, WriteBack};

use crate::check::{check_finite, check_hermitian_lower, check_output_shape, check_square};
use crate::condition;
use crate::copy::{copy, copy_par, mirror_lower};
use crate::interop::{Matrix, MatrixMut, column_major};
use crate::plan::{
    Algorithm, Build, Plan, SINGLE_TILE_UP_TO, TileChoice, choose_tile, default_tile_size,
};
use crate::run::{RunConfig, direct, tuned_if};
use crate::tiles::{Matrices, Storage, TileMajor, TileStore, TiledMatrix, mat_from_slice};
use crate::{Error, Result};
use work::MIN_PANEL_SOLVES;

pub(crate) mod batch;
mod device;
#[cfg(feature = "mpi")]
mod distributed;
pub(crate) mod plan;
pub(crate) mod room;
mod update;
pub(crate) mod work;

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
    pub(crate) run: RunConfig,
    pub(crate) tile: Option<usize>,
    tail: Option<Tail>,
    storage: Storage,
    host_memory: HostMemory,
    resident: Option<usize>,
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

    /// The tiles from row and column `tail.from` on of the smaller side `tail.tile` ([`Tail`]: a
    /// smaller tile on the critical path of the factorisation's end, where few tasks are left
    /// beside it); the tile given with [`Cholesky::tile`] before it, which a tail needs. Such a
    /// plan runs in place ([`Storage::TileMajor`] is refused). Errors at factorisation time: no
    /// tile given, or a tail that does not fit
    /// ([`Tiling::with_tail`](hetla_factorizations::Tiling)). Without it, a platform with devices
    /// may choose one ([`TileChoice::tail`]).
    pub fn tail(mut self, tail: Tail) -> Self {
        self.tail = Some(tail);
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

    /// How the tiles meet a GPU's copies ([`HostMemory`]; default [`HostMemory::Staged`]): packed
    /// by CPU cores into page-locked staging buffers, or the tiles' own memory (the tile-major
    /// copy, or the caller's matrix in place) page-locked for the run and copied straight by the
    /// GPU's DMA engines. Nothing changes on a platform without a GPU.
    pub fn host_memory(mut self, host_memory: HostMemory) -> Self {
        self.host_memory = host_memory;
        self
    }

    /// Factors as a call on a matrix already in the memory of GPU `gpu` (0: the platform's first)
    /// is timed: every tile is placed on that GPU before the run's clock starts, and L stays there
    /// until it stops ([`hetla_runtime::WriteBack::Resident`]); the copies in and out are made (L
    /// is in the caller's matrix afterwards, as always) but not timed, as cuSOLVER's resident call
    /// is not. The trace's makespan is then the time of the factorisation on the device. A platform
    /// without that GPU is an error before any work. (A matrix in a GPU's memory with no host copy
    /// at all: [`Cholesky::factor_device`].)
    pub fn resident(mut self, gpu: usize) -> Self {
        self.resident = Some(gpu);
        self
    }

    crate::run::run_options!();
    crate::run::tuned_for!(crate::Family::Cholesky);

    crate::run::progress_timeout!();
    crate::run::tensor_math!();

    /// The tile size used for a matrix of order `n`: the one given, else the one the platform's
    /// performance models predict fastest (see [`Cholesky::plan`]; the first call for a new size
    /// may time the kernels on the candidate tiles), else the default: the whole matrix up to order
    /// 512, beyond it 512 for faer and 1024 for OpenBLAS in a real precision, 384 and 768 in a
    /// complex one (capped at n).
    pub fn tile_size_for(&self, n: usize) -> usize {
        self.tile_size_in(n, Precision::D)
    }

    /// [`Cholesky::tile_size_for`] a matrix in `precision` (on a platform with devices, other
    /// precisions than f64 take the given tile or the default).
    pub fn tile_size_in(&self, n: usize, precision: Precision) -> usize {
        match self.resolve_platform() {
            Ok(platform) => self.tile_and_choice(&platform, n, precision).map_or_else(
                |_| default_tile_size(n, platform.backend(), precision),
                |c| c.0,
            ),
            Err(_) => self
                .tile
                .unwrap_or_else(|| default_tile_size(n, self.run.backend, precision)),
        }
    }

    /// The plan of the factorisation of an `n x n` matrix in `precision` on this builder's
    /// platform: its graph, kernels, bytes and flops, and its tile: the one given, else the one
    /// `hetla tune` saved on this machine near order `n` (with its clusters, as every call of a
    /// builder whose user set nothing takes), else the one the platform's performance models
    /// predict fastest in `precision` (timing first the candidates they lack, see [`TileChoice`];
    /// on a platform with devices only in f64), else the default of [`Cholesky::tile_size_for`].
    /// Matrices up to 512 are one tile. [`Cholesky::factor_planned`] runs it.
    pub fn plan(&self, n: usize, precision: Precision) -> Result<Plan> {
        let this = self.tuned_for(n, precision);
        let platform = this.resolve_platform()?;
        let (tile, choice) = this.tile_and_choice(&platform, n, precision)?;
        this.plan_of(&platform, n, (tile, choice), precision)
    }

    /// The plan of order `n` in `precision` on `platform` in tiles of `tile` as `choice` chose it,
    /// with the tail given ([`Cholesky::tail`]) or chosen ([`TileChoice::tail`]).
    fn plan_of(
        &self,
        platform: &Platform,
        n: usize,
        (tile, choice): (usize, Option<TileChoice>),
        precision: Precision,
    ) -> Result<Plan> {
        let tail = self.tail.or(choice.as_ref().and_then(|c| c.tail));
        if let (Some(tail), None) = (self.tail, self.tile) {
            return Err(Error::InvalidOption {
                option: "tail",
                reason: format!(
                    "a tail ({tail}) follows tiles of a given side: give the tile too (Cholesky::tile, --tile)"
                ),
            });
        }
        let mut plan = plan_on(platform)(n, tile, precision)?;
        plan.choice = choice;
        match tail {
            Some(tail) => plan.with_tail(tail),
            None => Ok(plan),
        }
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
            let choice = choose_tile(platform, n, precision, plan_on(platform))?;
            return Ok((choice.tile, Some(choice)));
        }
        Ok((default_tile_size(n, platform.backend(), precision), None))
    }

    /// Factors a copy of `a` (left unchanged) and returns the factor. Any precision: `f32`, `f64`,
    /// or complex Hermitian [`c32`](crate::c32) and [`c64`](crate::c64); any [`Matrix`] (faer's,
    /// ndarray's, nalgebra's), read where it lies and copied once into the factor.
    pub fn factor<A: Matrix>(&self, a: A) -> Result<Factor<A::Elem>> {
        let a = a.view();
        check_square("A", a.nrows(), a.ncols())?;
        let mut l = Mat::zeros(a.nrows(), a.ncols());
        let (this, platform) = self.tuned_platform::<A::Elem>(a.nrows())?;
        let (tile, norm) = this.factor_direct_or_tiled(&platform, l.as_mut(), Some(a))?;
        Ok(self.made(l, tile, norm, platform, this.run.scheduler))
    }

    /// Factors `a` (left unchanged) into `out` (of the same shape, any strides): `out` receives A
    /// whole, then L in its lower triangle, as a copy then [`Cholesky::factor_in_place`] would
    /// leave it, but with A read once, straight into the run's tiles (a copy first costs a pass
    /// over the matrix each way, and the faults of a fresh `out` twice).
    pub fn factor_into<T: Scalar>(&self, a: MatRef<'_, T>, out: MatMut<'_, T>) -> Result<()> {
        check_square("A", a.nrows(), a.ncols())?;
        check_output_shape("the output", out.shape(), a.shape())?;
        let (this, platform) = self.tuned_platform::<T>(a.nrows())?;
        this.factor_direct_or_tiled(&platform, out, Some(a))
            .map(|_| ())
    }

    /// The factor `l` (of tiles of `tile`, ||A||_1 = `norm`) a run of this builder made on
    /// `platform` with `scheduler`, keeping what its inverse needs of the builder's options.
    fn made<T: Scalar>(
        &self,
        l: Mat<T>,
        tile: usize,
        norm: f64,
        platform: Arc<Platform>,
        scheduler: SchedulerKind,
    ) -> Factor<T> {
        Factor {
            l,
            tile,
            norm: Some(norm),
            platform,
            scheduler,
            untouched: self.run.untouched(self.tile.is_some()),
            host_memory: self.host_memory,
        }
    }

    /// This builder with the tuned defaults for order `n` in `T`'s precision where its user set
    /// none, and its platform.
    fn tuned_platform<T: Scalar>(
        &self,
        n: usize,
    ) -> Result<(std::borrow::Cow<'_, Self>, Arc<Platform>)> {
        let this = self.tuned_for(n, T::PRECISION);
        let platform = this.resolve_platform()?;
        Ok((this, platform))
    }

    /// Factors `a` in place, taking ownership: no copy of the matrix is made.
    pub fn factor_owned<T: Scalar>(&self, mut a: Mat<T>) -> Result<Factor<T>> {
        let (this, platform) = self.tuned_platform::<T>(a.nrows())?;
        let (tile, norm) = this.factor_direct_or_tiled(&platform, a.as_mut(), None)?;
        Ok(self.made(a, tile, norm, platform, this.run.scheduler))
    }

    /// Factors `a` in place: on success its lower triangle holds L (its strict upper triangle is
    /// untouched). On error the lower triangle is partly overwritten. Any strides: a matrix whose
    /// columns are not contiguous (a C-ordered ndarray) goes through the tile-major copy (as every
    /// matrix does by default, [`Storage::Auto`]) or, in place or as one tile, through a
    /// column-major copy written back.
    pub fn factor_in_place<A: MatrixMut>(&self, mut a: A) -> Result<()> {
        let a = a.view_mut();
        let (this, platform) = self.tuned_platform::<A::Elem>(a.nrows())?;
        this.factor_direct_or_tiled(&platform, a, None).map(|_| ())
    }

    /// A matrix of one tile goes straight to the kernel (see [`direct`]); any other through its
    /// plan and the runtime. The matrix is read from `from` where given (and `a` receives it whole,
    /// then the factor), else from `a`. Returns the tile size and ||A||_1.
    fn factor_direct_or_tiled<T: Scalar>(
        &self,
        platform: &Arc<Platform>,
        mut a: MatMut<'_, T>,
        from: Option<MatRef<'_, T>>,
    ) -> Result<(usize, f64)> {
        check_square("A", a.nrows(), a.ncols())?;
        let n = a.nrows();
        let (tile, choice) = self.tile_and_choice(platform, n, T::PRECISION)?;
        // A resident factorisation always runs on its GPU, through the runtime; a tail is refused
        // by its plan.
        if tile >= n && self.resident.is_none() && self.tail.is_none() {
            if let Some(from) = from {
                copy(from, a.as_mut());
            }
            let norm = check_hermitian_lower("A", a.as_ref())?;
            real_diagonal(a.as_mut());
            let flops = (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor();
            let done = column_major(a.as_mut(), |mut a| {
                Ok(direct(platform, flops, |backend, par| {
                    backend.potrf(a.as_mut(), par)
                }))
            })?;
            if let Some(result) = done {
                return result.map(|()| (tile, norm)).map_err(factor_error);
            }
        }
        let plan = self.plan_of(platform, n, (tile, choice), T::PRECISION)?;
        self.factor_on(platform, &plan, a, from)
            .map(|(_, norm)| (tile, norm))
    }

    /// As [`Cholesky::factor_owned`], always through the runtime (also for a matrix of one tile),
    /// and the trace of the run beside the factor.
    pub fn factor_owned_traced<T: Scalar>(&self, a: Mat<T>) -> Result<(Factor<T>, Trace)> {
        check_square("A", a.nrows(), a.ncols())?;
        let plan = self.plan(a.nrows(), T::PRECISION)?;
        self.factor_owned_planned(&plan, a)
    }

    /// As [`Cholesky::factor_owned_traced`], by `plan` (a Cholesky factorisation of `a`'s order in
    /// `a`'s precision), so that the trace is the plan's tasks (`hetla calibrate` pairs them).
    pub(crate) fn factor_owned_planned<T: Scalar>(
        &self,
        plan: &Plan,
        mut a: Mat<T>,
    ) -> Result<(Factor<T>, Trace)> {
        let platform = self.resolve_platform()?;
        let (trace, norm) = self.factor_on(&platform, plan, a.as_mut(), None)?;
        let factor = self.made(a, plan.tile(), norm, platform, self.run.scheduler);
        Ok((factor, trace))
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
        let this = self.tuned_for(a.nrows(), T::PRECISION);
        let platform = this.resolve_platform()?;
        this.factor_on(&platform, plan, a, None)
            .map(|(trace, _)| trace)
    }

    /// Factors in place an `n x n` column-major matrix stored in `data` with leading dimension `ld`
    /// (>= n), as LAPACK's ?potrf does.
    pub fn factor_slice<T: Scalar>(&self, data: &mut [T], n: usize, ld: usize) -> Result<()> {
        self.factor_in_place(mat_from_slice(data, n, n, ld, "A")?)
    }

    /// Factors the square `a` (or `from` into `a`, see [`run_on_lower`]) by `plan` through its task
    /// graph and the runtime; returns the trace and ||A||_1 (from the input check).
    fn factor_on<T: Scalar>(
        &self,
        platform: &Platform,
        plan: &Plan,
        mut a: MatMut<'_, T>,
        from: Option<MatRef<'_, T>>,
    ) -> Result<(Trace, f64)> {
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
        check_storage(plan, self.storage)?;
        let placement = match self.resident {
            Some(gpu) => plan.resident_placement(platform, gpu)?,
            None => Vec::new(),
        };
        // With a device the check runs beside the run, from its first uploads (nothing writes
        // host memory before it ends); on the cores alone it would only take them from the run.
        // SAFETY: a view of `a`'s lower triangle read by the check beside the run, which nothing
        // writes until the check has returned (`execute_checked`'s gate) and which the check drops
        // when it returns; `real_diagonal` below writes only imaginary parts of the diagonal, which
        // the check does not read, before the run and the check start.
        let beside = (!platform.devices().is_empty()).then(|| {
            from.unwrap_or_else(|| unsafe {
                MatRef::from_raw_parts(
                    a.as_ptr(),
                    a.nrows(),
                    a.ncols(),
                    a.row_stride(),
                    a.col_stride(),
                )
            })
        });
        let norm = match beside {
            Some(_) => None,
            None => Some(check_hermitian_lower("A", from.unwrap_or(a.as_ref()))?),
        };
        if from.is_none() {
            real_diagonal(a.as_mut());
        }
        let options = RunOptions {
            scheduler: self.run.scheduler,
            host_memory: self.host_memory,
            tensor_math: self.run.tensor_math,
            write_back: match self.resident {
                Some(_) => WriteBack::Resident,
                None => WriteBack::default(),
            },
            placement,
            ..RunOptions::default()
        };
        run_on_lower(
            platform,
            plan,
            a,
            from,
            self.storage,
            &options,
            |store| match (beside, norm) {
                (Some(input), _) => work::execute_checked(plan, platform, store, &options, || {
                    check_hermitian_lower("A", input)
                }),
                (None, norm) => work::execute(plan, platform, store, &options)
                    .map(|t| (t, norm.unwrap_or_default())),
            },
        )
    }
}

/// The constructor of Cholesky plans for `platform`: with a panel inverse for each panel of
/// [`MIN_PANEL_SOLVES`] solves or more where its backend solves faster through the inverse and no
/// device runs the panels ([`work`](self::work)), else the plain one.
fn plan_on(platform: &Platform) -> Build {
    if platform.backend().solves_by_inverse() && platform.devices().is_empty() {
        |n, tile, precision| plan::inverting_panels(n, tile, precision, MIN_PANEL_SOLVES)
    } else {
        plan::factor
    }
}

/// An error when `storage` is a tile-major copy, which holds tiles of one size, and `plan` ends in
/// a tail of smaller ones.
fn check_storage(plan: &Plan, storage: Storage) -> Result<()> {
    match (plan.tail(), storage) {
        (Some(tail), Storage::TileMajor) => Err(Error::InvalidOption {
            option: "storage",
            reason: format!(
                "a tile-major copy holds tiles of one size, and this plan ends in {tail}: give \
                 storage in-place or auto (in place for such a plan)"
            ),
        }),
        _ => Ok(()),
    }
}

/// Runs `plan`, whose one matrix is the lower triangle of `a` (a factorisation, or the inverse from
/// a factor), over the tiles `storage` says: a tile-major copy written back (also after a failure:
/// the caller sees what the run left, as in place), or `a` itself in column-major storage. With
/// `from`, the matrix is read from there (its diagonal made real in the copy) and `a` receives it
/// whole, then what the run wrote: into the tiles straight from `from` when they are tile-major.
/// `execute` runs the plan over the store (with its options) and returns what it gives.
fn run_on_lower<T: Scalar, R>(
    platform: &Platform,
    plan: &Plan,
    mut a: MatMut<'_, T>,
    from: Option<MatRef<'_, T>>,
    storage: Storage,
    options: &RunOptions,
    execute: impl FnOnce(&dyn TileStore<T>) -> Result<(Trace, R)>,
) -> Result<(Trace, R)> {
    match plan.storage::<T>(platform, storage) {
        Storage::TileMajor => {
            let source = from.unwrap_or(a.as_ref());
            let (mut tiles, lock, fresh) =
                TileMajor::lower_kept(platform, source, plan.tile(), options.host_memory)?;
            if from.is_some() {
                tiles.real_diagonal();
            }
            let mut run = execute(&tiles);
            if let (Ok((trace, _)), Some(lock), true) = (&mut run, &lock, fresh) {
                TileMajor::<T>::count_lock(trace, lock);
            }
            if let Some(from) = from {
                // The strict upper triangle, column by column of the transposes.
                copy_par(from.transpose(), a.as_mut().transpose_mut(), |j| j + 1);
            }
            tiles.copy_out(a);
            tiles.keep(platform, lock);
            run
        }
        _ => {
            if let Some(from) = from {
                copy(from, a.as_mut());
                real_diagonal(a.as_mut());
            }
            column_major(a, |a| {
                let tiling = plan.tiling(hetla_factorizations::FACTOR).copied();
                let a = match tiling {
                    Some(tiling) => TiledMatrix::with_tiling(a, tiling, "A")?,
                    None => TiledMatrix::new(a, plan.tile(), "A")?,
                };
                execute(&Matrices(&[&a]))
            })
        }
    }
}

/// A Cholesky factor A = L L^H (L L^T for a real type), ready to solve systems, and what can be
/// read from it: [`Factor::log_det`], [`Factor::rcond`], [`Factor::inverse`], L itself, and rank-k
/// changes of A ([`Factor::update`], [`Factor::downdate`]).
///
/// ```
/// use faer::Mat;
/// let a = Mat::from_fn(3, 3, |i, j| if i == j { 4.0 } else { 1.0 });
/// let mut factor = hetla::Cholesky::new().factor(a.as_ref())?;
/// // det A = 54: 4^3 + 2 - 3 * 4.
/// assert!((factor.log_det() - 54f64.ln()).abs() < 1e-14);
/// assert!(factor.rcond()? > 0.3);
/// // A + w w^T, refactored in O(n^2).
/// factor.update(Mat::from_fn(3, 1, |i, _| i as f64).as_ref())?;
/// let x = factor.solve(Mat::<f64>::ones(3, 1).as_ref())?;
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Clone)]
pub struct Factor<T: Scalar = f64> {
    l: Mat<T>,
    tile: usize,
    /// ||A||_1 from the input check; `None` after an update or downdate (then estimated).
    norm: Option<f64>,
    platform: Arc<Platform>,
    scheduler: SchedulerKind,
    /// Whether the factor's builder set nothing ([`RunConfig::untouched`]): then the inverse takes
    /// the tile and scheduler tuned for it on this machine.
    untouched: bool,
    /// How the builder's runs met a GPU's copies: the inverse's run meets them the same way (and
    /// keeps the page lock of the platform's tile-major buffer for the next factorisation).
    host_memory: HostMemory,
}

impl<T: Scalar> Factor<T> {
    /// The factor in another precision, each entry of L converted by `convert` (GMRES-IR's
    /// preconditioner: a low factor widened).
    pub(crate) fn converted<W: Scalar>(&self, convert: impl Fn(T) -> W) -> Factor<W> {
        let l = &self.l;
        Factor {
            l: Mat::from_fn(l.nrows(), l.ncols(), |i, j| convert(l[(i, j)])),
            tile: self.tile,
            norm: self.norm,
            platform: self.platform.clone(),
            scheduler: self.scheduler,
            untouched: self.untouched,
            host_memory: self.host_memory,
        }
    }
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

    /// L as a lower triangular matrix (zeros above the diagonal), copied; [`Factor::into_l`] gives
    /// it without a copy.
    pub fn l(&self) -> Mat<T> {
        Mat::from_fn(self.n(), self.n(), |i, j| {
            if i >= j {
                self.l[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        })
    }

    /// L as a lower triangular matrix, taking the factor apart: its storage with the strict upper
    /// triangle set to zero (no copy).
    pub fn into_l(self) -> Mat<T> {
        let mut l = self.l;
        let zero = T::from_f64(0.0);
        for j in 1..l.ncols() {
            l.col_as_slice_mut(j)[..j].fill(zero);
        }
        l
    }

    /// A^-1, Hermitian (symmetric for a real type), both triangles filled: LAPACK's ?potri on the
    /// runtime, as Chameleon's: a tiled TRTRI (L <- L^-1) then a tiled LAUUM (L^-H L^-1), 2 n^3 / 3
    /// flops in one task graph over the platform's clusters and GPUs (every step has a GPU kernel:
    /// cuSOLVER's TRTRI, cuBLAS for the rest), into a new matrix (the factor is not changed); a
    /// factor of one tile runs the two kernels directly. [`Factor::inverse_into`] writes it into
    /// the caller's matrix instead.
    ///
    /// Solving with the factor is cheaper and more accurate than multiplying by the inverse; take
    /// the inverse when its entries are what is wanted (a covariance from a precision matrix).
    pub fn inverse(&self) -> Result<Mat<T>> {
        self.inverse_traced().map(|(inv, _)| inv)
    }

    /// [`Factor::inverse`] and the trace of its task graph's run (`None` for a factor of one tile,
    /// whose two kernels run directly): what calibrations and tuners time the inverse's kernels by.
    pub fn inverse_traced(&self) -> Result<(Mat<T>, Option<Trace>)> {
        let mut inv = Mat::zeros(self.n(), self.n());
        let trace = self.inverse_into(inv.as_mut())?;
        Ok((inv, trace))
    }

    /// [`Factor::inverse`] into `out` (n x n, any strides), both triangles, with the trace of its
    /// run (`None` for a factor of one tile): no matrix is allocated for the result, so a caller
    /// that inverts again and again reuses one (a fresh n x n matrix costs its page faults, which
    /// on some machines took longer than the inverse itself). A wrong shape is refused before any
    /// work; on an error `out` holds no inverse.
    pub fn inverse_into(&self, mut out: MatMut<'_, T>) -> Result<Option<Trace>> {
        let n = self.n();
        check_output_shape("the inverse's output", out.shape(), (n, n))?;
        let (tile, scheduler) = self.inverse_configuration();
        if tile >= n {
            let flops = 2.0 * (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor();
            copy_par(self.l.as_ref(), out.as_mut(), |j| j);
            let done = direct(&self.platform, flops, |backend, par| {
                backend.run(Op::Trtri, &[], out.as_mut(), par)?;
                backend.run(Op::Lauum, &[], out.as_mut(), par)
            });
            if let Some(result) = done {
                result.map_err(Error::Kernel)?;
                mirror_lower(out);
                return Ok(None);
            }
        }
        self.tiled_inverse(tile.min(n.max(1)), scheduler, out)
            .map(Some)
    }

    /// The tile and scheduler of the inverse's run: those `hetla tune --factorization inverse`
    /// saved on this machine for the order when the factor's builder set nothing (the inverse's
    /// graph, TRTRI and LAUUM, runs best on other tiles than the factorisation's: on a 2-core Xeon
    /// at n = 4096, 768 against 384), else the factor's own. The clusters are the factor's (its
    /// platform).
    fn inverse_configuration(&self) -> (usize, SchedulerKind) {
        let n = self.n();
        let backend = self.platform.backend();
        match tuned_if(
            self.untouched,
            backend,
            crate::Family::Inverse,
            n,
            T::PRECISION,
        ) {
            Some(tuned) => (tuned.tile, tuned.scheduler),
            None => (self.tile, self.scheduler),
        }
    }

    /// A^-1 into `out` by the inverse's plan in tiles of `tile`, both triangles: read from L into a
    /// tile-major copy and written into `out` when the copy fits (L is not copied first), else on
    /// `out` holding a copy of L's lower triangle whose upper triangle is then mirrored from the
    /// lower one. The run meets a GPU's copies as the factor's builder said (`host_memory`).
    fn tiled_inverse(
        &self,
        tile: usize,
        scheduler: SchedulerKind,
        mut out: MatMut<'_, T>,
    ) -> Result<Trace> {
        let n = self.n();
        let plan = Plan::new(crate::Algorithm::CholeskyInverse { n }, tile, T::PRECISION)?;
        let options = RunOptions {
            scheduler,
            host_memory: self.host_memory,
            ..RunOptions::default()
        };
        match Storage::Auto.resolve::<T>(n, tile) {
            Storage::TileMajor => {
                let platform = &self.platform;
                let (tiles, lock, fresh) =
                    TileMajor::lower_kept(platform, self.l.as_ref(), tile, options.host_memory)?;
                let run = plan.execute(platform, &tiles, &options);
                if run.is_ok() {
                    tiles.copy_out_hermitian(out);
                }
                let run = run.map(|mut trace| {
                    if let (true, Some(lock)) = (fresh, &lock) {
                        TileMajor::<T>::count_lock(&mut trace, lock);
                    }
                    trace
                });
                tiles.keep(platform, lock);
                run
            }
            storage => {
                copy_par(self.l.as_ref(), out.as_mut(), |j| j);
                let execute = |store: &dyn TileStore<T>| {
                    work::execute(&plan, &self.platform, store, &options).map(|t| (t, ()))
                };
                let (trace, ()) = run_on_lower(
                    &self.platform,
                    &plan,
                    out.as_mut(),
                    None,
                    storage,
                    &options,
                    execute,
                )?;
                mirror_lower(out);
                Ok(trace)
            }
        }
    }

    /// ln det A = 2 sum ln L_kk (real also for a complex Hermitian A). It neither overflows nor
    /// underflows where det A itself would; an `n = 0` matrix has ln det = 0.
    pub fn log_det(&self) -> f64 {
        2.0 * (0..self.n())
            .map(|k| self.l[(k, k)].re_f64().ln())
            .sum::<f64>()
    }

    /// det A, when it is a normal `f64`: a factor of order 1000 with L_kk = 0.1 has det A =
    /// 1e-2000, which [`Error::DeterminantOutOfRange`] reports with its logarithm (use
    /// [`Factor::log_det`]).
    pub fn det(&self) -> Result<f64> {
        let log_det = self.log_det();
        let det = log_det.exp();
        if det.is_normal() {
            Ok(det)
        } else {
            Err(Error::DeterminantOutOfRange { log_det })
        }
    }

    /// ||A||_1 of the factored matrix: exact (taken from the input while it was checked) until an
    /// [`Factor::update`] or [`Factor::downdate`] changes A, then estimated from L L^H by Hager's
    /// method (usually exact, never more than the true norm) at each call.
    pub fn norm1(&self) -> Result<f64> {
        match self.norm {
            Some(norm) => Ok(norm),
            None => condition::estimate_norm1(self.n(), |x, _| {
                condition::apply_product(self.l.as_ref(), x);
                Ok(())
            }),
        }
    }

    /// The reciprocal condition number 1 / (||A||_1 ||A^-1||_1), with ||A^-1||_1 estimated as
    /// LAPACK's ?pocon does (Hager's method as refined by Higham, ?lacn2: about five solves with
    /// the factor, each O(n^2)): close to the true one, which it never exceeds by more than a small
    /// factor. 1 for `n = 0`, 0 for A = 0. A value near the precision's epsilon means solves with A
    /// lose all their digits.
    pub fn rcond(&self) -> Result<f64> {
        let n = self.n();
        if n == 0 {
            return Ok(1.0);
        }
        let norm = self.norm1()?;
        if norm == 0.0 {
            return Ok(0.0);
        }
        let inverse = condition::estimate_norm1(n, |x, _| self.solve_in_place(x))?;
        Ok(condition::reciprocal(inverse, norm))
    }

    /// Solves A X = B for one or many right-hand sides (the columns of `b`, any [`Matrix`]): X is a
    /// new matrix of `b`'s kind (column-major).
    pub fn solve<B: Matrix<Elem = T>>(&self, b: B) -> Result<B::Owned> {
        crate::interop::solved(b, self.n(), |x| self.solve_in_place(x))
    }

    /// Solves A X = B in place: `b` is overwritten with X. A factor of one tile solves with two
    /// kernel calls and allocates nothing; a tiled one allocates its solve graph (O(t^2 k) tasks
    /// for t tile rows and k tile columns of B) and no copy of B, unless B's columns are not
    /// contiguous (a C-ordered ndarray): then it solves in a column-major copy written back.
    pub fn solve_in_place<B: MatrixMut<Elem = T>>(&self, mut b: B) -> Result<()> {
        column_major(b.view_mut(), |b| self.solve_column_major(b))
    }

    fn solve_column_major(&self, b: MatMut<'_, T>) -> Result<()> {
        crate::check::check_rows(self.n(), b.nrows())?;
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
        let plan = Plan::new(
            crate::Algorithm::CholeskySolve {
                n: self.n(),
                rhs: b.ncols(),
            },
            self.tile,
            T::PRECISION,
        )?;
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

/// Solves the SPD (complex: Hermitian positive definite) system A X = B with default options (A's
/// lower triangle is read), in the precision of A and B. Any [`Matrix`] (faer's, ndarray's,
/// nalgebra's); X comes back in `b`'s kind of matrix.
pub fn solve_spd<A: Matrix, B: Matrix<Elem = A::Elem>>(a: A, b: B) -> Result<B::Owned> {
    // `solve` checks the same, but only after the O(n^3) factorisation: fail first.
    let (av, bv) = (a.view(), b.view());
    crate::check::check_system("A", (av.nrows(), av.ncols()), bv.nrows())?;
    Cholesky::new().factor(av)?.solve(b)
}

/// A factorisation kernel's error as the library reports it (a failed pivot names its column).
fn factor_error(e: KernelError) -> Error {
    match e {
        KernelError::NotPositiveDefinite { index } => Error::NotPositiveDefinite { column: index },
        other => Error::Kernel(other),
    }
}

/// The reciprocal condition estimate of A = L L^H from its Cholesky factor (the lower triangle of
/// `l`, n x n) and ||A||_1 (LAPACK's ?pocon): 1 / (||A||_1 ||A^-1||_1), ||A^-1||_1 estimated by the
/// same steps as [`Factor::rcond`]'s, for factors made elsewhere (a batch's, a caller's). 1 for n =
/// 0; 0 when `norm1` is 0 or L has a zero on its diagonal.
pub fn cholesky_rcond<T: Scalar>(l: MatRef<'_, T>, norm1: f64) -> Result<f64> {
    let n = l.nrows();
    check_square("L", n, l.ncols())?;
    if !(norm1.is_finite() && norm1 >= 0.0) {
        return Err(crate::Error::InvalidOption {
            option: "norm1",
            reason: format!("||A||_1 must be a finite number >= 0, got {norm1}"),
        });
    }
    if n == 0 {
        return Ok(1.0);
    }
    if norm1 == 0.0 || (0..n).any(|k| l[(k, k)] == T::from_f64(0.0)) {
        return Ok(0.0);
    }
    check_finite("L", l)?;
    let inverse = condition::estimate_norm1(n, |mut x, _| {
        use faer::linalg::triangular_solve::{
            solve_lower_triangular_in_place, solve_upper_triangular_in_place,
        };
        solve_lower_triangular_in_place(l, x.as_mut(), Par::Seq);
        solve_upper_triangular_in_place(l.adjoint(), x, Par::Seq);
        Ok(())
    })?;
    Ok(condition::reciprocal(inverse, norm1))
}
