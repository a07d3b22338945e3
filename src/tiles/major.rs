//! A square matrix's lower triangle copied into tile-major storage, as PLASMA and Chameleon store
//! their matrices: each tile contiguous (column-major inside, its leading dimension its row count
//! rounded up to 64 bytes), the tiles of a tile column one after another, the whole buffer in huge
//! pages where the system offers them ([`PageBuffer`]).
//!
//! In the caller's column-major matrix of order n a tile's columns lie n scalars apart (64 KiB at n
//! = 8192 in f64): a tile of 512 columns touches 512 pages and, at a power-of-two stride, maps its
//! columns onto few cache sets. Here a tile is one run of memory. The copy in and the copy out are
//! spread over rayon's threads, tile by tile, and cost a pass over the triangle each way; the copy
//! out writes only the lower triangle, so the caller's strict upper triangle is left as it was, as
//! the in-place factorisation leaves it.

use faer::reborrow::ReborrowMut;
use faer::{MatMut, MatRef};
use hetla_factorizations::{TileRef, Tiling};
use hetla_kernels::{HostRange, Scalar};
use hetla_runtime::{HostMemory, PageLock, Platform};
use rayon::prelude::*;

use crate::Result;
use crate::copy::{copy, copy_adjoint, copy_below, mirror_lower};
use crate::pages::PageBuffer;

/// The lower triangle of a square matrix in tile-major storage (see the module documentation).
pub(crate) struct TileMajor<T: Scalar> {
    /// The storage `base` points into (accessed only through `base` while the store lives).
    buffer: PageBuffer<T>,
    base: *mut T,
    tiling: Tiling,
    /// Each held tile's offset in the buffer, by `i * col_tiles + j`.
    offsets: Vec<Option<usize>>,
}

// SAFETY: the store owns its scalars (Send + Sync data); tiles are written only through
// `tile_mut`, whose callers guarantee that no other view of a written tile exists meanwhile.
unsafe impl<T: Scalar> Send for TileMajor<T> {}
// SAFETY: see the Send impl.
unsafe impl<T: Scalar> Sync for TileMajor<T> {}

/// The leading dimension of a tile of `rows` rows: whole 64-byte lines.
fn leading_dimension<T>(rows: usize) -> usize {
    rows.next_multiple_of((64 / size_of::<T>()).max(1))
}

/// The scalars a tile-major copy of the lower triangle of order `n` in tiles of `tile` holds,
/// padding included (in closed form, so that an order too large to lay out still has an answer):
/// the tile columns before the last hold their full tiles and the ragged last row of tiles, the
/// last column its one ragged tile.
fn copy_len<T>(n: usize, tile: usize) -> u128 {
    if n == 0 {
        return 0;
    }
    let b = tile.clamp(1, n);
    let t = n.div_ceil(b) as u128;
    let last = (n - (t as usize - 1) * b) as u128;
    let (full_ld, last_ld) = (
        leading_dimension::<T>(b) as u128,
        leading_dimension::<T>(last as usize) as u128,
    );
    let b = b as u128;
    b * full_ld * (t - 1) * t / 2 + b * (t - 1) * last_ld + last * last_ld
}

/// Whether a tile-major copy of the lower triangle of order `n` in tiles of `tile` fits in the
/// memory available (see `limits::check_memory`).
pub(super) fn fits<T>(n: usize, tile: usize) -> bool {
    let bytes = copy_len::<T>(n, tile).saturating_mul(size_of::<T>() as u128);
    crate::limits::check_memory("", bytes).is_ok()
}

/// A tile-major buffer a platform keeps between runs ([`Platform::keep`]), with the page lock of
/// its memory when a run on GPUs asked for one: kept with it, so that the next run copies straight
/// from it at no locking cost. The lock (the first field) is dropped before the buffer.
struct KeptTiles<T: Scalar> {
    lock: Option<PageLock>,
    buffer: PageBuffer<T>,
}

