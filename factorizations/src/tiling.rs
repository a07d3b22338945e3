//! Cutting a matrix into tiles: square tiles of one side, the last row and column of tiles ragged;
//! or, with a [`Tail`], tiles of a smaller side from a given row and column on (a smaller tile on
//! the critical path of the end of a factorisation, where few tasks are left beside it: issue 72's
//! "tiles that fit the step"). Every tile's place and shape comes from [`Tiling::offset`] and
//! [`Tiling::tile_shape`], so code that goes through them works on both.

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
    /// A tail that does not fit its tiling.
    #[error("bad tail (tiles of {tail_tile} from row and column {from}): {reason}")]
    Tail {
        /// Where the tail starts.
        from: usize,
        /// Its tiles' side.
        tail_tile: usize,
        /// What is wrong and what would be right.
        reason: String,
    },
}

/// The end of a square tiling cut into smaller tiles: from row (and column) `from`, a multiple of
/// the tiling's tile, tiles of side `tile` (smaller than the tiling's), the last ragged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Tail {
    /// The first row and column of the tail.
    pub from: usize,
    /// The side of the tail's tiles.
    pub tile: usize,
}

impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tiles of {} from {}", self.tile, self.from)
    }
}

/// A `rows x cols` matrix cut into `tile x tile` tiles; the last row and column of tiles are ragged
/// (smaller) when `tile` does not divide the dimension. A tile larger than the matrix gives a
/// single tile. With a [`Tail`] ([`Tiling::with_tail`]), rows and columns from the tail's start are
/// cut in tiles of the tail's side instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    rows: usize,
    cols: usize,
    tile: usize,
    tail: Option<Tail>,
}

impl Tiling {
    /// A tiling of a `rows x cols` matrix with square tiles of side `tile` (>= 1).
    pub fn new(rows: usize, cols: usize, tile: usize) -> Result<Self, TilingError> {
        if tile == 0 {
            return Err(TilingError::ZeroTileSize);
        }
        Ok(Self {
            rows,
            cols,
            tile,
            tail: None,
        })
    }

    /// This square tiling with its rows and columns from `tail.from` on cut into tiles of
    /// `tail.tile`. Refused unless the matrix is square, `tail.from` is a multiple of the tile
    /// strictly inside the matrix, and the tail's tile is at least 1 and smaller than the tiling's.
    pub fn with_tail(self, tail: Tail) -> Result<Self, TilingError> {
        self.ensure_square()?;
        let refuse = |reason: String| {
            Err(TilingError::Tail {
                from: tail.from,
                tail_tile: tail.tile,
                reason,
            })
        };
        let (n, b) = (self.rows, self.tile);
        if tail.tile == 0 || tail.tile >= b {
            return refuse(format!(
                "its tile must be at least 1 and smaller than the tile {b}"
            ));
        }
        if tail.from == 0 || tail.from >= n || !tail.from.is_multiple_of(b) {
            return refuse(format!(
                "it must start at a multiple of the tile {b} from {b} to {} (the order {n} less one)",
                n.saturating_sub(1)
            ));
        }
        Ok(Self {
            tail: Some(tail),
            ..self
        })
    }

    /// The tail, if the tiling has one.
    pub fn tail(&self) -> Option<Tail> {
        self.tail
    }

    /// Tiles before the tail (all of them for a tiling without one).
    fn head_tiles(&self) -> usize {
        self.tail.map_or(usize::MAX, |t| t.from / self.tile)
    }

    /// Tiles covering `len` rows or columns.
    fn tiles_over(&self, len: usize) -> usize {
        match self.tail {
            Some(t) if len > t.from => self.head_tiles() + (len - t.from).div_ceil(t.tile),
            _ => len.div_ceil(self.tile),
        }
    }

    /// The side of the tiles of index `i` before any ragged cut.
    fn side(&self, i: usize) -> usize {
        match self.tail {
            Some(t) if i >= self.head_tiles() => t.tile,
            _ => self.tile,
        }
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

    /// The nominal tile side (the tiles before a tail).
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// Number of tile rows.
    pub fn row_tiles(&self) -> usize {
        self.tiles_over(self.rows)
    }

    /// Number of tile columns.
    pub fn col_tiles(&self) -> usize {
        self.tiles_over(self.cols)
    }

    /// First row (or column) of tile index `i`.
    pub fn offset(&self, i: usize) -> usize {
        match self.tail {
            Some(t) if i > self.head_tiles() => t.from + (i - self.head_tiles()) * t.tile,
            _ => i * self.tile,
        }
    }

    /// Rows of the tiles in tile row `i` (smaller for the ragged last one).
    pub fn tile_rows(&self, i: usize) -> usize {
        self.side(i).min(self.rows - self.offset(i))
    }

    /// Columns of the tiles in tile column `j` (smaller for the ragged last one).
    pub fn tile_cols(&self, j: usize) -> usize {
        self.side(j).min(self.cols - self.offset(j))
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

    #[test]
    fn a_tail_cuts_the_end_of_the_matrix_in_smaller_tiles() {
        let tail = Tail { from: 8, tile: 3 };
        let t = Tiling::square(15, 4).unwrap().with_tail(tail).unwrap();
        // Two tiles of 4, then 3, 3 and a ragged 1.
        assert_eq!(t.row_tiles(), 5);
        assert_eq!(t.col_tiles(), 5);
        let offsets: Vec<_> = (0..5).map(|i| t.offset(i)).collect();
        assert_eq!(offsets, [0, 4, 8, 11, 14]);
        let sides: Vec<_> = (0..5).map(|i| t.tile_rows(i)).collect();
        assert_eq!(sides, [4, 4, 3, 3, 1]);
        assert_eq!(t.tile_shape(3, 1), (3, 4));
        assert_eq!((t.tile(), t.tail()), (4, Some(tail)));
        // The tiles cover the matrix exactly, in order.
        for i in 0..4 {
            assert_eq!(t.offset(i) + t.tile_rows(i), t.offset(i + 1));
        }
        let square = Tiling::square(15, 4).unwrap();
        for bad in [
            Tail { from: 6, tile: 3 },
            Tail { from: 0, tile: 3 },
            Tail { from: 16, tile: 3 },
            Tail { from: 8, tile: 4 },
            Tail { from: 8, tile: 0 },
        ] {
            let err = square.with_tail(bad).unwrap_err();
            assert!(matches!(err, TilingError::Tail { .. }), "{bad:?}: {err}");
        }
        let wide = Tiling::new(15, 16, 4).unwrap();
        assert!(matches!(
            wide.with_tail(tail),
            Err(TilingError::NotSquare { .. })
        ));
        assert_eq!(
            square
                .with_tail(Tail { from: 6, tile: 3 })
                .unwrap_err()
                .to_string(),
            "bad tail (tiles of 3 from row and column 6): it must start at a multiple of the tile 4 \
             from 4 to 14 (the order 15 less one)"
        );
    }
}
