//! The distributed matrices themselves: their layout, generation, scattering and gathering (see the
//! [module](super) documentation).

use std::collections::BTreeMap;

use faer::{Mat, MatRef};
use hetla_factorizations::{FACTOR, ProcessGrid, Rank, TileRef, Tiling};
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Source};

use super::wire::{self, Wire};
use crate::{Error, Result};

/// The tiles on and below the diagonal of a symmetric `n x n` matrix, those one rank of a
/// [`ProcessGrid`] owns.
#[derive(Debug, Clone, PartialEq)]
pub struct DistributedMatrix<T: Wire = f64> {
    pub(crate) tiling: Tiling,
    pub(crate) grid: ProcessGrid,
    pub(crate) rank: Rank,
    /// Only the tiles on and below the diagonal (a symmetric matrix), else every tile.
    pub(crate) lower: bool,
    pub(crate) tiles: BTreeMap<(usize, usize), Mat<T>>,
}

/// The right-hand sides of a distributed solve: an `n x nrhs` matrix, every tile held by the rank
/// the grid gives it (see the module documentation), the same grid and tile size as the factor.
/// Built and gathered like a [`DistributedMatrix`].
#[derive(Debug, Clone, PartialEq)]
pub struct DistributedRhs<T: Wire = f64>(pub(crate) DistributedMatrix<T>);

impl<T: Wire> DistributedMatrix<T> {
    /// The tiles (row, column) of the lower triangle a `grid` gives to `rank`, in the order they
    /// travel (row-major).
    pub fn owned(tiling: &Tiling, grid: &ProcessGrid, rank: Rank) -> Vec<(usize, usize)> {
        owned_tiles(tiling, grid, rank, true)
    }

    /// The tiles this rank holds of a random SPD (complex: Hermitian positive definite) matrix of
    /// order `n` ([`crate::matgen::random_hpd_block`]), each generated where it lives: no
    /// communication.
    pub fn random_spd<C: Communicator>(
        comm: &C,
        n: usize,
        tile: usize,
        grid: ProcessGrid,
        seed: u64,
    ) -> Result<Self> {
        let (tiling, rank) = layout(comm, (n, n), tile, &grid)?;
        let tiles = Self::owned(&tiling, &grid, rank)
            .into_iter()
            .map(|(i, j)| {
                let rows = tiling.offset(i)..tiling.offset(i) + tiling.tile_rows(i);
                let cols = tiling.offset(j)..tiling.offset(j) + tiling.tile_cols(j);
                ((i, j), crate::matgen::random_hpd_block(n, seed, rows, cols))
            })
            .collect();
        Ok(Self {
            tiling,
            grid,
            rank,
            lower: true,
            tiles,
        })
    }

    /// The tiles this rank holds of a general `m x n` matrix, every tile (not only a triangle's),
    /// of entries [`crate::matgen::random_block_in`]`(m, seed, ..)` (uniform in [-1, 1)), each
    /// generated where it lives: no communication. What LU and QR factor.
    pub fn random<C: Communicator>(
        comm: &C,
        (m, n): (usize, usize),
        tile: usize,
        grid: ProcessGrid,
        seed: u64,
    ) -> Result<Self> {
        DistributedRhs::random(comm, (m, n), tile, grid, seed).map(|general| general.0)
    }

    /// This rank's tiles as the caller holds them (each exactly once, each of its tile's shape,
    /// none another rank's): checked on every rank, and refused on all if wrong on one.
    pub fn from_local_tiles<C: Communicator>(
        comm: &C,
        n: usize,
        tile: usize,
        grid: ProcessGrid,
        tiles: Vec<((usize, usize), Mat<T>)>,
    ) -> Result<Self> {
        Self::from_tiles_of(comm, (n, n), true, tile, grid, tiles)
    }

    /// This rank's tiles of a general `m x n` matrix (every tile, [`DistributedMatrix::random`]'s
    /// layout) as the caller holds them, checked as [`DistributedMatrix::from_local_tiles`] checks
    /// a symmetric one's.
    pub fn from_local_general_tiles<C: Communicator>(
        comm: &C,
        (m, n): (usize, usize),
        tile: usize,
        grid: ProcessGrid,
        tiles: Vec<((usize, usize), Mat<T>)>,
    ) -> Result<Self> {
        Self::from_tiles_of(comm, (m, n), false, tile, grid, tiles)
    }

