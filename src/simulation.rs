//! Simulated Cholesky runs on modelled platforms, reported next to their bounds: what
//! `hetla simulate` prints and `hetla sweep` repeats over configurations.
//!
//! One call builds the Cholesky graph once, simulates it with the [`runtime::simulate`](hetla_runtime::simulate)
//! executor, and computes the critical-path, area and mixed bounds of the same graph with
//! the same durations (the bounds ignore transfers; the simulation pays them), so a
//! noise-free simulated run can never beat its own mixed bound.
//!

use std::time::Instant;

use hetla_factorizations::Tiling;
use serde::Serialize;

use crate::graph_bounds::{BoundReport, cholesky_flops, cholesky_graph, graph_bounds};
use crate::model::PlatformModel;
use crate::{ClusterSpec, Result};
pub use hetla_runtime::{LinkBytes, node_name};
use hetla_runtime::{SimOptions, SimWork, simulate};
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
    /// n^3/3 over the makespan, in Gflop/s.
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
pub fn simulate_cholesky(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    n: usize,
    tile: usize,
    options: &SimOptions,
) -> Result<(SimReport, Trace)> {
    let platform = model.sim_platform(spec, gpus)?;
    let (graph, keys) = cholesky_graph(n, tile)?;
    let tiling = Tiling::square(n, tile)?;
    let tile_bytes = |t: hetla_factorizations::TileRef| {
        let (rows, cols) = tiling.tile_shape(t.row, t.col);
        rows * cols * size_of::<f64>()
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
    let flops = cholesky_flops(n);
    let bounds = graph_bounds(&graph, &keys, &classes, duration, flops)?;
    let summary = trace.summary();
    let makespan_ms = trace.makespan * 1e3;
    let report = SimReport {
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
