//! LU's work: how its tasks reach the block columns of a
//! [`ColumnBlocks`](crate::tiles::ColumnBlocks) store, and the side data its panels leave for the
//! updates (the row interchanges and the first zero pivot).

use faer::Par;
use faer::reborrow::ReborrowMut;
use hetla_factorizations::{Op, TaskId, TileRef, Tiling};
use hetla_kernels::{KernelError, Scalar};
use hetla_runtime::Workload;

use crate::tiles::{TileWork, delegate_to_tiles, operands};

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
}

impl<T: Scalar> Workload for PivotedWork<'_, T> {
    delegate_to_tiles!();

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
        let ipiv: Vec<usize> = (0..width)
            .map(|i| self.ipiv[first + i].load(Relaxed).saturating_sub(first))
            .collect();
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

/// The tiled LU's graph ([`hetla_factorizations::lu_tiles`]) over b x b tiles: its panels gather
/// their column's tiles, factor them as one panel and write the step's interchanges into their
/// pivots tile; its interchange tasks move rows by their roles
/// ([`LuSwapRole`](hetla_factorizations::LuSwapRole)); its solves and products are the tile kernels
/// of [`TileWork`]. Each task reaches the version of a tile its rank holds for it
/// ([`TileStore::task_tile`](crate::tiles::TileStore::task_tile)).
pub(crate) struct TiledPivotedWork<'w, T: Scalar> {
    /// The work without interchanges: the graph, keys, shapes, the tiles and the backend.
    pub tiles: TileWork<'w, T>,
    /// The factored matrix's tiling.
    pub tiling: Tiling,
    /// `ipiv[i]`: the row (global, 0-based) swapped with row i at step i, for this rank's panels.
    pub ipiv: &'w [std::sync::atomic::AtomicUsize],
    /// The first column of this rank's panels whose pivot was exactly zero (`usize::MAX`: none).
    pub zero: &'w std::sync::atomic::AtomicUsize,
    /// The process rows the tile rows are spread over (tile row i on process row i mod P).
    pub process_rows: usize,
}

/// Where each row of a step's interchanges comes from: `(position, old row)` for every row that
/// changes, by position (global rows), for the interchanges `ipiv` (row `first + t` swapped with row
/// `ipiv[t]`, in order).
pub(crate) fn step_sources(
    first: usize,
    ipiv: &[usize],
) -> std::collections::BTreeMap<usize, usize> {
    let mut at = std::collections::BTreeMap::new();
    for (t, &p) in ipiv.iter().enumerate() {
        let r = first + t;
        let (x, y) = (*at.get(&r).unwrap_or(&r), *at.get(&p).unwrap_or(&p));
        at.insert(r, y);
        at.insert(p, x);
    }
    at.retain(|q, s| q != s);
    at
}

