//! Simulated runs of a plan on a modelled machine, reported next to their bounds: what
//! `hetla simulate` prints and `hetla sweep` repeats over configurations.
//!
//! One call simulates the plan's graph with the runtime's simulated executor
//! ([`hetla_runtime::simulate`]: the same schedulers and data layer as a real run, on a virtual
//! clock) and computes the critical-path, area and mixed bounds of the same graph with the same
//! durations (the bounds ignore transfers; the simulation pays them), so a noise-free simulated run
//! can never beat its own mixed bound. Over several nodes ([`simulate_grid`]) the plan is split as
//! a distributed run splits it ([`Plan::split`]), and each node runs its share on its own modelled
//! machine.

use std::time::Instant;

use hetla::{BoundReport, DistributedBounds, Plan, Precision};
use hetla_factorizations::{ProcessGrid, TaskId, bytes_sent};
use hetla_runtime::{
    GpuSharing, KernelKey, LinkBytes, LinkRate, ResourceClass, ResourceKind, SimMessage,
    SimOptions, SimPlatform, SimRank, SimWork, Trace, WorkerId, count_classes,
    simulate as simulate_work, simulate_grid as simulate_work_grid,
};
use serde::Serialize;

use crate::Result;
use crate::model::Modelled;

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

/// One simulated run of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// What was simulated ([`hetla::Algorithm::name`]; the key is absent for Cholesky, as the first
    /// reports had none).
    #[serde(skip_serializing_if = "is_cholesky")]
    pub algorithm: hetla::Algorithm,
    /// The precision of the simulated kernels.
    pub precision: Precision,
    /// Platform model name.
    pub platform: String,
    /// CPU cluster spec.
    pub clusters: String,
    /// GPUs used.
    pub gpus: usize,
    /// Each GPU's compute streams: kernels it runs at once, sharing its rate (the key is absent for
    /// one, as reports had none before).
    #[serde(skip_serializing_if = "is_one")]
    pub compute_streams: usize,
    /// Matrix order.
    pub n: usize,
    /// Tile size.
    pub tile: usize,
    /// The tail of smaller tiles at the end (absent without one, [`Plan::with_tail`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<hetla::Tail>,
    /// Scheduler name.
    pub scheduler: hetla_runtime::SchedulerKind,
    /// Which CPU kernel rates were used: "loaded" (the model's rates lowered by its loaded-machine
    /// reductions) or "alone" (the model gives none).
    pub cpu_rates: &'static str,
    /// Seed of the duration noise.
    pub seed: u64,
    /// Relative amplitude of the duration noise.
    pub noise: f64,
    /// Simulated makespan, in milliseconds.
    pub makespan_ms: f64,
    /// The plan's flops (n^3/3 for Cholesky, 2 n^3/3 for LU, times 4 in a complex precision) over
    /// the makespan, in Gflop/s.
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

