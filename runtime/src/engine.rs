//! The engine of a run, written once for real and simulated runs: what happens when a task becomes
//! ready, when a worker takes it, and when it ends.
//!
//! A run is a sequence of steps on one state (the scheduler, the data registry, the count of
//! unfinished predecessors of each task):
//!
//! 1. **push**: a ready task goes to the scheduler; when the policy binds it to a worker at once
//!    (MCT, dmda), its tiles are prefetched to that worker's memory node;
//! 2. **start**: a worker pops a task, its tiles are made valid and pinned on the worker's node,
//!    and the inputs of the tasks a static plan gives it next are prefetched;
//! 3. **finish**: the tiles are unpinned, those the plan (or the last write of a tile) releases are
//!    dropped from a device, written back when last, the tiles the task made final are written back
//!    to host memory (unless [`crate::WriteBack::AtEnd`]), the scheduler learns the end, and the
//!    successors whose last predecessor this was are pushed;
//! 4. **flush**: after the last task, every tile whose only valid copy is on a device is written
//!    back to host memory.
//!
//! A task may also wait for inputs from outside the run (tiles another process sends, see
//! [`crate::Inbox`]): each counts as one more unfinished predecessor, which [`Engine::arrived`]
//! releases; the task is pushed when the last of either kind is there.
//!
//! What differs between a real and a simulated run is only *when* these steps happen and what a
//! copy costs, so the engine leaves two things to its driver:
//!
//! - a [`Carrier`] carries out the copies, allocations and releases the registry decides, in the
//!   registry's order: on devices (the real executor, which registers each copy under the
//!   registry's lock, carries it out after it and traces it with wall times; see
//!   [`crate::inflight`]) or on modelled links (the simulator, which books each copy on its links'
//!   timelines under the lock);
//! - the clock: the real executor's workers each loop on their own thread (pop, start, run the
//!   kernel, finish) with wall time; the simulator's single loop lets every idle worker pop and
//!   start, then advances a virtual clock to the next task end and finishes it.
//!
//! Neither driver touches the scheduler or the registry except through the engine, so the two
//! cannot drift apart. Failures (a copy, a memory node too small, a kernel) are recorded here, the
//! earliest [`RunStep`] first, and stop the run.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hetla_factorizations::{Mode, TaskGraph, TaskId};
use hetla_kernels::KernelError;

use crate::data::{DataRegistry, HOST, Handle, MemoryNode, Step};
use crate::inflight::Deferred;
use crate::prepare::{LinkEstimate, PREFETCH_DEPTH, Tables, prefetchable};
use crate::run::{RunOptions, RunStep, TaskFailure};
use crate::schedulers::{SchedContext, Scheduler};
use crate::sync::lock;
use crate::workers::WorkerId;

/// What [`Engine::start`] did with a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Its tiles are on the worker's node and pinned: run it.
    Running,
    /// It does not fit beside the worker's running tasks: start it again once one ends.
    Later,
    /// The run must stop (the failure is recorded).
    Stopped,
}

/// Carries out the registry's decisions: copies between memory nodes, device buffers allocated and
/// released.
pub(crate) trait Carrier: Sync {
    /// Carries out `steps`, in order, decided at time `at` by `data` (still locked, so no other
    /// worker sees their effect before they are done), or registers them to carry out after the
    /// lock: those are returned, for [`Carrier::complete`].
    fn carry_out(
        &self,
        steps: Vec<Step>,
        data: &DataRegistry,
        at: f64,
    ) -> Result<Vec<Deferred>, KernelError>;

    /// Carries out the copies [`Carrier::carry_out`] deferred, once the registry's lock is released
    /// (see [`crate::inflight`]).
    fn complete(&self, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        debug_assert!(deferred.is_empty());
        Ok(())
    }

    /// Carries out deferred write-backs of the tiles `task` made final: by default as
    /// [`Carrier::complete`] does; the real executor hands them to a thread of the device they come
    /// from, so that the device's worker goes on queueing kernels (a failure is then recorded for
    /// `task` by that thread).
    fn complete_behind(&self, _task: TaskId, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        self.complete(deferred)
    }

