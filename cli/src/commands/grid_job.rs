//! What the distributed runs of `hetla cholesky --grid` and `hetla lu --grid` share: the MPI job's
//! start, the default tile, the scalars they run in, each rank's share of a run, and the refusals of
//! a build without MPI or ScaLAPACK.

/// The tile of a distributed run when `--tile` is not given: a block size usual for ScaLAPACK, and
/// hetla's tile when it runs one core per rank.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub const DEFAULT_GRID_TILE: usize = 256;

/// Random columns a distributed residual is probed with (`hetla::distributed::PROBES`, which exists
/// only with MPI).
pub const PROBES: usize = 4;

#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
pub use hetla::distributed::Wire as GridScalar;
/// The scalars of a distributed run: with ScaLAPACK, those it has peers in.
#[cfg(feature = "scalapack")]
pub use hetla::distributed::scalapack::Scalapack as GridScalar;

/// Starts MPI (the calling thread alone calls it).
#[cfg(feature = "mpi")]
pub fn initialise() -> crate::Result<mpi::environment::Universe> {
    const _: () = assert!(PROBES == hetla::lab::PROBES);
    mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .ok_or_else(|| crate::Error::InvalidOption {
            option: "grid",
            reason: "MPI was already initialised in this process".into(),
        })
}

/// The tasks each rank ran, and the share of each rank's workers' time spent in kernels (over the
/// slowest rank's seconds), gathered on every rank.
#[cfg(feature = "mpi")]
pub fn rank_shares<C: mpi::traits::Communicator>(
    world: &C,
    run: &hetla::distributed::DistributedRun,
) -> (Vec<usize>, Vec<f64>) {
    use mpi::traits::CommunicatorCollectives;
    let mut tasks_by_rank = vec![0u64; world.size() as usize];
    world.all_gather_into(&(run.trace.tasks.len() as u64), &mut tasks_by_rank[..]);
    let workers = run.trace.summary().workers;
    let busy: f64 = workers.iter().map(|w| w.busy_seconds).sum::<f64>()
        / (run.seconds * workers.len().max(1) as f64);
    let mut busy_by_rank = vec![0f64; world.size() as usize];
    world.all_gather_into(&busy, &mut busy_by_rank[..]);
    let tasks = tasks_by_rank.iter().map(|&t| t as usize).collect();
    (tasks, busy_by_rank)
}

/// The refusal of `--grid` by a build without MPI.
#[cfg_attr(feature = "mpi", allow(dead_code))]
pub fn no_mpi() -> crate::Error {
    crate::Error::InvalidOption {
        option: "grid",
        reason: "this hetla was built without MPI: build it with --features mpi (apt libopenmpi-dev openmpi-bin libclang-dev) and start it with mpirun -np P*Q".into(),
    }
}

/// The refusal of `--compare` with a grid by a build without ScaLAPACK, whose `routines` it times.
#[cfg(all(feature = "mpi", not(feature = "scalapack")))]
pub fn no_scalapack(routines: &str) -> crate::Error {
    crate::Error::InvalidOption {
        option: "compare",
        reason: format!(
            "the distributed run's peers are ScaLAPACK's {routines}: build with --features scalapack (apt libscalapack-openmpi-dev)"
        ),
    }
}
