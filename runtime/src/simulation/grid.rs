//! The event loop of a simulated run on one node or several (see the [module](super)
//! documentation): validate the nodes and messages, build each node's engine, run the virtual
//! clock, collect the traces.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;

use hetla_factorizations::{TaskGraph, TaskId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::links::{Copies, Links, Placed};
use super::model::{GridTrace, SimMessage, SimOptions, SimPlatform, SimRank};
use super::network::Network;
use super::sharing::{GpuSharing, Kernel, Shared};
use crate::data::{HOST, Handle};
use crate::engine::{Engine, Start};
use crate::link::LinkRate;
use crate::perfmodel::{KernelKey, MIN_SAMPLES, Stats};
use crate::prepare::{LinkEstimate, Tables};
use crate::run::{RunOptions, RunStep, TaskFailure, WriteBack};
use crate::schedulers::SchedContext;
use crate::sync::lock;
use crate::trace::{TaskEvent, Trace};
use crate::workers::{ResourceKind, WorkerId};
use crate::{Error, Result};

/// Simulates a distributed run: each of `ranks` runs its tasks on its own platform with its own
/// scheduler and data registry (the engine of a single-node simulation, one per node), and each of
/// `messages` leaves its sender's host memory once its writer has ended (after a copy back from a
/// GPU when the tile is only there) and crosses `network`, after which its readers may run. All
/// nodes share one virtual clock. One rank and no message is [`simulate`](super::simulate).
/// `network` is needed when there are messages.
pub fn simulate_grid(
    ranks: &[SimRank<'_>],
    messages: &[SimMessage],
    network: Option<LinkRate>,
    options: &SimOptions,
) -> Result<GridTrace> {
    let network = validate(ranks, messages, network, options)?;
    let nodes = Nodes(ranks.len());
    let exchange = Exchange::new(ranks, messages);
    let run_options: Vec<RunOptions> = ranks
        .iter()
        .map(|r| {
            let mut run = options.run.clone();
            if let Some(p) = r.priorities {
                run.priorities = Some(p.clone());
            }
            run
        })
        .collect();
    let mut contexts = Vec::with_capacity(ranks.len());
    let mut tables = Vec::with_capacity(ranks.len());
    for (i, (rank, run)) in ranks.iter().zip(&run_options).enumerate() {
        let (ctx, table) = prepare_rank(rank, run).map_err(|e| nodes.error(i, e))?;
        contexts.push(ctx);
        tables.push(table);
    }
    let sent = sent_handles(ranks, messages, &tables)?;
    let copy_seconds: Vec<_> = ranks
        .iter()
        .map(|r| {
            let platform = r.platform;
            move |from, to, bytes| platform.copy_seconds(from, to, bytes)
        })
        .collect();
    let estimates: Vec<_> = ranks
        .iter()
        .zip(&tables)
        .zip(&copy_seconds)
        .map(|((r, t), c)| t.estimate(&r.platform.workers, c))
        .collect();
    let build = Build {
        ranks,
        tables: &tables,
        estimates: &estimates,
        options: &run_options,
        outside: &exchange.outside,
        nodes,
    };
    let mut runs = build.runs(contexts)?;
    let mut net = Network {
        rate: network,
        sending: (0..ranks.len()).map(|_| Default::default()).collect(),
        receiving: (0..ranks.len()).map(|_| Default::default()).collect(),
        events: Vec::new(),
    };
    let clock = Loop {
        messages,
        sends: &exchange.sends,
        initial: &exchange.initial,
        sent: &sent,
        options,
        nodes,
    };
    clock.run(&mut runs, &mut net)?;
    collect(runs, net, options, nodes)
}

/// How many nodes a run has: errors of a node name it when there are several.
#[derive(Clone, Copy)]
struct Nodes(usize);

impl Nodes {
    /// `error` of node `rank`, named when the run has several.
    fn error(self, rank: usize, error: Error) -> Error {
        if self.0 > 1 {
            Error::Rank {
                rank,
                source: Box::new(error),
            }
        } else {
            error
        }
    }
}

/// Checks the options, the network and the messages before anything is built; returns the network's
/// rate (an infinitely fast one when there is no message).
fn validate(
    ranks: &[SimRank<'_>],
    messages: &[SimMessage],
    network: Option<LinkRate>,
    options: &SimOptions,
) -> Result<LinkRate> {
    options.check()?;
    for rank in ranks {
        let streams = rank.platform.compute_streams;
        crate::devices::parse_streams(&streams.to_string()).map_err(|reason| {
            Error::InvalidOption {
                option: "compute_streams",
                reason,
            }
        })?;
    }
    let network = match (network, messages.is_empty()) {
        (Some(rate), _) => rate,
        (None, true) => LinkRate {
            latency_us: 0.0,
            gb_per_s: f64::INFINITY,
        },
        (None, false) => {
            return Err(Error::InvalidOption {
                option: "network",
                reason: "a distributed run with messages needs a network rate".into(),
            });
        }
    };
    if !(network.latency_us >= 0.0 && network.gb_per_s > 0.0) {
        return Err(Error::InvalidOption {
            option: "network",
            reason: format!(
                "latency {} us and bandwidth {} GB/s: the latency must be at least 0 and the bandwidth above 0",
                network.latency_us, network.gb_per_s
            ),
        });
    }
    let check = |m: &SimMessage| -> std::result::Result<(), String> {
        let tasks = |r: usize| ranks.get(r).map(|r| r.work.graph.len());
        let (Some(from_tasks), Some(to_tasks)) = (tasks(m.from), tasks(m.to)) else {
            return Err(format!("ranks {} and {} of {}", m.from, m.to, ranks.len()));
        };
        if m.from == m.to {
            return Err(format!("rank {} sends to itself", m.from));
        }
        if m.writer.is_some_and(|w| w.0 >= from_tasks) || m.readers.iter().any(|r| r.0 >= to_tasks)
        {
            return Err(format!(
                "a task beyond its rank's {from_tasks} or {to_tasks}"
            ));
        }
        Ok(())
    };
    for m in messages {
        check(m).map_err(|why| Error::Plan {
            reason: format!(
                "the message of tile ({}, {}) names {why}",
                m.tile.row, m.tile.col
            ),
        })?;
    }
    Ok(network)
}

/// Per rank and task: the inputs it awaits from other ranks, and the messages it sends; the
/// messages sent as the run starts.
struct Exchange {
    outside: Vec<Vec<usize>>,
    sends: Vec<Vec<Vec<usize>>>,
    initial: Vec<usize>,
}

impl Exchange {
    fn new(ranks: &[SimRank<'_>], messages: &[SimMessage]) -> Self {
        let mut outside: Vec<Vec<usize>> =
            ranks.iter().map(|r| vec![0; r.work.graph.len()]).collect();
        let mut sends: Vec<Vec<Vec<usize>>> = ranks
            .iter()
            .map(|r| vec![Vec::new(); r.work.graph.len()])
            .collect();
        let mut initial = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            for r in &m.readers {
                outside[m.to][r.0] += 1;
            }
            match m.writer {
                Some(w) => sends[m.from][w.0].push(i),
                None => initial.push(i),
            }
        }
        Self {
            outside,
            sends,
            initial,
        }
    }
}

/// The handle of each message's tile on its sender.
fn sent_handles(
    ranks: &[SimRank<'_>],
    messages: &[SimMessage],
    tables: &[Tables],
) -> Result<Vec<Handle>> {
    messages
        .iter()
        .map(|m| {
            let graph = ranks[m.from].work.graph;
            let Some(writer) = m.writer else {
                // The tile as the run found it: its handle from any task of the sender.
                let found = graph.ids().find_map(|t| {
                    let at = graph.task(t).accesses.iter().position(|a| a.tile == m.tile);
                    at.map(|i| tables[m.from].handles[t][i].0)
                });
                return found.ok_or_else(|| Error::Plan {
                    reason: format!(
                        "no task of rank {} accesses tile ({}, {}), which it sends as the run starts",
                        m.from, m.tile.row, m.tile.col
                    ),
                });
            };
            let accesses = &graph.task(writer).accesses;
            let Some(i) = accesses
                .iter()
                .position(|a| a.tile == m.tile && a.mode.writes())
            else {
                return Err(Error::Plan {
                    reason: format!(
                        "task {} of rank {} does not write tile ({}, {}), which it sends",
                        writer, m.from, m.tile.row, m.tile.col
                    ),
                });
            };
            Ok(tables[m.from].handles[writer][i].0)
        })
        .collect()
}

/// What building the nodes' engines needs: each node's tables, transfer estimates, options and
/// inputs from outside its run.
struct Build<'b, 'a> {
    ranks: &'b [SimRank<'a>],
    tables: &'b [Tables],
    estimates: &'b [LinkEstimate<'b>],
    options: &'b [RunOptions],
    outside: &'b [Vec<usize>],
    nodes: Nodes,
}

impl<'b> Build<'b, '_> {
    /// Each node's engine with its placed tiles and its first tasks pushed.
    fn runs(&self, contexts: Vec<SchedContext<'b>>) -> Result<Vec<RankRun<'b>>> {
        let mut runs = Vec::with_capacity(self.ranks.len());
        for (i, (rank, ctx)) in self.ranks.iter().zip(contexts).enumerate() {
            let table = &self.tables[i];
            let graph = rank.work.graph;
            let outside = &self.outside[i];
            let engine = Engine::new(
                graph,
                ctx,
                table,
                &self.estimates[i],
                &self.options[i],
                |t| outside[t.0],
            )
            .map_err(|e| self.nodes.error(i, run_error(graph, e)))?;
            let platform = rank.platform;
            let handles = lock(&table.data).len();
            let links = Links(Mutex::new(Copies::new(platform, handles)));
            if let Err(failure) = engine.place(&Placed) {
                let reason = match failure {
                    TaskFailure::Memory(no_room) => {
                        format!("the placed operands do not fit: {no_room}")
                    }
                    other => format!("{other:?}"),
                };
                let error = Error::InvalidOption {
                    option: "placement",
                    reason,
                };
                return Err(self.nodes.error(i, error));
            }
            engine.push_roots(&links);
            let streams = platform.compute_streams;
            let shared: Vec<Option<Shared>> = platform
                .workers
                .iter()
                .map(|w| (w.kind == ResourceKind::Gpu && streams > 1).then(Shared::default))
                .collect();
            let free = shared
                .iter()
                .map(|s| if s.is_some() { streams } else { 1 })
                .collect();
            let classes: Vec<_> = platform.workers.iter().map(|w| w.class.clone()).collect();
            let sharing = GpuSharing::new(streams, rank.work.keys, &classes, rank.work.duration);
            runs.push(RankRun {
                platform,
                graph,
                keys: rank.work.keys,
                tables: table,
                engine,
                links,
                free,
                held: vec![None; platform.workers.len()],
                shared,
                sharing,
                kernels: vec![
                    Kernel {
                        seconds: 0.0,
                        occupancy: 1.0,
                        urgent: false,
                    };
                    graph.len()
                ],
                versions: vec![0; graph.len()],
                events: Vec::with_capacity(graph.len()),
                last: 0.0,
            });
        }
        Ok(runs)
    }
}

/// The virtual clock of a run (see [`Loop::run`]).
struct Loop<'l> {
    messages: &'l [SimMessage],
    /// Per rank and task, the messages it sends when it ends.
    sends: &'l [Vec<Vec<usize>>],
    /// The messages sent as the run starts.
    initial: &'l [usize],
    /// The handle of each message's tile on its sender.
    sent: &'l [Handle],
    options: &'l SimOptions,
    nodes: Nodes,
}

impl Loop<'_> {
    /// Sends message `i` from its rank's `run` at `now`: it leaves from host memory (copied back
    /// first if only a GPU has it), and its arrival is queued.
    fn post(
        &self,
        i: usize,
        run: &RankRun<'_>,
        net: &mut Network,
        (now, queue, seq): (f64, &mut BinaryHeap<Reverse<Event>>, &mut u64),
    ) -> Result<()> {
        let m = &self.messages[i];
        let handle = self.sent[i];
        run.engine
            .with_data(&run.links, now, |d| d.prefetch(handle, HOST))
            .map_err(|e| self.nodes.error(m.from, Error::Kernel(e)))?;
        let ready = lock(&run.links.0).arrival[handle][HOST.0].max(now);
        let bytes = lock(&run.tables.data).bytes(handle);
        let time = net.send(m.tile, m.from, m.to, bytes, ready);
        queue.push(Reverse(Event {
            time,
            seq: *seq,
            rank: m.to,
            what: Happening::Arrival { message: i },
        }));
        *seq += 1;
        Ok(())
    }

    /// On the node of the last event (on every node at first), every idle worker pops and starts;
    /// then time jumps to the next event: a task end, after which its tile leaves for the nodes
    /// that read it, or a message's arrival, which releases its readers.
    fn run(&self, runs: &mut [RankRun<'_>], net: &mut Network) -> Result<()> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.options.seed);
        let mut queue: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut touched: Vec<usize> = (0..runs.len()).collect();
        let mut now = 0.0f64;
        for &i in self.initial {
            let from = self.messages[i].from;
            self.post(i, &runs[from], net, (now, &mut queue, &mut seq))?;
        }
        loop {
            for r in touched.drain(..) {
                let run = &mut runs[r];
                let clock = Clock {
                    now,
                    noise: self.options.noise,
                    rng: &mut rng,
                    queue: &mut queue,
                    seq: &mut seq,
                };
                run.start_idle(r, clock);
                if run.engine.stopped()
                    && let Some(failure) = run.engine.failure()
                {
                    return Err(self.nodes.error(r, run_error(run.graph, failure)));
                }
            }
            let Some(Reverse(event)) = queue.pop() else {
                return Ok(());
            };
            now = event.time;
            let run = &mut runs[event.rank];
            match event.what {
                Happening::End {
                    task,
                    worker,
                    version,
                } => {
                    if version != run.versions[task.0] {
                        // Moved since by a kernel that began or ended beside it.
                        continue;
                    }
                    if let Some(gpu) = run.shared[worker].as_mut() {
                        let (began, ends) = gpu.end(task, now);
                        run.events.push(TaskEvent {
                            task,
                            op: run.graph.task(task).op,
                            worker,
                            start: began,
                            end: now,
                            flops: run.graph.task(task).flops,
                        });
                        run.reschedule(event.rank, worker, ends, (&mut queue, &mut seq));
                    }
                    run.free[worker] += 1;
                    run.last = now;
                    run.engine.finish(&run.links, task, worker, now, Ok(()));
                    for &i in &self.sends[event.rank][task.0] {
                        self.post(i, run, net, (now, &mut queue, &mut seq))?;
                    }
                }
                Happening::Begin { task, worker } => {
                    let kernel = run.kernels[task.0];
                    let gpu = run.shared[worker]
                        .as_mut()
                        .expect("a begin is a shared GPU's");
                    let ends = gpu.begin(task, now, kernel);
                    run.reschedule(event.rank, worker, ends, (&mut queue, &mut seq));
                    continue;
                }
                Happening::Arrival { message } => {
                    for &reader in &self.messages[message].readers {
                        run.engine
                            .arrived(&run.links, reader, now)
                            .map_err(|reason| {
                                self.nodes.error(event.rank, Error::Plan { reason })
                            })?;
                    }
                }
            }
            touched.push(event.rank);
        }
    }
}

/// Each node's end (its failure, tasks left unrun, the flush of its devices) and the traces, every
/// one with the whole run's makespan.
fn collect(
    runs: Vec<RankRun<'_>>,
    mut net: Network,
    options: &SimOptions,
    nodes: Nodes,
) -> Result<GridTrace> {
    let mut traces = Vec::with_capacity(runs.len());
    let mut makespan = net.events.iter().map(|e| e.end).fold(0.0, f64::max);
    for (r, run) in runs.into_iter().enumerate() {
        if let Some(failure) = run.engine.failure() {
            return Err(nodes.error(r, run_error(run.graph, failure)));
        }
        let left = run.engine.unfinished();
        if left > 0 {
            let error = Error::Stalled {
                policy: options.run.policy_name(),
                left,
                tasks: run.graph.len(),
            };
            return Err(nodes.error(r, error));
        }
        // A resident run's clock stops before its flush, which it neither times nor traces.
        let before_flush = lock(&run.links.0).events.len();
        run.engine.flush(&run.links, run.last);
        let mut copies = run.links.0.into_inner().unwrap_or_else(|e| e.into_inner());
        if options.run.write_back == WriteBack::Resident {
            copies.events.truncate(before_flush);
        }
        copies.events.sort_by(|a, b| a.start.total_cmp(&b.start));
        makespan = copies
            .events
            .iter()
            .map(|e| e.end)
            .fold(run.last, f64::max)
            .max(makespan);
        let mut trace = Trace::new(run.platform.workers.clone(), run.events, 0.0);
        trace.transfers = copies.events;
        traces.push(trace);
    }
    for trace in &mut traces {
        trace.makespan = makespan;
    }
    net.events.sort_by(|a, b| a.start.total_cmp(&b.start));
    Ok(GridTrace {
        ranks: traces,
        messages: net.events,
        makespan,
    })
}

/// What happens at an event of the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Happening {
    /// A task ends on a worker, unless its end has moved since (a later `version`).
    End {
        task: TaskId,
        worker: WorkerId,
        version: u64,
    },
    /// A task's kernel begins on a GPU of several streams (its inputs have arrived).
    Begin { task: TaskId, worker: WorkerId },
    /// A message arrives.
    Arrival { message: usize },
}

