//! The real executor: the [engine](crate::engine) on wall time, one thread per worker,
//! running tasks as the scheduler hands them out, on the platform's pinned cluster pools.
//!
//! Each worker's loop runs *inside* its cluster's pool (one `install` per run, not per
//! task), so the thread that pops tasks is one of the cluster's pinned threads and a
//! kernel called with `Par::rayon(cluster size)` spreads over exactly the cluster's cores:
//! no more busy threads than cores. Idle workers sleep on a condition variable that every
//! release of ready tasks signals.
//!
//! Device workers (GPUs, emulated devices; [`crate::device`]) each have a host thread of
//! their own, pinned to the core the platform reserved for it. It never waits for one
//! kernel before queueing the next: it keeps up to the device's queue depth of tasks in
//! flight (started, their uploads queued, their kernels launched), ordered on the device by
//! events, and waits only for the oldest, whose duration the device measures. The copies and releases the
//! engine's data registry decides are carried out by this executor's [`Carrier`] **under
//! the registry's lock, in the registry's order**, so no worker ever sees a replica marked
//! valid before its data is there and no buffer is freed before its write-back. (GPU
//! uploads only stage and queue their copy under the lock; the kernel that needs the tile
//! waits for it on the device, and the trace shows the staging, not the copy itself.)
//!
//! Failure: a kernel error or a panic (caught at the task) stops the run: no worker pops
//! another task, running tasks finish, every thread returns, and the first failing task
//! (lowest index) is reported. The pools are untouched and serve the next run. Tiles are
//! still written back from the devices, so the matrix holds the state the run reached.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Instant;

use hetla_factorizations::{Mode, TaskGraph, TaskId, TileRef};
use hetla_kernels::{AnyMat, AnyMut, AnyRef, KernelError, Op, Par, Precision};

use crate::data::{DataRegistry, HOST, Handle, MemoryNode, NoRoom, Step, Transfer};
use crate::device::{Device, Launched};
use crate::engine::{Carrier, Engine, Start};
use crate::inflight::{Deferred, InFlight};
use crate::perfmodel::KernelKey;
use crate::planned::{Planned, StaticPlan};
use crate::platform::WorkerId;
use crate::platform::{Platform, ResourceKind};
use crate::scheduler::SchedulerKind;
use crate::trace::{TaskEvent, Trace, TransferEvent};

/// Work for the runtime: a task graph and how to run each task.
pub trait Workload: Sync {
    /// The tasks and their dependencies.
    fn graph(&self) -> &TaskGraph;
    /// The performance-model key of a task (its operation and operand shapes).
    fn key(&self, task: TaskId) -> KernelKey;
    /// Bytes of a tile (for data transfers).
    fn tile_bytes(&self, tile: TileRef) -> usize;
    /// Runs a task with the given parallelism, on the calling thread's pool.
    fn run(&self, task: TaskId, par: Par) -> Result<(), KernelError>;
    /// The host storage of a tile, in its precision, for copies to devices (`None`: the
    /// workload has none, and cannot run on a platform with devices).
    fn host_tile(&self, tile: TileRef) -> Option<AnyRef<'_>> {
        let _ = tile;
        None
    }
    /// The host storage of a tile, writable, for copies back from devices (`None` for a
    /// tile that may not be written).
    ///
    /// # Safety
    /// No other view of the tile may be used while the returned one lives.
    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<AnyMut<'_>> {
        let _ = tile;
        None
    }
    /// How many inputs of `task` come from outside the run (tiles another process sends):
    /// the task is ready once its predecessors have ended and [`Inbox::arrived`] was called
    /// that many times for it. Only [`execute_beside`] can deliver them.
    fn outside_inputs(&self, task: TaskId) -> usize {
        let _ = task;
        0
    }
}

/// Where a run failed, in the order failures are reported (the earliest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RunStep {
    /// Before any task: the plan, the scheduler, placing the operands.
    Setup,
    /// A task, by its index in the graph.
    Task(TaskId),
    /// The final write-back of device-resident tiles to host memory.
    WriteBack,
    /// The inputs from outside the run ([`execute_beside`]): they failed or never came.
    Outside,
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
    /// When a device's copy of a tile goes back to host memory.
    pub write_back: WriteBack,
    /// Each task's priority, to use instead of its bottom level in the graph (one per
    /// task): a distributed run's part of a graph ranks its tasks by their bottom levels
    /// in the whole graph, remote successors included.
    pub priorities: Option<Arc<[f64]>>,
}

