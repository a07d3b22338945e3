//! `hetla cholesky`: factor a generated SPD matrix on this machine, with its bounds and
//! (`--compare`) the peers timed in the same process.

use super::args::CholeskyArgs;
use crate::commands::output::{
    ClustersReport, GpuReport, MemoryReport, Phase, Stopwatch, check_outputs, gpu_reports,
    print_bounds, print_phases, save_models_or_warn,
};
use std::sync::Arc;
use std::time::Instant;

use faer::MatMut;
use hetla::{Backend, BoundReport, Cholesky, Par, Scalar, check, matgen};
use hetla_runtime::LinkBytes;

use crate::commands::report::{CusolverRatios, InverseReport, Measured, RunReport};
use crate::peers;
use serde::Serialize;

#[derive(Serialize)]
pub struct CholeskyReport {
    pub n: usize,
    /// What every factorisation's report has (`seconds`: the wall-clock time of the factorisation
    /// call, input checks, tiling and the run, or with `--resident` the run's makespan alone;
    /// `residual`: ||A - L L^H||_1 / (n ||A||_1 eps); n^3/3 flops).
    #[serde(flatten)]
    pub run: RunReport,
    /// The tail of smaller tiles the run ended in (`--tail-tile`, or chosen by the models on a
    /// platform with GPUs); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<hetla::Tail>,
    pub clusters: ClustersReport,
    pub scheduler: hetla::SchedulerKind,
    /// Where the kernels found the tiles: in-place or tile-major (`--storage`, auto resolved), or
    /// device (`--resident`: blocks of the matrix in the GPU's memory).
    pub storage: TilesIn,
    /// Whether the factored matrix was advised for transparent huge pages (`--huge-pages`).
    pub huge_pages: bool,
    /// How the tiles met the GPUs' copies (`--host-memory`): staged or page-locked.
    pub host_memory: hetla::HostMemory,
    /// What the best run page-locked, and how long locking took (page-locked runs on GPUs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_locked: Option<hetla_runtime::PageLocked>,
    /// Whether the matrix was timed as resident on the GPU (`--resident`).
    pub resident: bool,
    /// Milliseconds from the run's start to the end of the input check beside it (runs with a GPU:
    /// the check of NaN and the norm read the matrix while the first copies and kernels go on, and
    /// nothing is written to it before it ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_check_ms: Option<f64>,
    /// The runtime's part of it, from the first task's release to the last task's end (what
    /// `hetla simulate` models), in milliseconds.
    pub makespan_ms: f64,
    /// Where the residual's product ran: "gpu0" (a real GPU of the platform) or "host".
    pub residual_on: String,
    /// The GPU workers (empty on a CPU-only run).
    pub gpus: Vec<GpuReport>,
    /// Bytes moved per GPU and direction ("host->gpu0", "gpu0->host").
    pub bytes: Vec<LinkBytes>,
    /// Each GPU's tile copies against the fewest its updates needed in its budget (a run from host
    /// memory; `hetla::Plan::device_traffic`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub traffic: Vec<hetla_runtime::DeviceTraffic>,
    /// The bounds predicted before the run from the stored performance models (absent when the
    /// models did not yet know every kernel of the run).
    pub predicted_bounds: Option<BoundReport>,
    /// How the tile was chosen when `--tile` was not given: each candidate's predicted makespan and
    /// the candidates timed first because the models lacked them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tile_choice: Option<hetla::TileChoice>,
    /// What the factorisation allocated; absent where the process does not count its allocations
    /// (the command run as a library, from Python: only the `hetla` binary installs the counting
    /// allocator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryReport>,
    /// The fastest DGEMM's rate (`--compare cpu`: the ceiling a factorisation made of products
    /// approaches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dgemm_gflops: Option<f64>,
    /// hetla's rate over the fastest library Cholesky's on the CPUs (`--compare cpu`; every peer's
    /// ratio is in `ratios`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_best_peer: Option<f64>,
    /// hetla's rate over `dgemm_gflops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_dgemm: Option<f64>,
    /// hetla (end to end) over cuSOLVER ?potrf's three timings.
    #[serde(flatten)]
    pub cusolver: CusolverRatios,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perfmodel_file: Option<String>,
    /// Where the command's wall-clock time went, in the order of its phases: `platform` (built,
    /// devices opened), `plan` (the tile chosen, timing candidates the models lack, and the
    /// predicted bounds), `generate` (the matrix and the buffer the runs work in), `runs` (the
    /// warm-up and timed factorisations, each after a fresh copy of the matrix), `check` (the
    /// residual), `bounds` (the models saved, this run's bounds, trace files), then `inverse` and
    /// `peers` where asked for.
    pub phases: Vec<Phase>,
}

