//! `hetla batch`: many small SPD systems solved at once (`hetla::Cholesky::solve_batch`: one task
//! per system on one core, spread over every cluster), timed and checked, beside faer's own `llt` +
//! `solve` in a loop on one thread and in a rayon `par_iter` on as many threads as the platform has
//! cores (`--compare`).

use std::time::Instant;

use clap::Args;
use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef, Par};
use hetla::{Cholesky, ClusterSpec, Precision, Scalar};
use rayon::prelude::*;
use serde::Serialize;

use super::args::{PlatformArgs, parse_positive, parse_spec};
use crate::Result;
use crate::peers::{self, PeerRate, Timings};

#[derive(Args)]
pub struct BatchArgs {
    /// Number of systems.
    #[arg(long, default_value_t = 10_000, value_parser = parse_positive)]
    pub count: usize,
    /// Order of every system.
    #[arg(long, default_value_t = 64, value_parser = parse_positive)]
    pub n: usize,
    /// Right-hand sides of every system.
    #[arg(long, default_value_t = 1, value_parser = parse_positive)]
    pub nrhs: usize,
    /// Seed of the generator: system i is `hetla::matgen::random_hpd(n, seed + i)`.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists ("0/1")
    /// or auto. Each core of each cluster solves one system at a time.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// The precision: s (f32), d (f64), c or z (complex Hermitian, f32 or f64 parts).
    #[arg(long, default_value = "d")]
    pub precision: Precision,
    /// Also time, in this process, faer's `llt` + `solve` of every system in a loop on one thread
    /// (`faer-loop`) and in a rayon `par_iter` on as many threads as the platform has cores
    /// (`faer-rayon`).
    #[arg(long)]
    pub compare: bool,
    /// One untimed warm-up, then R timed batches: the report gives the best (`seconds`, `gflops`)
    /// and the median; with `--compare` every peer is timed the same way. Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
pub struct BatchReport {
    pub count: usize,
    pub n: usize,
    pub nrhs: usize,
    pub precision: Precision,
    pub backend: hetla::Backend,
    pub clusters: String,
    /// Cores that solve systems (every core of every cluster).
    pub cores: usize,
    /// The best batch, seconds.
    pub seconds: f64,
    pub median_seconds: f64,
    pub runs: usize,
    /// count (n^3/3 + 2 n^2 nrhs) flops (4 times as many real ones for complex) over `seconds`.
    pub gflops: f64,
    /// Systems that returned an error (none for the generated matrices).
    pub failed: usize,
    /// The largest ||A X - B||_1 / (||A||_1 ||X||_1 n eps) over the batch.
    pub backward_error: f64,
    /// Whether it is below LAPACK's threshold, 30.
    pub backward_error_ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's rate over each peer's, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
    /// hetla's rate over the faster faer peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_rayon: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_loop: Option<f64>,
}

pub fn run(args: &BatchArgs) -> Result<BatchReport> {
    hetla_kernels::with_scalar!(args.precision, T => batch::<T>(args))
}

fn batch<T: Scalar>(args: &BatchArgs) -> Result<BatchReport> {
    let (count, n, nrhs) = (args.count, args.n, args.nrhs);
    // The systems, their right-hand sides and solutions are held at once.
    let bytes = (count as u128)
        * (hetla::limits::matrix_bytes(n, n) + 2 * hetla::limits::matrix_bytes(n, nrhs))
        * T::PRECISION.bytes() as u128
        / 8;
    hetla::limits::check_memory(
        &format!("{count} systems of order {n} with {nrhs} right-hand side(s)"),
        bytes,
    )?;
    let platform = args.platform.cpu_platform(&args.clusters)?;
    let cores: usize = platform.clusters().iter().map(|c| c.size()).sum();
    let solver = Cholesky::new().platform(platform.clone());
    let a: Vec<Mat<T>> = (0..count)
        .into_par_iter()
        .map(|i| hetla::matgen::random_hpd(n, args.seed.wrapping_add(i as u64)))
        .collect();
    let b: Vec<Mat<T>> = (0..count)
        .map(|i| Mat::from_fn(n, nrhs, |r, c| T::from_f64(((r + c + i) % 7) as f64 - 3.0)))
        .collect();
    let av: Vec<MatRef<'_, T>> = a.iter().map(|m| m.as_ref()).collect();
    let bv: Vec<MatRef<'_, T>> = b.iter().map(|m| m.as_ref()).collect();
    let runs = args.repeat.map(|r| r as usize);
    let (x, timings) = peers::repeat(runs, || {
        let start = Instant::now();
        let x = solver.solve_batch(&av, &bv)?;
        Ok((x, start.elapsed().as_secs_f64()))
    })?;
    let flops = count as f64
        * ((n as f64).powi(3) / 3.0 + 2.0 * (n * n * nrhs) as f64)
        * T::PRECISION.flop_factor();
    let failed = x.iter().filter(|x| x.is_err()).count();
    let backward_error = x
        .par_iter()
        .enumerate()
        .filter_map(|(i, x)| {
            x.as_ref()
                .ok()
                .map(|x| backward_error(av[i], x.as_ref(), bv[i]))
        })
        .reduce(|| 0.0, f64::max);
    let mut report = BatchReport {
        count,
        n,
        nrhs,
        precision: T::PRECISION,
        backend: platform.backend(),
        clusters: args.clusters.to_string(),
        cores,
        seconds: timings.best,
        median_seconds: timings.median,
        runs: timings.runs,
        gflops: flops / timings.best / 1e9,
        failed,
        backward_error,
        backward_error_ok: backward_error < hetla::check::RESIDUAL_THRESHOLD,
        peers: None,
        ratios: Vec::new(),
        ratio_to_rayon: None,
        ratio_to_loop: None,
    };
    if args.compare {
        let pool = peers::pool(cores)?;
        // faer's own calls read its global parallelism: one thread per system, as hetla's.
        let global = faer::get_global_parallelism();
        faer::set_global_parallelism(Par::Seq);
        let looped = peers::repeat(runs, || {
            time_faer(|| av.iter().zip(&bv).map(faer_solve).count())
        });
        let rayon = peers::repeat(runs, || {
            time_faer(|| pool.install(|| av.par_iter().zip(&bv).map(faer_solve).count()))
        });
        faer::set_global_parallelism(global);
        let rate = |name: &str, (_, t): ((), Timings)| PeerRate::from_timings(name, t, flops);
        let (looped, rayon) = (rate("faer-loop", looped?), rate("faer-rayon", rayon?));
        report.ratio_to_loop = Some(report.gflops / looped.gflops);
        report.ratio_to_rayon = Some(report.gflops / rayon.gflops);
        let peers = vec![looped, rayon];
        report.ratios = super::report::ratios(report.gflops, &peers);
        report.peers = Some(peers);
    }
    Ok(report)
}

/// faer's `llt` and `solve` of one system, as a faer user writes it; `None` when A is not positive
/// definite.
fn faer_solve<T: Scalar>((a, b): (&MatRef<'_, T>, &MatRef<'_, T>)) -> Option<Mat<T>> {
    a.llt(faer::Side::Lower).ok().map(|llt| llt.solve(*b))
}

fn time_faer(f: impl FnOnce() -> usize) -> Result<((), f64)> {
    let start = Instant::now();
    std::hint::black_box(f());
    Ok(((), start.elapsed().as_secs_f64()))
}

/// LAPACK's dpot02 ratio ||A X - B||_1 / (||A||_1 ||X||_1 n eps), A Hermitian given by its lower
/// triangle.
fn backward_error<T: Scalar>(a: MatRef<'_, T>, x: MatRef<'_, T>, b: MatRef<'_, T>) -> f64 {
    let scale = a.nrows().max(1) as f64 * T::PRECISION.epsilon();
    hetla::check::solve_backward_error(a, x, b, Par::Seq) / scale
}

pub fn print(r: &BatchReport) {
    println!(
        "hetla batch: {} systems of order {} with {} right-hand side(s), precision {}, backend {}, clusters {} ({} cores)",
        r.count, r.n, r.nrhs, r.precision, r.backend, r.clusters, r.cores
    );
    super::output::print_time(
        r.seconds,
        r.gflops,
        "count (n^3/3 + 2 n^2 nrhs)",
        r.precision,
        r.runs,
        r.median_seconds,
    );
    println!(
        "  check     {} failed; largest backward error {:.3e} (||AX - B||_1 / (||A||_1 ||X||_1 n eps), {})",
        r.failed,
        r.backward_error,
        if r.backward_error_ok {
            "ok"
        } else {
            "TOO LARGE"
        }
    );
    if let Some(peers) = &r.peers {
        for p in peers {
            println!(
                "  peer      {:<12} {:8.4} s  {:7.2} Gflop/s (median {:.4} s)",
                p.name, p.seconds, p.gflops, p.median_seconds
            );
        }
    }
    if let (Some(rayon), Some(looped)) = (r.ratio_to_rayon, r.ratio_to_loop) {
        println!("  ratios    hetla / faer-rayon {rayon:.3}, hetla / faer-loop {looped:.3}");
    }
}
