//! The `hetla` command line: factor generated SPD matrices on CPU core clusters, compare
//! with the peers, calibrate performance models, and show the machine.

mod commands;
mod memory;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use faer::MatMut;
use hetla::calibrate::{
    IN_RUN_TILES, calibrate, calibrate_links, calibration_steps, in_run_steps, link_steps,
    record_in_run,
};
use hetla::graph_bounds::{
    BoundReport, measured_cholesky_bounds, model_cholesky_bounds, run_cholesky_bounds,
};
use hetla::model::PlatformModel;
use hetla::runtime::{GpuSelection, ModelStore, Platform};
use hetla::runtime::{KernelSummary, LinkBytes, WorkerSummary};
use hetla::{
    Backend, Cholesky, ClusterSpec, Gantt, Par, SchedulerKind, Topology, check, matgen, peers,
};
use serde::Serialize;

/// Factorisations `calibrate --output` times per cluster spec and tile size.
const IN_RUN_FACTORISATIONS: usize = 5;

#[global_allocator]
static ALLOCATOR: memory::CountingAllocator = memory::CountingAllocator;

/// Tiled Cholesky on a heterogeneous node: factor, time and check.
#[derive(Parser)]
#[command(name = "hetla", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Factor a generated random SPD matrix; print seconds, Gflop/s and the scaled residual.
    Cholesky(CholeskyArgs),
    /// Time the tile kernels on each cluster class and store the performance models.
    Calibrate(CalibrateArgs),
    /// Show the topology, the clusters a spec makes and the kernel backends built in.
    Info(InfoArgs),
    /// Lower bounds (critical path, area, mixed) on the Cholesky makespan on a modelled
    /// platform, computed without running anything.
    Bound(BoundArgs),
    /// Simulate the Cholesky factorisation on a modelled platform (virtual clock, same
    /// scheduler and data layer as real runs) and report it next to its bounds.
    Simulate(commands::simulate::SimulateArgs),
    /// Simulate (or run) every combination of cluster specs, GPU counts, orders and tile
    /// sizes; write results.csv, results.json and SVG plots.
    Sweep(commands::sweep::SweepArgs),
    /// Multiply matrices (C <- alpha op(A) op(B) + beta C) with a chosen allocation
    /// strategy; report time, bytes moved and their lower bound. `--platform` simulates.
    Gemm(Box<commands::gemm::GemmArgs>),
}

#[derive(Args, Clone)]
struct PlatformArgs {
    /// Kernel backend: faer or openblas (the latter needs the `openblas` feature).
    #[arg(long, default_value = "faer", value_parser = parse_backend)]
    backend: Backend,
    /// Directory of the performance models (default: $HETLA_PERFMODEL_DIR, else the user's
    /// cache directory).
    #[arg(long)]
    perfmodel_dir: Option<PathBuf>,
}

impl PlatformArgs {
    fn store(&self) -> ModelStore {
        self.perfmodel_dir
            .clone()
            .map_or(ModelStore::Default, ModelStore::Dir)
    }
}

#[derive(Args, Clone)]
struct GpuArgs {
    /// GPUs to use: all, none, indices ("0,1"), or emulated:K (K devices emulated in host
    /// memory: CPU kernels and real copies, the GPU code paths on any machine). Each GPU
    /// reserves one core for its host thread.
    #[arg(long, default_value = "all", value_parser = parse_gpus)]
    gpus: GpuSelection,
    /// Memory budget for tiles on each GPU: bytes, or with KiB, MiB, GiB ("8GiB")
    /// (default: 90% of its free memory; emulated devices: no limit).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    gpu_memory: Option<usize>,
}

impl GpuArgs {
    /// The platform of `spec` with the selected GPUs.
    fn platform(&self, spec: &ClusterSpec, cpu: &PlatformArgs) -> hetla::Result<Platform> {
        let devices = self.gpus.open(self.gpu_memory)?;
        Ok(Platform::with_devices(
            spec,
            cpu.backend,
            cpu.store(),
            devices,
        )?)
    }
}

/// Bytes from "123", "512KiB", "64MiB" or "8GiB" (also K, M, G: binary units).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}: use bytes or KiB, MiB, GiB (\"8GiB\")"
            ));
        }
    };
    match number.parse::<f64>() {
        Ok(x)
            if x.is_finite()
                && x * scale as f64 >= 1.0
                && x * (scale as f64) < usize::MAX as f64 =>
        {
            Ok((x * scale as f64) as usize)
        }
        Ok(x) if x.is_finite() && x > 0.0 && x * (scale as f64) < 1.0 => Err(format!(
            "{s:?} is less than one byte: give bytes or KiB, MiB, GiB (\"8GiB\")"
        )),
        _ => Err(format!(
            "{s:?} is not a positive size (\"8GiB\", \"512MiB\", bytes)"
        )),
    }
}

/// A whole number >= 1 (matrix orders, tile sizes, sample counts).
fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1, got 0".into()),
        Ok(v) => Ok(v),
        Err(_) => Err(format!("{s:?} is not a whole number >= 1")),
    }
}

fn parse_gpus(s: &str) -> Result<GpuSelection, String> {
    s.parse::<GpuSelection>().map_err(|e| e.to_string())
}