    fn from_tiles_of<C: Communicator>(
        comm: &C,
        shape: (usize, usize),
        lower: bool,
        tile: usize,
        grid: ProcessGrid,
        tiles: Vec<((usize, usize), Mat<T>)>,
    ) -> Result<Self> {
        let (tiling, rank) = layout(comm, shape, tile, &grid)?;
        let owned = owned_tiles(&tiling, &grid, rank, lower);
        let mut held = BTreeMap::new();
        let mut problem = None;
        for ((i, j), m) in tiles {
            if owned.binary_search(&(i, j)).is_err() {
                problem.get_or_insert(format!(
                    "tile ({i}, {j}) is not one of this rank's ({} of them on a {grid} grid)",
                    owned.len()
                ));
            } else if (m.nrows(), m.ncols()) != (tiling.tile_rows(i), tiling.tile_cols(j)) {
                problem.get_or_insert(format!(
                    "tile ({i}, {j}) is {}x{}, expected {}x{}",
                    m.nrows(),
                    m.ncols(),
                    tiling.tile_rows(i),
                    tiling.tile_cols(j)
                ));
            } else if held.insert((i, j), m).is_some() {
                problem.get_or_insert(format!("tile ({i}, {j}) is given twice"));
            }
        }
        if problem.is_none() && held.len() != owned.len() {
            let missing = owned.iter().find(|t| !held.contains_key(t));
            problem = missing.map(|(i, j)| format!("tile ({i}, {j}) is missing"));
        }
        agree(comm, problem)?;
        Ok(Self {
            tiling,
            grid,
            rank,
            lower,
            tiles: held,
        })
    }

    /// Rank 0's matrix (`Some` there, `None` elsewhere; its tiles on and below the diagonal are
    /// read) handed out in tiles to the ranks that own them.
    pub fn scatter<C: Communicator>(
        comm: &C,
        a: Option<MatRef<'_, T>>,
        n: usize,
        tile: usize,
        grid: ProcessGrid,
    ) -> Result<Self> {
        Self::scatter_of(comm, a, (n, n), true, tile, grid)
    }

