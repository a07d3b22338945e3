//! QR's work: how its tasks reach the tiles, and the T factors of the block reflectors each
//! factoring task leaves beside its tile for the tasks that apply it.

use faer::Par;
use hetla_factorizations::{Mode, Op, TaskId, TileRef, Tiling, qr_t_slot};
use hetla_kernels::{AnyMat, KernelArgs, KernelError, ReflectorSlot, Scalar, Stack};
use hetla_runtime::Workload;

use crate::tiles::{ColumnMatrices, TileWork, delegate_to_tiles};
use hetla_factorizations::FACTOR;
use hetla_runtime::{Platform, RunOptions, Trace, execute as run_graph};

use crate::plan::{Algorithm, Plan, expect_precision, not_for, run_error, tile_work};
use crate::tiles::{ColumnBlocks, Matrices, TileStore, TiledMatrix};
use crate::{Error, Result};

/// QR's tasks over a store: the tiles as [`TileWork`]'s, and the T's of the block reflectors beside
/// them, a slot per tile and kind ([`ReflectorWork::slot`]). A slot is set once, by the task that
/// factors (`Geqrt`, `Tsqrt`, `Ttqrt`), and read by the tasks that apply that factorisation, which
/// read the tile it wrote and so run after it (the graph's read-after-write edge; the runtime's
/// hand-over of a task's end to its successors publishes the slot).
pub(crate) struct ReflectorWork<'w, T: Scalar> {
    /// The work without the T's: the graph, keys, shapes, the tiles and the backend.
    pub tiles: TileWork<'w, T>,
    /// The factored matrix's tiling.
    pub tiling: Tiling,
    /// The inner block size: the rows of every T.
    pub inner: usize,
    /// The T's, by slot.
    pub ts: &'w [std::sync::OnceLock<faer::Mat<T>>],
    /// Whether the tiles are whole block columns (LAPACK's blocked QR, [`qr_columns`]): a task of
    /// step k then works on its block columns' rows from row k b down, and a panel received from
    /// another rank holds only those rows.
    ///
    /// [`qr_columns`]: hetla_factorizations::qr_columns
    pub columns: bool,
    /// Block columns: a slot per step for the T's of a panel a device factored
    /// ([`KernelArgs::QrPanel`]), taken into `ts` by the first task that needs them
    /// ([`ReflectorWork::reflectors`]); none for tiles.
    pub found: &'w [ReflectorSlot],
    /// Block columns: each step's T's as a device kernel's argument, made once for the step's
    /// applications (not a copy per task); none for tiles.
    pub shared: &'w [std::sync::OnceLock<std::sync::Arc<AnyMat>>],
}

impl<T: Scalar> ReflectorWork<'_, T> {
    /// Slots a matrix of `tiling` needs.
    pub fn slots(tiling: &Tiling) -> usize {
        2 * tiling.row_tiles() * tiling.col_tiles()
    }

    /// The slot of the T of `tile`'s own QR (`pair` false) or of its elimination on a triangle.
    pub fn slot(tiling: &Tiling, tile: TileRef, pair: bool) -> usize {
        2 * (tile.row * tiling.col_tiles() + tile.col) + usize::from(pair)
    }

    /// The T's of the factorisation that wrote `tile` (`pair` as in [`ReflectorWork::slot`]): set
    /// by the task that factored it on a CPU cluster, or, in block columns, made by a device's
    /// panel into its step's slot and taken from there (once); `None` before it ran.
    fn reflectors(&self, tile: TileRef, pair: bool) -> Option<&faer::Mat<T>> {
        let cell = &self.ts[Self::slot(&self.tiling, tile, pair)];
        if let Some(t) = cell.get() {
            return Some(t);
        }
        let made = self.found.get(tile.col)?.found()?;
        let t = T::of_any_ref(AnyMat::as_ref(&made))?.to_owned();
        Some(cell.get_or_init(|| t))
    }
}