/// An event of the virtual clock: time, then the order it was scheduled in.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Event {
    time: f64,
    seq: u64,
    rank: usize,
    what: Happening,
}

impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.seq.cmp(&other.seq))
    }
}

/// One node's run in progress.
struct RankRun<'a> {
    platform: &'a SimPlatform,
    graph: &'a TaskGraph,
    keys: &'a [KernelKey],
    tables: &'a Tables,
    engine: Engine<'a>,
    links: Links<'a>,
    /// Per worker, how many more tasks it may start now.
    free: Vec<usize>,
    /// Per worker, a task it popped that waits for room beside its running kernels.
    held: Vec<Option<TaskId>>,
    /// Per worker, its running kernels when it is a GPU of several streams.
    shared: Vec<Option<Shared>>,
    sharing: GpuSharing,
    /// Per task on a shared GPU: its kernel as it begins.
    kernels: Vec<Kernel>,
    /// Per task, the version of its latest end event (older ones are stale).
    versions: Vec<u64>,
    events: Vec<TaskEvent>,
    /// The end of its last task.
    last: f64,
}

/// The virtual clock's state a node's workers start tasks under.
struct Clock<'c> {
    now: f64,
    noise: f64,
    rng: &'c mut ChaCha8Rng,
    queue: &'c mut BinaryHeap<Reverse<Event>>,
    seq: &'c mut u64,
}

