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
//! The result is a [`Trace`] like a real run's: Gantt charts, Chrome traces and summaries
//! work unchanged.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;

use hetla_factorizations::{TaskGraph, TaskId, TileRef};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use hetla_kernels::KernelError;

use crate::data::{DataRegistry, HOST, MemoryNode, Step, Transfer};
use crate::engine::{Carrier, Engine, Start};
use crate::execute::{RunOptions, RunStep, TaskFailure};
use crate::inflight::Deferred;
use crate::link::{Hop, LinkModel};
use crate::perfmodel::{KernelKey, MIN_SAMPLES, ResourceClass, Stats};
use crate::platform::WorkerId;
use crate::platform::{ResourceKind, WorkerInfo};
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

/// A task end in the event queue: time, then scheduling order.
#[derive(Debug, Clone, Copy, PartialEq)]
struct End {
    time: f64,
    seq: u64,
    task: TaskId,
    worker: WorkerId,
}

impl Eq for End {}
impl PartialOrd for End {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for End {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.seq.cmp(&other.seq))
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
    let graph = work.graph;
    let workers = &platform.workers;
    let n = graph.len();
    options.check()?;
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
        &options.run,
        |key, class| match (work.duration)(key, class) {
            Some(mean) => Stats {
                samples: MIN_SAMPLES,
                mean,
                m2: 0.0,
            },
            None => Stats::default(),
        },
        platform.capacities.clone(),
    )
    .map_err(|e| run_error(graph, e))?;
    // Every kernel needs a duration on every class that may run it.
    for key in &tables.keys {
        for worker in workers.iter().filter(|w| allowed(&options.run, key, w)) {
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
    let copy_seconds = |from, to, bytes| platform.copy_seconds(from, to, bytes);
    let estimate = tables.estimate(workers, &copy_seconds);
    let engine = Engine::new(graph, ctx, &tables, &estimate, &options.run, |_| 0)
        .map_err(|e| run_error(graph, e))?;
    let links = Links(Mutex::new(Copies {
        platform,
        busy: HashMap::new(),
        arrival: vec![vec![0.0; platform.capacities.len()]; lock(&tables.data).len()],
        events: Vec::new(),
    }));
    if let Err(failure) = engine.place(&Placed) {
        let reason = match failure {
            TaskFailure::Memory(no_room) => format!("the placed operands do not fit: {no_room}"),
            other => format!("{other:?}"),
        };
        return Err(Error::InvalidOption {
            option: "placement",
            reason,
        });
    }
    engine.push_roots(&links);

    // The virtual clock: every idle worker pops and starts, then time jumps to the next
    // task end, which is finished.
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut idle = vec![true; workers.len()];
    let mut ends: BinaryHeap<Reverse<End>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut events = Vec::with_capacity(n);
    let mut now = 0.0f64;
    loop {
        for w in engine.ctx().worker_ids() {
            if !idle[w] {
                continue;
            }
            let Some(task) = engine.pop(w, now) else {
                continue;
            };
            if engine.start(&links, task, w, now, false) != Start::Running {
                break;
            }
            let overhead = match workers[w].kind {
                ResourceKind::Cpu => platform.cpu_task_overhead,
                ResourceKind::Gpu => 0.0,
            };
            let node = workers[w].node;
            let inputs = {
                let copies = lock(&links.0);
                tables.handles[task]
                    .iter()
                    .map(|&(h, _)| copies.arrival[h][node.0])
                    .fold(now + overhead, f64::max)
            };
            let mean = engine.ctx().estimate(task, w).seconds();
            let factor = if options.noise > 0.0 {
                1.0 + options.noise * (2.0 * rng.random::<f64>() - 1.0)
            } else {
                1.0
            };
            let end = inputs + mean * factor;
            events.push(TaskEvent {
                task,
                op: graph.task(task).op,
                worker: w,
                start: inputs,
                end,
                flops: graph.task(task).flops,
            });
            idle[w] = false;
            ends.push(Reverse(End {
                time: end,
                seq,
                task,
                worker: w,
            }));
            seq += 1;
        }
        // A failure stops the run; the flag is set at the last task's end too.
        if engine.stopped()
            && let Some(failure) = engine.failure()
        {
            return Err(run_error(graph, failure));
        }
        let Some(Reverse(done)) = ends.pop() else {
            break;
        };
        now = done.time;
        idle[done.worker] = true;
        engine.finish(&links, done.task, done.worker, now, Ok(()));
    }
    if let Some(failure) = engine.failure() {
        return Err(run_error(graph, failure));
    }
    let left = engine.unfinished();
    if left > 0 {
        return Err(Error::Stalled {
            policy: options.run.policy_name(),
            left,
            tasks: n,
        });
    }
    engine.flush(&links, now);
    let mut copies = links.0.into_inner().unwrap_or_else(|e| e.into_inner());
    let makespan = copies.events.iter().map(|e| e.end).fold(now, f64::max);
    let mut trace = Trace::new(workers.clone(), events, makespan);
    copies.events.sort_by(|a, b| a.start.total_cmp(&b.start));
    trace.transfers = copies.events;
    Ok(trace)
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
