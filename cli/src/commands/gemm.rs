//! `hetla gemm`: one matrix product on this machine (checked against faer, timed beside faer's own
//! product with `--compare`) or, with `--platform`, on a modelled one.

use std::time::Instant;

use clap::Args;
use hetla::Scalar;
use hetla::gemm::{GemmReport, Placement, Strategy};
use hetla::{ClusterSpec, Gemm};
use hetla_lab::{Modelled, PlatformModel};
use hetla_runtime::GpuSelection;
use serde::Serialize;

use super::output::{Phase, Stopwatch, print_phases};

/// Arguments of `hetla gemm`.
#[derive(Args)]
pub struct GemmArgs {
    /// Rows of C and op(A).
    #[arg(long)]
    pub m: usize,
    /// Columns of C and op(B).
    #[arg(long)]
    pub n: usize,
    /// Inner dimension.
    #[arg(long)]
    pub k: usize,
    /// op(A) = A^T (A is stored k x m).
    #[arg(long)]
    pub transa: bool,
    /// op(B) = B^T (B is stored n x k).
    #[arg(long)]
    pub transb: bool,
    /// Factor of the product.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub alpha: f64,
    /// Factor of the old C (0: C is overwritten).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub beta: f64,
    /// Tile side (default: chosen by the model).
    #[arg(long, value_parser = super::args::parse_positive)]
    pub tile: Option<usize>,
    /// auto, dmda, grid, max-reuse, or peri-sum[:rounded|precise][:steal|static].
    #[arg(long, default_value = "auto")]
    pub strategy: Strategy,
    /// CPU clusters ("none" for devices only).
    #[arg(long, default_value = "auto", value_parser = super::args::parse_spec)]
    pub clusters: ClusterSpec,
    #[command(flatten)]
    pub gpus: super::args::GpuArgs,
    #[command(flatten)]
    pub cpu: super::args::PlatformArgs,
    /// Where A, B and C start: host, or gpuI ("gpu0") for each, as "A,B,C" ("host,host,gpu0").
    #[arg(long, default_value = "host,host,host", value_parser = parse_placement)]
    pub placement: [Placement; 3],
    /// Multiply matrices that live in the first GPU's memory where they lie, as cuBLAS's resident
    /// call does (`hetla::Gemm::run_device`): A, B and C copied into buffers of the GPU (for an
    /// emulated device, its memory is host memory) before the call and C back after it, neither
    /// timed; inside the call every tile is copied within the GPU into the run's replicas before
    /// the clock starts, every product runs on that GPU, and C goes back into its buffer after the
    /// clock stops (`--placement gpu0,gpu0,gpu0` times C's copy to host memory). Needs a GPU with
    /// room for all three.
    #[arg(long, conflicts_with = "placement")]
    pub resident: bool,
    /// How the host matrices meet a GPU's copies: staged (packed by CPU cores into page-locked
    /// buffers) or page-locked (A, B and C page-locked for the run by tile columns, the first
    /// before it and the others beside it, a tile staged until its column is locked, the others
    /// copied straight by the GPU's DMA engines; the locking is timed). With `--platform`: the
    /// modelled copies (staged at the model's packing rates, or straight).
    #[arg(long, default_value = "staged")]
    pub host_memory: hetla::HostMemory,
    /// Simulate on this platform model (a preset: sirocco, knl, a100x8, h200, h100, xeon16,
    /// xeon16-target; or a TOML file) instead of running here; `--gpus` then counts the model's
    /// GPUs (all by default).
    #[arg(long)]
    pub platform: Option<String>,
    /// Also time faer's product of the same matrices on all cores (`cpu`; real runs), and with a
    /// CUDA GPU cuBLAS ?gemm on device-resident matrices and as a program calls it from host
    /// memory, copies included (`gpu`); `--compare` alone: all.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<super::args::Compare>,
    /// Skip the check against faer's product (large real runs).
    #[arg(long)]
    pub no_check: bool,
    /// Seed of the random matrices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One untimed warm-up, then R timed products (each on a fresh copy of C): `seconds` and
    /// `gflops` are the best, `median_seconds` the median; with `--compare` the faer peer is timed
    /// the same way. Real runs only. Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    #[command(flatten)]
    pub traces: super::args::TraceArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The precision: s, d, c or z (complex: a transposed operand is its adjoint). Other than d
    /// runs on CPU clusters only; simulations need the platform's rates in it.
    #[arg(long, default_value = "d")]
    pub precision: hetla::Precision,
}