/// Simulates `plan` on `machine` (its model, clusters and GPUs; the plan's precision and tile): the
/// report, with the bounds of the same graph and durations, and the trace.
pub fn simulate(
    plan: &Plan,
    machine: &Modelled<'_>,
    options: &SimOptions,
) -> Result<(SimReport, Trace)> {
    let model = machine.model;
    model.check_precision(plan.precision())?;
    check_tiles(plan, machine)?;
    let platform = machine.sim_platform_for(plan)?;
    let tile = plan.tile();
    let start = Instant::now();
    let trace = simulate_plan(plan, machine, &platform, options)?;
    let duration = durations(plan, machine);
    let simulation_seconds = start.elapsed().as_secs_f64();
    let bounds = shared_bounds(plan, &platform, duration)?;
    let summary = trace.summary();
    let makespan_ms = trace.makespan * 1e3;
    let report = SimReport {
        algorithm: plan.algorithm(),
        precision: plan.precision(),
        cpu_rates: model.cpu_rates(),
        platform: model.name.clone(),
        clusters: machine.clusters.to_string(),
        gpus: machine.gpus,
        compute_streams: platform.compute_streams,
        n: plan.algorithm().order(),
        tile,
        tail: plan.tail(),
        scheduler: options.run.scheduler,
        seed: options.seed,
        noise: options.noise,
        makespan_ms,
        gflops: plan.flops() / trace.makespan.max(f64::MIN_POSITIVE) / 1e9,
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

/// `plan`'s graph simulated on `platform` (`machine`'s), each task lasting its kernel's duration in
/// `machine`'s model at the plan's tile, with what the plan imposes on its runs
/// ([`Plan::run_options`]) over `options`.
pub(crate) fn simulate_plan(
    plan: &Plan,
    machine: &Modelled<'_>,
    platform: &SimPlatform,
    options: &SimOptions,
) -> Result<Trace> {
    let tile_bytes = |t| plan.tile_bytes(t);
    let duration = durations(plan, machine);
    let work = SimWork {
        graph: plan.graph(),
        keys: plan.keys(),
        tile_bytes: &tile_bytes,
        duration: &duration,
    };
    // Its GPUs' budgets: an out-of-core run's order (`Plan::run_options_for`).
    let budgets: Vec<usize> = (platform.capacities.iter().skip(1).flatten().copied()).collect();
    let options = SimOptions {
        run: plan.run_options_for(&budgets, &options.run),
        ..options.clone()
    };
    Ok(simulate_work(platform, &work, &options)?)
}

/// Whether a report is of a Cholesky factorisation (whose reports carry no `algorithm` key).
fn is_cholesky(algorithm: &hetla::Algorithm) -> bool {
    matches!(algorithm, hetla::Algorithm::Cholesky { .. })
}

/// Bounds of `plan` on `machine`, computed without running anything (the durations of the model's
/// rates at the plan's tile).
pub fn bounds(plan: &Plan, machine: &Modelled<'_>) -> Result<BoundReport> {
    check_tiles(plan, machine)?;
    let platform = machine.sim_platform()?;
    shared_bounds(plan, &platform, durations(plan, machine))
}

/// Checks that `machine`'s model has rates for `plan`'s kernels at its tile, and at its tail's
/// ([`Plan::rate_tile`]), and that the GPUs asked for have work.
fn check_tiles(plan: &Plan, machine: &Modelled<'_>) -> Result<()> {
    let ops = (&plan.ops()[..], &plan.gpu_ops()[..]);
    let tiles = std::iter::once(plan.tile()).chain(plan.tail().map(|t| t.tile));
    for tile in tiles {
        (machine.model).check_tile(ops, tile, plan.precision(), machine.gpus)?;
    }
    Ok(())
}

/// Each of `plan`'s tasks' duration on a class of `machine`: its kernel's flops at the model's rate
/// at the tile that times it ([`Plan::rate_tile`]: the plan's, or its tail's).
fn durations<'p>(
    plan: &'p Plan,
    machine: &'p Modelled<'_>,
) -> impl Fn(&KernelKey, &ResourceClass) -> Option<f64> + Copy + 'p {
    let model = machine.model;
    move |key, class| model.duration(key, plan.rate_tile(key), class)
}

/// How the GPUs of `platform` share their rate among `plan`'s kernels of durations `duration`.
fn sharing(
    plan: &Plan,
    platform: &SimPlatform,
    duration: impl Fn(&KernelKey, &ResourceClass) -> Option<f64>,
) -> GpuSharing {
    let classes: Vec<ResourceClass> = platform.workers.iter().map(|w| w.class.clone()).collect();
    GpuSharing::new(platform.compute_streams, plan.keys(), &classes, duration)
}

/// The bounds of `plan` on `platform`'s workers with durations `duration`, each GPU running as many
/// kernels at once as the platform's compute streams, sharing its rate as the simulator does.
fn shared_bounds(
    plan: &Plan,
    platform: &SimPlatform,
    duration: impl Fn(&KernelKey, &ResourceClass) -> Option<f64> + Copy,
) -> Result<BoundReport> {
    let classes = count_classes(platform.workers.iter().map(|w| w.class.clone()));
    let sharing = sharing(plan, platform, duration);
    Ok(plan.shared_bounds(&classes, duration, &sharing)?)
}

/// The network of a simulated distributed run, from `"latency,bandwidth"`: a latency with a unit
/// (`ns`, `us`, `ms`, `s`; microseconds without one) and a bandwidth with a unit (`GB/s`, `MB/s`,
/// or bits: `Gb/s`, `Mb/s`; GB/s without one). `"1.5us,100Gb/s"` is a 100 Gb/s network (12.5 GB/s)
/// with 1.5 µs per message.
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

/// One simulated distributed run of a plan over nodes of one modelled machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridSimReport {
    /// What was simulated ([`hetla::Algorithm::name`]; the key is absent for Cholesky, as the first
    /// reports had none).
    #[serde(skip_serializing_if = "is_cholesky")]
    pub algorithm: hetla::Algorithm,
    /// The precision of the simulated kernels (the key is absent in d).
    #[serde(skip_serializing_if = "is_double")]
    pub precision: Precision,
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
    pub scheduler: hetla_runtime::SchedulerKind,
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

