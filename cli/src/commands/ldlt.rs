//! `hetla ldlt`: the symmetric (complex: Hermitian) indefinite factorisation A = Q^T L T L^H Q
//! (Aasen's in blocks, `hetla::Ldlt`) of a generated matrix, timed and checked as LAPACK's
//! dchksy_aa checks it (||A - Q^T L T L^H Q||_1 / (n ||A||_1 eps) and a solve's backward error),
//! with A's inertia; `--compare` times in the same process the libraries' own factorisations of the
//! whole matrix: faer's Bunch-Kaufman (`lblt`) on as many threads as the platform has cores, and
//! with the `openblas` feature LAPACK ?sytrf (Bunch-Kaufman) and ?sytrf_aa_2stage (Aasen's in two
//! stages) on OpenBLAS's threads. The report has what every factorisation's has: the workers and
//! kernels of the task graph's run (both stages: T's band LU is its `ldlt_band` chain), its bounds
//! and efficiency.

use std::time::Instant;

use clap::{Args, ValueEnum};
use faer::Mat;
use hetla::{Backend, ClusterSpec, Ldlt, Scalar, SchedulerKind};
use serde::Serialize;

use super::args::{PlatformArgs, parse_positive, parse_spec};
use super::report::RunReport;
use crate::peers;
use crate::{Error, Result};

/// The matrix `hetla ldlt` factors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A random Hermitian matrix: entries uniform in [-1, 1) below the diagonal (both parts for a
    /// complex type), a real diagonal: indefinite, about as many negative eigenvalues as positive.
    Random,
    /// A saddle-point (KKT) matrix [H B^H; B 0]: H a random HPD matrix of order n - n/4, B a random
    /// n/4 x (n - n/4) block: n - n/4 positive eigenvalues and n/4 negative ones.
    Kkt,
}

