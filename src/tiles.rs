//! Where a run's kernels find their tiles: the one module whose code reasons about views of a
//! matrix that several threads hold at once.
//!
//! A [`TileStore`] hands out a view of each tile of a run, read-only or writable; a writable one
//! only through an `unsafe` method whose contract is that no other view of that tile is used
//! meanwhile. Two stores implement it:
//!
//! - [`TiledMatrix`]: a caller's column-major matrix seen as b x b tiles (the last row and column
//!   ragged), without a copy, so that a factorisation runs in place exactly like LAPACK's; a run
//!   over several matrices indexes them by `MatrixId` ([`Matrices`]);
//! - [`TileMajor`]: a copy of a square matrix's lower triangle with every tile contiguous (module
//!   `major`), which a factorisation may run on instead of the caller's storage ([`Storage`]);
//! - [`TileSet`] (feature `mpi`): the tiles a rank holds, each stored apart, with the tiles other
//!   ranks send it.
//!
//! [`TileWork`] runs a task graph over a store: it is the runtime's [`Workload`], and the place
//! where the task graph's edges are what makes a writable view exclusive (the runtime runs a task
//! only once every earlier task touching its tiles has ended, and no later one starts before it
//! ends). A family whose tasks need more than their tiles wraps it with its side data, in its own
//! module (LU's interchanges in `lu::work`, QR's T factors in `qr::work`), and takes the store's
//! views under the same contract. The store names no algorithm.

use std::marker::PhantomData;

use faer::{MatMut, MatRef};
use hetla_factorizations::{Access, Mode, Task, TaskGraph, TaskId, TileRef, Tiling};
use hetla_kernels::{AnyMut, AnyRef, Backend, HostRange, KernelError, Par, Scalar};
use hetla_runtime::{DeviceHome, KernelKey, Workload};

use crate::{Error, Result};

pub(crate) mod device;
mod major;

pub(crate) use major::TileMajor;

/// Where a factorisation's kernels find the matrix's tiles: in the caller's storage, or in a
/// tile-major copy made for the run (every tile contiguous, in huge pages where the system offers
/// them; copied in and back in parallel, at the cost of a pass over the triangle each way and of
/// half the matrix's memory, which the platform keeps for its next factorisation of a like size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// Tile-major when the copy fits in the memory available, else in place: the copy won most
    /// pairs measured on a 2-core AVX-512 machine (2x on one 2-core cluster with faer, 8-11% at n =
    /// 8192) and lost 1-5% in two (docs/cpu-performance.md). On a platform with a device
    ///       ([`Storage::resolve_on`]) in place, with or without CPU clusters beside it: the GPU's
    ///       uploads pack or DMA tiles of any stride, and it runs nearly every flop (an H100 runs
    ///       50 Tflop/s beside 16 cores' 0.5), so the copy's gain on the clusters' few kernels is
    ///       lost many times over by its pass each way before and after the run (on an H200, n =
    ///       16384 GPU-only: 0.289 s in place, 0.348 s through the copy; about 0.4 s of copies at
    ///       32768).
    #[default]
    Auto,
    /// The caller's column-major storage, tiles as views into it (no copy).
    InPlace,
    /// A tile-major copy (an error when it does not fit in memory).
    TileMajor,
}

impl Storage {
    /// The name the CLI and its reports use.
    pub fn name(self) -> &'static str {
        match self {
            Storage::Auto => "auto",
            Storage::InPlace => "in-place",
            Storage::TileMajor => "tile-major",
        }
    }

    /// What this storage is for a tiled square matrix of `T` of order `n` in tiles of `tile`:
    /// [`Storage::InPlace`] or [`Storage::TileMajor`].
    pub fn resolve<T: Scalar>(self, n: usize, tile: usize) -> Storage {
        match self {
            Storage::Auto if major::fits::<T>(n, tile) => Storage::TileMajor,
            Storage::Auto => Storage::InPlace,
            other => other,
        }
    }
}

impl Storage {
    /// What this storage is for a run on `platform` (see [`Storage::Auto`]).
    pub fn resolve_on<T: Scalar>(
        self,
        platform: &crate::Platform,
        n: usize,
        tile: usize,
    ) -> Storage {
        match self {
            Storage::Auto if !platform.devices().is_empty() || platform.clusters().is_empty() => {
                Storage::InPlace
            }
            other => other.resolve::<T>(n, tile),
        }
    }
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Storage {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [Storage::Auto, Storage::InPlace, Storage::TileMajor]
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| format!("unknown storage '{s}': expected auto, in-place or tile-major"))
    }
}

/// The tiles of a run, by [`TileRef`] (see the module documentation).
pub(crate) trait TileStore<T: Scalar>: Sync {
    /// A read-only view of `tile`, where the store holds it.
    fn tile(&self, tile: TileRef) -> Option<MatRef<'_, T>>;

    /// A writable view of `tile` (`None` where the store holds none, or only a read-only one).
    ///
    /// # Safety
    /// No other view of the tile (read or write) may be used while the returned one lives.
    unsafe fn tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>>;

