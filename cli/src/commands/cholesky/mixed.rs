//! `hetla cholesky --precision ds`: a mixed-precision solve (factor in f32, refine in f64) timed
//! beside the f64 factorisation and solve of the same system, in the same process, with both
//! backward errors. With `--resident` both solve matrices in GPU 0's memory
//! (`Cholesky::solve_refined_device`, and `factor_device` + `solve_device` in f64), the copies into
//! and out of it untimed; with `--compare gpu` cuSOLVER's dpotrf (resident, from pageable and from
//! page-locked memory: its factor alone, which favours it) is timed beside them.

use std::sync::Arc;
use std::time::Instant;

use hetla::{Cholesky, Par, Refinement, check, matgen};
use serde::Serialize;

use super::args::CholeskyArgs;
use crate::commands::args::check_tensor_math;
use crate::commands::output::ClustersReport;
use crate::device_buffers::timed_in_gpu_memory;
use crate::peers::{self, Timings};

#[derive(Serialize)]
pub struct MixedReport {
    pub n: usize,
    pub precision: &'static str,
    /// The 2-norm condition number of the generated matrix.
    pub cond: f64,
    /// The tile of both factorisations (chosen as for f64 when not given).
    pub tile: usize,
    /// How the GPUs computed the f32 factor's trailing GEMMs.
    pub tensor_math: hetla::TensorMath,
    pub backend: hetla::Backend,
    pub clusters: ClustersReport,
    /// The mixed solve (`Cholesky::solve_refined`): best and median seconds.
    pub mixed: Timings,
    /// What the mixed solve did (the fastest run's).
    pub refinement: Refinement,
    /// ||A x - b||_1 / (||A||_1 ||x||_1) of the mixed solution.
    pub backward_error: f64,
    /// The f64 factorisation and solve (`Cholesky::factor` then `Factor::solve`).
    pub double: Timings,
    /// Its backward error.
    pub double_backward_error: f64,
    /// Mixed best seconds over f64 best seconds (the target: at most 0.7).
    pub time_ratio: f64,
    /// Mixed backward error over f64's (the target: at most 4).
    pub backward_error_ratio: f64,
    /// Whether A and B lay in GPU 0's memory for both solves (`--resident`).
    pub resident: bool,
    /// With `--compare gpu` on a CUDA GPU: cuSOLVER's dpotrf (`cusolver-dpotrf`: resident, from
    /// host, page-locked; its rate of the factor's flops), and the mixed solve's best seconds over
    /// each (cuSOLVER has no refined SPD solver: its factor alone is the peer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<peers::PeerRate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

pub fn run(args: &CholeskyArgs) -> crate::Result<MixedReport> {
    // The matrix, its f32 copy and factor, and the f64 factor.
    hetla::limits::check_memory(
        &format!(
            "cholesky --precision ds --n {}: the matrix and both factors",
            args.n
        ),
        hetla::limits::matrix_bytes(args.n, args.n).saturating_mul(3),
    )?;
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    check_tensor_math(args.tensor_math, args.precision, Some(&platform))?;
    let mut options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .tensor_math(args.tensor_math);
    let tile = args
        .tile
        .unwrap_or_else(|| options.tile_size_for(args.n))
        .min(args.n);
    options = options.tile(tile);
    if args.resident && platform.devices().is_empty() {
        return Err(crate::Error::InvalidOption {
            option: "resident",
            reason: "--resident solves matrices in a GPU's memory: give --gpus all (or \
                     emulated:1)"
                .into(),
        });
    }
    let a = matgen::random_hpd_conditioned::<f64>(args.n, args.cond, args.seed);
    let b = matgen::random_in::<f64>(args.n, 1, args.seed.wrapping_add(1));
    let repeat = args.repeat.map(|r| r as usize);
    // Alternate the two: a noisy moment then weighs on both alike.
    let (mut mixed_times, mut double_times) = (Vec::new(), Vec::new());
    let mut best: Option<(f64, faer::Mat<f64>, Refinement)> = None;
    let mut double_x = None;
    let runs = repeat.map_or(1, |r| r + 1);
    let solves = Solves {
        options: &options,
        platform: &platform,
        resident: args.resident,
    };
    for run in 0..runs {
        let ((x, how), mixed) = solves.mixed(a.as_ref(), b.as_ref())?;
        let (x64, double) = solves.double(a.as_ref(), b.as_ref())?;
        // With --repeat the first run is a warm-up.
        if repeat.is_some() && run == 0 {
            continue;
        }
        mixed_times.push(mixed);
        double_times.push(double);
        if best.as_ref().is_none_or(|(t, _, _)| mixed < *t) {
            best = Some((mixed, x, how));
        }
        double_x = Some(x64);
    }
    let (Some((_, x, refinement)), Some(x64)) = (best, double_x) else {
        unreachable!("at least one timed run");
    };
    let all = Par::rayon(hetla_clusters::available_cpus().len());
    let backward_error = check::solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), all);
    let double_backward_error =
        check::solve_backward_error(a.as_ref(), x64.as_ref(), b.as_ref(), all);
    let (mixed, double) = (
        peers::timings(&mut mixed_times),
        peers::timings(&mut double_times),
    );
    let peers = gpu_peers(args, &platform, a.as_ref(), repeat);
    let ratios = (peers.iter())
        .map(|p| (p.name.clone(), mixed.best / p.seconds))
        .collect();
    Ok(MixedReport {
        resident: args.resident,
        peers,
        ratios,
        n: args.n,
        precision: "ds",
        cond: args.cond,
        tile,
        tensor_math: args.tensor_math,
        backend: platform.backend(),
        clusters: ClustersReport {
            spec: args.clusters.to_string(),
            cpusets: platform.cpu_lists(),
        },
        time_ratio: mixed.best / double.best,
        backward_error_ratio: backward_error / double_backward_error,
        mixed,
        refinement,
        backward_error,
        double,
        double_backward_error,
    })
}