pub(crate) fn parse_placement(s: &str) -> Result<[Placement; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        return Err(format!(
            "expected three places, for A, B and C (\"host,host,gpu0\"), got {s:?}"
        ));
    }
    let one = |p: &str| match p.to_ascii_lowercase().as_str() {
        "host" => Ok(Placement::Host),
        other => other
            .strip_prefix("gpu")
            .and_then(|i| i.parse().ok())
            .map(Placement::Device)
            .ok_or_else(|| format!("unknown place {p:?}: use host or gpuI (\"gpu0\")")),
    };
    Ok([one(parts[0])?, one(parts[1])?, one(parts[2])?])
}

/// What `hetla gemm` reports.
#[derive(Debug, Serialize)]
pub struct GemmOutput {
    /// "run" (this machine) or "simulated".
    pub mode: &'static str,
    /// Platform model (simulations).
    pub platform: Option<String>,
    /// CPU cluster spec (what ran).
    pub clusters: String,
    /// How the defaults were adapted to the platform, if they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The run.
    #[serde(flatten)]
    pub report: GemmReport,
    /// ||C - C_faer||_F / ||C_faer||_F (real runs, unless --no-check).
    pub relative_error: Option<f64>,
    /// The median of the timed runs' seconds (`--repeat`; the report's `seconds` is the best),
    /// absent for simulations.
    pub median_seconds: Option<f64>,
    /// Timed runs (1 without `--repeat`).
    pub runs: usize,
    /// Peers timed in the same run (--compare), the same way as hetla.
    pub peers: Vec<crate::peers::PeerRate>,
    /// hetla's rate over each peer's, by name.
    pub ratios: Vec<(String, f64)>,
    /// Where a real run's wall-clock time went: `platform`, `generate` (A, B and C), `runs` (the
    /// warm-up and timed products), `check` (faer's reference product, also the CPU peer), `peers`
    /// (cuBLAS). Absent for simulations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
}

/// Runs `hetla gemm`.
pub fn run(args: &GemmArgs) -> crate::Result<GemmOutput> {
    let [pa, pb, pc] = args.placement;
    let gemm = Gemm::new()
        .transpose(args.transa, args.transb)
        .scalars(args.alpha, args.beta)
        .tile_or_model(args.tile)
        .strategy(args.strategy)
        .placement(pa, pb, pc)
        .host_memory(args.host_memory);
    let gemm = if args.resident {
        gemm.resident(0)
    } else {
        gemm
    };
    super::output::check_outputs(&args.traces.outputs(), None)?;
    if let Some(name) = &args.platform {
        if args.repeat.is_some() {
            return Err(crate::Error::InvalidOption {
                option: "repeat",
                reason:
                    "a simulation (--platform) is deterministic: --repeat applies to real runs only"
                        .into(),
            });
        }
        let model = PlatformModel::resolve(name)?;
        // On a modelled platform `--gpus` counts the model's GPUs ("8": eight of them).
        let gpus = match &args.gpus.gpus {
            GpuSelection::All => model.gpu_count(),
            GpuSelection::None => 0,
            GpuSelection::List(list) if list.len() == 1 => list[0],
            other => {
                return Err(crate::Error::InvalidOption {
                    option: "gpus",
                    reason: format!(
                        "with --platform, --gpus is a number of GPUs of the model (all, none or a count up to {}), not {other}",
                        model.gpu_count()
                    ),
                });
            }
        };
        if gpus > model.gpu_count() {
            return Err(crate::Error::InvalidOption {
                option: "gpus",
                reason: format!(
                    "platform {} has {} GPU(s), {gpus} were asked for",
                    model.name,
                    model.gpu_count()
                ),
            });
        }
        // A model without CPU rates (a100x8) runs on its GPUs unless clusters are asked for.
        let gpus_only = model.auto_is_gpus_only(&args.clusters);
        let note = gpus_only.then(|| {
            format!(
                "{} has no CPU kernel rates: the product runs on its {gpus} GPU(s) only (--clusters none)",
                model.name
            )
        });
        let clusters = if gpus_only {
            ClusterSpec::None
        } else {
            args.clusters.clone()
        };
        let (report, trace) = hetla_lab::simulate_gemm_traced(
            &gemm,
            &Modelled::new(&model, &args.clusters, gpus)
                .gpu_memory(args.gpus.gpu_memory)
                .precision(args.precision)
                .host_memory(args.host_memory),
            (args.m, args.n, args.k),
            &Default::default(),
        )?;
        args.traces.write(&trace);
        return Ok(GemmOutput {
            mode: "simulated",
            platform: Some(model.name),
            clusters: clusters.to_string(),
            note,
            report,
            relative_error: None,
            median_seconds: None,
            runs: 1,
            peers: Vec::new(),
            ratios: Vec::new(),
            phases: Vec::new(),
        });
    }
    hetla_kernels::with_scalar!(args.precision, T => run_real::<T>(args, &gemm))
}

