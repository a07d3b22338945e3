//! The real executor: one thread per worker, running tasks as the scheduler hands them
//! out, on the platform's pinned cluster pools.
//!
//! Each worker's loop runs *inside* its cluster's pool (one `install` per run, not per
//! task), so the thread that pops tasks is one of the cluster's pinned threads and a
//! kernel called with `Par::rayon(cluster size)` spreads over exactly the cluster's cores:
//! no more busy threads than cores. Idle workers sleep on a condition variable that every
//! release of ready tasks signals.
//!
//! Device workers (GPUs, emulated devices; [`crate::device`]) each have a host thread of
//! their own, pinned to the core the platform reserved for it. Before a task runs, the
//! data layer makes its tiles valid on the worker's memory node; the copies and releases
//! it decides are carried out **under the registry's lock, in the registry's order**, so
//! no worker ever sees a replica marked valid before its data is there and no buffer is
//! freed before its write-back. (GPU uploads only stage and queue their copy under the
//! lock; the kernel that needs the tile waits for it on the device, and the trace shows
//! the staging, not the copy itself.) When the scheduler
//! binds a ready task to a worker at push time, its tiles are prefetched the same way.
//! At the end, every tile whose only valid copy is on a device is written back, and the
//! devices' replicas are freed.
//!
//! Failure: a kernel error or a panic (caught at the task) stops the run: no worker pops
//! another task, running tasks finish, every thread returns, and the first failing task
//! (lowest index) is reported. The pools are untouched and serve the next run. Tiles are
//! still written back from the devices, so the matrix holds the state the run reached.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::{Mode, TaskGraph, TileRef};
use hetla_kernels::{KernelError, Op, Par};

use crate::data::{DataRegistry, HOST, MemoryNode, NoRoom, Step, Transfer};
use crate::device::Device;
use crate::perfmodel::KernelKey;
use crate::plan::{LinkEstimate, PREFETCH_DEPTH, prefetchable};
use crate::planned::{Planned, StaticPlan};
use crate::platform::{Platform, ResourceKind};
use crate::scheduler::{SchedContext, SchedulerKind};
use crate::trace::{TaskEvent, Trace, TransferEvent};

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
    /// The host storage of a tile, for copies to devices (`None`: the workload has none,
    /// and cannot run on a platform with devices).
    fn host_tile(&self, tile: TileRef) -> Option<MatRef<'_, f64>> {
        let _ = tile;
        None
    }
    /// The host storage of a tile, writable, for copies back from devices (`None` for a
    /// tile that may not be written).
    ///
    /// # Safety
    /// No other view of the tile may be used while the returned one lives.
    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<MatMut<'_, f64>> {
        let _ = tile;
        None
    }
}

/// Where a run failed, in the order failures are reported (the earliest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RunStep {
    /// Before any task: the plan, the scheduler, placing the operands.
    Setup,
    /// A task, by its index in the graph.
    Task(usize),
    /// The final write-back of device-resident tiles to host memory.
    WriteBack,
}

/// Options of one run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The scheduling policy.
    pub scheduler: SchedulerKind,
    /// Operations restricted to some resource kinds (others run anywhere).
    pub restrictions: Vec<(Op, Vec<ResourceKind>)>,
    /// A static allocation to follow instead of `scheduler` (see [`StaticPlan`](crate::StaticPlan)).
    pub plan: Option<Arc<StaticPlan>>,
    /// Tiles put on a memory node before the clock starts: `Mode::Read` adds a copy there
    /// (the host keeps its own), `Mode::ReadWrite` leaves that copy the only valid one.
    /// Data "already on the device"; the copies are neither timed nor traced.
    pub placement: Vec<(TileRef, MemoryNode, Mode)>,
    /// dmda's beta, the weight of transfer time in its scores (`None`:
    /// [`crate::scheduler::DMDA_BETA`]); other policies ignore it.
    pub dmda_beta: Option<f64>,
}

impl RunOptions {
    /// The scheduler of a run on `workers` workers with `tasks` tasks: the static plan's
    /// when there is one (checked against the run), else a fresh one of `scheduler`'s kind.
    pub(crate) fn build_scheduler(
        &self,
        workers: usize,
        tasks: usize,
    ) -> Result<Box<dyn crate::scheduler::Scheduler>, String> {
        match &self.plan {
            Some(plan) => {
                plan.check(tasks, workers)?;
                Ok(Box::new(Planned::new(plan.clone(), workers, tasks)))
            }
            None => Ok(self.scheduler.build_with_beta(
                workers,
                self.dmda_beta.unwrap_or(crate::scheduler::DMDA_BETA),
            )),
        }
    }