impl<T: Scalar> Workload for ReflectorWork<'_, T> {
    delegate_to_tiles!();

    /// In block columns (the tiled QR's run on CPU clusters), a device's panel of step k takes the
    /// step's first row, the inner block and the step's slot for its T's; a device's application of
    /// step k's reflectors to a block column the step's first row and the panel's T's, made by the
    /// panel, which the graph orders first.
    fn kernel_args(&self, id: TaskId) -> KernelArgs {
        let task = self.tiles.graph.task(id);
        let (slot_tile, pair) = qr_t_slot(task);
        let first = self.tiling.offset(slot_tile.col);
        match (task.op, self.columns) {
            (Op::Geqrt, true) => match self.found.get(slot_tile.col) {
                Some(found) => KernelArgs::QrPanel {
                    first,
                    inner: self.inner,
                    found: found.clone(),
                },
                None => KernelArgs::None,
            },
            (Op::Unmqr, true) => match self.reflectors(slot_tile, pair) {
                Some(t) => {
                    let made = || std::sync::Arc::new(T::any_mat(t.clone()));
                    let t = match self.shared.get(slot_tile.col) {
                        Some(cell) => cell.get_or_init(made).clone(),
                        None => made(),
                    };
                    KernelArgs::Reflectors { first, t }
                }
                None => KernelArgs::None,
            },
            _ => KernelArgs::None,
        }
    }

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        if !task.op.is_qr() {
            return self.tiles.run(id, par);
        }
        let op = task.op;
        let fail = |reason: String| KernelError::Operands { op, reason };
        let (reads, writes) = task.accesses.split_at(op.reads().min(task.accesses.len()));
        let distinct = writes.len() < 2 || writes[0].tile != writes[1].tile;
        if writes.len() != op.writes()
            || !distinct
            || writes.iter().any(|w| !w.mode.writes())
            || reads
                .iter()
                .any(|r| r.mode != Mode::Read || writes.iter().any(|w| w.tile == r.tile))
        {
            return Err(fail(
                "expected the tiles read, then the distinct tiles written".into(),
            ));
        }
        let store = self.tiles.store;
        let missing = |tile: TileRef| {
            fail(format!(
                "tile ({}, {}) is not held here",
                tile.row, tile.col
            ))
        };
        let (slot_tile, pair) = qr_t_slot(task);
        let slot = &self.ts[Self::slot(&self.tiling, slot_tile, pair)];
        let set = |t: faer::Mat<T>| {
            slot.set(t)
                .map_err(|_| fail("the block reflectors of this tile were factored twice".into()))
        };
        let get = || {
            self.reflectors(slot_tile, pair)
                .ok_or_else(|| fail("applied before its factorisation ran".into()))
        };
        let backend = self.tiles.backend;
        // SAFETY: as in TileWork::run: the graph orders every task touching these tiles before or
        // after this one, so no other view of a written tile is used while these live; the written
        // tiles are distinct and none is read by the task (checked above).
        let write = |n: usize| {
            unsafe { store.task_tile_mut(id, writes[n].tile) }
                .ok_or_else(|| missing(writes[n].tile))
        };
        let read = |n: usize| {
            store
                .task_tile(id, reads[n].tile)
                .ok_or_else(|| missing(reads[n].tile))
        };
        // In block columns: the rows from the step's diagonal down (a received panel holds no
        // others).
        let first = self.columns.then(|| {
            self.tiling
                .offset(reads.first().unwrap_or(&writes[0]).tile.col)
        });
        let whole = self.tiling.rows();
        match (op, Stack::of(op)) {
            (Op::Geqrt, _) => {
                let a = rows_below(write(0)?, first);
                let k = a.nrows().min(a.ncols());
                // An inner block wider than the tile is the whole tile.
                let mut t = faer::Mat::zeros(self.inner.min(k).max(1), k);
                backend.qr_tile(a, t.as_mut(), par)?;
                set(t)?;
            }
            (Op::Unmqr, _) => {
                let v = read(0)?;
                // A panel received from another rank holds only its rows from the diagonal.
                let v = match v.nrows() == whole {
                    true => v.subrows(first.unwrap_or(0), whole - first.unwrap_or(0)),
                    false => v,
                };
                let c = rows_below(write(0)?, first);
                backend.qr_apply(v, get()?.as_ref(), c, true, par)?
            }
            (Op::Tsqrt | Op::Ttqrt, Some(stack)) => {
                let (r, b) = (write(0)?, write(1)?);
                let n = r.ncols();
                let mut t = faer::Mat::zeros(self.inner.min(n).max(1), n);
                // The triangle is the top of its tile.
                backend.qr_stacked(r.subrows_mut(0, n), b, stack, t.as_mut(), par)?;
                set(t)?;
            }
            (_, Some(stack)) => {
                let t = get()?;
                let (a1, a2) = (write(0)?, write(1)?);
                let a1 = a1.subrows_mut(0, t.ncols());
                backend.qr_stacked_apply(read(0)?, stack, t.as_ref(), (a1, a2), true, par)?;
            }
            _ => return Err(fail("not a QR operation".into())),
        }
        let written: Vec<TileRef> = writes.iter().map(|w| w.tile).collect();
        self.tiles.store.ran(id, task, &written)
    }
}

