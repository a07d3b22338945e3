//! The simulated executor: the [engine](crate::engine) on a virtual clock, with durations
//! and link costs from a platform model (StarPU-SimGrid style).
//!
//! Everything that decides runs as in a real run, because it is the same code:
//! [`crate::prepare`] prepares the same scheduler context (priorities, restrictions, model
//! table), and the engine makes the same `push`/`pop`/`done` calls on the same scheduler
//! objects and the same [`DataRegistry`] operations (replicas, prefetches, evictions,
//! write-backs). This file holds only what is virtual: the clock, and the links on which
//! the engine's copies are booked ([`Carrier`]).
//!
//! - **Events.** The only events are task ends, processed in time order (ties by the order
//!   they were scheduled, so a run is a pure function of its inputs and seed). After each,
//!   the finished task's successors whose last predecessor it was are pushed, and every
//!   idle worker, in index order, pops.
//! - **Tasks.** A popped task pins its tiles on the worker's memory node; it starts when
//!   the worker is free (plus the model's per-task runtime overhead on CPU workers, as
//!   measured by `hetla calibrate --output`) and every copy it needs has arrived, and lasts the model's duration
//!   for its (kernel, class), times `1 + noise * u` with `u` uniform in [-1, 1) from a
//!   ChaCha8 stream seeded by [`SimOptions::seed`] (mean-preserving; 0 noise by default).
//! - **Schedulers' knowledge.** The scheduler's table holds the model's duration of every
//!   (kernel, class) as a calibrated mean: a simulated run schedules like a real run whose
//!   performance models are calibrated and exact. Durations are not recorded back.
//! - **Copies.** A copy takes `latency + bytes / bandwidth` on its link direction (each GPU
//!   has a host-to-device and a device-to-host link, or shares them with its group when
//!   the model says GPUs share host links; GPU-to-GPU copies go through the switch when
//!   the model has peer links, else are staged: device to host, then host to device). A
//!   copy to a GPU takes the route that delivers it first (see [`Copies::schedule`]).
//!   *Contention rule:* one copy at a time per link direction and per switch port; a copy
//!   takes the earliest interval, after its request and its source replica's arrival, in
//!   which all it uses is free (copies requested later may fill gaps left earlier).
//! - **Prefetch.** When the scheduler binds a pushed task to a worker at push time (MCT),
//!   the task's tiles are prefetched to that worker's node at once; MCT's completion
//!   estimate includes the copies still missing on each candidate worker's node.
//! - **Static plans** ([`crate::planned`]): after a worker starts a task, the inputs of
//!   its next two planned tasks that are safe to copy are prefetched; the tiles a plan
//!   releases after a task are dropped (written back if last) when it ends. Tiles placed
//!   on a node before the run (`RunOptions::placement`) are there at time 0.
//! - **End.** After the last task, tiles whose only valid copy is on a GPU are written
//!   back to host memory; the makespan includes those copies (the matrix starts and ends
//!   in host memory, as in a real run).
//!
//! - **Several nodes** ([`simulate_grid`], a distributed run as `mpirun` starts it): each
//!   node (rank) has its own platform, scheduler, data registry and links, the engine of
//!   one node once per node, and all share the clock; [`simulate`] is its case of one node
//!   and no message. A task that reads a remote tile waits for it as an input from
//!   outside its node's run (as the real distributed executor's tasks do). When the task
//!   that makes a tile final ends, the tile leaves its node's host memory (copied back
//!   first if only a GPU holds it) once per destination ([`SimMessage`]), and its arrival
//!   releases the readers there; it then lives in that node's host memory, from where the
//!   registry copies it to a GPU like any tile. *Network rule:* a message takes `latency +
//!   bytes / bandwidth` and occupies its sender's NIC (sending side) and its receiver's
//!   NIC (receiving side), one message at a time on each, earliest free interval as for
//!   copies; every pair of nodes has a link of that rate, which only its sender's NIC
//!   feeds, so the NICs are what messages contend for (a non-blocking switch). After
//!   each event, only the node it concerns pops.
//!
//! The result is a [`Trace`] like a real run's (one per node for several): Gantt charts,
//! Chrome traces and summaries work unchanged.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

