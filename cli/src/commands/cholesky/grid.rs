//! `hetla cholesky --grid PxQ` under `mpirun`: the distributed factorisation of a random SPD matrix
//! generated where its tiles live, in any precision, timed as the slowest rank's, with
//! (`--compare`) ScaLAPACK's p?potrf (the precision's letter: s, d, c or z) on the same grid, block
//! size and matrix in the same job (feature `scalapack`), then a distributed solve of one random
//! right-hand side with the factor. The residual of the factor and the backward error of the solve
//! are computed where the tiles live (nothing is gathered, at any n). Rank 0 reports; the other
//! ranks print nothing but errors.

use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::args::CholeskyArgs;
use crate::commands::grid_job::{GridRun, print_peers};
use crate::commands::report::RunReport;
use crate::peers::PeerRate;

#[cfg(feature = "mpi")]
use crate::commands::grid_job::GridScalar;

/// Right-hand sides of the solve after the factorisation.
const SOLVE_RHS: usize = 1;

#[derive(Serialize)]
pub struct GridReport {
    /// What every distributed run reports (its residual: the factor's, probed where the tiles live;
    /// its flops n^3 / 3, times 4 in a complex precision).
    #[serde(flatten)]
    pub run: RunReport<GridRun>,
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
    /// hetla's best over p?potrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdpotrf: Option<f64>,
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

    use crate::commands::grid_job::GridSetup;
    use hetla::Cholesky;
    use hetla::distributed::{DistributedMatrix, DistributedRhs};
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let platform = Arc::new(args.gpu.platform(&args.clusters, &args.platform)?);
    let options = Cholesky::new()
        .platform(platform.clone())
        .scheduler(args.scheduler);
    // The tile a run on one node would take, rank 0's choice on every rank.
    let tile = match args.tile {
        Some(tile) => tile.min(args.n),
        None => options.distributed_tile_in(&world, (args.n, grid), T::PRECISION)?,
    };
    let a = DistributedMatrix::<T>::random_spd(&world, args.n, tile, grid, args.seed)?;
    let network = hetla::distributed::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let factor = |f: &mut _| options.factor_distributed(&world, f);
    let (run, factor, timings) =
        crate::commands::grid_job::timed(repeat, &a, factor, |r| r.seconds)?;
    let residual = hetla::distributed::probed_residual(&world, &a, &factor, args.seed)?;
    let b = DistributedRhs::<T>::random(&world, (args.n, SOLVE_RHS), tile, grid, args.seed + 1)?;
    let solve = |x: &mut _| options.solve_distributed(&world, &factor, x);
    let (solve, x, solve_timings) =
        crate::commands::grid_job::timed(repeat, &b, solve, |s| s.seconds)?;
    let solve_backward_error = hetla::distributed::solve_backward_error(&world, &a, &x, &b)?;
    let flops = run.flops;
    let peers = match args.compare {
        Some(_) => Some(vec![potrf_peer(&world, &a, repeat, flops)?]),
        None => None,
    };
    let solve_peers = match args.compare {
        Some(_) => Some(vec![potrs_peer(&world, &factor, &b, repeat, solve.flops)?]),
        None => None,
    };
    let setup = GridSetup {
        shape: (args.n, args.n),
        tile,
        grid,
        platform: &platform,
        scheduler: args.scheduler,
    };
    let mut grid_run = RunReport::of_grid(&world, setup, &run, (&timings, residual), network);
    if world.rank() != 0 {
        return Ok(None);
    }
    let best = timings.best;
    grid_run.peers = peers.clone();
    Ok(Some(GridReport {
        run: grid_run,
        solve_seconds: solve_timings.best,
        solve_median_seconds: solve_timings.median,
        solve_ratio_to_pdpotrs: solve_peers
            .as_ref()
            .map(|p| p[0].seconds / solve_timings.best),
        solve_peers,
        solve_backward_error,
        solve_bytes_sent_by_rank: solve.bytes_sent_by_rank,
        ratio_to_pdpotrf: peers.as_ref().map(|p| p[0].seconds / best),
    }))
}

#[cfg(feature = "scalapack")]
use crate::commands::grid_job::{peer_rate, peer_runs};

/// ScaLAPACK's p?potrf on `a`, timed as hetla is (a warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn potrf_peer<T: GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    a: &hetla::distributed::DistributedMatrix<T>,
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let runs = hetla::distributed::scalapack::potrf(comm, a, peer_runs(repeat))?;
    Ok(peer_rate::<T>("potrf", runs.seconds, repeat, flops))
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
    let runs = hetla::distributed::scalapack::potrs(comm, l, b, peer_runs(repeat))?;
    Ok(peer_rate::<T>("potrs", runs.seconds, repeat, flops))
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
    let run = &r.run;
    run.print_head(("cholesky", "tile ="), ("n^3/3", "4 n^3/3 real"));
    run.print_residual("");
    println!(
        "  solve     {:.4} s for {SOLVE_RHS} right-hand side (median {:.4} s), backward error {:.3e}, sent {:?} bytes by rank",
        r.solve_seconds, r.solve_median_seconds, r.solve_backward_error, r.solve_bytes_sent_by_rank
    );
    let potrs = format!("p{}potrs", run.precision);
    print_peers(r.solve_peers.as_deref(), r.solve_ratio_to_pdpotrs, &potrs);
    let peers = (r.run.peers.as_deref(), r.ratio_to_pdpotrf);
    run.print_tail("the 2D block-cyclic count", peers, "potrf");
}