#[derive(Args)]
pub struct LdltArgs {
    /// Order of the matrix.
    #[arg(long, default_value_t = 2000, value_parser = parse_positive)]
    pub n: usize,
    /// Block order b (T's band is b wide; default 96 in s and d, 32 in c and z, 192 from order 6144
    /// on: `hetla::Ldlt::tile_size_for`).
    #[arg(long, value_parser = parse_positive)]
    pub tile: Option<usize>,
    /// The matrix: random (indefinite) or kkt (a saddle-point matrix of known inertia).
    #[arg(long, default_value = "random", value_enum)]
    pub kind: Kind,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists ("0/1")
    /// or auto. The default is `hetla::Ldlt`'s, a cluster per core.
    #[arg(long, default_value = "core", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// GPUs for Aasen's products and interchanges (the factorisation in block columns, T's diagonal
    /// blocks, the panels and the band steps on the clusters): none (the default until a GPU lease
    /// has timed it), all, indices ("0,1"), or emulated:K (K devices emulated in host memory). Each
    /// GPU keeps a core for its host thread.
    #[arg(long, default_value = "none", value_parser = super::args::parse_gpus)]
    pub gpus: hetla_runtime::GpuSelection,
    /// The precision: s (f32), d (f64), c or z (complex Hermitian, f32 or f64 parts).
    #[arg(long, default_value = "d", value_parser = super::args::run_precision())]
    pub precision: super::args::RunPrecision,
    /// Scheduler: mct, dmda, eager or ws. The default is `hetla::Ldlt`'s, eager.
    #[arg(long, default_value = "eager")]
    pub scheduler: SchedulerKind,
    #[command(flatten)]
    pub traces: super::args::TraceArgs,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also time, in this process and on the same matrix, faer's Bunch-Kaufman factorisation
    /// (`faer-lblt`) and, when built with the `openblas` feature, LAPACK ?sytrf (`openblas-dsytrf`)
    /// and ?sytrf_aa_2stage (`openblas-dsytrf_aa_2stage`) on OpenBLAS's threads (`cpu`); and with a
    /// CUDA GPU among `--gpus`, in s and d, cuSOLVER's Bunch-Kaufman ?sytrf on the device-resident
    /// matrix, from pageable and from page-locked host memory, copies included (`gpu`; cuSOLVER's
    /// complex ?sytrf is complex symmetric, not Hermitian); `--compare` alone: all.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<super::args::Compare>,
    /// One untimed warm-up, then R timed runs of each: the report gives the best and the median.
    /// Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A's inertia: its counts of positive, negative and zero eigenvalues.
#[derive(Serialize)]
pub struct InertiaReport {
    pub positive: usize,
    pub negative: usize,
    pub zero: usize,
}

#[derive(Serialize)]
pub struct LdltReport {
    pub n: usize,
    pub kind: Kind,
    pub clusters: String,
    /// What every factorisation's report has (`residual`: ||A - Q^T L T L^H Q||_1 / (n ||A||_1
    /// eps); n^3/3 flops; `residual_ok` also covers the backward error).
    #[serde(flatten)]
    pub run: RunReport,
    /// A solve's ||A x - b||_1 / (||A||_1 ||x||_1 n eps), after its refinement.
    pub backward_error: f64,
    /// The same backward error in units of eps (not divided by n): ||A x - b||_1 / (||A||_1
    /// ||x||_1 eps).
    pub backward_error_eps: f64,
    /// The refinement steps that improved the solve (LAPACK's ?syrfs, in the working precision).
    pub refinement_steps: usize,
    /// The backward error, in eps, at which refinement with the block Aasen factor stalled when the
    /// solve was made again by A's Bunch-Kaufman factor in double
    /// (`hetla::RefinementPath:: BunchKaufman`); absent when the Aasen factor's refinement
    /// sufficed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aasen_stalled_at: Option<f64>,
    pub inertia: InertiaReport,
    /// ln |det A| (minus infinity, written as null, for a singular A).
    pub log_abs_det: f64,
    /// The first zero pivot of T's LU, if A is singular.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub singular: Option<usize>,
}

pub fn run(args: &LdltArgs) -> Result<LdltReport> {
    match args.precision.single() {
        Some(p) => hetla_kernels::with_scalar!(p, T => ldlt::<T>(args)),
        None => Err(Error::InvalidOption {
            option: "precision",
            reason: "the symmetric indefinite factorisation has no mixed-precision solve yet: give s, d, c or z".into(),
        }),
    }
}

/// The Hermitian matrix of `kind`, order n, from `seed`.
fn generate<T: Scalar>(kind: Kind, n: usize, seed: u64) -> Mat<T> {
    let conj = |x: T| {
        let z = x.to_c64();
        T::from_parts(z.re, -z.im)
    };
    match kind {
        Kind::Random => hetla::matgen::random_hermitian(n, seed),
        Kind::Kkt => {
            let m = n / 4;
            let h: Mat<T> = hetla::matgen::random_hpd(n - m, seed);
            let b: Mat<T> = hetla::matgen::random_in(m, n - m, seed + 1);
            Mat::from_fn(n, n, |i, j| match (i < n - m, j < n - m) {
                (true, true) => h[(i, j)],
                (false, true) => b[(i - (n - m), j)],
                (true, false) => conj(b[(j - (n - m), i)]),
                (false, false) => T::from_f64(0.0),
            })
        }
    }
}

fn ldlt<T: Scalar>(args: &LdltArgs) -> Result<LdltReport> {
    let n = args.n;
    super::args::check_matrices::<T>(&format!("four matrices of order {n}"), 4, (n, n))?;
    let platform =
        super::args::GpuArgs::platform_or_cpus((&args.gpus, None), &args.clusters, &args.platform)?;
    super::output::check_outputs(&args.traces.outputs(), None)?;
    let cores: usize = platform.clusters().iter().map(|c| c.size()).sum();
    let mut builder = Ldlt::new()
        .platform(platform.clone())
        .scheduler(args.scheduler);
    if let Some(b) = args.tile {
        builder = builder.tile(b);
    }
    let a: Mat<T> = generate(args.kind, n, args.seed);
    let plan = builder.plan(n, T::PRECISION)?;
    let runs = args.repeat.map(|r| r as usize);
    let (factored, timings) = peers::repeat(runs, || {
        let start = Instant::now();
        let out = builder.factor_planned(&plan, a.as_ref())?;
        Ok((out, start.elapsed().as_secs_f64()))
    })?;
    let (trace, factor) = factored;
    args.traces.write(&trace);
    let flops = (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor();
    let residual = factor.residual(a.as_ref())?;
    let rhs = Mat::<T>::from_fn(n, 1, |i, _| T::from_f64(((i % 7) as f64) - 3.0));
    let (backward_error, refinement_steps, aasen_stalled_at) =
        match factor.solve_refined(rhs.as_ref()) {
            Ok((x, how)) => (
                hetla::check::backward_error(a.as_ref(), x.as_ref(), rhs.as_ref()),
                how.iterations,
                match how.path {
                    hetla::RefinementPath::BunchKaufman { stalled_at } => Some(stalled_at),
                    _ => None,
                },
            ),
            Err(_) => (f64::NAN, 0, None),
        };
    let inertia = factor.inertia()?;
    let mut run = RunReport::new((&plan, &platform), &timings, flops, &trace, residual);
    run.measured.residual_ok &= backward_error < hetla::check::RESIDUAL_THRESHOLD;
    let mut report = LdltReport {
        n,
        kind: args.kind,
        clusters: args.clusters.to_string(),
        run,
        backward_error,
        backward_error_eps: backward_error * n as f64,
        refinement_steps,
        aasen_stalled_at,
        inertia: InertiaReport {
            positive: inertia.positive,
            negative: inertia.negative,
            zero: inertia.zero,
        },
        log_abs_det: factor.log_abs_det(),
        singular: factor.singular(),
    };
    let compare = args.compare;
    let mut rates = Vec::new();
    if compare.is_some_and(|c| c.cpu()) {
        rates = peers::library_peers(
            || a.clone(),
            cores,
            runs,
            flops,
            |backend| match backend {
                Backend::Faer => Some("faer-lblt".to_owned()),
                Backend::OpenBlas => Some(format!("openblas-{}", lapack_name::<T>("trf"))),
            },
            |backend, mut m, par| backend.library_ldlt(m.as_mut(), par).map(|_| ()),
        )?;
        // Aasen's in two stages: LAPACK's only (faer has none).
        rates.extend(peers::library_peers(
            || a.clone(),
            cores,
            runs,
            flops,
            |backend| match backend {
                Backend::Faer => None,
                Backend::OpenBlas => {
                    Some(format!("openblas-{}", lapack_name::<T>("trf_aa_2stage")))
                }
            },
            |backend, mut m, par| backend.library_ldlt_aasen(m.as_mut(), par).map(|_| ()),
        )?);
    }
    // With a CUDA GPU in the platform, a real matrix: cuSOLVER's ?sytrf on the device-resident
    // matrix and from host memory, GPU 0.
    #[cfg(feature = "cuda")]
    rates.extend(peers::cusolver_asked(
        (compare.is_some_and(|c| c.gpu()), &platform),
        peers::Cusolver::Sytrf,
        (a.as_ref(), runs, flops),
    )?);
    if compare.is_some() {
        report.run.add_peers(rates);
    }
    Ok(report)
}

/// LAPACK's name of the symmetric (real) or Hermitian (complex) routine with `suffix`: dsytrf,
/// zhetrf_aa_2stage.
fn lapack_name<T: Scalar>(suffix: &str) -> String {
    let family = if T::PRECISION.is_complex() {
        "he"
    } else {
        "sy"
    };
    format!("{}{family}{suffix}", T::PRECISION)
}

pub fn print(r: &LdltReport) {
    let run = &r.run;
    println!(
        "hetla ldlt: order {} ({}), block order {}, precision {}, backend {}, clusters {} ({} cores)",
        r.n,
        format!("{:?}", r.kind).to_lowercase(),
        run.tile,
        run.precision,
        run.backend,
        r.clusters,
        run.on.cores
    );
    run.print_time("n^3/3");
    println!(
        "  check     ||A - Q^T L T L^H Q||_1 / (n ||A||_1 eps) = {:.3e}; solve backward error {:.3e} ({:.2} eps) after {} refinement steps{} ({})",
        run.measured.residual,
        r.backward_error,
        r.backward_error_eps,
        r.refinement_steps,
        match r.aasen_stalled_at {
            None => String::new(),
            Some(e) => format!(
                " (Aasen's stalled at {e:.0} eps: solved by Bunch-Kaufman in double precision)"
            ),
        },
        if run.measured.residual_ok {
            "ok"
        } else {
            "TOO LARGE"
        }
    );
    println!(
        "  inertia   {} positive, {} negative, {} zero; ln |det A| = {:.6e}",
        r.inertia.positive, r.inertia.negative, r.inertia.zero, r.log_abs_det
    );
    if let Some(column) = r.singular {
        println!("  singular  T's pivot of column {column} is exactly zero");
    }
    run.print_run();
}
