//! Makespan lower bounds of hetla's task graphs (critical path, area, mixed; see
//! `hetla-bounds`), with durations taken from a platform model or from the performance
//! models a run recorded, reported in milliseconds and in Gflop/s.
//!
//! Tasks with the same [`KernelKey`] (operation and operand shapes) share a type, so a
//! ragged edge tile is its own type. Resource classes are the worker classes with their
//! counts; a class has no duration for a key it has no model of (it is treated as unable
//! to run it). Durations go to the LPs in milliseconds, which keeps their coefficients
//! near 1.

use std::collections::HashMap;
use std::time::Instant;

use hetla_bounds::{Class, Instance};
use hetla_factorizations::{TaskGraph, Tiling};
use serde::Serialize;

use crate::calibrate::CHOLESKY_OPS;
use crate::model::PlatformModel;
use crate::{ClusterSpec, Result};
use hetla_runtime::{KernelKey, PerfModels, ResourceClass, Trace, WorkerInfo, count_classes};

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

/// Bounds of `graph`, whose task `i` has kernel `keys[i]`, on `classes` (class and count),
/// with `duration(key, class)` in seconds (`None`: the class cannot run the key); rates are
/// `flops` over each bound.
pub fn graph_bounds(
    graph: &TaskGraph,
    keys: &[KernelKey],
    classes: &[(ResourceClass, usize)],
    mut duration: impl FnMut(&KernelKey, &ResourceClass) -> Option<f64>,
    flops: f64,
) -> Result<BoundReport> {
    let (types, type_keys) = kernel_types(keys);
    typed_bounds(
        graph,
        types,
        type_keys.len(),
        classes,
        |t, class| duration(type_keys[t], class),
        flops,
    )
}

/// The critical-path and area bounds of `graph` (as [`graph_bounds`]), in milliseconds,
/// without the mixed bound: its linear program has a variable per task and class, which
/// takes minutes to solve past some 10^5 tasks; these two take one pass over the graph
/// and a program per kernel.
pub fn cp_and_area_ms(
    graph: &TaskGraph,
    keys: &[KernelKey],
    classes: &[(ResourceClass, usize)],
    mut duration: impl FnMut(&KernelKey, &ResourceClass) -> Option<f64>,
) -> Result<(f64, f64)> {
    let (types, type_keys) = kernel_types(keys);
    let instance = typed_instance(graph, types, type_keys.len(), classes, |t, class| {
        duration(type_keys[t], class)
    })?;
    Ok((instance.critical_path().length, instance.area()?.makespan))
}

