//! The tiled LU's work on a grid of several process rows (feature `mpi`): how the tasks of
//! [`hetla_factorizations::lu_tiles`] reach their tiles, where they are on a rank of a distributed
//! run.

use faer::Par;
use faer::reborrow::ReborrowMut;
use hetla_factorizations::{Op, TaskId, TileRef, Tiling};
use hetla_kernels::{KernelError, Scalar};
use hetla_runtime::Workload;

use crate::tiles::{TileWork, delegate_to_tiles};

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
/// changes, by position (global rows), for the interchanges `ipiv` (row `first + t` swapped with
/// row `ipiv[t]`, in order).
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

    /// An interchange task of step k (see [`LuSwapRole`](hetla_factorizations::LuSwapRole)).
    fn swap(&self, id: TaskId) -> std::result::Result<(), KernelError> {
        use hetla_factorizations::LuSwapRole;
        let task = self.tiles.graph.task(id);
        let k = task.accesses[0].tile.row;
        let first = self.tiling.offset(k);
        let step = Step {
            first,
            top: first..first + self.tiling.tile_cols(k),
            sources: step_sources(first, &self.pivots(id, task.accesses[0].tile)?),
        };
        let rest = &task.accesses[1..];
        let tiles: Vec<TileRef> = rest.iter().map(|a| a.tile).collect();
        let Some((&last, others)) = tiles.split_last() else {
            return Err(self.missing(Op::LuSwap, task.accesses[0].tile));
        };
        match LuSwapRole::of(task) {
            LuSwapRole::Out => self.rows_up(id, &step, others, last)?,
            LuSwapRole::In => {
                let top = (self.tiles.store.task_tile(id, tiles[0]))
                    .ok_or_else(|| self.missing(Op::LuSwap, tiles[0]))?;
                self.rows_down(id, &step, top, &tiles[1..])?;
            }
            LuSwapRole::Top => self.new_top(id, &step, others, last)?,
        }
        let written: Vec<TileRef> = (rest.iter())
            .filter(|a| a.mode.writes())
            .map(|a| a.tile)
            .collect();
        self.tiles.store.ran(id, task, &written)
    }

    /// The views task `id` reads of `tiles`, each with its tile row.
    fn views(
        &self,
        id: TaskId,
        tiles: impl Iterator<Item = TileRef>,
    ) -> std::result::Result<Vec<(usize, faer::MatRef<'_, T>)>, KernelError> {
        tiles
            .map(|t| {
                let v = self.tiles.store.task_tile(id, t);
                v.map(|v| (t.row, v))
                    .ok_or_else(|| self.missing(Op::LuSwap, t))
            })
            .collect()
    }

    /// Out: the rows of `tiles` (one process row's, below the top) that the step takes up, into
    /// `exchange` at the rows of the top they go to.
    fn rows_up(
        &self,
        id: TaskId,
        step: &Step,
        tiles: &[TileRef],
        exchange: TileRef,
    ) -> std::result::Result<(), KernelError> {
        let b = self.tiling.tile();
        let held = self.views(id, tiles.iter().copied())?;
        // SAFETY: the exchange tile is written by this task alone while it runs (the graph's
        // edges), and is none of the tiles it reads.
        let mut out = unsafe { self.tiles.store.task_tile_mut(id, exchange) }
            .ok_or_else(|| self.missing(Op::LuSwap, exchange))?;
        for t in step.top.clone() {
            let Some(&src) = step.sources.get(&t) else {
                continue;
            };
            if let Some((_, v)) = held.iter().find(|(row, _)| *row == src / b) {
                out.rb_mut()
                    .row_mut(t - step.first)
                    .copy_from(v.row(src % b));
            }
        }
        Ok(())
    }

    /// In (and the top's own process row): the rows of `tiles` that the step sends down take their
    /// new rows from the old top tile `top`.
    fn rows_down(
        &self,
        id: TaskId,
        step: &Step,
        top: faer::MatRef<'_, T>,
        tiles: &[TileRef],
    ) -> std::result::Result<(), KernelError> {
        for &t in tiles {
            // SAFETY: as in `panel`: distinct tiles, one view at a time, none of them `top`.
            let mut view = unsafe { self.tiles.store.task_tile_mut(id, t) }
                .ok_or_else(|| self.missing(Op::LuSwap, t))?;
            let start = self.tiling.offset(t.row);
            for (&q, &src) in step.sources.range(start..start + view.nrows()) {
                if step.top.contains(&src) {
                    view.rb_mut()
                        .row_mut(q - start)
                        .copy_from(top.row(src - step.first));
                }
            }
        }
        Ok(())
    }

    /// Top: the top tile's new rows, from itself, from its process row's tiles below it (`others`
    /// that are not exchange tiles, which then take the rows sent down) and from the exchange tiles
    /// of the other process rows.
    fn new_top(
        &self,
        id: TaskId,
        step: &Step,
        others: &[TileRef],
        top: TileRef,
    ) -> std::result::Result<(), KernelError> {
        use hetla_factorizations::EXCHANGE;
        let (b, grid_rows) = (self.tiling.tile(), self.process_rows.max(1));
        let exchange = self.views(id, others.iter().copied().filter(|t| t.matrix == EXCHANGE))?;
        let locals: Vec<TileRef> = (others.iter().copied())
            .filter(|t| t.matrix != EXCHANGE)
            .collect();
        let old_top = (self.tiles.store.task_tile(id, top))
            .ok_or_else(|| self.missing(Op::LuSwap, top))?
            .to_owned();
        let mut new_top = old_top.clone();
        {
            let local = self.views(id, locals.iter().copied())?;
            for t in step.top.clone() {
                let Some(&src) = step.sources.get(&t) else {
                    continue;
                };
                let (i, row) = (src / b, t - step.first);
                let from = if step.top.contains(&src) {
                    Some(old_top.row(src - step.first))
                } else if let Some((_, v)) = local.iter().find(|(r, _)| *r == i) {
                    Some(v.row(src % b))
                } else {
                    // From another process row: the exchange tile of its row's rank.
                    let x = exchange.iter().find(|(p, _)| *p == i % grid_rows);
                    x.map(|(_, x)| x.row(row))
                };
                let from = from.ok_or_else(|| {
                    self.missing(Op::LuSwap, TileRef::new(EXCHANGE, i % grid_rows, top.col))
                })?;
                new_top.row_mut(row).copy_from(from);
            }
        }
        self.rows_down(id, step, old_top.as_ref(), &locals)?;
        // SAFETY: as in `panel`.
        let mut view = unsafe { self.tiles.store.task_tile_mut(id, top) }
            .ok_or_else(|| self.missing(Op::LuSwap, top))?;
        view.copy_from(&new_top);
        Ok(())
    }
}

/// One step's interchanges as an interchange task uses them.
struct Step {
    /// The first row of the step's top tile.
    first: usize,
    /// Its rows (global).
    top: std::ops::Range<usize>,
    /// Where each row that changes comes from ([`step_sources`]).
    sources: std::collections::BTreeMap<usize, usize>,
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
