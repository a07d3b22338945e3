//! Eager: one central queue ordered by priority; any idle worker takes the most urgent task it may
//! run.

use std::collections::BinaryHeap;
use std::sync::Mutex;

use hetla_factorizations::TaskId;

use super::context::SchedContext;
use super::queue::Queued;
use super::scheduler::Scheduler;
use crate::sync::lock;
use crate::workers::WorkerId;

/// One central priority queue.
#[derive(Default)]
pub struct Eager {
    queue: Mutex<BinaryHeap<Queued>>,
}

impl Scheduler for Eager {
    fn push(&self, task: TaskId, _origin: Option<WorkerId>, _now: f64, ctx: &SchedContext<'_>) {
        lock(&self.queue).push(Queued::new(task, ctx));
    }

    fn pop(&self, worker: WorkerId, _now: f64, ctx: &SchedContext<'_>) -> Option<TaskId> {
        let mut queue = lock(&self.queue);
        let mut skipped = Vec::new();
        let found = loop {
            match queue.pop() {
                Some(q) if ctx.can_run(q.task, worker) => break Some(q.task),
                Some(q) => skipped.push(q),
                None => break None,
            }
        };
        queue.extend(skipped);
        found
    }
}
