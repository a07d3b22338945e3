//! A plan run on a platform, and how a failed run reads to the caller.

use hetla_factorizations::{FACTOR, TaskGraph};
use hetla_kernels::{KernelError, Op, Scalar};
use hetla_runtime::{Platform, RunError, RunOptions, RunStep, TaskFailure, Trace, execute};

use super::build::{Algorithm, Plan};
use crate::cholesky::work::InvertingWork;
use crate::ldlt::aasen::Blocks;
use crate::ldlt::band::Stepped;
use crate::ldlt::work::{AasenRun, AasenWork};
use crate::lu::work::PivotedWork;
use crate::qr::work::ReflectorWork;
use crate::tiles::{ColumnBlocks, Matrices, TileStore, TileWork, TiledMatrix};
use crate::{Error, Result};

impl Plan {
    /// Runs the plan on `platform` over the tiles `store` holds, with `options` and what the plan
    /// imposes on its runs ([`Plan::run_options`]); the trace of the run.
    pub(crate) fn execute<T: Scalar>(
        &self,
        platform: &Platform,
        store: &dyn TileStore<T>,
        options: &RunOptions,
    ) -> Result<Trace> {
        self.expect_precision(T::PRECISION)?;
        let shape = |tile| self.shape(tile);
        let work = self.tile_work(&shape, store, platform);
        let options = self.run_options(options);
        match self.algorithm() {
            Algorithm::Cholesky { n } => {
                let work = InvertingWork::new(work, n.div_ceil(self.tile().max(1)));
                execute(platform, &work, &options)
            }
            _ => execute(platform, &work, &options),
        }
        .map_err(|e| self.run_error(e))
    }

