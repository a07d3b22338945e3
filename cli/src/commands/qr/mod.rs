//! `hetla qr`: the tiled Householder QR of a generated random m x n matrix, timed and checked
//! (LAPACK's dqrt01 ratios ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^H Q||_1 / (m eps)), with its
//! bounds; `--compare` times in the same process the libraries' own QR on the whole matrix (faer's
//! blocked QR on as many threads as the platform has cores, LAPACK ?geqrf on OpenBLAS's threads
//! when built with it); `--lstsq K` times least squares with K right-hand sides
//! (`QrFactor::solve_least_squares`, factorisation included) beside faer's and LAPACK ?gels;
//! `--grid PxQ` factors across the ranks of an MPI job (`grid.rs`).

mod args;
mod grid;

pub use args::QrArgs;

use std::time::Instant;

use faer::linalg::solvers::SolveLstsq;
use faer::{Mat, MatRef};
use hetla::{Backend, Qr, QrTree, Scalar};
use serde::Serialize;

use crate::commands::grid_job::NodeOrGrid;
use crate::commands::report::RunReport;
use crate::peers::{self, PeerRate};
use crate::{Error, Result};

#[derive(Serialize)]
pub struct QrReport {
    pub m: usize,
    pub n: usize,
    pub inner: usize,
    /// The tree the graph used (auto resolved).
    pub tree: String,
    pub clusters: String,
    /// What every factorisation's report has (`residual`: ||A - Q R||_1 / (m ||A||_1 eps),
    /// `residual_ok` for it and the orthogonality; 2 m n^2 - 2 n^3 / 3 flops for m >= n, 2 n m^2 -
    /// 2 m^3 / 3 otherwise).
    #[serde(flatten)]
    pub run: RunReport,
    /// ||I - Q^H Q||_1 / (m eps).
    pub orthogonality: f64,
    /// Whether the matrix lay in the first GPU's memory (`--resident`): `seconds` is then the run's
    /// makespan, the copies into and out of the GPU's buffer around the call not timed.
    pub resident: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lstsq: Option<LstsqReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cholqr: Option<CholQrReport>,
}

