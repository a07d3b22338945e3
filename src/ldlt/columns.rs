//! Aasen's work in block columns, for platforms with GPUs: how the tasks of
//! [`ldlt_columns`](hetla_factorizations::ldlt_columns)' graph reach the run's matrix held as whole
//! block columns ([`ColumnBlocks`], LU's layout), what its host tasks leave beside it, and the
//! arguments of the kernels a GPU runs.
//!
//! The products (the update of each block column, H's terms) and the interchanges are kernels of
//! two block columns on the rows their arguments name ([`KernelArgs::AasenUpdate`],
//! [`KernelArgs::AasenHessenberg`], [`KernelArgs::Pivots`]), which the CPU runs the same way
//! (`Backend::run_any_with`): a GPU keeps the block columns it updates and swaps, and nothing
//! crosses but a block column a step (the gather's, the diagonal's, the panel's). The host's tasks
//! (the gather of A through Q, T's diagonal block, the panel, the band steps) leave the small
//! blocks the others need in slots, set once (T(k, k), L(k+1, k+1) and T(k+1, k), T's block columns
//! as kernel arguments), so that no host task reads a block column a GPU may be changing. The
//! permutation Q, the interchanges and the band's state are as in the tile graph's work
//! (`work.rs`), with the same ordering argument: a slot is read by tasks the graph orders after the
//! task that sets it (through [`STEPS`](hetla_factorizations::STEPS)' tiles or the block columns).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::{Mat, MatMut, MatRef, Par};
use hetla_factorizations::{FACTOR, Op, TaskId, TileRef, ldlt_columns_step};
use hetla_kernels::{AnyMat, AnyMut, AnyRef, KernelArgs, KernelError, Scalar};
use hetla_runtime::{Platform, RunOptions, Workload, execute as run_graph};

use super::aasen::{
    Blocks, add_product, conj, gather_par, hermitian_part, lu_any, unit_lower, upper,
};
use super::band::{BandLu, StepBlocks, Stepped};
use super::work::{AasenRun, run_blocks, slots};
use crate::plan::{Algorithm, Plan, run_error, tile_work};
use crate::tiles::{ColumnBlocks, ColumnMatrices, TileWork, delegate_to_tiles};
use crate::{Error, Result};

/// What panel k leaves for later host tasks: L(k+1, k+1) explicit (unit lower) and T(k+1, k) (upper
/// trapezoidal), both b_{k+1} x b_k but L's square.
struct PanelBlocks<T> {
    lower: Mat<T>,
    sub: Mat<T>,
}

/// The slots of a run, one per block, each set once by the task the documentation names.
struct Slots<T: Scalar> {
    /// Panel k's interchanges (local to the rows below block k).
    pivots: Vec<OnceLock<Vec<usize>>>,
    /// T(k, k), by the diagonal task.
    diag: Vec<OnceLock<Mat<T>>>,
    /// By panel k.
    panels: Vec<OnceLock<PanelBlocks<T>>>,
    /// T's block column j, [T(j-1, j); T(j, j); T(j+1, j)] (the first block for j >= 2), the
    /// argument of H's terms: made once, by the first task that needs it.
    t_columns: Vec<OnceLock<Arc<AnyMat>>>,
    /// What the second stage's block step k left.
    band: Vec<OnceLock<Stepped<T>>>,
}

/// The work of an Aasen run in block columns: the graph over the run's matrix, the input, the
/// permutation and the slots.
struct ColumnWork<'w, T: Scalar> {
    tiles: TileWork<'w, T>,
    input: MatRef<'w, T>,
    blocks: Blocks,
    /// Row i of Q A Q^T is row `perm[i]` of A.
    perm: &'w [AtomicUsize],
    slots: &'w Slots<T>,
}

