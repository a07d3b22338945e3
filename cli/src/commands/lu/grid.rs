//! `hetla lu --grid 1xQ` under `mpirun`: the distributed LU with partial pivoting of a random general
//! matrix generated where its tiles live, in any precision, timed as the slowest rank's, with
//! (`--compare`) ScaLAPACK's p?getrf (the precision's letter) on the same grid, block size and
//! matrix in the same job (feature `scalapack`), then a distributed solve of random right-hand
//! sides with the factor (beside p?getrs with p?getrf's factor). The residual of the factor and the
//! backward error of the solve are computed where the tiles live (nothing is gathered, at any n).
//! Rank 0 reports; the other ranks print nothing but errors.

use hetla::Precision;
use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::LuArgs;
#[cfg(feature = "mpi")]
use crate::commands::grid_job::DEFAULT_GRID_TILE;
use crate::peers::PeerRate;

/// Right-hand sides of the solve after the factorisation (ScaLAPACK's p?getrs timed with as many).
#[cfg(feature = "mpi")]
const SOLVE_RHS: usize = 10;

#[derive(Serialize)]
pub struct LuGridReport {
    pub n: usize,
    /// The precision: s, d, c or z (complex rates count 4 real flops per complex one).
    pub precision: Precision,
    /// The block width (ScaLAPACK's block size).
    pub tile: usize,
    pub grid: String,
    pub ranks: usize,
    pub backend: String,
    /// Rank 0's clusters, each as its cores (within the cores `mpirun` binds the rank to).
    pub clusters: String,
    pub scheduler: String,
    /// Tasks each rank ran.
    pub tasks_by_rank: Vec<usize>,
    /// Seconds each rank's workers spent in kernels over the slowest rank's seconds times its
    /// workers.
    pub busy_by_rank: Vec<f64>,
    /// Seconds of the slowest rank, from a barrier to its end (the best of the timed runs with
    /// `--repeat`).
    pub seconds: f64,
    pub median_seconds: f64,
    pub runs: usize,
    /// 2 n^3 / 3 flops (times 4 in a complex precision) over `seconds`.
    pub gflops: f64,
    /// LAPACK's dget01 ratio probed with random columns where the tiles live
    /// (`hetla::distributed::probed_lu_residual`).
    pub residual: f64,
    pub residual_ok: bool,
    /// The first column whose pivot was exactly zero, if any (the factor is complete).
    pub singular: Option<usize>,
    /// Seconds of the distributed solve of `solve_rhs` random right-hand sides (the interchanges,
    /// then the forward and the backward substitution, each the slowest rank's; the best with
    /// `--repeat`).
    pub solve_seconds: f64,
    pub solve_median_seconds: f64,
    pub solve_rhs: usize,
    /// ||A X - B||_1 / (||A||_1 ||X||_1) of that solve, computed where the tiles live.
    pub solve_backward_error: f64,
    /// Bytes of tiles each rank sent in the solve, and the count of its messages.
    pub solve_bytes_sent_by_rank: Vec<usize>,
    pub solve_bytes_expected_by_rank: Vec<usize>,
    /// ScaLAPACK's p?getrs with p?getrf's factor and the same right-hand sides (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_peers: Option<Vec<PeerRate>>,
    /// hetla's best solve over p?getrs's best (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_ratio_to_pdgetrs: Option<f64>,
    /// Bytes each rank sent (panels: their rows from the diagonal down and their interchanges).
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by the count of the panels' messages (each panel once to each rank
    /// with a block column to update or to swap).
    pub bytes_expected_by_rank: Vec<usize>,
    pub bytes_sent_total: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's best over p?getrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdgetrf: Option<f64>,
    /// The network between ranks 0 and 1, measured in the job before the runs (microseconds; none
    /// with one rank).
    pub network_latency_us: Option<f64>,
    /// Its bandwidth, in GB/s.
    pub network_gb_per_s: Option<f64>,
}

/// Runs the distributed LU `args` describe on `grid`, in its precision: the report on rank 0,
/// `None` on the others.
#[cfg(feature = "mpi")]
pub fn run(args: &LuArgs, grid: ProcessGrid) -> crate::Result<Option<LuGridReport>> {
    match args.precision.single() {
        Some(p) if !args.mixed => hetla_kernels::with_scalar!(p, T => run_in::<T>(args, grid)),
        _ => Err(crate::Error::InvalidOption {
            option: "precision",
            reason: "a distributed LU (--grid) factors in one precision: give s, d, c or z".into(),
        }),
    }
}

