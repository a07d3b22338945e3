//! Makespan lower bounds of a plan (critical path, area, mixed; see `hetla-bounds`), with durations
//! from a modelled machine, from the performance models a platform learned, or from the very run
//! the plan made, reported in milliseconds and in Gflop/s of the plan's flops.
//!
//! Tasks with the same [`KernelKey`] (operation and operand shapes) share a type, so a ragged edge
//! tile is its own type. Resource classes are the worker classes with their counts; a class has no
//! duration for a key it has no model of (it is treated as unable to run it). Durations go to the
//! LPs in milliseconds, which keeps their coefficients near 1.

use std::collections::HashMap;
use std::time::Instant;

use hetla_bounds::{Class, Instance};
use hetla_factorizations::{GridSplit, ProcessGrid, TaskGraph, TaskId, TileRef, task_rank};
use hetla_runtime::{
    GpuSharing, KernelKey, LinkRate, PerfModels, ResourceClass, Trace, WorkerInfo, count_classes,
};
use serde::Serialize;

use super::build::Plan;
use crate::{Error, Result};

/// One resource class of a bound: its name and how many resources it has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassCount {
    /// The class ("cpu-cluster-10", "gpu-K40m").
    pub class: String,
    /// Resources of the class.
    pub count: usize,
}

/// The three bounds of one graph on one set of resources.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoundReport {
    /// Tasks in the graph.
    pub tasks: usize,
    /// Dependency edges.
    pub edges: usize,
    /// The resource classes used.
    pub classes: Vec<ClassCount>,
    /// Critical path, in milliseconds.
    pub cp_ms: f64,
    /// Area bound, in milliseconds.
    pub area_ms: f64,
    /// Mixed bound, in milliseconds.
    pub mixed_ms: f64,
    /// The graph's flops over the critical path, in Gflop/s.
    pub cp_gflops: f64,
    /// The graph's flops over the area bound.
    pub area_gflops: f64,
    /// The graph's flops over the mixed bound: the best rate any schedule can reach.
    pub mixed_gflops: f64,
    /// LP solves of the mixed bound (1 + paths added after the critical path).
    pub iterations: usize,
    /// Time taken to compute the three bounds, in seconds.
    pub seconds: f64,
}

/// Graphs up to this many tasks get one type per task in [`Plan::run_bounds`]; larger ones one per
/// kernel and class (see there).
pub const PER_TASK_TYPES_UP_TO: usize = 10_000;

impl Plan {
    /// Bounds of the plan on `classes` (class and count), with `duration(key, class)` in seconds
    /// (`None`: the class cannot run the key).
    pub fn bounds(
        &self,
        classes: &[(ResourceClass, usize)],
        duration: impl FnMut(&KernelKey, &ResourceClass) -> Option<f64>,
    ) -> Result<BoundReport> {
        self.shared_bounds(classes, duration, &GpuSharing::alone())
    }

    /// [`Plan::bounds`] on GPUs that run several kernels at once as `sharing` says: a kernel takes
    /// its occupancy of its GPU's time in the area bound ([`GpuSharing`]).
    pub fn shared_bounds(
        &self,
        classes: &[(ResourceClass, usize)],
        mut duration: impl FnMut(&KernelKey, &ResourceClass) -> Option<f64>,
        sharing: &GpuSharing,
    ) -> Result<BoundReport> {
        let (types, type_keys) = kernel_types(&self.keys);
        typed_bounds(
            &self.graph,
            (types, type_keys.len()),
            classes,
            |t, class| duration(type_keys[t], class),
            |t, class, seconds| sharing.occupancy(type_keys[t], class, seconds),
            self.flops,
        )
    }

    /// Bounds of the plan on `workers` with the mean durations of `models` (for example those
    /// stored before a run, or those a run just recorded), each GPU running up to `streams` kernels
    /// at once ([`GpuSharing`]; 1: one at a time).
    pub fn bounds_from_models(
        &self,
        models: &PerfModels,
        workers: &[WorkerInfo],
        streams: usize,
    ) -> Result<BoundReport> {
        let duration = |key: &KernelKey, class: &ResourceClass| {
            models
                .get(key, class)
                .filter(|s| s.samples > 0)
                .map(|s| s.mean)
        };
        let classes: Vec<ResourceClass> = workers.iter().map(|w| w.class.clone()).collect();
        let sharing = GpuSharing::new(streams, &self.keys, &classes, duration);
        self.shared_bounds(&count_classes(classes), duration, &sharing)
    }

