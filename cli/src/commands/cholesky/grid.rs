//! `hetla cholesky --grid PxQ` under `mpirun`: the distributed factorisation of a random SPD matrix
//! generated where its tiles live, in any precision, timed as the slowest rank's, with
//! (`--compare`) ScaLAPACK's p?potrf (the precision's letter: s, d, c or z) on the same grid, block
//! size and matrix in the same job (feature `scalapack`), then a distributed solve of one random
//! right-hand side with the factor. The residual of the factor and the backward error of the solve
//! are computed where the tiles live (nothing is gathered, at any n). Rank 0 reports; the other
//! ranks print nothing but errors.

use hetla::Precision;
use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::args::CholeskyArgs;
use crate::peers::PeerRate;

use crate::commands::grid_job::PROBES;
#[cfg(feature = "mpi")]
use crate::commands::grid_job::{DEFAULT_GRID_TILE, GridScalar};

/// Right-hand sides of the solve after the factorisation.
const SOLVE_RHS: usize = 1;

#[derive(Serialize)]
pub struct GridReport {
    pub n: usize,
    /// The precision: s, d, c or z (complex rates count 4 real flops per complex one).
    pub precision: Precision,
    pub tile: usize,
    pub grid: String,
    pub ranks: usize,
    pub backend: String,
    /// Rank 0's clusters, each as its cores (space-separated CPU lists, within the cores `mpirun`
    /// binds the rank to); every rank builds its clusters alike.
    pub clusters: String,
    pub scheduler: String,
    /// Tasks each rank ran.
    pub tasks_by_rank: Vec<usize>,
    /// Seconds each rank's workers spent in kernels (summed over its workers) over the slowest
    /// rank's seconds times its workers: what the wait for tiles and the communication left of each
    /// rank's cores.
    pub busy_by_rank: Vec<f64>,
    /// Seconds of the slowest rank, from a barrier to its end (the best of the timed runs with
    /// `--repeat`).
    pub seconds: f64,
    pub median_seconds: f64,
    pub runs: usize,
    pub gflops: f64,
    /// The scaled residual of the factor, probed with random columns where the tiles live
    /// (`hetla::distributed::probed_residual`).
    pub residual: f64,
    pub residual_ok: bool,
    /// Seconds of the distributed solve of one random right-hand side (forward and backward
    /// substitutions, each the slowest rank's; the best with `--repeat`).
    pub solve_seconds: f64,
    pub solve_median_seconds: f64,
    /// ScaLAPACK's pdpotrs with the same factor and right-hand side (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_peers: Option<Vec<PeerRate>>,
    /// hetla's best solve over pdpotrs's best (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_ratio_to_pdpotrs: Option<f64>,
    /// ||A x - b||_1 / (||A||_1 ||x||_1) of that solve, computed where the tiles live.
    pub solve_backward_error: f64,
    /// Bytes of tiles each rank sent in the solve.
    pub solve_bytes_sent_by_rank: Vec<usize>,
    /// Bytes of tiles each rank sent, as counted by the ranks.
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by the 2D block-cyclic count (each final tile of L once to each rank
    /// that reads it).
    pub bytes_expected_by_rank: Vec<usize>,
    pub bytes_sent_total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's best over p?potrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdpotrf: Option<f64>,
    /// The network between ranks 0 and 1, measured in the job before the runs (latency, in
    /// microseconds; none with one rank).
    pub network_latency_us: Option<f64>,
    /// Its bandwidth, in GB/s.
    pub network_gb_per_s: Option<f64>,
    /// The bounds of the best run, with its kernels' shortest durations and the measured network
    /// (absent when they could not be computed; `bounds_error` says why).
    #[serde(flatten)]
    pub bounds: Option<hetla::DistributedBounds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds_error: Option<String>,
    /// The bound over the best run's seconds (at most 1).
    pub efficiency: Option<f64>,
}

/// Runs the distributed factorisation `args` describe on `grid`, in its precision: the report on
/// rank 0, `None` on the others.
#[cfg(feature = "mpi")]
pub fn run(args: &CholeskyArgs, grid: ProcessGrid) -> crate::Result<Option<GridReport>> {
    match args.precision.single() {
        Some(p) => hetla_kernels::with_scalar!(p, T => run_in::<T>(args, grid)),
        None => Err(crate::Error::InvalidOption {
            option: "precision",
            reason: "a distributed run (--grid) factors in one precision: give s, d, c or z".into(),
        }),
    }
}

/// [`run`] in precision `T`.
#[cfg(feature = "mpi")]
fn run_in<T: GridScalar>(
    args: &CholeskyArgs,
    grid: ProcessGrid,
) -> crate::Result<Option<GridReport>> {
    use std::sync::Arc;

    use hetla::distributed::{DistributedMatrix, DistributedRhs};
    use hetla::{Cholesky, check};
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let tile = args.tile.unwrap_or(DEFAULT_GRID_TILE).min(args.n);
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    let options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler);
    let a = DistributedMatrix::<T>::random_spd(&world, args.n, tile, grid, args.seed)?;
    let network = hetla::lab::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let mut factor = a.clone();
    let (run, timings) = crate::peers::repeat(repeat, || {
        factor = a.clone();
        let run = options.factor_distributed(&world, &mut factor)?;
        let seconds = run.seconds;
        Ok((run, seconds))
    })?;
    let residual = hetla::distributed::probed_residual(&world, &a, &factor, args.seed)?;
    let b = DistributedRhs::<T>::random(&world, (args.n, SOLVE_RHS), tile, grid, args.seed + 1)?;
    let mut x = b.clone();
    let (solve, solve_timings) = crate::peers::repeat(repeat, || {
        x = b.clone();
        let solve = options.solve_distributed(&world, &factor, &mut x)?;
        let seconds = solve.seconds;
        Ok((solve, seconds))
    })?;
    let solve_backward_error = hetla::distributed::solve_backward_error(&world, &a, &x, &b)?;
    let (tasks_by_rank, busy_by_rank) = crate::commands::grid_job::rank_shares(&world, &run);
    let flops = run.flops;
    // A finished run is reported even when its bounds cannot be had.
    let free = hetla_runtime::LinkRate {
        latency_us: 0.0,
        gb_per_s: f64::INFINITY,
    };
    let bounds = run.bounds(&world, network.unwrap_or(free));
    let peers = match args.compare {
        Some(_) => Some(vec![potrf_peer(&world, &a, repeat, flops)?]),
        None => None,
    };
    let solve_peers = match args.compare {
        Some(_) => Some(vec![potrs_peer(&world, &factor, &b, repeat, solve.flops)?]),
        None => None,
    };
    if world.rank() != 0 {
        return Ok(None);
    }
    let best = timings.best;
    let (bounds, bounds_error) = match bounds {
        Ok(b) => (Some(b), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(Some(GridReport {
        n: args.n,
        precision: T::PRECISION,
        tile,
        grid: grid.to_string(),
        ranks: grid.size(),
        backend: platform.backend().to_string(),
        clusters: platform.cpu_lists().join(" "),
        scheduler: args.scheduler.to_string(),
        tasks_by_rank,
        busy_by_rank,
        seconds: best,
        median_seconds: timings.median,
        runs: timings.runs,
        gflops: flops / best / 1e9,
        residual,
        residual_ok: residual < check::RESIDUAL_THRESHOLD,
        solve_seconds: solve_timings.best,
        solve_median_seconds: solve_timings.median,
        solve_ratio_to_pdpotrs: solve_peers
            .as_ref()
            .map(|p| p[0].seconds / solve_timings.best),
        solve_peers,
        solve_backward_error,
        solve_bytes_sent_by_rank: solve.bytes_sent_by_rank,
        bytes_sent_total: run.bytes_sent_by_rank.iter().sum(),
        bytes_sent_by_rank: run.bytes_sent_by_rank,
        bytes_expected_by_rank: run.bytes_expected_by_rank,
        ratio_to_pdpotrf: peers.as_ref().map(|p| p[0].seconds / best),
        peers,
        network_latency_us: network.map(|n| n.latency_us),
        network_gb_per_s: network.map(|n| n.gb_per_s),
        efficiency: bounds.as_ref().map(|b| b.bound_ms / (best * 1e3)),
        bounds,
        bounds_error,
    }))
}

/// ScaLAPACK's p?potrf on `a`, timed as hetla is (a warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn potrf_peer<T: GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    a: &hetla::distributed::DistributedMatrix<T>,
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let warm = usize::from(repeat.is_some());
    let runs = hetla::distributed::scalapack::potrf(comm, a, repeat.unwrap_or(1) + warm)?;
    let mut seconds = runs.seconds[warm..].to_vec();
    let timings = crate::peers::timings(&mut seconds);
    let name = format!("scalapack-p{}potrf", T::LETTER);
    Ok(PeerRate::from_timings(&name, timings, flops))
}

/// ScaLAPACK's p?potrs with the factor `l` on `b`, timed as hetla's solve is.
#[cfg(feature = "scalapack")]
fn potrs_peer<T: GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    l: &hetla::distributed::DistributedMatrix<T>,
    b: &hetla::distributed::DistributedRhs<T>,
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let warm = usize::from(repeat.is_some());
    let runs = hetla::distributed::scalapack::potrs(comm, l, b, repeat.unwrap_or(1) + warm)?;
    let mut seconds = runs.seconds[warm..].to_vec();
    let timings = crate::peers::timings(&mut seconds);
    let name = format!("scalapack-p{}potrs", T::LETTER);
    Ok(PeerRate::from_timings(&name, timings, flops))
}

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
fn potrs_peer<T: GridScalar, C: mpi::traits::Communicator>(
    _: &C,
    _: &hetla::distributed::DistributedMatrix<T>,
    _: &hetla::distributed::DistributedRhs<T>,
    _: Option<usize>,
    _: f64,
) -> crate::Result<PeerRate> {
    Err(crate::commands::grid_job::no_scalapack(
        "p?potrf and p?potrs",
    ))
}

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
fn potrf_peer<T: GridScalar, C: mpi::traits::Communicator>(
    _: &C,
    _: &hetla::distributed::DistributedMatrix<T>,
    _: Option<usize>,
    _: f64,
) -> crate::Result<PeerRate> {
    Err(crate::commands::grid_job::no_scalapack("p?potrf"))
}