/// [`run`] in precision `T`.
#[cfg(feature = "mpi")]
fn run_in<T: crate::commands::grid_job::GridScalar>(
    args: &LuArgs,
    grid: ProcessGrid,
) -> crate::Result<Option<LuGridReport>> {
    use hetla::distributed::{DistributedMatrix, DistributedRhs};
    use hetla::{Lu, check};
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let tile = args.tile.unwrap_or(DEFAULT_GRID_TILE).min(args.n);
    let platform = args.platform.cpu_platform(&args.clusters)?;
    let options = Lu::new()
        .platform(platform.clone())
        .scheduler(args.scheduler);
    let a = DistributedMatrix::<T>::random(&world, (args.n, args.n), tile, grid, args.seed)?;
    let network = hetla::lab::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let mut factor = a.clone();
    let (lu, timings) = crate::peers::repeat(repeat, || {
        factor = a.clone();
        let lu = options.factor_distributed(&world, &mut factor)?;
        let seconds = lu.run.seconds;
        Ok((lu, seconds))
    })?;
    let residual =
        hetla::distributed::probed_lu_residual(&world, &a, &factor, &lu.ipiv, args.seed)?;
    let b = DistributedRhs::<T>::random(&world, (args.n, SOLVE_RHS), tile, grid, args.seed + 1)?;
    let mut x = b.clone();
    let (solve, solve_timings) = crate::peers::repeat(repeat, || {
        x = b.clone();
        let solve = options.solve_distributed(&world, &factor, &lu, &mut x)?;
        let seconds = solve.seconds;
        Ok((solve, seconds))
    })?;
    let solve_backward_error = hetla::distributed::solve_backward_error(&world, &a, &x, &b)?;
    let (tasks_by_rank, busy_by_rank) = crate::commands::grid_job::rank_shares(&world, &lu.run);
    let flops = lu.run.flops;
    let peers = match args.compare {
        true => Some(scalapack_peers(
            &world,
            (&a, &b),
            repeat,
            (flops, solve.flops),
        )?),
        false => None,
    };
    if world.rank() != 0 {
        return Ok(None);
    }
    let best = timings.best;
    let run = lu.run;
    Ok(Some(LuGridReport {
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
        singular: lu.singular,
        solve_seconds: solve_timings.best,
        solve_median_seconds: solve_timings.median,
        solve_rhs: SOLVE_RHS,
        solve_backward_error,
        solve_bytes_sent_by_rank: solve.bytes_sent_by_rank,
        solve_bytes_expected_by_rank: solve.bytes_expected_by_rank,
        solve_ratio_to_pdgetrs: peers.as_ref().map(|(_, s)| s.seconds / solve_timings.best),
        solve_peers: peers.as_ref().map(|(_, s)| vec![s.clone()]),
        bytes_sent_total: run.bytes_sent_by_rank.iter().sum(),
        bytes_sent_by_rank: run.bytes_sent_by_rank,
        bytes_expected_by_rank: run.bytes_expected_by_rank,
        ratio_to_pdgetrf: peers.as_ref().map(|(f, _)| f.seconds / best),
        peers: peers.map(|(f, _)| vec![f]),
        network_latency_us: network.map(|n| n.latency_us),
        network_gb_per_s: network.map(|n| n.gb_per_s),
    }))
}

/// ScaLAPACK's p?getrf on `a`, then p?getrs with its factor on `b`, each timed as hetla is (a
/// warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn scalapack_peers<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    (a, b): (
        &hetla::distributed::DistributedMatrix<T>,
        &hetla::distributed::DistributedRhs<T>,
    ),
    repeat: Option<usize>,
    (flops, solve_flops): (f64, f64),
) -> crate::Result<(PeerRate, PeerRate)> {
    use hetla::distributed::scalapack::{getrf, getrs};
    let warm = usize::from(repeat.is_some());
    let runs = repeat.unwrap_or(1) + warm;
    let rate = |routine: &str, mut seconds: Vec<f64>, flops| {
        let timings = crate::peers::timings(&mut seconds[warm..]);
        let name = format!("scalapack-p{}{routine}", T::LETTER);
        PeerRate::from_timings(&name, timings, flops)
    };
    let lu = getrf(comm, a, runs)?;
    let solved = getrs(comm, &lu, b, runs)?;
    Ok((
        rate("getrf", lu.seconds, flops),
        rate("getrs", solved.seconds, solve_flops),
    ))
}

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
fn scalapack_peers<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    _: &C,
    _: (
        &hetla::distributed::DistributedMatrix<T>,
        &hetla::distributed::DistributedRhs<T>,
    ),
    _: Option<usize>,
    _: (f64, f64),
) -> crate::Result<(PeerRate, PeerRate)> {
    Err(crate::commands::grid_job::no_scalapack(
        "p?getrf and p?getrs",
    ))
}

/// Without MPI, `--grid` is refused with what to do.
#[cfg(not(feature = "mpi"))]
pub fn run(_: &LuArgs, _: ProcessGrid) -> crate::Result<Option<LuGridReport>> {
    Err(crate::commands::grid_job::no_mpi())
}

pub fn print(r: &LuGridReport) {
    println!(
        "hetla lu: n = {}, precision {}, block width {}, grid {} ({} ranks), tasks by rank {:?}",
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
            "8 n^3/3 real"
        } else {
            "2 n^3/3"
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
        "  residual  {:.3e} (||PA - LU||_1 / (n ||A||_1 eps) probed with {} random columns where the tiles live), {}",
        r.residual,
        crate::commands::grid_job::PROBES,
        if r.residual_ok { "ok" } else { "TOO LARGE" }
    );
    if let Some(column) = r.singular {
        println!("  singular  the pivot of column {column} is exactly zero");
    }
    println!(
        "  solve     {:.4} s for {} right-hand sides (median {:.4} s), backward error {:.3e}, sent {:?} bytes by rank (count {:?})",
        r.solve_seconds,
        r.solve_rhs,
        r.solve_median_seconds,
        r.solve_backward_error,
        r.solve_bytes_sent_by_rank,
        r.solve_bytes_expected_by_rank
    );
    for p in r.solve_peers.iter().flatten() {
        println!(
            "  peer      {}: {:.4} s (median {:.4} s)",
            p.name, p.seconds, p.median_seconds
        );
    }
    if let Some(ratio) = r.solve_ratio_to_pdgetrs {
        println!("  ratio     {ratio:.3}x p{}getrs", r.precision);
    }
    println!(
        "  sent      {:.1} MiB in all; by rank {:?} bytes, the panels' count {:?}",
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
    if let Some(ratio) = r.ratio_to_pdgetrf {
        println!("  ratio     {ratio:.3}x p{}getrf", r.precision);
    }
    if let (Some(lat), Some(bw)) = (r.network_latency_us, r.network_gb_per_s) {
        println!("  network   ranks 0 and 1: {lat:.2} us + bytes / {bw:.2} GB/s (measured)");
    }
}