    /// Bounds of the run of this plan that `trace` recorded, from the durations its tasks took
    /// (above 10 000 tasks: each kernel's shortest duration on the class that ran it, a weaker
    /// bound that stays below the run): each task is its own type, allowed only on the class of the
    /// worker that ran it, with the duration it took there. The run's own schedule satisfies every
    /// constraint of these bounds, so they are lower bounds of this very run: its makespan is at
    /// least the mixed bound (efficiency <= 1), whatever the noise.
    pub fn run_bounds(&self, trace: &Trace) -> Result<BoundReport> {
        let graph = &self.graph;
        // A GPU of several streams ran tasks at once (each lasting longer beside the others):
        // it counts as that many resources, which the run's schedule respects.
        let mut classes: Vec<(ResourceClass, usize)> = Vec::new();
        for (w, worker) in trace.workers.iter().enumerate() {
            let at_once = most_at_once(trace.tasks.iter().filter(|e| e.worker.0 == w));
            match classes.iter_mut().find(|(c, _)| *c == worker.class) {
                Some((_, count)) => *count += at_once,
                None => classes.push((worker.class.clone(), at_once)),
            }
        }
        let mut ran = vec![None; graph.len()];
        for event in &trace.tasks {
            if let Some(slot) = ran.get_mut(event.task.0) {
                *slot = Some((&trace.workers[event.worker].class, event.end - event.start));
            }
        }
        if let Some(task) = ran.iter().position(Option::is_none) {
            return Err(Error::Runtime(hetla_runtime::Error::Plan {
                reason: format!("task {task} of the graph has no event in the trace"),
            }));
        }
        if graph.len() > PER_TASK_TYPES_UP_TO {
            // One type per (kernel, class that ran it), lasting the shortest such task:
            // every task lasted at least that, so these are still bounds of this run, and
            // the linear program has tens of types instead of one per task (minutes at
            // 300k tasks).
            let mut type_of: Vec<(&KernelKey, &ResourceClass)> = Vec::new();
            let mut shortest: Vec<f64> = Vec::new();
            let types = (0..graph.len())
                .map(|t| {
                    let (class, seconds) = ran[t].expect("every task ran");
                    let id = (&self.keys[t], class);
                    match type_of.iter().position(|k| *k == id) {
                        Some(i) => {
                            shortest[i] = shortest[i].min(seconds);
                            i
                        }
                        None => {
                            type_of.push(id);
                            shortest.push(seconds);
                            type_of.len() - 1
                        }
                    }
                })
                .collect();
            return typed_bounds(
                graph,
                (types, type_of.len()),
                &classes,
                |t, class| (type_of[t].1 == class).then_some(shortest[t]),
                |_, _, _| 1.0,
                self.flops,
            );
        }
        typed_bounds(
            graph,
            ((0..graph.len()).collect(), graph.len()),
            &classes,
            |t, class| ran[t].and_then(|(c, d)| (c == class).then_some(d)),
            |_, _, _| 1.0,
            self.flops,
        )
    }

