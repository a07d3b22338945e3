//! A plan run on a platform, and how a failed run reads to the caller.

use hetla_factorizations::{FACTOR, TaskGraph};
use hetla_kernels::{KernelError, Op, Scalar};
use hetla_runtime::{Platform, RunError, RunOptions, RunStep, TaskFailure, Trace, execute};

use super::build::{Algorithm, Plan};
use crate::tiles::{
    ColumnBlocks, Matrices, PivotedWork, ReflectorWork, TileStore, TileWork, TiledMatrix,
};
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
        let work = TileWork {
            graph: &self.graph,
            keys: &self.keys,
            shape: &shape,
            store,
            backend: platform.backend(),
        };
        execute(platform, &work, &self.run_options(options)).map_err(|e| self.run_error(e))
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
            other => {
                return Err(Error::InvalidOption {
                    option: "plan",
                    reason: format!(
                        "the plan is a {} ({other:?}), the matrix {}x{}",
                        other.name(),
                        a.nrows(),
                        a.ncols()
                    ),
                });
            }
        };
        let tiling = hetla_factorizations::Tiling::square(n, self.tile())?;
        let store = ColumnBlocks::new(a, tiling, "A")?;
        let shape = |tile| self.shape(tile);
        let ipiv: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
        let zero = AtomicUsize::new(usize::MAX);
        let work = PivotedWork {
            tiles: TileWork {
                graph: &self.graph,
                keys: &self.keys,
                shape: &shape,
                store: &store,
                backend: platform.backend(),
            },
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

    /// Runs a QR plan on `platform` over `a` (m x n, column-major) in place, with block reflectors
    /// of `inner` columns: the trace and the T's of every tile's block reflectors, by slot
    /// ([`ReflectorWork::slot`]; empty where the graph factors nothing).
    pub(crate) fn execute_qr<T: Scalar>(
        &self,
        platform: &Platform,
        a: faer::MatMut<'_, T>,
        inner: usize,
        options: &RunOptions,
    ) -> Result<(Trace, Vec<Option<faer::Mat<T>>>)> {
        self.expect_precision(T::PRECISION)?;
        match self.algorithm() {
            Algorithm::Qr { m, n, .. } if (a.nrows(), a.ncols()) == (m, n) => {}
            other => {
                return Err(Error::InvalidOption {
                    option: "plan",
                    reason: format!(
                        "the plan is a {} ({other:?}), the matrix {}x{}",
                        other.name(),
                        a.nrows(),
                        a.ncols()
                    ),
                });
            }
        }
        if inner == 0 {
            return Err(Error::InvalidOption {
                option: "inner block",
                reason: "0 columns: the block reflectors need at least one".into(),
            });
        }
        let tiling = *self.tiling(FACTOR).expect("a QR plan tiles its matrix");
        let a = TiledMatrix::new(a, self.tile(), "A")?;
        let store = Matrices(&[&a]);
        let shape = |tile| self.shape(tile);
        let ts: Vec<std::sync::OnceLock<faer::Mat<T>>> = (0..ReflectorWork::<T>::slots(&tiling))
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let work = ReflectorWork {
            tiles: TileWork {
                graph: &self.graph,
                keys: &self.keys,
                shape: &shape,
                store: &store,
                backend: platform.backend(),
            },
            tiling,
            inner,
            ts: &ts,
        };
        let trace =
            execute(platform, &work, &self.run_options(options)).map_err(|e| self.run_error(e))?;
        Ok((
            trace,
            ts.into_iter()
                .map(std::sync::OnceLock::into_inner)
                .collect(),
        ))
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
