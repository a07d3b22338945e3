//! `hetla lu --grid PxQ` under `mpirun`: the distributed LU with partial pivoting of a random
//! general matrix generated where its tiles live, in any precision, timed as the slowest rank's,
//! with (`--compare`) ScaLAPACK's p?getrf (the precision's letter) on the same grid, block size and
//! matrix in the same job (feature `scalapack`), then a distributed solve of random right-hand
//! sides with the factor (beside p?getrs with p?getrf's factor). The residual of the factor and the
//! backward error of the solve are computed where the tiles live (nothing is gathered, at any n).
//! Rank 0 reports; the other ranks print nothing but errors.

use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::args::LuArgs;
use crate::commands::grid_job::{GridRun, print_peers};
use crate::commands::report::RunReport;
use crate::peers::PeerRate;

/// Right-hand sides of the solve after the factorisation (ScaLAPACK's p?getrs timed with as many).
#[cfg(feature = "mpi")]
const SOLVE_RHS: usize = 10;

#[derive(Serialize)]
pub struct LuGridReport {
    /// What every distributed run reports (its residual: LAPACK's dget01 ratio probed where the
    /// tiles live; its flops 2 n^3 / 3, times 4 in a complex precision).
    #[serde(flatten)]
    pub run: RunReport<GridRun>,
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
    /// hetla's best over p?getrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdgetrf: Option<f64>,
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
    use crate::commands::grid_job::{GridSetup, grid_tile};
    use hetla::Lu;
    use hetla::distributed::{DistributedMatrix, DistributedRhs};
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let platform = args.platform.cpu_platform(&args.clusters)?;
    let options = Lu::new()
        .platform(platform.clone())
        .scheduler(args.scheduler);
    // The block width a run on one node would take (from the order and backend alone: the same on
    // every rank).
    let tile = args
        .tile
        .unwrap_or_else(|| grid_tile(options.tile_size_for(args.n), args.n, grid))
        .min(args.n);
    let a = DistributedMatrix::<T>::random(&world, (args.n, args.n), tile, grid, args.seed)?;
    let network = hetla::distributed::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let factor = |f: &mut _| options.factor_distributed(&world, f);
    let (lu, factor, timings) =
        crate::commands::grid_job::timed(repeat, &a, factor, |lu| lu.run.seconds)?;
    let residual = lu.probed_residual(&world, &a, &factor, args.seed)?;
    let b = DistributedRhs::<T>::random(&world, (args.n, SOLVE_RHS), tile, grid, args.seed + 1)?;
    let solve = |x: &mut _| options.solve_distributed(&world, &factor, &lu, x);
    let (solve, x, solve_timings) =
        crate::commands::grid_job::timed(repeat, &b, solve, |s| s.seconds)?;
    let solve_backward_error = hetla::distributed::solve_backward_error(&world, &a, &x, &b)?;
    let setup = GridSetup {
        shape: (args.n, args.n),
        tile,
        grid,
        platform: &platform,
        scheduler: args.scheduler,
    };
    let mut run = RunReport::of_grid(&world, setup, &lu.run, (&timings, residual), network);
    let peers = match args.compare.is_some() {
        true => Some(scalapack_peers(
            &world,
            (&a, &b),
            repeat,
            (lu.run.flops, solve.flops),
        )?),
        false => None,
    };
    if world.rank() != 0 {
        return Ok(None);
    }
    run.peers = peers.as_ref().map(|(f, _)| vec![f.clone()]);
    Ok(Some(LuGridReport {
        ratio_to_pdgetrf: peers
            .as_ref()
            .map(|(f, _)| f.seconds / run.measured.seconds),
        run,
        singular: lu.singular,
        solve_seconds: solve_timings.best,
        solve_median_seconds: solve_timings.median,
        solve_rhs: SOLVE_RHS,
        solve_backward_error,
        solve_bytes_sent_by_rank: solve.bytes_sent_by_rank,
        solve_bytes_expected_by_rank: solve.bytes_expected_by_rank,
        solve_ratio_to_pdgetrs: peers.as_ref().map(|(_, s)| s.seconds / solve_timings.best),
        solve_peers: peers.as_ref().map(|(_, s)| vec![s.clone()]),
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
    use crate::commands::grid_job::{peer_rate, peer_runs};
    use hetla::distributed::scalapack::{getrf, getrs};
    let lu = getrf(comm, a, peer_runs(repeat))?;
    let solved = getrs(comm, &lu, b, peer_runs(repeat))?;
    Ok((
        peer_rate::<T>("getrf", lu.seconds, repeat, flops),
        peer_rate::<T>("getrs", solved.seconds, repeat, solve_flops),
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
    let run = &r.run;
    let tiled = run
        .on
        .grid
        .parse::<ProcessGrid>()
        .is_ok_and(|g| g.rows() > 1);
    let width = if tiled { "tile" } else { "block width" };
    run.print_head(("lu", width), ("2 n^3/3", "8 n^3/3 real"));
    run.print_residual("||PA - LU||_1 / (n ||A||_1 eps) ");
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
    let getrs = format!("p{}getrs", run.precision);
    print_peers(r.solve_peers.as_deref(), r.solve_ratio_to_pdgetrs, &getrs);
    let peers = (r.run.peers.as_deref(), r.ratio_to_pdgetrf);
    let count = match tiled {
        true => "the tiles' count",
        false => "the panels' count",
    };
    run.print_tail(count, peers, "getrf");
}