impl RankRun<'_> {
    /// Every worker of rank `rank` with a free slot (a CPU cluster has one, a GPU one per compute
    /// stream), in index order, pops tasks and starts them now: a task begins once the worker's
    /// overhead and its copies are done, and lasts its duration (with noise); on a GPU of several
    /// streams its end depends on the kernels beside it (see [`Shared`]), so its begin is an event.
    fn start_idle(&mut self, rank: usize, clock: Clock<'_>) {
        let now = clock.now;
        let workers = &self.platform.workers;
        for w in self.engine.ctx().worker_ids() {
            while self.free[w] > 0 {
                let busy = self.free[w] < self.slots(w);
                let Some(task) = self.held[w].take().or_else(|| self.engine.pop(w, now)) else {
                    break;
                };
                match self.engine.start(&self.links, task, w, now, busy) {
                    Start::Running => {}
                    // It does not fit beside the GPU's running kernels: it waits for one to end.
                    Start::Later => {
                        self.held[w] = Some(task);
                        break;
                    }
                    Start::Stopped => return,
                }
                let overhead = match workers[w].kind {
                    ResourceKind::Cpu => self.platform.cpu_task_overhead,
                    ResourceKind::Gpu => self.platform.gpu_launch,
                };
                let node = workers[w].node;
                let inputs = {
                    let copies = lock(&self.links.0);
                    self.tables.handles[task]
                        .iter()
                        .map(|&(h, _)| copies.arrival[h][node.0])
                        .fold(now + overhead, f64::max)
                };
                let mean = self.engine.ctx().estimate(task, w).seconds();
                let factor = if clock.noise > 0.0 {
                    1.0 + clock.noise * (2.0 * clock.rng.random::<f64>() - 1.0)
                } else {
                    1.0
                };
                self.free[w] -= 1;
                let (what, time) = if self.shared[w].is_some() {
                    let key = &self.keys[task.0];
                    self.kernels[task.0] = Kernel {
                        seconds: mean * factor,
                        occupancy: self.sharing.occupancy(key, &workers[w].class, mean),
                        urgent: key.op.on_critical_path(),
                    };
                    (Happening::Begin { task, worker: w }, inputs)
                } else {
                    self.events.push(TaskEvent {
                        task,
                        op: self.graph.task(task).op,
                        worker: w,
                        start: inputs,
                        end: inputs + mean * factor,
                        flops: self.graph.task(task).flops,
                    });
                    let end = Happening::End {
                        task,
                        worker: w,
                        version: 0,
                    };
                    (end, inputs + mean * factor)
                };
                clock.queue.push(Reverse(Event {
                    time,
                    seq: *clock.seq,
                    rank,
                    what,
                }));
                *clock.seq += 1;
            }
        }
    }

    /// The tasks worker `w` runs at once at most.
    fn slots(&self, w: WorkerId) -> usize {
        if self.shared[w].is_some() {
            self.sharing.streams()
        } else {
            1
        }
    }

    /// Queues the ends `ends` of the kernels running on shared GPU `worker`, each superseding the
    /// kernel's earlier end (a stalled kernel's, `None`, waits for the next change).
    fn reschedule(
        &mut self,
        rank: usize,
        worker: WorkerId,
        ends: Vec<(TaskId, Option<f64>)>,
        (queue, seq): (&mut BinaryHeap<Reverse<Event>>, &mut u64),
    ) {
        for (task, time) in ends {
            self.versions[task.0] += 1;
            // Stalled behind urgent kernels: its end comes with the next change.
            let Some(time) = time else {
                continue;
            };
            queue.push(Reverse(Event {
                time,
                seq: *seq,
                rank,
                what: Happening::End {
                    task,
                    worker,
                    version: self.versions[task.0],
                },
            }));
            *seq += 1;
        }
    }
}

