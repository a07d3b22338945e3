//! The interface every policy implements (see the [module](super) documentation).

use hetla_factorizations::TaskId;

use super::context::SchedContext;
use crate::workers::WorkerId;

/// A scheduling policy. See the module documentation.
pub trait Scheduler: Send + Sync {
    /// `task` became ready; `origin` is the worker whose task released it.
    fn push(&self, task: TaskId, origin: Option<WorkerId>, now: f64, ctx: &SchedContext<'_>);
    /// The next task for `worker`, if any.
    fn pop(&self, worker: WorkerId, now: f64, ctx: &SchedContext<'_>) -> Option<TaskId>;
    /// `worker` finished `task`.
    fn done(&self, _task: TaskId, _worker: WorkerId, _now: f64, _ctx: &SchedContext<'_>) {}
    /// The worker a pushed task is bound to, for policies that decide at push time (the executor
    /// then prefetches the task's tiles to that worker's memory node).
    fn assigned_worker(&self, _task: TaskId) -> Option<WorkerId> {
        None
    }
    /// The tasks `worker` will run next, up to `depth`, for policies that know (static plans); the
    /// executor prefetches their inputs.
    fn lookahead(&self, _worker: WorkerId, _depth: usize) -> Vec<TaskId> {
        Vec::new()
    }
}
