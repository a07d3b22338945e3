//! The completion arithmetic of the policies that bind a task to a worker when it becomes ready
//! (StarPU's `helper_mct`): each worker's queue ordered by priority, the work charged to it, the
//! expected end of its running task, and the choice of the worker whose score is smallest.
//! [`super::Mct`] and [`super::Dmda`] differ only in the score.
//!
//! A worker's *free* time is `max(now, end of its running task) + its queued work`. A worker whose
//! model lacks the task's kernel ([`Estimate::Uncalibrated`]) wins over every calibrated one, the
//! least loaded first, so that the kernel gets measured; among calibrated workers the smallest
//! score wins, ties to the first. The transfer estimate is only computed for calibrated workers (it
//! reads the data registry).

use std::collections::BinaryHeap;
use std::sync::Mutex;

use hetla_factorizations::TaskId;

use super::context::{Estimate, SchedContext};
use super::queue::Queued;
use super::scheduler::Scheduler;
use crate::sync::lock;
use crate::workers::WorkerId;

/// What a score is computed from, for one task on one calibrated worker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terms {
    /// The worker's free time: `max(now, end of its running task) + queued work`.
    pub free: f64,
    /// The time of the decision.
    pub now: f64,
    /// The estimated duration of the task on the worker.
    pub duration: f64,
    /// Seconds of the copies the task would need on the worker's memory node.
    pub copies: f64,
}

#[derive(Default)]
struct State {
    queues: Vec<BinaryHeap<Queued>>,
    /// Estimated seconds of the tasks waiting in each queue.
    queued_work: Vec<f64>,
    /// Expected end of the task each worker is running.
    running_end: Vec<f64>,
    /// The estimate each queued task was charged with.
    charged: Vec<(WorkerId, f64)>,
}

/// Per-worker priority queues with the work charged to each (see the module documentation).
pub(super) struct Completion {
    state: Mutex<State>,
}

impl Completion {
    /// Empty queues for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Self {
            state: Mutex::new(State {
                queues: (0..workers).map(|_| BinaryHeap::new()).collect(),
                queued_work: vec![0.0; workers],
                running_end: vec![0.0; workers],
                charged: Vec::new(),
            }),
        }
    }

    /// Queues `task` on the worker with the smallest `score` (see the module documentation) and
    /// charges it the task's estimate there.
    pub fn push(
        &self,
        task: TaskId,
        now: f64,
        ctx: &SchedContext<'_>,
        score: impl Fn(Terms) -> f64,
    ) {
        let mut s = lock(&self.state);
        if s.charged.len() < ctx.tasks() {
            s.charged.resize(ctx.tasks(), (WorkerId(0), 0.0));
        }
        let (w, seconds) = choose(&s, task, now, ctx, score);
        s.queues[w].push(Queued::new(task, ctx));
        s.queued_work[w] += seconds;
        s.charged[task] = (w, seconds);
    }

    /// The most urgent task of `worker`'s queue, which starts running now.
    pub fn pop(&self, worker: WorkerId, now: f64) -> Option<TaskId> {
        let mut s = lock(&self.state);
        let task = s.queues[worker].pop()?.task;
        let seconds = s.charged[task].1;
        s.queued_work[worker] = (s.queued_work[worker] - seconds).max(0.0);
        s.running_end[worker] = now + seconds;
        Some(task)
    }

    /// `worker` ended its task at `now`.
    pub fn done(&self, worker: WorkerId, now: f64) {
        lock(&self.state).running_end[worker] = now;
    }

    /// The worker `task` was queued on.
    pub fn assigned(&self, task: TaskId) -> Option<WorkerId> {
        lock(&self.state).charged.get(task.0).map(|&(w, _)| w)
    }

    /// Sets the expected ends of the workers' running tasks (tests).
    #[cfg(test)]
    pub fn set_running_ends(&self, ends: Vec<f64>) {
        lock(&self.state).running_end = ends;
    }
}

