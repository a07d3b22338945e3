//! LU's work: how its tasks reach the block columns of a
//! [`ColumnBlocks`](crate::tiles::ColumnBlocks) store, and the side data its panels leave for the
//! updates (the row interchanges and the first zero pivot).

use faer::Par;
use hetla_factorizations::{Op, TaskId, TileRef, Tiling};
use hetla_kernels::{KernelArgs, KernelError, PanelSlot, Scalar};
use hetla_runtime::Workload;

use crate::tiles::{TileStore, TileWork, delegate_to_tiles, operands};
use hetla_runtime::{Platform, RunOptions, Trace, execute as run_graph};

use crate::Result;
use crate::plan::{Algorithm, Plan, expect_precision, not_for, run_error, tile_work};
use crate::tiles::ColumnBlocks;

/// LU's graph over its block columns ([`ColumnBlocks`]) with the row interchanges its panels write
/// and its updates read: the runtime's [`Workload`] of an LU factorisation. The interchanges of
/// panel k are written by its task and read by tasks that read its block column, which the graph
/// orders after it: the runtime's ordering of those tasks is what publishes them (relaxed atomics
/// suffice).
pub(crate) struct PivotedWork<'w, T: Scalar> {
    /// The work without interchanges: the graph, keys, shapes, the blocks and the backend.
    pub tiles: TileWork<'w, T>,
    /// The factored matrix's tiling (block columns of its width).
    pub tiling: Tiling,
    /// `ipiv[i]`: the row (global, 0-based) swapped with row i at step i.
    pub ipiv: &'w [std::sync::atomic::AtomicUsize],
    /// The first column whose pivot was exactly zero (`usize::MAX`: none).
    pub zero: &'w std::sync::atomic::AtomicUsize,
    /// Where a device's panel of step k leaves what it found (`found[k]`), read instead of `ipiv`
    /// and `zero` for that step once filled; empty where no panel runs on a device (a distributed
    /// run's ranks).
    pub found: &'w [PanelSlot],
}

impl<T: Scalar> Workload for PivotedWork<'_, T> {
    delegate_to_tiles!();

    /// A device's panel of step k takes the step's first row and the step's slot for what it finds;
    /// its update or interchanges take the step's first row and the panel's interchanges, local to
    /// the rows from it (set by the panel, which the graph orders first).
    fn kernel_args(&self, id: TaskId) -> KernelArgs {
        let task = self.tiles.graph.task(id);
        let step = hetla_factorizations::lu_step(task);
        let first = self.tiling.offset(step);
        match task.op {
            Op::LuPanel => match self.found.get(step) {
                Some(found) => KernelArgs::Panel {
                    first,
                    found: found.clone(),
                },
                None => KernelArgs::None,
            },
            Op::LuUpdate | Op::LuSwap => KernelArgs::Pivots {
                first,
                ipiv: self.local_pivots(step),
            },
            _ => KernelArgs::None,
        }
    }

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        use std::sync::atomic::Ordering::Relaxed;
        let task = self.tiles.graph.task(id);
        if !task.op.pivots() {
            return self.tiles.run(id, par);
        }
        let (write, reads) = operands(task)?;
        let step = hetla_factorizations::lu_step(task);
        let (first, width) = (self.tiling.offset(step), self.tiling.tile_cols(step));
        let rows = self.tiling.rows() - first;
        let store = self.tiles.store;
        let missing = |tile: TileRef| KernelError::Operands {
            op: task.op,
            reason: format!("block column {} is not held here", tile.col),
        };
        let backend = self.tiles.backend;
        if task.op == Op::LuPanel {
            // SAFETY: as in TileWork::run: the graph orders every task touching this block column
            // before or after this one, so no other view of it is used while this one lives.
            let block = unsafe { store.tile_mut(write.tile) }.ok_or_else(|| missing(write.tile))?;
            let mut ipiv = vec![0; width];
            let zero = backend.lu_panel(block.subrows_mut(first, rows), &mut ipiv, par)?;
            for (i, p) in ipiv.iter().enumerate() {
                self.ipiv[first + i].store(first + p, Relaxed);
            }
            if let Some(z) = zero {
                self.zero.fetch_min(first + z, Relaxed);
            }
            // The interchanges are stored: a distributed run may send the panel with them.
            return store.ran(id, task, &[write.tile]);
        }
        let panel = store
            .tile(reads[0].tile)
            .ok_or_else(|| missing(reads[0].tile))?;
        // A panel received from another rank holds only its rows from the diagonal down.
        let panel = if panel.nrows() == rows {
            panel
        } else {
            panel.subrows(first, rows)
        };
        let ipiv = self.local_pivots(step);
        // SAFETY: as above; the block written is not the panel read (checked by `operands`).
        let block = unsafe { store.tile_mut(write.tile) }.ok_or_else(|| missing(write.tile))?;
        let block = block.subrows_mut(first, rows);
        match task.op {
            Op::LuUpdate => backend.lu_update(panel, &ipiv, block, par),
            _ => backend.lu_swap(panel, &ipiv, block),
        }?;
        store.ran(id, task, &[write.tile])
    }
}