use hetla_factorizations::{TaskGraph, TaskId, TileRef};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use hetla_kernels::KernelError;

use crate::data::{DataRegistry, HOST, MemoryNode, Step, Transfer};
use crate::engine::{Carrier, Engine, Start};
use crate::execute::{RunOptions, RunStep, TaskFailure};
use crate::inflight::Deferred;
use crate::link::{Hop, LinkModel, LinkRate};
use crate::perfmodel::{KernelKey, MIN_SAMPLES, ResourceClass, Stats};
use crate::platform::WorkerId;
use crate::platform::{ResourceKind, WorkerInfo};
use crate::prepare::Tables;
use crate::trace::{TaskEvent, Trace, TransferEvent};
use crate::{Error, Result, lock};

/// A modelled machine's workers, memory nodes and links, as a simulated run sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPlatform {
    /// The workers: CPU clusters on the host node, then one per GPU on its own node.
    pub workers: Vec<WorkerInfo>,
    /// Capacity of each memory node in bytes (`None`: unlimited; node 0 is the host).
    pub capacities: Vec<Option<usize>>,
    /// The host-GPU links (`None` without GPUs).
    pub link: Option<LinkModel>,
    /// Seconds a CPU worker spends between two tasks (the runtime's own work).
    pub cpu_task_overhead: f64,
}

impl SimPlatform {
    /// Seconds one copy of `bytes` from `from` to `to` takes on an idle link (a staged
    /// GPU-to-GPU copy counts both hops).
    pub fn copy_seconds(&self, from: MemoryNode, to: MemoryNode, bytes: usize) -> f64 {
        match self.link {
            Some(link) => crate::link::copy_seconds(|_| link, from, to, bytes),
            None => 0.0,
        }
    }

    /// Whether GPUs copy to each other directly (through a switch).
    fn peer_links(&self) -> bool {
        self.link.is_some_and(|l| l.p2p.is_some())
    }

    /// The GPUs' memory nodes.
    fn gpu_nodes(&self) -> impl Iterator<Item = MemoryNode> {
        (1..self.capacities.len()).map(MemoryNode)
    }

    /// The node whose host link `node` uses: the first GPU of its group when GPUs share
    /// host links ([`LinkModel::host_shared_by`]), itself otherwise.
    fn host_link_of(&self, node: MemoryNode) -> MemoryNode {
        if node == HOST {
            return HOST;
        }
        let shared = self.link.map_or(1, |l| l.host_shared_by.max(1));
        MemoryNode(1 + (node.0 - 1) / shared * shared)
    }

    /// The link directions a copy uses (at most two), each with its rate.
    fn hops(&self, from: MemoryNode, to: MemoryNode) -> [Option<Hop>; 2] {
        match self.link {
            Some(link) => crate::link::hops(|_| link, from, to),
            None => [None, None],
        }
    }
}

/// A copy's hops, each with when it starts and ends.
type Route = Vec<(Hop, f64, f64)>;

/// What a simulated run executes: a task graph, each task's kernel, tile sizes in bytes,
/// and the duration of a kernel on a class (`None`: the class has no rate for it).
#[derive(Clone, Copy)]
pub struct SimWork<'a> {
    /// The tasks and their dependencies.
    pub graph: &'a TaskGraph,
    /// Kernel of each task.
    pub keys: &'a [KernelKey],
    /// Bytes of a tile.
    pub tile_bytes: &'a dyn Fn(TileRef) -> usize,
    /// Seconds a kernel takes on a class.
    pub duration: &'a dyn Fn(&KernelKey, &ResourceClass) -> Option<f64>,
}

/// Options of a simulated run.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Scheduler and restrictions, as for a real run.
    pub run: RunOptions,
    /// Seed of the duration noise.
    pub seed: u64,
    /// Relative amplitude of the duration noise (0: every task lasts its model duration).
    pub noise: f64,
}

