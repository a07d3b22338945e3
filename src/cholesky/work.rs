//! Cholesky's work: its tasks on a store's tiles, with one side datum of its own. A plan for a
//! backend whose solves run faster through the inverse (OpenBLAS: its TRMM runs at twice its TRSM)
//! has a [`Op::PanelInverse`] task after the POTRF of each long enough panel
//! ([`MIN_PANEL_SOLVES`]); it inverts the diagonal tile's unit factor in a copy of the tile kept
//! here, and the panel's TRSMs, which the graph orders after it, become products with that inverse
//! (`Backend::trsm_by_inverse`). The store is never written outside the factor's lower triangle,
//! whatever storage holds it. A tile too ill-conditioned for the product keeps no inverse, and its
//! panel is solved as usual.

use std::sync::OnceLock;

use faer::{Mat, Par};
use hetla_factorizations::{FACTOR, Op, TaskId, TileRef};
use hetla_kernels::{KernelError, Scalar};
use hetla_runtime::{
    Platform, RunOptions, Trace, Workload, execute as run_graph, execute_checked as run_checked,
};

use crate::plan::{Algorithm, Plan, expect_precision, run_error, tile_work};
use crate::tiles::{TileStore, TileWork, delegate_to_tiles, operands};
use crate::{Error, Result};

/// Runs a plan of Cholesky's on `platform` over the tiles `store` holds: a factor's tasks through
/// [`InvertingWork`] (its panel inverses' copies), any other plan as [`Plan::execute`] runs it.
pub(crate) fn execute<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    options: &RunOptions,
) -> Result<Trace> {
    let run_options = plan.run_options_on(platform, options);
    let run = |work: &InvertingWork<'_, T>| {
        run_graph(platform, work, &run_options).map_err(|e| run_error(plan, e))
    };
    on_work(plan, platform, store, run)?.unwrap_or_else(|| plan.execute(platform, store, options))
}

/// Runs a Cholesky factorisation's plan as [`execute`] does, with `check` reading the store's input
/// beside the run ([`hetla_runtime::execute_checked`]: nothing writes host memory until it has
/// returned); the run's result and the check's (its error first when both fail).
pub(crate) fn execute_checked<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    options: &RunOptions,
    check: impl FnOnce() -> Result<f64>,
) -> Result<(Trace, f64)> {
    let run_options = plan.run_options_on(platform, options);
    let run = |work: &InvertingWork<'_, T>| run_checked(platform, work, &run_options, check);
    let (run, norm) = on_work(plan, platform, store, run)?.ok_or_else(|| Error::InvalidOption {
        option: "plan",
        reason: format!(
            "an input check runs beside a Cholesky factorisation, not a {}",
            plan.algorithm().name()
        ),
    })?;
    let norm = norm?;
    run.map(|trace| (trace, norm))
        .map_err(|e| run_error(plan, e))
}

/// `run` on a Cholesky factor's tasks over `store` ([`InvertingWork`]), its runtime error as the
/// plan's; `None` for a plan of another algorithm.
fn on_work<T: Scalar, R>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    run: impl FnOnce(&InvertingWork<'_, T>) -> R,
) -> Result<Option<R>> {
    let Algorithm::Cholesky { n } = plan.algorithm() else {
        return Ok(None);
    };
    expect_precision(plan, T::PRECISION)?;
    let shape = |tile| plan.shape(tile);
    let tiles = tile_work(plan, &shape, store, platform);
    let row_tiles = (plan.tiling(FACTOR)).map_or(n.div_ceil(plan.tile().max(1)), |t| t.row_tiles());
    Ok(Some(run(&InvertingWork::new(tiles, row_tiles))))
}

/// The fewest solves a panel must have for its diagonal tile to be inverted: the inversion (b^3/3
/// flops at about 20-40 Gflop/s in a run) lengthens the critical path, and each solve through the
/// inverse saves about b^3/58 s-Gflop on one AVX-512 core; measured with OpenBLAS on 2 cores, a
/// panel of one solve (tile 2048 at n = 4096 on one 2-core cluster) lost 28% and panels of 3 (tile
/// 1024) 8%, while panels of up to 15 (tile 512 at n = 8192 on two 1-core clusters) gained 4%.
pub(crate) const MIN_PANEL_SOLVES: usize = 4;

/// A Cholesky plan's tasks over a store (see the module documentation).
pub(crate) struct InvertingWork<'w, T: Scalar> {
    /// The tasks as they are.
    pub tiles: TileWork<'w, T>,
    /// Diagonal tile k's copy holding its unit factor's inverse in its strict upper triangle, once
    /// its panel-inverse task has made one.
    inverses: Vec<OnceLock<Mat<T>>>,
}

impl<'w, T: Scalar> InvertingWork<'w, T> {
    /// The work of `tiles`, whose factored matrix has `row_tiles` tile rows (a slot for each
    /// diagonal tile's inverse when the graph has panel inverses, none otherwise).
    pub fn new(tiles: TileWork<'w, T>, row_tiles: usize) -> Self {
        let inverts = tiles.graph.tasks().iter().any(|t| t.op == Op::PanelInverse);
        let slots = if inverts { row_tiles } else { 0 };
        Self {
            tiles,
            inverses: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The inverse kept for diagonal tile `tile` of the factored matrix, if any.
    fn inverse(&self, tile: TileRef) -> Option<&Mat<T>> {
        if tile.matrix.0 != 0 || tile.row != tile.col {
            return None;
        }
        self.inverses.get(tile.row)?.get()
    }
}

impl<T: Scalar> Workload for InvertingWork<'_, T> {
    delegate_to_tiles!();

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        // Every other task as it is, without a second look at its operands (every task of a plan
        // without panel inverses).
        if self.inverses.is_empty() || !matches!(task.op, Op::PanelInverse | Op::Trsm) {
            return self.tiles.run(id, par);
        }
        let (write, reads) = operands(task)?;
        let store = self.tiles.store;
        let missing = |tile: TileRef| KernelError::Operands {
            op: task.op,
            reason: format!("tile ({}, {}) is not held here", tile.row, tile.col),
        };
        match task.op {
            Op::PanelInverse => {
                let diagonal = store.tile(write.tile).ok_or_else(|| missing(write.tile))?;
                let mut copy = diagonal.to_owned();
                let slot = self
                    .inverses
                    .get(write.tile.row)
                    .filter(|_| write.tile.matrix.0 == 0)
                    .ok_or_else(|| missing(write.tile))?;
                if self.tiles.backend.invert_unit_factor(copy.as_mut(), par)? {
                    // The runtime's hand-over from this task to the solves that read the tile
                    // orders this store before their loads.
                    let _ = slot.set(copy);
                }
            }
            // The graph orders the diagonal tile's panel inverse before this solve.
            Op::Trsm => {
                let Some(inverse) = self.inverse(reads[0].tile) else {
                    return self.tiles.run(id, par);
                };
                // SAFETY: as in TileWork::run: the graph orders every task touching this tile
                // before or after this one, so no other view of it is used while this one lives;
                // the written tile is not the one read (checked by `operands`).
                let out =
                    unsafe { store.tile_mut(write.tile) }.ok_or_else(|| missing(write.tile))?;
                self.tiles
                    .backend
                    .trsm_by_inverse(inverse.as_ref(), out, par)?;
            }
            _ => return self.tiles.run(id, par),
        }
        store.ran(id, task, &[write.tile])
    }
}