    /// The plan's graph and keys over `store`, tiles of `shape`, on `platform`'s backend.
    fn tile_work<'w, T: Scalar>(
        &'w self,
        shape: &'w (dyn Fn(hetla_factorizations::TileRef) -> (usize, usize) + Sync),
        store: &'w dyn TileStore<T>,
        platform: &Platform,
    ) -> TileWork<'w, T> {
        TileWork {
            graph: &self.graph,
            keys: &self.keys,
            shape,
            store,
            backend: platform.backend(),
        }
    }

    /// Runs an LU plan on `platform` over `a` (its order, column-major) in place: the trace, the
    /// row interchanges (LAPACK's ipiv, 0-based and global: row i was swapped with `ipiv[i]`) and
    /// the first column whose pivot was exactly zero.
    pub(crate) fn execute_lu<T: Scalar>(
        &self,
        platform: &Platform,
        a: faer::MatMut<'_, T>,
        options: &RunOptions,
    ) -> Result<(Trace, Vec<usize>, Option<usize>)> {
        use std::sync::atomic::AtomicUsize;
        self.expect_precision(T::PRECISION)?;
        let n = match self.algorithm() {
            Algorithm::Lu { n } if (a.nrows(), a.ncols()) == (n, n) => n,
            other => return Err(self.not_for(other, &a.as_ref())),
        };
        let tiling = hetla_factorizations::Tiling::square(n, self.tile())?;
        let store = ColumnBlocks::new(a, tiling, "A")?;
        let shape = |tile| self.shape(tile);
        let ipiv: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
        let zero = AtomicUsize::new(usize::MAX);
        let work = PivotedWork {
            tiles: self.tile_work(&shape, &store, platform),
            tiling,
            ipiv: &ipiv,
            zero: &zero,
        };
        let trace =
            execute(platform, &work, &self.run_options(options)).map_err(|e| self.run_error(e))?;
        let zero = Some(zero.into_inner()).filter(|&z| z != usize::MAX);
        Ok((
            trace,
            ipiv.into_iter().map(AtomicUsize::into_inner).collect(),
            zero,
        ))
    }

    /// Runs an LDL^T plan ([`Plan::ldlt`]) on `platform`: `input` is the Hermitian matrix (its
    /// lower triangle, only read), `a` the run's matrix (n x n, overwritten by L, T and the
    /// workspace in the layout of [`ldlt`](hetla_factorizations::ldlt)'s graph); what the run
    /// leaves besides ([`AasenRun`]: the trace, the interchanges, T's LU in block steps).
    pub(crate) fn execute_ldlt<T: Scalar>(
        &self,
        platform: &Platform,
        input: faer::MatRef<'_, T>,
        a: faer::MatMut<'_, T>,
        options: &RunOptions,
    ) -> Result<AasenRun<T>> {
        use std::sync::OnceLock;
        use std::sync::atomic::AtomicUsize;
        self.expect_precision(T::PRECISION)?;
        let shapes = [(a.nrows(), a.ncols()), (input.nrows(), input.ncols())];
        let n = match self.algorithm() {
            Algorithm::Ldlt { n } if shapes == [(n, n); 2] => n,
            other => return Err(self.not_for(other, &input)),
        };
        let blocks = Blocks { n, b: self.tile() };
        let matrix = TiledMatrix::new(a, self.tile(), "A")?;
        let list = [&matrix];
        let store = Matrices(&list);
        let shape = |tile| self.shape(tile);
        let perm: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
        // What each block's tasks leave beside the tiles, set once.
        fn slots<X>(count: usize) -> Vec<OnceLock<X>> {
            std::iter::repeat_with(OnceLock::new).take(count).collect()
        }
        let pivots: Vec<OnceLock<Vec<usize>>> = slots(blocks.count());
        let t_columns: Vec<OnceLock<faer::Mat<T>>> = slots(blocks.count());
        let band: Vec<OnceLock<Stepped<T>>> = slots(blocks.count());
        let work = AasenWork {
            tiles: self.tile_work(&shape, &store, platform),
            matrix: &matrix,
            input,
            blocks,
            perm: &perm,
            pivots: &pivots,
            t_columns: &t_columns,
            band: &band,
        };
        let trace =
            execute(platform, &work, &self.run_options(options)).map_err(|e| self.run_error(e))?;
        let pivots = pivots
            .into_iter()
            .map(|p| p.into_inner().unwrap_or_default())
            .collect();
        // A run that ended (no task failed) ran every step of the chain.
        let band = band
            .into_iter()
            .enumerate()
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

    /// Runs a QR plan ([`Plan::qr`], [`Plan::qr_least_squares`]) on `platform` over `a` (m x n) in
    /// place, and over `b` (its right-hand sides, overwritten by Q^H B) when the plan has some,
    /// with block reflectors of `inner` columns: the trace and the T's of every tile's block
    /// reflectors, by slot ([`ReflectorWork::slot`]; `None` where the graph factors nothing).
    pub(crate) fn execute_qr<T: Scalar>(
        &self,
        platform: &Platform,
        a: faer::MatMut<'_, T>,
        b: Option<faer::MatMut<'_, T>>,
        inner: usize,
        options: &RunOptions,
    ) -> Result<(Trace, Vec<Option<faer::Mat<T>>>)> {
        let rhs = match self.algorithm() {
            Algorithm::Qr { m, n, rhs, .. } if (a.nrows(), a.ncols()) == (m, n) => rhs,
            other => return Err(self.not_for(other, &a.as_ref())),
        };
        self.check_rhs(rhs, b.as_ref().map(|b| b.as_ref()))?;
        let a = TiledMatrix::new(a, self.tile(), "A")?;
        let b = b
            .map(|b| TiledMatrix::new(b, self.tile(), "B"))
            .transpose()?;
        let matrices: Vec<&TiledMatrix<'_, T>> = std::iter::once(&a).chain(b.as_ref()).collect();
        let ts = self.t_slots::<T>(None);
        let trace = self.run_reflectors(platform, &Matrices(&matrices), inner, &ts, options)?;
        Ok((
            trace,
            ts.into_iter()
                .map(std::sync::OnceLock::into_inner)
                .collect(),
        ))
    }

    /// Runs a [`Plan::qr_apply`] plan: B <- Q^H B, Q from `a` factored by the QR plan of the same
    /// tile and tree, whose T's are `ts` (by slot, as [`Plan::execute_qr`] returned them).
    pub(crate) fn execute_qr_apply<T: Scalar>(
        &self,
        platform: &Platform,
        a: faer::MatRef<'_, T>,
        ts: &[Option<faer::Mat<T>>],
        b: faer::MatMut<'_, T>,
        inner: usize,
        options: &RunOptions,
    ) -> Result<Trace> {
        let rhs = match self.algorithm() {
            Algorithm::QrApply { m, n, rhs, .. } if (a.nrows(), a.ncols()) == (m, n) => rhs,
            other => return Err(self.not_for(other, &a)),
        };
        self.check_rhs(rhs, Some(b.as_ref()))?;
        let a = TiledMatrix::read_only(a, self.tile(), "A")?;
        let b = TiledMatrix::new(b, self.tile(), "B")?;
        let slots = self.t_slots(Some(ts));
        self.run_reflectors(platform, &Matrices(&[&a, &b]), inner, &slots, options)
    }

    fn not_for<T: Scalar>(&self, other: Algorithm, a: &faer::MatRef<'_, T>) -> Error {
        Error::InvalidOption {
            option: "plan",
            reason: format!(
                "the plan is a {} ({other:?}), the matrix {}x{}",
                other.name(),
                a.nrows(),
                a.ncols()
            ),
        }
    }

    fn check_rhs<T: Scalar>(&self, rhs: usize, b: Option<faer::MatRef<'_, T>>) -> Result<()> {
        let m = self.tiling(FACTOR).map_or(0, |t| t.rows());
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
        &self,
        ts: Option<&[Option<faer::Mat<T>>]>,
    ) -> Vec<std::sync::OnceLock<faer::Mat<T>>> {
        let tiling = self.tiling(FACTOR).expect("a QR plan tiles its matrix");
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
        &self,
        platform: &Platform,
        store: &dyn TileStore<T>,
        inner: usize,
        ts: &[std::sync::OnceLock<faer::Mat<T>>],
        options: &RunOptions,
    ) -> Result<Trace> {
        self.expect_precision(T::PRECISION)?;
        if inner == 0 {
            return Err(Error::InvalidOption {
                option: "inner block",
                reason: "0 columns: the block reflectors need at least one".into(),
            });
        }
        let tiling = *self.tiling(FACTOR).expect("a QR plan tiles its matrix");
        let shape = |tile| self.shape(tile);
        let work = ReflectorWork {
            tiles: self.tile_work(&shape, store, platform),
            tiling,
            inner,
            ts,
            columns: false,
        };
        execute(platform, &work, &self.run_options(options)).map_err(|e| self.run_error(e))
    }

    /// A failed run of this plan (or of its share on a rank, whose graph is `graph`) as the
    /// caller's error: a POTRF pivot failure is [`Error::NotPositiveDefinite`] with the global
    /// column of the factored matrix.
    pub(crate) fn run_error_in(&self, graph: &TaskGraph, e: RunError) -> Error {
        let task = match e.step {
            RunStep::Task(t) => Some(t),
            _ => None,
        };
        let op = task.map(|t| graph.task(t).op);
        match (e.step, op, e.failure) {
            (
                _,
                Some(Op::Potrf),
                TaskFailure::Kernel(KernelError::NotPositiveDefinite { index }),
            ) if self.tiling(FACTOR).is_some() => {
                let k = graph.task(task.unwrap_or_default()).accesses[0].tile.col;
                let tiling = self.tiling(FACTOR).expect("checked above");
                Error::NotPositiveDefinite {
                    column: tiling.offset(k) + index,
                }
            }
            (RunStep::WriteBack, _, TaskFailure::Kernel(error)) => Error::WriteBack(error),
            (_, _, TaskFailure::Kernel(error)) => Error::Kernel(error),
            (_, _, TaskFailure::Panic(message)) => Error::TaskPanicked {
                task: task.unwrap_or_default(),
                op: op.map_or("setup", |op| op.name()).to_owned(),
                message,
            },
            (_, _, TaskFailure::Memory(no_room)) => hetla_runtime::Error::Memory(no_room).into(),
            (_, _, TaskFailure::NoWorker) => hetla_runtime::Error::NoWorker {
                task: task.unwrap_or_default(),
                op: op.map_or("?", |op| op.name()).to_owned(),
            }
            .into(),
            (_, _, TaskFailure::Plan(reason)) => hetla_runtime::Error::Plan { reason }.into(),
            (_, _, failure) => hetla_runtime::Error::Plan {
                reason: format!("the run failed: {failure:?}"),
            }
            .into(),
        }
    }

    /// A failed run of this plan as the caller's error (see [`Plan::run_error_in`]).
    pub(crate) fn run_error(&self, e: RunError) -> Error {
        self.run_error_in(&self.graph, e)
    }
}
