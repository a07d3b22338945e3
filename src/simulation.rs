//! Simulated Cholesky runs on modelled platforms, reported next to their bounds: what
//! `hetla simulate` prints and `hetla sweep` repeats over configurations.
//!
//! One call builds the Cholesky graph once, simulates it with the [`runtime::simulate`](hetla_runtime::simulate)
//! executor, and computes the critical-path, area and mixed bounds of the same graph with
//! the same durations (the bounds ignore transfers; the simulation pays them), so a
//! noise-free simulated run can never beat its own mixed bound.
//!

use hetla_kernels::Precision;
use std::time::Instant;

use hetla_factorizations::{ProcessGrid, TaskId, Tiling};
use serde::Serialize;

use crate::graph_bounds::{
    BoundReport, DistributedBounds, DistributedGraph, cholesky_flops, cholesky_graph,
    distributed_bounds, graph_bounds,
};
use crate::model::{LinkRate, PlatformModel};
use crate::rank_plan::GridPlan;
use crate::{ClusterSpec, Error, Result};
use hetla_runtime::{
    KernelKey, ResourceKind, SimMessage, SimOptions, SimRank, SimWork, simulate, simulate_grid,
};
pub use hetla_runtime::{LinkBytes, node_name};
use hetla_runtime::{Trace, count_classes};

/// A worker's share of a simulated run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerBusy {
    /// Worker name ("cpu0", "gpu1").
    pub name: String,
    /// Its resource class.
    pub class: String,
    /// Tasks it ran.
    pub tasks: usize,
    /// Seconds in kernels over the makespan.
    pub busy_fraction: f64,
}

/// One simulated Cholesky run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// The precision of the simulated kernels.
    pub precision: Precision,
    /// Platform model name.
    pub platform: String,
    /// CPU cluster spec.
    pub clusters: String,
    /// GPUs used.
    pub gpus: usize,
    /// Matrix order.
    pub n: usize,
    /// Tile size.
    pub tile: usize,
    /// Scheduler name.
    pub scheduler: String,
    /// Which CPU kernel rates were used: "loaded" (the model's rates lowered by its
    /// loaded-machine reductions) or "alone" (the model gives none).
    pub cpu_rates: &'static str,
    /// Seed of the duration noise.
    pub seed: u64,
    /// Relative amplitude of the duration noise.
    pub noise: f64,
    /// Simulated makespan, in milliseconds.
    pub makespan_ms: f64,
    /// n^3/3 (times 4 in a complex precision) over the makespan, in Gflop/s.
    pub gflops: f64,
    /// Bounds of the same graph with the same durations.
    #[serde(flatten)]
    pub bounds: BoundReport,
    /// mixed bound / makespan (at most 1 without noise).
    pub efficiency: f64,
    /// Busy fraction of each worker.
    pub workers: Vec<WorkerBusy>,
    /// Bytes per link direction.
    pub bytes: Vec<LinkBytes>,
    /// Wall-clock seconds the simulation itself took (bounds excluded).
    pub simulation_seconds: f64,
}