/// A factorisation in precision `T` (`--precision s`, `d`, `c`, `z`).
pub fn factor<T: Scalar>(args: &CholeskyArgs) -> crate::Result<CholeskyReport> {
    check_memory::<T>(args)?;
    let mut clock = Stopwatch::start();
    let before_platform = crate::memory::live();
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    clock.lap("platform");
    check_outputs(&args.traces.outputs(), platform.model_file())?;
    let options = builder(args, &platform);
    let (plan, tile, predicted_bounds) = planned::<T>(args, &options, &platform)?;
    let platform_bytes = crate::memory::live().saturating_sub(before_platform);
    clock.lap("plan");
    // In f64 the same matrix as `matgen::random_spd`'s.
    let a = matgen::random_hpd::<T>(args.n, args.seed);
    // The buffer every timed factorisation (hetla's and the peers') works in.
    let mut factor = if args.huge_pages {
        Buffer::Paged(hetla::huge_page_matrix::<T>(args.n, args.n)?)
    } else {
        Buffer::Heap(a.clone())
    };
    let huge_pages = matches!(&factor, Buffer::Paged(m) if m.huge_pages());
    clock.lap("generate");
    let (trace, timings, peak_extra_bytes) = timed_runs(
        args,
        &options,
        &plan,
        &platform,
        a.as_ref(),
        &mut factor,
        tile,
    )?;
    clock.lap("runs");
    let flops = plan.flops();
    let all_cpus = hetla_clusters::available_cpus().len();
    // The product of the check on the GPU when the platform has a real one (n^3 flops there
    // against n^3/3 on the host's cores: seconds at n = 32768 instead of tens); on the host
    // otherwise, or if the GPU's check fails (said on stderr).
    let (residual, residual_on) = residual(&platform, &plan, a.as_ref(), factor.as_ref())?;
    clock.lap("check");
    let model_file = save_models_or_warn(&platform);
    let run = RunReport::new((&plan, &platform), &timings, flops, &trace, residual);
    args.traces.write(&trace);
    clock.lap("bounds");
    let matrix_bytes = args.n * args.n * size_of::<T>();
    let bytes = trace.summary().link_bytes();
    let mut report = CholeskyReport {
        n: args.n,
        run,
        tail: plan.tail(),
        clusters: ClustersReport {
            spec: args.clusters.to_string(),
            cpusets: platform.cpu_lists(),
        },
        scheduler: args.scheduler,
        storage: tiles_in::<T>(args, &platform, &plan),
        huge_pages,
        host_memory: args.host_memory,
        page_locked: (args.host_memory == hetla::HostMemory::PageLocked
            && !platform.devices().is_empty())
        .then(|| trace.host_memory.clone()),
        resident: args.resident,
        input_check_ms: trace.input_checked.map(|s| s * 1e3),
        makespan_ms: trace.makespan * 1e3,
        residual_on: residual_on.into(),
        bytes,
        traffic: match args.resident {
            true => Vec::new(),
            false => {
                let budgets: Vec<usize> = (platform.devices().iter())
                    .map(|d| d.device.budget())
                    .collect();
                plan.device_traffic(&trace, &budgets)
            }
        },
        gpus: gpu_reports(&platform),
        predicted_bounds,
        tile_choice: plan.tile_choice().cloned(),
        memory: crate::memory::counting().then(|| MemoryReport {
            matrix_bytes,
            peak_extra_bytes,
            ratio: peak_extra_bytes as f64 / matrix_bytes.max(1) as f64,
            platform_bytes,
        }),
        dgemm_gflops: None,
        ratio_to_best_peer: None,
        ratio_to_dgemm: None,
        cusolver: CusolverRatios::default(),
        perfmodel_file: model_file.map(|p| p.display().to_string()),
        phases: Vec::new(),
    };
    if args.inverse {
        report.run.inverse = Some(inverse(args, &options, a.as_ref(), all_cpus, &platform)?);
        clock.lap("inverse");
    }
    if let Some(compare) = args.compare {
        compare_peers(
            args,
            compare,
            factor,
            a.as_ref(),
            &platform,
            flops,
            &mut report,
        )?;
        clock.lap("peers");
    }
    report.phases = clock.phases();
    Ok(report)
}