impl SimOptions {
    /// Checks the noise amplitude: in [0, 1), so that durations stay positive.
    pub fn check(&self) -> Result<()> {
        if (0.0..1.0).contains(&self.noise) {
            Ok(())
        } else {
            Err(Error::InvalidOption {
                option: "noise",
                reason: format!(
                    "{} is not in [0, 1): durations must stay positive",
                    self.noise
                ),
            })
        }
    }
}

/// What a copy occupies while it runs, one copy at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Resource {
    /// A link direction between two nodes; a GPU behind a shared host link is named by
    /// the first GPU of its group.
    Link(MemoryNode, MemoryNode),
    /// A GPU's sending port on the switch.
    Send(MemoryNode),
    /// A GPU's receiving port on the switch.
    Receive(MemoryNode),
}

/// The intervals a resource is busy, in time order, disjoint.
#[derive(Debug, Default)]
struct Busy(Vec<(f64, f64)>);

impl Busy {
    /// The end of the first busy interval that overlaps `[start, start + seconds)`.
    fn conflict(&self, start: f64, seconds: f64) -> Option<f64> {
        let i = self.0.partition_point(|&(_, end)| end <= start);
        self.0
            .get(i)
            .filter(|&&(begin, _)| begin < start + seconds)
            .map(|&(_, end)| end)
    }

    fn insert(&mut self, start: f64, end: f64) {
        let i = self.0.partition_point(|&(begin, _)| begin < start);
        self.0.insert(i, (start, end));
    }
}

/// The links' state: when each direction is free, and when each replica arrives.
///
/// A copy to a GPU comes from whichever node holding a valid replica would deliver it
/// first (PARALiA's ETA routing): the host over the GPU's PCIe link, or another GPU over a
/// peer link when the model has one, counting when that replica arrives there and when the
/// links are free. Peer copies go through a switch (NVSwitch): each GPU has one sending
/// and one receiving port, shared by all its peer copies.
struct Copies<'a> {
    platform: &'a SimPlatform,
    /// When each resource is busy.
    busy: HashMap<Resource, Busy>,
    /// `arrival[handle][node]`: when the replica there became (or becomes) usable.
    arrival: Vec<Vec<f64>>,
    events: Vec<TransferEvent>,
}

