//! Cutting a matrix into tiles.

/// Errors in describing a tiling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TilingError {
    /// A tile size of zero cannot cover anything.
    #[error("tile size must be at least 1, got 0")]
    ZeroTileSize,
    /// An algorithm that needs a square matrix got a rectangular tiling.
    #[error("expected a square matrix, got {rows}x{cols}")]
    NotSquare {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// An algorithm that needs at least as many rows as columns (a block-column QR) got fewer.
    #[error("expected at least as many rows as columns, got {rows}x{cols}")]
    Wide {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// Two tilings that must agree (the factor and the right-hand sides) do not.
    #[error(
        "the right-hand sides have {rhs_rows} rows (tile {rhs_tile}) but the factor is {n}x{n} (tile {tile})"
    )]
    Mismatch {
        /// Order of the factor.
        n: usize,
        /// Tile size of the factor.
        tile: usize,
        /// Rows of the right-hand sides.
        rhs_rows: usize,
        /// Tile size of the right-hand sides.
        rhs_tile: usize,
    },
}

/// A `rows x cols` matrix cut into `tile x tile` tiles; the last row and column of tiles are ragged
/// (smaller) when `tile` does not divide the dimension. A tile larger than the matrix gives a
/// single tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    rows: usize,
    cols: usize,
    tile: usize,
}

impl Tiling {
    /// A tiling of a `rows x cols` matrix with square tiles of side `tile` (>= 1).
    pub fn new(rows: usize, cols: usize, tile: usize) -> Result<Self, TilingError> {
        if tile == 0 {
            return Err(TilingError::ZeroTileSize);
        }
        Ok(Self { rows, cols, tile })
    }

    /// A tiling of an `n x n` matrix.
    pub fn square(n: usize, tile: usize) -> Result<Self, TilingError> {
        Self::new(n, n, tile)
    }

    /// Rows of the whole matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the whole matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The nominal tile side.
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// Number of tile rows.
    pub fn row_tiles(&self) -> usize {
        self.rows.div_ceil(self.tile)
    }

    /// Number of tile columns.
    pub fn col_tiles(&self) -> usize {
        self.cols.div_ceil(self.tile)
    }

    /// First row (or column) of tile index `i`.
    pub fn offset(&self, i: usize) -> usize {
        i * self.tile
    }

    /// Rows of the tiles in tile row `i` (smaller for the ragged last one).
    pub fn tile_rows(&self, i: usize) -> usize {
        self.tile.min(self.rows - self.offset(i))
    }

    /// Columns of the tiles in tile column `j` (smaller for the ragged last one).
    pub fn tile_cols(&self, j: usize) -> usize {
        self.tile.min(self.cols - self.offset(j))
    }

    /// Shape (rows, cols) of tile (i, j).
    pub fn tile_shape(&self, i: usize, j: usize) -> (usize, usize) {
        (self.tile_rows(i), self.tile_cols(j))
    }

    /// Errors unless the matrix is square.
    pub fn ensure_square(&self) -> Result<(), TilingError> {
        if self.rows == self.cols {
            Ok(())
        } else {
            Err(TilingError::NotSquare {
                rows: self.rows,
                cols: self.cols,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_tiles_cover_the_matrix_exactly() {
        let t = Tiling::new(10, 7, 4).unwrap();
        assert_eq!((t.row_tiles(), t.col_tiles()), (3, 2));
        assert_eq!(
            (0..3).map(|i| t.tile_rows(i)).collect::<Vec<_>>(),
            [4, 4, 2]
        );
        assert_eq!((0..2).map(|j| t.tile_cols(j)).collect::<Vec<_>>(), [4, 3]);
        let big = Tiling::square(5, 100).unwrap();
        assert_eq!((big.row_tiles(), big.tile_shape(0, 0)), (1, (5, 5)));
        let empty = Tiling::square(0, 3).unwrap();
        assert_eq!(empty.row_tiles(), 0);
        assert_eq!(Tiling::square(4, 0), Err(TilingError::ZeroTileSize));
        assert!(Tiling::new(4, 5, 2).unwrap().ensure_square().is_err());
    }
}