impl<T: Scalar> Workload for ColumnWork<'_, T> {
    delegate_to_tiles!();

    /// The rows a GPU's kernel works on, and T's block column for H's terms (made on the host the
    /// first time; the tasks that set its blocks are ordered before).
    fn kernel_args(&self, id: TaskId) -> KernelArgs {
        let task = self.tiles.graph.task(id);
        let (j, k) = ldlt_columns_step(task);
        let b = self.blocks;
        match task.op {
            Op::LdltSwap => match self.slots.pivots[k].get() {
                Some(ipiv) => KernelArgs::Pivots {
                    first: b.start(k + 1),
                    ipiv: ipiv.clone(),
                },
                None => KernelArgs::None,
            },
            // The last column's term ends the update, below the diagonal block, with H(k, k).
            Op::LdltColumnUpdate if j + 1 == k => KernelArgs::AasenUpdate {
                first: b.start(k + 1),
                block: b.start(k - 1),
            },
            Op::LdltColumnUpdate => KernelArgs::AasenUpdate {
                first: b.start(k),
                block: b.start(j),
            },
            Op::LdltColumnHessenberg => match self.t_column(j) {
                Some(t) => KernelArgs::AasenHessenberg {
                    t,
                    top: b.start(j.saturating_sub(2)),
                    source: b.start(k),
                },
                None => KernelArgs::None,
            },
            _ => KernelArgs::None,
        }
    }

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        let (_, k) = ldlt_columns_step(task);
        let failed = |e: Error| KernelError::Operands {
            op: task.op,
            reason: e.to_string(),
        };
        match task.op {
            Op::LdltGather => self.gather(k, par),
            Op::LdltDiagonal => self.diagonal(k, par),
            Op::LdltPanel => self.panel(k, par).map_err(failed),
            Op::LdltBand => self.band(k, par).map_err(failed),
            _ => self.product(id, par),
        }
    }
}