/// CholeskyQR2 on the same matrix.
#[derive(Serialize)]
pub struct CholQrReport {
    pub seconds: f64,
    pub median_seconds: f64,
    /// The QR's flops over `seconds` (CholeskyQR2 does about twice as many).
    pub gflops: f64,
    pub path: hetla::CholeskyQrPath,
    /// ||A - Q R||_1 / (m ||A||_1 eps).
    pub residual: f64,
    /// ||I - Q^H Q||_1 / (m eps).
    pub orthogonality: f64,
    /// Each peer's seconds over CholeskyQR2's, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

/// Least squares with K right-hand sides, factorisation included.
#[derive(Serialize)]
pub struct LstsqReport {
    pub rhs: usize,
    pub seconds: f64,
    pub median_seconds: f64,
    /// ||A^H (B - A X)||_1 / (||A||_1 ||B - A X||_1 m eps): the residual's part in A's range,
    /// relative (zero for the exact solution).
    pub normal_residual: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's speed over each peer's (their seconds over hetla's), by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

/// What `hetla qr` reports: a factorisation on this node, or a distributed one.
pub type QrOutput = NodeOrGrid<QrReport, grid::QrGridReport>;

/// Runs `hetla qr`: the report, or none on the ranks of a distributed run other than rank 0.
pub fn run(args: &QrArgs) -> Result<Option<QrOutput>> {
    if let Some(grid) = args.grid {
        super::args::no_gpus_on_a_grid(&args.gpus, grid)?;
        let report = grid::run(args, grid)?;
        return Ok(report.map(|r| NodeOrGrid::Grid(Box::new(r))));
    }
    let report = hetla_kernels::with_scalar!(args.precision, T => qr::<T>(args))?;
    Ok(Some(NodeOrGrid::Node(Box::new(report))))
}

/// Prints a report as a table.
pub fn print(output: &QrOutput) {
    output.print(print_factor, grid::print)
}

/// The run's memory and its options' shapes, checked before any work.
fn check_args<T: Scalar>(args: &QrArgs) -> Result<()> {
    let (m, n) = (args.m, args.n);
    super::args::check_matrices::<T>(&format!("three {m} x {n} matrices"), 3, (m, n))?;
    if args.cholqr && m < n {
        return Err(Error::Library(hetla::Error::InvalidOption {
            option: "cholqr",
            reason: format!("CholeskyQR2 needs m >= n, got {m} x {n}"),
        }));
    }
    if let Some(k) = args.lstsq {
        let what = format!("{k} right-hand sides of {m} rows, twice");
        super::args::check_matrices::<T>(&what, 2, (m, k))?;
    }
    if let Some(k) = args.lstsq
        && m < n
    {
        return Err(Error::Library(hetla::Error::InvalidOption {
            option: "lstsq",
            reason: format!("least squares with {k} right-hand sides needs m >= n, got {m} x {n}"),
        }));
    }
    Ok(())
}

fn qr<T: Scalar>(args: &QrArgs) -> Result<QrReport> {
    check_args::<T>(args)?;
    let (m, n) = (args.m, args.n);
    let platform =
        super::args::GpuArgs::platform_or_cpus((&args.gpus, None), &args.clusters, &args.platform)?;
    super::output::check_outputs(&args.traces.outputs(), None)?;
    super::args::check_resident(args.resident, &platform)?;
    let cores: usize = platform.clusters().iter().map(|c| c.size()).sum();
    let mut qr = Qr::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .inner_block(args.inner)
        .tree(args.tree);
    if let Some(b) = args.tile {
        qr = qr.tile(b);
    }
    let a: Mat<T> = hetla::matgen::random_block_in(m.max(n), args.seed, 0..m, 0..n);
    let plan = qr.plan(m, n, T::PRECISION)?;
    let tree = match plan.algorithm() {
        hetla::Algorithm::Qr { tree, .. } => tree.to_string(),
        hetla::Algorithm::QrColumns { .. } => "none (block columns)".into(),
        _ => QrTree::Auto.to_string(),
    };
    let runs = args.repeat.map(|r| r as usize);
    let ((trace, factor), timings) = timed_factorisations(args, (&qr, &plan, &platform), &a)?;
    args.traces.write(&trace);
    let (long, short) = (m.max(n) as f64, m.min(n) as f64);
    let flops =
        (2.0 * long * short * short - 2.0 * short.powi(3) / 3.0) * T::PRECISION.flop_factor();
    let factor = match factor {
        Some(factor) => factor,
        None => qr.factor(a.as_ref())?,
    };
    let (q, r) = (factor.thin_q()?, factor.r());
    let thin = hetla::Outcome::Orthogonal {
        q: q.as_ref(),
        r: r.as_ref(),
    };
    let residual = plan.residual(a.as_ref(), thin, faer::Par::Seq)?;
    let orthogonality = hetla::check::orthogonality(q.as_ref());
    let mut run = RunReport::new((&plan, &platform), &timings, flops, &trace, residual);
    run.measured.residual_ok &= orthogonality < hetla::check::RESIDUAL_THRESHOLD;
    let mut report = QrReport {
        m,
        n,
        inner: args.inner,
        tree,
        clusters: args.clusters.to_string(),
        run,
        orthogonality,
        resident: args.resident,
        lstsq: None,
        cholqr: None,
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
                Backend::Faer => Some("faer-qr".to_owned()),
                Backend::OpenBlas => Some(format!("openblas-{}geqrf", T::PRECISION)),
            },
            |backend, mut m, par| backend.library_qr(m.as_mut(), par),
        )?;
    }
    // With a CUDA GPU in the platform: cuSOLVER's ?geqrf on the device-resident matrix and from
    // host memory, GPU 0.
    #[cfg(feature = "cuda")]
    rates.extend(peers::cusolver_asked(
        (compare.is_some_and(|c| c.gpu()), &platform),
        peers::Cusolver::Geqrf,
        (a.as_ref(), runs, flops),
    )?);
    if compare.is_some() {
        report.run.add_peers(rates);
    }
    if args.cholqr {
        let peers = report.run.peers.as_deref().unwrap_or_default();
        report.cholqr = Some(cholqr(&qr, a.as_ref(), runs, flops, peers)?);
    }
    if let Some(k) = args.lstsq {
        let peers_on = compare.is_some_and(|c| c.cpu()).then_some(cores);
        let gpu_peers = compare.is_some_and(|c| c.gpu()) && peers::real_gpu(&platform);
        let on = (peers_on, gpu_peers);
        report.lstsq = Some(lstsq(&qr, a.as_ref(), (k, args.seed), runs, on)?);
    }
    Ok(report)
}

/// The best run's trace and, with `--resident`, its factor.
type Timed<T> = (hetla::Trace, Option<hetla::QrFactor<T>>);

/// hetla's timed factorisations of copies of `a` by `plan` (a warm-up first with `--repeat`): the
/// best run's trace, and with `--resident` its factor (the matrix in GPU 0's memory, timed by the
/// run's makespan, the copies into and out of the GPU's buffer around it not).
fn timed_factorisations<T: Scalar>(
    args: &QrArgs,
    (qr, plan, platform): (&Qr, &hetla::Plan, &hetla::Platform),
    a: &Mat<T>,
) -> Result<(Timed<T>, peers::Timings)> {
    let runs = args.repeat.map(|r| r as usize);
    let ((trace, factored), timings) = peers::repeat(runs, || {
        let mut f = a.clone();
        let start = Instant::now();
        if !args.resident {
            let trace = qr.factor_planned(plan, f.as_mut())?;
            return Ok(((trace, None), start.elapsed().as_secs_f64()));
        }
        let (trace, ts) = crate::device_buffers::in_gpu_memory(
            platform,
            &mut [(f.as_mut(), true)],
            |on_device| qr.factor_device(&mut on_device[0]),
        )?;
        let seconds = trace.makespan;
        Ok(((trace, Some((f, ts))), seconds))
    })?;
    let factor = match factored {
        Some((f, ts)) => Some(qr.factor_from_block_columns(f, ts)?),
        None => None,
    };
    Ok(((trace, factor), timings))
}

/// CholeskyQR2 of `a` with `qr`'s options, timed (`runs`), checked as the QR is, its time beside
/// the QR's `peers` (a run of `flops`).
fn cholqr<T: Scalar>(
    qr: &Qr,
    a: MatRef<'_, T>,
    runs: Option<usize>,
    flops: f64,
    peers: &[PeerRate],
) -> Result<CholQrReport> {
    let cholqr = hetla::CholeskyQr::with(qr.clone());
    let (f, t) = peers::repeat(runs, || {
        let start = Instant::now();
        let f = cholqr.factor(a)?;
        Ok((f, start.elapsed().as_secs_f64()))
    })?;
    let (residual, orthogonality) = check_qr(a, f.thin_q()?.as_ref(), f.r().as_ref());
    Ok(CholQrReport {
        seconds: t.best,
        median_seconds: t.median,
        gflops: flops / t.best / 1e9,
        path: f.path().clone(),
        residual,
        orthogonality,
        ratios: peers
            .iter()
            .map(|p| (p.name.clone(), p.seconds / t.best))
            .collect(),
    })
}

/// Least squares with `k` right-hand sides (B generated from `seed`): hetla's (factorisation and
/// solve), `runs` as [`peers::repeat`]'s, with `peers_on` (a number of cores) faer's and LAPACK
/// ?gels, each timed the same way, and with `gpu_peers` cuSOLVER's (?geqrf, ?ormqr, ?trsm on GPU 0:
/// resident, from pageable and from page-locked host memory).
fn lstsq<T: Scalar>(
    qr: &Qr,
    a: MatRef<'_, T>,
    (k, seed): (usize, u64),
    runs: Option<usize>,
    (peers_on, gpu_peers): (Option<usize>, bool),
) -> Result<LstsqReport> {
    let b: Mat<T> = hetla::matgen::random_block_in(a.nrows(), seed + 1, 0..a.nrows(), 0..k);
    let (x, t) = peers::repeat(runs, || {
        let start = Instant::now();
        let x = qr.solve_least_squares(a, b.as_ref())?;
        Ok((x, start.elapsed().as_secs_f64()))
    })?;
    let normal_residual = hetla::check::least_squares_residual(a, x.as_ref(), b.as_ref());
    // Rates as the factorisation's flops plus the solve's, the same for every peer.
    let (m, n) = (a.nrows() as f64, a.ncols() as f64);
    let flops = (2.0 * m * n * n - 2.0 * n * n * n / 3.0 + 4.0 * m * n * k as f64)
        * T::PRECISION.flop_factor();
    let mut report = LstsqReport {
        rhs: k,
        seconds: t.best,
        median_seconds: t.median,
        normal_residual,
        peers: None,
        ratios: Vec::new(),
    };
    let mut rates = Vec::new();
    if let Some(cores) = peers_on {
        rates = peers::library_peers(
            || (a.to_owned(), b.clone()),
            cores,
            runs,
            flops,
            |backend| match backend {
                Backend::Faer => Some("faer-lstsq".to_owned()),
                Backend::OpenBlas => Some(format!("openblas-{}gels", T::PRECISION)),
            },
            |backend, (mut f, mut rhs), par| match backend {
                Backend::Faer => {
                    // faer's high-level solve runs on its global parallelism.
                    faer::set_global_parallelism(par);
                    let x = f.as_ref().qr().solve_lstsq(rhs.as_ref());
                    faer::set_global_parallelism(hetla::Par::Seq);
                    std::hint::black_box(x);
                    Ok(())
                }
                Backend::OpenBlas => backend
                    .library_lstsq(f.as_mut(), rhs.as_mut(), par)
                    .map(|_| ()),
            },
        )?;
    }
    #[cfg(feature = "cuda")]
    if gpu_peers {
        // [A | B], as the peer takes it.
        let ab = Mat::from_fn(a.nrows(), a.ncols() + k, |i, j| {
            match j.checked_sub(a.ncols()) {
                None => a[(i, j)],
                Some(j) => b[(i, j)],
            }
        });
        let gels = peers::Cusolver::Gels { columns: a.ncols() };
        // A peer that fails is left out, named on stderr: the runs timed so far stay reported.
        match peers::cusolver(gels, ab.as_ref(), 0, runs.unwrap_or(1), flops) {
            Ok(peer) => rates.extend(peer),
            Err(e) => eprintln!("hetla qr: cuSOLVER's least squares left out of the peers: {e}"),
        }
    }
    #[cfg(not(feature = "cuda"))]
    let _ = gpu_peers;
    if peers_on.is_some() || gpu_peers {
        report.ratios = rates
            .iter()
            .map(|p| (p.name.clone(), p.seconds / report.seconds))
            .collect();
        report.peers = Some(rates);
    }
    Ok(report)
}

/// dqrt01's ratios of a thin Q and its R: ||A - Q R|| and ||I - Q^H Q||.
fn check_qr<T: Scalar>(a: MatRef<'_, T>, q: MatRef<'_, T>, r: MatRef<'_, T>) -> (f64, f64) {
    (
        hetla::check::qr_residual(a, q, r),
        hetla::check::orthogonality(q),
    )
}

fn print_factor(r: &QrReport) {
    let run = &r.run;
    println!(
        "hetla qr: {} x {}, tiles of {} (inner blocks of {}), {} tree, precision {}, backend {}, clusters {} ({} cores), {} tasks",
        r.m,
        r.n,
        run.tile,
        r.inner,
        r.tree,
        run.precision,
        run.backend,
        r.clusters,
        run.on.cores,
        run.on.tasks
    );
    run.print_time("2 m n^2 - 2 n^3/3");
    println!(
        "  check     ||A - QR||_1 / (m ||A||_1 eps) = {:.3e}, ||I - Q^H Q||_1 / (m eps) = {:.3e} ({})",
        run.measured.residual,
        r.orthogonality,
        if run.measured.residual_ok {
            "ok"
        } else {
            "TOO LARGE"
        }
    );
    run.print_run();
    if let Some(c) = &r.cholqr {
        println!(
            "  cholqr    {:.4} s (median {:.4} s), {:.2} Gflop/s (QR's flops); {:?}; ||A - QR|| ratio {:.3e}, ||I - Q^H Q|| ratio {:.3e}",
            c.seconds, c.median_seconds, c.gflops, c.path, c.residual, c.orthogonality
        );
        for (name, ratio) in &c.ratios {
            println!("  ratio     {name} time / CholeskyQR2's {ratio:.3}");
        }
    }
    if let Some(l) = &r.lstsq {
        println!(
            "  lstsq     {} right-hand sides: {:.4} s (median {:.4} s), factorisation included; ||A^H (B - AX)|| ratio {:.3e}",
            l.rhs, l.seconds, l.median_seconds, l.normal_residual
        );
        if let Some(peers) = &l.peers {
            for p in peers {
                println!(
                    "  peer      {:<16} {:8.4} s (median {:.4} s)",
                    p.name, p.seconds, p.median_seconds
                );
            }
            for (name, ratio) in &l.ratios {
                println!("  ratio     {name} time / hetla's {ratio:.3}");
            }
        }
    }
}