    /// The name of the policy the run follows ("static" with a plan).
    pub fn policy_name(&self) -> &'static str {
        if self.plan.is_some() {
            "static"
        } else {
            self.scheduler.name()
        }
    }
}

/// Why a run failed at its [`RunStep`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskFailure {
    /// The kernel (or a copy to or from a device) returned an error.
    Kernel(KernelError),
    /// The task panicked; the panic message.
    Panic(String),
    /// Its worker's memory node cannot hold the tiles it needs.
    Memory(NoRoom),
    /// No worker of the platform may run the task's operation (the run's restrictions).
    NoWorker,
    /// The run's static plan does not fit its graph or its workers.
    Plan(String),
}

/// A failed run: the first failing task (lowest index), its failure, and the trace of what
/// did run.
#[derive(Debug)]
pub struct RunError {
    /// Where it failed.
    pub step: RunStep,
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
    scheduler: Box<dyn crate::scheduler::Scheduler>,
    remaining_preds: Vec<AtomicUsize>,
    unfinished: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<(RunStep, TaskFailure)>>,
    signal: Signal,
    data: &'a Mutex<DataRegistry>,
    /// Data handles used by each task, with their access modes.
    handles: &'a [Vec<(usize, Mode)>],
    /// Device of memory node `i + 1`.
    devices: Vec<&'a dyn Device>,
    /// Whether the platform has memory nodes besides the host (else no prefetch).
    several_nodes: bool,
    /// Whether some task writes each handle.
    written: &'a [bool],
    /// Handles to drop from the worker's node after each task (static plans).
    releases: Vec<Vec<usize>>,
    transfers: Mutex<Vec<TransferEvent>>,
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

    /// Runs `f` on the registry, then carries out the copies and releases it decided, in
    /// order, before the lock is released.
    fn with_data<R>(&self, f: impl FnOnce(&mut DataRegistry) -> R) -> Result<R, KernelError> {
        let mut data = self.lock_data();
        let result = f(&mut data);
        for step in data.take_steps() {
            match step {
                Step::Release { handle, node } => self.device(node).release(handle),
                Step::Allocate { handle, tile, node } => {
                    let (rows, cols) = self
                        .work
                        .host_tile(tile)
                        .map_or((0, 0), |t| (t.nrows(), t.ncols()));
                    self.device(node).allocate(handle, rows, cols)?;
                }
                Step::Copy(copy) => {
                    let start = self.now();
                    self.copy(copy)?;
                    let end = self.now();
                    let mut transfers = self.transfers.lock().unwrap_or_else(|e| e.into_inner());
                    transfers.push(TransferEvent {
                        transfer: copy,
                        start,
                        end,
                    });
                }
            }
        }
        Ok(result)
    }

    /// Puts tiles on memory nodes before the run (see [`RunOptions::placement`]): the
    /// copies are carried out and waited for, and not traced.
    fn place(&self, placement: &[(usize, MemoryNode, Mode)]) -> Result<(), KernelError> {
        if placement.is_empty() || !self.several_nodes {
            return Ok(());
        }
        let placed = self.with_data(|d| {
            placement
                .iter()
                .find_map(|&(h, node, mode)| d.acquire(h, node, mode).err())
        })?;
        if let Some(no_room) = placed {
            return Err(KernelError::Gpu {
                message: format!("the placed operands do not fit: {no_room}"),
            });
        }
        for device in &self.devices {
            device.wait_uploads()?;
        }
        self.transfers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }

    fn device(&self, node: MemoryNode) -> &dyn Device {
        self.devices[node.0 - 1]
    }

