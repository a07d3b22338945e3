//! The real executor: one thread per worker, running tasks as the scheduler hands them
//! out, on the platform's pinned cluster pools.
//!
//! Each worker's loop runs *inside* its cluster's pool (one `install` per run, not per
//! task), so the thread that pops tasks is one of the cluster's pinned threads and a
//! kernel called with `Par::rayon(cluster size)` spreads over exactly the cluster's cores:
//! no more busy threads than cores. Idle workers sleep on a condition variable that every
//! release of ready tasks signals.
//!
//! Failure: a kernel error or a panic (caught at the task) stops the run: no worker pops
//! another task, running tasks finish, every thread returns, and the first failing task
//! (lowest index) is reported. The pools are untouched and serve the next run.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use hetla_factorizations::{TaskGraph, TileRef};
use hetla_kernels::{KernelError, Op, Par};

use super::data::DataRegistry;
use super::perfmodel::KernelKey;
use super::platform::{Platform, ResourceKind};
use super::scheduler::{SchedContext, SchedulerKind};
use super::trace::{TaskEvent, Trace};

/// Work for the runtime: a task graph and how to run each task.
pub trait Workload: Sync {
    /// The tasks and their dependencies.
    fn graph(&self) -> &TaskGraph;
    /// The performance-model key of a task (its operation and operand shapes).
    fn key(&self, task: usize) -> KernelKey;
    /// Bytes of a tile (for data transfers).
    fn tile_bytes(&self, tile: TileRef) -> usize;
    /// Runs a task with the given parallelism, on the calling thread's pool.
    fn run(&self, task: usize, par: Par) -> Result<(), KernelError>;
}

/// Options of one run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The scheduling policy.
    pub scheduler: SchedulerKind,
    /// Operations restricted to some resource kinds (others run anywhere).
    pub restrictions: Vec<(Op, Vec<ResourceKind>)>,
}

/// Why a task failed.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskFailure {
    /// The kernel returned an error.
    Kernel(KernelError),
    /// The task panicked; the panic message.
    Panic(String),
}

/// A failed run: the first failing task (lowest index), its failure, and the trace of what
/// did run.
#[derive(Debug)]
pub struct RunError {
    /// Index of the failing task.
    pub task: usize,
    /// What happened.
    pub failure: TaskFailure,
    /// The tasks that ran before the run stopped (boxed: errors stay small).
    pub trace: Box<Trace>,
}

/// Wakes idle workers when tasks become ready or the run ends.
struct Signal {
    epoch: AtomicU64,
    waiters: Mutex<usize>,
    cv: Condvar,
}

impl Signal {
    fn new() -> Self {
        Self {
            epoch: AtomicU64::new(0),
            waiters: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // Taking the lock orders this bump after any waiter's check of the epoch.
        let waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        if *waiters > 0 {
            self.cv.notify_all();
        }
    }

    /// Sleeps until the epoch moves past `seen` or `stop` is set.
    fn wait(&self, seen: u64, stop: &AtomicBool) {
        let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        *waiters += 1;
        while self.epoch() == seen && !stop.load(Ordering::SeqCst) {
            waiters = self.cv.wait(waiters).unwrap_or_else(|e| e.into_inner());
        }
        *waiters -= 1;
    }
}

/// State shared by the workers of one run.
struct Run<'a> {
    work: &'a dyn Workload,
    ctx: SchedContext<'a>,
    scheduler: Box<dyn super::scheduler::Scheduler>,
    remaining_preds: Vec<AtomicUsize>,
    unfinished: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<(usize, TaskFailure)>>,
    signal: Signal,
    data: Mutex<DataRegistry>,
    /// Data handles used by each task, with their access modes.
    handles: Vec<Vec<(usize, hetla_factorizations::Mode)>>,
    /// Whether the platform has memory nodes besides the host (else no prefetch).
    several_nodes: bool,
    start: Instant,
}

impl Run<'_> {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn lock_data(&self) -> std::sync::MutexGuard<'_, DataRegistry> {
        // Registry updates are small and complete under the lock: a panic elsewhere
        // cannot leave it half-updated.
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands a ready task to the scheduler and, on a platform with several memory nodes,
    /// prefetches its tiles to the worker the scheduler bound it to, if any (as the
    /// simulated executor does).
    fn push(&self, task: usize, origin: Option<usize>, now: f64) {
        self.scheduler.push(task, origin, now, &self.ctx);
        if !self.several_nodes {
            return;
        }
        if let Some(w) = self.scheduler.assigned_worker(task) {
            let node = self.ctx.workers()[w].node;
            let copies = self.lock_data().prefetch_task(&self.handles[task], node);
            debug_assert!(copies.is_empty(), "no transfer engine for {node:?}");
        }
    }

    fn fail(&self, task: usize, failure: TaskFailure) {
        let mut first = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if first.as_ref().is_none_or(|(t, _)| task < *t) {
            *first = Some((task, failure));
        }
        drop(first);
        self.stop.store(true, Ordering::SeqCst);
        self.signal.bump();
    }