    fn scatter_of<C: Communicator>(
        comm: &C,
        a: Option<MatRef<'_, T>>,
        (n, cols): (usize, usize),
        lower: bool,
        tile: usize,
        grid: ProcessGrid,
    ) -> Result<Self> {
        let (tiling, rank) = layout(comm, (n, cols), tile, &grid)?;
        let problem = match (rank.0, a) {
            (0, None) => Some("rank 0 must give the matrix to scatter".to_string()),
            (0, Some(a)) if (a.nrows(), a.ncols()) != (n, cols) => Some(format!(
                "the matrix to scatter is {}x{}, expected {n}x{cols}",
                a.nrows(),
                a.ncols()
            )),
            _ => None,
        };
        agree(comm, problem)?;
        let block = |a: MatRef<'_, T>, (i, j): (usize, usize)| {
            a.submatrix(
                tiling.offset(i),
                tiling.offset(j),
                tiling.tile_rows(i),
                tiling.tile_cols(j),
            )
            .to_owned()
        };
        let mut tiles = BTreeMap::new();
        if let Some(a) = a.filter(|_| rank.0 == 0) {
            for r in 0..grid.size() {
                for t in owned_tiles(&tiling, &grid, Rank(r), lower) {
                    let m = block(a, t);
                    if r == 0 {
                        tiles.insert(t, m);
                    } else {
                        let parts = wire::parts_of(m.as_ref());
                        comm.process_at_rank(r as i32).send(&parts[..]);
                    }
                }
            }
        } else {
            for (i, j) in owned_tiles(&tiling, &grid, rank, lower) {
                let (data, _) = comm.process_at_rank(0).receive_vec::<T::Part>();
                tiles.insert((i, j), tile_from(&tiling, rank, (i, j), &data)?);
            }
        }
        Ok(Self {
            tiling,
            grid,
            rank,
            lower,
            tiles,
        })
    }

    /// The whole matrix on rank 0: the tiles on and below the diagonal filled (diagonal tiles
    /// whole), those above zero; `None` on the other ranks.
    pub fn gather<C: Communicator>(&self, comm: &C) -> Result<Option<Mat<T>>> {
        let (n, cols) = (self.tiling.rows(), self.tiling.cols());
        if self.rank.0 != 0 {
            for m in self.tiles.values() {
                let parts = wire::parts_of(m.as_ref());
                comm.process_at_rank(0).send(&parts[..]);
            }
            return Ok(None);
        }
        let mut a = Mat::<T>::zeros(n, cols);
        let mut place = |(i, j): (usize, usize), m: MatRef<'_, T>| {
            a.as_mut()
                .submatrix_mut(
                    self.tiling.offset(i),
                    self.tiling.offset(j),
                    m.nrows(),
                    m.ncols(),
                )
                .copy_from(m);
        };
        for (&t, m) in &self.tiles {
            place(t, m.as_ref());
        }
        for r in 1..self.grid.size() {
            for t in owned_tiles(&self.tiling, &self.grid, Rank(r), self.lower) {
                let (data, _) = comm.process_at_rank(r as i32).receive_vec::<T::Part>();
                let m = tile_from(&self.tiling, Rank(r), t, &data)?;
                place(t, m.as_ref());
            }
        }
        Ok(Some(a))
    }

    /// The tiling (order, tile size).
    pub fn tiling(&self) -> &Tiling {
        &self.tiling
    }

    /// The process grid.
    pub fn grid(&self) -> ProcessGrid {
        self.grid
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// This rank's tiles, by (tile row, tile column).
    pub fn tiles(&self) -> &BTreeMap<(usize, usize), Mat<T>> {
        &self.tiles
    }

    /// This rank's tiles as whole block columns (tile (0, j): block column j, every row), the unit
    /// a block-column factorisation (LU, QR) runs on: assembled before its clock starts.
    pub(crate) fn block_columns(&self) -> crate::tiles::HeldTiles<T> {
        let t = self.tiling;
        let mut columns = crate::tiles::HeldTiles::new();
        for (&(i, j), tile) in &self.tiles {
            let column = columns
                .entry((0, j))
                .or_insert_with(|| Mat::zeros(t.rows(), t.tile_cols(j)));
            column
                .as_mut()
                .subrows_mut(t.offset(i), tile.nrows())
                .copy_from(tile.as_ref());
        }
        columns
    }

    /// Copies this rank's tiles back from the block columns [`DistributedMatrix::block_columns`]
    /// made (after the run).
    pub(crate) fn copy_from_block_columns(&mut self, columns: &crate::tiles::HeldTiles<T>) {
        let t = self.tiling;
        for (&(i, j), tile) in self.tiles.iter_mut() {
            if let Some(column) = columns.get(&(0, j)) {
                tile.copy_from(column.as_ref().subrows(t.offset(i), tile.nrows()));
            }
        }
    }

    /// The matrix of this one's first `rows` rows (a general one: every tile held), on the same
    /// grid and ranks: the tiles above row `rows`, the last one cut (R of a QR factor, X in the
    /// right-hand sides of a least-squares solve).
    pub(crate) fn top_rows(&self, rows: usize) -> Result<Self> {
        let tiling = Tiling::new(rows, self.tiling.cols(), self.tiling.tile())?;
        let tiles = self
            .tiles
            .iter()
            .filter(|&(&(i, _), _)| i < tiling.row_tiles())
            .map(|(&(i, j), t)| {
                (
                    (i, j),
                    t.as_ref().subrows(0, tiling.tile_rows(i)).to_owned(),
                )
            })
            .collect();
        Ok(Self {
            tiling,
            grid: self.grid,
            rank: self.rank,
            lower: false,
            tiles,
        })
    }
}