impl<T: Scalar> TiledPivotedWork<'_, T> {
    fn missing(&self, op: Op, tile: TileRef) -> KernelError {
        KernelError::Operands {
            op,
            reason: format!(
                "tile ({}, {}) of matrix {} is not held here",
                tile.row, tile.col, tile.matrix.0
            ),
        }
    }

    /// The interchanges of step `k` as its pivots tile holds them (global rows).
    fn pivots(&self, id: TaskId, tile: TileRef) -> std::result::Result<Vec<usize>, KernelError> {
        let store = self.tiles.store;
        let p = store
            .task_tile(id, tile)
            .ok_or_else(|| self.missing(Op::LuSwap, tile))?;
        let n = self.tiling.rows();
        (0..p.nrows())
            .map(|t| {
                let x = p[(t, 0)].to_c64().re;
                (x >= 0.0 && x < n as f64 && x.fract() == 0.0)
                    .then_some(x as usize)
                    .ok_or_else(|| KernelError::Operands {
                        op: Op::LuSwap,
                        reason: format!("interchange {t} of step {} is {x}, not a row", tile.row),
                    })
            })
            .collect()
    }

    fn panel(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        use std::sync::atomic::Ordering::Relaxed;
        let task = self.tiles.graph.task(id);
        let store = self.tiles.store;
        let written: Vec<TileRef> = task.accesses.iter().map(|a| a.tile).collect();
        let (pivots, column) = written
            .iter()
            .partition::<Vec<TileRef>, _>(|t| t.matrix == hetla_factorizations::PIVOTS);
        let k = pivots.first().map_or(0, |t| t.row);
        let (first, w) = (self.tiling.offset(k), self.tiling.tile_cols(k));
        let rows = self.tiling.rows() - first;
        // The diagonal tile first, then the column's tiles below it, in order.
        let mut order = column.clone();
        order.sort_unstable_by_key(|t| t.row);
        let mut panel = faer::Mat::<T>::zeros(rows, w);
        for t in &order {
            let view = store
                .task_tile(id, *t)
                .ok_or_else(|| self.missing(Op::LuPanel, *t))?;
            let at = self.tiling.offset(t.row) - first;
            panel.subrows_mut(at, view.nrows()).copy_from(view);
        }
        let mut ipiv = vec![0; w];
        let zero = self
            .tiles
            .backend
            .lu_panel(panel.as_mut(), &mut ipiv, par)?;
        for t in &order {
            // SAFETY: as in TileWork::run: the graph orders every task touching these tiles before
            // or after this one, the tiles are distinct, and each view is dropped before the next.
            let mut view = unsafe { store.task_tile_mut(id, *t) }
                .ok_or_else(|| self.missing(Op::LuPanel, *t))?;
            let at = self.tiling.offset(t.row) - first;
            let r = view.nrows();
            view.copy_from(panel.subrows(at, r));
        }
        if let Some(&tile) = pivots.first() {
            // SAFETY: as above.
            let mut out = unsafe { store.task_tile_mut(id, tile) }
                .ok_or_else(|| self.missing(Op::LuPanel, tile))?;
            for (t, p) in ipiv.iter().enumerate() {
                out[(t, 0)] = T::from_f64((first + p) as f64);
                self.ipiv[first + t].store(first + p, Relaxed);
            }
        }
        if let Some(z) = zero {
            self.zero.fetch_min(first + z, Relaxed);
        }
        store.ran(id, task, &written)
    }

    fn swap(&self, id: TaskId) -> std::result::Result<(), KernelError> {
        use hetla_factorizations::{EXCHANGE, LuSwapRole};
        let task = self.tiles.graph.task(id);
        let store = self.tiles.store;
        let op = Op::LuSwap;
        let k = task.accesses[0].tile.row;
        let first = self.tiling.offset(k);
        let sources = step_sources(first, &self.pivots(id, task.accesses[0].tile)?);
        let b = self.tiling.tile();
        let top_rows = first..first + self.tiling.tile_cols(k);
        // (tile row, row in it) of a global row.
        let place = |row: usize| (row / b, row % b);
        let rest = &task.accesses[1..];
        let written: Vec<TileRef> = (rest.iter())
            .filter(|a| a.mode.writes())
            .map(|a| a.tile)
            .collect();
        match LuSwapRole::of(task) {
            LuSwapRole::Out => {
                let (x, tiles) = rest
                    .split_last()
                    .ok_or_else(|| self.missing(op, task.accesses[0].tile))?;
                let held: Vec<(usize, faer::MatRef<'_, T>)> = (tiles.iter())
                    .map(|a| {
                        let v = store
                            .task_tile(id, a.tile)
                            .ok_or_else(|| self.missing(op, a.tile));
                        v.map(|v| (a.tile.row, v))
                    })
                    .collect::<std::result::Result<_, _>>()?;
                // SAFETY: the exchange tile is written by this task alone while it runs (the
                // graph's edges), and is none of the tiles it reads.
                let mut out = unsafe { store.task_tile_mut(id, x.tile) }
                    .ok_or_else(|| self.missing(op, x.tile))?;
                for t in top_rows.clone() {
                    let Some(&src) = sources.get(&t) else {
                        continue;
                    };
                    let (i, r) = place(src);
                    if let Some((_, v)) = held.iter().find(|(row, _)| *row == i) {
                        out.rb_mut().row_mut(t - first).copy_from(v.row(r));
                    }
                }
            }
            LuSwapRole::In => {
                let top = store
                    .task_tile(id, rest[0].tile)
                    .ok_or_else(|| self.missing(op, rest[0].tile))?;
                for a in &rest[1..] {
                    // SAFETY: as in `panel`: distinct tiles, one view at a time, none of them read.
                    let mut view = unsafe { store.task_tile_mut(id, a.tile) }
                        .ok_or_else(|| self.missing(op, a.tile))?;
                    let rows = self.tiling.offset(a.tile.row)
                        ..self.tiling.offset(a.tile.row) + view.nrows();
                    for (&q, &src) in sources.range(rows.clone()) {
                        if top_rows.contains(&src) {
                            view.rb_mut()
                                .row_mut(q - rows.start)
                                .copy_from(top.row(src - first));
                        }
                    }
                }
            }
            LuSwapRole::Top => {
                let (top_tile, others) = rest
                    .split_last()
                    .ok_or_else(|| self.missing(op, task.accesses[0].tile))?;
                let exchange: Vec<(usize, faer::MatRef<'_, T>)> = (others.iter())
                    .filter(|a| a.tile.matrix == EXCHANGE)
                    .map(|a| {
                        let v = store
                            .task_tile(id, a.tile)
                            .ok_or_else(|| self.missing(op, a.tile));
                        v.map(|v| (a.tile.row, v))
                    })
                    .collect::<std::result::Result<_, _>>()?;
                let locals: Vec<TileRef> = (others.iter())
                    .filter(|a| a.tile.matrix != EXCHANGE)
                    .map(|a| a.tile)
                    .collect();
                // The old top tile, and the rows of this process row's tiles below it that go up.
                let old_top = store
                    .task_tile(id, top_tile.tile)
                    .ok_or_else(|| self.missing(op, top_tile.tile))?
                    .to_owned();
                let mut new_top = old_top.clone();
                for t in top_rows.clone() {
                    let Some(&src) = sources.get(&t) else {
                        continue;
                    };
                    let (i, r) = place(src);
                    let row = t - first;
                    if top_rows.contains(&src) {
                        new_top.row_mut(row).copy_from(old_top.row(src - first));
                    } else if let Some(l) = locals.iter().find(|l| l.row == i) {
                        let v = store
                            .task_tile(id, *l)
                            .ok_or_else(|| self.missing(op, *l))?;
                        new_top.row_mut(row).copy_from(v.row(r));
                    } else {
                        // From another process row: the exchange tile of its row's rank.
                        let grid_rows = self.process_rows.max(1);
                        let (_, x) = exchange
                            .iter()
                            .find(|(p, _)| *p == i % grid_rows)
                            .ok_or_else(|| {
                                self.missing(
                                    op,
                                    TileRef::new(EXCHANGE, i % grid_rows, top_tile.tile.col),
                                )
                            })?;
                        new_top.row_mut(row).copy_from(x.row(row));
                    }
                }
                for l in &locals {
                    // SAFETY: as in `panel`.
                    let mut view = unsafe { store.task_tile_mut(id, *l) }
                        .ok_or_else(|| self.missing(op, *l))?;
                    let rows = self.tiling.offset(l.row)..self.tiling.offset(l.row) + view.nrows();
                    for (&q, &src) in sources.range(rows.clone()) {
                        if top_rows.contains(&src) {
                            view.rb_mut()
                                .row_mut(q - rows.start)
                                .copy_from(old_top.row(src - first));
                        }
                    }
                }
                // SAFETY: as in `panel`.
                let mut top = unsafe { store.task_tile_mut(id, top_tile.tile) }
                    .ok_or_else(|| self.missing(op, top_tile.tile))?;
                top.copy_from(&new_top);
            }
        }
        store.ran(id, task, &written)
    }
}

impl<T: Scalar> Workload for TiledPivotedWork<'_, T> {
    delegate_to_tiles!();

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        match self.tiles.graph.task(id).op {
            Op::LuPanel => self.panel(id, par),
            Op::LuSwap => self.swap(id),
            _ => self.tiles.run(id, par),
        }
    }
}