/// With `--compare gpu` on a CUDA GPU: cuSOLVER's dpotrf on `a` (resident, pageable, page-locked),
/// `runs` timed each; a peer that fails is left out, named on stderr (the solves timed so far stay
/// reported). None otherwise.
fn gpu_peers(
    args: &CholeskyArgs,
    platform: &hetla::Platform,
    a: faer::MatRef<'_, f64>,
    runs: Option<usize>,
) -> Vec<peers::PeerRate> {
    #[cfg(feature = "cuda")]
    if args.compare.is_some_and(|c| c.gpu()) && peers::real_gpu(platform) {
        // n^3 / 3: the factor's flops.
        let flops = (args.n as f64).powi(3) / 3.0;
        let runs = runs.unwrap_or(1);
        match peers::cusolver(peers::Cusolver::Potrf, a, 0, runs, flops) {
            Ok(rates) => return rates.to_vec(),
            Err(e) => eprintln!("hetla cholesky: cuSOLVER's dpotrf left out of the peers: {e}"),
        }
    }
    let _ = (args, platform, a, runs);
    Vec::new()
}

/// The two timed solves of `hetla cholesky --precision ds`: of host matrices, or (`resident`) of
/// matrices in GPU 0's memory, put there and taken back untimed.
struct Solves<'a> {
    options: &'a Cholesky,
    platform: &'a hetla::Platform,
    resident: bool,
}

impl Solves<'_> {
    /// The mixed solve: its solution, what it did, and its seconds.
    fn mixed(
        &self,
        a: faer::MatRef<'_, f64>,
        b: faer::MatRef<'_, f64>,
    ) -> crate::Result<((faer::Mat<f64>, Refinement), f64)> {
        if !self.resident {
            let start = Instant::now();
            let out = self.options.solve_refined(a, b)?;
            return Ok((out, start.elapsed().as_secs_f64()));
        }
        let (mut a, mut x) = (a.to_owned(), b.to_owned());
        let (how, seconds) =
            timed_in_gpu_memory(self.platform, ((a.as_mut(), false), x.as_mut()), |a, x| {
                self.options.solve_refined_device(a, x)
            })?;
        Ok(((x, how), seconds))
    }

    /// The f64 factorisation and solve: its solution and seconds.
    fn double(
        &self,
        a: faer::MatRef<'_, f64>,
        b: faer::MatRef<'_, f64>,
    ) -> crate::Result<(faer::Mat<f64>, f64)> {
        if !self.resident {
            let start = Instant::now();
            let x = self.options.factor(a)?.solve(b)?;
            return Ok((x, start.elapsed().as_secs_f64()));
        }
        let (mut l, mut x) = (a.to_owned(), b.to_owned());
        let (_, seconds) =
            timed_in_gpu_memory(self.platform, ((l.as_mut(), false), x.as_mut()), |l, x| {
                self.options.factor_device(l)?;
                self.options.solve_device(l, x)
            })?;
        Ok((x, seconds))
    }
}

pub fn print(r: &MixedReport) {
    println!(
        "hetla cholesky --precision ds: n = {}, condition number {:.1e}, tile = {}, {} kernels, clusters {}, tensor math {}",
        r.n, r.cond, r.tile, r.backend, r.clusters.spec, r.tensor_math
    );
    let path = match &r.refinement.path {
        hetla::RefinementPath::Mixed => "f32 factor refined in f64".to_owned(),
        hetla::RefinementPath::GmresIr { gmres_steps, shift } => format!(
            "f32 factor (diagonal raised by {shift} ulps) refined in f64 by GMRES-IR ({gmres_steps} GMRES steps)"
        ),
        hetla::RefinementPath::Fallback { reason } => format!("fell back to f64: {reason}"),
        hetla::RefinementPath::Working => "refined in its own precision".to_owned(),
        hetla::RefinementPath::BunchKaufman { stalled_at } => {
            format!("refined in its own precision, then by Bunch-Kaufman from {stalled_at:.0} eps")
        }
    };
    println!(
        "  mixed     {:.4} s (median {:.4} s, {} runs): {path}, {} refinement steps, backward error {:.2e}",
        r.mixed.best, r.mixed.median, r.mixed.runs, r.refinement.iterations, r.backward_error
    );
    if let Some(seconds) = r.refinement.factor_seconds {
        println!(
            "  factor    {seconds:.4} s of it: the f32 factorisation (tensor math {})",
            r.tensor_math
        );
    }
    match r.refinement.device {
        Some(gpu) => println!(
            "  where     factored and refined on GPU {gpu} (A and the factor kept in its memory)"
        ),
        None => println!("  where     factored on the platform's workers, refined on the host"),
    }
    println!(
        "  f64       {:.4} s (median {:.4} s): factor and solve, backward error {:.2e}",
        r.double.best, r.double.median, r.double_backward_error
    );
    println!(
        "  ratios    time mixed / f64 {:.3}, backward error mixed / f64 {:.2}{}",
        r.time_ratio,
        r.backward_error_ratio,
        match r.resident {
            true => " (both on matrices in GPU 0's memory)",
            false => "",
        }
    );
    for ((name, ratio), peer) in r.ratios.iter().zip(&r.peers) {
        println!(
            "  peer      {name:<28} {:.4} s: mixed / peer {ratio:.3}",
            peer.seconds
        );
    }
}