/// The plan of the run: the tile given, or chosen from the models (timing the candidates they lack;
/// a tile larger than the matrix is the whole matrix), checked against the memory limits; and the
/// bound predicted from the stored models before this run adds to them (absent on a first run, when
/// the models lack some kernel).
fn planned<T: Scalar>(
    args: &CholeskyArgs,
    options: &Cholesky,
    platform: &hetla::Platform,
) -> crate::Result<(hetla::Plan, usize, Option<hetla::BoundReport>)> {
    let plan = options.plan(args.n, T::PRECISION)?;
    let tile = plan.tile().min(args.n);
    let predicted = plan
        .bounds_from_models(
            &platform.models(),
            platform.workers(),
            platform.compute_streams(),
        )
        .ok();
    let elements = (args.n as u128).pow(2);
    hetla::limits::check_cholesky(
        args.n,
        tile,
        elements.saturating_mul(3 * size_of::<T>() as u128),
    )?;
    Ok((plan, tile, predicted))
}

/// Where a run's kernels found the tiles: the host storage it resolved to, or blocks of a resident
/// matrix's buffer on the GPU. Serialised by name: "in-place", "tile-major" or "device".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TilesIn {
    /// `--storage` on the host, resolved for the plan ([`hetla::Plan::storage`]).
    Host(hetla::Storage),
    /// `--resident`: the matrix in the GPU's memory.
    Device,
}

impl TilesIn {
    /// The name reports give.
    pub fn name(self) -> &'static str {
        match self {
            TilesIn::Host(storage) => storage.name(),
            TilesIn::Device => "device",
        }
    }
}

impl Serialize for TilesIn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Where the run's kernels find the tiles.
fn tiles_in<T: Scalar>(
    args: &CholeskyArgs,
    platform: &hetla::Platform,
    plan: &hetla::Plan,
) -> TilesIn {
    match args.resident {
        true => TilesIn::Device,
        false => TilesIn::Host(plan.storage::<T>(platform, args.storage)),
    }
}

/// The builder of `hetla cholesky`'s options on `platform`.
fn builder(args: &CholeskyArgs, platform: &Arc<hetla::Platform>) -> Cholesky {
    let mut options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .storage(args.storage)
        .host_memory(args.host_memory);
    if let Some(tile) = args.tile {
        options = options.tile(tile);
    }
    if let Some(tail) = args.tail.tail() {
        options = options.tail(tail);
    }
    if args.resident {
        options = options.resident(0);
    }
    options
}

/// hetla's timed factorisations of `a` in `factor` (a warm-up first with `--repeat`): the best
/// run's trace, the timings, and the peak memory they took beyond the matrices (the heap's and the
/// tile-major copy's mapping, which the heap count misses). A resident run's time is its makespan:
/// the copies into and out of the GPU's buffer around it are not timed, as cuSOLVER's resident call
/// has none.
fn timed_runs<T: Scalar>(
    args: &CholeskyArgs,
    options: &Cholesky,
    plan: &hetla::Plan,
    platform: &Arc<hetla::Platform>,
    a: faer::MatRef<'_, T>,
    factor: &mut Buffer<T>,
    tile: usize,
) -> crate::Result<(hetla::Trace, peers::Timings, usize)> {
    let baseline = crate::memory::reset_peak();
    let mapped_before = hetla::limits::mapped_bytes();
    let repeat = args.repeat.map(|r| r as usize);
    let (trace, timings) = peers::repeat(repeat, || {
        factor.as_mut().copy_from(a);
        let start = Instant::now();
        let trace = match args.resident {
            true => crate::device_buffers::in_gpu_memory(
                platform,
                &mut [(factor.as_mut(), true)],
                |on_device| options.clone().tile(tile).factor_device(&mut on_device[0]),
            )?,
            false => options.factor_planned(plan, factor.as_mut())?,
        };
        let seconds = match args.resident {
            true => trace.makespan,
            false => start.elapsed().as_secs_f64(),
        };
        Ok((trace, seconds))
    })?;
    let peak_extra_bytes = crate::memory::peak().saturating_sub(baseline)
        + hetla::limits::mapped_bytes().saturating_sub(mapped_before);
    Ok((trace, timings, peak_extra_bytes))
}