    /// The view of `tile` that task `task` uses (the store's one view of it, unless the store holds
    /// several versions of the tile: see [`TileSet`]).
    fn task_tile(&self, task: TaskId, tile: TileRef) -> Option<MatRef<'_, T>> {
        let _ = task;
        self.tile(tile)
    }

    /// The writable view of `tile` that task `task` uses (see [`TileStore::task_tile`]).
    ///
    /// # Safety
    /// As [`TileStore::tile_mut`]'s.
    unsafe fn task_tile_mut(&self, task: TaskId, tile: TileRef) -> Option<MatMut<'_, T>> {
        let _ = task;
        // SAFETY: the caller's contract is this one's.
        unsafe { self.tile_mut(tile) }
    }

    /// Whether the version of `tile` that task `task` accesses arrives from outside the run
    /// (another rank sends it, or sent the version a task of this rank wrote it from): the task
    /// waits for it.
    fn arrives(&self, task: TaskId, tile: TileRef) -> bool {
        let _ = (task, tile);
        false
    }

    /// The host memory its tiles lie in (for page-locking it, [`hetla_runtime::HostMemory`]); none
    /// by default.
    fn host_ranges(&self) -> Vec<HostRange> {
        Vec::new()
    }

    /// The home of `tile` in a device's memory, for a store whose matrices live on a device
    /// ([`device::DeviceTiles`]); none by default.
    fn device_home(&self, tile: TileRef) -> Option<DeviceHome> {
        let _ = tile;
        None
    }

    /// Called once after the kernel of task `id` ran (and succeeded), with the tiles it wrote.
    fn ran(
        &self,
        id: TaskId,
        task: &Task,
        written: &[TileRef],
    ) -> std::result::Result<(), KernelError> {
        let _ = (id, task, written);
        Ok(())
    }
}

/// A column-major matrix of any precision seen as tiles, borrowed for `'a`, writable or read-only.
pub(crate) struct TiledMatrix<'a, T: Scalar = f64> {
    ptr: *mut T,
    ld: usize,
    tiling: Tiling,
    writable: bool,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a TiledMatrix is a borrow of scalar storage (Send + Sync data); sharing it
// between threads is sound because tiles are only written through `tile_mut`, whose
// callers guarantee that no other view of a written tile exists at the same time.
unsafe impl<T: Scalar> Send for TiledMatrix<'_, T> {}
// SAFETY: see the Send impl.
unsafe impl<T: Scalar> Sync for TiledMatrix<'_, T> {}

fn column_major_ld(
    what: &'static str,
    rs: isize,
    cs: isize,
    rows: usize,
    cols: usize,
) -> Result<usize> {
    if rows == 0 || cols == 0 {
        return Ok(rows.max(1));
    }
    if rs == 1 && cs >= rows as isize {
        Ok(cs as usize)
    } else if cols == 1 && rs == 1 {
        Ok(rows)
    } else {
        Err(Error::Layout {
            what,
            reason: format!(
                "expected a column-major view (row stride 1, column stride >= rows), got row stride {rs} and column stride {cs}"
            ),
        })
    }
}

/// An error unless `tiling` cuts a matrix of `shape` (rows, columns), the matrix `what` is.
fn check_shape(what: &'static str, (rows, cols): (usize, usize), tiling: &Tiling) -> Result<()> {
    if (rows, cols) == (tiling.rows(), tiling.cols()) {
        return Ok(());
    }
    Err(Error::Layout {
        what,
        reason: format!(
            "the matrix is {rows}x{cols}, its tiles are of a {}x{} matrix",
            tiling.rows(),
            tiling.cols()
        ),
    })
}

impl<'a, T: Scalar> TiledMatrix<'a, T> {
    /// Tiles of `b x b` over a writable column-major view.
    pub fn new(m: MatMut<'a, T>, tile: usize, what: &'static str) -> Result<Self> {
        let tiling = Tiling::new(m.nrows(), m.ncols(), tile)?;
        Self::with_tiling(m, tiling, what)
    }

    /// The tiles of `tiling` (of `m`'s shape, any tail) over a writable column-major view.
    pub fn with_tiling(m: MatMut<'a, T>, tiling: Tiling, what: &'static str) -> Result<Self> {
        let ld = column_major_ld(what, m.row_stride(), m.col_stride(), m.nrows(), m.ncols())?;
        check_shape(what, (m.nrows(), m.ncols()), &tiling)?;
        Ok(Self {
            ptr: m.as_ptr_mut(),
            ld,
            tiling,
            writable: true,
            _borrow: PhantomData,
        })
    }

    /// Tiles of `b x b` over a read-only column-major view; its tiles cannot be written.
    pub fn read_only(m: MatRef<'a, T>, tile: usize, what: &'static str) -> Result<Self> {
        let ld = column_major_ld(what, m.row_stride(), m.col_stride(), m.nrows(), m.ncols())?;
        Ok(Self {
            ptr: m.as_ptr() as *mut T,
            ld,
            tiling: Tiling::new(m.nrows(), m.ncols(), tile)?,
            writable: false,
            _borrow: PhantomData,
        })
    }

