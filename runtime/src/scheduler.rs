//! Scheduling policies: which worker runs a ready task, and in which order.
//!
//! The executor calls [`Scheduler::push`] when a task becomes ready (all its predecessors
//! done), [`Scheduler::pop`] when a worker wants work, and [`Scheduler::done`] when a
//! worker finished a task. Calls come from every worker thread at once, so schedulers
//! synchronise internally. Times are seconds since the start of the run, from the
//! executor's clock (real or, later, simulated).
//!
//! - [`Mct`] (default): on push, the task goes to the worker with the minimum expected
//!   completion time, `max(max(now, end of the running task) + queued work, now +
//!   transfer estimate) + estimate` (the executor prefetches the copies as soon as the
//!   task is assigned, so they overlap the queued work); each worker pops its own queue by
//!   priority. An uncalibrated (operation, shape, class) goes to the least-loaded worker of
//!   a class that lacks samples, so that it gets measured.
//! - dmda ([`Mct::dmda`], StarPU's policy of that name): the same queues, but the score is
//!   `max(now, end of the running task) + queued work + estimate + beta x transfer
//!   estimate`: a copy always costs, also when the worker's queue would hide it, so tasks
//!   stay where their data is. Under MCT's score a busy worker's transfers are free, and a
//!   chain of updates to one tile wanders from device to device (96% of the steps of a
//!   GEMM C tile's chain on sirocco).
//! - [`Eager`]: one central queue ordered by priority; any idle worker takes the most
//!   urgent task it may run.
//! - [`WorkStealing`]: per-worker LIFO deques (crossbeam-deque); a worker pushes the tasks
//!   it releases onto its own deque, pops from it, and steals from the others when empty.
//!
//! Priorities are bottom levels: a task's flops plus the largest bottom level among its
//! successors, so that the critical path runs first.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use crossbeam_deque::{Injector, Stealer, Worker as Deque};

use hetla_factorizations::TaskId;

use crate::lock;
use crate::perfmodel::Stats;
use crate::platform::{ResourceKind, WorkerId, WorkerInfo};

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

/// The rate assumed per core for a kernel never measured (flop/s): only a first guess
/// until [`crate::perfmodel::MIN_SAMPLES`] samples exist.
const GUESS_RATE_PER_CORE: f64 = 20e9;

/// The time the copies a task still needs on a worker's memory node would take; the
/// executor that knows the links provides it.
pub trait TransferEstimate: Sync {
    /// Seconds of the copies that would make the tiles of `task` valid on `worker`'s node.
    fn seconds(&self, task: TaskId, worker: WorkerId) -> f64;
}

/// What a scheduler may know about the run: tasks, workers, priorities, restrictions and
/// duration and transfer estimates.
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
    /// `table[key * classes + class]`, updated as tasks finish.
    /// Beside each entry, the samples this run recorded alone: what it adds to the models.
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

    /// A context (for tests) of `tasks` alike tasks on `workers` of one class, with the
    /// statistics `stats`.
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

    /// Seconds of the copies `task` would need before running on `worker` (0 without
    /// transfer estimates).
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