/// When a tile modified on a device is written back to host memory (besides an eviction,
/// which writes back a last copy at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WriteBack {
    /// As soon as it is final (its last writer ended), while the run goes on; the device
    /// keeps a shared copy for the tasks that still read it. The flush at the end of the
    /// run then has little or nothing left to copy.
    #[default]
    Final,
    /// In the flush at the end of the run, as StarPU does when the data is unregistered
    /// (the policy of the runs the papers measured).
    AtEnd,
}

impl std::str::FromStr for WriteBack {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "final" => Ok(Self::Final),
            "end" => Ok(Self::AtEnd),
            _ => Err(format!(
                "{s:?}: expected final (when a tile is final) or end (at the end of the run)"
            )),
        }
    }
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
    /// The inputs from outside the run failed (another process's failure, a lost
    /// message); why.
    Outside(String),
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
        let waiters = crate::lock(&self.waiters);
        if *waiters > 0 {
            self.cv.notify_all();
        }
    }

    /// Sleeps until the epoch moves past `seen` or `stop` is set.
    fn wait(&self, seen: u64, stop: &AtomicBool) {
        let mut waiters = crate::lock(&self.waiters);
        *waiters += 1;
        while self.epoch() == seen && !stop.load(Ordering::SeqCst) {
            waiters = self.cv.wait(waiters).unwrap_or_else(|e| e.into_inner());
        }
        *waiters -= 1;
    }
}

/// The real executor's [`Carrier`]: copies between host memory and devices, registered
/// under the registry's lock and carried out after it by the thread that caused them (see
/// [`crate::inflight`]), traced with wall times.
struct Devices<'a> {
    work: &'a dyn Workload,
    /// Device of memory node `i + 1`.
    devices: Vec<&'a dyn Device>,
    inflight: InFlight,
    /// Per device, the thread that carries out the write-backs from it while the run goes
    /// on (gone once the workers are done: write-backs are then carried out at once).
    behind: Mutex<Vec<mpsc::Sender<(TaskId, Deferred)>>>,
    transfers: Mutex<Vec<TransferEvent>>,
    start: Instant,
}

impl Carrier for Devices<'_> {
    fn carry_out(
        &self,
        steps: Vec<Step>,
        _: &DataRegistry,
        _: f64,
    ) -> Result<Vec<Deferred>, KernelError> {
        let mut deferred: Vec<Deferred> = Vec::new();
        let carry_out = || -> Result<(), KernelError> {
            for step in steps {
                match step {
                    Step::Release { handle, node } => {
                        // A write-back before an eviction: carried out now, before the
                        // replica goes (rare; everything else waits for the lock's end).
                        if deferred.iter().any(|d| d.copy.handle == handle) {
                            self.complete(std::mem::take(&mut deferred))?;
                        }
                        self.inflight.wait_replica(handle, node);
                        self.device(node).release(handle);
                    }
                    Step::Allocate { handle, tile, node } => {
                        let ((rows, cols), precision) = self
                            .work
                            .host_tile(tile)
                            .map_or(((0, 0), Precision::D), |t| (t.shape(), t.precision()));
                        self.device(node).allocate(handle, precision, rows, cols)?;
                    }
                    Step::Copy(copy) => deferred.push(self.inflight.register(copy)),
                }
            }
            Ok(())
        };
        match carry_out() {
            Ok(()) => Ok(deferred),
            Err(error) => {
                deferred.iter().for_each(|d| self.inflight.done(d));
                Err(error)
            }
        }
    }

    fn complete(&self, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        let mut copies = deferred.into_iter();
        for d in copies.by_ref() {
            self.inflight.wait_turn(&d);
            let start = self.now();
            let copied = self.copy(d.copy);
            let end = self.now();
            self.inflight.done(&d);
            if let Err(error) = copied {
                copies.for_each(|d| self.inflight.done(&d));
                return Err(error);
            }
            crate::lock(&self.transfers).push(TransferEvent {
                transfer: d.copy,
                start,
                end,
            });
        }
        Ok(())
    }

    fn complete_behind(&self, task: TaskId, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        let mut inline = Vec::new();
        {
            let behind = crate::lock(&self.behind);
            for d in deferred {
                // Memory node i + 1 is device i.
                let sender = d.copy.from.0.checked_sub(1).and_then(|i| behind.get(i));
                let sent = match sender {
                    Some(sender) => sender.send((task, d)).map_err(|mpsc::SendError((_, d))| d),
                    None => Err(d),
                };
                if let Err(d) = sent {
                    inline.push(d);
                }
            }
        }
        self.complete(inline)
    }

    fn settle(&self, accesses: &[(Handle, Mode)], node: MemoryNode) {
        self.inflight.wait_task(accesses, node);
    }
}

