//! `hetla qr --grid PxQ` under `mpirun`: the distributed Householder QR (on 1 x Q, LAPACK's blocked
//! QR in block columns; with P > 1, the tiled QR with its tree over the process column: TSQR/CAQR)
//! of a random general m x n matrix generated where its tiles live, in any precision, timed as the
//! slowest rank's, with (`--compare`) ScaLAPACK's p?geqrf (the precision's letter) on the same
//! grid, block size and matrix in the same job (feature `scalapack`). R is checked against A where
//! the tiles live (nothing is gathered, at any size). `--lstsq K` then solves least squares with K
//! random right-hand sides (the QR with Q^H B in one graph, then the upper substitution), beside
//! p?gels with `--compare`. CholeskyQR2 (`--cholqr`) across ranks is not built yet and is refused.
//! Rank 0 reports; the other ranks print nothing but errors.

use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::args::QrArgs;
use crate::commands::grid_job::GridRun;
use crate::commands::report::RunReport;
use crate::peers::PeerRate;

#[derive(Serialize)]
pub struct QrGridReport {
    /// What every distributed run reports (its residual: ||A^H A - R^H R||_1 / (m ||A||_1^2 eps)
    /// probed where the tiles live; its flops 2 m n^2 - 2 n^3 / 3, times 4 in a complex precision).
    #[serde(flatten)]
    pub run: RunReport<GridRun>,
    /// hetla's best over p?geqrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdgeqrf: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lstsq: Option<LstsqGridReport>,
}

/// Distributed least squares with `rhs` right-hand sides (`--lstsq`), factorisation included.
#[derive(Serialize)]
pub struct LstsqGridReport {
    pub rhs: usize,
    /// Seconds of the QR with Q^H B plus the substitution, each the slowest rank's (the best with
    /// `--repeat`).
    pub seconds: f64,
    pub median_seconds: f64,
    pub gflops: f64,
    /// LAPACK's dqrt17 ratio ||A^H (B - A X)||_1 / (||A||_1 ||B||_1 max(m, k) eps), computed where
    /// the tiles live.
    pub normal_residual: f64,
    pub residual_ok: bool,
    /// Bytes each rank sent (QR and substitution), and the count of their messages.
    pub bytes_sent_by_rank: Vec<usize>,
    pub bytes_expected_by_rank: Vec<usize>,
    /// ScaLAPACK's p?gels on the same matrix and right-hand sides (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's best over p?gels's best (with `--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdgels: Option<f64>,
}

/// What `--grid` does not run yet, refused before MPI starts.
fn check_args(args: &QrArgs) -> crate::Result<()> {
    let refuse = |option: &'static str, what: &str| {
        Err(crate::Error::InvalidOption {
            option,
            reason: format!("{what} across ranks (--grid) is not built yet: drop --{option}"),
        })
    };
    if args.cholqr {
        return refuse("cholqr", "CholeskyQR2");
    }
    if args.tree != hetla::QrTree::Auto {
        return Err(crate::Error::InvalidOption {
            option: "tree",
            reason: format!(
                "--tree {} across ranks (--grid): the grid sets a distributed QR's tree (block columns on 1xQ; on PxQ, P > 1, a flat tree within each process row's tiles and a chain across the process rows): drop --tree",
                args.tree
            ),
        });
    }
    if args.m < args.n {
        return Err(crate::Error::InvalidOption {
            option: "m",
            reason: format!(
                "a distributed QR factors a matrix with at least as many rows as columns: --m {} is less than --n {}",
                args.m, args.n
            ),
        });
    }
    Ok(())
}

/// Runs the distributed QR `args` describe on `grid`, in its precision: the report on rank 0,
/// `None` on the others.
#[cfg(feature = "mpi")]
pub fn run(args: &QrArgs, grid: ProcessGrid) -> crate::Result<Option<QrGridReport>> {
    check_args(args)?;
    hetla_kernels::with_scalar!(args.precision, T => run_in::<T>(args, grid))
}

