//! What a family gives the rest of the system ([`Room`]), implemented once in each family's folder
//! (`src/cholesky/room.rs`...), and what its methods take.

use std::sync::Arc;
use std::time::Instant;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::Precision;
use hetla_runtime::{Platform, SchedulerKind, Trace};

use crate::{Plan, Result};

/// What a family gives the rest of the system (implemented once in each family's folder).
pub(crate) trait Room: Sync {
    /// Its name in reports ("Cholesky", "LU").
    fn title(&self) -> &'static str;

    /// Its flop count as a formula of the order ("n^3/3"; QR's of m and n).
    fn flops_formula(&self) -> &'static str;

    /// Whether it factors `m x n` matrices (QR), not only square ones.
    fn takes_rows(&self) -> bool {
        false
    }

    /// Whether it runs over a process grid.
    fn distributed(&self) -> bool {
        false
    }

    /// Whether its distributed run is fastest on one process row (LU's and QR's panels then need no
    /// exchange between rows), so that N nodes alone mean a 1 x N grid.
    fn on_one_process_row(&self) -> bool {
        false
    }

    /// The plans a run of an `m x n` matrix (m = n but for QR) in tiles of `tile` executes, in
    /// order, on a platform of `workers` workers.
    fn plans(&self, shape: Shape, precision: Precision, workers: usize) -> Result<Vec<Plan>>;

    /// The plan a modelled command simulates and bounds: the family's own graph (the inverse's
    /// without the factorisation before it), on `grid` the one a distributed run executes.
    fn modelled_plan(
        &self,
        grid: Option<ProcessGrid>,
        shape: Shape,
        precision: Precision,
    ) -> Result<Plan>;

    /// The cluster spec and scheduler a user who gives none gets.
    fn defaults(&self) -> (ClusterSpec, SchedulerKind);

    /// The tile a user who gives none gets for an `m x n` matrix on `platform`.
    fn default_tile(
        &self,
        platform: &Arc<Platform>,
        m: usize,
        n: usize,
        precision: Precision,
    ) -> usize;

    /// Factors a random matrix of the family's kind as `job` says: the seconds of the library's
    /// calls and each graph's trace, beside `plans` (made by [`Room::plans`] for the job).
    fn run(&self, job: &Job<'_>, plans: &[Plan]) -> Result<(f64, Vec<Trace>)>;
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