    /// One copy between host memory and devices (device to device through a host buffer).
    /// A panic in the device code becomes an error, so that no worker thread dies while
    /// the others wait for its tasks.
    fn copy(&self, copy: Transfer) -> Result<(), KernelError> {
        let no_storage = || KernelError::Gpu {
            message: format!(
                "tile ({}, {}) of matrix {} has no host storage to copy",
                copy.tile.row, copy.tile.col, copy.tile.matrix.0
            ),
        };
        let carry_out = || match (copy.from == HOST, copy.to == HOST) {
            (true, true) => Ok(()),
            (true, false) => {
                let src = self.work.host_tile(copy.tile).ok_or_else(no_storage)?;
                self.device(copy.to).upload(copy.handle, src)
            }
            (false, true) => {
                // SAFETY: the copy goes to host memory, so the host replica is invalid: no
                // task uses it (a task reads or writes a tile only where it is valid, and
                // this copy is made under the registry lock before anyone sees it valid).
                let dst = unsafe { self.work.host_tile_mut(copy.tile) }.ok_or_else(no_storage)?;
                self.device(copy.from).download(copy.handle, dst)
            }
            (false, false) => {
                let shape = self.work.host_tile(copy.tile).ok_or_else(no_storage)?;
                let mut staged = Mat::<f64>::zeros(shape.nrows(), shape.ncols());
                self.device(copy.from)
                    .download(copy.handle, staged.as_mut())?;
                self.device(copy.to).upload(copy.handle, staged.as_ref())
            }
        };
        catch_unwind(AssertUnwindSafe(carry_out)).unwrap_or_else(|panic| {
            Err(KernelError::Gpu {
                message: format!("a copy panicked: {}", panic_message(&*panic)),
            })
        })
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
            if let Err(error) = self.with_data(|d| d.prefetch_task(&self.handles[task], node)) {
                self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
            }
        }
    }

    /// Copies ahead the inputs of the tasks the scheduler says `worker` runs next (static
    /// plans), those safe to copy now.
    fn prefetch_ahead(&self, worker: usize, node: MemoryNode) -> Result<(), KernelError> {
        if !self.several_nodes {
            return Ok(());
        }
        let next = self.scheduler.lookahead(worker, PREFETCH_DEPTH);
        if next.is_empty() {
            return Ok(());
        }
        let ready = |t: usize| self.remaining_preds[t].load(Ordering::SeqCst) == 0;
        let handles = prefetchable(&next, self.handles, self.written, ready);
        self.with_data(|d| {
            for h in handles {
                d.prefetch(h, node);
            }
        })
    }

    /// Makes the task's tiles valid on `node` and pins them there.
    fn start_task(&self, task: usize, node: MemoryNode) -> Result<(), TaskFailure> {
        match self.with_data(|d| d.start_task(&self.handles[task], node)) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(no_room)) => Err(TaskFailure::Memory(no_room)),
            Err(error) => Err(TaskFailure::Kernel(error)),
        }
    }

    /// Runs a task on a device's replicas: the reads, then the written tile.
    fn run_on_device(&self, task: usize, device: &dyn Device) -> Result<(), KernelError> {
        let op = self.work.graph().task(task).op;
        let handles = &self.handles[task];
        let Some((&(write, Mode::ReadWrite | Mode::Write), reads)) = handles.split_last() else {
            return Err(KernelError::Operands {
                op,
                reason: "the last access must be the written tile".into(),
            });
        };
        let reads: Vec<usize> = reads.iter().map(|&(h, _)| h).collect();
        device.run(op, &reads, write)
    }

    fn fail(&self, step: RunStep, failure: TaskFailure) {
        let mut first = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if first.as_ref().is_none_or(|(s, _)| step < *s) {
            *first = Some((step, failure));
        }
        drop(first);
        self.stop.store(true, Ordering::SeqCst);
        self.signal.bump();
    }

    /// Pops and runs tasks until the run ends: on the calling thread's cluster pool with
    /// `cores` cores, or on `device`.
    fn worker_loop(&self, w: usize, cores: usize, device: Option<&dyn Device>) -> Vec<TaskEvent> {
        let par = hetla_kernels::par_for(cores);
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
            if let Err(failure) = self.start_task(task, node) {
                self.fail(RunStep::Task(task), failure);
                break;
            }
            if let Err(error) = self.prefetch_ahead(w, node) {
                self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
                break;
            }
            let start = self.now();
            let result = catch_unwind(AssertUnwindSafe(|| match device {
                Some(device) => self.run_on_device(task, device),
                None => self.work.run(task, par),
            }));
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
            // Host memory keeps its tiles: only a device's are released.
            if node != HOST && !self.releases[task].is_empty() {
                let evicted = self.with_data(|d| {
                    for &h in &self.releases[task] {
                        d.evict(h, node);
                    }
                });
                if let Err(error) = evicted {
                    self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
                    break;
                }
            }
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
                Ok(Err(error)) => self.fail(RunStep::Task(task), TaskFailure::Kernel(error)),
                Err(panic) => self.fail(
                    RunStep::Task(task),
                    TaskFailure::Panic(panic_message(&*panic)),
                ),
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
    let plan = crate::plan::plan(
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
            return Err(RunError {
                step: RunStep::Task(t),
                failure: TaskFailure::NoWorker,
                trace: Box::new(Trace::new(workers.to_vec(), Vec::new(), 0.0)),
            });
        }
    };
    let releases = crate::plan::releases(options, &plan.handles);
    let placement = crate::plan::placements(options, &plan.tiles);
    let crate::plan::RunPlan {
        keys,
        classes,
        ctx,
        handles,
        tiles,
        written,
    } = plan;
    let scheduler = match options.build_scheduler(workers.len(), n) {
        Ok(scheduler) => scheduler,
        Err(reason) => {
            return Err(RunError {
                step: RunStep::Setup,
                failure: TaskFailure::Plan(reason),
                trace: Box::new(Trace::new(workers.to_vec(), Vec::new(), 0.0)),
            });
        }
    };
    let devices: Vec<&dyn Device> = platform.devices().iter().map(|d| &*d.device).collect();
    let several_nodes = !devices.is_empty();
    let mut capacities = vec![None];
    capacities.extend(devices.iter().map(|d| Some(d.budget())));
    let registry = DataRegistry::with_capacities(tiles, capacities);
    // Only device memory needs the copies and releases carried out.
    let data = Mutex::new(if several_nodes {
        registry.log_steps()
    } else {
        registry
    });
    let links = platform.links();
    let copy_seconds = |from, to, bytes| crate::platform::copy_seconds(&links, from, to, bytes);
    let estimate = LinkEstimate {
        workers,
        data: &data,
        handles: &handles,
        copy_seconds: &copy_seconds,
    };
    let ctx = if several_nodes {
        ctx.with_transfers(&estimate)
    } else {
        ctx
    };
    // One run at a time per platform: its pools and device memory serve one run.
    let _busy = platform.lock_run();

    let run = Run {
        work,
        ctx,
        scheduler,
        remaining_preds: (0..n)
            .map(|t| AtomicUsize::new(graph.predecessors(t).len()))
            .collect(),
        unfinished: AtomicUsize::new(n),
        stop: AtomicBool::new(n == 0),
        failure: Mutex::new(None),
        signal: Signal::new(),
        data: &data,
        handles: &handles,
        devices,
        several_nodes,
        written: &written,
        releases,
        transfers: Mutex::new(Vec::new()),
        start: Instant::now(),
    };
    if let Err(error) = run.place(&placement) {
        run.fail(RunStep::Setup, TaskFailure::Kernel(error));
    }
    let mut run = run;
    run.start = Instant::now();
    for t in (0..n).filter(|&t| graph.predecessors(t).is_empty()) {
        run.push(t, None, 0.0);
    }
    let clusters = platform.clusters();
    let per_worker: Vec<Vec<TaskEvent>> = std::thread::scope(|s| {
        let run = &run;
        let mut threads: Vec<_> = clusters
            .iter()
            .enumerate()
            .map(|(w, cluster)| {
                s.spawn(move || {
                    cluster
                        .pool()
                        .install(|| run.worker_loop(w, cluster.size(), None))
                })
            })
            .collect();
        for (i, device) in platform.devices().iter().enumerate() {
            let w = clusters.len() + i;
            threads.push(s.spawn(move || {
                hetla_clusters::pin_current_thread(device.core);
                run.worker_loop(w, 1, Some(&*device.device))
            }));
        }
        threads
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    if several_nodes {
        // The caller's matrix must hold the result, also after a failure.
        if let Err(error) = run.with_data(|d| d.flush_to_host()) {
            run.fail(RunStep::WriteBack, TaskFailure::Kernel(error));
        }
        for device in &run.devices {
            device.clear();
        }
    }
    let makespan = run.now();
    let failure = run.failure.into_inner().unwrap_or_else(|e| e.into_inner());
    let events = per_worker.into_iter().flatten().collect();
    let mut trace = Trace::new(workers.to_vec(), events, makespan);
    trace.transfers = run
        .transfers
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());

    // Keep what this run learned: its samples are added to the platform's models (and,
    // when they are saved, merged into the store's file).
    let fresh = run.ctx.into_fresh();
    platform.update_models(|models| {
        for (i, stats) in fresh.iter().enumerate() {
            if stats.samples > 0 {
                let (key, class) = (&keys[i / classes.len()], &classes[i % classes.len()]);
                models.merge(key.clone(), class.clone(), stats);
            }
        }
    });
    match failure {
        None => Ok(trace),
        Some((step, failure)) => Err(RunError {
            step,
            failure,
            trace: Box::new(trace),
        }),
    }
}
