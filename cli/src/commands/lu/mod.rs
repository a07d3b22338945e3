//! `hetla lu`: the LU factorisation with partial pivoting of a generated random matrix, timed and
//! checked (LAPACK's test ratio ||P A - L U||_1 / (n ||A||_1 eps) and a solve's backward error),
//! with its bounds; `--compare` times in the same process the libraries' own LU on the whole matrix
//! (faer's partial-pivoting LU on as many threads as the platform has cores, and LAPACK ?getrf on
//! OpenBLAS's threads when built with it); `--precision ds` (`zc`) times the mixed-precision solve
//! (`hetla::solve_mixed`, dsgesv) beside the factorisation and solve in double; `--grid 1xQ`
//! factors across the ranks of an MPI job (`grid.rs`).

mod args;
mod grid;

pub use args::LuArgs;

use std::time::Instant;

use faer::{Mat, MatRef};
use hetla::{Backend, Lu, Refinable, Scalar, TensorMath, c64};
use serde::Serialize;

use super::grid_job::NodeOrGrid;
use super::report::RunReport;
use crate::peers;
use crate::{Error, Result};

/// What `hetla lu` reports: a factorisation on this node, or a distributed one.
pub type LuOutput = NodeOrGrid<LuReport, grid::LuGridReport>;

#[derive(Serialize)]
pub struct LuReport {
    pub n: usize,
    /// The generated matrix's 2-norm condition number, when `--cond` gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cond: Option<f64>,
    pub clusters: String,
    /// What every factorisation's report has (`residual`: ||P A - L U||_1 / (n ||A||_1 eps); 2 n^3
    /// / 3 flops).
    #[serde(flatten)]
    pub run: RunReport,
    /// A solve's ||A x - b||_1 / (||A||_1 ||x||_1 n eps).
    pub backward_error: f64,
    /// max |U_ij| / max |A_ij|.
    pub growth: f64,
    /// The first exactly zero pivot, if any (LAPACK's info - 1).
    pub singular: Option<usize>,
    /// Whether the matrix lay in the first GPU's memory (`--resident`): `seconds` is then the run's
    /// makespan, the copies into and out of the GPU's buffer around the call not timed.
    pub resident: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixed: Option<MixedReport>,
    /// Bytes copied per link direction in the best run (with GPUs: `host->gpu0`, `gpu0->host`), as
    /// `hetla cholesky` reports them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bytes: Vec<hetla_runtime::LinkBytes>,
}