impl Copies<'_> {
    /// When a copy of `bytes` whose source replica is usable at `ready` would start and end
    /// on each of `hops`, in order.
    fn plan(&self, hops: impl IntoIterator<Item = Hop>, bytes: usize, mut ready: f64) -> Route {
        let mut route = Vec::with_capacity(2);
        for hop in hops {
            let seconds = hop.2.seconds(bytes);
            let start = self.earliest(hop, ready, seconds);
            let end = start + seconds;
            route.push((hop, start, end));
            ready = end;
        }
        route
    }

    /// The resources a hop occupies: the sending and receiving ports of two GPUs behind
    /// the switch, or a host link direction (shared by a group of GPUs when the model says
    /// so).
    fn resources(&self, (from, to, _): Hop) -> [Resource; 2] {
        if from != HOST && to != HOST && self.platform.peer_links() {
            [Resource::Send(from), Resource::Receive(to)]
        } else {
            let link = Resource::Link(
                self.platform.host_link_of(from),
                self.platform.host_link_of(to),
            );
            [link, link]
        }
    }

    /// The earliest start from `ready` on at which a hop's resources are all free for
    /// `seconds`.
    fn earliest(&self, hop: Hop, ready: f64, seconds: f64) -> f64 {
        let busy: Vec<&Busy> = self
            .resources(hop)
            .iter()
            .filter_map(|r| self.busy.get(r))
            .collect();
        let mut start = ready;
        while let Some(end) = busy.iter().find_map(|b| b.conflict(start, seconds)) {
            start = end;
        }
        start
    }

    /// Schedules `copy`, requested at `at`, under the contention rule, by the route that
    /// delivers it first (PARALiA's ETA routing); write-backs to the host keep their
    /// source and route. With peer links, a copy to a GPU
    /// - comes from another GPU that holds (or is receiving) the tile when there is one,
    ///   the one whose copy arrives first: the host sends each tile once, and its links,
    ///   the scarce ones, stay free for what only it has;
    /// - otherwise comes from the host over the GPU's own host link or through another
    ///   GPU's host link and then the switch (one hop, as PARALiA's routing allows), so
    ///   that fetches spread over every host link. The intermediate GPU only stages the
    ///   tile: it keeps no replica.
    fn schedule(&mut self, copy: Transfer, at: f64, holders: &[MemoryNode]) {
        let arrives = |route: &Route| route.last().map_or(at, |h| h.2);
        let ready = |from: MemoryNode| at.max(self.arrival[copy.handle][from.0]);
        let direct = |this: &Self, from: MemoryNode| {
            let hops = this.platform.hops(from, copy.to).into_iter().flatten();
            this.plan(hops, copy.bytes, ready(from))
        };
        let mut best = direct(self, copy.from);
        if copy.to != HOST
            && let Some(link) = self.platform.link
            && let Some(p2p) = link.p2p
        {
            let to = copy.to;
            let mut candidates: Vec<Route> = holders
                .iter()
                .filter(|&&n| n != to && n != HOST)
                .map(|&from| direct(self, from))
                .collect();
            if candidates.is_empty() && copy.from == HOST {
                candidates.extend(self.platform.gpu_nodes().filter(|&m| m != to).map(|mid| {
                    let hops = [(HOST, mid, link.h2d), (mid, to, p2p)];
                    self.plan(hops, copy.bytes, ready(HOST))
                }));
                candidates.push(best.clone());
            }
            if let Some(first) = candidates
                .into_iter()
                .min_by(|a, b| arrives(a).total_cmp(&arrives(b)))
            {
                best = first;
            }
        }
        let route = best;
        for &(hop, start, end) in &route {
            let [first, second] = self.resources(hop);
            self.busy.entry(first).or_default().insert(start, end);
            if second != first {
                self.busy.entry(second).or_default().insert(start, end);
            }
            let (from, to, _) = hop;
            self.events.push(TransferEvent {
                transfer: Transfer { from, to, ..copy },
                start,
                end,
            });
        }
        self.arrival[copy.handle][copy.to.0] = arrives(&route);
    }
}

/// The simulator's [`Carrier`]: each copy booked on its modelled links.
struct Links<'a>(Mutex<Copies<'a>>);

impl Carrier for Links<'_> {
    fn carry_out(
        &self,
        steps: Vec<Step>,
        data: &DataRegistry,
        at: f64,
    ) -> std::result::Result<Vec<Deferred>, KernelError> {
        let mut copies = lock(&self.0);
        for step in steps {
            if let Step::Copy(copy) = step {
                let holders = data.holders(copy.handle);
                copies.schedule(copy, at, &holders);
            }
        }
        Ok(Vec::new())
    }
}

/// Tiles placed before the run are there at time 0: their copies are not simulated.
struct Placed;

impl Carrier for Placed {
    fn carry_out(
        &self,
        _: Vec<Step>,
        _: &DataRegistry,
        _: f64,
    ) -> std::result::Result<Vec<Deferred>, KernelError> {
        Ok(Vec::new())
    }
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

/// Simulates `work` on `platform` and returns its trace.
pub fn simulate(platform: &SimPlatform, work: &SimWork<'_>, options: &SimOptions) -> Result<Trace> {
    let rank = SimRank {
        platform,
        work: *work,
        priorities: None,
    };
    let mut run = simulate_grid(&[rank], &[], None, options)?;
    Ok(run.ranks.remove(0))
}

/// One node of a simulated distributed run (one MPI rank): its platform, its tasks, and
/// their priorities.
#[derive(Clone, Copy)]
pub struct SimRank<'a> {
    /// The node's modelled machine.
    pub platform: &'a SimPlatform,
    /// The tasks it runs.
    pub work: SimWork<'a>,
    /// Their priorities (`None`: the run options', else their bottom levels in `work`'s
    /// graph). A rank's own graph misses its tasks' remote successors: a distributed run
    /// gives the whole graph's.
    pub priorities: Option<&'a Arc<[f64]>>,
}

