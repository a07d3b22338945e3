//! What the distributed runs of `hetla cholesky --grid`, `hetla lu --grid` and `hetla qr --grid`
//! share: the MPI job's start, the tile when none is given, the scalars they run in, each rank's
//! share of a run, and the refusals of a build without MPI or ScaLAPACK.

/// The tile of a distributed run of order `n` on `grid` when `--tile` is not given: `chosen`, the
/// tile a run on one node would take (the builder's), at most [`ProcessGrid::largest_tile`]
/// (`hetla::Cholesky::distributed_tile_in` does the same for Cholesky, whose one-node tile comes
/// from rank 0's models). Before, a fixed 256: Cholesky n = 8192 on 2 ranks with OpenBLAS ran 1.01x
/// pdpotrf in tiles of 256, 1.29x in 512 and 1.62x in 1024 (the one-node default), each beside
/// pdpotrf with the same block (2-core Zen 4).
///
/// [`ProcessGrid::largest_tile`]: hetla_factorizations::ProcessGrid::largest_tile
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn grid_tile(chosen: usize, n: usize, grid: hetla_factorizations::ProcessGrid) -> usize {
    chosen.min(grid.largest_tile(n))
}

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
    const _: () = assert!(PROBES == hetla::distributed::PROBES);
    mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .ok_or_else(|| crate::Error::InvalidOption {
            option: "grid",
            reason: "MPI was already initialised in this process".into(),
        })
}

/// Runs the distributed `factor` on a fresh copy of `a` (with `--repeat`, a warm-up and `repeat`
/// timed runs), each timed by the slowest rank's seconds it reports (`seconds`): the result and the
/// factor of the last run, and the timings. Collective.
#[cfg(feature = "mpi")]
pub fn timed<M: Clone, R>(
    repeat: Option<usize>,
    a: &M,
    mut factor: impl FnMut(&mut M) -> hetla::Result<R>,
    seconds: impl Fn(&R) -> f64,
) -> crate::Result<(R, M, crate::peers::Timings)> {
    let mut f = a.clone();
    let (result, timings) = crate::peers::repeat(repeat, || {
        f = a.clone();
        let result = factor(&mut f)?;
        let s = seconds(&result);
        Ok((result, s))
    })?;
    Ok((result, f, timings))
}

/// How many times a ScaLAPACK peer runs to be timed as hetla is: a warm-up and `repeat` runs with
/// `--repeat`, one run without.
#[cfg(feature = "scalapack")]
pub fn peer_runs(repeat: Option<usize>) -> usize {
    repeat.unwrap_or(1) + usize::from(repeat.is_some())
}