impl Devices<'_> {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
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
                let host = self.work.host_tile(copy.tile).ok_or_else(no_storage)?;
                let (rows, cols) = host.shape();
                let mut staged = AnyMat::zeros(host.precision(), rows, cols);
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

    /// Queues a task on a device's replicas: the reads, then the written tile.
    fn launch_on_device(
        &self,
        task: TaskId,
        handles: &[(Handle, Mode)],
        device: &dyn Device,
    ) -> Result<Launched, KernelError> {
        let op = self.work.graph().task(task).op;
        let Some((&(write, Mode::ReadWrite | Mode::Write), reads)) = handles.split_last() else {
            return Err(KernelError::Operands {
                op,
                reason: "the last access must be the written tile".into(),
            });
        };
        let reads: Vec<Handle> = reads.iter().map(|&(h, _)| h).collect();
        device.launch(op, &reads, write)
    }
}

/// The trace event of `task` on worker `w`.
fn event(graph: &TaskGraph, task: TaskId, w: WorkerId, start: f64, end: f64) -> TaskEvent {
    TaskEvent {
        task,
        op: graph.task(task).op,
        worker: w,
        start,
        end,
        flops: graph.task(task).flops,
    }
}

/// A task's outcome from its kernel's result, or its panic.
fn outcome<T>(result: std::thread::Result<Result<T, KernelError>>) -> Result<T, TaskFailure> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(TaskFailure::Kernel(error)),
        Err(panic) => Err(TaskFailure::Panic(panic_message(&*panic))),
    }
}

/// Pops and runs tasks on CPU cluster worker `w` until the run ends, on wall time, on the
/// calling thread's cluster pool with `cores` cores.
fn worker_loop(
    engine: &Engine<'_>,
    carrier: &Devices<'_>,
    signal: &Signal,
    w: WorkerId,
    cores: usize,
) -> Vec<TaskEvent> {
    let par = hetla_kernels::par_for(cores);
    let graph = carrier.work.graph();
    let mut events = Vec::new();
    while !engine.stopped() {
        let seen = signal.epoch();
        let popped = carrier.now();
        let Some(task) = engine.pop(w, popped) else {
            signal.wait(seen, engine.stop_flag());
            continue;
        };
        if engine.stopped() {
            break;
        }
        if engine.start(carrier, task, w, popped, false) != Start::Running {
            signal.bump();
            break;
        }
        let start = carrier.now();
        let result = catch_unwind(AssertUnwindSafe(|| carrier.work.run(task, par)));
        let end = carrier.now();
        events.push(event(graph, task, w, start, end));
        let outcome = outcome(result);
        if outcome.is_ok() {
            engine.ctx().record(task, w, end - start);
        }
        let released = engine.finish(carrier, task, w, end, outcome);
        if released || engine.stopped() {
            signal.bump();
        }
    }
    events
}

/// A task whose kernel is queued on a device.
struct Queued {
    task: TaskId,
    ticket: Launched,
    launched: f64,
}

/// A device worker's state during a run: its kernels in flight, oldest first, and a popped
/// task that did not fit in the device's memory beside them.
struct DeviceWorker<'r, 'a> {
    engine: &'r Engine<'a>,
    carrier: &'r Devices<'a>,
    signal: &'r Signal,
    w: WorkerId,
    device: &'r dyn Device,
    queue: VecDeque<Queued>,
    held: Option<TaskId>,
    events: Vec<TaskEvent>,
}

