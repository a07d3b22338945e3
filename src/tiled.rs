//! Tiled views of column-major matrices.
//!
//! A [`TiledMatrix`] does not copy: its tiles are views into the caller's column-major
//! storage (a faer `MatMut`/`MatRef` or a slice with a leading dimension), so the
//! factorisation runs in place exactly like LAPACK's, and no memory is allocated for the
//! tiles. Tiles are `b x b` with a ragged last row and column of tiles. Executors borrow
//! several tiles at once (one written, others read); the matrix hands out such views only
//! through an `unsafe` method whose contract is that tiles written are not aliased.

use std::marker::PhantomData;

use faer::{MatMut, MatRef};
use hetla_factorizations::Tiling;
use hetla_kernels::Scalar;

use crate::{Error, Result};

/// A column-major matrix of any precision seen as tiles, borrowed for `'a`, writable or
/// read-only.
pub struct TiledMatrix<'a, T: Scalar = f64> {
    ptr: *mut T,
    ld: usize,
    tiling: Tiling,
    writable: bool,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a TiledMatrix is a borrow of scalar storage (Send + Sync data); sharing it
// between threads is sound because tiles are only written through `tile_mut_unchecked`,
// whose callers guarantee that no other view of a written tile exists at the same time.
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

impl<'a, T: Scalar> TiledMatrix<'a, T> {
    /// Tiles of `b x b` over a writable column-major view.
    pub fn new(m: MatMut<'a, T>, tile: usize, what: &'static str) -> Result<Self> {
        let ld = column_major_ld(what, m.row_stride(), m.col_stride(), m.nrows(), m.ncols())?;
        Ok(Self {
            ptr: m.as_ptr_mut(),
            ld,
            tiling: Tiling::new(m.nrows(), m.ncols(), tile)?,
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

    /// The tiling.
    pub fn tiling(&self) -> &Tiling {
        &self.tiling
    }

    /// Whether tiles may be written.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The whole matrix.
    pub fn as_mat_ref(&self) -> MatRef<'_, T> {
        // SAFETY: ptr, the dimensions and ld describe storage borrowed for 'a; reading is
        // allowed while no tile is being written (the caller holds &self, and writers need
        // the unsafe contract of tile_mut_unchecked).
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

    /// Tile (i, j), read-only.
    pub fn tile(&self, i: usize, j: usize) -> MatRef<'_, T> {
        let (r, c) = self.tiling.tile_shape(i, j);
        self.as_mat_ref()
            .submatrix(self.tiling.offset(i), self.tiling.offset(j), r, c)
    }

    /// Tile (i, j), writable, through an exclusive borrow (safe).
    pub fn tile_mut(&mut self, i: usize, j: usize) -> Option<MatMut<'_, T>> {
        // SAFETY: &mut self excludes every other view handed out by this matrix.
        self.writable
            .then(|| unsafe { self.tile_mut_unchecked(i, j) })
    }

    /// Tile (i, j), writable, through a shared borrow: how executors write one tile while
    /// reading others.
    ///
    /// # Safety
    /// The matrix must be writable, and for as long as the view lives no other view of
    /// tile (i, j) (read or write) may be used.
    pub unsafe fn tile_mut_unchecked(&self, i: usize, j: usize) -> MatMut<'_, T> {
        debug_assert!(self.writable);
        let (r, c) = self.tiling.tile_shape(i, j);
        let offset = self.tiling.offset(i) + self.tiling.offset(j) * self.ld;
        // SAFETY: the tile lies inside the borrowed storage (offset and shape come from the
        // tiling of that storage), and the caller guarantees it is not aliased.
        unsafe { MatMut::from_raw_parts_mut(self.ptr.add(offset), r, c, 1, self.ld as isize) }
    }
}

/// Views a column-major slice (`rows x cols`, leading dimension `ld`) as a matrix, checking
/// that it is long enough.
pub fn mat_from_slice<'a, T: Scalar>(
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