/// A scheduling policy. See the module documentation.
pub trait Scheduler: Send + Sync {
    /// `task` became ready; `origin` is the worker whose task released it.
    fn push(&self, task: TaskId, origin: Option<WorkerId>, now: f64, ctx: &SchedContext<'_>);
    /// The next task for `worker`, if any.
    fn pop(&self, worker: WorkerId, now: f64, ctx: &SchedContext<'_>) -> Option<TaskId>;
    /// `worker` finished `task`.
    fn done(&self, _task: TaskId, _worker: WorkerId, _now: f64, _ctx: &SchedContext<'_>) {}
    /// The worker a pushed task is bound to, for policies that decide at push time (the
    /// executor then prefetches the task's tiles to that worker's memory node).
    fn assigned_worker(&self, _task: TaskId) -> Option<WorkerId> {
        None
    }
    /// The tasks `worker` will run next, up to `depth`, for policies that know (static
    /// plans); the executor prefetches their inputs.
    fn lookahead(&self, _worker: WorkerId, _depth: usize) -> Vec<TaskId> {
        Vec::new()
    }
}

/// The policies hetla has, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum SchedulerKind {
    /// Minimum completion time with performance models.
    #[default]
    Mct,
    /// StarPU's dmda: minimum completion time with each transfer as a penalty.
    Dmda,
    /// A central priority queue.
    Eager,
    /// Per-worker deques with stealing.
    WorkStealing,
}

impl SchedulerKind {
    /// Every policy.
    pub const ALL: [SchedulerKind; 4] = [Self::Mct, Self::Dmda, Self::Eager, Self::WorkStealing];

    /// The name used on the command line ("mct", "eager", "ws").
    pub fn name(self) -> &'static str {
        match self {
            Self::Mct => "mct",
            Self::Dmda => "dmda",
            Self::Eager => "eager",
            Self::WorkStealing => "ws",
        }
    }

    /// A fresh scheduler of this kind for `workers` workers (dmda with beta
    /// [`DMDA_BETA`]; [`Mct::dmda`] takes another).
    pub fn build(self, workers: usize) -> Box<dyn Scheduler> {
        self.build_with_beta(workers, DMDA_BETA)
    }

    /// As [`SchedulerKind::build`], with dmda's transfer weight `beta`.
    pub fn build_with_beta(self, workers: usize, beta: f64) -> Box<dyn Scheduler> {
        match self {
            Self::Mct => Box::new(Mct::new(workers)),
            Self::Dmda => Box::new(Mct::dmda(workers, beta)),
            Self::Eager => Box::new(Eager::default()),
            Self::WorkStealing => Box::new(WorkStealing::new(workers)),
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchedulerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mct" => Ok(Self::Mct),
            "dmda" => Ok(Self::Dmda),
            "eager" => Ok(Self::Eager),
            "ws" | "work-stealing" | "workstealing" => Ok(Self::WorkStealing),
            _ => Err(format!(
                "unknown scheduler {s:?}; expected mct, dmda, eager or ws"
            )),
        }
    }
}

/// A queued task: higher priority first, then earlier submission.
#[derive(Debug, Clone, Copy)]
struct Queued {
    priority: f64,
    task: TaskId,
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

fn queued(task: TaskId, ctx: &SchedContext<'_>) -> Queued {
    Queued {
        priority: ctx.priority(task),
        task,
    }
}

#[derive(Default)]
struct MctState {
    queues: Vec<BinaryHeap<Queued>>,
    /// Estimated seconds of the tasks waiting in each queue.
    queued_work: Vec<f64>,
    /// Expected end of the task each worker is running.
    running_end: Vec<f64>,
    /// The estimate each queued task was charged with.
    charged: Vec<(WorkerId, f64)>,
}

/// Minimum expected completion time with per-worker priority queues; with a transfer
/// penalty, StarPU's dmda.
pub struct Mct {
    state: Mutex<MctState>,
    /// dmda's beta: the weight of the transfer time added to the expected completion
    /// (`None`: MCT, where transfers overlap the queued work).
    penalty: Option<f64>,
}

/// dmda's default beta (StarPU's `STARPU_SCHED_BETA`).
pub const DMDA_BETA: f64 = 1.0;

impl Mct {
    /// A dmda scheduler for `workers` workers: transfers weigh `beta` times their
    /// estimated seconds in every score.
    pub fn dmda(workers: usize, beta: f64) -> Self {
        Self {
            penalty: Some(beta),
            ..Self::new(workers)
        }
    }

    /// An MCT scheduler for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Self {
            penalty: None,
            state: Mutex::new(MctState {
                queues: (0..workers).map(|_| BinaryHeap::new()).collect(),
                queued_work: vec![0.0; workers],
                running_end: vec![0.0; workers],
                charged: Vec::new(),
            }),
        }
    }