    /// The host memory the matrix spans.
    fn host_range(&self) -> HostRange {
        HostRange::of_matrix(
            self.ptr.cast_const(),
            self.tiling.rows(),
            self.tiling.cols(),
            self.ld as isize,
        )
    }

    /// The whole matrix.
    fn as_mat_ref(&self) -> MatRef<'_, T> {
        // SAFETY: ptr, the dimensions and ld describe storage borrowed for 'a; reading is
        // allowed while no tile is being written (the caller holds &self, and writers need
        // the unsafe contract of tile_mut).
        unsafe {
            MatRef::from_raw_parts(
                self.ptr,
                self.tiling.rows(),
                self.tiling.cols(),
                1,
                self.ld as isize,
            )
        }
    }

    /// Tile (i, j), read-only; `None` outside the tiling.
    fn view(&self, i: usize, j: usize) -> Option<MatRef<'_, T>> {
        if i >= self.tiling.row_tiles() || j >= self.tiling.col_tiles() {
            return None;
        }
        let (r, c) = self.tiling.tile_shape(i, j);
        Some(
            self.as_mat_ref()
                .submatrix(self.tiling.offset(i), self.tiling.offset(j), r, c),
        )
    }

    /// The `rows x cols` block at (`first_row`, `first_col`), read-only: a view that spans tiles,
    /// for a task that reads every tile it overlaps (Aasen's). Panics outside the matrix.
    pub(crate) fn region(
        &self,
        (first_row, first_col): (usize, usize),
        (rows, cols): (usize, usize),
    ) -> MatRef<'_, T> {
        self.as_mat_ref()
            .submatrix(first_row, first_col, rows, cols)
    }

    /// [`TiledMatrix::region`], writable; `None` when the matrix is read-only. Panics outside the
    /// matrix.
    ///
    /// # Safety
    /// For as long as the view lives no other view of a tile it overlaps may be used.
    pub(crate) unsafe fn region_mut(
        &self,
        (first_row, first_col): (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Option<MatMut<'_, T>> {
        let inside =
            first_row + rows <= self.tiling.rows() && first_col + cols <= self.tiling.cols();
        assert!(inside, "a region outside the matrix");
        if !self.writable {
            return None;
        }
        let offset = first_row + first_col * self.ld;
        // SAFETY: the block lies inside the borrowed storage (checked above), and the caller
        // guarantees that no other view of it is used meanwhile.
        Some(unsafe {
            MatMut::from_raw_parts_mut(self.ptr.add(offset), rows, cols, 1, self.ld as isize)
        })
    }

    /// Tile (i, j), writable, through a shared borrow; `None` when the matrix is read-only or (i,
    /// j) outside the tiling.
    ///
    /// # Safety
    /// For as long as the view lives no other view of tile (i, j) may be used.
    unsafe fn view_mut(&self, i: usize, j: usize) -> Option<MatMut<'_, T>> {
        if !self.writable || i >= self.tiling.row_tiles() || j >= self.tiling.col_tiles() {
            return None;
        }
        let (r, c) = self.tiling.tile_shape(i, j);
        let offset = self.tiling.offset(i) + self.tiling.offset(j) * self.ld;
        // SAFETY: the tile lies inside the borrowed storage (offset and shape come from the
        // tiling of that storage), and the caller guarantees it is not aliased.
        Some(unsafe { MatMut::from_raw_parts_mut(self.ptr.add(offset), r, c, 1, self.ld as isize) })
    }
}

impl<T: Scalar> TileStore<T> for TileMajor<T> {
    fn tile(&self, tile: TileRef) -> Option<MatRef<'_, T>> {
        self.view(tile)
    }

    unsafe fn tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.view_mut(tile) }
    }

    fn host_ranges(&self) -> Vec<HostRange> {
        vec![self.host_range()]
    }
}

/// The matrices of a run, indexed by `MatrixId` (`matrices[id.0]`).
pub(crate) struct Matrices<'s, 'a, T: Scalar>(pub &'s [&'s TiledMatrix<'a, T>]);

impl<T: Scalar> TileStore<T> for Matrices<'_, '_, T> {
    fn tile(&self, tile: TileRef) -> Option<MatRef<'_, T>> {
        self.0.get(tile.matrix.0 as usize)?.view(tile.row, tile.col)
    }

    unsafe fn tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>> {
        let m = self.0.get(tile.matrix.0 as usize)?;
        // SAFETY: the caller's contract is this one's.
        unsafe { m.view_mut(tile.row, tile.col) }
    }

    fn host_ranges(&self) -> Vec<HostRange> {
        self.0.iter().map(|m| m.host_range()).collect()
    }
}

/// A column-major square matrix seen as whole block columns (LU's tiles): tile (0, j) is block
/// column j of `tiling`, every row. Borrowed writable for `'a`.
pub(crate) struct ColumnBlocks<'a, T: Scalar> {
    ptr: *mut T,
    ld: usize,
    tiling: Tiling,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: as TiledMatrix's: a borrow of scalar storage, whose blocks are only written through
