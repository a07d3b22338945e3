//! Aasen's work: how the tasks of [`ldlt`](hetla_factorizations::ldlt)'s graph reach the run's
//! matrix (views that span tiles: a task lists every tile its views overlap), the Hermitian input
//! they read through the permutation Q, and the interchanges the panels leave beside the tiles.
//!
//! Q is a table `perm` (row i of Q A Q^T is row `perm[i]` of A), written by panel k (its rows below
//! block k) and read by the tasks of later steps, which the graph orders after it (each reads a
//! tile the panel wrote): the runtime's ordering publishes it, relaxed atomics suffice (as LU's
//! interchanges).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use hetla_factorizations::{Op, TaskId, ldlt_step};
use hetla_kernels::{KernelError, Scalar, swap_rows};
use hetla_runtime::Workload;

use super::aasen::{Blocks, add_product, gather, hermitian_part, lu_any, unit_lower, upper};
use super::band::{BandLu, StepBlocks, Stepped};
use crate::tiles::{TileWork, TiledMatrix, delegate_to_tiles};
use hetla_runtime::{Platform, RunOptions, execute as run_graph};

use crate::plan::{Algorithm, Plan, expect_precision, not_for, run_error, tile_work};
use crate::tiles::Matrices;
use crate::{Error, Result};

/// The work of an Aasen run: the graph over the run's matrix, the input and the permutation.
pub(crate) struct AasenWork<'w, T: Scalar> {
    /// The graph, keys, shapes, the run's matrix as tiles, the backend.
    pub tiles: TileWork<'w, T>,
    /// The run's matrix (the store of `tiles`), for views spanning tiles.
    pub matrix: &'w TiledMatrix<'w, T>,
    /// The lower triangle of the Hermitian input, read only.
    pub input: MatRef<'w, T>,
    /// The blocks of the order.
    pub blocks: Blocks,
    /// Row i of Q A Q^T is row `perm[i]` of A.
    pub perm: &'w [AtomicUsize],
    /// Panel k's interchanges (local to the rows below block k).
    pub pivots: &'w [OnceLock<Vec<usize>>],
    /// T's block column m (see [`AasenWork::hessenberg`]), made once.
    pub t_columns: &'w [OnceLock<Mat<T>>],
    /// What the second stage's block step k left (T's LU, see `band.rs`), set once.
    pub band: &'w [OnceLock<Stepped<T>>],
}

/// What a run of an Aasen plan leaves besides the run's matrix.
pub(crate) struct AasenRun<T> {
    pub trace: hetla_runtime::Trace,
    /// Each panel's interchanges (local to the rows below its block; none for the last block).
    pub pivots: Vec<Vec<usize>>,
    /// T's LU, block step by block step.
    pub band: Vec<Stepped<T>>,
}

impl<T: Scalar> Workload for AasenWork<'_, T> {
    delegate_to_tiles!();

    fn run(&self, id: TaskId, par: Par) -> std::result::Result<(), KernelError> {
        let task = self.tiles.graph.task(id);
        let (block, k) = ldlt_step(task);
        let failed = |e: crate::Error| KernelError::Operands {
            op: task.op,
            reason: e.to_string(),
        };
        match task.op {
            Op::LdltHessenberg => self.hessenberg(block, k, par),
            Op::LdltDiagonal => self.diagonal(k, par),
            Op::LdltUpdate => self.update(block, k, par),
            Op::LdltPanel => return self.panel(k, par).map_err(failed),
            Op::LdltSwap => return self.swap(block, k),
            Op::LdltBand => return self.band(k, par).map_err(failed),
            _ => return self.tiles.run(id, par),
        }
        Ok(())
    }
}