/// `m`'s rows from `first` down (all of them without).
fn rows_below<T: Scalar>(m: faer::MatMut<'_, T>, first: Option<usize>) -> faer::MatMut<'_, T> {
    match first {
        Some(first) => {
            let rows = m.nrows() - first;
            m.subrows_mut(first, rows)
        }
        None => m,
    }
}

/// Runs a QR plan ([`Algorithm::Qr`]) on `platform` over `a` (m x n) in place, and over `b` (its
/// right-hand sides, overwritten by Q^H B) when the plan has some, with block reflectors of `inner`
/// columns: the trace and the T's of every tile's block reflectors, by slot
/// ([`ReflectorWork::slot`]; `None` where the graph factors nothing).
pub(crate) fn execute<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    a: faer::MatMut<'_, T>,
    b: Option<faer::MatMut<'_, T>>,
    inner: usize,
    options: &RunOptions,
) -> Result<(Trace, Vec<Option<faer::Mat<T>>>)> {
    check_operands(plan, a.as_ref(), b.as_ref().map(|b| b.as_ref()), false)?;
    let a = TiledMatrix::new(a, plan.tile(), "A")?;
    let b = b
        .map(|b| TiledMatrix::new(b, plan.tile(), "B"))
        .transpose()?;
    let matrices: Vec<&TiledMatrix<'_, T>> = std::iter::once(&a).chain(b.as_ref()).collect();
    let ts = t_slots::<T>(plan, None);
    let trace = run_reflectors(plan, platform, &Matrices(&matrices), inner, &ts, options)?;
    Ok((trace, taken(ts)))
}

/// Runs a [`Algorithm::QrColumns`] plan (LAPACK's blocked QR in block columns, what a platform with
/// GPUs runs: its panels on the CPU clusters, the applications of their reflectors on the GPUs too)
/// on `platform` over `a` (m x n, m >= n) in place, and over `b` (its right-hand sides, overwritten
/// by Q^H B) when the plan has some: the trace and the T's of each block column's reflectors, by
/// slot ([`ReflectorWork::slot`] of tile (0, k)).
pub(crate) fn execute_columns<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    a: faer::MatMut<'_, T>,
    b: Option<faer::MatMut<'_, T>>,
    options: &RunOptions,
) -> Result<(Trace, Vec<Option<faer::Mat<T>>>)> {
    check_operands(plan, a.as_ref(), b.as_ref().map(|b| b.as_ref()), true)?;
    let tiling = *plan.blocks(FACTOR).expect("a QR plan tiles its matrix");
    let b = match (b, plan.blocks(hetla_factorizations::RHS)) {
        (Some(b), Some(bt)) => Some(ColumnBlocks::new(b, *bt, "B")?),
        _ => None,
    };
    let a = ColumnBlocks::new(a, tiling, "A")?;
    execute_columns_on(plan, platform, &ColumnMatrices(&a, b.as_ref()), options)
}

/// Runs a [`Algorithm::QrColumns`] plan on `platform` over the block columns `store` holds (of the
/// plan's tilings: host matrices' [`ColumnBlocks`], a device matrix's
/// [`DeviceTiles`](crate::tiles::device::DeviceTiles)), as [`execute_columns`] does.
pub(crate) fn execute_columns_on<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    options: &RunOptions,
) -> Result<(Trace, Vec<Option<faer::Mat<T>>>)> {
    expect_precision(plan, T::PRECISION)?;
    let Algorithm::QrColumns { inner, .. } = plan.algorithm() else {
        return Err(Error::InvalidOption {
            option: "plan",
            reason: format!(
                "QR's work in block columns runs QR plans in block columns, not a {}",
                plan.algorithm().name()
            ),
        });
    };
    let tiling = *plan.blocks(FACTOR).expect("a QR plan tiles its matrix");
    let ts = slots_of::<T>(&tiling, None);
    let found: Vec<ReflectorSlot> = (0..tiling.col_tiles())
        .map(|_| ReflectorSlot::new())
        .collect();
    let shared: Vec<_> = (0..tiling.col_tiles())
        .map(|_| std::sync::OnceLock::new())
        .collect();
    let shape = |tile| plan.shape(tile);
    let work = ReflectorWork {
        tiles: tile_work(plan, &shape, store, platform),
        tiling,
        inner,
        ts: &ts,
        columns: true,
        found: &found,
        shared: &shared,
    };
    let trace = run_graph(platform, &work, &plan.run_options_on(platform, options))
        .map_err(|e| run_error(plan, e))?;
    // The T's of panels a device factored (those a later task took are in `ts` already).
    for k in 0..tiling.col_tiles() {
        work.reflectors(TileRef::new(FACTOR, 0, k), false);
    }
    Ok((trace, taken(ts)))
}

