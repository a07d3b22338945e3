//! Tiles over processes: the 2D block-cyclic layout and the messages a task graph needs.
//!
//! A [`ProcessGrid`] of P x Q ranks owns tile (i, j) of every matrix at rank
//! `(i mod P) * Q + (j mod Q)`: ScaLAPACK's layout with row-major rank order (BLACS grid order
//! "R"), so a matrix a user already distributes that way maps tile for tile.
//!
//! Tasks run where their output lives ("owner computes"): a task runs on the rank owning the tile
//! it writes. Every write of a tile therefore happens on its owner, and a task on another rank that
//! reads the tile needs it sent there once per version (the version is the task that wrote it last,
//! or the initial data). [`messages`] lists each (tile, version, destination) once, in the order
//! the first task needing it was submitted: the exact communication of a distributed run, which
//! [`bytes_sent`] totals per rank. The runtime posts its sends and receives from this list; tests
//! check it against the closed form of the tiled Cholesky factorisation.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use crate::graph::{TaskGraph, TaskId, TileRef};

/// A process (an MPI rank) of a [`ProcessGrid`], numbered row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Rank(pub usize);

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

crate::index_by!(Rank);

/// Why a process grid was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GridError {
    /// Not of the form `PxQ`.
    #[error("{0:?} is not a process grid: expected PxQ, for example 2x2")]
    Syntax(String),
    /// A dimension is 0.
    #[error("a process grid of {rows}x{cols} has no process: both must be at least 1")]
    Empty {
        /// P.
        rows: usize,
        /// Q.
        cols: usize,
    },
    /// More processes than MPI can number (its ranks are 32-bit).
    #[error(
        "a process grid of {rows}x{cols} has more processes than MPI can number: P x Q must be at most {MAX_RANKS}"
    )]
    TooLarge {
        /// P.
        rows: usize,
        /// Q.
        cols: usize,
    },
}

/// The most processes a grid may have: MPI numbers its ranks with 32-bit integers.
pub const MAX_RANKS: usize = i32::MAX as usize;

/// P x Q processes holding tiles 2D block-cyclically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ProcessGrid {
    rows: usize,
    cols: usize,
}

impl ProcessGrid {
    /// A grid of `rows` x `cols` processes (both at least 1).
    pub fn new(rows: usize, cols: usize) -> Result<Self, GridError> {
        if rows == 0 || cols == 0 {
            return Err(GridError::Empty { rows, cols });
        }
        if rows.checked_mul(cols).is_none_or(|size| size > MAX_RANKS) {
            return Err(GridError::TooLarge { rows, cols });
        }
        Ok(Self { rows, cols })
    }

    /// P, the process rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Q, the process columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// P x Q, the number of ranks.
    pub fn size(&self) -> usize {
        self.rows * self.cols
    }

    /// The largest tile of a matrix of order `n` that leaves every process row and column of the
    /// grid a block: n over the grid's longer side (at least 1).
    pub fn largest_tile(&self, n: usize) -> usize {
        n.div_ceil(self.rows.max(self.cols)).max(1)
    }

    /// The rank that owns `tile`: `(row mod P) * Q + (col mod Q)`.
    pub fn owner(&self, tile: TileRef) -> Rank {
        Rank((tile.row % self.rows) * self.cols + tile.col % self.cols)
    }

    /// The (process row, process column) of `rank`.
    pub fn coords(&self, rank: Rank) -> (usize, usize) {
        (rank.0 / self.cols, rank.0 % self.cols)
    }
}

impl fmt::Display for ProcessGrid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

impl FromStr for ProcessGrid {
    type Err = GridError;

    fn from_str(s: &str) -> Result<Self, GridError> {
        let syntax = || GridError::Syntax(s.to_string());
        let (p, q) = s.trim().split_once(['x', 'X']).ok_or_else(syntax)?;
        let dim = |d: &str| d.trim().parse::<usize>().map_err(|_| syntax());
        Self::new(dim(p)?, dim(q)?)
    }
}

/// The rank that runs `task`: the owner of the tile it writes (its last access).
pub fn task_rank(graph: &TaskGraph, grid: &ProcessGrid, task: TaskId) -> Rank {
    let accesses = &graph.task(task).accesses;
    accesses
        .iter()
        .rev()
        .find(|a| a.mode.writes())
        .or(accesses.last())
        .map_or(Rank(0), |a| grid.owner(a.tile))
}