impl<T: Wire> DistributedRhs<T> {
    /// The tiles (row, column) a `grid` gives to `rank`: every tile, by its place.
    pub fn owned(tiling: &Tiling, grid: &ProcessGrid, rank: Rank) -> Vec<(usize, usize)> {
        owned_tiles(tiling, grid, rank, false)
    }

    /// This rank's tiles of the `n x nrhs` right-hand sides as the caller holds them, checked as
    /// [`DistributedMatrix::from_local_tiles`] checks a matrix's.
    pub fn from_local_tiles<C: Communicator>(
        comm: &C,
        (n, nrhs): (usize, usize),
        tile: usize,
        grid: ProcessGrid,
        tiles: Vec<((usize, usize), Mat<T>)>,
    ) -> Result<Self> {
        DistributedMatrix::from_local_general_tiles(comm, (n, nrhs), tile, grid, tiles).map(Self)
    }

    /// Rank 0's `n x nrhs` right-hand sides (`Some` there) handed out in tiles.
    pub fn scatter<C: Communicator>(
        comm: &C,
        b: Option<MatRef<'_, T>>,
        (n, nrhs): (usize, usize),
        tile: usize,
        grid: ProcessGrid,
    ) -> Result<Self> {
        DistributedMatrix::scatter_of(comm, b, (n, nrhs), false, tile, grid).map(Self)
    }

    /// The right-hand sides [`crate::matgen::random_in`]`(n, nrhs, seed)` (in another precision
    /// [`crate::matgen::random_block_in`]'s), each tile generated where it lives (no
    /// communication).
    pub fn random<C: Communicator>(
        comm: &C,
        (n, nrhs): (usize, usize),
        tile: usize,
        grid: ProcessGrid,
        seed: u64,
    ) -> Result<Self> {
        let (tiling, rank) = layout(comm, (n, nrhs), tile, &grid)?;
        let tiles = owned_tiles(&tiling, &grid, rank, false)
            .into_iter()
            .map(|(i, j)| {
                let rows = tiling.offset(i)..tiling.offset(i) + tiling.tile_rows(i);
                let cols = tiling.offset(j)..tiling.offset(j) + tiling.tile_cols(j);
                ((i, j), crate::matgen::random_block_in(n, seed, rows, cols))
            })
            .collect();
        Ok(Self(DistributedMatrix {
            tiling,
            grid,
            rank,
            lower: false,
            tiles,
        }))
    }

    /// The whole `n x nrhs` matrix on rank 0, `None` on the other ranks.
    pub fn gather<C: Communicator>(&self, comm: &C) -> Result<Option<Mat<T>>> {
        self.0.gather(comm)
    }

    /// The tiling (rows, right-hand sides, tile size).
    pub fn tiling(&self) -> &Tiling {
        &self.0.tiling
    }

    /// This rank's tiles, by (tile row, tile column).
    pub fn tiles(&self) -> &BTreeMap<(usize, usize), Mat<T>> {
        &self.0.tiles
    }
}

/// The tiles (row, column) of a matrix tiled by `tiling` that `grid` gives to `rank`, in the order
/// they travel (row-major): those on and below the diagonal only when `lower`.
fn owned_tiles(
    tiling: &Tiling,
    grid: &ProcessGrid,
    rank: Rank,
    lower: bool,
) -> Vec<(usize, usize)> {
    let cols = tiling.col_tiles();
    (0..tiling.row_tiles())
        .flat_map(|i| (0..if lower { i + 1 } else { cols }).map(move |j| (i, j)))
        .filter(|&(i, j)| grid.owner(TileRef::new(FACTOR, i, j)) == rank)
        .collect()
}

/// The tiling of a `rows x cols` matrix in tiles of `tile`, and this rank, after checking that the
/// grid has as many processes as the communicator (the same on every rank, so all refuse).
fn layout<C: Communicator>(
    comm: &C,
    (rows, cols): (usize, usize),
    tile: usize,
    grid: &ProcessGrid,
) -> Result<(Tiling, Rank)> {
    if grid.size() != comm.size() as usize {
        return Err(Error::InvalidOption {
            option: "grid",
            reason: format!(
                "a {grid} grid has {} processes but the job has {} ranks: start it with mpirun -np {}",
                grid.size(),
                comm.size(),
                grid.size()
            ),
        });
    }
    let tiling = Tiling::new(rows, cols, tile)?;
    Ok((tiling, Rank(comm.rank() as usize)))
}