/// [`run`] in precision `T`.
#[cfg(feature = "mpi")]
fn run_in<T: crate::commands::grid_job::GridScalar>(
    args: &QrArgs,
    grid: ProcessGrid,
) -> crate::Result<Option<QrGridReport>> {
    use crate::commands::grid_job::{GridSetup, grid_tile, timed};
    use hetla::Qr;
    use hetla::distributed::DistributedMatrix;
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let (m, n) = (args.m, args.n);
    let platform = args.platform.cpu_platform(&args.clusters)?;
    let options = Qr::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .inner_block(args.inner);
    // The tile a run on one node would take (from the shape alone: the same on every rank).
    let tile = args
        .tile
        .unwrap_or_else(|| grid_tile(options.tile_size_for(m, n), n, grid))
        .min(n);
    let a = DistributedMatrix::<T>::random(&world, (m, n), tile, grid, args.seed)?;
    let network = hetla::distributed::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let factor = |f: &mut _| options.factor_distributed(&world, f);
    let (run, factor, timings) = timed(repeat, &a, factor, |r| r.seconds)?;
    let residual = hetla::distributed::probed_qr_residual(&world, &a, &factor, args.seed)?;
    let setup = GridSetup {
        shape: (m, n),
        tile,
        grid,
        platform: &platform,
        scheduler: args.scheduler,
    };
    let report = RunReport::of_grid(&world, setup, &run, (&timings, residual), network);
    let compare = args.compare.is_some_and(|c| c.cpu());
    let peer = match compare {
        true => Some(scalapack_peer(&world, &a, repeat, run.flops)?),
        false => None,
    };
    let lstsq = match args.lstsq {
        Some(k) => Some(least_squares(
            &world,
            (&options, &a),
            (k, args.seed),
            repeat,
            compare,
        )?),
        None => None,
    };
    if world.rank() != 0 {
        return Ok(None);
    }
    let mut run = report;
    run.peers = peer.map(|p| vec![p]);
    Ok(Some(QrGridReport {
        ratio_to_pdgeqrf: run
            .peers
            .as_ref()
            .map(|p| p[0].seconds / run.measured.seconds),
        run,
        lstsq,
    }))
}

/// Least squares of `a` with `k` random right-hand sides (`seed`) by `qr`, timed (`repeat`) and
/// checked where the tiles live, beside p?gels (`compare`).
#[cfg(feature = "mpi")]
fn least_squares<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    world: &C,
    (qr, a): (&hetla::Qr, &hetla::distributed::DistributedMatrix<T>),
    (k, seed): (usize, u64),
    repeat: Option<usize>,
    compare: bool,
) -> crate::Result<LstsqGridReport> {
    use hetla::distributed::DistributedRhs;
    let (m, tile, grid) = (a.tiling().rows(), a.tiling().tile(), a.grid());
    let b = DistributedRhs::<T>::random(world, (m, k), tile, grid, seed + 1)?;
    let (solved, timings) = crate::peers::repeat(repeat, || {
        let mut f = a.clone();
        let solved = qr.least_squares_distributed(world, &mut f, &b)?;
        let seconds = solved.run.seconds + solved.solve.seconds;
        Ok((solved, seconds))
    })?;
    let normal_residual = hetla::distributed::least_squares_ratio(world, a, &solved.x, &b)?;
    let flops = solved.run.flops + solved.solve.flops;
    let peer = match compare {
        true => Some(scalapack_gels(world, (a, &b), repeat, flops)?),
        false => None,
    };
    let (run, solve) = (&solved.run, &solved.solve);
    let by_rank = |x: &[usize], y: &[usize]| x.iter().zip(y).map(|(x, y)| x + y).collect();
    Ok(LstsqGridReport {
        rhs: k,
        seconds: timings.best,
        median_seconds: timings.median,
        gflops: flops / timings.best / 1e9,
        normal_residual,
        residual_ok: normal_residual < hetla::check::RESIDUAL_THRESHOLD,
        bytes_sent_by_rank: by_rank(&run.bytes_sent_by_rank, &solve.bytes_sent_by_rank),
        bytes_expected_by_rank: by_rank(&run.bytes_expected_by_rank, &solve.bytes_expected_by_rank),
        ratio_to_pdgels: peer.as_ref().map(|p| p.seconds / timings.best),
        peers: peer.map(|p| vec![p]),
    })
}