/// A product on this machine in precision `T`.
fn run_real<T: Scalar>(args: &GemmArgs, gemm: &Gemm) -> crate::Result<GemmOutput> {
    check_memory::<T>(args)?;
    let mut clock = Stopwatch::start();
    let platform = args.gpus.platform(&args.clusters, &args.cpu)?;
    clock.lap("platform");
    if let Some(file) = platform.model_file() {
        super::output::check_outputs(&args.traces.outputs(), Some(file))?;
    }
    let stored = |rows, cols, trans: bool| if trans { (cols, rows) } else { (rows, cols) };
    let (ar, ac) = stored(args.m, args.k, args.transa);
    let (br, bc) = stored(args.k, args.n, args.transb);
    let a = hetla::matgen::random_in::<T>(ar, ac, args.seed);
    let b = hetla::matgen::random_in::<T>(br, bc, args.seed + 1);
    let c0 = hetla::matgen::random_in::<T>(args.m, args.n, args.seed + 2);
    let mut c = c0.clone();
    clock.lap("generate");
    let repeat = args.repeat.map(|r| r as usize);
    // `--resident`: A and B as the device's own (the emulated device reads its copies in place).
    let (mut a_device, mut b_device) = match args.resident {
        true => (a.clone(), b.clone()),
        false => (faer::Mat::zeros(0, 0), faer::Mat::zeros(0, 0)),
    };
    let ((report, trace), timings) = crate::peers::repeat(repeat, || {
        c.copy_from(&c0);
        let (report, trace) = match args.resident {
            true => crate::device_buffers::in_gpu_memory(
                &platform,
                &mut [
                    (a_device.as_mut(), false),
                    (b_device.as_mut(), false),
                    (c.as_mut(), true),
                ],
                |m| {
                    let [a, b, c] = m else {
                        unreachable!("three matrices")
                    };
                    gemm.run_device(&platform, a, b, c)
                },
            )?,
            false => gemm.run_traced(&platform, a.as_ref(), b.as_ref(), c.as_mut())?,
        };
        let seconds = report.seconds;
        Ok(((report, trace), seconds))
    })?;
    args.traces.write(&trace);
    clock.lap("runs");
    let threads = platform.topology().cores().len();
    let par = if threads > 1 {
        faer::Par::rayon(threads)
    } else {
        faer::Par::Seq
    };
    let reference = || {
        let start = Instant::now();
        let r = hetla::check::reference_product(
            a.as_ref(),
            b.as_ref(),
            c0.as_ref(),
            (args.transa, args.transb),
            (args.alpha, args.beta),
            par,
        );
        crate::Result::Ok((r, start.elapsed().as_secs_f64()))
    };
    // The faer peer is the reference product, timed as hetla was (--repeat).
    let cpu_peers = args.compare.is_some_and(super::args::Compare::cpu);
    let checked = match (args.no_check, cpu_peers) {
        (true, false) => None,
        (_, true) => Some(crate::peers::repeat(repeat, reference)?),
        (false, false) => Some(reference().map(|(r, s)| {
            let once = crate::peers::Timings {
                best: s,
                median: s,
                runs: 1,
            };
            (r, once)
        })?),
    };
    let relative_error = match (&checked, args.no_check) {
        (Some((r, _)), false) => Some(hetla::check::relative_error(c.as_ref(), r.as_ref())),
        _ => None,
    };
    clock.lap("check");
    let mut peers = Vec::new();
    if let (true, Some((_, timings))) = (cpu_peers, &checked) {
        let flops =
            2.0 * args.m as f64 * args.n as f64 * args.k as f64 * T::PRECISION.flop_factor();
        peers.push(crate::peers::PeerRate::from_timings(
            &format!("faer-matmul-{threads}-threads"),
            *timings,
            flops,
        ));
    }
    #[cfg(feature = "cuda")]
    if args.compare.is_some_and(super::args::Compare::gpu) && crate::peers::real_gpu(&platform) {
        peers.extend(gpu_peers(args, &a, &b, repeat)?);
    }
    clock.lap("peers");
    let ratios = super::report::ratios(report.gflops, &peers);
    Ok(GemmOutput {
        mode: "run",
        platform: None,
        clusters: args.clusters.to_string(),
        note: None,
        report,
        relative_error,
        median_seconds: Some(timings.median),
        runs: timings.runs,
        peers,
        ratios,
        phases: clock.phases(),
    })
}

