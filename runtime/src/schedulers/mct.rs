//! MCT, minimum completion time: a ready task goes to the worker expected to finish it first,
//! `max(free, now + transfer estimate) + estimate` (the executor prefetches the copies as soon as
//! the task is assigned, so they overlap the work queued before it); each worker pops its own queue
//! by priority. The arithmetic is [`helper_mct`](super::helper_mct)'s.

use super::helper_mct::{Completion, Scored, Terms};

/// Minimum expected completion time with per-worker priority queues.
pub struct Mct {
    queues: Completion,
}

impl Mct {
    /// An MCT scheduler for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Self {
            queues: Completion::new(workers),
        }
    }
}

impl Scored for Mct {
    fn queues(&self) -> &Completion {
        &self.queues
    }

    /// The expected completion: the copies overlap the queued work.
    fn score(&self, t: Terms) -> f64 {
        t.free.max(t.now + t.copies) + t.duration
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HOST, MemoryNode};
    use crate::schedulers::helper_mct::testing::{FarFromWorkerOne, context, worker};
    use crate::schedulers::scheduler::Scheduler;
    use crate::workers::ResourceKind;
    use crate::workers::WorkerId;
    use hetla_factorizations::TaskId;

    #[test]
    fn mct_weighs_the_transfers_a_worker_would_need() {
        let workers = [
            worker("cpu0", ResourceKind::Cpu, HOST),
            worker("gpu0", ResourceKind::Gpu, MemoryNode(1)),
        ];
        // Without transfer estimates, MCT alternates between the equal workers.
        let plain = context(&workers, 4);
        let mct = Mct::new(2);
        for t in 0..4 {
            mct.push(TaskId(t), None, 0.0, &plain);
        }
        let placed: Vec<_> = (0..4)
            .map(|t| mct.assigned_worker(TaskId(t)).unwrap().0)
            .collect();
        assert_eq!(placed, [0, 1, 0, 1]);
        // With 5 s of copies on worker 1, it only gets a task once worker 0 is busier than
        // that: the 6th task ends at 6 s on either (ties go to the first worker), the 7th
        // at 7 s on worker 0 and 6 s on worker 1.
        let estimates = FarFromWorkerOne;
        let aware = context(&workers, 7).with_transfers(&estimates);
        let mct = Mct::new(2);
        for t in 0..7 {
            mct.push(TaskId(t), None, 0.0, &aware);
        }
        let placed: Vec<_> = (0..7)
            .map(|t| mct.assigned_worker(TaskId(t)).unwrap().0)
            .collect();
        assert_eq!(placed, [0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(aware.transfer_estimate(TaskId(0), WorkerId(1)), 5.0);
        assert_eq!(mct.pop(WorkerId(1), 0.0, &aware), Some(TaskId(6)));
    }
}