impl<T: Scalar> AasenWork<'_, T> {
    /// Block (i, j) of the run's matrix, read only.
    fn block(&self, i: usize, j: usize) -> MatRef<'_, T> {
        let b = &self.blocks;
        self.region((b.start(i), b.start(j)), (b.size(i), b.size(j)))
    }

    fn region(&self, first: (usize, usize), shape: (usize, usize)) -> MatRef<'_, T> {
        self.matrix.region(first, shape)
    }

    /// A writable view of the run's matrix.
    ///
    /// # Safety
    /// The running task writes every tile the view overlaps (its graph says so), so no other task
    /// uses them meanwhile, and the task holds no other view of them.
    unsafe fn region_mut(&self, first: (usize, usize), shape: (usize, usize)) -> MatMut<'_, T> {
        // SAFETY: the caller's contract is this one's; the run's matrix is writable.
        unsafe { self.matrix.region_mut(first, shape) }.expect("the run's matrix is writable")
    }

    /// Q's rows of block k (their rows of A).
    fn rows(&self, k: usize) -> Vec<usize> {
        let (first, size) = (self.blocks.start(k), self.blocks.size(k));
        self.perm[first..first + size]
            .iter()
            .map(|p| p.load(Relaxed))
            .collect()
    }

    /// L(k, k), explicitly (the identity for k = 0).
    fn l_diagonal(&self, k: usize) -> Mat<T> {
        match k {
            0 => Mat::identity(self.blocks.size(0), self.blocks.size(0)),
            // L(k, k) is b_k x b_k, the left of block (k, k - 1).
            _ => {
                let b = &self.blocks;
                let (first, size) = (b.start(k), b.size(k));
                unit_lower(self.region((first, b.start(k - 1)), (size, size)))
            }
        }
    }

    /// H(m, k) = T(m, m-1) L(k, m-1)^H + T(m, m) L(k, m)^H + T(m+1, m)^H L(k, m+1)^H, 1 <= m < k,
    /// into block (m - 1, k), as one product (in groups of columns): H(m, k)^H = [L(k, m-1) L(k, m)
    /// L(k, m+1)] C(m), C(m) = [T(m, m-1)^H; T(m, m); T(m+1, m)] (T's block column m, the same for
    /// every k: made once, by the first task that needs it). L's three blocks are side by side in
    /// the run's matrix.
    fn hessenberg(&self, m: usize, k: usize, par: Par) {
        let b = self.blocks;
        let column = self.t_columns[m].get_or_init(|| {
            let first = if m >= 2 { b.size(m - 1) } else { 0 };
            let mut c = Mat::<T>::zeros(first + b.size(m) + b.size(m + 1), b.size(m));
            if m >= 2 {
                c.as_mut()
                    .subrows_mut(0, first)
                    .copy_from(upper(self.block(m, m - 1)).adjoint());
            }
            c.as_mut()
                .subrows_mut(first, b.size(m))
                .copy_from(self.block(m, m));
            c.as_mut()
                .subrows_mut(first + b.size(m), b.size(m + 1))
                .copy_from(upper(self.block(m + 1, m)));
            c
        });
        let from = m.saturating_sub(2);
        let row = self.region((b.start(k), b.start(from)), (b.size(k), column.nrows()));
        // L(k, k) is the unit lower triangle of its block (T(k, k-1) is above it): a copy of the
        // row with it made explicit.
        let owned;
        let row = if m + 1 == k {
            let mut copy = row.to_owned();
            let last = copy.ncols() - b.size(k);
            copy.as_mut()
                .subcols_mut(last, b.size(k))
                .copy_from(self.l_diagonal(k));
            owned = copy;
            owned.as_ref()
        } else {
            row
        };
        // H(m, k) = (row C(m))^H: the products with both operands and the result column-major (at
        // order 8192 in f64 on 2 Zen 4 cores 1.2 ms a block of 192 where a transposed result took
        // 1.4-1.5 ms), by groups of C(m)'s columns that skip most of the zeros of its triangular
        // blocks (`hessenberg_groups`), then its adjoint copied into block (m - 1, k).
        let mut p = Mat::<T>::zeros(b.size(k), b.size(m));
        for (cols, rows) in hetla_kernels::hessenberg_groups(b.size(m), column.nrows()) {
            matmul(
                p.as_mut().subcols_mut(cols.start, cols.len()),
                Accum::Replace,
                row.subcols(rows.start, rows.len()),
                column
                    .as_ref()
                    .submatrix(rows.start, cols.start, rows.len(), cols.len()),
                T::from_f64(1.0),
                par,
            );
        }
        // SAFETY: the task writes block (m - 1, k) (`ldlt`'s graph).
        unsafe { self.tile_mut(m - 1, k) }.copy_from(p.adjoint());
    }

    /// T(k, k) = L(k, k)^-1 [A(k, k) - sum_{m < k} L(k, m) H(m, k) - L(k, k) T(k, k-1) L(k, k-1)^H]
    /// L(k, k)^-H into block (k, k), then H(k, k) = T(k, k-1) L(k, k-1)^H + T(k, k) L(k, k)^H, its
    /// adjoint into block (k - 1, k), when a panel follows.
    fn diagonal(&self, k: usize, par: Par) {
        let b = self.blocks;
        let bk = b.size(k);
        let rows = self.rows(k);
        let mut t = Mat::<T>::zeros(bk, bk);
        gather(self.input, &rows, &rows, t.as_mut());
        let lkk = self.l_diagonal(k);
        if k >= 2 {
            let (row, h) = (
                self.region((b.start(k), 0), (bk, b.start(k - 1))),
                self.region((0, b.start(k)), (b.start(k - 1), bk)),
            );
            add_product(t.as_mut(), row, h, -1.0, par);
            let mut w = Mat::<T>::zeros(bk, b.size(k - 1));
            let sub = upper(self.block(k, k - 1));
            add_product(w.as_mut(), lkk.as_ref(), sub.as_ref(), 1.0, par);
            add_product(
                t.as_mut(),
                w.as_ref(),
                self.block(k, k - 2).adjoint(),
                -1.0,
                par,
            );
        }
        if k >= 1 {
            solve_unit_lower_triangular_in_place(lkk.as_ref(), t.as_mut(), par);
            let mut s = t.adjoint().to_owned();
            solve_unit_lower_triangular_in_place(lkk.as_ref(), s.as_mut(), par);
            t = s;
        }
        hermitian_part(t.as_mut());
        // SAFETY: the task writes block (k, k) (`ldlt`'s graph).
        unsafe { self.tile_mut(k, k) }.copy_from(&t);
        if k >= 1 && k + 1 < b.count() {
            let mut hkk = Mat::<T>::zeros(bk, bk);
            if k >= 2 {
                let sub = upper(self.block(k, k - 1));
                add_product(
                    hkk.as_mut(),
                    sub.as_ref(),
                    self.block(k, k - 2).adjoint(),
                    1.0,
                    par,
                );
            }
            add_product(hkk.as_mut(), t.as_ref(), lkk.adjoint(), 1.0, par);
            // H(k, k)^H, for the products W(i) -= L(i, k) H(k, k) (`Op::GemmNt`, A B^H).
            // SAFETY: the task writes block (k - 1, k) too (square here: block k is not the
            // last).
            unsafe { self.tile_mut(k - 1, k) }.copy_from(hkk.adjoint());
        }
    }

    /// W(i) = A(i, k) - L(i, 1:k-1) H(1:k-1, k) into block (i, k), i > k (the graph's product of
    /// tiles (i, k-1) and (k-1, k), an `Op::GemmNt`, then subtracts L(i, k) H(k, k)).
    fn update(&self, i: usize, k: usize, par: Par) {
        let b = self.blocks;
        // SAFETY: the task writes block (i, k) (`ldlt`'s graph).
        let mut w = unsafe { self.tile_mut(i, k) };
        gather(self.input, &self.rows(i), &self.rows(k), w.rb_mut());
        if k >= 2 {
            let r = b.start(k - 1);
            let l = self.region((b.start(i), 0), (b.size(i), r));
            let h = self.region((0, b.start(k)), (r, b.size(k)));
            add_product(w, l, h, -1.0, par);
        }
    }

    /// The LU with partial pivoting of W = blocks (k+1.., k): L's block column k + 1; T(k+1, k) = U
    /// L(k, k)^-H on and above the diagonal of block (k + 1, k); the interchanges into Q.
    fn panel(&self, k: usize, par: Par) -> crate::Result<()> {
        let b = self.blocks;
        let below = b.start(k + 1);
        let bk = b.size(k);
        // SAFETY: the task writes blocks (k+1.., k), the whole view (`ldlt`'s graph).
        let mut w = unsafe { self.region_mut((below, b.start(k)), (b.n - below, bk)) };
        let piv = lu_any(self.tiles.backend, w.rb_mut(), par)?;
        let next = b.size(k + 1);
        // T(k+1, k)^H = L(k, k)^-1 U^H.
        let mut s = upper(w.rb().subrows(0, next)).adjoint().to_owned();
        if k >= 1 {
            solve_unit_lower_triangular_in_place(self.l_diagonal(k).as_ref(), s.as_mut(), par);
        }
        for j in 0..bk {
            for i in 0..next.min(j + 1) {
                w[(i, j)] = super::aasen::conj(s[(j, i)]);
            }
        }
        for (i, &p) in piv.iter().enumerate() {
            let (x, y) = (&self.perm[below + i], &self.perm[below + p]);
            let (a, c) = (x.load(Relaxed), y.load(Relaxed));
            x.store(c, Relaxed);
            y.store(a, Relaxed);
        }
        // Each panel runs once: a second set cannot happen.
        let _ = self.pivots[k].set(piv);
        Ok(())
    }

    /// The second stage's block step k (`band.rs`), from T's blocks in the run's matrix and what
    /// step k - 1 left.
    fn band(&self, k: usize, par: Par) -> crate::Result<()> {
        let b = self.blocks;
        let count = b.count();
        let carry = match k {
            0 => None,
            // The graph orders step k - 1 before step k: a missing one is a broken graph.
            _ => Some(
                &self.band[k - 1]
                    .get()
                    .ok_or_else(|| {
                        crate::Error::Kernel(KernelError::Operands {
                            op: Op::LdltBand,
                            reason: format!("T's block step {} has not run before step {k}", k - 1),
                        })
                    })?
                    .carry,
            ),
        };
        let sub = (k + 1 < count).then(|| upper(self.block(k + 1, k)));
        let next_sub = (k + 2 < count).then(|| upper(self.block(k + 2, k + 1)));
        let t = StepBlocks {
            diag: self.block(k, k),
            sub: sub.as_ref().map(Mat::as_ref),
            next_diag: (k + 1 < count).then(|| self.block(k + 1, k + 1)),
            next_sub: next_sub.as_ref().map(Mat::as_ref),
        };
        let stepped = BandLu::step(b, k, carry, t, self.tiles.backend, par)?;
        // Each step runs once: a second set cannot happen.
        let _ = self.band[k].set(stepped);
        Ok(())
    }

    /// Panel k's interchanges on the rows below block k of L's block column j + 1 (block column j
    /// of the run's matrix).
    fn swap(&self, j: usize, k: usize) -> std::result::Result<(), KernelError> {
        let b = self.blocks;
        let below = b.start(k + 1);
        // The graph orders panel k before its interchanges: a missing set is a broken graph.
        let piv = self.pivots[k].get().ok_or_else(|| KernelError::Operands {
            op: Op::LdltSwap,
            reason: format!("panel {k} has not run before its interchanges"),
        })?;
        // SAFETY: the task writes blocks (k+1.., j), the whole view (`ldlt`'s graph).
        let c = unsafe { self.region_mut((below, b.start(j)), (b.n - below, b.size(j))) };
        swap_rows(c, piv);
        Ok(())
    }

    /// Block (i, j), writable.
    ///
    /// # Safety
    /// As [`AasenWork::region_mut`]'s.
    unsafe fn tile_mut(&self, i: usize, j: usize) -> MatMut<'_, T> {
        let b = &self.blocks;
        // SAFETY: the caller's contract is this one's.
        unsafe { self.region_mut((b.start(i), b.start(j)), (b.size(i), b.size(j))) }
    }
}