    /// The worker MCT picks for `task` and the estimate charged to it.
    fn choose(
        &self,
        state: &MctState,
        task: TaskId,
        now: f64,
        ctx: &SchedContext<'_>,
    ) -> (WorkerId, f64) {
        let mut best: Option<(bool, f64, WorkerId, f64)> = None;
        for w in ctx.worker_ids().filter(|&w| ctx.can_run(task, w)) {
            let free = state.running_end[w].max(now) + state.queued_work[w];
            let estimate = ctx.estimate(task, w);
            // Uncalibrated workers win (the task measures them), the least loaded first;
            // among calibrated ones the earliest expected end wins. MCT: copies are
            // prefetched when the task is assigned, so they overlap the work already queued
            // on the worker; dmda charges them in full.
            let (calibrating, score) = match estimate {
                Estimate::Uncalibrated(_) => (true, free),
                Estimate::Known(d) => {
                    let copies = ctx.transfer_estimate(task, w);
                    match self.penalty {
                        None => (false, free.max(now + copies) + d),
                        Some(beta) => (false, free + d + beta * copies),
                    }
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
}

impl Scheduler for Mct {
    fn push(&self, task: TaskId, _origin: Option<WorkerId>, now: f64, ctx: &SchedContext<'_>) {
        let mut s = lock(&self.state);
        if s.charged.len() < ctx.tasks() {
            s.charged.resize(ctx.tasks(), (WorkerId(0), 0.0));
        }
        let (w, seconds) = self.choose(&s, task, now, ctx);
        s.queues[w].push(queued(task, ctx));
        s.queued_work[w] += seconds;
        s.charged[task] = (w, seconds);
    }

    fn pop(&self, worker: WorkerId, now: f64, _ctx: &SchedContext<'_>) -> Option<TaskId> {
        let mut s = lock(&self.state);
        let task = s.queues[worker].pop()?.task;
        let seconds = s.charged[task].1;
        s.queued_work[worker] = (s.queued_work[worker] - seconds).max(0.0);
        s.running_end[worker] = now + seconds;
        Some(task)
    }

    fn done(&self, _task: TaskId, worker: WorkerId, now: f64, _ctx: &SchedContext<'_>) {
        lock(&self.state).running_end[worker] = now;
    }

    fn assigned_worker(&self, task: TaskId) -> Option<WorkerId> {
        lock(&self.state).charged.get(task.0).map(|&(w, _)| w)
    }
}

/// One central priority queue.
#[derive(Default)]
pub struct Eager {
    queue: Mutex<BinaryHeap<Queued>>,
}

impl Scheduler for Eager {
    fn push(&self, task: TaskId, _origin: Option<WorkerId>, _now: f64, ctx: &SchedContext<'_>) {
        lock(&self.queue).push(queued(task, ctx));
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

/// Work stealing over crossbeam deques.
pub struct WorkStealing {
    /// Each worker's own deque; only its worker pushes and pops (the mutex is never
    /// contended: it only makes the owner-side handle shareable).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HOST, MemoryNode};
    use crate::perfmodel::{MIN_SAMPLES, ResourceClass};

    fn worker(name: &str, kind: ResourceKind, node: MemoryNode) -> WorkerInfo {
        WorkerInfo {
            name: name.into(),
            kind,
            class: ResourceClass::CpuCluster { cores: 1 },
            node,
            cpus: vec![0],
        }
    }

    /// Missing inputs cost 5 s on worker 1's node and nothing on worker 0's.
    struct FarFromWorkerOne;
    impl TransferEstimate for FarFromWorkerOne {
        fn seconds(&self, _task: TaskId, worker: WorkerId) -> f64 {
            if worker == WorkerId(1) { 5.0 } else { 0.0 }
        }
    }

    /// Two workers of one class, every task known to take 1 s.
    fn context<'a>(workers: &'a [WorkerInfo], tasks: usize) -> SchedContext<'a> {
        let known = Stats {
            samples: MIN_SAMPLES,
            mean: 1.0,
            m2: 0.0,
        };
        SchedContext::uniform(workers, tasks, known)
    }

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
        let place = |scheduler: &Mct| {
            let ctx = context(&workers, 14).with_transfers(&estimates);
            let mut s = lock(&scheduler.state);
            s.running_end = vec![12.0, 10.0];
            drop(s);
            scheduler.push(TaskId(0), None, 0.0, &ctx);
            scheduler.assigned_worker(TaskId(0)).unwrap().0
        };
        assert_eq!(place(&Mct::new(2)), 1);
        // dmda charges the copies: 10 + 1 + 5 on worker 1 against 12 + 1 on worker 0.
        assert_eq!(place(&Mct::dmda(2, 1.0)), 0);
        // beta weighs them: at 0.2 the copies cost 1 s, and worker 1 wins again.
        assert_eq!(place(&Mct::dmda(2, 0.2)), 1);
        assert_eq!("dmda".parse::<SchedulerKind>(), Ok(SchedulerKind::Dmda));
        assert_eq!(SchedulerKind::Dmda.to_string(), "dmda");
    }
}