impl<T: Scalar> TileMajor<T> {
    /// [`TileMajor::lower`] into the buffer `platform` kept from an earlier run when it fits, and
    /// the page lock of the buffer: with [`HostMemory::PageLocked`] on a platform with devices the
    /// buffer is page-locked once and the lock kept with it ([`TileMajor::keep`]); otherwise no
    /// lock (a kept one is dropped). The lock is `fresh` when this call made it.
    pub fn lower_kept(
        platform: &Platform,
        a: MatRef<'_, T>,
        tile: usize,
        host: HostMemory,
    ) -> Result<(Self, Option<PageLock>, bool)> {
        let len = usize::try_from(copy_len::<T>(a.nrows(), tile)).unwrap_or(usize::MAX);
        let (lock, spare) = match platform.reclaim::<KeptTiles<T>>() {
            Some(KeptTiles { lock, buffer }) if buffer.fits(len) => (lock, Some(buffer)),
            // Dropped here, the lock before its buffer.
            _ => (None, None),
        };
        let store = Self::lower(a, tile, spare)?;
        let (lock, fresh) = match lock {
            _ if host != HostMemory::PageLocked || platform.devices().is_empty() => (None, false),
            Some(lock) if lock.failed().is_none() && lock.bytes() > 0 => (Some(lock), false),
            // SAFETY: the lock is kept with the store's buffer and dropped before it (here, or
            // in `KeptTiles`).
            _ => (
                Some(unsafe { platform.page_lock(&[store.host_range()]) }),
                true,
            ),
        };
        Ok((store, lock, fresh))
    }

    /// Counts a lock this call made ([`TileMajor::lower_kept`]) in the run's `trace`, which found
    /// the buffer locked already.
    pub fn count_lock(trace: &mut hetla_runtime::Trace, lock: &PageLock) {
        let locked = &mut trace.host_memory;
        locked.bytes += lock.bytes();
        locked.already = locked.already.saturating_sub(lock.bytes());
        locked.seconds += lock.seconds();
        if locked.failed.is_none() {
            locked.failed = lock.failed().map(str::to_owned);
        }
    }

    /// Gives the store's buffer, with its page lock, back to `platform` for the next run.
    pub fn keep(self, platform: &Platform, lock: Option<PageLock>) {
        platform.keep(KeptTiles {
            lock,
            buffer: self.buffer,
        });
    }

    /// The host memory of the store's buffer.
    pub fn host_range(&self) -> HostRange {
        HostRange {
            start: self.base as usize,
            len: self.buffer.scalars() * size_of::<T>(),
        }
    }

    /// The lower triangle of the square `a` in tiles of `tile`, copied; into `spare` when it fits
    /// (a buffer of an earlier store).
    pub fn lower(a: MatRef<'_, T>, tile: usize, spare: Option<PageBuffer<T>>) -> Result<Self> {
        let tiling = Tiling::new(a.nrows(), a.ncols(), tile)?;
        tiling.ensure_square()?;
        let t = tiling.row_tiles();
        let mut offsets = vec![None; t * t];
        let mut len = 0usize;
        for j in 0..t {
            for i in j..t {
                let (r, c) = tiling.tile_shape(i, j);
                offsets[i * t + j] = Some(len);
                len += leading_dimension::<T>(r) * c;
            }
        }
        debug_assert_eq!(len as u128, copy_len::<T>(a.nrows(), tile));
        crate::limits::check_memory(
            "the tile-major copy of the matrix",
            (len as u128).saturating_mul(size_of::<T>() as u128),
        )?;
        let mut buffer = PageBuffer::reuse(spare, len, "the tile-major copy of the matrix")?;
        let base = buffer.as_mut_slice().as_mut_ptr();
        let store = Self {
            buffer,
            base,
            tiling,
            offsets,
        };
        store.held().into_par_iter().for_each(|(i, j)| {
            let (r, c) = tiling.tile_shape(i, j);
            // SAFETY: each tile is visited once, and tiles do not overlap in the buffer: the
            // view is the only one of its tile.
            let dst = unsafe { store.raw_mut(i, j) };
            copy(a.submatrix(tiling.offset(i), tiling.offset(j), r, c), dst);
        });
        Ok(store)
    }

    /// The held tiles, (row, column), tile column by tile column.
    fn held(&self) -> Vec<(usize, usize)> {
        let t = self.tiling.row_tiles();
        (0..t).flat_map(|j| (j..t).map(move |i| (i, j))).collect()
    }

