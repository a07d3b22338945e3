//! The arguments of `hetla qr`, on one node and across an MPI job's ranks.

use clap::Args;
use hetla::{ClusterSpec, Precision, QrTree, SchedulerKind};

use crate::commands::args::{PlatformArgs, parse_positive, parse_spec};

#[derive(Args)]
pub struct QrArgs {
    /// Rows of the matrix (entries uniform in [-1, 1), `hetla::matgen::random_block_in`).
    #[arg(long, default_value_t = 2000, value_parser = parse_positive)]
    pub m: usize,
    /// Columns of the matrix.
    #[arg(long, default_value_t = 2000, value_parser = parse_positive)]
    pub n: usize,
    /// Tile size (default: the library's, `hetla::Qr::tile_size_for`: the whole matrix up to 256
    /// rows and columns, 512 for at most 512 columns and 4 times as many rows, else 384; a square
    /// matrix takes the tile `hetla tune` saved on this machine, when it saved one).
    #[arg(long, value_parser = parse_positive)]
    pub tile: Option<usize>,
    /// Columns of each block reflector inside a tile (LAPACK's nb of ?geqrt).
    #[arg(long, default_value_t = hetla::Qr::DEFAULT_INNER_BLOCK, value_parser = parse_positive)]
    pub inner: usize,
    /// The reduction tree of each tile column: flat, binary, or auto (binary when the matrix has at
    /// least 4 times as many tile rows as tile columns).
    #[arg(long, default_value = "auto")]
    pub tree: QrTree,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists ("0/1")
    /// or auto. QR's default is a cluster per core (`hetla::Qr`'s).
    #[arg(long, default_value = "core", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// GPUs for the applications of the panels' reflectors (MAGMA's hybrid: LAPACK's blocked QR in
    /// block columns, the panels on the clusters, their T's the GPU kernels' arguments; with
    /// `--clusters none` the panels on the GPUs too, by cuSOLVER's ?geqrf; m >= n): none (the
    /// default until a GPU lease has timed it), all, indices ("0,1"), or emulated:K (K devices
    /// emulated in host memory). Each GPU keeps a core for its host thread. Not with `--grid`.
    #[arg(long, default_value = "none", value_parser = crate::commands::args::parse_gpus)]
    pub gpus: hetla_runtime::GpuSelection,
    /// Factor a matrix that lives in the first GPU's memory where it lies, as cuSOLVER's resident
    /// ?geqrf does (`hetla::Qr::factor_device`, every task on the GPU, m >= n): the generated
    /// matrix is copied into a buffer of the GPU (for an emulated device, its memory is host
    /// memory) before the call, and R with the reflectors back after it, neither timed; inside the
    /// call each block column is copied within the GPU into the run's replicas before the clock
    /// starts and back after it stops, and `seconds` is the runtime's makespan. The checks use the
    /// best run's factor (`Qr::factor_from_block_columns`). Needs a GPU.
    #[arg(long)]
    pub resident: bool,
    /// The precision: s (f32), d (f64), c or z (complex, f32 or f64 parts).
    #[arg(long, default_value = "d")]
    pub precision: Precision,
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    #[command(flatten)]
    pub traces: crate::commands::args::TraceArgs,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also time, in this process and on the same matrix, faer's blocked QR (`faer-qr`) and, when
    /// built with the `openblas` feature, LAPACK ?geqrf on OpenBLAS's threads (`openblas-dgeqrf`);
    /// with `--lstsq`, also their least squares (faer's `solve_lstsq`, LAPACK ?gels) (`cpu`); and
    /// with a CUDA GPU among `--gpus` cuSOLVER ?geqrf on the device-resident matrix, from pageable
    /// and from page-locked host memory, copies included, and with `--lstsq` cuSOLVER's least
    /// squares the same three ways (?geqrf, ?ormqr or ?unmqr for Q^H B, ?trsm) (`gpu`); `--compare`
    /// alone: all.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<crate::commands::args::Compare>,
    /// Also time least squares with this many right-hand sides (m >= n): A factored and Q^H applied
    /// to B in one graph (`Qr::solve_least_squares`), then the triangular solve.
    #[arg(long, value_name = "K", value_parser = parse_positive)]
    pub lstsq: Option<usize>,
    /// Also time CholeskyQR2 (`hetla::CholeskyQr`: two passes of Gram matrix, POTRF and TRSM,
    /// Householder QR when a Gram matrix is not positive definite) on the same matrix (m >= n),
    /// checked as the QR is, beside the peers of `--compare`.
    #[arg(long)]
    pub cholqr: bool,
    /// One untimed warm-up, then R timed runs of each: the report gives the best and the median.
    /// Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Factor across the ranks of an MPI job (start it with `mpirun -np P*Q`; feature `mpi`), every
    /// rank running its tasks with `--clusters` inside the cores mpirun gives it; rank 0 reports.
    /// On a 1xQ grid (ScaLAPACK's layout with one process row): LAPACK's blocked QR in block
    /// columns, 1D block-cyclic, each panel in blocks of `--inner` columns. On a PxQ grid with P >
    /// 1: the tiled QR, 2D block-cyclic, each process row's tiles eliminated on its top one, then
    /// the process rows' triangles merged on the diagonal one (TSQR/CAQR; `--tree` is the one-node
    /// QR's and is not used). The block width or tile defaults to the one a run on one node would
    /// take, at most n over the grid's longer side; `--compare` times ScaLAPACK's p?geqrf in the
    /// same precision (feature `scalapack`).
    #[arg(long, value_name = "PxQ", value_parser = crate::commands::args::parse_grid)]
    pub grid: Option<hetla_factorizations::ProcessGrid>,
}