/// What each slot of a run that ended holds (`None` where its task left none).
fn taken<X>(slots: Vec<std::sync::OnceLock<X>>) -> Vec<Option<X>> {
    slots
        .into_iter()
        .map(std::sync::OnceLock::into_inner)
        .collect()
}

/// Runs a [`Algorithm::QrApply`] plan: B <- Q^H B, Q from `a` factored by the QR plan of the same
/// tile and tree, whose T's are `ts` (by slot, as [`execute`] returned them).
pub(crate) fn execute_apply<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    a: faer::MatRef<'_, T>,
    ts: &[Option<faer::Mat<T>>],
    b: faer::MatMut<'_, T>,
    inner: usize,
    options: &RunOptions,
) -> Result<Trace> {
    let rhs = match plan.algorithm() {
        Algorithm::QrApply { m, n, rhs, .. } if (a.nrows(), a.ncols()) == (m, n) => rhs,
        other => return Err(not_for(other, &a)),
    };
    check_rhs(a.nrows(), rhs, Some(b.as_ref()))?;
    let a = TiledMatrix::read_only(a, plan.tile(), "A")?;
    let b = TiledMatrix::new(b, plan.tile(), "B")?;
    let slots = t_slots(plan, Some(ts));
    run_reflectors(plan, platform, &Matrices(&[&a, &b]), inner, &slots, options)
}

/// An error unless `plan` is a QR plan of `a`'s shape (in block columns with `columns`, else tiled)
/// whose right-hand sides `b` are.
fn check_operands<T: Scalar>(
    plan: &Plan,
    a: faer::MatRef<'_, T>,
    b: Option<faer::MatRef<'_, T>>,
    columns: bool,
) -> Result<()> {
    let rhs = match (plan.algorithm(), columns) {
        (Algorithm::Qr { m, n, rhs, .. }, false)
        | (Algorithm::QrColumns { m, n, rhs, .. }, true)
            if (a.nrows(), a.ncols()) == (m, n) =>
        {
            rhs
        }
        (other, _) => return Err(not_for(other, &a)),
    };
    check_rhs(a.nrows(), rhs, b)
}

/// An error unless `b` is the plan's `rhs` right-hand sides of A's `m` rows (none when 0).
fn check_rhs<T: Scalar>(m: usize, rhs: usize, b: Option<faer::MatRef<'_, T>>) -> Result<()> {
    match b {
        None if rhs == 0 => Ok(()),
        Some(b) if rhs > 0 && (b.nrows(), b.ncols()) == (m, rhs) => Ok(()),
        b => Err(Error::InvalidOption {
            option: "plan",
            reason: format!(
                "the plan has {rhs} right-hand sides of {m} rows, given {}",
                b.map_or("none".to_owned(), |b| format!(
                    "{}x{}",
                    b.nrows(),
                    b.ncols()
                ))
            ),
        }),
    }
}

/// The T slots of a QR plan's matrix, set from `ts` where given.
fn t_slots<T: Scalar>(
    plan: &Plan,
    ts: Option<&[Option<faer::Mat<T>>]>,
) -> Vec<std::sync::OnceLock<faer::Mat<T>>> {
    slots_of(plan.tiling(FACTOR).expect("a QR plan tiles its matrix"), ts)
}

/// The T slots of a matrix of `tiling`, set from `ts` where given.
fn slots_of<T: Scalar>(
    tiling: &Tiling,
    ts: Option<&[Option<faer::Mat<T>>]>,
) -> Vec<std::sync::OnceLock<faer::Mat<T>>> {
    (0..ReflectorWork::<T>::slots(tiling))
        .map(
            |i| match ts.and_then(|ts| ts.get(i)).and_then(Option::as_ref) {
                Some(t) => std::sync::OnceLock::from(t.clone()),
                None => std::sync::OnceLock::new(),
            },
        )
        .collect()
}

fn run_reflectors<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    store: &dyn TileStore<T>,
    inner: usize,
    ts: &[std::sync::OnceLock<faer::Mat<T>>],
    options: &RunOptions,
) -> Result<Trace> {
    expect_precision(plan, T::PRECISION)?;
    if inner == 0 {
        return Err(Error::InvalidOption {
            option: "inner block",
            reason: "0 columns: the block reflectors need at least one".into(),
        });
    }
    let tiling = *plan.tiling(FACTOR).expect("a QR plan tiles its matrix");
    let shape = |tile| plan.shape(tile);
    let work = ReflectorWork {
        tiles: tile_work(plan, &shape, store, platform),
        tiling,
        inner,
        ts,
        columns: false,
        found: &[],
        shared: &[],
    };
    run_graph(platform, &work, &plan.run_options(options)).map_err(|e| run_error(plan, e))
}