impl<T: Scalar> PivotedWork<'_, T> {
    /// The interchanges of step `step`'s panel, local to the rows from the step's first: what its
    /// slot holds when a device factored it, else what the panel's task stored.
    fn local_pivots(&self, step: usize) -> Vec<usize> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(found) = self.found.get(step).and_then(PanelSlot::found) {
            return found.ipiv;
        }
        let (first, width) = (self.tiling.offset(step), self.tiling.tile_cols(step));
        (0..width)
            .map(|i| self.ipiv[first + i].load(Relaxed).saturating_sub(first))
            .collect()
    }
}

/// Runs an LU plan on `platform` over `a` (its order, column-major) in place: the trace, the row
/// interchanges (LAPACK's ipiv, 0-based and global: row i was swapped with `ipiv[i]`) and the first
/// column whose pivot was exactly zero.
pub(crate) fn execute<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    a: faer::MatMut<'_, T>,
    options: &RunOptions,
) -> Result<(Trace, Vec<usize>, Option<usize>)> {
    expect_precision(plan, T::PRECISION)?;
    let n = match plan.algorithm() {
        Algorithm::Lu { n } if (a.nrows(), a.ncols()) == (n, n) => n,
        other => return Err(not_for(other, &a.as_ref())),
    };
    let tiling = hetla_factorizations::Tiling::square(n, plan.tile())?;
    let store = ColumnBlocks::new(a, tiling, "A")?;
    execute_on(plan, platform, &store, options)
}

/// Runs an LU plan on `platform` over the block columns `store` holds (of the plan's tiling: a host
/// matrix's [`ColumnBlocks`], a device matrix's
/// [`DeviceTiles`](crate::tiles::device::DeviceTiles)), as [`execute`] does.
pub(crate) fn execute_on<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    options: &RunOptions,
) -> Result<(Trace, Vec<usize>, Option<usize>)> {
    use std::sync::atomic::AtomicUsize;
    expect_precision(plan, T::PRECISION)?;
    let Algorithm::Lu { n } = plan.algorithm() else {
        return Err(crate::Error::InvalidOption {
            option: "plan",
            reason: format!(
                "an LU's work runs LU plans, not a {}",
                plan.algorithm().name()
            ),
        });
    };
    let tiling = hetla_factorizations::Tiling::square(n, plan.tile())?;
    let shape = |tile| plan.shape(tile);
    let ipiv: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
    let zero = AtomicUsize::new(usize::MAX);
    let found: Vec<PanelSlot> = (0..tiling.col_tiles()).map(|_| PanelSlot::new()).collect();
    let work = PivotedWork {
        tiles: tile_work(plan, &shape, store, platform),
        tiling,
        ipiv: &ipiv,
        zero: &zero,
        found: &found,
    };
    let trace = run_graph(platform, &work, &plan.run_options_on(platform, options))
        .map_err(|e| run_error(plan, e))?;
    let mut ipiv: Vec<usize> = ipiv.into_iter().map(AtomicUsize::into_inner).collect();
    let mut zero = Some(zero.into_inner()).filter(|&z| z != usize::MAX);
    // The panels the devices factored: their interchanges and zero pivots, made global.
    for (step, slot) in found.iter().enumerate() {
        let Some(panel) = slot.found() else { continue };
        let first = tiling.offset(step);
        for (i, p) in panel.ipiv.iter().enumerate() {
            ipiv[first + i] = first + p;
        }
        zero = zero.into_iter().chain(panel.zero.map(|z| first + z)).min();
    }
    Ok((trace, ipiv, zero))
}