/// Simulates the Cholesky factorisation of order `n` in tiles of `tile` on `model` with
/// CPU clusters `spec` and `gpus` GPUs; returns the report and the trace.
#[allow(clippy::too_many_arguments)]
pub fn simulate_cholesky(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    n: usize,
    tile: usize,
    precision: Precision,
    options: &SimOptions,
) -> Result<(SimReport, Trace)> {
    model.check_precision(precision)?;
    let platform = model.sim_platform(spec, gpus)?;
    let (graph, keys) = cholesky_graph(n, tile, precision)?;
    let tiling = Tiling::square(n, tile)?;
    let tile_bytes = |t: hetla_factorizations::TileRef| {
        let (rows, cols) = tiling.tile_shape(t.row, t.col);
        rows * cols * precision.bytes()
    };
    let duration = |key: &_, class: &_| model.duration(key, tile, class);
    let work = SimWork {
        graph: &graph,
        keys: &keys,
        tile_bytes: &tile_bytes,
        duration: &duration,
    };
    let start = Instant::now();
    let trace = simulate(&platform, &work, options)?;
    let simulation_seconds = start.elapsed().as_secs_f64();
    let classes = count_classes(platform.workers.iter().map(|w| w.class.clone()));
    let flops = cholesky_flops(n, precision);
    let bounds = graph_bounds(&graph, &keys, &classes, duration, flops)?;
    let summary = trace.summary();
    let makespan_ms = trace.makespan * 1e3;
    let report = SimReport {
        precision,
        cpu_rates: model.cpu_rates(),
        platform: model.name.clone(),
        clusters: spec.to_string(),
        gpus,
        n,
        tile,
        scheduler: options.run.scheduler.to_string(),
        seed: options.seed,
        noise: options.noise,
        makespan_ms,
        gflops: flops / trace.makespan.max(f64::MIN_POSITIVE) / 1e9,
        efficiency: bounds.mixed_ms / makespan_ms.max(f64::MIN_POSITIVE),
        bounds,
        workers: summary
            .workers
            .iter()
            .zip(&platform.workers)
            .map(|(s, w)| WorkerBusy {
                name: s.name.clone(),
                class: w.class.to_string(),
                tasks: s.tasks,
                busy_fraction: s.busy_fraction,
            })
            .collect(),
        bytes: summary.link_bytes(),
        simulation_seconds,
    };
    Ok((report, trace))
}

/// The network of a simulated distributed run, from `"latency,bandwidth"`: a latency with
/// a unit (`ns`, `us`, `ms`, `s`; microseconds without one) and a bandwidth with a unit
/// (`GB/s`, `MB/s`, or bits: `Gb/s`, `Mb/s`; GB/s without one). `"1.5us,100Gb/s"` is a
/// 100 Gb/s network (12.5 GB/s) with 1.5 µs per message.
pub fn parse_network(s: &str) -> std::result::Result<LinkRate, String> {
    let wrong = |why: &str| {
        format!(
            "{s:?} is not a network: {why}; expected \"latency,bandwidth\", for example \"1.5us,100Gb/s\" or \"2,12.5\" (µs, GB/s)"
        )
    };
    let (latency, bandwidth) = s.split_once(',').ok_or_else(|| wrong("no comma"))?;
    let number = |text: &str, units: &[(&str, f64)], what: &str| {
        let text = text.trim();
        let (value, scale) = units
            .iter()
            .find_map(|&(unit, scale)| text.strip_suffix(unit).map(|v| (v, scale)))
            .unwrap_or((text, 1.0));
        match value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
            _ => Err(wrong(&format!("{text:?} is not a {what}"))),
        }
    };
    let latency_us = number(
        latency,
        &[
            ("ns", 1e-3),
            ("us", 1.0),
            ("µs", 1.0),
            ("ms", 1e3),
            ("s", 1e6),
        ],
        "latency",
    )?;
    let gb_per_s = number(
        bandwidth,
        &[
            ("GB/s", 1.0),
            ("MB/s", 1e-3),
            ("Gb/s", 0.125),
            ("Mb/s", 0.125e-3),
        ],
        "bandwidth",
    )?;
    if gb_per_s <= 0.0 {
        return Err(wrong("the bandwidth must be above 0"));
    }
    Ok(LinkRate {
        latency_us,
        gb_per_s,
    })
}

/// One node's share of a simulated distributed run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeBusy {
    /// The node's rank.
    pub rank: usize,
    /// Tasks it ran.
    pub tasks: usize,
    /// Mean busy fraction of its CPU clusters (0 without).
    pub cpu_busy: f64,
    /// Mean busy fraction of its GPUs (0 without).
    pub gpu_busy: f64,
    /// Bytes it sent over the network.
    pub bytes_sent: usize,
    /// Bytes the 2D block-cyclic count says it sends.
    pub bytes_expected: usize,
}