/// What a run needs, before anything is allocated: the matrix, its factor and the residual check's
/// copy; the task graph when the tile is given.
fn check_memory<T: Scalar>(args: &CholeskyArgs) -> crate::Result<()> {
    let elements = (args.n as u128).pow(2);
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
    Ok(())
}

/// The factor's residual ratio and where it was computed: on the GPU when the platform has a real
/// one (n^3 flops there against n^3/3 on the host's cores: seconds at n = 32768 instead of tens),
/// on the host otherwise, or if the GPU's check fails (said on stderr).
fn residual<T: Scalar>(
    platform: &hetla::Platform,
    plan: &hetla::Plan,
    a: faer::MatRef<'_, T>,
    l: faer::MatRef<'_, T>,
) -> crate::Result<(f64, &'static str)> {
    match residual_on_gpu(platform, a, l) {
        Some(Ok(r)) => Ok((r, "gpu0")),
        other => {
            if let Some(Err(e)) = other {
                eprintln!(
                    "warning: the residual on the GPU failed ({e}); computing it on the host"
                );
            }
            let all_cpus = hetla_clusters::available_cpus().len();
            Ok((plan.residual(a, l, Par::rayon(all_cpus))?, "host"))
        }
    }
}

/// `--compare`: each library's own Cholesky of `a` in the run's `factor` buffer, timed as the run
/// was, then (CPU peers) the GEMM of the same order, and with a real GPU cuSOLVER; the peers and
/// hetla's ratios to them go into `report` (a run of `flops`).
fn compare_peers<T: Scalar>(
    args: &CholeskyArgs,
    compare: crate::commands::args::Compare,
    mut factor: Buffer<T>,
    a: faer::MatRef<'_, T>,
    platform: &hetla::Platform,
    flops: f64,
    report: &mut CholeskyReport,
) -> crate::Result<()> {
    // Read by the GPU peers alone.
    #[cfg(not(feature = "cuda"))]
    let _ = platform;
    let repeat = args.repeat.map(|r| r as usize);
    let all_cpus = hetla_clusters::available_cpus().len();
    let mut rates = Vec::new();
    let mut timed_peer = |backend: Backend| -> crate::Result<peers::PeerRate> {
        let ((), timings) = peers::repeat(repeat, || {
            factor.as_mut().copy_from(a);
            let m: MatMut<'_, T> = factor.as_mut();
            Ok(((), peers::library_cholesky(backend, m, all_cpus)?.seconds))
        })?;
        let name = peers::cholesky_peer_name(backend, T::PRECISION);
        Ok(peers::PeerRate::from_timings(&name, timings, flops))
    };
    if compare.cpu() {
        for backend in Backend::available() {
            rates.push(timed_peer(backend)?);
        }
    }
    drop(factor);
    let best_peer = rates.iter().map(|p| p.gflops).fold(0.0, f64::max);
    // With a CUDA GPU in the platform: cuSOLVER on the device-resident matrix and from host
    // memory, GPU 0.
    #[cfg(feature = "cuda")]
    if compare.gpu() && peers::real_gpu(platform) {
        let cusolver = peers::cusolver(peers::Cusolver::Potrf, a, 0, repeat.unwrap_or(1), flops)?;
        report.cusolver = CusolverRatios::of(report.run.measured.gflops, &cusolver);
        rates.extend(cusolver);
    }
    if compare.cpu() {
        let mut dgemm = 0.0f64;
        for backend in Backend::available() {
            // The DGEMM peer costs 6x a Cholesky: one warm-up at most, never repeated.
            let r = peers::gemm::<T>(backend, args.n, all_cpus)?;
            dgemm = dgemm.max(r.gflops);
            rates.push(r);
        }
        report.ratio_to_best_peer = Some(report.run.measured.gflops / best_peer);
        report.ratio_to_dgemm = Some(report.run.measured.gflops / dgemm);
        report.dgemm_gflops = Some(dgemm);
    }
    report.run.add_peers(rates);
    Ok(())
}