/// A tile one node sends another once its writer has ended: one message on the network.
#[derive(Debug, Clone, PartialEq)]
pub struct SimMessage {
    /// The tile.
    pub tile: TileRef,
    /// The sending rank.
    pub from: usize,
    /// The sender's task after which the tile is sent (it writes the tile).
    pub writer: TaskId,
    /// The receiving rank.
    pub to: usize,
    /// The receiver's tasks that read it, once per access: each waits for it as an input
    /// from outside its rank's run.
    pub readers: Vec<TaskId>,
}

/// One message's trip over the network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageEvent {
    /// The tile.
    pub tile: TileRef,
    /// Sending rank.
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Bytes sent.
    pub bytes: usize,
    /// Start, seconds since the run began.
    pub start: f64,
    /// End (arrival), seconds since the run began.
    pub end: f64,
}

/// A simulated distributed run: each node's trace and the messages between them.
#[derive(Debug, Clone, PartialEq)]
pub struct GridTrace {
    /// Each rank's run on its own workers; every trace's makespan is the whole run's.
    pub ranks: Vec<Trace>,
    /// The messages, by start time.
    pub messages: Vec<MessageEvent>,
    /// The end of the last task, copy or message on any node.
    pub makespan: f64,
}

/// What happens at an event of the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Happening {
    /// A task ends on a worker.
    End { task: TaskId, worker: WorkerId },
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

/// The network between nodes: every pair of nodes has a link of one rate, and each
/// node's NIC sends one message at a time and receives one at a time (a non-blocking
/// switch: a pair's link only carries what its sender's NIC sends, so the NICs are what
/// messages contend for).
struct Network {
    rate: LinkRate,
    sending: Vec<Busy>,
    receiving: Vec<Busy>,
    events: Vec<MessageEvent>,
}

impl Network {
    /// Books a message of `bytes` from `from` to `to`, ready to leave at `ready`, in the
    /// earliest interval both NICs are free; returns its arrival.
    fn send(&mut self, tile: TileRef, from: usize, to: usize, bytes: usize, ready: f64) -> f64 {
        let seconds = self.rate.seconds(bytes);
        let mut start = ready;
        while let Some(end) = self.sending[from]
            .conflict(start, seconds)
            .or_else(|| self.receiving[to].conflict(start, seconds))
        {
            start = end;
        }
        let end = start + seconds;
        self.sending[from].insert(start, end);
        self.receiving[to].insert(start, end);
        self.events.push(MessageEvent {
            tile,
            from,
            to,
            bytes,
            start,
            end,
        });
        end
    }
}

/// One node's run in progress.
struct RankRun<'a> {
    platform: &'a SimPlatform,
    graph: &'a TaskGraph,
    tables: &'a Tables,
    engine: Engine<'a>,
    links: Links<'a>,
    idle: Vec<bool>,
    events: Vec<TaskEvent>,
    /// The end of its last task.
    last: f64,
}

