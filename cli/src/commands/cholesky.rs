//! `hetla cholesky`: factor a generated SPD matrix on this machine, with its bounds and
//! (`--compare`) the peers timed in the same process.

use super::args::{GpuArgs, PlatformArgs, TraceArgs, parse_positive, parse_spec};
use super::output::{
    ClustersReport, GpuReport, MemoryReport, check_outputs, gpu_reports, print_bounds,
    save_models_or_warn,
};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use faer::MatMut;
use hetla::graph_bounds::{BoundReport, measured_cholesky_bounds, run_cholesky_bounds};
use hetla::runtime::{KernelSummary, LinkBytes, WorkerSummary};
use hetla::{Backend, Cholesky, ClusterSpec, Par, Precision, Scalar, SchedulerKind, check, matgen};

use crate::peers;
use serde::Serialize;

#[derive(Args)]
pub struct CholeskyArgs {
    /// Order of the matrix.
    #[arg(long, default_value_t = 4096, value_parser = parse_positive)]
    pub n: usize,
    /// Tile size (default: chosen from n and the backend, see `hetla::default_tile_size`).
    #[arg(long, value_parser = parse_positive)]
    pub tile: Option<usize>,
    /// Seed of the matrix generator (`hetla::matgen::random_spd`).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists
    /// ("0/1") or auto.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    #[command(flatten)]
    pub platform: PlatformArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Also time, in this process, faer's Cholesky, OpenBLAS dpotrf (feature `openblas`)
    /// and a DGEMM of the same n on all available cores (`cpu`), and with a CUDA GPU
    /// cuSOLVER dpotrf on the device-resident matrix (`gpu`); `--compare` alone: all.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<super::args::Compare>,
    /// One untimed warm-up, then R timed factorisations (each of a fresh copy of the
    /// matrix): the report gives the best (`seconds`, `gflops`) and the median; with
    /// `--compare` every peer is timed the same way. Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    #[command(flatten)]
    pub traces: TraceArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Factor across the ranks of an MPI job on a PxQ process grid, tiles 2D
    /// block-cyclic (start it with `mpirun -np P*Q`; feature `mpi`): every rank runs its
    /// tasks with `--clusters` inside the cores mpirun gives it; rank 0 reports. The tile
    /// defaults to 256; `--compare` times ScaLAPACK's pdpotrf (feature `scalapack`).
    #[arg(long, value_name = "PxQ", value_parser = super::args::parse_grid)]
    pub grid: Option<hetla::factorizations::ProcessGrid>,
    /// The precision: s (f32), d (f64), c or z (complex Hermitian, f32 or f64 parts), or
    /// ds: a solve of one right-hand side factored in f32 and refined to f64 accuracy
    /// (`hetla::solve_spd_mixed`), timed beside the f64 factorisation and solve. Other than
    /// d runs on CPU clusters only.
    #[arg(long, value_enum, default_value = "d")]
    pub precision: super::args::PrecisionArg,
    /// With `--precision ds`: the condition number of the generated matrix
    /// (`hetla::matgen::random_hpd_conditioned`).
    #[arg(long, default_value_t = 1e6, value_parser = parse_condition)]
    pub cond: f64,
}

fn parse_condition(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c >= 1.0 => Ok(c),
        _ => Err(format!(
            "`{s}` is not a condition number: expected a finite number >= 1"
        )),
    }
}