    /// `a` cut into disjoint views of the store's tiles, `(i, j, view)`, tile column by tile
    /// column: from the diagonal down when `lower`, else every tile.
    fn targets<'a>(&self, a: MatMut<'a, T>, lower: bool) -> Vec<(usize, usize, MatMut<'a, T>)> {
        let tiling = self.tiling;
        let mut targets = Vec::with_capacity(tiling.row_tiles() * tiling.col_tiles());
        let mut rest = a;
        for j in 0..tiling.col_tiles() {
            let (column, right) = rest.split_at_col_mut(tiling.tile_cols(j));
            rest = right;
            let first = if lower { j } else { 0 };
            let below = column.nrows() - tiling.offset(first);
            let mut down = column.subrows_mut(tiling.offset(first), below);
            for i in first..tiling.row_tiles() {
                let (tile, lower) = down.split_at_row_mut(tiling.tile_rows(i));
                down = lower;
                targets.push((i, j, tile));
            }
        }
        targets
    }

    /// Sets the imaginary parts of the diagonal to zero (see [`hetla_kernels::real_diagonal`]).
    pub fn real_diagonal(&mut self) {
        for k in 0..self.tiling.row_tiles() {
            // SAFETY: (k, k) is held, and `&mut self` excludes every other view of the store.
            hetla_kernels::real_diagonal(unsafe { self.raw_mut(k, k) });
        }
    }

    /// Held tile (i, j).
    fn held_tile(&self, i: usize, j: usize) -> MatRef<'_, T> {
        let tile = TileRef::new(hetla_factorizations::MatrixId(0), i, j);
        self.view(tile).expect("every lower tile is held")
    }

    /// Writes the lower triangle back into `a` (the matrix it was copied from): every held tile,
    /// and of a diagonal tile only its lower triangle.
    pub fn copy_out(&self, a: MatMut<'_, T>) {
        self.targets(a, true)
            .into_par_iter()
            .for_each(|(i, j, dst)| {
                copy_below(
                    self.held_tile(i, j),
                    dst,
                    |col| if i == j { col } else { 0 },
                );
            });
    }

    /// Writes the Hermitian matrix whose lower triangle the tiles hold into `a`, both triangles
    /// (the upper one the conjugate transpose of the lower): each tile of `a` written once, in
    /// parallel, from the held tile or its mirror, instead of the lower triangle then a pass that
    /// mirrors it through the caches a second time (the inverse's copy-out).
    pub fn copy_out_hermitian(&self, a: MatMut<'_, T>) {
        self.targets(a, false)
            .into_par_iter()
            .for_each(|(i, j, mut dst)| match i.cmp(&j) {
                std::cmp::Ordering::Greater => copy(self.held_tile(i, j), dst),
                std::cmp::Ordering::Less => copy_adjoint(self.held_tile(j, i), dst),
                std::cmp::Ordering::Equal => {
                    copy_below(self.held_tile(i, i), dst.rb_mut(), |c| c);
                    mirror_lower(dst);
                }
            });
    }

    /// Tile (i, j) of the buffer, writable.
    ///
    /// # Safety
    /// (i, j) is held, and no other view of it is used while the returned one lives.
    unsafe fn raw_mut(&self, i: usize, j: usize) -> MatMut<'_, T> {
        let offset = self.offsets[i * self.tiling.col_tiles() + j].expect("a held tile");
        let (r, c) = self.tiling.tile_shape(i, j);
        let ld = leading_dimension::<T>(r);
        // SAFETY: the tile lies inside the buffer (its offset and extent were laid out by
        // `lower`), and the caller guarantees it is not aliased.
        unsafe { MatMut::from_raw_parts_mut(self.base.add(offset), r, c, 1, ld as isize) }
    }

    /// The offset of `tile` when it is held here.
    fn offset(&self, tile: TileRef) -> Option<usize> {
        let t = self.tiling.col_tiles();
        if tile.matrix.0 != 0 || tile.row >= self.tiling.row_tiles() || tile.col >= t {
            return None;
        }
        self.offsets[tile.row * t + tile.col]
    }
}

/// What the parent's `TileStore` implementation hands on (this module does not import the trait, so
/// that the imports between the two go one way).
impl<T: Scalar> TileMajor<T> {
    /// `tile`, read-only, where held.
    pub(super) fn view(&self, tile: TileRef) -> Option<MatRef<'_, T>> {
        let offset = self.offset(tile)?;
        let (r, c) = self.tiling.tile_shape(tile.row, tile.col);
        let ld = leading_dimension::<T>(r);
        // SAFETY: the tile lies inside the buffer; no task writes it while another reads it
        // (the graph's edges).
        Some(unsafe { MatRef::from_raw_parts(self.base.add(offset), r, c, 1, ld as isize) })
    }

    /// `tile`, writable, where held.
    ///
    /// # Safety
    /// No other view of the tile is used while the returned one lives.
    pub(super) unsafe fn view_mut(&self, tile: TileRef) -> Option<MatMut<'_, T>> {
        self.offset(tile)?;
        // SAFETY: held (checked), and the caller's contract is raw_mut's.
        Some(unsafe { self.raw_mut(tile.row, tile.col) })
    }
}