    /// The bounds of the plan split over `grid` as `split` says, with `node_classes` on each node,
    /// durations in seconds and `network` between nodes (see [`DistributedBounds`]).
    pub fn distributed_bounds(
        &self,
        split: &GridSplit,
        grid: &ProcessGrid,
        node_classes: &[(ResourceClass, usize)],
        duration: impl Fn(&KernelKey, &ResourceClass) -> Option<f64> + Copy,
        network: LinkRate,
        sharing: &GpuSharing,
    ) -> Result<DistributedBounds> {
        let (graph, keys, flops) = (&self.graph, &self.keys[..], self.flops);
        let message_bytes = |tile: TileRef| self.message_bytes(tile);
        let nodes = grid.size();
        let classes: Vec<(ResourceClass, usize)> = node_classes
            .iter()
            .map(|(class, count)| (class.clone(), count * nodes))
            .collect();
        let (cp_ms, area_ms, mixed_ms) = if graph.len() <= GRID_MIXED_BOUND_UP_TO {
            let b = self.shared_bounds(&classes, duration, sharing)?;
            (b.cp_ms, b.area_ms, Some(b.mixed_ms))
        } else {
            let (cp, area) = cp_and_area_ms(graph, keys, &classes, duration, sharing)?;
            (cp, area, None)
        };
        let mut nic = vec![0.0f64; 2 * nodes];
        for m in &split.messages {
            let seconds = network.seconds(message_bytes(m.tile));
            nic[2 * m.from.0] += seconds;
            nic[2 * m.to.0 + 1] += seconds;
        }
        let network_ms = nic.iter().copied().fold(0.0, f64::max) * 1e3;
        let mut node_area_ms = 0.0f64;
        for share in &split.ranks {
            let keys: Vec<KernelKey> = share.whole.iter().map(|&t| keys[t.0].clone()).collect();
            let (_, area) = cp_and_area_ms(&share.graph, &keys, node_classes, duration, sharing)?;
            node_area_ms = node_area_ms.max(area);
        }
        let fastest = |t: TaskId| {
            node_classes
                .iter()
                .filter_map(|(class, _)| duration(&keys[t.0], class))
                .fold(f64::INFINITY, f64::min)
        };
        let rank_of = |t: TaskId| task_rank(graph, grid, t);
        let cp_network_ms = 1e3
            * critical_path_with_messages(graph, fastest, |from, to| {
                if rank_of(from) == rank_of(to) {
                    return 0.0;
                }
                let written = graph.task(from).accesses.iter().filter(|a| a.mode.writes());
                written
                    .filter(|w| graph.task(to).accesses.iter().any(|a| a.tile == w.tile))
                    .map(|w| network.seconds(message_bytes(w.tile)))
                    .fold(0.0, f64::max)
            });
        // The first of the largest: the mixed bound is never below the area bound, which it
        // may equal up to rounding.
        let (bound_ms, bound_by) = [
            (mixed_ms.unwrap_or(0.0), "mixed"),
            (area_ms, "area"),
            (cp_ms, "critical path"),
            (network_ms, "network"),
            (cp_network_ms, "critical path with network"),
            (node_area_ms, "node area"),
        ]
        .into_iter()
        .fold((0.0, "mixed"), |best, b| {
            if b.0 > best.0 * (1.0 + 1e-9) { b } else { best }
        });
        Ok(DistributedBounds {
            tasks: graph.len(),
            cp_ms,
            area_ms,
            mixed_ms,
            network_ms,
            cp_network_ms,
            node_area_ms,
            bound_ms,
            bound_by,
            bound_gflops: flops / (bound_ms * 1e-3).max(f64::MIN_POSITIVE) / 1e9,
        })
    }
}

/// Each task's type (its kernel's index among the distinct kernels), and the kernels.
pub(crate) fn kernel_types(keys: &[KernelKey]) -> (Vec<usize>, Vec<&KernelKey>) {
    let mut type_of: HashMap<&KernelKey, usize> = HashMap::new();
    let mut type_keys: Vec<&KernelKey> = Vec::new();
    let types = keys
        .iter()
        .map(|key| {
            *type_of.entry(key).or_insert_with(|| {
                type_keys.push(key);
                type_keys.len() - 1
            })
        })
        .collect();
    (types, type_keys)
}

/// The critical-path and area bounds of `graph` whose task `i` has kernel `keys[i]`, in
/// milliseconds, on GPUs shared as `sharing` says: without the mixed bound, whose linear program
/// has a variable per task and class, which takes minutes to solve past some 10^5 tasks; these two
/// take one pass over the graph and a program per kernel.
fn cp_and_area_ms(
    graph: &TaskGraph,
    keys: &[KernelKey],
    classes: &[(ResourceClass, usize)],
    mut duration: impl FnMut(&KernelKey, &ResourceClass) -> Option<f64>,
    sharing: &GpuSharing,
) -> Result<(f64, f64)> {
    let (types, type_keys) = kernel_types(keys);
    let instance = typed_instance(
        graph,
        (types, type_keys.len()),
        classes,
        |t, class| duration(type_keys[t], class),
        |t, class, seconds| sharing.occupancy(type_keys[t], class, seconds),
    )?;
    Ok((instance.critical_path().length, instance.area()?.makespan))
}

/// The bounds' instance of `graph` whose task `i` has type `types.0[i]` (< `types.1`), with
/// `duration(type, class)` in seconds and a task's occupancy of its resource
/// `occupancy(type, class, seconds)`.
fn typed_instance(
    graph: &TaskGraph,
    (types, type_count): (Vec<usize>, usize),
    classes: &[(ResourceClass, usize)],
    mut duration: impl FnMut(usize, &ResourceClass) -> Option<f64>,
    mut occupancy: impl FnMut(usize, &ResourceClass, f64) -> f64,
) -> Result<Instance> {
    let predecessors: Vec<Vec<usize>> = graph
        .ids()
        .map(|i| graph.predecessors(i).iter().map(|p| p.0).collect())
        .collect();
    let bound_classes: Vec<Class> = classes
        .iter()
        .map(|(class, count)| {
            let seconds: Vec<Option<f64>> = (0..type_count).map(|t| duration(t, class)).collect();
            let occupied = (seconds.iter().enumerate())
                .map(|(t, s)| s.map_or(1.0, |s| occupancy(t, class, s)))
                .collect();
            let ms = seconds.iter().map(|s| s.map(|s| s * 1e3)).collect();
            Class::new(class.to_string(), *count, ms).with_occupancy(occupied)
        })
        .collect();
    Ok(Instance::new(types, predecessors, bound_classes)?)
}