// `tile_mut`, whose callers guarantee that no other view of a written block exists meanwhile.
unsafe impl<T: Scalar> Send for ColumnBlocks<'_, T> {}
// SAFETY: see the Send impl.
unsafe impl<T: Scalar> Sync for ColumnBlocks<'_, T> {}

impl<'a, T: Scalar> ColumnBlocks<'a, T> {
    /// Block columns of `tiling.tile()` columns over a writable column-major view of `tiling`'s
    /// shape.
    pub fn new(m: MatMut<'a, T>, tiling: Tiling, what: &'static str) -> Result<Self> {
        let ld = column_major_ld(what, m.row_stride(), m.col_stride(), m.nrows(), m.ncols())?;
        check_shape(what, (m.nrows(), m.ncols()), &tiling)?;
        Ok(Self {
            ptr: m.as_ptr_mut(),
            ld,
            tiling,
            _borrow: PhantomData,
        })
    }

    /// (first column, columns) of block `tile`, `None` outside the matrix.
    fn block(&self, tile: TileRef) -> Option<(usize, usize)> {
        (tile.row == 0 && tile.col < self.tiling.col_tiles()).then(|| {
            (
                self.tiling.offset(tile.col),
                self.tiling.tile_cols(tile.col),
            )
        })
    }
}

impl<T: Scalar> ColumnBlocks<'_, T> {
    /// The first element, rows and columns of block column `tile`, when held.
    fn block_start(&self, tile: TileRef) -> Option<(*mut T, usize, usize)> {
        let (first, cols) = self.block(tile)?;
        // SAFETY: the block's first column lies inside the borrowed storage (its columns come from
        // the tiling of that storage), so the offset stays inside the allocation.
        let start = unsafe { self.ptr.add(first * self.ld) };
        Some((start, self.tiling.rows(), cols))
    }
}

impl<T: Scalar> TileStore<T> for ColumnBlocks<'_, T> {
    fn tile(&self, tile: TileRef) -> Option<MatRef<'_, T>> {
        let (start, rows, cols) = self.block_start(tile)?;
        // SAFETY: the block lies inside the borrowed storage; reading is allowed while no writer of
        // it runs (the caller holds &self, and writers need the unsafe contract of tile_mut).
        Some(unsafe { MatRef::from_raw_parts(start, rows, cols, 1, self.ld as isize) })
    }

    unsafe fn tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>> {
        let (start, rows, cols) = self.block_start(tile)?;
        // SAFETY: the block lies inside the borrowed storage, and the caller guarantees it is not
        // aliased while the view lives.
        Some(unsafe { MatMut::from_raw_parts_mut(start, rows, cols, 1, self.ld as isize) })
    }
}

/// A and, for QR's least squares, B in block columns, by matrix ([`FACTOR`], [`RHS`]); the tiles of
/// any other matrix (LDL^T's dataless [`STEPS`]) are held by none.
///
/// [`FACTOR`]: hetla_factorizations::FACTOR
/// [`RHS`]: hetla_factorizations::RHS
/// [`STEPS`]: hetla_factorizations::STEPS
pub(crate) struct ColumnMatrices<'s, 'a, T: Scalar>(
    pub &'s ColumnBlocks<'a, T>,
    pub Option<&'s ColumnBlocks<'a, T>>,
);

impl<T: Scalar> ColumnMatrices<'_, '_, T> {
    fn of(&self, tile: TileRef) -> Option<&ColumnBlocks<'_, T>> {
        match tile.matrix {
            hetla_factorizations::FACTOR => Some(self.0),
            hetla_factorizations::RHS => self.1,
            _ => None,
        }
    }
}

impl<T: Scalar> TileStore<T> for ColumnMatrices<'_, '_, T> {
    fn tile(&self, tile: TileRef) -> Option<faer::MatRef<'_, T>> {
        self.of(tile)?.tile(tile)
    }

    unsafe fn tile_mut(&self, tile: TileRef) -> Option<faer::MatMut<'_, T>> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.of(tile)?.tile_mut(tile) }
    }
}

/// The [`Workload`] methods a work that wraps a [`TileWork`] (its field `tiles`) takes from it
/// unchanged: all but `run` (every one, so that a wrapper loses none of the store's answers: the
/// page-locked ranges, the tiles that arrive from other ranks).
macro_rules! delegate_to_tiles {
    () => {
        fn graph(&self) -> &hetla_factorizations::TaskGraph {
            self.tiles.graph()
        }

        fn key(&self, task: hetla_factorizations::TaskId) -> hetla_runtime::KernelKey {
            self.tiles.key(task)
        }

        fn tile_bytes(&self, tile: hetla_factorizations::TileRef) -> usize {
            self.tiles.tile_bytes(tile)
        }

        fn host_tile(
            &self,
            tile: hetla_factorizations::TileRef,
        ) -> Option<hetla_kernels::AnyRef<'_>> {
            self.tiles.host_tile(tile)
        }

        unsafe fn host_tile_mut(
            &self,
            tile: hetla_factorizations::TileRef,
        ) -> Option<hetla_kernels::AnyMut<'_>> {
            // SAFETY: the caller's contract is this one's.
            unsafe { self.tiles.host_tile_mut(tile) }
        }

        fn device_home(
            &self,
            tile: hetla_factorizations::TileRef,
        ) -> Option<hetla_runtime::DeviceHome> {
            self.tiles.device_home(tile)
        }

        fn host_ranges(&self) -> Vec<hetla_kernels::HostRange> {
            self.tiles.host_ranges()
        }

        fn outside_inputs(&self, task: hetla_factorizations::TaskId) -> usize {
            self.tiles.outside_inputs(task)
        }
    };
}
pub(crate) use delegate_to_tiles;

