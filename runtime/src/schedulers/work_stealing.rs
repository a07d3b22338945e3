//! Work stealing: per-worker LIFO deques (crossbeam-deque); a worker pushes the tasks it releases
//! onto its own deque, pops from it, and steals from the others when empty.

use std::sync::Mutex;

use crossbeam_deque::{Injector, Stealer, Worker as Deque};
use hetla_factorizations::TaskId;

use super::context::SchedContext;
use super::scheduler::Scheduler;
use crate::sync::lock;
use crate::workers::WorkerId;

/// Work stealing over crossbeam deques.
pub struct WorkStealing {
    /// Each worker's own deque; only its worker pushes and pops (the mutex is never contended: it
    /// only makes the owner-side handle shareable).
    locals: Vec<Mutex<Deque<TaskId>>>,
    stealers: Vec<Stealer<TaskId>>,
    /// Tasks released by no worker (the first ready tasks) or that a worker may not run.
    injector: Injector<TaskId>,
}

impl WorkStealing {
    /// A work-stealing scheduler for `workers` workers.
    pub fn new(workers: usize) -> Self {
        let deques: Vec<Deque<TaskId>> = (0..workers).map(|_| Deque::new_lifo()).collect();
        let stealers = deques.iter().map(Deque::stealer).collect();
        Self {
            locals: deques.into_iter().map(Mutex::new).collect(),
            stealers,
            injector: Injector::new(),
        }
    }
}

impl Scheduler for WorkStealing {
    fn push(&self, task: TaskId, origin: Option<WorkerId>, _now: f64, ctx: &SchedContext<'_>) {
        match origin {
            Some(w) if ctx.can_run(task, w) => lock(&self.locals[w]).push(task),
            _ => self.injector.push(task),
        }
    }

    fn pop(&self, worker: WorkerId, _now: f64, ctx: &SchedContext<'_>) -> Option<TaskId> {
        let local = lock(&self.locals[worker]);
        if let Some(task) = local.pop() {
            return Some(task);
        }
        let others = (1..self.stealers.len()).map(|i| (worker.0 + i) % self.stealers.len());
        let sources = std::iter::once(None).chain(others.map(Some));
        for source in sources {
            loop {
                let stolen = match source {
                    None => self.injector.steal(),
                    Some(v) => self.stealers[v].steal(),
                };
                match stolen {
                    crossbeam_deque::Steal::Success(task) if ctx.can_run(task, worker) => {
                        return Some(task);
                    }
                    crossbeam_deque::Steal::Success(task) => {
                        // Not ours to run: leave it where any worker looks.
                        self.injector.push(task);
                        break;
                    }
                    crossbeam_deque::Steal::Retry => continue,
                    crossbeam_deque::Steal::Empty => break,
                }
            }
        }
        None
    }
}