#[cfg(feature = "scalapack")]
use crate::commands::grid_job::{peer_rate, peer_runs};

/// ScaLAPACK's p?geqrf on `a`, timed as hetla is (a warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn scalapack_peer<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    a: &hetla::distributed::DistributedMatrix<T>,
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let seconds = hetla::distributed::scalapack::geqrf(comm, a, peer_runs(repeat))?.seconds;
    Ok(peer_rate::<T>("geqrf", seconds, repeat, flops))
}

/// ScaLAPACK's p?gels on `a` and `b`, timed as hetla is (a warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn scalapack_gels<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    (a, b): (
        &hetla::distributed::DistributedMatrix<T>,
        &hetla::distributed::DistributedRhs<T>,
    ),
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let seconds = hetla::distributed::scalapack::gels(comm, a, b, peer_runs(repeat))?.seconds;
    Ok(peer_rate::<T>("gels", seconds, repeat, flops))
}

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
fn scalapack_peer<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    _: &C,
    _: &hetla::distributed::DistributedMatrix<T>,
    _: Option<usize>,
    _: f64,
) -> crate::Result<PeerRate> {
    Err(crate::commands::grid_job::no_scalapack("p?geqrf"))
}

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
fn scalapack_gels<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    _: &C,
    _: (
        &hetla::distributed::DistributedMatrix<T>,
        &hetla::distributed::DistributedRhs<T>,
    ),
    _: Option<usize>,
    _: f64,
) -> crate::Result<PeerRate> {
    Err(crate::commands::grid_job::no_scalapack("p?gels"))
}

/// Without MPI, `--grid` is refused with what to do.
#[cfg(not(feature = "mpi"))]
pub fn run(args: &QrArgs, _: ProcessGrid) -> crate::Result<Option<QrGridReport>> {
    check_args(args)?;
    Err(crate::commands::grid_job::no_mpi())
}

pub fn print(r: &QrGridReport) {
    let run = &r.run;
    // One process column: by tiles, the tree over it (see hetla::distributed's QR).
    let tiled = run
        .on
        .grid
        .parse::<ProcessGrid>()
        .is_ok_and(|g| g.rows() > 1);
    run.print_head(
        ("qr", if tiled { "tile" } else { "block width" }),
        ("2 m n^2 - 2 n^3/3", "8 m n^2 - 8 n^3/3 real"),
    );
    run.print_residual("||A^H A - R^H R||_1 / (m ||A||_1^2 eps) ");
    let peers = (r.run.peers.as_deref(), r.ratio_to_pdgeqrf);
    let count = match tiled {
        true => "the tree's count",
        false => "the panels' count",
    };
    run.print_tail(count, peers, "geqrf");
    if let Some(l) = &r.lstsq {
        println!(
            "  lstsq     {:.4} s for {} right-hand sides (median {:.4} s), {:.2} Gflop/s, ||A^H (B - AX)||_1 / (||A||_1 ||B||_1 m eps) {:.3e} ({}), sent {:?} bytes by rank (count {:?})",
            l.seconds,
            l.rhs,
            l.median_seconds,
            l.gflops,
            l.normal_residual,
            if l.residual_ok { "ok" } else { "TOO LARGE" },
            l.bytes_sent_by_rank,
            l.bytes_expected_by_rank
        );
        let gels = format!("p{}gels", run.precision);
        crate::commands::grid_job::print_peers(l.peers.as_deref(), l.ratio_to_pdgels, &gels);
    }
}