/// One tile sent between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Message {
    /// The tile.
    pub tile: TileRef,
    /// The task whose write is sent (`None`: the tile as the run found it).
    pub version: Option<TaskId>,
    /// The rank that holds this version: where its writer ran (the tile's owner, unless a task
    /// elsewhere wrote it), or the owner for the tile as the run found it.
    pub from: Rank,
    /// A rank that runs a task reading this version, or (`first_reader` `None`) the tile's owner,
    /// to which its final version returns.
    pub to: Rank,
    /// The first task on `to` that reads it; `None` for a final version returning to its owner.
    pub first_reader: Option<TaskId>,
}

/// Every tile version a distributed run of `graph` on `grid` sends, once per destination, in the
/// order of the first task that needs it, then the final versions written away from their owners,
/// which return to them (in the order of their writers).
///
/// A task runs on the owner of the tile it writes last ([`task_rank`]); a task that also writes a
/// tile another rank owns (a merge of two ranks' triangles in a distributed QR) receives that
/// tile's current version like any input, and its write is the version later readers receive from
/// its rank.
pub fn messages(graph: &TaskGraph, grid: &ProcessGrid) -> Vec<Message> {
    let mut version: HashMap<TileRef, TaskId> = HashMap::new();
    // Where each tile's current version is, when a task away from its owner wrote it.
    let mut away: HashMap<TileRef, Rank> = HashMap::new();
    let mut sent: HashSet<(TileRef, Option<TaskId>, Rank)> = HashSet::new();
    let mut out = Vec::new();
    for t in graph.ids() {
        let rank = task_rank(graph, grid, t);
        let accesses = &graph.task(t).accesses;
        for a in accesses.iter().filter(|a| a.mode.reads()) {
            let from = away
                .get(&a.tile)
                .copied()
                .unwrap_or_else(|| grid.owner(a.tile));
            let v = version.get(&a.tile).copied();
            if from != rank && sent.insert((a.tile, v, rank)) {
                out.push(Message {
                    tile: a.tile,
                    version: v,
                    from,
                    to: rank,
                    first_reader: Some(t),
                });
            }
        }
        for a in accesses.iter().filter(|a| a.mode.writes()) {
            version.insert(a.tile, t);
            if rank == grid.owner(a.tile) {
                away.remove(&a.tile);
            } else {
                away.insert(a.tile, rank);
            }
        }
    }
    // The same order on every rank: by writer, then tile. A final version that its owner already
    // receives (a task of the owner reads it) is not sent twice.
    let mut returning: Vec<Message> = away
        .into_iter()
        .filter(|&(tile, _)| {
            let owner = grid.owner(tile);
            !sent.contains(&(tile, version.get(&tile).copied(), owner))
        })
        .map(|(tile, from)| Message {
            tile,
            version: version.get(&tile).copied(),
            from,
            to: grid.owner(tile),
            first_reader: None,
        })
        .collect();
    returning.sort_unstable_by_key(|m| (m.version, m.tile));
    out.extend(returning);
    out
}

/// Bytes each rank sends, by rank, for `messages` of tiles of `tile_bytes` bytes.
pub fn bytes_sent(
    grid: &ProcessGrid,
    messages: &[Message],
    tile_bytes: impl Fn(TileRef) -> usize,
) -> Vec<usize> {
    let mut bytes = vec![0; grid.size()];
    for m in messages {
        bytes[m.from] += tile_bytes(m.tile);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::MatrixId;

    /// A matrix of the tests' tiles.
    const FACTOR: MatrixId = MatrixId(0);

    #[test]
    fn grids_parse_and_own_tiles_block_cyclically() {
        let g: ProcessGrid = "2x3".parse().unwrap();
        assert_eq!((g.rows(), g.cols(), g.size()), (2, 3, 6));
        assert_eq!(g.owner(TileRef::new(FACTOR, 0, 0)), Rank(0));
        assert_eq!(g.owner(TileRef::new(FACTOR, 1, 2)), Rank(5));
        assert_eq!(g.owner(TileRef::new(FACTOR, 3, 4)), Rank(4));
        assert_eq!(g.coords(Rank(4)), (1, 1));
        assert_eq!(g.to_string(), "2x3");
        assert_eq!(
            "0x2".parse::<ProcessGrid>(),
            Err(GridError::Empty { rows: 0, cols: 2 })
        );
        let huge = format!("{}x{}", u32::MAX, u32::MAX);
        assert!(matches!(
            huge.parse::<ProcessGrid>(),
            Err(GridError::TooLarge { .. })
        ));
        for bad in ["", "2", "2x", "x2", "2x-1", "axb", "2x2x2"] {
            let err = bad.parse::<ProcessGrid>().unwrap_err();
            assert!(err.to_string().contains("PxQ"), "{bad:?}: {err}");
        }
    }
}