/// Views a column-major slice (`rows x cols`, leading dimension `ld`) as a matrix, checking that it
/// is long enough.
pub(crate) fn mat_from_slice<'a, T: Scalar>(
    data: &'a mut [T],
    rows: usize,
    cols: usize,
    ld: usize,
    what: &'static str,
) -> Result<MatMut<'a, T>> {
    if ld < rows.max(1) {
        return Err(Error::Layout {
            what,
            reason: format!(
                "leading dimension {ld} is smaller than the {rows} rows (need ld >= max(1, rows))"
            ),
        });
    }
    let needed = if rows == 0 || cols == 0 {
        Some(0)
    } else {
        ld.checked_mul(cols - 1).and_then(|x| x.checked_add(rows))
    };
    let Some(needed) = needed.filter(|&needed| needed <= data.len()) else {
        return Err(Error::Layout {
            what,
            reason: format!(
                "slice has {} elements, too few for a {rows}x{cols} matrix with leading dimension {ld} (needs ld * (cols - 1) + rows)",
                data.len()
            ),
        });
    };
    Ok(MatMut::from_column_major_slice_with_stride_mut(
        &mut data[..needed],
        rows,
        cols,
        ld,
    ))
}

/// A task graph over a store of tiles of one precision, with a kernel backend: what the runtime
/// runs (see the module documentation).
pub(crate) struct TileWork<'w, T: Scalar> {
    /// The tasks.
    pub graph: &'w TaskGraph,
    /// Each task's kernel.
    pub keys: &'w [KernelKey],
    /// The shape of each tile of the run.
    pub shape: &'w (dyn Fn(TileRef) -> (usize, usize) + Sync),
    /// Where the tiles are.
    pub store: &'w dyn TileStore<T>,
    /// The CPU kernels.
    pub backend: Backend,
}

impl<T: Scalar> Workload for TileWork<'_, T> {
    fn graph(&self) -> &TaskGraph {
        self.graph
    }

    fn key(&self, task: TaskId) -> KernelKey {
        self.keys[task.0].clone()
    }

    fn tile_bytes(&self, tile: TileRef) -> usize {
        let (r, c) = (self.shape)(tile);
        r * c * size_of::<T>()
    }

    fn host_tile(&self, tile: TileRef) -> Option<AnyRef<'_>> {
        self.store.tile(tile).map(AnyRef::from)
    }

    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<AnyMut<'_>> {
        // SAFETY: the caller guarantees that no other view of the tile is used while this
        // one lives.
        unsafe { self.store.tile_mut(tile) }.map(AnyMut::from)
    }

    fn host_ranges(&self) -> Vec<HostRange> {
        self.store.host_ranges()
    }

    fn device_home(&self, tile: TileRef) -> Option<DeviceHome> {
        self.store.device_home(tile)
    }

    fn outside_inputs(&self, task: TaskId) -> usize {
        let accesses = &self.graph.task(task).accesses;
        accesses
            .iter()
            .filter(|a| self.store.arrives(task, a.tile))
            .count()
    }

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.graph.task(id);
        let (write, reads) = operands(task)?;
        let missing = |tile: TileRef, what: &str| KernelError::Operands {
            op: task.op,
            reason: format!(
                "tile ({}, {}) of matrix {} is not {what} here",
                tile.row, tile.col, tile.matrix.0
            ),
        };
        let views = reads
            .iter()
            .map(|r| {
                self.store
                    .task_tile(id, r.tile)
                    .ok_or_else(|| missing(r.tile, "held"))
            })
            .collect::<std::result::Result<Vec<_>, KernelError>>()?;
        // SAFETY: the runtime runs a task only once every earlier task touching its tiles
        // has finished (the graph has RAW, WAR and WAW edges), and no later such task
        // starts before it ends, so no other view of the written tile exists while this
        // kernel runs; the written tile is distinct from every tile the task reads
        // (checked by `operands`), and the read views are dropped before `ran`.
        let out = unsafe { self.store.task_tile_mut(id, write.tile) }
            .ok_or_else(|| missing(write.tile, "writable"))?;
        self.backend.run(task.op, &views, out, par)?;
        drop(views);
        self.store.ran(id, task, &[write.tile])
    }
}