/// Prepares a rank's scheduler context and tables, and checks that every kernel has a duration on
/// every class that may run it.
fn prepare_rank<'a>(rank: &SimRank<'a>, run: &'a RunOptions) -> Result<(SchedContext<'a>, Tables)> {
    let work = &rank.work;
    let graph = work.graph;
    let workers = &rank.platform.workers;
    let n = graph.len();
    if work.keys.len() != n {
        return Err(Error::Plan {
            reason: format!("{} kernel keys for {n} tasks", work.keys.len()),
        });
    }
    let (ctx, tables) = crate::prepare::prepare(
        workers,
        graph,
        work.keys.iter().cloned(),
        work.tile_bytes,
        run,
        |key, class| match (work.duration)(key, class) {
            Some(mean) => Stats {
                samples: MIN_SAMPLES,
                mean,
                m2: 0.0,
            },
            None => Stats::default(),
        },
        rank.platform.capacities.clone(),
    )
    .map_err(|e| run_error(graph, e))?;
    let kinds: Vec<_> = workers.iter().map(|w| w.kind).collect();
    for key in &tables.keys {
        let allowed = run.allowed_kinds(key.op, &kinds);
        for worker in (workers.iter()).filter(|w| allowed.is_none_or(|k| k.contains(&w.kind))) {
            if (work.duration)(key, &worker.class).is_none() {
                return Err(Error::InvalidOption {
                    option: "platform",
                    reason: format!(
                        "no rate for {} on {:?} tiles on {}; restrict the operation to other resources or add the rate",
                        key.op, key.shapes, worker.class
                    ),
                });
            }
        }
    }
    Ok((ctx, tables))
}

