//! The real executor: the [engine](crate::engine) on wall time, one thread per worker, running
//! tasks as the scheduler hands them out, on the platform's pinned cluster pools.
//!
//! Each worker's loop runs as its cluster's worker ([`hetla_clusters::CpuCluster::run`], once per
//! run, not per task): on the cluster's pool thread pinned to its first core, leading the cluster's
//! team, so a kernel called with `Par::rayon(cluster size)` runs piece i on the thread pinned to
//! the cluster's core i: no more busy threads than cores, no piece on a thread that happened to be
//! awake. The pieces are kept in the trace (`Trace::pieces`). Idle workers sleep on a condition
//! variable that every release of ready tasks signals.
//!
//! Device workers (GPUs, emulated devices; [`crate::devices`]) each have a host thread of their
//! own, pinned to the core the platform reserved for it. It never waits for one kernel before
//! queueing the next: it keeps up to the device's queue depth of tasks in flight (started, their
//! uploads queued, their kernels launched), ordered on the device by events, and waits only for the
//! oldest, whose duration the device measures. The copies and releases the engine's data registry
//! decides are carried out by this executor's [`Carrier`] **under the registry's lock, in the
//! registry's order**, so no worker ever sees a replica marked valid before its data is there and
//! no buffer is freed before its write-back. (GPU uploads only stage and queue their copy under the
//! lock; the kernel that needs the tile waits for it on the device, and the trace shows the
//! staging, not the copy itself.)
//!
//! Failure: a kernel error or a panic (caught at the task) stops the run: no worker pops another
//! task, running tasks finish, every thread returns, and the first failing task (lowest index) is
//! reported. The pools are untouched and serve the next run. Tiles are still written back from the
//! devices, so the matrix holds the state the run reached.
//!
//! Input check beside the run ([`execute_checked`]): a check that reads the workload's host memory
//! (a factorisation's test for NaN and its norm, one pass over the matrix) runs on the calling
//! thread while the first copies and kernels go on, instead of before the clock: every write into
//! host memory (a CPU worker's first task, a copy from a device into a host tile) waits at a gate
//! until the check returns, so it reads the input as given, and a refused input stops the run with
//! host memory as it was.
//!
//! Files: `carrier.rs` (the copies on devices), `gate.rs` (the gate on host writes), `locking.rs`
//! (page-locking host memory beside the run), `loops.rs` (the workers' loops), `signal.rs` (idle
//! workers' sleep), and here the run itself ([`execute`], [`execute_beside`], [`execute_checked`]).

mod carrier;
mod gate;
mod locking;
mod loops;
mod signal;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Instant;

use hetla_kernels::KernelError;

use carrier::{Devices, panic_message};
use gate::HostWriteGate;
use loops::{device_loop, worker_loop, write_back_loop};
use signal::Signal;

use crate::devices::Device;
use crate::engine::Engine;
use crate::platform::Platform;
use crate::run::{HostMemory, RunError, RunOptions, RunStep, TaskFailure, Workload, WriteBack};
use crate::sync::lock;
use crate::trace::{PageLocked, TaskEvent, Trace};
use crate::workers::WorkerId;
use hetla_factorizations::TaskId;

/// Runs every task of `work` on `platform`'s workers and returns the trace.
pub fn execute(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
) -> Result<Trace, RunError> {
    execute_beside(platform, work, options, |_| ()).0
}

/// Where the inputs of a run that come from outside it are delivered ([`execute_beside`]), and what
/// the code delivering them needs to know of the run.
pub struct Inbox<'r, 'a> {
    /// `None` when the run failed before it started.
    run: Option<(&'r Engine<'a>, &'r Devices<'a>, &'r Signal)>,
}

impl Inbox<'_, '_> {
    /// One input of `task` from outside the run is there (its data where the workload's kernels
    /// find it): the task is ready once all of them and its predecessors are. An input the task
    /// does not wait for ends the run with [`TaskFailure::Outside`].
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

    /// Ends the run with [`TaskFailure::Outside`]`(reason)`: no task starts any more, the running
    /// ones finish.
    pub fn fail(&self, reason: String) {
        if let Some((engine, _, signal)) = self.run {
            engine.fail(RunStep::Outside, TaskFailure::Outside(reason));
            signal.bump();
        }
    }

