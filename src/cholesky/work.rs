//! Cholesky's work: its tasks on a store's tiles, with one side datum of its own. Where the store
//! owns a diagonal tile's strict upper triangle (the tile-major copy, whose upper triangles are
//! never copied out) and the panel below it is long enough, the POTRF of that tile also writes the
//! inverse of its unit factor there, and the panel's TRSMs become products with it
//! (`Backend::trsm_by_inverse`): matrix products run faster than triangular solves on the faer
//! kernels. Which diagonal tiles hold their inverse is this work's record, for its run only.

use std::sync::atomic::{AtomicBool, Ordering};

use faer::Par;
use faer::reborrow::ReborrowMut;
use hetla_factorizations::{Op, TaskId, TileRef};
use hetla_kernels::{KernelError, Scalar};
use hetla_runtime::Workload;

use crate::tiles::{TileWork, delegate_to_tiles, operands};

/// The fewest solves a panel must have for its diagonal tile to be inverted: the inversion (b^3/3
/// flops at about 20-40 Gflop/s in a run) lengthens the critical path, and each solve through the
/// inverse saves about b^3/58 s-Gflop on one AVX-512 core; measured with OpenBLAS on 2 cores, a
/// panel of one solve (tile 2048 at n = 4096 on one 2-core cluster) lost 28% and panels of 3 (tile
/// 1024) 8%, while panels of up to 15 (tile 512 at n = 8192 on two 1-core clusters) gained 4%.
const MIN_PANEL_SOLVES: usize = 4;

/// A Cholesky plan's tasks over a store (see the module documentation).
pub(crate) struct InvertingWork<'w, T: Scalar> {
    /// The tasks as they are.
    pub tiles: TileWork<'w, T>,
    /// The factored matrix's tile rows.
    row_tiles: usize,
    /// Whether diagonal tile k holds the inverse of its unit factor in its strict upper triangle.
    inverted: Vec<AtomicBool>,
}

impl<'w, T: Scalar> InvertingWork<'w, T> {
    /// The work of `tiles`, whose factored matrix has `row_tiles` tile rows.
    pub fn new(tiles: TileWork<'w, T>, row_tiles: usize) -> Self {
        Self {
            tiles,
            row_tiles,
            inverted: (0..row_tiles).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Whether the POTRF of `tile` also inverts its unit factor.
    fn inverts(&self, tile: TileRef) -> bool {
        tile.row == tile.col
            && tile.row + MIN_PANEL_SOLVES < self.row_tiles
            && self.tiles.store.owns_strict_upper(tile)
    }

    /// Whether diagonal tile `tile` of the factored matrix holds its unit factor's inverse.
    fn inverted(&self, tile: TileRef) -> bool {
        tile.matrix.0 == 0
            && tile.row == tile.col
            && self
                .inverted
                .get(tile.row)
                .is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

impl<T: Scalar> Workload for InvertingWork<'_, T> {
    delegate_to_tiles!();

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        let backend = self.tiles.backend;
        // Every other task as it is, without a second look at its operands.
        if !backend.solves_by_inverse() || !matches!(task.op, Op::Potrf | Op::Trsm) {
            return self.tiles.run(id, par);
        }
        let (write, reads) = operands(task)?;
        let store = self.tiles.store;
        let missing = |tile: TileRef| KernelError::Operands {
            op: task.op,
            reason: format!("tile ({}, {}) is not held here", tile.row, tile.col),
        };
        match task.op {
            Op::Potrf if self.inverts(write.tile) => {
                // SAFETY: as in TileWork::run: the graph orders every task touching this tile
                // before or after this one, so no other view of it is used while this one lives.
                let mut out =
                    unsafe { store.tile_mut(write.tile) }.ok_or_else(|| missing(write.tile))?;
                backend.run(task.op, &[], out.rb_mut(), par)?;
                if backend.invert_unit_factor(out, par)? {
                    // The runtime's hand-over from this task to the solves that read the tile
                    // orders this store before their loads.
                    self.inverted[write.tile.row].store(true, Ordering::Relaxed);
                }
            }
            // The graph orders the diagonal tile's POTRF (and its flag) before this solve.
            Op::Trsm if self.inverted(reads[0].tile) => {
                let diagonal = store
                    .tile(reads[0].tile)
                    .ok_or_else(|| missing(reads[0].tile))?;
                // SAFETY: as above; the written tile is not the one read (checked by `operands`).
                let out =
                    unsafe { store.tile_mut(write.tile) }.ok_or_else(|| missing(write.tile))?;
                backend.trsm_by_inverse(diagonal, out, par)?;
            }
            _ => return self.tiles.run(id, par),
        }
        store.ran(id, task, write.tile)
    }
}