/// `--inverse`: hetla's factorisation + inverse timed as `--repeat` says, checked, and with
/// `--compare cpu` each library's own (factorisation included) timed the same way; with
/// `--compare gpu` on a platform with a CUDA GPU, cuSOLVER's ?potrf + ?potri on GPU 0 (resident and
/// from host memory).
fn inverse<T: Scalar>(
    args: &CholeskyArgs,
    options: &Cholesky,
    a: faer::MatRef<'_, T>,
    threads: usize,
    platform: &hetla::Platform,
) -> crate::Result<InverseReport> {
    let n = args.n;
    let repeat = args.repeat.map(|r| r as usize);
    let flops = (n as f64).powi(3) * T::PRECISION.flop_factor();
    // A^-1 goes into a matrix allocated and written once before the clocks, as the output of
    // cuSOLVER's from-host peer is (`Factor::inverse_into`): a fresh n x n matrix per call costs
    // its page faults, which on the GPU node of lease 5 (Firecracker) took 1.5 s of a 1.9 s call
    // at n = 16384.
    let mut x = faer::Mat::<T>::zeros(n, n);
    x.as_mut().fill(T::from_f64(0.0));
    let ((), timings) = peers::repeat(repeat, || {
        let copy = a.to_owned();
        let start = Instant::now();
        options.factor_owned(copy)?.inverse_into(x.as_mut())?;
        Ok(((), start.elapsed().as_secs_f64()))
    })?;
    // The plan of one tile: its check is the same at any tile, and its graph is one task.
    let residual = hetla::Plan::new(
        hetla::Algorithm::CholeskyInverse { n },
        n.max(1),
        T::PRECISION,
    )?
    .residual(a, x.as_ref(), Par::rayon(threads))?;
    drop(x);
    let mut report = InverseReport {
        measured: Measured::new(&timings, flops, residual),
        peers: None,
        ratio_to_best_peer: None,
        cusolver: CusolverRatios::default(),
    };
    let mut rates = Vec::new();
    if args.compare.is_some_and(|c| c.cpu()) {
        let mut buffer = a.to_owned();
        for backend in Backend::available() {
            let ((), timings) = peers::repeat(repeat, || {
                buffer.copy_from(a);
                Ok((
                    (),
                    peers::library_inverse(backend, buffer.as_mut(), threads)?,
                ))
            })?;
            let name = match backend {
                Backend::Faer => "faer-llt-inverse".to_owned(),
                Backend::OpenBlas => format!("openblas-{0}potrf+{0}potri", T::PRECISION),
            };
            rates.push(peers::PeerRate::from_timings(&name, timings, flops));
        }
        let best = rates.iter().map(|p| p.gflops).fold(0.0, f64::max);
        report.ratio_to_best_peer = Some(report.measured.gflops / best);
    }
    #[cfg(feature = "cuda")]
    if args.compare.is_some_and(|c| c.gpu()) && peers::real_gpu(platform) {
        let cusolver = peers::cusolver(peers::Cusolver::Inverse, a, 0, repeat.unwrap_or(1), flops)?;
        report.cusolver = CusolverRatios::of(report.measured.gflops, &cusolver);
        rates.extend(cusolver);
    }
    #[cfg(not(feature = "cuda"))]
    let _ = platform;
    if !rates.is_empty() {
        report.peers = Some(rates);
    }
    Ok(report)
}

/// The matrix the timed factorisations work in: in huge pages (`--huge-pages true`) or an ordinary
/// allocation.
enum Buffer<T: Scalar> {
    Paged(hetla::PagedMat<T>),
    Heap(faer::Mat<T>),
}

impl<T: Scalar> Buffer<T> {
    fn as_ref(&self) -> faer::MatRef<'_, T> {
        match self {
            Buffer::Paged(m) => m.as_ref(),
            Buffer::Heap(m) => m.as_ref(),
        }
    }

    fn as_mut(&mut self) -> MatMut<'_, T> {
        match self {
            Buffer::Paged(m) => m.as_mut(),
            Buffer::Heap(m) => m.as_mut(),
        }
    }
}