/// One simulated distributed Cholesky run over nodes of one modelled machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridSimReport {
    /// Platform model of every node.
    pub platform: String,
    /// CPU clusters of each node.
    pub clusters: String,
    /// GPUs of each node.
    pub gpus: usize,
    /// Nodes (one rank each).
    pub nodes: usize,
    /// The process grid.
    pub grid: String,
    /// Latency of one message, in microseconds.
    pub network_latency_us: f64,
    /// Bandwidth of each node's NIC, each way, in GB/s.
    pub network_gb_per_s: f64,
    /// Matrix order.
    pub n: usize,
    /// Tile size.
    pub tile: usize,
    /// Scheduler of every node.
    pub scheduler: String,
    /// Which CPU kernel rates were used (see [`SimReport::cpu_rates`]).
    pub cpu_rates: &'static str,
    /// Seed of the duration noise.
    pub seed: u64,
    /// Relative amplitude of the duration noise.
    pub noise: f64,
    /// Simulated makespan, in milliseconds.
    pub makespan_ms: f64,
    /// n^3/3 (times 4 in a complex precision) over the makespan, in Gflop/s.
    pub gflops: f64,
    /// Gflop/s per node.
    pub gflops_per_node: f64,
    /// The bounds of the run.
    #[serde(flatten)]
    pub bounds: DistributedBounds,
    /// bound / makespan (at most 1 without noise).
    pub efficiency: f64,
    /// Messages sent in all (one per tile and destination).
    pub messages: usize,
    /// Bytes sent in all.
    pub bytes_sent: usize,
    /// Each node's share.
    pub ranks: Vec<NodeBusy>,
    /// Wall-clock seconds the simulation itself took (bounds excluded).
    pub simulation_seconds: f64,
}