/// The mixed-precision solve beside the solve in the matrix's precision.
#[derive(Serialize)]
pub struct MixedReport {
    /// Best seconds of `hetla::solve_mixed` (factorisation in single, refinement, any fallback).
    pub seconds: f64,
    pub median_seconds: f64,
    /// Best seconds of the LU in the matrix's precision and its solve.
    pub full_seconds: f64,
    /// `seconds / full_seconds`.
    pub time_ratio: f64,
    pub path: hetla::Refinement,
    pub backward_error: f64,
    /// How the GPUs computed the single-precision LU's trailing updates.
    pub tensor_math: hetla::TensorMath,
    /// With `--compare gpu` on a CUDA GPU: cuSOLVER's refined solver of the same system with the
    /// same lower precision (`cusolver-d<x>gesv`: resident, from host, page-locked; its rate of the
    /// f64 LU's flops), and this solve's seconds over each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<peers::PeerRate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

/// Runs `hetla lu`: the report, or none on the ranks of a distributed run other than rank 0.
pub fn run(args: &LuArgs) -> Result<Option<LuOutput>> {
    if let Some(grid) = args.grid {
        super::args::no_gpus_on_a_grid(&args.gpus, grid)?;
        let report = grid::run(args, grid)?;
        return Ok(report.map(|r| NodeOrGrid::Grid(Box::new(r))));
    }
    factor(args).map(|r| Some(NodeOrGrid::Node(Box::new(r))))
}

/// Prints a report as a table.
pub fn print(output: &LuOutput) {
    output.print(print_factor, grid::print)
}

fn factor(args: &LuArgs) -> Result<LuReport> {
    use hetla::Precision as P;
    let precision = args.precision;
    match (precision.working, precision.is_mixed() || args.mixed) {
        (working, false) => hetla_kernels::with_scalar!(working, T => lu::<T>(args, None)),
        (P::D, true) => lu::<f64>(args, Some(mixed::<f64>)),
        (P::Z, true) => lu::<c64>(args, Some(mixed::<c64>)),
        (P::S | P::C, true) => Err(Error::Library(hetla::Error::InvalidOption {
            option: "mixed",
            reason: format!(
                "refines to double accuracy: give --precision ds or zc, not {precision} with --mixed"
            ),
        })),
    }
}

/// A mixed solve's run: the builder, its tensor math, the platform where `--resident` puts A and b
/// in GPU 0's memory (`None`: host matrices), the matrix and `--repeat`.
type MixedRun<T> = fn(
    (&Lu, TensorMath, Option<&hetla::Platform>),
    MatRef<'_, T>,
    Option<usize>,
) -> Result<MixedReport>;

fn lu<T: Scalar>(args: &LuArgs, mixed: Option<MixedRun<T>>) -> Result<LuReport> {
    let n = args.n;
    super::args::check_matrices::<T>(&format!("two matrices of order {n}"), 2, (n, n))?;
    let platform = super::args::GpuArgs::platform_or_cpus(
        (&args.gpus, args.gpu_memory),
        &args.clusters,
        &args.platform,
    )?;
    super::output::check_outputs(&args.traces.outputs(), None)?;
    // The hidden --mixed makes a d (z) run mixed too: its factor in s (c).
    let mut precision = args.precision;
    if mixed.is_some() && !precision.is_mixed() {
        precision.factor = match precision.working {
            hetla::Precision::Z => hetla::Precision::C,
            _ => hetla::Precision::S,
        };
    }
    super::args::check_tensor_math(args.tensor_math, precision, Some(&platform))?;
    super::args::check_resident(args.resident, &platform)?;
    let cores: usize = platform.clusters().iter().map(|c| c.size()).sum();
    let mut lu = Lu::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .tensor_math(args.tensor_math);
    if let Some(b) = args.tile {
        lu = lu.tile(b);
    }
    let a: Mat<T> = match args.cond {
        Some(cond) => hetla::matgen::random_conditioned(n, cond, args.seed),
        None => hetla::matgen::random_block_in(n, args.seed, 0..n, 0..n),
    };
    let plan = lu.plan(n, T::PRECISION)?;
    let runs = args.repeat.map(|r| r as usize);
    let ((m, trace, ipiv, singular), timings) =
        timed_factorisations(args, (&lu, &plan, &platform), a.as_ref())?;
    args.traces.write(&trace);
    let flops = 2.0 * (n as f64).powi(3) / 3.0 * T::PRECISION.flop_factor();
    let factor = lu.factor(a.as_ref())?;
    let pivoted = hetla::Outcome::Pivoted {
        lu: m.as_ref(),
        ipiv: &ipiv,
    };
    let residual = plan.residual(a.as_ref(), pivoted, faer::Par::Seq)?;
    let growth = hetla::check::lu_growth(a.as_ref(), m.as_ref());
    let rhs = Mat::<T>::from_fn(n, 1, |i, _| T::from_f64(((i % 7) as f64) - 3.0));
    let backward_error = match factor.solve(rhs.as_ref()) {
        Ok(x) => hetla::check::backward_error(a.as_ref(), x.as_ref(), rhs.as_ref()),
        Err(_) => f64::NAN,
    };
    let run = RunReport::new((&plan, &platform), &timings, flops, &trace, residual);
    let mut report = LuReport {
        n,
        cond: args.cond,
        clusters: args.clusters.to_string(),
        run,
        backward_error,
        growth,
        singular,
        resident: args.resident,
        mixed: None,
        bytes: trace.summary().link_bytes(),
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
                Backend::Faer => Some("faer-lu".to_owned()),
                Backend::OpenBlas => Some(format!("openblas-{}getrf", T::PRECISION)),
            },
            |backend, mut m, par| backend.library_lu(m.as_mut(), par).map(|_| ()),
        )?;
    }
    // With a CUDA GPU in the platform: cuSOLVER's ?getrf on the device-resident matrix and from
    // host memory, GPU 0.
    #[cfg(feature = "cuda")]
    rates.extend(peers::cusolver_asked(
        (compare.is_some_and(|c| c.gpu()), &platform),
        peers::Cusolver::Getrf,
        (a.as_ref(), runs, flops),
    )?);
    if compare.is_some() {
        report.run.add_peers(rates);
    }
    if let Some(mixed) = mixed {
        let resident = args.resident.then_some(&*platform);
        let solved = mixed((&lu, args.tensor_math, resident), a.as_ref(), runs)?;
        #[cfg(feature = "cuda")]
        let solved = match compare.is_some_and(|c| c.gpu()) && peers::real_gpu(&platform) {
            true => irs_peer(solved, (a.as_ref(), args.tensor_math), runs, flops),
            false => solved,
        };
        report.mixed = Some(solved);
    }
    Ok(report)
}