/// Runs tasks on device worker `w` until the run ends: keeps up to the device's queue
/// depth of kernels in flight (popping, starting, which queues the uploads, and launching
/// the next tasks while the device works) and waits only for the oldest, then finishes
/// it. A task that does not fit in the device's memory beside the queued ones waits for
/// them to end. Kernel durations come from the device (the kernel alone).
fn device_loop(
    engine: &Engine<'_>,
    carrier: &Devices<'_>,
    signal: &Signal,
    w: WorkerId,
    device: &dyn Device,
) -> Vec<TaskEvent> {
    let depth = device.queue_depth().max(1);
    let mut worker = DeviceWorker {
        engine,
        carrier,
        signal,
        w,
        device,
        queue: VecDeque::with_capacity(depth),
        held: None,
        events: Vec::new(),
    };
    loop {
        if worker.queue.len() < depth && worker.held.is_none() && !engine.stopped() {
            let seen = signal.epoch();
            let now = carrier.now();
            match engine.pop(w, now) {
                Some(task) => {
                    worker.launch(task, now);
                    continue;
                }
                None if worker.queue.is_empty() => {
                    signal.wait(seen, engine.stop_flag());
                    continue;
                }
                None => {}
            }
        }
        // The queue is full, or holds kernels and nothing can be added now, or the run
        // stops: wait for the oldest kernel.
        if !worker.retire_oldest() {
            return worker.events;
        }
        // A task waiting for room tries again now that one has ended.
        if let Some(task) = worker.held.take() {
            worker.launch(task, carrier.now());
        }
    }
}

/// A device's write-back thread: carries out the write-backs of the tiles its device's
/// tasks made final, in the order given, while the worker goes on queueing kernels.
fn write_back_loop(
    engine: &Engine<'_>,
    carrier: &Devices<'_>,
    receiver: mpsc::Receiver<(TaskId, Deferred)>,
) {
    for (task, d) in receiver {
        let done = catch_unwind(AssertUnwindSafe(|| carrier.complete(vec![d])));
        let error = match done {
            Ok(Ok(())) => continue,
            Ok(Err(error)) => error,
            Err(panic) => {
                carrier.inflight.done(&d);
                KernelError::Gpu {
                    message: format!("a write-back panicked: {}", panic_message(&*panic)),
                }
            }
        };
        engine.fail(RunStep::Task(task), TaskFailure::Kernel(error));
    }
}

impl DeviceWorker<'_, '_> {
    /// Starts `task` and queues its kernel; a task that does not fit beside the queued ones
    /// is held, a launch failure finishes it at once.
    fn launch(&mut self, task: TaskId, now: f64) {
        let (engine, carrier) = (self.engine, self.carrier);
        if engine.stopped() {
            return;
        }
        match engine.start(carrier, task, self.w, now, !self.queue.is_empty()) {
            Start::Running => {}
            Start::Later => {
                self.held = Some(task);
                return;
            }
            Start::Stopped => {
                self.signal.bump();
                return;
            }
        }
        let launched = catch_unwind(AssertUnwindSafe(|| {
            carrier.launch_on_device(task, engine.accesses(task), self.device)
        }));
        match outcome(launched) {
            Ok(ticket) => self.queue.push_back(Queued {
                task,
                ticket,
                launched: now,
            }),
            Err(failure) => {
                let end = carrier.now();
                self.events
                    .push(event(carrier.work.graph(), task, self.w, now, end));
                engine.finish(carrier, task, self.w, end, Err(failure));
                self.signal.bump();
            }
        }
    }