/// A task's written tile (its last access) and the tiles it only reads, checked: the written one is
/// not also read.
pub(crate) fn operands(task: &Task) -> std::result::Result<(&Access, &[Access]), KernelError> {
    let operands = |reason: &str| KernelError::Operands {
        op: task.op,
        reason: reason.into(),
    };
    let (write, reads) = task
        .accesses
        .split_last()
        .filter(|(w, _)| w.mode.writes())
        .ok_or_else(|| operands("the last access must be the written tile"))?;
    if reads
        .iter()
        .any(|r| r.mode != Mode::Read || r.tile == write.tile)
    {
        return Err(operands("a tile is written while also read by the task"));
    }
    Ok((write, reads))
}

/// A received tile's slot: empty until the communication loop fills it, then read by its readers,
/// then freed by the last one that ran on a CPU cluster.
#[cfg(feature = "mpi")]
struct Received<T> {
    /// [`EMPTY`], [`FILLING`], [`FULL`] or [`FREED`].
    state: std::sync::atomic::AtomicU8,
    data: std::cell::UnsafeCell<Option<faer::Mat<T>>>,
    /// Readers that have not run on a CPU cluster yet.
    readers_left: std::sync::atomic::AtomicUsize,
    /// Whether it ends the run holding its tile's final version, for this rank's own tile
    /// ([`hetla_factorizations::Receipt::home`]): kept, and copied home by [`TileSet::settle`].
    home: bool,
}

#[cfg(feature = "mpi")]
const EMPTY: u8 = 0;
#[cfg(feature = "mpi")]
const FILLING: u8 = 1;
#[cfg(feature = "mpi")]
const FULL: u8 = 2;
#[cfg(feature = "mpi")]
const FREED: u8 = 3;

/// Where a tile of a [`TileSet`] is.
#[cfg(feature = "mpi")]
#[derive(Clone, Copy)]
enum Place<T> {
    /// One of this rank's tiles (in a distributed matrix): pointer, rows, columns, column stride,
    /// and whether the run may write it (else it was lent shared).
    Local(*mut T, usize, usize, isize, bool),
    /// A received tile, by its index in [`TileSet::received`].
    Received(usize),
}

/// A rank's tiles of a distributed matrix, by (tile row, tile column).
#[cfg(feature = "mpi")]
pub(crate) type HeldTiles<T> = std::collections::BTreeMap<(usize, usize), faer::Mat<T>>;

/// What a distributed run does with a tile a task wrote (task, tile, its view), once the task's
/// kernel ran: send it on.
#[cfg(feature = "mpi")]
pub(crate) type Written<'f, T> =
    dyn Fn(TaskId, TileRef, MatRef<'_, T>) -> std::result::Result<(), KernelError> + Sync + 'f;

/// The tiles one rank of a distributed run holds, each stored apart (the tiles of its distributed
/// matrices it owns, lent writable or read-only), and the tiles other ranks send it, each in a slot
/// of its own until its last reader ran.
#[cfg(feature = "mpi")]
pub(crate) struct TileSet<'s, T: Scalar> {
    places: std::collections::HashMap<TileRef, Place<T>>,
    received: Vec<Received<T>>,
    /// The slot of each received version, and the slot each task's access to a received tile uses
    /// (a rank may hold several versions of a tile at once).
    by_version: std::collections::HashMap<(TileRef, Option<TaskId>), usize>,
    by_task: std::collections::HashMap<(TaskId, TileRef), usize>,
    /// This rank's tiles whose final version another rank writes, and whether it came back.
    returning: std::collections::HashMap<TileRef, std::sync::atomic::AtomicBool>,
    /// Called with each tile a task wrote, once its kernel ran.
    written: &'s Written<'s, T>,
    _borrow: PhantomData<&'s mut [T]>,
}

// SAFETY: the local places point into matrices borrowed (mutably when writable) for 's; a
// tile is written through `tile_mut` only, whose callers guarantee no other view of it is
// used meanwhile; a received slot is filled once (its state goes EMPTY -> FILLING -> FULL
// before a task may see it), written by tasks only while FULL (through `tile_mut`, as a local
// tile), and freed once, after its last task ran (FULL -> FREED); a returning tile is written
// once, by `fill`, when no task of this rank touches it any more (the split's promise); a slot
// holding the final version of one of this rank's tiles is never freed, and copied into that
// tile by `settle` once the run has ended (no task holds a view then).
#[cfg(feature = "mpi")]
unsafe impl<T: Scalar> Sync for TileSet<'_, T> {}