/// A policy made of [`Completion`]'s queues and a score of [`Terms`]: the queues do the rest of a
/// [`Scheduler`]'s work, so a policy of this family is its score.
pub(super) trait Scored: Send + Sync {
    /// Its queues.
    fn queues(&self) -> &Completion;
    /// The score of a task on a worker (the smallest wins).
    fn score(&self, terms: Terms) -> f64;
}

impl<S: Scored> Scheduler for S {
    fn push(&self, task: TaskId, _origin: Option<WorkerId>, now: f64, ctx: &SchedContext<'_>) {
        self.queues().push(task, now, ctx, |t| self.score(t));
    }

    fn pop(&self, worker: WorkerId, now: f64, _ctx: &SchedContext<'_>) -> Option<TaskId> {
        self.queues().pop(worker, now)
    }

    fn done(&self, _task: TaskId, worker: WorkerId, now: f64, _ctx: &SchedContext<'_>) {
        self.queues().done(worker, now);
    }

    fn assigned_worker(&self, task: TaskId) -> Option<WorkerId> {
        self.queues().assigned(task)
    }
}

/// The worker `score` picks for `task` and the estimate charged to it.
fn choose(
    state: &State,
    task: TaskId,
    now: f64,
    ctx: &SchedContext<'_>,
    score: impl Fn(Terms) -> f64,
) -> (WorkerId, f64) {
    let mut best: Option<(bool, f64, WorkerId, f64)> = None;
    for w in ctx.worker_ids().filter(|&w| ctx.can_run(task, w)) {
        let free = state.running_end[w].max(now) + state.queued_work[w];
        let estimate = ctx.estimate(task, w);
        let (calibrating, score) = match estimate {
            Estimate::Uncalibrated(_) => (true, free),
            Estimate::Known(duration) => {
                let copies = ctx.transfer_estimate(task, w);
                let terms = Terms {
                    free,
                    now,
                    duration,
                    copies,
                };
                (false, score(terms))
            }
        };
        let candidate = (calibrating, score, w, estimate.seconds());
        best = Some(match best {
            None => candidate,
            Some(b) if (candidate.0 && !b.0) || (candidate.0 == b.0 && candidate.1 < b.1) => {
                candidate
            }
            Some(b) => b,
        });
    }
    // Some worker can always run a task: the executor checks restrictions before the run.
    let (_, _, w, seconds) = best.unwrap_or((false, 0.0, WorkerId(0), 0.0));
    (w, seconds)
}

/// Workers and contexts the tests of MCT and dmda share.
#[cfg(test)]
pub(super) mod testing {
    use hetla_factorizations::TaskId;

    use crate::data::MemoryNode;
    use crate::perfmodel::{MIN_SAMPLES, ResourceClass, Stats};
    use crate::schedulers::{SchedContext, TransferEstimate};
    use crate::workers::{ResourceKind, WorkerId, WorkerInfo};

    /// A one-core worker of `kind` on `node`.
    pub fn worker(name: &str, kind: ResourceKind, node: MemoryNode) -> WorkerInfo {
        WorkerInfo {
            name: name.into(),
            kind,
            class: ResourceClass::CpuCluster { cores: 1 },
            node,
            cpus: vec![0],
        }
    }

    /// Missing inputs cost 5 s on worker 1's node and nothing on worker 0's.
    pub struct FarFromWorkerOne;
    impl TransferEstimate for FarFromWorkerOne {
        fn seconds(&self, _task: TaskId, worker: WorkerId) -> f64 {
            if worker == WorkerId(1) { 5.0 } else { 0.0 }
        }
    }

    /// Workers of one class, every task known to take 1 s.
    pub fn context(workers: &[WorkerInfo], tasks: usize) -> SchedContext<'_> {
        let known = Stats {
            samples: MIN_SAMPLES,
            mean: 1.0,
            m2: 0.0,
        };
        SchedContext::uniform(workers, tasks, known)
    }
}