    /// Waits for the oldest queued kernel and finishes its task; false when none is queued.
    fn retire_oldest(&mut self) -> bool {
        let Some(Queued {
            task,
            ticket,
            launched,
        }) = self.queue.pop_front()
        else {
            return false;
        };
        let (engine, carrier) = (self.engine, self.carrier);
        let result = outcome(catch_unwind(AssertUnwindSafe(|| ticket.wait())));
        let end = carrier.now();
        let start = match &result {
            Ok(seconds) => {
                engine.ctx().record(task, self.w, *seconds);
                (end - seconds).max(launched)
            }
            Err(_) => launched,
        };
        self.events
            .push(event(carrier.work.graph(), task, self.w, start, end));
        let released = engine.finish(carrier, task, self.w, end, result.map(|_| ()));
        if released || engine.stopped() {
            self.signal.bump();
        }
        true
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
    for t in graph.ids().rev() {
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
    execute_beside(platform, work, options, |_| ()).0
}

/// Where the inputs of a run that come from outside it are delivered ([`execute_beside`]),
/// and what the code delivering them needs to know of the run.
pub struct Inbox<'r, 'a> {
    /// `None` when the run failed before it started.
    run: Option<(&'r Engine<'a>, &'r Devices<'a>, &'r Signal)>,
}

impl Inbox<'_, '_> {
    /// One input of `task` from outside the run is there (its data where the workload's
    /// kernels find it): the task is ready once all of them and its predecessors are. An
    /// input the task does not wait for ends the run with [`TaskFailure::Outside`].
    pub fn arrived(&self, task: TaskId) {
        let Some((engine, carrier, signal)) = self.run else {
            return;
        };
        match engine.arrived(carrier, task, carrier.now()) {
            Ok(true) => signal.bump(),
            Ok(false) => {}
            Err(reason) => self.fail(reason),
        }
    }

    /// Ends the run with [`TaskFailure::Outside`]`(reason)`: no task starts any more, the
    /// running ones finish.
    pub fn fail(&self, reason: String) {
        if let Some((engine, _, signal)) = self.run {
            engine.fail(RunStep::Outside, TaskFailure::Outside(reason));
            signal.bump();
        }
    }

    /// Whether the run has ended: every task finished, or a failure.
    pub fn stopped(&self) -> bool {
        self.run.is_none_or(|(engine, _, _)| engine.stopped())
    }

    /// Whether the run failed (so far).
    pub fn failed(&self) -> bool {
        self.run
            .is_none_or(|(engine, _, _)| engine.failure().is_some())
    }

    /// Tasks of the run not finished yet.
    pub fn unfinished(&self) -> usize {
        self.run.map_or(0, |(engine, _, _)| engine.unfinished())
    }
}

/// Runs `work` as [`execute`] does while `beside` runs on the calling thread, with an
/// [`Inbox`] through which it delivers the inputs the workload's tasks wait for from
/// outside the run ([`Workload::outside_inputs`]): the distributed factorisation's
/// communication loop. `beside` is called exactly once, also when the run fails before it
/// starts (its inbox then says so). If it returns while tasks still wait for inputs from
/// outside, the run ends with [`TaskFailure::Outside`] (they would wait for inputs nobody
/// delivers); a panic in it ends the run too and is resumed once the workers are done.
pub fn execute_beside<R>(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
    beside: impl FnOnce(&Inbox<'_, '_>) -> R,
) -> (Result<Trace, RunError>, R) {
    let mut beside = Some(beside);
    let mut result = None;
    let trace = run_beside(platform, work, options, &mut |inbox| {
        if let Some(f) = beside.take() {
            result = Some(f(inbox));
        }
    });
    let result = match result {
        Some(r) => r,
        // Not called yet: the run failed before it started.
        None => (beside.take().expect("beside is called once"))(&Inbox { run: None }),
    };
    (trace, result)
}

/// [`execute_beside`]'s run, with `beside` called once the workers run (not at all if the
/// run fails before).
fn run_beside(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
    beside: &mut dyn FnMut(&Inbox<'_, '_>),
) -> Result<Trace, RunError> {
    let graph = work.graph();
    let workers = platform.workers();
    let setup_error = |(step, failure)| RunError {
        step,
        failure,
        trace: Box::new(Trace::new(workers.to_vec(), Vec::new(), 0.0)),
    };

    let models = platform.models();
    let devices: Vec<&dyn Device> = platform.devices().iter().map(|d| &*d.device).collect();
    let mut capacities = vec![None];
    capacities.extend(devices.iter().map(|d| Some(d.budget())));
    let (ctx, tables) = crate::prepare::prepare(
        workers,
        graph,
        graph.ids().map(|t| work.key(t)),
        &|tile| work.tile_bytes(tile),
        options,
        |k, c| models.get(k, c).copied().unwrap_or_default(),
        capacities,
    )
    .map_err(setup_error)?;
    let links = platform.links();
    let copy_seconds = |from, to, bytes| crate::platform::copy_seconds(&links, from, to, bytes);
    let estimate = tables.estimate(workers, &copy_seconds);
    let engine = Engine::new(graph, ctx, &tables, &estimate, options, |t| {
        work.outside_inputs(t)
    })
    .map_err(setup_error)?;
    // One run at a time per platform: its pools and device memory serve one run.
    let _busy = platform.lock_run();

    let mut carrier = Devices {
        work,
        devices,
        inflight: InFlight::default(),
        behind: Mutex::new(Vec::new()),
        transfers: Mutex::new(Vec::new()),
        start: Instant::now(),
    };
    // Placed tiles are copied and waited for before the clock starts, and not traced.
    let placed = engine.place(&carrier).and_then(|()| {
        carrier
            .devices
            .iter()
            .try_for_each(|d| d.wait_uploads())
            .map_err(TaskFailure::Kernel)
    });
    if let Err(failure) = placed {
        let failure = match failure {
            TaskFailure::Memory(no_room) => TaskFailure::Kernel(KernelError::Gpu {
                message: format!("the placed operands do not fit: {no_room}"),
            }),
            other => other,
        };
        engine.fail(RunStep::Setup, failure);
    }
    carrier
        .transfers
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    carrier.start = Instant::now();
    engine.push_roots(&carrier);
    let signal = Signal::new();
    let clusters = platform.clusters();
    let (per_worker, panicked): (Vec<Vec<TaskEvent>>, _) = std::thread::scope(|s| {
        let (engine, carrier, signal) = (&engine, &carrier, &signal);
        let copiers: Vec<_> = platform
            .devices()
            .iter()
            .map(|device| {
                let (sender, receiver) = mpsc::channel();
                crate::lock(&carrier.behind).push(sender);
                s.spawn(move || {
                    hetla_clusters::pin_current_thread(device.core);
                    write_back_loop(engine, carrier, receiver);
                })
            })
            .collect();
        let mut threads: Vec<_> = clusters
            .iter()
            .enumerate()
            .map(|(w, cluster)| {
                s.spawn(move || {
                    cluster.pool().install(|| {
                        worker_loop(engine, carrier, signal, WorkerId(w), cluster.size())
                    })
                })
            })
            .collect();
        for (i, device) in platform.devices().iter().enumerate() {
            let w = WorkerId(clusters.len() + i);
            threads.push(s.spawn(move || {
                hetla_clusters::pin_current_thread(device.core);
                device_loop(engine, carrier, signal, w, &*device.device)
            }));
        }
        // The inputs from outside the run, on this thread while the workers run.
        let inbox = Inbox {
            run: Some((engine, carrier, signal)),
        };
        let besides = catch_unwind(AssertUnwindSafe(|| beside(&inbox)));
        // Returning early is fine when no task waits for it (or the run is over).
        if !engine.stopped() && (besides.is_err() || engine.outside_left() > 0) {
            inbox.fail(match &besides {
                Ok(()) => {
                    "the inputs from outside the run ended before the tasks waiting for them".into()
                }
                Err(panic) => format!(
                    "delivering the inputs from outside the run panicked: {}",
                    panic_message(&**panic)
                ),
            });
        }
        let events = threads
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        // The workers are done: the write-back threads finish what they were given.
        crate::lock(&carrier.behind).clear();
        for copier in copiers {
            let _ = copier.join();
        }
        (events, besides.err())
    });
    engine.flush(&carrier, carrier.now());
    for device in &carrier.devices {
        device.clear();
    }
    let makespan = carrier.now();
    let events = per_worker.into_iter().flatten().collect();
    let mut trace = Trace::new(workers.to_vec(), events, makespan);
    trace.transfers = carrier
        .transfers
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());

    // Keep what this run learned: its samples are added to the platform's models (and,
    // when they are saved, merged into the store's file).
    let (ctx, failure) = engine.into_parts();
    let fresh = ctx.into_fresh();
    let (keys, classes) = (&tables.keys, &tables.classes);
    platform.update_models(|models| {
        for (i, stats) in fresh.iter().enumerate() {
            if stats.samples > 0 {
                let (key, class) = (&keys[i / classes.len()], &classes[i % classes.len()]);
                models.merge(key.clone(), class.clone(), stats);
            }
        }
    });
    if let Some(panic) = panicked {
        std::panic::resume_unwind(panic);
    }
    match failure {
        None => Ok(trace),
        Some((step, failure)) => Err(RunError {
            step,
            failure,
            trace: Box::new(trace),
        }),
    }
}