#[cfg(feature = "mpi")]
impl<'s, T: Scalar> TileSet<'s, T> {
    /// The tiles of `written` (matrix id and tiles, lent writable) and `read` (lent read-only),
    /// with a slot for each version of `receives` (each with the tasks that use it, once per
    /// access), and `returning`, tiles of `written` whose final version another rank writes (filled
    /// in place); `on_written` is called with each tile a task wrote.
    pub fn new(
        written: Vec<(hetla_factorizations::MatrixId, &'s mut HeldTiles<T>)>,
        read: Vec<(hetla_factorizations::MatrixId, &'s HeldTiles<T>)>,
        (receives, returning): (&[hetla_factorizations::Receipt], &[TileRef]),
        on_written: &'s Written<'s, T>,
    ) -> Self {
        use std::sync::atomic::{AtomicU8, AtomicUsize};
        let mut places = std::collections::HashMap::new();
        for (matrix, tiles) in written {
            for (&(i, j), m) in tiles.iter_mut() {
                let local =
                    Place::Local(m.as_ptr_mut(), m.nrows(), m.ncols(), m.col_stride(), true);
                places.insert(TileRef::new(matrix, i, j), local);
            }
        }
        for (matrix, tiles) in read {
            for (&(i, j), m) in tiles {
                // Lent shared: `tile_mut` refuses to write it.
                let ptr = m.as_ptr().cast_mut();
                let local = Place::Local(ptr, m.nrows(), m.ncols(), m.col_stride(), false);
                places.insert(TileRef::new(matrix, i, j), local);
            }
        }
        let mut by_version = std::collections::HashMap::new();
        let mut by_task = std::collections::HashMap::new();
        let received = receives
            .iter()
            .enumerate()
            .map(|(i, r)| {
                // This rank's own tile keeps its place: a version of it received back (see
                // `home`) is reached through `by_task` alone.
                places.entry(r.tile).or_insert(Place::Received(i));
                by_version.insert((r.tile, r.version), i);
                by_task.extend(r.readers.iter().map(|&t| ((t, r.tile), i)));
                Received {
                    state: AtomicU8::new(EMPTY),
                    data: std::cell::UnsafeCell::new(None),
                    readers_left: AtomicUsize::new(r.readers.len()),
                    home: r.home,
                }
            })
            .collect();
        let returning = returning
            .iter()
            .map(|&t| (t, std::sync::atomic::AtomicBool::new(false)))
            .collect();
        Self {
            places,
            received,
            by_version,
            by_task,
            returning,
            written: on_written,
            _borrow: PhantomData,
        }
    }

    /// Puts a received version of a tile where its readers find it, before any of them is released
    /// (the runtime releases them only once told the tile arrived), or a returning tile in its
    /// place; an error when the version is not one this rank receives, came already, or has another
    /// shape.
    pub fn fill(
        &self,
        (tile, version): (TileRef, Option<TaskId>),
        m: faer::Mat<T>,
    ) -> std::result::Result<(), String> {
        use std::sync::atomic::Ordering;
        let received = self.by_version.get(&(tile, version)).copied();
        if let (None, Some(back)) = (received, self.returning.get(&tile)) {
            let Some(&Place::Local(ptr, rows, cols, cs, true)) = self.places.get(&tile) else {
                return Err("which this rank does not hold writable".into());
            };
            if (m.nrows(), m.ncols()) != (rows, cols) {
                return Err(format!(
                    "{} x {}, not {rows} x {cols}",
                    m.nrows(),
                    m.ncols()
                ));
            }
            if back.swap(true, Ordering::AcqRel) {
                return Err("back a second time".into());
            }
            // SAFETY: a tile of a matrix lent writable for the set's lifetime, which no task of
            // this rank touches any more (the split returns a tile after its last writer only),
            // written here once (the flag).
            unsafe { MatMut::from_raw_parts_mut(ptr, rows, cols, 1, cs) }.copy_from(&m);
            return Ok(());
        }
        let Some(i) = received else {
            return Err("in a version this rank does not read".into());
        };
        let slot = &self.received[i];
        if slot
            .state
            .compare_exchange(EMPTY, FILLING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err("a second time".into());
        }
        // SAFETY: only this call moved the state from EMPTY: no other writer, and no reader
        // looks at the data before the state is FULL.
        unsafe { *slot.data.get() = Some(m) };
        slot.state.store(FULL, Ordering::Release);
        Ok(())
    }
}

#[cfg(feature = "mpi")]
impl<T: Scalar> TileSet<'_, T> {
    /// Copies each slot holding the final version of one of this rank's own tiles into that tile
    /// ([`hetla_factorizations::Receipt::home`]): once the run has ended, when no task touches any
    /// tile any more. An error names a tile whose version never came.
    pub fn settle(&self) -> std::result::Result<(), String> {
        use std::sync::atomic::Ordering;
        for (&(tile, _), &i) in &self.by_version {
            let slot = &self.received[i];
            if !slot.home {
                continue;
            }
            let (Some(m), Some(&Place::Local(ptr, rows, cols, cs, true))) =
                (self.slot(i), self.places.get(&tile))
            else {
                return Err(format!(
                    "tile ({}, {}) of matrix {} did not come back to this rank",
                    tile.row, tile.col, tile.matrix.0
                ));
            };
            debug_assert_eq!(slot.state.load(Ordering::Acquire), FULL);
            // SAFETY: a tile of a matrix lent writable for the set's lifetime; the run has ended,
            // so no task holds a view of it or of the slot.
            unsafe { MatMut::from_raw_parts_mut(ptr, rows, cols, 1, cs) }.copy_from(m);
        }
        Ok(())
    }

    /// The tile in received slot `i`, once filled and until freed.
    fn slot(&self, i: usize) -> Option<MatRef<'_, T>> {
        use std::sync::atomic::Ordering;
        let slot = &self.received[i];
        if slot.state.load(Ordering::Acquire) != FULL {
            return None;
        }
        // SAFETY: FULL: filled, and not freed before the last task using it ran (whose views are
        // dropped by then).
        unsafe { &*slot.data.get() }.as_ref().map(|m| m.as_ref())
    }