#[derive(Serialize)]
pub struct CholeskyReport {
    pub n: usize,
    /// The precision: s, d, c or z (complex rates count 4 real flops per complex one).
    pub precision: Precision,
    pub tile: usize,
    pub backend: String,
    pub clusters: ClustersReport,
    pub scheduler: String,
    pub tasks: usize,
    /// Wall-clock seconds of the factorisation call: input checks, tiling and the run
    /// (the best of the timed runs with `--repeat`).
    pub seconds: f64,
    /// The median of the timed runs' seconds (`seconds` for one run).
    pub median_seconds: f64,
    /// Timed runs (1 without `--repeat`; a warm-up before them is not counted).
    pub runs: usize,
    /// The runtime's part of it, from the first task's release to the last task's end
    /// (what `hetla simulate` models), in milliseconds.
    pub makespan_ms: f64,
    pub gflops: f64,
    pub residual: f64,
    pub residual_ok: bool,
    /// Tasks and busy fraction of each worker.
    pub workers: Vec<WorkerSummary>,
    pub kernels: Vec<KernelSummary>,
    /// The GPU workers (empty on a CPU-only run).
    pub gpus: Vec<GpuReport>,
    /// Bytes moved per GPU and direction ("host->gpu0", "gpu0->host").
    pub bytes: Vec<LinkBytes>,
    /// Lower bounds on the makespan of this very run, from the durations its tasks took
    /// (each task on the class that ran it): `seconds` is never below `mixed_ms` (absent,
    /// with a warning on stderr, if they could not be computed).
    pub bounds: Option<BoundReport>,
    /// Achieved rate over the mixed bound's rate (mixed_ms / measured ms), at most 1.
    pub efficiency: Option<f64>,
    /// The bounds predicted before the run from the stored performance models (absent
    /// when the models did not yet know every kernel of the run).
    pub predicted_bounds: Option<BoundReport>,
    /// How the tile was chosen when `--tile` was not given: each candidate's predicted
    /// makespan and the candidates timed first because the models lacked them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tile_choice: Option<hetla::tile_choice::TileChoice>,
    pub memory: MemoryReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<peers::PeerRate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dgemm_gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_best_peer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_dgemm: Option<f64>,
    /// hetla (matrix in host memory, end to end) over cuSOLVER dpotrf on a
    /// device-resident matrix (with --compare on a platform with a CUDA GPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_cusolver: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perfmodel_file: Option<String>,
}

/// What `hetla cholesky` reports: a factorisation, or with `--precision ds` a mixed solve.
#[derive(Serialize)]
#[serde(untagged)]
pub enum CholeskyOutput {
    Factor(Box<CholeskyReport>),
    Mixed(Box<super::mixed::MixedReport>),
}

pub fn cholesky(args: &CholeskyArgs) -> hetla::Result<CholeskyOutput> {
    use super::args::PrecisionArg as P;
    let report = match args.precision {
        P::S => factor::<f32>(args)?,
        P::D => factor::<f64>(args)?,
        P::C => factor::<hetla::c32>(args)?,
        P::Z => factor::<hetla::c64>(args)?,
        P::Ds => return super::mixed::run(args).map(|r| CholeskyOutput::Mixed(Box::new(r))),
    };
    Ok(CholeskyOutput::Factor(Box::new(report)))
}

pub fn print(output: &CholeskyOutput) {
    match output {
        CholeskyOutput::Factor(r) => print_cholesky(r),
        CholeskyOutput::Mixed(r) => super::mixed::print(r),
    }
}