/// Each task's type (its kernel's index among the distinct kernels), and the kernels.
fn kernel_types(keys: &[KernelKey]) -> (Vec<usize>, Vec<&KernelKey>) {
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

/// The bounds' instance of `graph` whose task `i` has type `types[i]` (< `type_count`),
/// with `duration(type, class)` in seconds.
fn typed_instance(
    graph: &TaskGraph,
    types: Vec<usize>,
    type_count: usize,
    classes: &[(ResourceClass, usize)],
    mut duration: impl FnMut(usize, &ResourceClass) -> Option<f64>,
) -> Result<Instance> {
    let predecessors: Vec<Vec<usize>> = graph
        .ids()
        .map(|i| graph.predecessors(i).iter().map(|p| p.0).collect())
        .collect();
    let bound_classes: Vec<Class> = classes
        .iter()
        .map(|(class, count)| {
            let durations = (0..type_count)
                .map(|t| duration(t, class).map(|s| s * 1e3))
                .collect();
            Class::new(class.to_string(), *count, durations)
        })
        .collect();
    Ok(Instance::new(types, predecessors, bound_classes)?)
}

/// Bounds of `graph` whose task `i` has type `types[i]` (< `type_count`), with
/// `duration(type, class)` in seconds.
fn typed_bounds(
    graph: &TaskGraph,
    types: Vec<usize>,
    type_count: usize,
    classes: &[(ResourceClass, usize)],
    duration: impl FnMut(usize, &ResourceClass) -> Option<f64>,
    flops: f64,
) -> Result<BoundReport> {
    let start = Instant::now();
    let instance = typed_instance(graph, types, type_count, classes, duration)?;
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

/// The Cholesky graph of an `n x n` matrix in `tile x tile` tiles and its tasks' kernels.
pub fn cholesky_graph(n: usize, tile: usize) -> Result<(TaskGraph, Vec<KernelKey>)> {
    crate::limits::check_cholesky(n, tile, 0)?;
    let tiling = Tiling::square(n, tile)?;
    let graph = hetla_factorizations::cholesky(&tiling)?;
    let keys = graph
        .tasks()
        .iter()
        .map(|t| KernelKey::of_task(t, |r| tiling.tile_shape(r.row, r.col)))
        .collect();
    Ok((graph, keys))
}

/// Flops of an n x n Cholesky factorisation as rates are reported: n^3 / 3.
pub fn cholesky_flops(n: usize) -> f64 {
    (n as f64).powi(3) / 3.0
}

/// Bounds of the Cholesky factorisation of order `n` in tiles of `tile` on a modelled
/// platform with CPU clusters `spec` and `gpus` GPUs.
pub fn model_cholesky_bounds(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    n: usize,
    tile: usize,
) -> Result<BoundReport> {
    model.check_tile(&CHOLESKY_OPS, tile, gpus)?;
    let classes = model.classes(spec, gpus)?;
    let (graph, keys) = cholesky_graph(n, tile)?;
    graph_bounds(
        &graph,
        &keys,
        &classes,
        |key, class| model.duration(key, tile, class),
        cholesky_flops(n),
    )
}

/// Bounds of the Cholesky factorisation of order `n` in tiles of `tile` on `workers`, with
/// the mean durations of `models` (for example those of the run that just finished).
pub fn measured_cholesky_bounds(
    models: &PerfModels,
    workers: &[WorkerInfo],
    n: usize,
    tile: usize,
) -> Result<BoundReport> {
    let (graph, keys) = cholesky_graph(n, tile)?;
    graph_bounds(
        &graph,
        &keys,
        &count_classes(workers.iter().map(|w| w.class.clone())),
        |key, class| {
            models
                .get(key, class)
                .filter(|s| s.samples > 0)
                .map(|s| s.mean)
        },
        cholesky_flops(n),
    )
}

/// Graphs up to this many tasks get one type per task in [`run_cholesky_bounds`]; larger
/// ones one per kernel and class (see there).
pub const PER_TASK_TYPES_UP_TO: usize = 10_000;

/// Bounds of the Cholesky factorisation of order `n` in tiles of `tile` from the task
/// durations `trace` measured (above [`PER_TASK_TYPES_UP_TO`] tasks: each kernel's shortest
/// duration on the class that ran it, a weaker bound that stays below the run): each task is its own type, allowed only on the class of the
/// worker that ran it, with the duration it took there. The run's own schedule satisfies
/// every constraint of these bounds, so they are lower bounds of this very run: its
/// makespan is at least the mixed bound (efficiency <= 1), whatever the noise.
pub fn run_cholesky_bounds(trace: &Trace, n: usize, tile: usize) -> Result<BoundReport> {
    let (graph, keys) = cholesky_graph(n, tile)?;
    let classes = count_classes(trace.workers.iter().map(|w| w.class.clone()));
    let mut ran = vec![None; graph.len()];
    for event in &trace.tasks {
        if let Some(slot) = ran.get_mut(event.task.0) {
            *slot = Some((&trace.workers[event.worker].class, event.end - event.start));
        }
    }
    if let Some(task) = ran.iter().position(Option::is_none) {
        return Err(crate::Error::Runtime(hetla_runtime::Error::Plan {
            reason: format!("task {task} of the graph has no event in the trace"),
        }));
    }
    if graph.len() > PER_TASK_TYPES_UP_TO {
        // One type per (kernel, class that ran it), lasting the shortest such task: every
        // task lasted at least that, so these are still bounds of this run, and the linear
        // program has tens of types instead of one per task (minutes at 300k tasks).
        let mut type_of: Vec<(&KernelKey, &ResourceClass)> = Vec::new();
        let mut shortest: Vec<f64> = Vec::new();
        let types = (0..graph.len())
            .map(|t| {
                let (class, seconds) = ran[t].expect("every task ran");
                let id = (&keys[t], class);
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
            &graph,
            types,
            type_of.len(),
            &classes,
            |t, class| (type_of[t].1 == class).then_some(shortest[t]),
            cholesky_flops(n),
        );
    }
    typed_bounds(
        &graph,
        (0..graph.len()).collect(),
        graph.len(),
        &classes,
        |t, class| ran[t].and_then(|(c, d)| (c == class).then_some(d)),
        cholesky_flops(n),
    )
}