/// The most of `events` running at the same moment (0 for none; an event ending as another starts
/// does not overlap it).
pub(crate) fn most_at_once<'e>(
    events: impl Iterator<Item = &'e hetla_runtime::TaskEvent>,
) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for e in events {
        edges.push((e.start, 1));
        edges.push((e.end, -1));
    }
    // Ends before starts at the same time.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// Bounds of `graph` whose task `i` has type `types.0[i]` (< `types.1`), with
/// `duration(type, class)` in seconds and `occupancy` as [`typed_instance`]'s.
fn typed_bounds(
    graph: &TaskGraph,
    types: (Vec<usize>, usize),
    classes: &[(ResourceClass, usize)],
    duration: impl FnMut(usize, &ResourceClass) -> Option<f64>,
    occupancy: impl FnMut(usize, &ResourceClass, f64) -> f64,
    flops: f64,
) -> Result<BoundReport> {
    let start = Instant::now();
    let instance = typed_instance(graph, types, classes, duration, occupancy)?;
    let bounds = instance.bounds()?;
    // An empty graph has no flops and bounds of 0 ms: report 0 Gflop/s, not NaN.
    let gflops = |ms: f64| {
        if flops == 0.0 {
            0.0
        } else {
            flops / (ms * 1e-3) / 1e9
        }
    };
    Ok(BoundReport {
        tasks: graph.len(),
        edges: graph.edge_count(),
        classes: classes
            .iter()
            .map(|(class, count)| ClassCount {
                class: class.to_string(),
                count: *count,
            })
            .collect(),
        cp_ms: bounds.critical_path.length,
        area_ms: bounds.area.makespan,
        mixed_ms: bounds.mixed.makespan,
        cp_gflops: gflops(bounds.critical_path.length),
        area_gflops: gflops(bounds.area.makespan),
        mixed_gflops: gflops(bounds.mixed.makespan),
        iterations: bounds.mixed.iterations,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The most tasks a distributed bound ([`DistributedBounds`]) computes the mixed bound of (about 15
/// s of linear programming at 10^5 tasks, growing faster than the tasks); past it the
/// critical-path, area and network bounds stand alone.
pub const GRID_MIXED_BOUND_UP_TO: usize = 40_000;

/// Bounds of a distributed run: a graph split over the nodes (ranks) of a process grid, each node
/// with the same workers, and a network of one rate between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistributedBounds {
    /// Tasks of the whole graph.
    pub tasks: usize,
    /// Critical path of the whole graph, every task at its fastest, ms.
    pub cp_ms: f64,
    /// Area bound of the whole graph on every node's workers together, as if they shared one
    /// memory, ms.
    pub area_ms: f64,
    /// Mixed bound of the same, ms: computed up to 40 000 tasks, `None` past that.
    pub mixed_ms: Option<f64>,
    /// The busiest NIC's time, in milliseconds: the messages it sends or receives, one at a time,
    /// each latency plus bytes over bandwidth. No run on this network is shorter.
    pub network_ms: f64,
    /// The critical path with the network, in milliseconds: every task at its fastest, and every
    /// edge from a task that writes a tile to a task on another node that reads it lasting one
    /// message of that tile.
    pub cp_network_ms: f64,
    /// The busiest node's area bound, in milliseconds: a node runs the tasks of its own tiles on
    /// its own workers, so no run is shorter than the area bound of any node's share.
    pub node_area_ms: f64,
    /// The largest of the bounds, in milliseconds.
    pub bound_ms: f64,
    /// Which it is: "mixed", "area", "critical path", "network", "critical path with network" or
    /// "node area".
    pub bound_by: &'static str,
    /// The flops over the bound, in Gflop/s: the best rate any run can reach.
    pub bound_gflops: f64,
}

/// The longest path of `graph` where task `t` lasts `duration(t)` and the edge from `p` to `s` adds
/// `edge(p, s)`, in seconds.
fn critical_path_with_messages(
    graph: &TaskGraph,
    duration: impl Fn(TaskId) -> f64,
    edge: impl Fn(TaskId, TaskId) -> f64,
) -> f64 {
    let mut finish = vec![0.0f64; graph.len()];
    // Edges go from earlier to later tasks: one forward sweep suffices.
    for t in graph.ids() {
        let start = graph
            .predecessors(t)
            .iter()
            .map(|&p| finish[p.0] + edge(p, t))
            .fold(0.0, f64::max);
        finish[t.0] = start + duration(t);
    }
    finish.into_iter().fold(0.0, f64::max)
}