impl<T: Scalar> ColumnWork<'_, T> {
    /// Block column k, read only.
    fn column(&self, k: usize) -> MatRef<'_, T> {
        let tile = TileRef::new(FACTOR, 0, k);
        self.tiles.store.tile(tile).expect("block column k is held")
    }

    /// Block column k, writable.
    ///
    /// # Safety
    /// The running task writes block column k (its graph says so), and holds no other view of it.
    unsafe fn column_mut(&self, k: usize) -> MatMut<'_, T> {
        let tile = TileRef::new(FACTOR, 0, k);
        // SAFETY: the caller's contract is this one's.
        unsafe { self.tiles.store.tile_mut(tile) }.expect("block column k is held")
    }

    /// What a task that needs slot `what` of block k finds there: set by a task the graph orders
    /// first, so a missing one is a broken graph.
    fn slot<'s, X>(
        (op, what): (Op, &str),
        slot: &'s OnceLock<X>,
    ) -> std::result::Result<&'s X, KernelError> {
        slot.get().ok_or_else(|| KernelError::Operands {
            op,
            reason: format!("{what} was not made before the task that reads it"),
        })
    }

    /// Q's rows from `first`, `count` of them (their rows of A).
    fn rows(&self, first: usize, count: usize) -> Vec<usize> {
        self.perm[first..first + count]
            .iter()
            .map(|p| p.load(Relaxed))
            .collect()
    }

    /// T's block column j (see [`Slots::t_columns`]), once its blocks are made.
    fn t_column(&self, j: usize) -> Option<Arc<AnyMat>> {
        let s = self.slots;
        let (diag, sub) = (s.diag[j].get()?, s.panels[j].get()?.sub.as_ref());
        let above = match j {
            0 | 1 => None,
            _ => Some(s.panels[j - 1].get()?.sub.as_ref()),
        };
        let column = s.t_columns[j].get_or_init(|| {
            let first = above.map_or(0, |a| a.ncols());
            let mut c = Mat::<T>::zeros(first + diag.nrows() + sub.nrows(), diag.ncols());
            if let Some(above) = above {
                c.as_mut().subrows_mut(0, first).copy_from(above.adjoint());
            }
            c.as_mut().subrows_mut(first, diag.nrows()).copy_from(diag);
            c.as_mut()
                .subrows_mut(first + diag.nrows(), sub.nrows())
                .copy_from(sub);
            Arc::new(AnyMat::from(c))
        });
        Some(column.clone())
    }

    /// A product or interchange task on the host: the block columns it reads and writes with the
    /// arguments a GPU would take.
    fn product(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        let (write, reads) = crate::tiles::operands(task)?;
        let read = reads
            .first()
            .map(|r| r.tile)
            .ok_or_else(|| KernelError::Operands {
                op: task.op,
                reason: "expected a block column read".into(),
            })?;
        let l = self.column(read.col);
        // SAFETY: the task writes this block column (its graph says so), which it does not read
        // (checked by `operands`).
        let c = unsafe { self.column_mut(write.tile.col) };
        let args = self.kernel_args(id);
        let backend = self.tiles.backend;
        backend.run_any_with(task.op, &[AnyRef::from(l)], AnyMut::from(c), &args, par)
    }

    /// Block column k: A(Q rows from block k, Q cols of block k), zeros above it but T(k-1, k) L(k,
    /// k)^H = (L(k, k) T(k, k-1))^H in block k - 2 (H(k - 1, k)'s term from L's diagonal block).
    fn gather(&self, k: usize, par: Par) -> std::result::Result<(), KernelError> {
        let b = self.blocks;
        let (first, bk) = (b.start(k), b.size(k));
        let term = match k {
            0 | 1 => None,
            _ => {
                let what = (Op::LdltGather, "the last panel's blocks");
                let panel = Self::slot(what, &self.slots.panels[k - 1])?;
                let mut d = Mat::<T>::zeros(bk, b.size(k - 1));
                add_product(
                    d.as_mut(),
                    panel.lower.as_ref(),
                    panel.sub.as_ref(),
                    1.0,
                    par,
                );
                Some(d)
            }
        };
        // SAFETY: the task writes block column k (its graph says so).
        let mut c = unsafe { self.column_mut(k) };
        c.as_mut().subrows_mut(0, first).fill(T::from_f64(0.0));
        if let Some(d) = term {
            c.as_mut()
                .subrows_mut(b.start(k - 2), d.ncols())
                .copy_from(d.adjoint());
        }
        let (rows, cols) = (self.rows(first, b.n - first), self.rows(first, bk));
        gather_par(
            self.input,
            &rows,
            &cols,
            c.subrows_mut(first, b.n - first),
            par,
        );
        Ok(())
    }

    /// T(k, k) = L(k, k)^-1 [X - L(k, k) P] L(k, k)^-H, X column k's block k (A(k, k) less the sum
    /// the update left there), P its block k - 1 (T(k, k-1) L(k, k-1)^H, H's terms left there);
    /// then H(k, k) = P + T(k, k) L(k, k)^H into block k - 1 when a panel follows.
    fn diagonal(&self, k: usize, par: Par) -> std::result::Result<(), KernelError> {
        let b = self.blocks;
        let bk = b.size(k);
        // SAFETY: the task writes block column k (its graph says so).
        let mut c = unsafe { self.column_mut(k) };
        let mut t = c.as_ref().subrows(b.start(k), bk).to_owned();
        let lower = match k {
            0 => None,
            _ => {
                let what = (Op::LdltDiagonal, "the last panel's blocks");
                Some(Self::slot(what, &self.slots.panels[k - 1])?.lower.as_ref())
            }
        };
        if let Some(lkk) = lower {
            // P is b_k x b_k (T(k, k-1) L(k, k-1)^H) at the top of block k - 1.
            let p = c.as_ref().subrows(b.start(k - 1), bk);
            add_product(t.as_mut(), lkk, p, -1.0, par);
            solve_unit_lower_triangular_in_place(lkk, t.as_mut(), par);
            let mut s = t.adjoint().to_owned();
            solve_unit_lower_triangular_in_place(lkk, s.as_mut(), par);
            t = s;
        }
        hermitian_part(t.as_mut());
        c.as_mut().subrows_mut(b.start(k), bk).copy_from(&t);
        if let Some(lkk) = lower.filter(|_| k + 1 < b.count()) {
            let mut h = c.as_mut().subrows_mut(b.start(k - 1), bk);
            add_product(h.as_mut(), t.as_ref(), lkk.adjoint(), 1.0, par);
        }
        // Each diagonal task runs once: a second set cannot happen.
        let _ = self.slots.diag[k].set(t);
        Ok(())
    }

    /// The LU with partial pivoting of column k's rows below block k (L's block column k + 1);
    /// T(k+1, k) = U L(k, k)^-H on and above the diagonal of block k + 1; the interchanges into Q;
    /// L(k+1, k+1) and T(k+1, k) into the slot.
    fn panel(&self, k: usize, par: Par) -> Result<()> {
        let b = self.blocks;
        let below = b.start(k + 1);
        let lower = match k {
            0 => None,
            _ => {
                let what = (Op::LdltPanel, "the last panel's blocks");
                Some(
                    &Self::slot(what, &self.slots.panels[k - 1])
                        .map_err(Error::Kernel)?
                        .lower,
                )
            }
        };
        // SAFETY: the task writes block column k (its graph says so).
        let c = unsafe { self.column_mut(k) };
        let mut w = c.subrows_mut(below, b.n - below);
        let piv = lu_any(self.tiles.backend, w.as_mut(), par)?;
        let next = b.size(k + 1);
        // T(k+1, k)^H = L(k, k)^-1 U^H.
        let mut s = upper(w.as_ref().subrows(0, next)).adjoint().to_owned();
        if let Some(lkk) = lower {
            solve_unit_lower_triangular_in_place(lkk.as_ref(), s.as_mut(), par);
        }
        for j in 0..w.ncols() {
            for i in 0..next.min(j + 1) {
                w[(i, j)] = conj(s[(j, i)]);
            }
        }
        for (i, &p) in piv.iter().enumerate() {
            let (x, y) = (&self.perm[below + i], &self.perm[below + p]);
            let (a, c) = (x.load(Relaxed), y.load(Relaxed));
            x.store(c, Relaxed);
            y.store(a, Relaxed);
        }
        let top = w.as_ref().subrows(0, next);
        let blocks = PanelBlocks {
            lower: unit_lower(top.subcols(0, next.min(top.ncols()))),
            sub: upper(top),
        };
        // Each panel runs once: a second set cannot happen.
        let _ = self.slots.pivots[k].set(piv);
        let _ = self.slots.panels[k].set(blocks);
        Ok(())
    }

    /// The second stage's block step k (`band.rs`), from T's blocks in the slots and what step k -
    /// 1 left.
    fn band(&self, k: usize, par: Par) -> Result<()> {
        let (b, s) = (self.blocks, self.slots);
        let count = b.count();
        let missing = |what: String| {
            Error::Kernel(KernelError::Operands {
                op: Op::LdltBand,
                reason: format!("{what} was not made before T's block step {k}"),
            })
        };
        let carry = match k {
            0 => None,
            _ => Some(
                &s.band[k - 1]
                    .get()
                    .ok_or_else(|| missing(format!("step {}", k - 1)))?
                    .carry,
            ),
        };
        let diag = |i: usize| {
            s.diag[i]
                .get()
                .ok_or_else(|| missing(format!("T({i}, {i})")))
        };
        let sub = |i: usize| {
            let panel = s.panels[i]
                .get()
                .ok_or_else(|| missing(format!("panel {i}")))?;
            Ok::<_, Error>(panel.sub.as_ref())
        };
        let t = StepBlocks {
            diag: diag(k)?.as_ref(),
            sub: (k + 1 < count).then(|| sub(k)).transpose()?,
            next_diag: (k + 1 < count)
                .then(|| diag(k + 1).map(Mat::as_ref))
                .transpose()?,
            next_sub: (k + 2 < count).then(|| sub(k + 1)).transpose()?,
        };
        let stepped = BandLu::step(b, k, carry, t, self.tiles.backend, par)?;
        // Each step runs once: a second set cannot happen.
        let _ = s.band[k].set(stepped);
        Ok(())
    }
}

