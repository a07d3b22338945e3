//! What a family gives the rest of the system ([`Room`]), one constant in each family's folder
//! (`src/cholesky/room.rs`...), and what its functions take.

use std::sync::Arc;
use std::time::Instant;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::Precision;
use hetla_runtime::{Platform, SchedulerKind, Trace};

use crate::{Algorithm, Plan, Result};

/// What a family gives the rest of the system: one constant in each family's folder (its
/// `room.rs`), reached through [`Family::room`](crate::Family).
pub(crate) struct Room {
    /// What it is: its title, flop count, shapes and grids.
    pub about: About,
    /// The algorithm a modelled command simulates and bounds: the family's own graph (the inverse's
    /// without the factorisation before it), on a grid the one its distributed run executes, beside
    /// GPUs the one a run there executes (QR's in block columns).
    pub algorithm: fn(Place, Shape) -> Algorithm,
    /// The algorithms a run executes in order beside so many GPUs on a platform of so many workers,
    /// where they are not the modelled one alone (the inverse's: Cholesky's first; QR's tree
    /// resolved for the workers, or beside GPUs its block columns).
    pub run_algorithms: Option<RunAlgorithms>,
    /// The cluster spec and scheduler a user who gives none gets.
    pub defaults: fn() -> (ClusterSpec, SchedulerKind),
    /// The tile a user who gives none gets for a matrix of the shape on the platform.
    pub default_tile: fn(&Arc<Platform>, Shape, Precision) -> usize,
    /// Factors a random matrix of the family's kind as the job says: the seconds of the library's
    /// calls and each graph's trace, beside the plans of its run algorithms.
    pub run: fn(&Job<'_>, &[Plan]) -> Timed,
}

/// The algorithms a run executes in order at a place, for a shape, on so many workers
/// ([`Room::run_algorithms`]).
pub(crate) type RunAlgorithms = fn(Place, Shape, usize) -> Vec<Algorithm>;

/// The seconds of a family's run and each graph's trace.
pub(crate) type Timed = Result<(f64, Vec<Trace>)>;

/// What a family is ([`Room::about`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct About {
    /// Its name in reports ("Cholesky", "LU").
    pub title: &'static str,
    /// Its flop count as a formula of the order ("n^3/3"; QR's of m and n).
    pub flops: &'static str,
    /// Whether it factors `m x n` matrices (QR), not only square ones.
    pub takes_rows: bool,
    /// Where it runs over process grids: nowhere, any grid, or fastest on one process row (LU's and
    /// QR's panels then need no exchange between rows, so N nodes alone mean a 1 x N grid).
    pub grid: Grid,
}

impl About {
    /// A family's title, flop formula, whether it takes rows and where it runs over grids.
    pub(crate) const fn new(
        title: &'static str,
        flops: &'static str,
        rows: bool,
        grid: Grid,
    ) -> Self {
        let takes_rows = rows;
        Self {
            title,
            flops,
            takes_rows,
            grid,
        }
    }
}

/// Where a family runs over process grids ([`About::grid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grid {
    /// On one node only.
    None,
    /// On any grid, N nodes alone being as square a grid as N allows.
    Any,
    /// On any grid, N nodes alone being 1 x N.
    OneRow,
}

/// Where a modelled run happens: on a process grid (`None`: one node) and beside so many GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub grid: Option<ProcessGrid>,
    pub gpus: usize,
}

/// The shape of a family's matrix and its tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub m: usize,
    pub n: usize,
    pub tile: usize,
}

/// A real run of a family ([`Family::run`]).
pub(crate) struct Job<'a> {
    pub platform: &'a Arc<Platform>,
    pub shape: Shape,
    pub scheduler: SchedulerKind,
    pub precision: Precision,
    pub seed: u64,
}

impl Job<'_> {
    /// Times `f`, the library's calls of a run.
    pub(crate) fn timed<R>(f: impl FnOnce() -> Result<R>) -> Result<(f64, R)> {
        let start = Instant::now();
        let r = f()?;
        Ok((start.elapsed().as_secs_f64(), r))
    }
}
