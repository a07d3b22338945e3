//! A priority queue's entry, as the policies that order tasks by priority queue them.

use std::cmp::Ordering;

use hetla_factorizations::TaskId;

use super::context::SchedContext;

/// A queued task: higher priority first, then earlier submission.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queued {
    pub priority: f64,
    pub task: TaskId,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .total_cmp(&other.priority)
            .then_with(|| other.task.cmp(&self.task))
    }
}

impl Queued {
    /// `task` with its priority in `ctx`.
    pub fn new(task: TaskId, ctx: &SchedContext<'_>) -> Self {
        Self {
            priority: ctx.priority(task),
            task,
        }
    }
}