/// A tile of `(rows, cols)` from a received column-major message, or why not.
fn tile_from<T: Wire>(
    tiling: &Tiling,
    from: Rank,
    (i, j): (usize, usize),
    data: &[T::Part],
) -> Result<Mat<T>> {
    let (rows, cols) = (tiling.tile_rows(i), tiling.tile_cols(j));
    wire::tile_of(rows, cols, data).ok_or_else(|| Error::Distributed {
        rank: from.0,
        reason: format!(
            "tile ({i}, {j}) arrived with {} values, expected {rows} x {cols}",
            data.len() / T::PARTS
        ),
    })
}

/// The first problem this rank finds, before any work, in the general matrix `a` of a block-column
/// factorisation (`family`: "LU", "QR") run on tiles of `tile` (the builder's, if it set one): a
/// lower-only matrix (`shape` is the family's own check of the shape, after it), a grid of more
/// than one process row (unless `tiles_too`: the family runs by tiles on such grids), another tile
/// size, a NaN or an infinity in this rank's tiles.
pub(crate) fn block_column_problem<T: Wire>(
    a: &DistributedMatrix<T>,
    (family, tiles_too): (&str, bool),
    shape: Option<String>,
    tile: Option<usize>,
) -> Option<String> {
    let grid = a.grid;
    let mut problem = if a.lower {
        Some(format!(
            "the matrix holds only a lower triangle (a symmetric one, from random_spd or from_local_tiles): {family} factors a general matrix, every tile (DistributedMatrix::random, from_local_general_tiles)"
        ))
    } else if shape.is_some() {
        shape
    } else if grid.rows() != 1 && !tiles_too {
        Some(format!(
            "the grid is {grid}: distributed {family} runs on 1 x Q grids (a block column on one rank); P x Q with P > 1 is not built yet"
        ))
    } else {
        None
    };
    if let Some(t) = tile.filter(|&t| t != a.tiling.tile()) {
        problem.get_or_insert(format!(
            "the tile size {t} is not the distributed matrix's ({})",
            a.tiling.tile()
        ));
    }
    problem.or_else(|| non_finite("A", a))
}

/// Where this rank's tiles of `m` (named `what`) first hold a NaN or an infinity, as a problem to
/// agree on before any work (each rank checks its own tiles, as one node checks its matrix); of a
/// lower-only matrix's diagonal tiles, the lower triangle that is read.
pub(crate) fn non_finite<T: Wire>(what: &'static str, m: &DistributedMatrix<T>) -> Option<String> {
    m.tiles.iter().find_map(|(&(i, j), tile)| {
        let checked = match m.lower && i == j {
            true => crate::check::check_finite_triangle(what, tile.as_ref(), true),
            false => crate::check::check_finite(what, tile.as_ref()),
        };
        checked
            .err()
            .map(|e| format!("in its tile ({i}, {j}): {e}"))
    })
}

/// What the ranks that found no problem say of the lowest rank that did (it says why itself).
pub(crate) const REFUSED: &str = "refused its part of a collective call (it says why)";

/// Ends a collective check: when any rank found a problem, every rank returns an error (the ranks
/// that found one say what; the others name the lowest rank that did).
pub(crate) fn agree<C: Communicator>(comm: &C, problem: Option<String>) -> Result<()> {
    let mine = if problem.is_some() {
        comm.rank()
    } else {
        comm.size()
    };
    let mut first = comm.size();
    comm.all_reduce_into(&mine, &mut first, SystemOperation::min());
    match problem {
        Some(reason) => Err(Error::Distributed {
            rank: comm.rank() as usize,
            reason,
        }),
        None if first < comm.size() => Err(Error::Distributed {
            rank: first as usize,
            reason: REFUSED.into(),
        }),
        None => Ok(()),
    }
}