/// Simulates `plan` split over `grid.size()` nodes, each the machine `machine`, connected by
/// `network`: each node runs the tasks of the tiles it owns with its own scheduler and memory, and
/// sends each final tile once to each node that reads it, as `hetla cholesky --grid` does under
/// `mpirun` (the same split, [`Plan::split`]). Returns the report and the run as one trace: every
/// node's workers, named `node{rank}.{worker}`, and their tasks under the whole graph's ids (copies
/// inside a node are left out: their memory nodes are each node's own).
pub fn simulate_grid(
    plan: &Plan,
    machine: &Modelled<'_>,
    grid: ProcessGrid,
    network: LinkRate,
    options: &SimOptions,
) -> Result<(GridSimReport, Trace)> {
    let model = machine.model;
    model.check_precision(plan.precision())?;
    let platform = machine.sim_platform()?;
    let split = plan.split(&grid)?;
    let tile = plan.tile();
    // A tile's bytes as its messages carry it (for LU, a panel from its diagonal down: its block
    // columns run on CPU clusters only, so no copy inside a node is sized by it).
    let tile_bytes = |t| plan.message_bytes(t);
    let duration = durations(plan, machine);
    let rank_keys: Vec<Vec<KernelKey>> = split
        .ranks
        .iter()
        .map(|r| r.whole.iter().map(|&t| plan.keys()[t.0].clone()).collect())
        .collect();
    let ranks: Vec<SimRank> = split
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
    let messages: Vec<SimMessage> = split
        .messages
        .iter()
        .map(|m| {
            let to = &split.ranks[m.to.0].receives;
            let readers = to
                .binary_search_by_key(&(m.tile, m.version), |r| (r.tile, r.version))
                .map(|i| to[i].readers.clone())
                .unwrap_or_default();
            SimMessage {
                tile: m.tile,
                from: m.from.0,
                writer: m.version.map(|v| split.local[v.0]),
                to: m.to.0,
                readers,
            }
        })
        .collect();
    // The plan's restrictions (QR's kernels on CPU clusters only) and preferences hold on every
    // node.
    let options = SimOptions {
        run: plan.run_options(&options.run),
        ..options.clone()
    };
    let start = Instant::now();
    let run = simulate_work_grid(&ranks, &messages, Some(network), &options)?;
    let simulation_seconds = start.elapsed().as_secs_f64();

    let nodes = grid.size();
    let node_classes = count_classes(platform.workers.iter().map(|w| w.class.clone()));
    let sharing = sharing(plan, &platform, duration);
    let bounds =
        plan.distributed_bounds(&split, &grid, &node_classes, duration, network, &sharing)?;
    let mut sent_by_rank = vec![0usize; nodes];
    for m in &run.messages {
        sent_by_rank[m.from] += m.bytes;
    }
    let bytes_expected = bytes_sent(&grid, &split.messages, tile_bytes);
    let makespan_ms = run.makespan * 1e3;
    let gflops = plan.flops() / run.makespan.max(f64::MIN_POSITIVE) / 1e9;
    let report = GridSimReport {
        algorithm: plan.algorithm(),
        precision: plan.precision(),
        platform: model.name.clone(),
        clusters: machine.clusters.to_string(),
        gpus: machine.gpus,
        nodes,
        grid: grid.to_string(),
        network_latency_us: network.latency_us,
        network_gb_per_s: network.gb_per_s,
        n: plan.algorithm().order(),
        tile,
        scheduler: options.run.scheduler,
        cpu_rates: model.cpu_rates(),
        seed: options.seed,
        noise: options.noise,
        makespan_ms,
        gflops,
        gflops_per_node: gflops / nodes as f64,
        efficiency: bounds.bound_ms / makespan_ms.max(f64::MIN_POSITIVE),
        bounds,
        messages: run.messages.len(),
        bytes_sent: sent_by_rank.iter().sum(),
        ranks: run
            .ranks
            .iter()
            .enumerate()
            .map(|(rank, trace)| NodeBusy {
                rank,
                tasks: trace.tasks.len(),
                cpu_busy: mean_busy(trace, ResourceKind::Cpu),
                gpu_busy: mean_busy(trace, ResourceKind::Gpu),
                bytes_sent: sent_by_rank[rank],
                bytes_expected: bytes_expected[rank],
            })
            .collect(),
        simulation_seconds,
    };
    let whole: Vec<&[TaskId]> = split.ranks.iter().map(|r| r.whole.as_slice()).collect();
    Ok((report, one_trace(run.ranks, &whole, run.makespan)))
}

/// The mean busy fraction of `trace`'s workers of `kind` (0 without one).
fn mean_busy(trace: &Trace, kind: ResourceKind) -> f64 {
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
}

/// The ranks' traces as one: every rank's workers, named `node{rank}.{worker}`, and their tasks
/// under the whole graph's ids (`whole[rank]` maps a rank's task ids to the whole graph's).
fn one_trace(ranks: Vec<Trace>, whole: &[&[TaskId]], makespan: f64) -> Trace {
    let mut workers = Vec::new();
    let mut tasks = Vec::new();
    for (rank, (trace, whole)) in ranks.into_iter().zip(whole).enumerate() {
        let first = workers.len();
        workers.extend(trace.workers.into_iter().map(|mut w| {
            w.name = format!("node{rank}.{}", w.name);
            w
        }));
        tasks.extend(trace.tasks.into_iter().map(|mut e| {
            e.task = whole[e.task.0];
            e.worker = WorkerId(e.worker.0 + first);
            e
        }));
    }
    Trace::new(workers, tasks, makespan)
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

fn is_double(p: &Precision) -> bool {
    *p == Precision::D
}