/// Runs an LDL^T plan in block columns ([`Algorithm::LdltColumns`]) on `platform`: as
/// [`super::work::execute`] does the tile graph's, with the same result.
pub(crate) fn execute<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    input: MatRef<'_, T>,
    a: MatMut<'_, T>,
    options: &RunOptions,
) -> Result<AasenRun<T>> {
    let which = |n| Algorithm::LdltColumns { n };
    let blocks = run_blocks(plan, which, input, (a.nrows(), a.ncols()))?;
    let n = blocks.n;
    let tiling = hetla_factorizations::Tiling::square(n, plan.tile())?;
    let matrix = ColumnBlocks::new(a, tiling, "A")?;
    let store = ColumnMatrices(&matrix, None);
    let shape = |tile| plan.shape(tile);
    let perm: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
    let count = blocks.count();
    let slots = Slots {
        pivots: slots(count),
        diag: slots(count),
        panels: slots(count),
        t_columns: slots(count),
        band: slots(count),
    };
    let work = ColumnWork {
        tiles: tile_work(plan, &shape, &store, platform),
        input,
        blocks,
        perm: &perm,
        slots: &slots,
    };
    let trace =
        run_graph(platform, &work, &plan.run_options(options)).map_err(|e| run_error(plan, e))?;
    AasenRun::collect(trace, slots.pivots, slots.band)
}