    fn worker_loop(&self, w: usize, cores: usize) -> Vec<TaskEvent> {
        let par = crate::peers::par(cores);
        let node = self.ctx.workers()[w].node;
        let graph = self.work.graph();
        let mut events = Vec::new();
        while !self.stop.load(Ordering::SeqCst) {
            let seen = self.signal.epoch();
            let Some(task) = self.scheduler.pop(w, self.now(), &self.ctx) else {
                self.signal.wait(seen, &self.stop);
                continue;
            };
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            {
                // The data layer's calls are those of the simulated executor; with one
                // memory node (the host) until GPU workers exist, tiles are always valid
                // there and no copy is ever needed.
                let copies = self.lock_data().start_task(&self.handles[task], node);
                debug_assert_eq!(copies, Ok(vec![]), "no transfer engine for {node:?}");
            }
            let start = self.now();
            let result = catch_unwind(AssertUnwindSafe(|| self.work.run(task, par)));
            let end = self.now();
            events.push(TaskEvent {
                task,
                op: graph.task(task).op,
                worker: w,
                start,
                end,
                flops: graph.task(task).flops,
            });
            self.lock_data().end_task(&self.handles[task], node);
            match result {
                Ok(Ok(())) => {
                    self.ctx.record(task, w, end - start);
                    self.scheduler.done(task, w, end, &self.ctx);
                    let mut released = false;
                    for &s in graph.successors(task) {
                        if self.remaining_preds[s].fetch_sub(1, Ordering::SeqCst) == 1 {
                            self.push(s, Some(w), end);
                            released = true;
                        }
                    }
                    if self.unfinished.fetch_sub(1, Ordering::SeqCst) == 1 {
                        self.stop.store(true, Ordering::SeqCst);
                        self.signal.bump();
                    } else if released {
                        self.signal.bump();
                    }
                }
                Ok(Err(error)) => self.fail(task, TaskFailure::Kernel(error)),
                Err(panic) => self.fail(task, TaskFailure::Panic(panic_message(&*panic))),
            }
        }
        events
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a task panicked".to_owned()
    }
}

/// Bottom levels in flops: a task's flops plus the largest bottom level of its successors.
pub fn bottom_levels(graph: &TaskGraph) -> Vec<f64> {
    let mut levels = vec![0.0; graph.len()];
    // Edges go from earlier to later tasks: one backward sweep suffices.
    for t in (0..graph.len()).rev() {
        let below = graph
            .successors(t)
            .iter()
            .map(|&s| levels[s])
            .fold(0.0, f64::max);
        levels[t] = graph.task(t).flops + below;
    }
    levels
}

/// Runs every task of `work` on `platform`'s workers and returns the trace.
pub fn execute(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
) -> Result<Trace, RunError> {
    let graph = work.graph();
    let workers = platform.workers();
    let n = graph.len();

    let models = platform.models();
    let plan = super::plan::plan(
        workers,
        graph,
        (0..n).map(|t| work.key(t)),
        &|tile| work.tile_bytes(tile),
        &options.restrictions,
        |k, c| models.get(k, c).copied().unwrap_or_default(),
    );
    let plan = match plan {
        Ok(plan) => plan,
        Err(t) => {
            let error = TaskFailure::Kernel(KernelError::Operands {
                op: graph.task(t).op,
                reason: "no worker of the platform is allowed to run this operation".into(),
            });
            return Err(RunError {
                task: t,
                failure: error,
                trace: Box::new(Trace::new(workers.to_vec(), Vec::new(), 0.0)),
            });
        }
    };
    let super::plan::RunPlan {
        keys,
        classes,
        before,
        ctx,
        handles,
        tiles,
    } = plan;
    let nodes = workers.iter().map(|w| w.node.0 + 1).max().unwrap_or(1);

    let run = Run {
        work,
        ctx,
        scheduler: options.scheduler.build(workers.len()),
        remaining_preds: (0..n)
            .map(|t| AtomicUsize::new(graph.predecessors(t).len()))
            .collect(),
        unfinished: AtomicUsize::new(n),
        stop: AtomicBool::new(n == 0),
        failure: Mutex::new(None),
        signal: Signal::new(),
        data: Mutex::new(DataRegistry::new(tiles, nodes)),
        handles,
        several_nodes: nodes > 1,
        start: Instant::now(),
    };
    for t in (0..n).filter(|&t| graph.predecessors(t).is_empty()) {
        run.push(t, None, 0.0);
    }
    let clusters = platform.clusters();
    let per_worker: Vec<Vec<TaskEvent>> = std::thread::scope(|s| {
        let handles: Vec<_> = clusters
            .iter()
            .enumerate()
            .map(|(w, cluster)| {
                let run = &run;
                s.spawn(move || {
                    cluster
                        .pool()
                        .install(|| run.worker_loop(w, cluster.size()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let makespan = run.now();
    let failure = run.failure.into_inner().unwrap_or_else(|e| e.into_inner());
    let events = per_worker.into_iter().flatten().collect();
    let trace = Trace::new(workers.to_vec(), events, makespan);

    // Keep what this run learned (entries that got new samples replace the platform's).
    let table = run.ctx.into_table();
    platform.update_models(|models| {
        for (i, (now, was)) in table.iter().zip(&before).enumerate() {
            if now.samples > was.samples {
                let (key, class) = (&keys[i / classes.len()], &classes[i % classes.len()]);
                models.set(key.clone(), class.clone(), *now);
            }
        }
    });
    match failure {
        None => Ok(trace),
        Some((task, failure)) => Err(RunError {
            task,
            failure,
            trace: Box::new(trace),
        }),
    }
}