/// hetla's timed factorisations of copies of `a` by `plan` (a warm-up first with `--repeat`): the
/// best run's factor, trace, interchanges and first zero pivot, and the timings. A resident run
/// (`--resident`: the matrix in GPU 0's memory) is timed by its makespan, the copies into and out
/// of the GPU's buffer around it not.
fn timed_factorisations<T: Scalar>(
    args: &LuArgs,
    (lu, plan, platform): (&Lu, &hetla::Plan, &hetla::Platform),
    a: MatRef<'_, T>,
) -> Result<(Factored<T>, peers::Timings)> {
    let runs = args.repeat.map(|r| r as usize);
    peers::repeat(runs, || {
        let mut m = a.to_owned();
        let start = Instant::now();
        let (trace, ipiv, singular) = match args.resident {
            true => crate::device_buffers::in_gpu_memory(
                platform,
                &mut [(m.as_mut(), true)],
                |on_device| lu.factor_device(&mut on_device[0]),
            )?,
            false => lu.factor_planned(plan, m.as_mut())?,
        };
        let seconds = match args.resident {
            true => trace.makespan,
            false => start.elapsed().as_secs_f64(),
        };
        Ok(((m, trace, ipiv, singular), seconds))
    })
}

/// A factorisation's factor, trace, interchanges and first zero pivot.
type Factored<T> = (Mat<T>, hetla::Trace, Vec<usize>, Option<usize>);