/// Prints a factorisation's report as a table.
pub fn print(r: &CholeskyReport) {
    println!(
        "hetla cholesky: n = {}, precision {}, tile = {}{}, {} tasks",
        r.n,
        r.run.precision,
        r.run.tile,
        crate::commands::output::tail_words(r.tail),
        r.run.on.tasks
    );
    println!(
        "  platform  {} kernels, clusters {} = [{}], scheduler {}",
        r.run.backend,
        r.clusters.spec,
        r.clusters.cpusets.join("] ["),
        r.scheduler
    );
    println!(
        "  storage   {}{}",
        r.storage.name(),
        if r.huge_pages {
            ", matrix in huge pages"
        } else {
            ""
        }
    );
    if let Some(locked) = &r.page_locked {
        println!("  host      {locked}");
    }
    if let Some(ms) = r.input_check_ms {
        println!(
            "  input     checked beside the run, done {:.4} s after its start",
            ms * 1e-3
        );
    }
    if r.resident {
        println!(
            "  time      {:.4} s on the GPU, the matrix resident there (copies in and out not timed)",
            r.run.measured.seconds
        );
    } else {
        println!(
            "  time      {:.4} s (the runtime's makespan: {:.4} s)",
            r.run.measured.seconds,
            r.makespan_ms * 1e-3
        );
    }
    println!(
        "  rate      {:.2} Gflop/s ({} flops)",
        r.run.measured.gflops,
        if r.run.precision.is_complex() {
            "4 n^3/3 real"
        } else {
            "n^3/3"
        }
    );
    if r.run.measured.runs > 1 {
        println!(
            "  repeat    best of {} runs after a warm-up; median {:.4} s ({:.2} Gflop/s)",
            r.run.measured.runs,
            r.run.measured.median_seconds,
            r.run.measured.gflops * r.run.measured.seconds / r.run.measured.median_seconds
        );
    }
    println!(
        "  residual  {:.3e}  ||A - L L^H||_1 / (n ||A||_1 eps), {} (threshold {})",
        r.run.measured.residual,
        if r.run.measured.residual_ok {
            "ok"
        } else {
            "TOO LARGE"
        },
        check::RESIDUAL_THRESHOLD
    );
    if let Some(memory) = &r.memory {
        println!(
            "  memory    {:.1} MiB allocated beyond the matrix ({:.3}x its {:.1} MiB); the platform holds {:.1} MiB",
            memory.peak_extra_bytes as f64 / 1048576.0,
            memory.ratio,
            memory.matrix_bytes as f64 / 1048576.0,
            memory.platform_bytes as f64 / 1048576.0
        );
    }
    print_resources(r);
    if let Some(inv) = &r.run.inverse {
        print_inverse(inv, r.run.precision);
    }
    if let (Some(bounds), Some(efficiency)) = (&r.run.on.bounds, r.run.on.efficiency) {
        print_bounds(bounds);
        println!(
            "  efficiency {efficiency:.3} (mixed bound / time; bounds from the durations this run's tasks took)"
        );
    }
    if let Some(c) = &r.tile_choice {
        print_tile_choice(c);
    }
    if let Some(p) = &r.predicted_bounds {
        println!(
            "  predicted mixed bound {:.3} ms ({:.2} Gflop/s) from the stored models, before the run",
            p.mixed_ms, p.mixed_gflops
        );
    }
    if let Some(peers) = &r.run.peers {
        print_peers(r, peers);
    }
    print_phases(&r.phases);
}

/// What the run used: its workers, GPUs, the bytes each link moved and the kernels' rates.
fn print_resources(r: &CholeskyReport) {
    for w in &r.run.on.workers {
        println!(
            "  worker    {:<6} {:4} tasks, busy {:5.1}%",
            w.name,
            w.tasks,
            100.0 * w.busy_fraction
        );
    }
    crate::commands::output::print_pieces(&r.run.on.pieces);
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
    for t in &r.traffic {
        println!(
            "  traffic   {:<6} {} tile copies, at least {:.0} for its {} updates and {} tiles \
             written in {} tiles ({:.2}x)",
            t.gpu,
            t.copies,
            t.lower_bound,
            t.updates,
            t.written,
            t.buffers,
            t.copies as f64 / t.lower_bound.max(1.0)
        );
    }
    for k in &r.run.on.kernels {
        println!(
            "  kernel    {:<6} {:5} x {:9.3} ms  {:7.2} Gflop/s",
            k.op,
            k.count,
            k.mean_seconds * 1e3,
            k.gflops
        );
    }
}