/// The rate of ScaLAPACK's `routine` (its letter from `T`) from the `seconds` of its [`peer_runs`]
/// runs (the warm-up, with `repeat`, left out).
#[cfg(feature = "scalapack")]
pub fn peer_rate<T: GridScalar>(
    routine: &str,
    mut seconds: Vec<f64>,
    repeat: Option<usize>,
    flops: f64,
) -> PeerRate {
    let warm = usize::from(repeat.is_some());
    let timings = crate::peers::timings(&mut seconds[warm..]);
    let name = format!("scalapack-p{}{routine}", T::LETTER);
    PeerRate::from_timings(&name, timings, flops)
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

/// What a command with `--grid` reports: its run on this node (`F`), or rank 0's report of a
/// distributed run (`G`).
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum NodeOrGrid<F, G> {
    /// Without `--grid`.
    Node(Box<F>),
    /// `--grid`, on rank 0.
    Grid(Box<G>),
}

impl<F, G> NodeOrGrid<F, G> {
    /// Prints the report as a table, with `node`'s or `grid`'s printer.
    pub fn print(&self, node: impl Fn(&F), grid: impl Fn(&G)) {
        match self {
            NodeOrGrid::Node(r) => node(r),
            NodeOrGrid::Grid(r) => grid(r),
        }
    }
}

/// Where a distributed run went: the section of its [`RunReport`] (flattened into it, its keys the
/// report's own; the run's seconds are the slowest rank's, from a barrier to its end, and its
/// residual is probed with random columns where the tiles live:
/// `hetla::distributed::probed_residual`, `DistributedLu::probed_residual` or
/// `hetla::distributed::probed_qr_residual`).
#[derive(serde::Serialize, Debug, Clone)]
pub struct GridRun {
    /// The matrix's rows (QR's may be more than its columns) and columns.
    pub m: usize,
    pub n: usize,
    pub grid: String,
    pub ranks: usize,
    /// Rank 0's clusters, each as its cores (space-separated CPU lists, within the cores `mpirun`
    /// binds the rank to); every rank builds its clusters alike.
    pub clusters: String,
    pub scheduler: hetla::SchedulerKind,
    /// Tasks each rank ran.
    pub tasks_by_rank: Vec<usize>,
    /// Seconds each rank's workers spent in kernels (summed over its workers) over the slowest
    /// rank's seconds times its workers: what the wait for tiles and the communication left of each
    /// rank's cores.
    pub busy_by_rank: Vec<f64>,
    /// Bytes of tiles each rank sent, as counted by the ranks.
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by the count of the run's messages (Cholesky: the 2D block-cyclic
    /// count, each final tile of L once to each rank that reads it; LU: each panel from its
    /// diagonal down, with its interchanges, once to each rank with a block column to update or
    /// swap; QR: each panel from its diagonal down, with its T, once to each rank with a block
    /// column right of it).
    pub bytes_expected_by_rank: Vec<usize>,
    pub bytes_sent_total: usize,
    /// The network between ranks 0 and 1, measured in the job before the runs and after them, the
    /// faster figures kept (latency, in microseconds; none with one rank).
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

/// What a distributed run is, beside what it measured: the matrix's order and tile, the grid, the
/// platform of each rank and its scheduler.
#[cfg(feature = "mpi")]
pub struct GridSetup<'s> {
    /// The matrix's rows and columns.
    pub shape: (usize, usize),
    pub tile: usize,
    pub grid: hetla_factorizations::ProcessGrid,
    pub platform: &'s hetla::Platform,
    pub scheduler: hetla::SchedulerKind,
}

#[cfg(feature = "mpi")]
impl RunReport<GridRun> {
    /// The report of `run` (the best of `timings`) with its probed `residual` and the `network`
    /// measured before the runs (measured again here, the faster figures kept). Collective: every
    /// rank calls it (it gathers each rank's share).
    pub fn of_grid<C: mpi::traits::Communicator>(
        world: &C,
        setup: GridSetup<'_>,
        run: &hetla::distributed::DistributedRun,
        (timings, residual): (&crate::peers::Timings, f64),
        network: Option<hetla_runtime::LinkRate>,
    ) -> Self {
        // Measured again after the runs: the faster of the two (see `faster_network`).
        let bytes = setup.tile * setup.tile * run.precision.bytes();
        let network =
            network.map(|before| hetla::distributed::faster_network(world, bytes, before));
        let (tasks_by_rank, busy_by_rank) = rank_shares(world, run);
        // A finished run is reported even when its bounds cannot be had.
        let free = hetla_runtime::LinkRate {
            latency_us: 0.0,
            gb_per_s: f64::INFINITY,
        };
        let (bounds, bounds_error) = match run.bounds(world, network.unwrap_or(free)) {
            Ok(b) => (Some(b), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let on = GridRun {
            efficiency: bounds.as_ref().map(|b| b.bound_ms / (timings.best * 1e3)),
            bounds,
            bounds_error,
            m: setup.shape.0,
            n: setup.shape.1,
            grid: setup.grid.to_string(),
            ranks: setup.grid.size(),
            clusters: setup.platform.cpu_lists().join(" "),
            scheduler: setup.scheduler,
            tasks_by_rank,
            busy_by_rank,
            bytes_sent_by_rank: run.bytes_sent_by_rank.clone(),
            bytes_expected_by_rank: run.bytes_expected_by_rank.clone(),
            bytes_sent_total: run.bytes_sent_by_rank.iter().sum(),
            network_latency_us: network.map(|n| n.latency_us),
            network_gb_per_s: network.map(|n| n.gb_per_s),
        };
        RunReport::of(
            (run.precision, setup.tile, setup.platform.backend()),
            on,
            crate::commands::report::Measured::new(timings, run.flops, residual),
        )
    }
}

impl RunReport<GridRun> {
    /// The report's first lines: `command` (its tile called `tile`), its ranks, its time (of
    /// `flops`, or `complex_flops` in a complex precision), how busy each rank was, the repeats;
    /// [`RunReport::print_residual`] follows.
    pub fn print_head(&self, (command, tile): (&str, &str), (flops, complex_flops): (&str, &str)) {
        let shape = match self.on.m == self.on.n {
            true => format!("n = {}", self.on.n),
            false => format!("{} x {}", self.on.m, self.on.n),
        };
        println!(
            "hetla {command}: {shape}, precision {}, {tile} {}, grid {} ({} ranks), tasks by rank {:?}",
            self.precision, self.tile, self.on.grid, self.on.ranks, self.on.tasks_by_rank
        );
        println!(
            "  each rank {} kernels, clusters on rank 0's cores [{}], scheduler {}",
            self.backend, self.on.clusters, self.on.scheduler
        );
        let flops = if self.precision.is_complex() {
            complex_flops
        } else {
            flops
        };
        println!(
            "  time      {:.4} s (the slowest rank's), {:.2} Gflop/s ({flops} flops)",
            self.measured.seconds, self.measured.gflops
        );
        let busy: Vec<String> = self
            .on
            .busy_by_rank
            .iter()
            .map(|b| format!("{b:.3}"))
            .collect();
        println!(
            "  busy      kernels' share of each rank's cores: {}",
            busy.join(", ")
        );
        if self.measured.runs > 1 {
            println!(
                "  repeat    best of {} runs after a warm-up; median {:.4} s",
                self.measured.runs, self.measured.median_seconds
            );
        }
    }

    /// The residual's line: `ratio` says what it is (before "probed with ...").
    pub fn print_residual(&self, ratio: &str) {
        println!(
            "  residual  {:.3e} ({ratio}probed with {PROBES} random columns where the tiles live), {}",
            self.measured.residual,
            if self.measured.residual_ok {
                "ok"
            } else {
                "TOO LARGE"
            }
        );
    }

    /// The bytes sent beside their `count`, then ScaLAPACK's factorisation `routine` (its peers and
    /// hetla's ratio to it) and the network.
    pub fn print_tail(
        &self,
        count: &str,
        (peers, ratio): (Option<&[PeerRate]>, Option<f64>),
        routine: &str,
    ) {
        println!(
            "  sent      {:.1} MiB in all; by rank {:?} bytes, {count} {:?}",
            self.on.bytes_sent_total as f64 / 1048576.0,
            self.on.bytes_sent_by_rank,
            self.on.bytes_expected_by_rank
        );
        print_peers(peers, ratio, &format!("p{}{routine}", self.precision));
        if let (Some(lat), Some(bw)) = (self.on.network_latency_us, self.on.network_gb_per_s) {
            println!("  network   ranks 0 and 1: {lat:.2} us + bytes / {bw:.2} GB/s (measured)");
        }
        match (&self.on.bounds, &self.on.bounds_error) {
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
                    self.on.efficiency.unwrap_or(f64::NAN),
                    b.bound_by,
                    b.bound_ms,
                    b.bound_gflops
                );
            }
            (None, Some(e)) => println!("  bounds    not computed: {e}"),
            (None, None) => {}
        }
    }
}

/// ScaLAPACK's runs of `routine` beside hetla's and hetla's `ratio` to the first.
pub fn print_peers(peers: Option<&[PeerRate]>, ratio: Option<f64>, routine: &str) {
    for p in peers.into_iter().flatten() {
        println!(
            "  peer      {}: {:.4} s, {:.2} Gflop/s (median {:.4} s)",
            p.name, p.seconds, p.gflops, p.median_seconds
        );
    }
    if let Some(ratio) = ratio {
        println!("  ratio     {ratio:.3}x {routine}");
    }
}

use crate::commands::report::RunReport;
use crate::peers::PeerRate;

#[cfg(test)]
mod tests {
    use super::grid_tile;
    use hetla_factorizations::ProcessGrid;

    #[test]
    fn a_distributed_tile_leaves_every_process_row_and_column_a_block() {
        let grid = |p, q| ProcessGrid::new(p, q).unwrap();
        // One node's tile where the matrix has blocks enough for the grid.
        assert_eq!(grid_tile(1024, 8192, grid(1, 2)), 1024);
        assert_eq!(grid_tile(384, 4096, grid(2, 2)), 384);
        // One node takes order 500 as one tile: on 1x2 two blocks, on 3x1 three.
        assert_eq!(grid_tile(500, 500, grid(1, 2)), 250);
        assert_eq!(grid_tile(500, 500, grid(3, 1)), 167);
        assert_eq!(grid_tile(1, 1, grid(2, 2)), 1);
    }
}