/// A factorisation in precision `T` (`--precision s`, `d`, `c`, `z`).
pub fn factor<T: Scalar>(args: &CholeskyArgs) -> hetla::Result<CholeskyReport> {
    let p = T::PRECISION;
    let elements = (args.n as u128).pow(2);
    // What the run needs, before anything is allocated: the matrix, its factor and the
    // residual check's copy; the task graph when the tile is given.
    hetla::limits::check_memory(
        &format!(
            "cholesky --n {}: the matrix, its factor and the residual check",
            args.n
        ),
        elements.saturating_mul(3 * size_of::<T>() as u128),
    )?;
    if let Some(tile) = args.tile {
        hetla::limits::check_cholesky(args.n, tile, 0)?;
    }
    let before_platform = crate::memory::live();
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    check_outputs(&args.traces.outputs(), platform.model_file())?;
    // The tile: given, or chosen from the models (timing the candidates they lack; the
    // models choose in f64, other precisions take the default tile).
    let tile_choice = match args.tile {
        None if p == Precision::D => {
            Some(hetla::tile_choice::choose_cholesky_tile(&platform, args.n)?)
        }
        _ => None,
    };
    // A tile larger than the matrix is the whole matrix (one tile).
    let tile = tile_choice
        .as_ref()
        .map_or_else(
            || {
                args.tile
                    .unwrap_or_else(|| hetla::default_tile_size(args.n, platform.backend(), p))
            },
            |c| c.tile,
        )
        .min(args.n);
    let options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .tile(tile);
    let platform_bytes = crate::memory::live().saturating_sub(before_platform);
    // The bound predicted from the stored models, before this run adds to them (absent on
    // a first run, when the models lack some kernel).
    let predicted_bounds =
        measured_cholesky_bounds(&platform.models(), platform.workers(), args.n, tile, p).ok();
    hetla::limits::check_cholesky(
        args.n,
        tile,
        elements.saturating_mul(3 * size_of::<T>() as u128),
    )?;
    // In f64 the same matrix as `matgen::random_spd`'s.
    let a = matgen::random_hpd::<T>(args.n, args.seed);
    let mut factor = a.clone();
    let baseline = crate::memory::reset_peak();
    let repeat = args.repeat.map(|r| r as usize);
    let (trace, timings) = peers::repeat(repeat, || {
        factor.copy_from(&a);
        let start = Instant::now();
        let trace = options.factor_in_place_traced(factor.as_mut())?;
        Ok((trace, start.elapsed().as_secs_f64()))
    })?;
    let seconds = timings.best;
    let peak_extra_bytes = crate::memory::peak().saturating_sub(baseline);
    let flops = hetla::graph_bounds::cholesky_flops(args.n, p);
    let all_cpus = hetla_clusters::available_cpus().len();
    let residual = check::cholesky_residual(a.as_ref(), factor.as_ref(), Par::rayon(all_cpus));
    let model_file = save_models_or_warn(&platform);
    // The factorisation succeeded: a bound that cannot be computed is a warning, not a
    // reason to withhold the result.
    let bounds = run_cholesky_bounds(&trace, args.n, tile, p)
        .inspect_err(|e| eprintln!("warning: no makespan bounds for this run: {e}"))
        .ok();
    args.traces.write(&trace);
    let summary = trace.summary();
    let gflops = flops / seconds / 1e9;
    let matrix_bytes = args.n * args.n * size_of::<T>();
    let mut report = CholeskyReport {
        n: args.n,
        precision: p,
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
    if let Some(compare) = args.compare {
        let mut rates = Vec::new();
        let mut timed_peer = |backend: Backend| -> hetla::Result<peers::PeerRate> {
            let ((), timings) = peers::repeat(repeat, || {
                factor.copy_from(&a);
                let m: MatMut<'_, T> = factor.as_mut();
                Ok(((), peers::library_cholesky(backend, m, all_cpus)?.seconds))
            })?;
            let name = peers::cholesky_peer_name(backend, p);
            Ok(peers::PeerRate::from_timings(&name, timings, flops))
        };
        if compare.cpu() {
            for backend in Backend::available() {
                rates.push(timed_peer(backend)?);
            }
        }
        drop(factor);
        let best_peer = rates.iter().map(|p| p.gflops).fold(0.0, f64::max);
        // With a CUDA GPU in the platform: cuSOLVER on the device-resident matrix, GPU 0.
        #[cfg(feature = "cuda")]
        if compare.gpu()
            && platform
                .devices()
                .iter()
                .any(|d| d.device.name() != "emulated")
        {
            let cusolver = peers::cusolver_potrf(a.as_ref(), 0, repeat.unwrap_or(1))?;
            report.ratio_to_cusolver = Some(gflops / cusolver.gflops);
            rates.push(cusolver);
        }
        if compare.cpu() {
            let mut dgemm = 0.0f64;
            for backend in Backend::available() {
                // The DGEMM peer costs 6x a Cholesky: one warm-up at most, never repeated.
                let r = peers::gemm::<T>(backend, args.n, all_cpus)?;
                dgemm = dgemm.max(r.gflops);
                rates.push(r);
            }
            report.ratio_to_best_peer = Some(gflops / best_peer);
            report.ratio_to_dgemm = Some(gflops / dgemm);
            report.dgemm_gflops = Some(dgemm);
        }
        report.peers = Some(rates);
    }
    Ok(report)
}

pub fn print_cholesky(r: &CholeskyReport) {
    println!(
        "hetla cholesky: n = {}, precision {}, tile = {}, {} tasks",
        r.n, r.precision, r.tile, r.tasks
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
    println!(
        "  rate      {:.2} Gflop/s ({} flops)",
        r.gflops,
        if r.precision.is_complex() {
            "4 n^3/3 real"
        } else {
            "n^3/3"
        }
    );
    if r.runs > 1 {
        println!(
            "  repeat    best of {} runs after a warm-up; median {:.4} s ({:.2} Gflop/s)",
            r.runs,
            r.median_seconds,
            r.gflops * r.seconds / r.median_seconds
        );
    }
    println!(
        "  residual  {:.3e}  ||A - L L^H||_1 / (n ||A||_1 eps), {} (threshold {})",
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
        if let (Some(peer), Some(dgemm)) = (r.ratio_to_best_peer, r.ratio_to_dgemm) {
            println!("  ratios    hetla / best Cholesky peer {peer:.3}, hetla / GEMM {dgemm:.3}");
        }
        if let Some(ratio) = r.ratio_to_cusolver {
            println!(
                "  ratio     hetla / cuSOLVER dpotrf on the device-resident matrix {ratio:.3}"
            );
        }
    }
}
