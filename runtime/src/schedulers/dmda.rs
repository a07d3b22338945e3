//! dmda, StarPU's policy of that name: MCT's queues, but the score is
//! `free + estimate + beta x transfer estimate`: a copy always costs, also when the worker's queue
//! would hide it, so tasks stay where their data is. Under MCT's score a busy worker's transfers
//! are free, and a chain of updates to one tile wanders from device to device (96% of the steps of
//! a GEMM C tile's chain on sirocco). The arithmetic is [`helper_mct`](super::helper_mct)'s.

use super::helper_mct::{Completion, Scored, Terms};

/// dmda's default beta (StarPU's `STARPU_SCHED_BETA`).
pub const DMDA_BETA: f64 = 1.0;

/// Minimum expected completion time with each transfer as a penalty.
pub struct Dmda {
    queues: Completion,
    /// The weight of the transfer time added to the expected completion.
    beta: f64,
}

impl Dmda {
    /// A dmda scheduler for `workers` workers: transfers weigh `beta` times their estimated seconds
    /// in every score.
    pub fn new(workers: usize, beta: f64) -> Self {
        Self {
            queues: Completion::new(workers),
            beta,
        }
    }
}

impl Scored for Dmda {
    fn queues(&self) -> &Completion {
        &self.queues
    }

    /// The expected completion with every copy charged, `beta` times its seconds.
    fn score(&self, t: Terms) -> f64 {
        t.free + t.duration + self.beta * t.copies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HOST, MemoryNode};
    use crate::schedulers::Mct;
    use crate::schedulers::helper_mct::testing::{FarFromWorkerOne, context, worker};
    use crate::schedulers::scheduler::Scheduler;
    use crate::workers::ResourceKind;
    use hetla_factorizations::TaskId;

    #[test]
    fn dmda_charges_transfers_that_a_busy_queue_would_hide() {
        let workers = [
            worker("cpu0", ResourceKind::Cpu, HOST),
            worker("gpu0", ResourceKind::Gpu, MemoryNode(1)),
        ];
        let estimates = FarFromWorkerOne;
        // Worker 1 is busy for 10 s: under MCT its 5 s of copies hide under that queue, so
        // the task (1 s) goes to whichever ends first, counting no copy: worker 0 is busier
        // still (12 s), so MCT moves the task to worker 1 and its data with it.
        let place = |scheduler: &dyn Scheduler, queues: &Completion| {
            let ctx = context(&workers, 14).with_transfers(&estimates);
            queues.set_running_ends(vec![12.0, 10.0]);
            scheduler.push(TaskId(0), None, 0.0, &ctx);
            scheduler.assigned_worker(TaskId(0)).unwrap().0
        };
        let mct = Mct::new(2);
        assert_eq!(place(&mct, mct.queues()), 1);
        // dmda charges the copies: 10 + 1 + 5 on worker 1 against 12 + 1 on worker 0.
        let dmda = Dmda::new(2, 1.0);
        assert_eq!(place(&dmda, &dmda.queues), 0);
        // beta weighs them: at 0.2 the copies cost 1 s, and worker 1 wins again.
        let light = Dmda::new(2, 0.2);
        assert_eq!(place(&light, &light.queues), 1);
    }
}