#[derive(Args)]
struct CholeskyArgs {
    /// Order of the matrix.
    #[arg(long, default_value_t = 4096, value_parser = parse_positive)]
    n: usize,
    /// Tile size (default: chosen from n and the backend, see `hetla::default_tile_size`).
    #[arg(long, value_parser = parse_positive)]
    tile: Option<usize>,
    /// Seed of the matrix generator (`hetla::matgen::random_spd`).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists
    /// ("0/1") or auto.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    clusters: ClusterSpec,
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    scheduler: SchedulerKind,
    #[command(flatten)]
    platform: PlatformArgs,
    #[command(flatten)]
    gpu: GpuArgs,
    /// Also time faer's Cholesky, OpenBLAS dpotrf (feature `openblas`) and a DGEMM of the
    /// same n, in this process, on all available cores.
    #[arg(long)]
    compare: bool,
    /// One untimed warm-up, then R timed factorisations (each of a fresh copy of the
    /// matrix): the report gives the best (`seconds`, `gflops`) and the median; with
    /// `--compare` every peer is timed the same way. Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeat: Option<u64>,
    /// Write the trace as Chrome trace-event JSON (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write a Gantt chart of the run as SVG.
    #[arg(long, value_name = "FILE")]
    gantt: Option<PathBuf>,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CalibrateArgs {
    /// Tile sizes to calibrate.
    #[arg(long, num_args = 1.., default_values_t = [512], value_parser = parse_positive)]
    tile: Vec<usize>,
    /// Cluster specs whose classes to calibrate (default: auto, or none with --output).
    #[arg(long, num_args = 1.., value_parser = parse_spec)]
    clusters: Vec<ClusterSpec>,
    /// Also write the platform file (TOML) of this machine: calibrates clusters of each
    /// size 1, 2, 4, ... and all cores (as many of each size as fit; sizes in between are
    /// interpolated by `simulate`), then factors 5 matrices of 8 x 8 tiles on each and
    /// writes the kernels' median durations inside those factorisations.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Executions per kernel, tile size and class.
    #[arg(long, default_value_t = 5, value_parser = parse_positive)]
    samples: usize,
    #[command(flatten)]
    platform: PlatformArgs,
    /// GPUs to calibrate (kernels and links), with the first cluster spec.
    #[command(flatten)]
    gpu: GpuArgs,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// The cluster spec to show (default: auto), resolved on the cores the GPUs leave.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    clusters: ClusterSpec,
    /// GPUs to show: all, none, indices ("0,1"), or emulated:K.
    #[arg(long, default_value = "all", value_parser = parse_gpus)]
    gpus: GpuSelection,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BoundArgs {
    /// A preset (sirocco) or a TOML platform file.
    #[arg(long)]
    platform: String,
    /// CPU clusters: NxM ("2x10", "20x1"), a level (package, core...) or lists, resolved on
    /// the platform's cores minus one per GPU.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    clusters: ClusterSpec,
    /// Number of GPUs used.
    #[arg(long, default_value_t = 0)]
    gpus: usize,
    /// Order of the matrix.
    #[arg(long, value_parser = parse_positive)]
    n: usize,
    /// Tile size (one the platform has rates for).
    #[arg(long, value_parser = parse_positive)]
    tile: usize,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse::<Backend>().map_err(|e| e.to_string())
}

fn parse_spec(s: &str) -> Result<ClusterSpec, String> {
    s.parse::<ClusterSpec>().map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct ClustersReport {
    spec: String,
    cpusets: Vec<String>,
}

#[derive(Serialize)]
struct MemoryReport {
    /// Bytes of the matrix (n^2 doubles).
    matrix_bytes: usize,
    /// Peak heap bytes allocated during the factorisation beyond those live before it.
    peak_extra_bytes: usize,
    /// peak_extra_bytes / matrix_bytes.
    ratio: f64,
    /// Heap bytes the platform holds, allocated once when it was built (pools, and the
    /// per-thread packing slabs of the `gemm` crate that the warm-up allocates), shared by
    /// every factorisation run on it.
    platform_bytes: usize,
}

#[derive(Serialize)]
struct GpuReport {
    /// Worker name ("gpu0").
    name: String,
    /// Device model ("NVIDIA H100 80GB HBM3", "emulated").
    model: String,
    /// Memory budget for tiles, in bytes.
    budget_bytes: usize,
    /// The logical CPU of its host thread.
    host_cpu: usize,
}

/// The GPU workers of a platform, for reports.
fn gpu_reports(platform: &Platform) -> Vec<GpuReport> {
    platform
        .devices()
        .iter()
        .enumerate()
        .map(|(i, d)| GpuReport {
            name: format!("gpu{i}"),
            model: d.device.model().to_owned(),
            budget_bytes: d.device.budget(),
            host_cpu: d.core,
        })
        .collect()
}

#[derive(Serialize)]
struct CholeskyReport {
    n: usize,
    tile: usize,
    backend: String,
    clusters: ClustersReport,
    scheduler: String,
    tasks: usize,
    /// Wall-clock seconds of the factorisation call: input checks, tiling and the run
    /// (the best of the timed runs with `--repeat`).
    seconds: f64,
    /// The median of the timed runs' seconds (`seconds` for one run).
    median_seconds: f64,
    /// Timed runs (1 without `--repeat`; a warm-up before them is not counted).
    runs: usize,
    /// The runtime's part of it, from the first task's release to the last task's end
    /// (what `hetla simulate` models), in milliseconds.
    makespan_ms: f64,
    gflops: f64,
    residual: f64,
    residual_ok: bool,
    /// Tasks and busy fraction of each worker.
    workers: Vec<WorkerSummary>,
    kernels: Vec<KernelSummary>,
    /// The GPU workers (empty on a CPU-only run).
    gpus: Vec<GpuReport>,
    /// Bytes moved per GPU and direction ("host->gpu0", "gpu0->host").
    bytes: Vec<LinkBytes>,
    /// Lower bounds on the makespan of this very run, from the durations its tasks took
    /// (each task on the class that ran it): `seconds` is never below `mixed_ms` (absent,
    /// with a warning on stderr, if they could not be computed).
    bounds: Option<BoundReport>,
    /// Achieved rate over the mixed bound's rate (mixed_ms / measured ms), at most 1.
    efficiency: Option<f64>,
    /// The bounds predicted before the run from the stored performance models (absent
    /// when the models did not yet know every kernel of the run).
    predicted_bounds: Option<BoundReport>,
    /// How the tile was chosen when `--tile` was not given: each candidate's predicted
    /// makespan and the candidates timed first because the models lacked them.
    #[serde(skip_serializing_if = "Option::is_none")]
    tile_choice: Option<hetla::tile_choice::TileChoice>,
    memory: MemoryReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    peers: Option<Vec<peers::PeerRate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dgemm_gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_best_peer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_dgemm: Option<f64>,
    /// hetla (matrix in host memory, end to end) over cuSOLVER dpotrf on a
    /// device-resident matrix (with --compare on a platform with a CUDA GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_cusolver: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    perfmodel_file: Option<String>,
}

/// Writes the trace and the Gantt chart of a finished run (paths checked before it): a
/// failure now (a full disk) is a warning that keeps the run's report.
fn write_trace_files(
    trace: &hetla::Trace,
    chrome: Option<&std::path::Path>,
    gantt: Option<&std::path::Path>,
) {
    if let Some(path) = chrome {
        let _ = trace
            .write_chrome_json(path)
            .inspect_err(|e| eprintln!("warning: {e}"));
    }
    if let Some(path) = gantt {
        let _ = trace
            .write_gantt_svg(path)
            .inspect_err(|e| eprintln!("warning: {e}"));
    }
}

/// Checks a command's output files before its work starts: each can be written, no two
/// (nor the performance-model file the run will save) are the same file.
fn check_outputs(
    outputs: &[(&str, Option<&std::path::Path>)],
    model_file: Option<&std::path::Path>,
) -> hetla::Result<()> {
    let mut given: Vec<(&str, &std::path::Path)> = Vec::new();
    for (option, path) in outputs {
        if let Some(path) = path {
            hetla::output::check_writable(option, path)?;
            given.push((option, path));
        }
    }
    if let Some(models) = model_file {
        given.push(("the performance-model file", models));
    }
    Ok(hetla::output::check_distinct(&given)?)
}

/// Saves the models a finished run learned: a failure is a warning that keeps the run's
/// report and exit status.
fn save_models_or_warn(platform: &Platform) -> Option<PathBuf> {
    platform
        .save_models()
        .inspect_err(|e| eprintln!("warning: the run's samples were not saved: {e}"))
        .ok()
        .flatten()
}

fn cholesky(args: &CholeskyArgs) -> hetla::Result<CholeskyReport> {
    // What the run needs, before anything is allocated: the matrix, its factor and the
    // residual check's copy; the task graph when the tile is given.
    hetla::limits::check_memory(
        &format!(
            "cholesky --n {}: the matrix, its factor and the residual check",
            args.n
        ),
        hetla::limits::matrix_bytes(args.n, args.n).saturating_mul(3),
    )?;
    if let Some(tile) = args.tile {
        hetla::limits::check_cholesky(args.n, tile, 0)?;
    }
    let before_platform = memory::live();
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    check_outputs(
        &[
            ("--trace", args.trace.as_deref()),
            ("--gantt", args.gantt.as_deref()),
        ],
        platform.model_file(),
    )?;
    // The tile: given, or chosen from the models (timing the candidates they lack).
    let tile_choice = match args.tile {
        Some(_) => None,
        None => Some(hetla::tile_choice::choose_cholesky_tile(&platform, args.n)?),
    };
    // A tile larger than the matrix is the whole matrix (one tile).
    let tile = tile_choice
        .as_ref()
        .map_or(args.tile.unwrap_or(0), |c| c.tile)
        .min(args.n);
    let options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .tile(tile);
    let platform_bytes = memory::live().saturating_sub(before_platform);
    // The bound predicted from the stored models, before this run adds to them (absent on
    // a first run, when the models lack some kernel).
    let predicted_bounds =
        measured_cholesky_bounds(&platform.models(), platform.workers(), args.n, tile).ok();
    hetla::limits::check_cholesky(
        args.n,
        tile,
        hetla::limits::matrix_bytes(args.n, args.n).saturating_mul(3),
    )?;
    let a = matgen::random_spd(args.n, args.seed);
    let mut factor = a.clone();
    let baseline = memory::reset_peak();
    let repeat = args.repeat.map(|r| r as usize);
    let (trace, timings) = peers::repeat(repeat, || {
        factor.copy_from(&a);
        let start = Instant::now();
        let trace = options.factor_in_place_traced(factor.as_mut())?;
        Ok((trace, start.elapsed().as_secs_f64()))
    })?;
    let seconds = timings.best;
    let peak_extra_bytes = memory::peak().saturating_sub(baseline);
    let flops = (args.n as f64).powi(3) / 3.0;
    let all_cpus = hetla_clusters::available_cpus().len();
    let residual = check::cholesky_residual(a.as_ref(), factor.as_ref(), Par::rayon(all_cpus));
    let model_file = save_models_or_warn(&platform);
    // The factorisation succeeded: a bound that cannot be computed is a warning, not a
    // reason to withhold the result.
    let bounds = run_cholesky_bounds(&trace, args.n, tile)
        .inspect_err(|e| eprintln!("warning: no makespan bounds for this run: {e}"))
        .ok();
    write_trace_files(&trace, args.trace.as_deref(), args.gantt.as_deref());
    let summary = trace.summary();
    let gflops = flops / seconds / 1e9;
    let matrix_bytes = args.n * args.n * size_of::<f64>();
    let mut report = CholeskyReport {
        n: args.n,
        tile,
        backend: platform.backend().to_string(),
        clusters: ClustersReport {
            spec: args.clusters.to_string(),
            cpusets: platform.cpu_lists(),
        },
        scheduler: args.scheduler.to_string(),
        tasks: trace.tasks.len(),
        seconds,
        median_seconds: timings.median,
        runs: timings.runs,
        makespan_ms: trace.makespan * 1e3,
        gflops,
        residual,
        residual_ok: residual < check::RESIDUAL_THRESHOLD,
        bytes: summary.link_bytes(),
        workers: summary.workers,
        kernels: summary.kernels,
        gpus: gpu_reports(&platform),
        efficiency: bounds.as_ref().map(|b| b.mixed_ms * 1e-3 / seconds),
        bounds,
        predicted_bounds,
        tile_choice,
        memory: MemoryReport {
            matrix_bytes,
            peak_extra_bytes,
            ratio: peak_extra_bytes as f64 / matrix_bytes.max(1) as f64,
            platform_bytes,
        },
        peers: None,
        dgemm_gflops: None,
        ratio_to_best_peer: None,
        ratio_to_dgemm: None,
        ratio_to_cusolver: None,
        perfmodel_file: model_file.map(|p| p.display().to_string()),
    };
    if args.compare {
        let mut rates = Vec::new();
        type Peer = fn(MatMut<'_, f64>, usize) -> hetla::Result<peers::PeerRate>;
        let mut timed_peer = |name: &str, peer: Peer| -> hetla::Result<peers::PeerRate> {
            let ((), timings) = peers::repeat(repeat, || {
                factor.copy_from(&a);
                Ok(((), peer(factor.as_mut(), all_cpus)?.seconds))
            })?;
            Ok(peers::PeerRate::from_timings(name, timings, flops))
        };
        rates.push(timed_peer("faer-llt", peers::faer_cholesky)?);
        if Backend::OpenBlas.is_available() {
            rates.push(timed_peer("openblas-dpotrf", peers::openblas_dpotrf)?);
        }
        drop(factor);
        let best_peer = rates.iter().map(|p| p.gflops).fold(0.0, f64::max);
        // With a CUDA GPU in the platform: cuSOLVER on the device-resident matrix, GPU 0.
        #[cfg(feature = "cuda")]
        if platform
            .devices()
            .iter()
            .any(|d| d.device.model() != "emulated")
        {
            let cusolver = peers::cusolver_dpotrf(a.as_ref(), 0)?;
            report.ratio_to_cusolver = Some(gflops / cusolver.gflops);
            rates.push(cusolver);
        }
        let mut dgemm = 0.0f64;
        for backend in Backend::available() {
            // The DGEMM peer costs 6x a Cholesky: one warm-up at most, never repeated.
            let r = peers::dgemm(backend, args.n, all_cpus)?;
            dgemm = dgemm.max(r.gflops);
            rates.push(r);
        }
        report.ratio_to_best_peer = Some(gflops / best_peer);
        report.ratio_to_dgemm = Some(gflops / dgemm);
        report.dgemm_gflops = Some(dgemm);
        report.peers = Some(rates);
    }
    Ok(report)
}

fn print_cholesky(r: &CholeskyReport) {
    println!(
        "hetla cholesky: n = {}, tile = {}, {} tasks",
        r.n, r.tile, r.tasks
    );
    println!(
        "  platform  {} kernels, clusters {} = [{}], scheduler {}",
        r.backend,
        r.clusters.spec,
        r.clusters.cpusets.join("] ["),
        r.scheduler
    );
    println!(
        "  time      {:.4} s (the runtime's makespan: {:.4} s)",
        r.seconds,
        r.makespan_ms * 1e-3
    );
    println!("  rate      {:.2} Gflop/s (n^3/3 flops)", r.gflops);
    if r.runs > 1 {
        println!(
            "  repeat    best of {} runs after a warm-up; median {:.4} s ({:.2} Gflop/s)",
            r.runs,
            r.median_seconds,
            r.gflops * r.seconds / r.median_seconds
        );
    }
    println!(
        "  residual  {:.3e}  ||A - L L^T||_1 / (n ||A||_1 eps), {} (threshold {})",
        r.residual,
        if r.residual_ok { "ok" } else { "TOO LARGE" },
        check::RESIDUAL_THRESHOLD
    );
    println!(
        "  memory    {:.1} MiB allocated beyond the matrix ({:.3}x its {:.1} MiB); the platform holds {:.1} MiB",
        r.memory.peak_extra_bytes as f64 / 1048576.0,
        r.memory.ratio,
        r.memory.matrix_bytes as f64 / 1048576.0,
        r.memory.platform_bytes as f64 / 1048576.0
    );
    for w in &r.workers {
        println!(
            "  worker    {:<6} {:4} tasks, busy {:5.1}%",
            w.name,
            w.tasks,
            100.0 * w.busy_fraction
        );
    }
    for g in &r.gpus {
        println!(
            "  gpu       {:<6} {} (budget {:.1} MiB, host thread on CPU {})",
            g.name,
            g.model,
            g.budget_bytes as f64 / 1048576.0,
            g.host_cpu
        );
    }
    for b in &r.bytes {
        println!(
            "  moved     {:<12} {:10.1} MiB",
            b.link,
            b.bytes as f64 / 1048576.0
        );
    }
    for k in &r.kernels {
        println!(
            "  kernel    {:<6} {:5} x {:9.3} ms  {:7.2} Gflop/s",
            k.op,
            k.count,
            k.mean_seconds * 1e3,
            k.gflops
        );
    }
    if let (Some(bounds), Some(efficiency)) = (&r.bounds, r.efficiency) {
        print_bounds(bounds);
        println!(
            "  efficiency {efficiency:.3} (mixed bound / time; bounds from the durations this run's tasks took)"
        );
    }
    if let Some(c) = &r.tile_choice
        && !c.predictions.is_empty()
    {
        let predictions: Vec<String> = c
            .predictions
            .iter()
            .map(|(b, ms)| format!("{b}: {ms:.1} ms"))
            .collect();
        println!(
            "  tile      {} chosen from the models' predicted makespans ({}){}",
            c.tile,
            predictions.join(", "),
            if c.calibrated.is_empty() {
                String::new()
            } else {
                format!("; timed first: {:?}", c.calibrated)
            }
        );
    }
    if let Some(p) = &r.predicted_bounds {
        println!(
            "  predicted mixed bound {:.3} ms ({:.2} Gflop/s) from the stored models, before the run",
            p.mixed_ms, p.mixed_gflops
        );
    }
    if let Some(peers) = &r.peers {
        for p in peers {
            println!(
                "  peer      {:<16} {:8.4} s  {:7.2} Gflop/s{}",
                p.name,
                p.seconds,
                p.gflops,
                if p.runs > 1 {
                    format!(" (best of {}; median {:.4} s)", p.runs, p.median_seconds)
                } else {
                    String::new()
                }
            );
        }
        println!(
            "  ratios    hetla / best Cholesky peer {:.3}, hetla / DGEMM {:.3}",
            r.ratio_to_best_peer.unwrap_or(f64::NAN),
            r.ratio_to_dgemm.unwrap_or(f64::NAN)
        );
        if let Some(ratio) = r.ratio_to_cusolver {
            println!(
                "  ratio     hetla / cuSOLVER dpotrf on the device-resident matrix {ratio:.3}"
            );
        }
    }
}

#[derive(Serialize)]
struct CalibrateReport {
    file: Option<String>,
    entries: usize,
    steps: usize,
    seconds: f64,
    /// The platform file written with --output.
    #[serde(skip_serializing_if = "Option::is_none")]
    platform_file: Option<String>,
}

fn progress_bar(len: usize) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(len as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:24} {wide_bar} {pos}/{len} {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    }
}

fn calibrate_cmd(args: &CalibrateArgs) -> hetla::Result<CalibrateReport> {
    if args.tile.contains(&0) || args.samples == 0 {
        return Err(hetla::Error::InvalidOption {
            option: "calibrate",
            reason: "--tile sizes and --samples must be at least 1".into(),
        });
    }
    check_outputs(&[("--output", args.output.as_deref())], None)?;
    let start = Instant::now();
    let mut specs = args.clusters.clone();
    let topology = Topology::detect()?;
    let devices = args.gpu.gpus.open(args.gpu.gpu_memory)?;
    let cores = topology.cores().len();
    let sizes = hetla::model::calibration_sizes(cores);
    // `none` asks for the GPUs alone.
    specs.retain(|s| *s != ClusterSpec::None);
    if args.output.is_some() {
        // As many clusters of each size as fit: they are timed together, as in a run.
        specs.extend(sizes.iter().map(|&size| ClusterSpec::Grid {
            count: cores / size,
            size,
        }));
    } else if args.clusters.is_empty() {
        specs.push(ClusterSpec::Auto);
    }
    // The GPUs first, on their own (kernels and links); then each cluster spec.
    let mut platforms = Vec::new();
    if !devices.is_empty() {
        let store = args.platform.store();
        let gpus =
            Platform::with_devices(&ClusterSpec::None, args.platform.backend, store, devices)?;
        platforms.push(Arc::new(gpus));
    }
    for spec in &specs {
        let platform = Platform::with_store(spec, args.platform.backend, args.platform.store())?;
        platforms.push(Arc::new(platform));
    }
    if platforms.is_empty() {
        return Err(hetla::Error::InvalidOption {
            option: "clusters",
            reason: "nothing to calibrate: --clusters none and no GPU selected".into(),
        });
    }
    // For the platform file, each cluster size is also timed alone (one cluster, the rest
    // of the machine idle, models not stored): the file's rates are those, and its loaded
    // reductions compare them with the durations inside the factorisations.
    let alone: Vec<Platform> = match args.output {
        Some(_) => sizes
            .iter()
            .map(|&size| {
                let one = ClusterSpec::Grid { count: 1, size };
                Platform::with_store(
                    &one,
                    args.platform.backend,
                    hetla::runtime::ModelStore::None,
                )
            })
            .collect::<hetla::runtime::Result<_>>()?,
        None => Vec::new(),
    };
    // Factorisations timed per CPU platform for the platform file.
    let in_run = |p: &Platform| {
        if args.output.is_some() && p.devices().is_empty() {
            IN_RUN_FACTORISATIONS
        } else {
            0
        }
    };
    let steps: usize = platforms
        .iter()
        .map(|p| {
            link_steps(p)
                + calibration_steps(p, &args.tile, args.samples)
                + in_run_steps(&args.tile, in_run(p))
        })
        .sum::<usize>()
        + alone
            .iter()
            .map(|p| calibration_steps(p, &args.tile, args.samples))
            .sum::<usize>();
    let bar = progress_bar(steps);
    let mut file = None;
    let mut models = None;
    let mut measured_in_run = hetla::runtime::PerfModels::new();
    let mut gaps = Vec::new();
    for platform in &platforms {
        bar.set_message(match platform.devices().len() {
            0 => format!("clusters {}", platform.spec()),
            k => format!("{k} GPU(s)"),
        });
        // Each platform loaded the store when it was built: start from what the previous
        // specs of this command measured.
        if let Some(previous) = models.take() {
            platform.update_models(|m| *m = previous);
        }
        calibrate_links(platform, || bar.inc(1))?;
        calibrate(platform, &args.tile, args.samples, || bar.inc(1))?;
        gaps.extend(record_in_run(
            platform,
            &args.tile,
            in_run(platform),
            &mut measured_in_run,
            || bar.inc(1),
        )?);
        file = save_models_or_warn(platform).or(file);
        models = Some(platform.models());
    }
    let mut measured_alone = hetla::runtime::PerfModels::new();
    for platform in &alone {
        bar.set_message(format!("clusters {} alone", platform.spec()));
        calibrate(platform, &args.tile, args.samples, || bar.inc(1))?;
        let timed = platform.models();
        for (&size, &tile) in sizes
            .iter()
            .flat_map(|s| args.tile.iter().map(move |t| (s, t)))
        {
            let class = hetla::runtime::ResourceClass::CpuCluster { cores: size };
            for op in hetla::calibrate::CHOLESKY_OPS {
                let key = hetla::runtime::KernelKey::square(op, tile);
                if let Some(stats) = timed.get(&key, &class) {
                    measured_alone.merge(key, class.clone(), stats);
                }
            }
        }
    }
    bar.finish_and_clear();
    let models = models.unwrap_or_default();
    let platform_file = match &args.output {
        Some(path) => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "this-machine".into());
            let model = PlatformModel::from_calibration(
                &host,
                &format!(
                    "calibrated by `hetla calibrate` on {host}: {} kernels; rates of each cluster size alone (one cluster, the machine otherwise idle), loaded reductions from the median durations of the tasks of {IN_RUN_FACTORISATIONS} factorisations of {IN_RUN_TILES} x {IN_RUN_TILES} tiles with every cluster of that size busy; task overhead from the gaps between the tasks of the single-cluster runs",
                    args.platform.backend
                ),
                &topology,
                &measured_in_run,
                Some(&measured_alone),
                &sizes,
                &args.tile,
                gaps.iter().sum::<f64>() / gaps.len().max(1) as f64 * 1e6,
            )?;
            hetla::output::write_atomic(path, model.to_toml().as_bytes())?;
            Some(path.display().to_string())
        }
        None => None,
    };
    Ok(CalibrateReport {
        file: file.map(|p| p.display().to_string()),
        entries: models.len(),
        steps,
        seconds: start.elapsed().as_secs_f64(),
        platform_file,
    })
}

fn print_calibrate(r: &CalibrateReport) {
    println!(
        "calibrated {} kernel executions in {:.1} s; {} model entries in {}",
        r.steps,
        r.seconds,
        r.entries,
        r.file.as_deref().unwrap_or("(not saved)")
    );
    if let Some(path) = &r.platform_file {
        println!("platform file of this machine written to {path}");
    }
}

#[derive(Serialize)]
struct TopologyReport {
    source: String,
    packages: Vec<String>,
    numa_nodes: Vec<String>,
    l3: Vec<String>,
    l2: Vec<String>,
    cores: Vec<String>,
}

#[derive(Serialize)]
struct InfoReport {
    /// The GPUs selected by --gpus that the driver reports (empty without a driver).
    gpus: Vec<hetla_clusters::GpuInfo>,
    /// Emulated devices selected by --gpus emulated:K.
    emulated_gpus: usize,
    cpus: usize,
    cpu_list: String,
    online_cpu_list: Option<String>,
    topology: TopologyReport,
    clusters: ClustersReport,
    backends: Vec<String>,
}

fn info(args: &InfoArgs) -> hetla::Result<InfoReport> {
    let cpus = hetla_clusters::available_cpus();
    let topology = Topology::detect()?;
    let lists = |level| -> Vec<String> {
        topology
            .level(level)
            .iter()
            .map(|s| hetla_clusters::format_cpu_list(s))
            .collect()
    };
    use hetla_clusters::Level;
    let found = hetla_clusters::gpus();
    let (gpus, emulated_gpus) = match &args.gpus {
        GpuSelection::All => (found, 0),
        GpuSelection::None => (Vec::new(), 0),
        GpuSelection::List(list) => {
            if let Some(&missing) = list.iter().find(|&&i| i >= found.len()) {
                return Err(hetla::Error::InvalidOption {
                    option: "gpus",
                    reason: format!(
                        "there is no GPU {missing}: this machine has {}",
                        found.len()
                    ),
                });
            }
            (
                found
                    .into_iter()
                    .filter(|g| list.contains(&g.index))
                    .collect(),
                0,
            )
        }
        GpuSelection::Emulated(k) => (Vec::new(), *k),
    };
    // As a platform does: one core per GPU host thread, taken before clusters are formed.
    let left =
        hetla_runtime::reserve_host_cores(&topology, &args.clusters, gpus.len() + emulated_gpus)
            .left;
    let clusters = args.clusters.resolve(&left)?;
    Ok(InfoReport {
        gpus,
        emulated_gpus,
        cpus: cpus.len(),
        cpu_list: hetla_clusters::format_cpu_list(&cpus),
        online_cpu_list: hetla_clusters::online_cpus().map(|c| hetla_clusters::format_cpu_list(&c)),
        topology: TopologyReport {
            source: format!("{:?}", topology.source()).to_lowercase(),
            packages: lists(Level::Package),
            numa_nodes: lists(Level::Numa),
            l3: lists(Level::L3),
            l2: lists(Level::L2),
            cores: lists(Level::Core),
        },
        clusters: ClustersReport {
            spec: args.clusters.to_string(),
            cpusets: clusters
                .iter()
                .map(|c| hetla_clusters::format_cpu_list(c))
                .collect(),
        },
        backends: Backend::available().iter().map(|b| b.to_string()).collect(),
    })
}

fn print_info(r: &InfoReport) {
    println!("CPUs this process may use: {} ({})", r.cpus, r.cpu_list);
    if let Some(online) = &r.online_cpu_list {
        println!("CPUs online:               {online}");
    }
    let t = &r.topology;
    println!("topology (from {}):", t.source);
    for (name, sets) in [
        ("packages", &t.packages),
        ("NUMA nodes", &t.numa_nodes),
        ("L3 caches", &t.l3),
        ("L2 caches", &t.l2),
        ("cores", &t.cores),
    ] {
        println!("  {name:<11} {:3}: {}", sets.len(), sets.join(" | "));
    }
    println!(
        "clusters {}: {} cluster(s): [{}]",
        r.clusters.spec,
        r.clusters.cpusets.len(),
        r.clusters.cpusets.join("] [")
    );
    println!("kernel backends built in:  {}", r.backends.join(", "));
    if r.gpus.is_empty() && r.emulated_gpus == 0 {
        let why = if hetla_clusters::driver_present() {
            "none selected, or the driver reports none"
        } else {
            "no CUDA driver library (libcuda) on this machine"
        };
        println!("GPUs:                      none ({why})");
    }
    for g in &r.gpus {
        println!(
            "GPU {}: {} ({:.1} GiB, {:.1} GiB free)",
            g.index,
            g.name,
            g.memory_bytes as f64 / (1u64 << 30) as f64,
            g.free_bytes as f64 / (1u64 << 30) as f64
        );
    }
    if r.emulated_gpus > 0 {
        println!("emulated devices:          {}", r.emulated_gpus);
    }
}

#[derive(Serialize)]
struct BoundCmdReport {
    platform: String,
    clusters: String,
    gpus: usize,
    n: usize,
    tile: usize,
    #[serde(flatten)]
    bounds: BoundReport,
}

fn bound_cmd(args: &BoundArgs) -> hetla::Result<BoundCmdReport> {
    let model = PlatformModel::resolve(&args.platform)?;
    let bounds = model_cholesky_bounds(&model, &args.clusters, args.gpus, args.n, args.tile)?;
    Ok(BoundCmdReport {
        platform: model.name,
        clusters: args.clusters.to_string(),
        gpus: args.gpus,
        n: args.n,
        tile: args.tile,
        bounds,
    })
}

fn print_bound(r: &BoundCmdReport) {
    println!(
        "hetla bound: Cholesky n = {}, tile = {} on {} with clusters {} and {} GPU(s)",
        r.n, r.tile, r.platform, r.clusters, r.gpus
    );
    print_bounds(&r.bounds);
}

/// The bounds table shared by `bound` and `cholesky`.
fn print_bounds(b: &BoundReport) {
    let classes: Vec<String> = b
        .classes
        .iter()
        .map(|c| format!("{} x {}", c.count, c.class))
        .collect();
    println!(
        "  graph     {} tasks, {} edges; resources {}",
        b.tasks,
        b.edges,
        classes.join(", ")
    );
    for (name, ms, gflops) in [
        ("critical path", b.cp_ms, b.cp_gflops),
        ("area", b.area_ms, b.area_gflops),
        ("mixed", b.mixed_ms, b.mixed_gflops),
    ] {
        println!("  bound     {name:<13} {ms:12.3} ms  {gflops:10.2} Gflop/s");
    }
    println!(
        "  mixed     {} LP solve(s); bounds computed in {:.3} s",
        b.iterations, b.seconds
    );
}

fn emit<T: Serialize>(json: bool, report: &T, human: impl Fn(&T)) {
    if json {
        match serde_json::to_string(report) {
            Ok(text) => println!("{text}"),
            // Reports hold numbers and strings only; should one not serialise, say so on
            // stderr rather than panic.
            Err(e) => eprintln!("error: the report could not be written as JSON: {e}"),
        }
    } else {
        human(report);
    }
}

/// Whether the command line asks for JSON output (also when it does not parse).
fn wants_json() -> bool {
    std::env::args_os().skip(1).any(|a| a == "--json")
}

/// Prints an error: on stderr, and with `--json` also as one JSON object on stdout.
fn report_error(json: bool, kind: &str, message: &str) {
    eprintln!("error: {message}");
    if json {
        println!(
            "{}",
            serde_json::json!({ "error": { "kind": kind, "message": message } })
        );
    }
}

/// Exit status of a command line that does not parse (as clap's own).
const USAGE_EXIT: u8 = 2;

fn main() -> ExitCode {
    // Output into a closed pipe (`hetla info | head -1`) ends the process as it ends other
    // tools, by SIGPIPE, instead of a panic in `println!`.
    // SAFETY: setting a signal's disposition to its default has no preconditions; it is
    // done first, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let json = wants_json();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) if json => {
            let message = e.render().to_string();
            let first = message.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            report_error(true, "usage", first);
            return ExitCode::from(USAGE_EXIT);
        }
        Err(e) => e.exit(),
    };
    let result = match &cli.command {
        Command::Cholesky(args) => cholesky(args).map(|r| emit(args.json, &r, print_cholesky)),
        Command::Calibrate(args) => {
            calibrate_cmd(args).map(|r| emit(args.json, &r, print_calibrate))
        }
        Command::Info(args) => info(args).map(|r| emit(args.json, &r, print_info)),
        Command::Bound(args) => bound_cmd(args).map(|r| emit(args.json, &r, print_bound)),
        Command::Simulate(args) => {
            commands::simulate::run(args).map(|r| emit(args.json, &r, commands::simulate::print))
        }
        Command::Sweep(args) => {
            commands::sweep::run(args).map(|r| emit(args.json, &r, commands::sweep::print))
        }
        Command::Gemm(args) => {
            commands::gemm::run(args).map(|r| emit(args.json, &r, commands::gemm::print))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report_error(json, e.kind(), &e.to_string());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// The command line's own parsers (sizes, orders, placements, counts) return a
        /// value or a message for any text.
        #[test]
        fn command_line_parsers_never_panic(s in prop_oneof![
            "[0-9.]{0,25}[kKmMgGiIbB ]{0,4}",
            "[0-9]{1,22}(:[0-9]{0,22}){0,3}(,[0-9]{1,22}){0,3}",
            "(host|gpu[0-9]{0,22}|GPU1|x)(,(host|gpu[0-9]{0,22}|x)){0,4}",
            "\\PC{0,12}",
        ]) {
            if let Ok(bytes) = parse_bytes(&s) {
                prop_assert!(bytes >= 1);
            }
            if let Ok(n) = parse_positive(&s) {
                prop_assert!(n >= 1);
            }
            if let Ok(orders) = commands::sweep::parse_orders(&s) {
                prop_assert!(orders.0.iter().all(|&n| n >= 1));
            }
            let _ = commands::gemm::parse_placement(&s);
            let _ = parse_spec(&s);
            let _ = parse_gpus(&s);
            let _ = parse_backend(&s);
        }
    }

    #[test]
    fn sizes_below_one_byte_and_absurd_orders_are_refused() {
        assert!(
            parse_bytes("0.5")
                .unwrap_err()
                .contains("less than one byte")
        );
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert!(parse_bytes("1e30").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
        assert!(parse_positive("0").unwrap_err().contains("at least 1"));
        // A sweep's orders are listed: a range of 10^12 of them is refused, not built.
        assert!(commands::sweep::parse_orders("1:1000000000000:1").is_err());
    }
}