/// `count` empty slots: what each block's tasks leave beside the tiles, set once.
pub(crate) fn slots<X>(count: usize) -> Vec<OnceLock<X>> {
    std::iter::repeat_with(OnceLock::new).take(count).collect()
}

/// The blocks of a run of `plan` on the n x n matrix of shape `a` from `input`, once the plan is
/// checked to be `algorithm`'s of order n in `T`'s precision.
pub(crate) fn run_blocks<T: Scalar>(
    plan: &Plan,
    algorithm: fn(usize) -> Algorithm,
    input: MatRef<'_, T>,
    a: (usize, usize),
) -> Result<Blocks> {
    expect_precision(plan, T::PRECISION)?;
    let n = input.nrows();
    if [a, input.shape()] != [(n, n); 2] || plan.algorithm() != algorithm(n) {
        return Err(not_for(plan.algorithm(), &input));
    }
    Ok(Blocks { n, b: plan.tile() })
}

/// Runs an LDL^T plan ([`Algorithm::Ldlt`]) on `platform`: `input` is the Hermitian matrix (its
/// lower triangle, only read), `a` the run's matrix (n x n, overwritten by L, T and the workspace
/// in the layout of [`ldlt`](hetla_factorizations::ldlt)'s graph); what the run leaves besides
/// ([`AasenRun`]: the trace, the interchanges, T's LU in block steps).
pub(crate) fn execute<T: Scalar>(
    plan: &Plan,
    platform: &Platform,
    input: faer::MatRef<'_, T>,
    a: faer::MatMut<'_, T>,
    options: &RunOptions,
) -> Result<AasenRun<T>> {
    use std::sync::OnceLock;
    use std::sync::atomic::AtomicUsize;
    let blocks = run_blocks(
        plan,
        |n| Algorithm::Ldlt { n },
        input,
        (a.nrows(), a.ncols()),
    )?;
    let n = blocks.n;
    let matrix = TiledMatrix::new(a, plan.tile(), "A")?;
    let list = [&matrix];
    let store = Matrices(&list);
    let shape = |tile| plan.shape(tile);
    let perm: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
    let pivots: Vec<OnceLock<Vec<usize>>> = slots(blocks.count());
    let t_columns: Vec<OnceLock<faer::Mat<T>>> = slots(blocks.count());
    let band: Vec<OnceLock<Stepped<T>>> = slots(blocks.count());
    let work = AasenWork {
        tiles: tile_work(plan, &shape, &store, platform),
        matrix: &matrix,
        input,
        blocks,
        perm: &perm,
        pivots: &pivots,
        t_columns: &t_columns,
        band: &band,
    };
    let trace =
        run_graph(platform, &work, &plan.run_options(options)).map_err(|e| run_error(plan, e))?;
    AasenRun::collect(trace, pivots, band)
}

impl<T> AasenRun<T> {
    /// What a run that ended left in its slots: each panel's interchanges (none for the last block)
    /// and every band step (a run that ended, no task failed, ran every step of the chain).
    pub(crate) fn collect(
        trace: hetla_runtime::Trace,
        pivots: Vec<OnceLock<Vec<usize>>>,
        band: Vec<OnceLock<Stepped<T>>>,
    ) -> Result<Self> {
        let pivots = (pivots.into_iter())
            .map(|p| p.into_inner().unwrap_or_default())
            .collect();
        let band = (band.into_iter().enumerate())
            .map(|(k, s)| {
                s.into_inner().ok_or_else(|| {
                    Error::Kernel(KernelError::Operands {
                        op: Op::LdltBand,
                        reason: format!("the run ended without T's block step {k}"),
                    })
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AasenRun {
            trace,
            pivots,
            band,
        })
    }
}