/// Simulates a distributed run: each of `ranks` runs its tasks on its own platform with
/// its own scheduler and data registry (the engine of a single-node simulation, one per
/// node), and each of `messages` leaves its sender's host memory once its writer has
/// ended (after a copy back from a GPU when the tile is only there) and crosses
/// `network`, after which its readers may run. All nodes share one virtual clock. One
/// rank and no message is [`simulate`]. `network` is needed when there are messages.
pub fn simulate_grid(
    ranks: &[SimRank<'_>],
    messages: &[SimMessage],
    network: Option<LinkRate>,
    options: &SimOptions,
) -> Result<GridTrace> {
    options.check()?;
    let several = ranks.len() > 1;
    let on_rank = |rank: usize, error: Error| {
        if several {
            Error::Rank {
                rank,
                source: Box::new(error),
            }
        } else {
            error
        }
    };
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
        if m.writer.0 >= from_tasks || m.readers.iter().any(|r| r.0 >= to_tasks) {
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
    // Per rank, per task: the inputs it awaits from other ranks, and the messages it sends.
    let mut outside: Vec<Vec<usize>> = ranks.iter().map(|r| vec![0; r.work.graph.len()]).collect();
    let mut sends: Vec<Vec<Vec<usize>>> = ranks
        .iter()
        .map(|r| vec![Vec::new(); r.work.graph.len()])
        .collect();
    for (i, m) in messages.iter().enumerate() {
        for r in &m.readers {
            outside[m.to][r.0] += 1;
        }
        sends[m.from][m.writer.0].push(i);
    }

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
        let (ctx, table) = prepare_rank(rank, run).map_err(|e| on_rank(i, e))?;
        contexts.push(ctx);
        tables.push(table);
    }
    // The handle of each message's tile on its sender.
    let mut sent = Vec::with_capacity(messages.len());
    for m in messages {
        let accesses = &ranks[m.from].work.graph.task(m.writer).accesses;
        let Some(i) = accesses
            .iter()
            .position(|a| a.tile == m.tile && a.mode.writes())
        else {
            return Err(Error::Plan {
                reason: format!(
                    "task {} of rank {} does not write tile ({}, {}), which it sends",
                    m.writer, m.from, m.tile.row, m.tile.col
                ),
            });
        };
        sent.push(tables[m.from].handles[m.writer][i].0);
    }
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
    let mut runs = Vec::with_capacity(ranks.len());
    for (i, (((rank, ctx), table), estimate)) in ranks
        .iter()
        .zip(contexts)
        .zip(&tables)
        .zip(&estimates)
        .enumerate()
    {
        let graph = rank.work.graph;
        let engine = Engine::new(graph, ctx, table, estimate, &run_options[i], |t| {
            outside[i][t.0]
        })
        .map_err(|e| on_rank(i, run_error(graph, e)))?;
        let platform = rank.platform;
        let links = Links(Mutex::new(Copies {
            platform,
            busy: HashMap::new(),
            arrival: vec![vec![0.0; platform.capacities.len()]; lock(&table.data).len()],
            events: Vec::new(),
        }));
        if let Err(failure) = engine.place(&Placed) {
            let reason = match failure {
                TaskFailure::Memory(no_room) => {
                    format!("the placed operands do not fit: {no_room}")
                }
                other => format!("{other:?}"),
            };
            return Err(on_rank(
                i,
                Error::InvalidOption {
                    option: "placement",
                    reason,
                },
            ));
        }
        engine.push_roots(&links);
        runs.push(RankRun {
            platform,
            graph,
            tables: table,
            engine,
            links,
            idle: vec![true; platform.workers.len()],
            events: Vec::with_capacity(graph.len()),
            last: 0.0,
        });
    }
    let mut net = Network {
        rate: network,
        sending: (0..ranks.len()).map(|_| Busy::default()).collect(),
        receiving: (0..ranks.len()).map(|_| Busy::default()).collect(),
        events: Vec::new(),
    };

    // The virtual clock: on the node of the last event (on every node at first), every
    // idle worker pops and starts; then time jumps to the next event: a task end, after
    // which its tile leaves for the nodes that read it, or a message's arrival, which
    // releases its readers.
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut queue: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut touched: Vec<usize> = (0..runs.len()).collect();
    let mut now = 0.0f64;
    loop {
        for r in touched.drain(..) {
            let run = &mut runs[r];
            let clock = Clock {
                now,
                noise: options.noise,
                rng: &mut rng,
                queue: &mut queue,
                seq: &mut seq,
            };
            run.start_idle(r, clock);
            if run.engine.stopped()
                && let Some(failure) = run.engine.failure()
            {
                return Err(on_rank(r, run_error(run.graph, failure)));
            }
        }
        let Some(Reverse(event)) = queue.pop() else {
            break;
        };
        now = event.time;
        let run = &mut runs[event.rank];
        match event.what {
            Happening::End { task, worker } => {
                run.idle[worker] = true;
                run.last = now;
                run.engine.finish(&run.links, task, worker, now, Ok(()));
                for &i in &sends[event.rank][task.0] {
                    let m = &messages[i];
                    let handle = sent[i];
                    // The tile leaves from host memory: copied back first if only a GPU has it.
                    run.engine
                        .with_data(&run.links, now, |d| d.prefetch(handle, HOST))
                        .map_err(|e| on_rank(event.rank, Error::Kernel(e)))?;
                    let ready = lock(&run.links.0).arrival[handle][HOST.0].max(now);
                    let bytes = lock(&run.tables.data).bytes(handle);
                    let time = net.send(m.tile, m.from, m.to, bytes, ready);
                    queue.push(Reverse(Event {
                        time,
                        seq,
                        rank: m.to,
                        what: Happening::Arrival { message: i },
                    }));
                    seq += 1;
                }
            }
            Happening::Arrival { message } => {
                for &reader in &messages[message].readers {
                    run.engine
                        .arrived(&run.links, reader, now)
                        .map_err(|reason| on_rank(event.rank, Error::Plan { reason }))?;
                }
            }
        }
        touched.push(event.rank);
    }
    let mut traces = Vec::with_capacity(runs.len());
    let mut makespan = net.events.iter().map(|e| e.end).fold(0.0, f64::max);
    for (r, run) in runs.into_iter().enumerate() {
        if let Some(failure) = run.engine.failure() {
            return Err(on_rank(r, run_error(run.graph, failure)));
        }
        let left = run.engine.unfinished();
        if left > 0 {
            return Err(on_rank(
                r,
                Error::Stalled {
                    policy: options.run.policy_name(),
                    left,
                    tasks: run.graph.len(),
                },
            ));
        }
        run.engine.flush(&run.links, run.last);
        let mut copies = run.links.0.into_inner().unwrap_or_else(|e| e.into_inner());
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

/// The virtual clock's state a node's workers start tasks under.
struct Clock<'c> {
    now: f64,
    noise: f64,
    rng: &'c mut ChaCha8Rng,
    queue: &'c mut BinaryHeap<Reverse<Event>>,
    seq: &'c mut u64,
}

impl RankRun<'_> {
    /// Every idle worker of rank `rank`, in index order, pops a task and starts it now:
    /// it ends once the worker's overhead and the task's copies are done, plus its
    /// duration (with noise).
    fn start_idle(&mut self, rank: usize, clock: Clock<'_>) {
        let now = clock.now;
        let workers = &self.platform.workers;
        for w in self.engine.ctx().worker_ids() {
            if !self.idle[w] {
                continue;
            }
            let Some(task) = self.engine.pop(w, now) else {
                continue;
            };
            if self.engine.start(&self.links, task, w, now, false) != Start::Running {
                break;
            }
            let overhead = match workers[w].kind {
                ResourceKind::Cpu => self.platform.cpu_task_overhead,
                ResourceKind::Gpu => 0.0,
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
            let end = inputs + mean * factor;
            self.events.push(TaskEvent {
                task,
                op: self.graph.task(task).op,
                worker: w,
                start: inputs,
                end,
                flops: self.graph.task(task).flops,
            });
            self.idle[w] = false;
            clock.queue.push(Reverse(Event {
                time: end,
                seq: *clock.seq,
                rank,
                what: Happening::End { task, worker: w },
            }));
            *clock.seq += 1;
        }
    }
}

/// Prepares a rank's scheduler context and tables, and checks that every kernel has a
/// duration on every class that may run it.
fn prepare_rank<'a>(
    rank: &SimRank<'a>,
    run: &'a RunOptions,
) -> Result<(crate::scheduler::SchedContext<'a>, Tables)> {
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
    for key in &tables.keys {
        for worker in workers.iter().filter(|w| allowed(run, key, w)) {
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

fn allowed(options: &RunOptions, key: &KernelKey, worker: &WorkerInfo) -> bool {
    options
        .restrictions
        .iter()
        .find(|(op, _)| *op == key.op)
        .is_none_or(|(_, kinds)| kinds.contains(&worker.kind))
}

#[cfg(test)]
mod tests {
    use hetla_factorizations::{MatrixId, TileRef};

    use super::*;
    use crate::link::LinkRate;

    /// Two GPUs behind a switch (20 GB/s peer links), 10 GB/s host links, no latency;
    /// `shared`: whether they share one host link.
    fn two_gpus(shared: bool) -> SimPlatform {
        let rate = |gb_per_s| LinkRate {
            latency_us: 0.0,
            gb_per_s,
        };
        SimPlatform {
            workers: Vec::new(),
            capacities: vec![None, None, None],
            link: Some(LinkModel {
                h2d: rate(10.0),
                d2h: rate(10.0),
                p2p: Some(rate(20.0)),
                host_shared_by: if shared { 2 } else { 1 },
            }),
            cpu_task_overhead: 0.0,
        }
    }

    /// Copies of tiles 0 and 1 (1 GB each) from the host to GPU 1 (node 1), asked at 0;
    /// when each arrives, and the nodes the second one passed through.
    fn fetch_two(platform: &SimPlatform) -> (f64, f64, Vec<MemoryNode>) {
        let mut copies = Copies {
            platform,
            busy: HashMap::new(),
            arrival: vec![vec![0.0; 3]; 2],
            events: Vec::new(),
        };
        for handle in 0..2 {
            let copy = Transfer {
                handle: crate::Handle(handle),
                tile: TileRef::new(MatrixId(0), handle, 0),
                from: HOST,
                to: MemoryNode(1),
                bytes: 1_000_000_000,
            };
            copies.schedule(copy, 0.0, &[HOST]);
        }
        let path = copies.events[1..].iter().map(|e| e.transfer.to).collect();
        (copies.arrival[0][1], copies.arrival[1][1], path)
    }

    #[test]
    fn a_host_fetch_takes_another_gpus_free_link_unless_the_link_is_shared() {
        // Own links: the second tile comes over GPU 2's host link (0.1 s), then the
        // switch (0.05 s), before GPU 1's own link would be free again (0.2 s).
        let (first, second, path) = fetch_two(&two_gpus(false));
        assert!((first - 0.1).abs() < 1e-12);
        assert!((second - 0.15).abs() < 1e-12, "{second}");
        assert_eq!(path, [MemoryNode(2), MemoryNode(1)]);
        // One shared link: the copies queue on it, and the second goes direct.
        let (first, second, path) = fetch_two(&two_gpus(true));
        assert!((first - 0.1).abs() < 1e-12);
        assert!((second - 0.2).abs() < 1e-12, "{second}");
        assert_eq!(path, [MemoryNode(1)]);
    }

    /// A node with one single-core CPU cluster.
    fn one_core() -> SimPlatform {
        SimPlatform {
            workers: vec![WorkerInfo::cpu_cluster(0, vec![0])],
            capacities: vec![None],
            link: None,
            cpu_task_overhead: 0.0,
        }
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
            writer: TaskId(0),
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
        // Without the message, nothing holds the reader: it starts at once.
        let alone = simulate_grid(&ranks, &[], None, &SimOptions::default()).unwrap();
        assert_eq!(alone.ranks[1].tasks[0].start, 0.0);
    }

    #[test]
    fn a_copy_fills_a_gap_left_before_a_later_booking() {
        let mut busy = Busy::default();
        busy.insert(0.0, 1.0);
        busy.insert(3.0, 4.0);
        // A copy of 1 s fits between 1 and 3, one of 2.5 s only after 4.
        assert_eq!(busy.conflict(1.0, 1.0), None);
        assert_eq!(busy.conflict(0.5, 1.0), Some(1.0));
        assert_eq!(busy.conflict(1.0, 2.5), Some(4.0));
        assert_eq!(busy.conflict(4.0, 2.5), None);
    }
}
