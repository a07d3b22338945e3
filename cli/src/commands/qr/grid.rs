//! `hetla qr --grid 1xQ` under `mpirun`: the distributed Householder QR (LAPACK's blocked QR in
//! block columns) of a random general m x n matrix generated where its tiles live, in any
//! precision, timed as the slowest rank's, with (`--compare`) ScaLAPACK's p?geqrf (the precision's
//! letter) on the same grid, block size and matrix in the same job (feature `scalapack`). R is
//! checked against A where the tiles live (nothing is gathered, at any size). Distributed least
//! squares (`--lstsq`) and CholeskyQR2 (`--cholqr`) are not built yet and are refused. Rank 0
//! reports; the other ranks print nothing but errors.

use hetla_factorizations::ProcessGrid;
use serde::Serialize;

use super::QrArgs;
#[cfg(feature = "mpi")]
use crate::commands::grid_job::DEFAULT_GRID_TILE;
use crate::commands::grid_job::GridRun;
use crate::peers::PeerRate;

#[derive(Serialize)]
pub struct QrGridReport {
    /// What every distributed run reports (its residual: ||A^H A - R^H R||_1 / (m ||A||_1^2 eps)
    /// probed where the tiles live; its flops 2 m n^2 - 2 n^3 / 3, times 4 in a complex precision).
    #[serde(flatten)]
    pub run: GridRun,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's best over p?geqrf's best (with `--compare`; the key keeps its name in every
    /// precision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_pdgeqrf: Option<f64>,
}

/// What `--grid` does not run yet, refused before MPI starts.
fn check_args(args: &QrArgs) -> crate::Result<()> {
    let refuse = |option: &'static str, what: &str| {
        Err(crate::Error::InvalidOption {
            option,
            reason: format!("{what} across ranks (--grid) is not built yet: drop --{option}"),
        })
    };
    if args.lstsq.is_some() {
        return refuse("lstsq", "least squares");
    }
    if args.cholqr {
        return refuse("cholqr", "CholeskyQR2");
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
    use crate::commands::grid_job::GridSetup;
    use hetla::Qr;
    use hetla::distributed::DistributedMatrix;
    use mpi::traits::Communicator;

    let universe = crate::commands::grid_job::initialise()?;
    let world = universe.world();
    let (m, n) = (args.m, args.n);
    let tile = args.tile.unwrap_or(DEFAULT_GRID_TILE).min(n);
    let platform = args.platform.cpu_platform(&args.clusters)?;
    let options = Qr::new()
        .platform(platform.clone())
        .scheduler(args.scheduler)
        .inner_block(args.inner);
    let a = DistributedMatrix::<T>::random(&world, (m, n), tile, grid, args.seed)?;
    let network = hetla::lab::measure_network(&world, tile * tile * size_of::<T>());
    let repeat = args.repeat.map(|r| r as usize);
    let mut factor = a.clone();
    let (run, timings) = crate::peers::repeat(repeat, || {
        factor = a.clone();
        let run = options.factor_distributed(&world, &mut factor)?;
        let seconds = run.seconds;
        Ok((run, seconds))
    })?;
    let residual = hetla::distributed::probed_qr_residual(&world, &a, &factor, args.seed)?;
    let setup = GridSetup {
        shape: (m, n),
        tile,
        grid,
        platform: &platform,
        scheduler: args.scheduler,
    };
    let report = GridRun::new(&world, setup, &run, (&timings, residual), network);
    let peer = match args.compare {
        true => Some(scalapack_peer(&world, &a, repeat, run.flops)?),
        false => None,
    };
    if world.rank() != 0 {
        return Ok(None);
    }
    Ok(Some(QrGridReport {
        ratio_to_pdgeqrf: peer.as_ref().map(|p| p.seconds / report.seconds),
        run: report,
        peers: peer.map(|p| vec![p]),
    }))
}

/// ScaLAPACK's p?geqrf on `a`, timed as hetla is (a warm-up with `--repeat`).
#[cfg(feature = "scalapack")]
fn scalapack_peer<T: crate::commands::grid_job::GridScalar, C: mpi::traits::Communicator>(
    comm: &C,
    a: &hetla::distributed::DistributedMatrix<T>,
    repeat: Option<usize>,
    flops: f64,
) -> crate::Result<PeerRate> {
    let warm = usize::from(repeat.is_some());
    let runs = repeat.unwrap_or(1) + warm;
    let mut seconds = hetla::distributed::scalapack::geqrf(comm, a, runs)?.seconds;
    let timings = crate::peers::timings(&mut seconds[warm..]);
    let name = format!("scalapack-p{}geqrf", T::LETTER);
    Ok(PeerRate::from_timings(&name, timings, flops))
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

/// Without MPI, `--grid` is refused with what to do.
#[cfg(not(feature = "mpi"))]
pub fn run(args: &QrArgs, _: ProcessGrid) -> crate::Result<Option<QrGridReport>> {
    check_args(args)?;
    Err(crate::commands::grid_job::no_mpi())
}

pub fn print(r: &QrGridReport) {
    let run = &r.run;
    run.print_head(
        ("qr", "block width"),
        ("2 m n^2 - 2 n^3/3", "8 m n^2 - 8 n^3/3 real"),
    );
    run.print_residual("||A^H A - R^H R||_1 / (m ||A||_1^2 eps) ");
    let peers = (r.peers.as_deref(), r.ratio_to_pdgeqrf);
    run.print_tail("the panels' count", peers, "geqrf");
}
