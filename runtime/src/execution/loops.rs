//! The workers' loops of the real executor: a CPU cluster's (pop, start, run the kernel on the
//! cluster's team, keep its pieces, finish), a device's (keep its queue of kernels full, retire the
//! oldest) and a device's write-back thread.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use hetla_factorizations::{TaskGraph, TaskId};
use hetla_kernels::KernelError;

use super::carrier::{Devices, panic_message};
use super::signal::Signal;
use crate::devices::{Device, Launched};
use crate::engine::{Carrier, Engine, Start};
use crate::inflight::Deferred;
use crate::run::{RunStep, TaskFailure};
use crate::sync::lock;
use crate::trace::{PieceEvent, TaskEvent};
use crate::workers::WorkerId;

/// The trace event of `task` on worker `w`.
pub(super) fn event(
    graph: &TaskGraph,
    task: TaskId,
    w: WorkerId,
    start: f64,
    end: f64,
) -> TaskEvent {
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
pub(super) fn outcome<T>(
    result: std::thread::Result<Result<T, KernelError>>,
) -> Result<T, TaskFailure> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(TaskFailure::Kernel(error)),
        Err(panic) => Err(TaskFailure::Panic(panic_message(&*panic))),
    }
}

/// Pops and runs tasks on CPU cluster worker `w` until the run ends, on wall time, as `cluster`'s
/// worker. The cluster is marked busy from the moment the worker takes a task until it finds none
/// (its cores are lent to the GPUs' copies only while it is idle: [`hetla_clusters::Lender`]).
pub(super) fn worker_loop(
    engine: &Engine<'_>,
    carrier: &Devices<'_>,
    signal: &Signal,
    w: WorkerId,
    cluster: &hetla_clusters::CpuCluster,
) -> Vec<TaskEvent> {
    let cores = cluster.size();
    let par = hetla_kernels::par_for(cores);
    let graph = carrier.work.graph();
    let mut events = Vec::new();
    /// Marks the cluster idle when the loop returns or unwinds.
    struct IdleAfter(hetla_clusters::Lender);
    impl Drop for IdleAfter {
        fn drop(&mut self) {
            self.0.set_idle(true);
        }
    }
    let lender = IdleAfter(cluster.lender());
    // A CPU task writes host memory: none starts before an input check beside the run is done.
    if carrier.host_writes_allowed().is_err() {
        return events;
    }
    while !engine.stopped() {
        let seen = signal.epoch();
        let popped = carrier.now();
        let Some(task) = engine.pop(w, popped) else {
            lender.0.set_idle(true);
            signal.wait(seen, engine.stop_flag());
            continue;
        };
        lender.0.set_idle(false);
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
        // A one-core cluster never splits: nothing to collect.
        let pieces = if cores > 1 {
            hetla_clusters::take_pieces()
        } else {
            Vec::new()
        };
        if !pieces.is_empty() {
            let at =
                |t: std::time::Instant| t.saturating_duration_since(carrier.start).as_secs_f64();
            lock(&carrier.pieces).extend(pieces.into_iter().map(|p| PieceEvent {
                task,
                worker: w,
                call: p.call,
                index: p.index,
                thread: p.thread,
                cpu: p.cpu,
                start: at(p.start),
                end: at(p.end),
            }));
        }
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
pub(super) struct Queued {
    task: TaskId,
    ticket: Launched,
    launched: f64,
}

/// A device worker's state during a run: its kernels in flight, oldest first, and a popped task
/// that did not fit in the device's memory beside them.
pub(super) struct DeviceWorker<'r, 'a> {
    engine: &'r Engine<'a>,
    carrier: &'r Devices<'a>,
    signal: &'r Signal,
    w: WorkerId,
    device: &'r dyn Device,
    queue: VecDeque<Queued>,
    held: Option<TaskId>,
    events: Vec<TaskEvent>,
}

/// Runs tasks on device worker `w` until the run ends: keeps up to the device's queue depth of
/// kernels in flight (popping, starting, which queues the uploads, and launching the next tasks
/// while the device works) and finishes a kernel that has ended, else waits for the oldest. A task
/// that does not fit in the device's memory beside the queued ones waits for them to end. Kernel
/// durations come from the device (the kernel alone).
pub(super) fn device_loop(
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
        // stops: finish a kernel that has ended, or wait for the oldest.
        if !worker.retire_next() {
            return worker.events;
        }
        // A task waiting for room tries again now that one has ended.
        if let Some(task) = worker.held.take() {
            worker.launch(task, carrier.now());
        }
    }
}

/// A device's write-back thread: carries out the write-backs of the tiles its device's tasks made
/// final, in the order given, while the worker goes on queueing kernels.
pub(super) fn write_back_loop(
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
    /// Starts `task` and queues its kernel; a task that does not fit beside the queued ones is
    /// held, a launch failure finishes it at once.
    pub(super) fn launch(&mut self, task: TaskId, now: f64) {
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

    /// Finishes the task of the first queued kernel that has ended, else waits for the oldest (a
    /// device with several streams may end a younger kernel first); false when none is queued.
    pub(super) fn retire_next(&mut self) -> bool {
        let next = self.queue.iter().position(|q| q.ticket.is_done());
        let Some(Queued {
            task,
            ticket,
            launched,
        }) = self.queue.remove(next.unwrap_or(0))
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