/// Without MPI, `--grid` is refused with what to do.
#[cfg(not(feature = "mpi"))]
pub fn run(_: &CholeskyArgs, _: ProcessGrid) -> crate::Result<Option<GridReport>> {
    Err(crate::commands::grid_job::no_mpi())
}

pub fn print(r: &GridReport) {
    println!(
        "hetla cholesky: n = {}, precision {}, tile = {}, grid {} ({} ranks), tasks by rank {:?}",
        r.n, r.precision, r.tile, r.grid, r.ranks, r.tasks_by_rank
    );
    println!(
        "  each rank {} kernels, clusters on rank 0's cores [{}], scheduler {}",
        r.backend, r.clusters, r.scheduler
    );
    println!(
        "  time      {:.4} s (the slowest rank's), {:.2} Gflop/s ({} flops)",
        r.seconds,
        r.gflops,
        if r.precision.is_complex() {
            "4 n^3/3 real"
        } else {
            "n^3/3"
        }
    );
    let busy: Vec<String> = r.busy_by_rank.iter().map(|b| format!("{b:.3}")).collect();
    println!(
        "  busy      kernels' share of each rank's cores: {}",
        busy.join(", ")
    );
    if r.runs > 1 {
        println!(
            "  repeat    best of {} runs after a warm-up; median {:.4} s",
            r.runs, r.median_seconds
        );
    }
    println!(
        "  residual  {:.3e} (probed with {} random columns where the tiles live), {}",
        r.residual,
        PROBES,
        if r.residual_ok { "ok" } else { "TOO LARGE" }
    );
    println!(
        "  solve     {:.4} s for {SOLVE_RHS} right-hand side (median {:.4} s), backward error {:.3e}, sent {:?} bytes by rank",
        r.solve_seconds, r.solve_median_seconds, r.solve_backward_error, r.solve_bytes_sent_by_rank
    );
    for p in r.solve_peers.iter().flatten() {
        println!(
            "  peer      {}: {:.4} s (median {:.4} s)",
            p.name, p.seconds, p.median_seconds
        );
    }
    if let Some(ratio) = r.solve_ratio_to_pdpotrs {
        println!("  ratio     {ratio:.3}x p{}potrs", r.precision);
    }
    println!(
        "  sent      {:.1} MiB in all; by rank {:?} bytes, the 2D block-cyclic count {:?}",
        r.bytes_sent_total as f64 / 1048576.0,
        r.bytes_sent_by_rank,
        r.bytes_expected_by_rank
    );
    for p in r.peers.iter().flatten() {
        println!(
            "  peer      {}: {:.4} s, {:.2} Gflop/s (median {:.4} s)",
            p.name, p.seconds, p.gflops, p.median_seconds
        );
    }
    if let Some(ratio) = r.ratio_to_pdpotrf {
        println!("  ratio     {ratio:.3}x p{}potrf", r.precision);
    }
    if let (Some(lat), Some(bw)) = (r.network_latency_us, r.network_gb_per_s) {
        println!("  network   ranks 0 and 1: {lat:.2} us + bytes / {bw:.2} GB/s (measured)");
    }
    match (&r.bounds, &r.bounds_error) {
        (Some(b), _) => {
            let mixed = b
                .mixed_ms
                .map_or_else(|| "not computed".to_owned(), |ms| format!("{ms:.3} ms"));
            println!(
                "  bounds    critical path {:.3} ms, area {:.3} ms, mixed {mixed}, busiest NIC {:.3} ms, critical path with messages {:.3} ms, busiest rank's area {:.3} ms",
                b.cp_ms, b.area_ms, b.network_ms, b.cp_network_ms, b.node_area_ms
            );
            println!(
                "  efficiency {:.3} ({} bound {:.3} ms = {:.2} Gflop/s, over the best run)",
                r.efficiency.unwrap_or(f64::NAN),
                b.bound_by,
                b.bound_ms,
                b.bound_gflops
            );
        }
        (None, Some(e)) => println!("  bounds    not computed: {e}"),
        (None, None) => {}
    }
}