    /// Waits until the tiles a task accesses on `node` are there and no longer read by a copy it
    /// would overwrite (nothing to wait for when copies are done under the lock).
    fn settle(&self, _accesses: &[(Handle, Mode)], _node: MemoryNode) {}
}

/// A run in progress: the scheduler, the data registry and the tasks' readiness, shared by the
/// workers (see the module documentation).
pub(crate) struct Engine<'a> {
    graph: &'a TaskGraph,
    ctx: SchedContext<'a>,
    scheduler: Box<dyn Scheduler>,
    tables: &'a Tables,
    remaining: Vec<AtomicUsize>,
    /// Per task, and in all, the inputs from outside the run not arrived yet.
    outside: Vec<AtomicUsize>,
    outside_left: AtomicUsize,
    unfinished: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<(RunStep, TaskFailure)>>,
}

impl<'a> Engine<'a> {
    /// An engine for `graph`, scheduled by `options`' policy (or its static plan, checked against
    /// the run), with transfer estimates from `transfers` when the platform has several memory
    /// nodes; task `t` also waits for `outside(t)` inputs from outside the run.
    pub fn new(
        graph: &'a TaskGraph,
        ctx: SchedContext<'a>,
        tables: &'a Tables,
        transfers: &'a LinkEstimate<'a>,
        options: &RunOptions,
        outside: impl Fn(TaskId) -> usize,
    ) -> Result<Self, (RunStep, TaskFailure)> {
        let n = graph.len();
        let scheduler = options
            .build_scheduler(ctx.workers().len(), n)
            .map_err(|reason| (RunStep::Setup, TaskFailure::Plan(reason)))?;
        // With the host as the only memory node no copy is ever needed: no estimates.
        let ctx = if tables.several_nodes {
            ctx.with_transfers(transfers)
        } else {
            ctx
        };
        let outside: Vec<usize> = graph.ids().map(outside).collect();
        Ok(Self {
            graph,
            ctx,
            scheduler,
            tables,
            remaining: graph
                .ids()
                .map(|t| AtomicUsize::new(graph.predecessors(t).len() + outside[t]))
                .collect(),
            outside_left: AtomicUsize::new(outside.iter().sum()),
            outside: outside.into_iter().map(AtomicUsize::new).collect(),
            unfinished: AtomicUsize::new(n),
            stop: AtomicBool::new(n == 0),
            failure: Mutex::new(None),
        })
    }