    /// Ends the run as refused by the input check beside it ([`execute_checked`]): a failure at
    /// [`RunStep::Input`], reported before any other.
    fn refuse_input(&self, why: String) {
        if let Some((engine, _, signal)) = self.run {
            engine.fail(RunStep::Input, TaskFailure::Outside(why));
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

/// Runs `work` as [`execute`] does while `beside` runs on the calling thread, with an [`Inbox`]
/// through which it delivers the inputs the workload's tasks wait for from outside the run
/// ([`Workload::outside_inputs`]): the distributed factorisation's communication loop. `beside` is
/// called exactly once, also when the run fails before it starts (its inbox then says so). If it
/// returns while tasks still wait for inputs from outside, the run ends with
/// [`TaskFailure::Outside`] (they would wait for inputs nobody delivers); a panic in it ends the
/// run too and is resumed once the workers are done.
pub fn execute_beside<R>(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
    beside: impl FnOnce(&Inbox<'_, '_>) -> R,
) -> (Result<Trace, RunError>, R) {
    let mut beside = Some(beside);
    let mut result = None;
    let trace = run_beside(platform, work, options, None, &mut |inbox| {
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

/// Runs `work` as [`execute`] does while `check` reads the workload's host memory on the calling
/// thread: an input check overlapped with the run's first copies and kernels (see the module
/// documentation). Nothing writes that memory until `check` has returned `Ok`: no CPU worker starts
/// a task, no copy from a device writes a host tile (devices compute meanwhile, on what they have
/// uploaded). When it returns `Err(why)`, the run stops as a failure at [`RunStep::Input`]
/// ([`TaskFailure::Outside`] with `why`'s text) and host memory is left as it was; a panic in it
/// stops the run the same way and is resumed once the workers are done. `check` is called exactly
/// once, also when the run fails before it starts. Returns the run's result and `check`'s.
pub fn execute_checked<R, E: std::fmt::Display>(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
    check: impl FnOnce() -> Result<R, E>,
) -> (Result<Trace, RunError>, Result<R, E>) {
    let gate = HostWriteGate::new();
    let mut check = Some(check);
    let mut outcome = None;
    let trace = run_beside(platform, work, options, Some(&gate), &mut |inbox| {
        let Some(f) = check.take() else { return };
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(result) => {
                let verdict = result.as_ref().map(|_| ()).map_err(|e| e.to_string());
                if let Err(why) = &verdict {
                    inbox.refuse_input(why.clone());
                }
                gate.decide(verdict);
                outcome = Some(result);
            }
            Err(panic) => {
                let why = format!("the input check panicked: {}", panic_message(&*panic));
                inbox.refuse_input(why.clone());
                gate.decide(Err(why));
                std::panic::resume_unwind(panic);
            }
        }
    });
    let outcome = match (outcome, check.take()) {
        (Some(outcome), _) => outcome,
        // Not called yet: the run failed before it started.
        (None, Some(f)) => f(),
        (None, None) => unreachable!("a check that panicked was resumed by the run"),
    };
    (trace, outcome)
}

/// [`execute_beside`]'s run, with `beside` called once the workers run (not at all if the run fails
/// before); with `gate`, every write into host memory waits for it.
fn run_beside(
    platform: &Platform,
    work: &dyn Workload,
    options: &RunOptions,
    gate: Option<&HostWriteGate>,
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
    // Page-locked host memory: its first piece locked now, the others beside the run.
    let pieces = if options.host_memory == HostMemory::PageLocked && !devices.is_empty() {
        locking::pieces(work)
    } else {
        Vec::new()
    };
    let (first, rest) = pieces.split_at(pieces.len().min(1));
    // SAFETY: the workload's host memory outlives the run, and the locks are dropped at its end,
    // once every copy is done (after the flush).
    let mut locks = unsafe { locking::lock_pieces(platform, first, None) };
    let lock_rest = locks.iter().all(|l| l.failed().is_none()) && !rest.is_empty();

    let mut carrier = Devices::new(work, devices, (gate, options.tensor_math));
    place(&engine, &mut carrier);
    engine.push_roots(&carrier);
    let signal = Signal::new();
    let clusters = platform.clusters();
    let (per_worker, panicked, locked): (Vec<Vec<TaskEvent>>, _, _) = std::thread::scope(|s| {
        let (engine, carrier, signal) = (&engine, &carrier, &signal);
        // SAFETY: as the first piece's.
        let locker = lock_rest.then(|| {
            s.spawn(move || unsafe { locking::lock_pieces(platform, rest, Some(engine)) })
        });
        let copiers: Vec<_> = platform
            .devices()
            .iter()
            .map(|device| {
                let (sender, receiver) = mpsc::channel();
                lock(&carrier.behind).push(sender);
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
                    cluster.run(true, || {
                        worker_loop(engine, carrier, signal, WorkerId(w), cluster)
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
        let besides = deliver_outside_inputs(engine, carrier, signal, beside);
        let events = threads
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        // The workers are done: the write-back threads finish what they were given.
        lock(&carrier.behind).clear();
        for copier in copiers {
            let _ = copier.join();
        }
        let locked = locker.and_then(|l| l.join().ok()).unwrap_or_default();
        (events, besides, locked)
    });
    locks.extend(locked);
    let trace = finish(&engine, carrier, options, workers, per_worker, &locks);

    let failure = learn(platform, engine, &tables, options.tensor_math);
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

/// After the workers: the flush of the tiles still on devices (a resident run's clock stops before
/// it, which it neither times nor traces), the devices cleared once their uploads from page-locked
/// memory are done (before that memory is unlocked or written again), and the run's trace with what
/// `locks` locked.
fn finish(
    engine: &Engine<'_>,
    carrier: Devices<'_>,
    options: &RunOptions,
    workers: &[crate::workers::WorkerInfo],
    per_worker: Vec<Vec<TaskEvent>>,
    locks: &[crate::platform::PageLock],
) -> Trace {
    let resident = options.write_back == WriteBack::Resident;
    let before_flush = (carrier.now(), lock(&carrier.transfers).len());
    engine.flush(&carrier, carrier.now());
    for device in &carrier.devices {
        // A failed wait leaves nothing more to protect.
        let _ = device.wait_uploads();
        device.clear();
    }
    let makespan = if resident {
        before_flush.0
    } else {
        carrier.now()
    };
    let events = per_worker.into_iter().flatten().collect();
    let mut trace = Trace::new(workers.to_vec(), events, makespan);
    trace.input_checked = carrier
        .gate
        .and_then(HostWriteGate::decided_at)
        .map(|at| at.saturating_duration_since(carrier.start).as_secs_f64());
    if !locks.is_empty() {
        trace.host_memory = PageLocked {
            bytes: locks.iter().map(|l| l.bytes()).sum(),
            already: locks.iter().map(|l| l.already()).sum(),
            seconds: locks.iter().map(|l| l.seconds()).sum(),
            failed: locks.iter().find_map(|l| l.failed().map(str::to_owned)),
        };
    }
    trace.transfers = carrier
        .transfers
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    trace.pieces = carrier
        .pieces
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    trace.pieces.sort_by(|a, b| a.start.total_cmp(&b.start));
    if resident {
        trace.transfers.truncate(before_flush.1);
    }
    trace
}

/// Copies the placed tiles to their devices and waits for them, before the clock starts (neither
/// timed nor traced); a failure fails the run's setup. Then starts the clock.
fn place(engine: &Engine<'_>, carrier: &mut Devices<'_>) {
    let placed = engine.place(&*carrier).and_then(|()| {
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
}

/// Calls `beside` with the run's inbox, on this thread while the workers run: the inputs from
/// outside the run. Fails the run if it returns (or panics) while tasks still wait for inputs;
/// returning early is fine when none does (or the run is over). Its panic, if any.
fn deliver_outside_inputs(
    engine: &Engine<'_>,
    carrier: &Devices<'_>,
    signal: &Signal,
    beside: &mut dyn FnMut(&Inbox<'_, '_>),
) -> Option<Box<dyn std::any::Any + Send>> {
    let inbox = Inbox {
        run: Some((engine, carrier, signal)),
    };
    let besides = catch_unwind(AssertUnwindSafe(|| beside(&inbox)));
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
    besides.err()
}

/// Keeps what the run learned: its samples are added to the platform's models (and, when they are
/// saved, merged into the store's file), but for the devices' kernels whose products ran with the
/// run's tensor `math` ([`TensorMath::applies`](hetla_kernels::TensorMath::applies)): a model is of
/// a kernel in its precision, and a TF32 product is not an f32 one. The run's failure, if any.
fn learn(
    platform: &Platform,
    engine: Engine<'_>,
    tables: &crate::prepare::Tables,
    math: hetla_kernels::TensorMath,
) -> Option<(RunStep, TaskFailure)> {
    let (ctx, failure) = engine.into_parts();
    let fresh = ctx.into_fresh();
    let (keys, classes) = (&tables.keys, &tables.classes);
    platform.update_models(|models| {
        for (i, stats) in fresh.iter().enumerate() {
            let (key, class) = (&keys[i / classes.len()], &classes[i % classes.len()]);
            let on_tensor_cores = matches!(class, crate::ResourceClass::Gpu { .. })
                && math.applies(key.op, key.precision);
            if stats.samples > 0 && !on_tensor_cores {
                models.merge(key.clone(), class.clone(), stats);
            }
        }
    });
    failure
}
