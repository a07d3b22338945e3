//! What a scheduler may know of a run: the tasks (priorities, flops, restrictions, model rows), the
//! workers, the duration estimates of the performance models and the transfer estimates of the
//! links; shared by every policy.

use std::sync::Mutex;

use hetla_factorizations::TaskId;

use crate::perfmodel::Stats;
use crate::sync::lock;
use crate::workers::{ResourceKind, WorkerId, WorkerInfo};

/// A duration estimate for a task on a worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    /// From a calibrated model (mean of the history), in seconds.
    Known(f64),
    /// No calibrated model yet: a flop-based guess, in seconds.
    Uncalibrated(f64),
}

impl Estimate {
    /// The estimated seconds, whichever the source.
    pub fn seconds(self) -> f64 {
        match self {
            Self::Known(s) | Self::Uncalibrated(s) => s,
        }
    }
}

/// The rate assumed per core for a kernel never measured (flop/s): only a first guess until
/// [`crate::perfmodel::MIN_SAMPLES`] samples exist.
const GUESS_RATE_PER_CORE: f64 = 20e9;

/// The time the copies a task still needs on a worker's memory node would take; the executor that
/// knows the links provides it.
pub trait TransferEstimate: Sync {
    /// Seconds of the copies that would make the tiles of `task` valid on `worker`'s node.
    fn seconds(&self, task: TaskId, worker: WorkerId) -> f64;
}

/// What a scheduler may know about the run: tasks, workers, priorities, restrictions and duration
/// and transfer estimates.
pub struct SchedContext<'a> {
    workers: &'a [WorkerInfo],
    priorities: Vec<f64>,
    flops: Vec<f64>,
    /// Allowed worker kinds per task (`None`: any).
    allowed: Vec<Option<&'a [ResourceKind]>>,
    /// Performance-model index of each task.
    key_of_task: Vec<usize>,
    /// Model class index of each worker.
    class_of_worker: Vec<usize>,
    classes: usize,
    /// `table[key * classes + class]`, updated as tasks finish. Beside each entry, the samples this
    /// run recorded alone: what it adds to the models.
    table: Mutex<Vec<(Stats, Stats)>>,
    transfers: Option<&'a dyn TransferEstimate>,
}

/// What a scheduler knows of one task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskInfo<'a> {
    /// Its priority: the bottom level in flops (larger runs first).
    pub priority: f64,
    /// Its flops (for a guess of its duration where no model is calibrated).
    pub flops: f64,
    /// The kinds of worker allowed to run it (`None`: any).
    pub allowed: Option<&'a [ResourceKind]>,
    /// Its row of the [`ModelTable`] (the index of its kernel key).
    pub key: usize,
}

/// Duration statistics by (kernel key, worker class), and the class of each worker.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTable {
    /// The class (the table's column) of each worker.
    pub class_of_worker: Vec<usize>,
    /// Number of classes.
    pub classes: usize,
    /// `stats[key * classes + class]`.
    pub stats: Vec<Stats>,
}

impl<'a> SchedContext<'a> {
    /// A context for `tasks` on `workers`, with the durations `table` knows.
    pub fn new(workers: &'a [WorkerInfo], tasks: &[TaskInfo<'a>], table: ModelTable) -> Self {
        Self {
            workers,
            priorities: tasks.iter().map(|t| t.priority).collect(),
            flops: tasks.iter().map(|t| t.flops).collect(),
            allowed: tasks.iter().map(|t| t.allowed).collect(),
            key_of_task: tasks.iter().map(|t| t.key).collect(),
            class_of_worker: table.class_of_worker,
            classes: table.classes,
            table: Mutex::new(
                table
                    .stats
                    .into_iter()
                    .map(|s| (s, Stats::default()))
                    .collect(),
            ),
            transfers: None,
        }
    }

    /// A context (for tests) of `tasks` alike tasks on `workers` of one class, with the statistics
    /// `stats`.
    #[cfg(test)]
    pub(crate) fn uniform(workers: &'a [WorkerInfo], tasks: usize, stats: Stats) -> Self {
        let task = TaskInfo {
            priority: 1.0,
            flops: 1.0,
            allowed: None,
            key: 0,
        };
        let table = ModelTable {
            class_of_worker: vec![0; workers.len()],
            classes: 1,
            stats: vec![stats],
        };
        Self::new(workers, &vec![task; tasks], table)
    }

    /// The context with transfer estimates (on platforms with several memory nodes).
    pub fn with_transfers(mut self, transfers: &'a dyn TransferEstimate) -> Self {
        self.transfers = Some(transfers);
        self
    }

    /// Seconds of the copies `task` would need before running on `worker` (0 without transfer
    /// estimates).
    pub fn transfer_estimate(&self, task: TaskId, worker: WorkerId) -> f64 {
        self.transfers.map_or(0.0, |t| t.seconds(task, worker))
    }

    /// Number of tasks.
    pub fn tasks(&self) -> usize {
        self.priorities.len()
    }

    /// The workers.
    pub fn workers(&self) -> &[WorkerInfo] {
        self.workers
    }

    /// The ids of the workers, in order.
    pub fn worker_ids(&self) -> impl Iterator<Item = WorkerId> + use<> {
        (0..self.workers.len()).map(WorkerId)
    }

    /// The priority (bottom level, flops) of a task: higher runs first.
    pub fn priority(&self, task: TaskId) -> f64 {
        self.priorities[task]
    }

    /// Whether `worker` may run `task`.
    pub fn can_run(&self, task: TaskId, worker: WorkerId) -> bool {
        self.allowed[task].is_none_or(|kinds| kinds.contains(&self.workers[worker].kind))
    }

    /// The estimated duration of `task` on `worker`.
    pub fn estimate(&self, task: TaskId, worker: WorkerId) -> Estimate {
        let index = self.key_of_task[task] * self.classes + self.class_of_worker[worker];
        match self.lock()[index].0.calibrated_mean() {
            Some(mean) => Estimate::Known(mean),
            None => Estimate::Uncalibrated(
                self.flops[task] / (GUESS_RATE_PER_CORE * self.workers[worker].cores() as f64),
            ),
        }
    }

    /// Records the measured duration of `task` on `worker`.
    pub fn record(&self, task: TaskId, worker: WorkerId, seconds: f64) {
        let index = self.key_of_task[task] * self.classes + self.class_of_worker[worker];
        let mut table = self.lock();
        table[index].0.record(seconds);
        table[index].1.record(seconds);
    }

    /// The samples this run recorded (`keys x classes`), to merge into the platform's models.
    pub fn into_fresh(self) -> Vec<Stats> {
        let table = self.table.into_inner().unwrap_or_else(|e| e.into_inner());
        table.into_iter().map(|(_, fresh)| fresh).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Stats, Stats)>> {
        lock(&self.table)
    }
}