/// The memory of a run: the three matrices, C's copy and the check's reference product.
fn check_memory<T: Scalar>(args: &GemmArgs) -> crate::Result<()> {
    let (m, n, k) = (args.m, args.n, args.k);
    let scale = |b: u128| b / 8 * size_of::<T>() as u128;
    let bytes = scale(hetla::limits::matrix_bytes(m, k))
        .saturating_add(scale(hetla::limits::matrix_bytes(k, n)))
        .saturating_add(scale(hetla::limits::matrix_bytes(m, n)).saturating_mul(3));
    hetla::limits::check_memory(
        &format!("gemm --m {m} --n {n} --k {k}: A, B, C, its copy and the reference product"),
        bytes,
    )?;
    Ok(())
}

/// With a CUDA GPU in the platform: cuBLAS on device-resident matrices and from host memory, GPU 0,
/// the same product without transposes or beta (its fastest case): A and B as they are when not
/// transposed (`a`, `b` as stored), else the same product's untransposed operands.
#[cfg(feature = "cuda")]
fn gpu_peers<T: Scalar>(
    args: &GemmArgs,
    a: &faer::Mat<T>,
    b: &faer::Mat<T>,
    repeat: Option<usize>,
) -> crate::Result<[crate::peers::PeerRate; 3]> {
    let (fresh_a, fresh_b);
    let a = if args.transa {
        fresh_a = hetla::matgen::random_in::<T>(args.m, args.k, args.seed);
        &fresh_a
    } else {
        a
    };
    let b = if args.transb {
        fresh_b = hetla::matgen::random_in::<T>(args.k, args.n, args.seed + 1);
        &fresh_b
    } else {
        b
    };
    crate::peers::cublas_gemm(a.as_ref(), b.as_ref(), 0, repeat.unwrap_or(1))
}

/// Prints a product's report as a table.
pub fn print(o: &GemmOutput) {
    let r = &o.report;
    println!(
        "hetla gemm ({}{}): m = {}, n = {}, k = {}, precision {}, tile = {}, strategy {} ({})",
        o.mode,
        o.platform
            .as_ref()
            .map_or(String::new(), |p| format!(" on {p}")),
        r.m,
        r.n,
        r.k,
        r.precision,
        r.tile,
        r.strategy,
        r.strategy_reason
    );
    println!(
        "  time      {:.4} s ({:.2} Gflop/s), model predicted {:.4} s",
        r.seconds, r.gflops, r.predicted_seconds
    );
    if let Some(locked) = &r.page_locked {
        println!("  host      {locked} (before the run, outside its time)");
    }
    if let (Some(median), true) = (o.median_seconds, o.runs > 1) {
        println!(
            "  repeat    best of {} runs after a warm-up; median {median:.4} s",
            o.runs
        );
    }
    if let Some(note) = &o.note {
        println!("  note      {note}");
    }
    if let Some(e) = o.relative_error {
        println!("  error     {e:.2e} relative to faer's product");
    }
    println!(
        "  moved     {:.1} MB, lower bound {:.1} MB (ratio {})",
        r.bytes_moved.total as f64 / 1e6,
        r.comm_lower_bound_bytes.max(0.0) / 1e6,
        r.comm_ratio.map_or("-".into(), |x| format!("{x:.2}"))
    );
    for (device, bytes) in &r.bytes_moved.per_device {
        println!("  device    {device:<6} {:10.1} MB", *bytes as f64 / 1e6);
    }
    for l in &r.bytes_moved.per_link {
        println!(
            "  link      {:<10} {:10.1} MB",
            l.link,
            l.bytes as f64 / 1e6
        );
    }
    for (worker, tasks) in &r.updates {
        println!("  worker    {worker:<6} {tasks:8} tile updates");
    }
    for (p, (_, ratio)) in o.peers.iter().zip(&o.ratios) {
        println!(
            "  peer      {:<24} {:.4} s ({:.2} Gflop/s), hetla / peer = {ratio:.3}",
            p.name, p.seconds, p.gflops
        );
    }
    if !o.phases.is_empty() {
        print_phases(&o.phases);
    }
}