    /// The writable tile in received slot `i` (a task of this rank writes a version it received: a
    /// merge of two ranks' tiles), once filled and until freed.
    ///
    /// # Safety
    /// No other view of the slot's tile may be used while the returned one lives.
    unsafe fn slot_mut(&self, i: usize) -> Option<MatMut<'_, T>> {
        use std::sync::atomic::Ordering;
        let slot = &self.received[i];
        if slot.state.load(Ordering::Acquire) != FULL {
            return None;
        }
        // SAFETY: FULL: filled and not freed before its last task ran; the caller guarantees no
        // other view of it is used meanwhile.
        unsafe { &mut *slot.data.get() }
            .as_mut()
            .map(|m| m.as_mut())
    }
}

#[cfg(feature = "mpi")]
impl<T: Scalar> TileStore<T> for TileSet<'_, T> {
    fn tile(&self, tile: TileRef) -> Option<MatRef<'_, T>> {
        match *self.places.get(&tile)? {
            // SAFETY: the tile lies in a matrix borrowed for the set's lifetime; no task
            // writes it while another reads it (the graph's edges).
            Place::Local(ptr, rows, cols, cs, _) => {
                Some(unsafe { MatRef::from_raw_parts(ptr, rows, cols, 1, cs) })
            }
            Place::Received(i) => self.slot(i),
        }
    }

    unsafe fn tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>> {
        match *self.places.get(&tile)? {
            // SAFETY: a tile of a matrix lent writable for the set's lifetime, and the
            // caller guarantees no other view of it is used meanwhile.
            Place::Local(ptr, rows, cols, cs, true) => {
                Some(unsafe { MatMut::from_raw_parts_mut(ptr, rows, cols, 1, cs) })
            }
            // A tile of a matrix lent shared is never written.
            Place::Local(.., false) => None,
            // A received tile that a task of this rank writes (a merge of two ranks' tiles).
            // SAFETY: the caller's contract is `slot_mut`'s.
            Place::Received(i) => unsafe { self.slot_mut(i) },
        }
    }

    fn task_tile(&self, task: TaskId, tile: TileRef) -> Option<MatRef<'_, T>> {
        match self.by_task.get(&(task, tile)) {
            Some(&i) => self.slot(i),
            None => self.tile(tile),
        }
    }

    unsafe fn task_tile_mut(&self, task: TaskId, tile: TileRef) -> Option<MatMut<'_, T>> {
        match self.by_task.get(&(task, tile)) {
            // SAFETY: the caller's contract is `slot_mut`'s.
            Some(&i) => unsafe { self.slot_mut(i) },
            // SAFETY: the caller's contract is this one's.
            None => unsafe { self.tile_mut(tile) },
        }
    }

    fn arrives(&self, task: TaskId, tile: TileRef) -> bool {
        self.by_task.contains_key(&(task, tile))
    }

    fn ran(
        &self,
        id: TaskId,
        task: &Task,
        written: &[TileRef],
    ) -> std::result::Result<(), KernelError> {
        use std::sync::atomic::Ordering;
        // Sent on before a received tile it wrote may be freed below.
        for &tile in written {
            if let Some(view) = self.task_tile(id, tile) {
                (self.written)(id, tile, view)?;
            }
        }
        for a in &task.accesses {
            if let Some(&i) = self.by_task.get(&(id, a.tile)) {
                let slot = &self.received[i];
                if slot.readers_left.fetch_sub(1, Ordering::AcqRel) == 1
                    && !slot.home
                    && slot
                        .state
                        .compare_exchange(FULL, FREED, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    // SAFETY: every task of this rank touching the tile has run its kernel (the
                    // count), and their views were dropped before they counted.
                    unsafe { *slot.data.get() = None };
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storages_read_back_their_names_and_auto_copies_what_fits() {
        for s in [Storage::Auto, Storage::InPlace, Storage::TileMajor] {
            assert_eq!(s.name().parse::<Storage>(), Ok(s));
        }
        assert!("tiled".parse::<Storage>().unwrap_err().contains("in-place"));
        assert_eq!(Storage::Auto.resolve::<f64>(1000, 100), Storage::TileMajor);
        assert_eq!(Storage::InPlace.resolve::<f64>(1000, 100), Storage::InPlace);
        // Half of a matrix of order 2^40 fits nowhere.
        if crate::limits::available_memory().is_some() {
            assert_eq!(
                Storage::Auto.resolve::<f64>(1 << 40, 1 << 10),
                Storage::InPlace
            );
        }
    }
}