    /// The scheduler's view of the run (workers, estimates, the model table).
    pub fn ctx(&self) -> &SchedContext<'a> {
        &self.ctx
    }

    /// The data handles `task` uses, with their access modes (its operands in order).
    pub fn accesses(&self, task: TaskId) -> &[(Handle, Mode)] {
        &self.tables.handles[task]
    }

    /// Whether the run has ended: every task finished, or a failure.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The flag [`Engine::stopped`] reads, for a driver's waits.
    pub fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// Inputs from outside the run that tasks still wait for.
    pub fn outside_left(&self) -> usize {
        self.outside_left.load(Ordering::SeqCst)
    }

    /// Tasks not finished yet.
    pub fn unfinished(&self) -> usize {
        self.unfinished.load(Ordering::SeqCst)
    }

    /// Records a failure (the earliest step is kept) and stops the run.
    pub fn fail(&self, step: RunStep, failure: TaskFailure) {
        let mut first = lock(&self.failure);
        if first.as_ref().is_none_or(|(s, _)| step < *s) {
            *first = Some((step, failure));
        }
        drop(first);
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The first failure, if any.
    pub fn failure(&self) -> Option<(RunStep, TaskFailure)> {
        lock(&self.failure).clone()
    }

    /// The run's end: the scheduler's context (with what the run measured) and the first failure.
    pub fn into_parts(self) -> (SchedContext<'a>, Option<(RunStep, TaskFailure)>) {
        let failure = self.failure.into_inner().unwrap_or_else(|e| e.into_inner());
        (self.ctx, failure)
    }

    /// Runs `f` on the registry, then has `carrier` carry out what it decided: under the lock, or
    /// registered under it and carried out after it.
    pub fn with_data<R>(
        &self,
        carrier: &dyn Carrier,
        at: f64,
        f: impl FnOnce(&mut DataRegistry) -> R,
    ) -> Result<R, KernelError> {
        let (deferred, result) = self.decide(carrier, at, f)?;
        carrier.complete(deferred)?;
        Ok(result)
    }

    /// Runs `f` on the registry and has `carrier` carry out or register what it decided, under the
    /// lock; returns the copies registered.
    fn decide<R>(
        &self,
        carrier: &dyn Carrier,
        at: f64,
        f: impl FnOnce(&mut DataRegistry) -> R,
    ) -> Result<(Vec<Deferred>, R), KernelError> {
        let mut data = lock(&self.tables.data);
        let result = f(&mut data);
        let steps = data.take_steps();
        if steps.is_empty() {
            return Ok((Vec::new(), result));
        }
        Ok((carrier.carry_out(steps, &data, at)?, result))
    }

    /// Puts the tiles the options place on their nodes (before the clock starts).
    pub fn place(&self, carrier: &dyn Carrier) -> Result<(), TaskFailure> {
        let placement = &self.tables.placement;
        if placement.is_empty() || !self.tables.several_nodes {
            return Ok(());
        }
        let placed = self.with_data(carrier, 0.0, |d| {
            placement
                .iter()
                .find_map(|&(h, node, mode)| d.acquire(h, node, mode).err())
        });
        match placed {
            Ok(None) => Ok(()),
            Ok(Some(no_room)) => Err(TaskFailure::Memory(no_room)),
            Err(error) => Err(TaskFailure::Kernel(error)),
        }
    }

    /// Pushes the tasks that wait for nothing, at time 0.
    pub fn push_roots(&self, carrier: &dyn Carrier) {
        for t in self
            .graph
            .ids()
            .filter(|&t| self.remaining[t].load(Ordering::SeqCst) == 0)
        {
            self.push(carrier, t, None, 0.0);
        }
    }

    /// One input of `task` from outside the run is there (at `now`): pushes the task when it waited
    /// for nothing else (true then). An input `task` does not wait for (any more) is an error: the
    /// caller counted them wrong.
    pub fn arrived(&self, carrier: &dyn Carrier, task: TaskId, now: f64) -> Result<bool, String> {
        self.outside
            .get(task.0)
            .ok_or_else(|| format!("task {task} is not one of the run's {}", self.graph.len()))?
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| r.checked_sub(1))
            .map_err(|_| format!("task {task} waits for no input from outside the run"))?;
        self.outside_left.fetch_sub(1, Ordering::SeqCst);
        let left = self.remaining[task].fetch_sub(1, Ordering::SeqCst);
        if left == 1 && !self.stopped() {
            self.push(carrier, task, None, now);
            return Ok(true);
        }
        Ok(false)
    }

    /// Hands a ready task to the scheduler and, on a platform with several memory nodes, prefetches
    /// its tiles to the worker the scheduler bound it to, if any.
    fn push(&self, carrier: &dyn Carrier, task: TaskId, origin: Option<WorkerId>, now: f64) {
        self.scheduler.push(task, origin, now, &self.ctx);
        if !self.tables.several_nodes {
            return;
        }
        if let Some(w) = self.scheduler.assigned_worker(task) {
            let node = self.ctx.workers()[w].node;
            let handles = &self.tables.handles[task];
            if let Err(error) = self.with_data(carrier, now, |d| d.prefetch_task(handles, node)) {
                self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
            }
        }
    }

    /// The next task of worker `w`, if the scheduler has one for it.
    pub fn pop(&self, w: WorkerId, now: f64) -> Option<TaskId> {
        self.scheduler.pop(w, now, &self.ctx)
    }

    /// Makes `task`'s tiles valid on worker `w`'s node and pins them there, then copies ahead the
    /// inputs of the tasks the scheduler says `w` runs next (static plans), those safe to copy now.
    /// `busy`: `w` has other tasks running (a device's queue), whose tiles will be unpinned when
    /// they end, so a task that does not fit beside them is [`Start::Later`], not a failure.
    pub fn start(
        &self,
        carrier: &dyn Carrier,
        task: TaskId,
        w: WorkerId,
        now: f64,
        busy: bool,
    ) -> Start {
        let node = self.ctx.workers()[w].node;
        let handles = &self.tables.handles[task];
        let started = self.with_data(carrier, now, |d| {
            if busy && d.fits(handles, node).is_err() {
                return Ok(None);
            }
            let copies = d.start_task(handles, node)?;
            d.started(task, handles);
            Ok(Some(copies))
        });
        let failure = match started {
            Ok(Ok(Some(_))) => None,
            Ok(Ok(None)) => return Start::Later,
            Ok(Err(no_room)) => Some(TaskFailure::Memory(no_room)),
            Err(error) => Some(TaskFailure::Kernel(error)),
        };
        if let Some(failure) = failure {
            self.fail(RunStep::Task(task), failure);
            return Start::Stopped;
        }
        if !self.tables.several_nodes {
            return Start::Running;
        }
        let next = self.scheduler.lookahead(w, PREFETCH_DEPTH);
        let ready = |t: TaskId| self.remaining[t].load(Ordering::SeqCst) == 0;
        for h in prefetchable(&next, &self.tables.handles, &self.tables.written, ready) {
            if let Err(error) = self.with_data(carrier, now, |d| d.prefetch(h, node)) {
                self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
                return Start::Stopped;
            }
        }
        carrier.settle(handles, node);
        Start::Running
    }

    /// Ends `task` on worker `w` at `end` with `outcome`: unpins its tiles, drops those released
    /// after it from a device, and, when it succeeded, tells the scheduler and pushes the
    /// successors it made ready (true when some became ready). The last task's end stops the run.
    pub fn finish(
        &self,
        carrier: &dyn Carrier,
        task: TaskId,
        w: WorkerId,
        end: f64,
        outcome: Result<(), TaskFailure>,
    ) -> bool {
        let mut released = false;
        let node = self.ctx.workers()[w].node;
        lock(&self.tables.data).end_task(&self.tables.handles[task], node);
        // Host memory keeps its tiles: only a device's are released.
        if node != HOST {
            for &h in &self.tables.releases[task] {
                if let Err(error) = self.with_data(carrier, end, |d| d.evict(h, node)) {
                    self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
                    return released;
                }
            }
            if outcome.is_ok() {
                for &h in &self.tables.write_backs[task] {
                    let written_back = self
                        .decide(carrier, end, |d| d.prefetch(h, HOST))
                        .and_then(|(deferred, _)| carrier.complete_behind(task, deferred));
                    if let Err(error) = written_back {
                        self.fail(RunStep::Task(task), TaskFailure::Kernel(error));
                        return released;
                    }
                }
            }
        }
        if let Err(failure) = outcome {
            self.fail(RunStep::Task(task), failure);
            return released;
        }
        self.scheduler.done(task, w, end, &self.ctx);
        for &s in self.graph.successors(task) {
            if self.remaining[s].fetch_sub(1, Ordering::SeqCst) == 1 {
                self.push(carrier, s, Some(w), end);
                released = true;
            }
        }
        if self.unfinished.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.stop.store(true, Ordering::SeqCst);
        }
        released
    }

    /// Writes back every tile whose only valid copy is on a device (the caller's matrix must hold
    /// the result, also after a failure).
    pub fn flush(&self, carrier: &dyn Carrier, now: f64) {
        if !self.tables.several_nodes {
            return;
        }
        if let Err(error) = self.with_data(carrier, now, |d| d.flush_to_host()) {
            self.fail(RunStep::WriteBack, TaskFailure::Kernel(error));
        }
    }
}