/// A run's failure as the runtime's error.
fn run_error(graph: &TaskGraph, (step, failure): (RunStep, TaskFailure)) -> Error {
    match failure {
        TaskFailure::Kernel(error) => Error::Kernel(error),
        TaskFailure::Memory(no_room) => Error::Memory(no_room),
        TaskFailure::NoWorker => {
            let task = match step {
                RunStep::Task(t) => t,
                _ => TaskId(0),
            };
            Error::NoWorker {
                task,
                op: graph.task(task).op.to_string(),
            }
        }
        TaskFailure::Plan(reason) => Error::Plan { reason },
        // No kernel runs in a simulation; a failure kinds added later reads as a plan's.
        other => Error::Plan {
            reason: format!("{other:?}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use hetla_factorizations::{MatrixId, TileRef};

    use super::*;
    use crate::perfmodel::ResourceClass;
    use crate::simulation::SimWork;
    use crate::workers::WorkerInfo;

    /// A node with one single-core CPU cluster.
    fn one_core() -> SimPlatform {
        SimPlatform::cpus(vec![WorkerInfo::cpu_cluster(0, vec![0])])
    }

    #[test]
    fn a_message_leaves_when_its_writer_ends_and_releases_its_readers_when_it_arrives() {
        use hetla_factorizations::{Access, Mode, Op};
        let a = TileRef::new(MatrixId(0), 0, 0);
        let b = TileRef::new(MatrixId(0), 1, 0);
        let access = |tile, mode| Access { tile, mode };
        // Rank 0 writes tile a (1 s); rank 1 reads it to write b (1 s).
        let mut first = TaskGraph::new();
        first.add_task(Op::Potrf, vec![access(a, Mode::ReadWrite)], 1.0);
        let mut second = TaskGraph::new();
        second.add_task(
            Op::Trsm,
            vec![access(a, Mode::Read), access(b, Mode::ReadWrite)],
            1.0,
        );
        let platform = one_core();
        let keys0 = [KernelKey::square(Op::Potrf, 10)];
        let keys1 = [KernelKey::square(Op::Trsm, 10)];
        let bytes = |_: TileRef| 1_000_000_000;
        let duration = |_: &KernelKey, _: &ResourceClass| Some(1.0);
        let rank = |graph, keys| SimRank {
            platform: &platform,
            work: SimWork {
                graph,
                keys,
                tile_bytes: &bytes,
                duration: &duration,
            },
            priorities: None,
        };
        let ranks = [rank(&first, &keys0[..]), rank(&second, &keys1[..])];
        let message = SimMessage {
            tile: a,
            from: 0,
            writer: Some(TaskId(0)),
            to: 1,
            readers: vec![TaskId(0)],
        };
        // 1 GB at 2 GB/s after 100 us: 0.5001 s.
        let network = LinkRate {
            latency_us: 100.0,
            gb_per_s: 2.0,
        };
        let run = simulate_grid(
            &ranks,
            std::slice::from_ref(&message),
            Some(network),
            &SimOptions::default(),
        )
        .unwrap();
        let (sent, reader) = (run.messages[0], &run.ranks[1].tasks[0]);
        assert_eq!((sent.start, sent.bytes), (1.0, 1_000_000_000));
        assert!((sent.end - 1.5001).abs() < 1e-12);
        assert_eq!(reader.start, sent.end);
        assert!((run.makespan - 2.5001).abs() < 1e-12);
        // A message without a network, or whose sender does not write its tile, is refused.
        let none = simulate_grid(
            &ranks,
            std::slice::from_ref(&message),
            None,
            &SimOptions::default(),
        );
        assert!(matches!(
            none,
            Err(Error::InvalidOption {
                option: "network",
                ..
            })
        ));
        let wrong = SimMessage { tile: b, ..message };
        let err =
            simulate_grid(&ranks, &[wrong], Some(network), &SimOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("does not write tile (1, 0)"),
            "{err}"
        );
        // The tile as the run found it leaves at once, before its sender's task ends.
        let initial = SimMessage {
            tile: a,
            from: 0,
            writer: None,
            to: 1,
            readers: vec![TaskId(0)],
        };
        let run = simulate_grid(&ranks, &[initial], Some(network), &SimOptions::default()).unwrap();
        let (sent, reader) = (run.messages[0], &run.ranks[1].tasks[0]);
        assert_eq!(sent.start, 0.0);
        assert!((reader.start - 0.5001).abs() < 1e-12);
        // Without the message, nothing holds the reader: it starts at once.
        let alone = simulate_grid(&ranks, &[], None, &SimOptions::default()).unwrap();
        assert_eq!(alone.ranks[1].tasks[0].start, 0.0);
    }

    /// One GPU of `streams` compute streams beside no CPU, with instant copies.
    fn one_gpu(streams: usize) -> SimPlatform {
        let instant = LinkRate {
            latency_us: 0.0,
            gb_per_s: 1.0,
        };
        SimPlatform {
            workers: vec![WorkerInfo {
                name: "gpu0".into(),
                kind: ResourceKind::Gpu,
                class: ResourceClass::Gpu { name: "g".into() },
                node: crate::data::MemoryNode(1),
                cpus: vec![0],
            }],
            capacities: vec![None, None],
            link: Some(crate::link::LinkModel {
                h2d: instant,
                d2h: instant,
                p2p: None,
                host_shared_by: 1,
            }),
            cpu_task_overhead: 0.0,
            gpu_launch: 0.0,
            staging: None,
            compute_streams: streams,
            locking: None,
        }
    }

    #[test]
    fn a_gpu_of_several_streams_runs_kernels_at_once_sharing_its_rate() {
        use hetla_factorizations::{Access, Mode, Op};
        // Four independent tasks on four tiles: two POTRFs at a quarter of the GPU's full rate
        // (the GEMM's), then two GEMMs that fill it, lasting 1 s alone.
        let mut graph = TaskGraph::new();
        let ops = [Op::Potrf, Op::Potrf, Op::GemmNt, Op::GemmNt];
        for (i, &op) in ops.iter().enumerate() {
            let tile = TileRef::new(MatrixId(0), i, 0);
            graph.add_task(
                op,
                vec![Access {
                    tile,
                    mode: Mode::ReadWrite,
                }],
                1.0,
            );
        }
        let keys: Vec<KernelKey> = ops.iter().map(|&op| KernelKey::square(op, 64)).collect();
        let gemm_rate = keys[2].flops();
        let duration = move |key: &KernelKey, _: &ResourceClass| {
            Some(if key.op == Op::Potrf {
                // Lasts 1 s at a quarter of the GEMM's rate.
                key.flops() / (gemm_rate / 4.0)
            } else {
                1.0
            })
        };
        let bytes = |_: TileRef| 0;
        let work = || SimWork {
            graph: &graph,
            keys: &keys,
            tile_bytes: &bytes,
            duration: &duration,
        };
        let run = |streams: usize| {
            let platform = one_gpu(streams);
            let options = SimOptions {
                run: RunOptions {
                    scheduler: crate::schedulers::SchedulerKind::Eager,
                    ..Default::default()
                },
                ..Default::default()
            };
            let rank = SimRank {
                platform: &platform,
                work: work(),
                priorities: None,
            };
            let mut run = simulate_grid(&[rank], &[], None, &options).unwrap();
            run.ranks.remove(0)
        };
        let potrf = duration(&keys[0], &ResourceClass::Gpu { name: "g".into() }).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
        // One stream: back to back.
        let one = run(1);
        assert!(close(one.makespan, 2.0 * potrf + 2.0), "{}", one.makespan);
        // Two streams: the POTRFs (a quarter each) together in one POTRF's time; the GEMMs
        // together at half speed, in two GEMMs' time.
        let two = run(2);
        assert!(
            close(two.makespan, potrf + 2.0),
            "{} vs {}",
            two.makespan,
            potrf + 2.0
        );
        let mut ends: Vec<f64> = two.tasks.iter().map(|e| e.end).collect();
        ends.sort_by(f64::total_cmp);
        assert!(close(ends[0], potrf) && close(ends[1], potrf), "{ends:?}");
        assert!(
            close(ends[2], potrf + 2.0) && close(ends[3], potrf + 2.0),
            "{ends:?}"
        );
        // Four streams run all four at once: the POTRFs (panel work, served first) at their own
        // rate, the GEMMs sharing the half they leave, then the whole GPU.
        let four = run(4);
        assert!(four.makespan <= two.makespan + 1e-9, "{}", four.makespan);
        assert!(four.tasks.iter().all(|e| e.start == 0.0));
        // A launch latency delays every kernel: back to back on one stream, each 0.25 s later.
        let launched = {
            let platform = SimPlatform {
                gpu_launch: 0.25,
                ..one_gpu(1)
            };
            let rank = SimRank {
                platform: &platform,
                work: work(),
                priorities: None,
            };
            let options = SimOptions::default();
            simulate_grid(&[rank], &[], None, &options)
                .unwrap()
                .makespan
        };
        assert!(close(launched, one.makespan + 4.0 * 0.25), "{launched}");
        // Zero streams is refused.
        let platform = one_gpu(0);
        let rank = SimRank {
            platform: &platform,
            work: work(),
            priorities: None,
        };
        let err = simulate_grid(&[rank], &[], None, &SimOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("compute streams from 1 to 16"),
            "{err}"
        );
    }
}