/// The inverse's lines of a report: time, rate, residual and its peers.
fn print_inverse(inv: &InverseReport, precision: hetla::Precision) {
    println!(
        "  inverse   {:.4} s, {:.2} Gflop/s (factor + inverse: n^3 flops{}); residual {:.3e} ||AX - I||_1 / (n ||A||_1 ||X||_1 eps), {}",
        inv.measured.seconds,
        inv.measured.gflops,
        if precision.is_complex() {
            ", 4x real"
        } else {
            ""
        },
        inv.measured.residual,
        if inv.measured.residual_ok {
            "ok"
        } else {
            "TOO LARGE"
        }
    );
    for p in inv.peers.iter().flatten() {
        println!(
            "  inv peer  {:<22} {:8.4} s  {:7.2} Gflop/s (median {:.4} s)",
            p.name, p.seconds, p.gflops, p.median_seconds
        );
    }
    if let Some(ratio) = inv.ratio_to_best_peer {
        println!("  inv ratio hetla / best inverse peer {ratio:.3}");
    }
    if let (Some(resident), Some(host)) = (inv.cusolver.resident, inv.cusolver.from_host) {
        println!(
            "  inv ratio hetla / cuSOLVER potrf+potri resident {resident:.3}, from host {host:.3}"
        );
    }
    if let Some(locked) = inv.cusolver.page_locked {
        println!(
            "  inv ratio hetla / cuSOLVER potrf+potri from page-locked host memory {locked:.3}"
        );
    }
}

/// The tile the run chose and why, with the predicted makespans of the candidates.
fn print_tile_choice(c: &hetla::TileChoice) {
    if c.predictions.is_empty() {
        return;
    }
    let predictions: Vec<String> = c
        .predictions
        .iter()
        .map(|(b, ms)| format!("{b}: {ms:.1} ms"))
        .collect();
    println!(
        "  tile      {}: {} (predicted makespans {}){}",
        c.tile,
        c.reason(),
        predictions.join(", "),
        if c.calibrated.is_empty() {
            String::new()
        } else {
            format!("; timed first: {:?}", c.calibrated)
        }
    );
    if !c.tail_predictions.is_empty() {
        let tails: Vec<String> = (c.tail_predictions.iter())
            .map(|(tail, ms)| format!("{tail}: {ms:.1} ms"))
            .collect();
        println!("  tail      predicted makespans {}", tails.join(", "));
    }
}

/// The peers' lines of a report and hetla's ratios to them.
fn print_peers(r: &CholeskyReport, peers: &[peers::PeerRate]) {
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
    if let Some(ratio) = r.cusolver.resident {
        println!("  ratio     hetla / cuSOLVER ?potrf on the device-resident matrix {ratio:.3}");
    }
    if let Some(ratio) = r.cusolver.from_host {
        println!(
            "  ratio     hetla / cuSOLVER ?potrf from host memory (copy in, factor, copy out) {ratio:.3}"
        );
    }
    if let Some(ratio) = r.cusolver.page_locked {
        println!("  ratio     hetla / cuSOLVER ?potrf from page-locked host memory {ratio:.3}");
    }
}

/// [`hetla::check::cholesky_residual_on_gpu`] on the platform's first GPU when it is a real one
/// (`None` without one: emulated devices and CPU-only platforms check on the host).
fn residual_on_gpu<T: Scalar>(
    platform: &hetla::Platform,
    a: faer::MatRef<'_, T>,
    l: faer::MatRef<'_, T>,
) -> Option<hetla::Result<f64>> {
    let real = peers::real_gpu(platform);
    #[cfg(feature = "cuda")]
    if real {
        return Some(hetla::check::cholesky_residual_on_gpu(a, l, 0));
    }
    let _ = (real, a, l);
    None
}
