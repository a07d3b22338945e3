//! A plan run on a platform, and how a failed run reads to the caller.

use hetla_factorizations::{FACTOR, TaskGraph};
use hetla_kernels::{KernelError, Op, Scalar};
use hetla_runtime::{Platform, RunError, RunOptions, RunStep, TaskFailure, Trace, execute};

use super::build::{Algorithm, Plan, expect_precision};
use crate::tiles::{TileStore, TileWork};
use crate::{Error, Result};

impl Plan {
    /// Runs the plan on `platform` over the tiles `store` holds, with `options` and what the plan
    /// imposes on its runs ([`Plan::run_options`]); the trace of the run. Every task runs on the
    /// tiles alone: a family whose tasks keep side data runs its plans through its own work
    /// (Cholesky's panel inverses, LU's interchanges, QR's T's, Aasen's permutation).
    pub(crate) fn execute<T: Scalar>(
        &self,
        platform: &Platform,
        store: &dyn TileStore<T>,
        options: &RunOptions,
    ) -> Result<Trace> {
        expect_precision(self, T::PRECISION)?;
        let shape = |tile| self.shape(tile);
        let work = tile_work(self, &shape, store, platform);
        execute(platform, &work, &self.run_options(options)).map_err(|e| run_error(self, e))
    }
}

/// The plan's graph and keys over `store`, tiles of `shape`, on `platform`'s backend.
pub(crate) fn tile_work<'w, T: Scalar>(
    plan: &'w Plan,
    shape: &'w (dyn Fn(hetla_factorizations::TileRef) -> (usize, usize) + Sync),
    store: &'w dyn TileStore<T>,
    platform: &Platform,
) -> TileWork<'w, T> {
    TileWork {
        graph: plan.graph(),
        keys: &plan.keys,
        shape,
        store,
        backend: platform.backend(),
    }
}

pub(crate) fn not_for<T: Scalar>(other: Algorithm, a: &faer::MatRef<'_, T>) -> Error {
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

/// A failed run of this plan (or of its share on a rank, whose graph is `graph`) as the caller's
/// error: a POTRF pivot failure is [`Error::NotPositiveDefinite`] with the global column of the
/// factored matrix.
pub(crate) fn run_error_in(plan: &Plan, graph: &TaskGraph, e: RunError) -> Error {
    let task = match e.step {
        RunStep::Task(t) => Some(t),
        _ => None,
    };
    let op = task.map(|t| graph.task(t).op);
    match (e.step, op, e.failure) {
        (_, Some(Op::Potrf), TaskFailure::Kernel(KernelError::NotPositiveDefinite { index }))
            if plan.tiling(FACTOR).is_some() =>
        {
            let k = graph.task(task.unwrap_or_default()).accesses[0].tile.col;
            let tiling = plan.tiling(FACTOR).expect("checked above");
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
pub(crate) fn run_error(plan: &Plan, e: RunError) -> Error {
    run_error_in(plan, plan.graph(), e)
}