/// cuSOLVER's refined solver of the mixed solve's system (b: ones) with the same lower precision,
/// on GPU 0, added to `solved` with the ratios; a peer that fails is left out, named on stderr (the
/// runs timed so far stay reported).
#[cfg(feature = "cuda")]
fn irs_peer<T: Scalar>(
    mut solved: MixedReport,
    (a, math): (MatRef<'_, T>, TensorMath),
    runs: Option<usize>,
    flops: f64,
) -> MixedReport {
    let n = a.nrows();
    let ab = Mat::<T>::from_fn(n, n + 1, |i, j| match j < n {
        true => a[(i, j)],
        false => T::from_f64(1.0),
    });
    let irs = peers::Cusolver::Irs { columns: n, math };
    match peers::cusolver(irs, ab.as_ref(), 0, runs.unwrap_or(1), flops) {
        Ok(rates) => solved.peers.extend(rates),
        Err(e) => eprintln!("hetla lu: cuSOLVER's refined solver left out of the peers: {e}"),
    }
    solved.ratios = (solved.peers.iter())
        .map(|p| (p.name.clone(), solved.seconds / p.seconds))
        .collect();
    solved
}

/// The mixed solve of A x = b (b: ones) and the solve in A's precision, each timed as a call: of
/// host matrices, or (`resident`) of matrices in GPU 0's memory, put there and taken back untimed
/// (`Lu::solve_refined_device` beside `factor_device` + `solve_device`).
fn mixed<T: Refinable>(
    (lu, math, resident): (&Lu, TensorMath, Option<&hetla::Platform>),
    a: MatRef<'_, T>,
    runs: Option<usize>,
) -> Result<MixedReport> {
    use crate::device_buffers::timed_in_gpu_memory;
    let n = a.nrows();
    let b = Mat::<T>::from_fn(n, 1, |_, _| T::from_f64(1.0));
    let ((x, path), t) = peers::repeat(runs, || match resident {
        None => {
            let start = Instant::now();
            let out = lu.solve_refined(a, b.as_ref())?;
            Ok((out, start.elapsed().as_secs_f64()))
        }
        Some(platform) => {
            let (mut a, mut x) = (a.to_owned(), b.clone());
            let (how, seconds) =
                timed_in_gpu_memory(platform, ((a.as_mut(), false), x.as_mut()), |a, x| {
                    lu.solve_refined_device(a, x)
                })?;
            Ok(((x, how), seconds))
        }
    })?;
    let ((), full) = peers::repeat(runs, || match resident {
        None => {
            let start = Instant::now();
            let x = lu.factor(a)?.solve(b.as_ref())?;
            std::hint::black_box(x);
            Ok(((), start.elapsed().as_secs_f64()))
        }
        Some(platform) => {
            let (mut factor, mut x) = (a.to_owned(), b.clone());
            let (_, seconds) =
                timed_in_gpu_memory(platform, ((factor.as_mut(), false), x.as_mut()), |f, x| {
                    let (_, ipiv, _) = lu.factor_device(f)?;
                    lu.solve_device(f, &ipiv, x)
                })?;
            Ok(((), seconds))
        }
    })?;
    Ok(MixedReport {
        seconds: t.best,
        median_seconds: t.median,
        full_seconds: full.best,
        time_ratio: t.best / full.best,
        path,
        backward_error: hetla::check::backward_error(a, x.as_ref(), b.as_ref()),
        tensor_math: math,
        peers: Vec::new(),
        ratios: Vec::new(),
    })
}

fn print_factor(r: &LuReport) {
    let run = &r.run;
    println!(
        "hetla lu: order {}, block width {}, precision {}, backend {}, clusters {} ({} cores)",
        r.n, run.tile, run.precision, run.backend, r.clusters, run.on.cores
    );
    run.print_time("2 n^3/3");
    println!(
        "  check     ||PA - LU||_1 / (n ||A||_1 eps) = {:.3e} ({}); solve backward error {:.3e}; growth {:.3e}",
        run.measured.residual,
        if run.measured.residual_ok {
            "ok"
        } else {
            "TOO LARGE"
        },
        r.backward_error,
        r.growth
    );
    if let Some(column) = r.singular {
        println!("  singular  the pivot of column {column} is exactly zero");
    }
    if r.resident {
        println!(
            "  resident  the matrix in GPU 0's memory: the time is the run's makespan, the copies \
             into and out of its buffer not timed"
        );
    }
    for b in &r.bytes {
        let mib = b.bytes as f64 / 1048576.0;
        println!("  moved     {:<12} {mib:10.1} MiB", b.link);
    }
    run.print_run();
    if let Some(m) = &r.mixed {
        println!(
            "  mixed     {:.4} s (median {:.4} s, tensor math {}) against {:.4} s in {}: {:.3}x the time; {:?}; backward error {:.3e}",
            m.seconds,
            m.median_seconds,
            m.tensor_math,
            m.full_seconds,
            run.precision,
            m.time_ratio,
            m.path.path,
            m.backward_error
        );
        if let Some(seconds) = m.path.factor_seconds {
            println!("  factor    {seconds:.4} s of it: the single-precision LU");
        }
        match m.path.device {
            Some(gpu) => println!(
                "  where     refined on GPU {gpu} (A and the single factor kept in its memory)"
            ),
            None => println!("  where     refined on the host"),
        }
        for (ratio, peer) in m.ratios.iter().zip(&m.peers) {
            println!(
                "  peer      {:<28} {:.4} s: mixed / peer {:.3}",
                ratio.0, peer.seconds, ratio.1
            );
        }
    }
}