/// Simulates the distributed Cholesky factorisation of order `n` in tiles of `tile` on
/// `grid.size()` nodes, each the machine `model` with CPU clusters `spec` and `gpus` GPUs,
/// connected by `network`: each node runs the tasks of the tiles it owns with its own
/// scheduler and memory, and sends each final tile once to each node that reads it, as
/// `hetla cholesky --grid` does under `mpirun` (the same split of the graph). Returns the
/// report and the run as one trace: every node's workers, named `node{rank}.{worker}`, and
/// their tasks under the whole graph's ids (copies inside a node are left out: their
/// memory nodes are each node's own).
#[allow(clippy::too_many_arguments)]
pub fn simulate_cholesky_grid(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    n: usize,
    tile: usize,
    grid: ProcessGrid,
    network: LinkRate,
    options: &SimOptions,
) -> Result<(GridSimReport, Trace)> {
    let platform = model.sim_platform(spec, gpus)?;
    let (graph, keys) = cholesky_graph(n, tile, Precision::D)?;
    let tiling = Tiling::square(n, tile)?;
    let plan = GridPlan::new(&graph, &grid).map_err(|e| Error::InvalidOption {
        option: "grid",
        reason: e.to_string(),
    })?;
    let tile_bytes = |t: hetla_factorizations::TileRef| {
        let (rows, cols) = tiling.tile_shape(t.row, t.col);
        rows * cols * size_of::<f64>()
    };
    let duration = |key: &_, class: &_| model.duration(key, tile, class);
    let rank_keys: Vec<Vec<KernelKey>> = plan
        .ranks
        .iter()
        .map(|r| r.whole.iter().map(|&t| keys[t.0].clone()).collect())
        .collect();
    let ranks: Vec<SimRank> = plan
        .ranks
        .iter()
        .zip(&rank_keys)
        .map(|(r, keys)| SimRank {
            platform: &platform,
            work: SimWork {
                graph: &r.graph,
                keys,
                tile_bytes: &tile_bytes,
                duration: &duration,
            },
            priorities: Some(&r.priorities),
        })
        .collect();
    let messages: Vec<SimMessage> = plan
        .messages
        .iter()
        .map(|m| {
            // A Cholesky graph sends every tile after its last write, never as it starts.
            debug_assert!(m.version.is_some());
            let to = &plan.ranks[m.to.0].receives;
            let readers = to
                .binary_search_by_key(&m.tile, |(t, _)| *t)
                .map(|i| to[i].1.clone())
                .unwrap_or_default();
            SimMessage {
                tile: m.tile,
                from: m.from.0,
                writer: m.version.map_or(TaskId(0), |v| plan.local[v.0]),
                to: m.to.0,
                readers,
            }
        })
        .collect();
    let start = Instant::now();
    let run = simulate_grid(&ranks, &messages, Some(network), options)?;
    let simulation_seconds = start.elapsed().as_secs_f64();

    let nodes = grid.size();
    let node_classes = count_classes(platform.workers.iter().map(|w| w.class.clone()));
    let flops = cholesky_flops(n, Precision::D);
    let bounds = distributed_bounds(
        &DistributedGraph {
            graph: &graph,
            keys: &keys,
            plan: &plan,
            grid,
        },
        &node_classes,
        duration,
        tile_bytes,
        network,
        flops,
    )?;
    let mut bytes_sent = vec![0usize; nodes];
    for m in &run.messages {
        bytes_sent[m.from] += m.bytes;
    }
    let bytes_expected = hetla_factorizations::bytes_sent(&grid, &plan.messages, tile_bytes);
    let makespan_ms = run.makespan * 1e3;
    let mean_busy = |trace: &Trace, kind: ResourceKind| {
        let summary = trace.summary();
        let busy: Vec<f64> = summary
            .workers
            .iter()
            .zip(&trace.workers)
            .filter(|(_, w)| w.kind == kind)
            .map(|(s, _)| s.busy_fraction)
            .collect();
        if busy.is_empty() {
            0.0
        } else {
            busy.iter().sum::<f64>() / busy.len() as f64
        }
    };
    let gflops = flops / run.makespan.max(f64::MIN_POSITIVE) / 1e9;
    let report = GridSimReport {
        platform: model.name.clone(),
        clusters: spec.to_string(),
        gpus,
        nodes,
        grid: grid.to_string(),
        network_latency_us: network.latency_us,
        network_gb_per_s: network.gb_per_s,
        n,
        tile,
        scheduler: options.run.scheduler.to_string(),
        cpu_rates: model.cpu_rates(),
        seed: options.seed,
        noise: options.noise,
        makespan_ms,
        gflops,
        gflops_per_node: gflops / nodes as f64,
        efficiency: bounds.bound_ms / makespan_ms.max(f64::MIN_POSITIVE),
        bounds,
        messages: run.messages.len(),
        bytes_sent: bytes_sent.iter().sum(),
        ranks: run
            .ranks
            .iter()
            .enumerate()
            .map(|(rank, trace)| NodeBusy {
                rank,
                tasks: trace.tasks.len(),
                cpu_busy: mean_busy(trace, ResourceKind::Cpu),
                gpu_busy: mean_busy(trace, ResourceKind::Gpu),
                bytes_sent: bytes_sent[rank],
                bytes_expected: bytes_expected[rank],
            })
            .collect(),
        simulation_seconds,
    };
    let mut workers = Vec::new();
    let mut tasks = Vec::new();
    for (rank, (trace, share)) in run.ranks.into_iter().zip(&plan.ranks).enumerate() {
        let first = workers.len();
        workers.extend(trace.workers.into_iter().map(|mut w| {
            w.name = format!("node{rank}.{}", w.name);
            w
        }));
        tasks.extend(trace.tasks.into_iter().map(|mut e| {
            e.task = share.whole[e.task.0];
            e.worker = hetla_runtime::WorkerId(e.worker.0 + first);
            e
        }));
    }
    Ok((report, Trace::new(workers, tasks, run.makespan)))
}
