//! The arguments of `hetla cholesky`.

use clap::Args;
use hetla::{ClusterSpec, SchedulerKind, Storage};

use crate::commands::args::{GpuArgs, PlatformArgs, TraceArgs, parse_positive, parse_spec};

#[derive(Args)]
pub struct CholeskyArgs {
    /// Order of the matrix.
    #[arg(long, default_value_t = 4096, value_parser = parse_positive)]
    pub n: usize,
    /// Tile size (default: chosen from n and the backend, see `hetla::Cholesky::tile_size_for`).
    #[arg(long, value_parser = parse_positive)]
    pub tile: Option<usize>,
    /// Seed of the matrix generator (`hetla::matgen::random_spd`).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists ("0/1")
    /// or auto.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    /// Where the kernels find the tiles: in-place (the matrix's own column-major storage),
    /// tile-major (a copy with every tile contiguous, made and written back in the timed call) or
    /// auto (in place on a platform with a GPU, else tile-major where the copy fits in memory,
    /// `hetla::Storage`).
    #[arg(long, default_value = "auto")]
    pub storage: Storage,
    /// How the tiles meet a GPU's copies: staged (packed by CPU cores into page-locked buffers
    /// beside the DMA) or page-locked (the tiles' memory, the tile-major copy or the matrix in
    /// place, page-locked for the run and copied straight by the GPU's DMA engines; the matrix in
    /// place is locked by tile columns beside the run, a tile staged until its column is; the
    /// locking is timed inside the call). Ignored without a GPU.
    #[arg(long, default_value = "staged")]
    pub host_memory: hetla::HostMemory,
    /// Factor a matrix that lives in the first GPU's memory where it lies, as cuSOLVER's resident
    /// call does (`hetla::Cholesky::factor_device`): the generated matrix is copied into a buffer
    /// of the GPU (for an emulated device, its memory is host memory) before the call, and L back
    /// after it, neither timed; inside the call every tile is copied within the GPU into the run's
    /// replicas before the clock starts and back after it stops, and `seconds` is the runtime's
    /// makespan. With `--precision ds`: the mixed solve of A and b in the GPU's memory
    /// (`Cholesky::solve_refined_device`) beside the f64 `factor_device` + `solve_device`, each
    /// timed as a call. Needs a GPU.
    #[arg(long)]
    pub resident: bool,
    /// Whether the matrix (factored by hetla and by every peer of `--compare`) is allocated in
    /// transparent huge pages (`madvise(MADV_HUGEPAGE)`, where the kernel offers them). Off by
    /// default: physically contiguous 2 MiB pages put the columns of a matrix whose leading
    /// dimension is a power of two into the same cache sets, and faer's kernels (hetla's in place
    /// and faer's own Cholesky) ran 40-45% slower at n = 4096; OpenBLAS was unchanged. An on/off
    /// flag like the others (`--huge-pages` alone turns it on; `--huge-pages false` is accepted).
    #[arg(
        long,
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub huge_pages: bool,
    #[command(flatten)]
    pub tail: crate::commands::args::TailArgs,
    #[command(flatten)]
    pub platform: PlatformArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Also time, in this process, faer's Cholesky, OpenBLAS dpotrf (feature `openblas`) and a
    /// DGEMM of the same n on all available cores (`cpu`), and with a CUDA GPU cuSOLVER ?potrf on
    /// the device-resident matrix and as a program calls it from host memory, copies included
    /// (`gpu`); `--compare` alone: all. With `--precision ds`, `gpu` only: cuSOLVER's dpotrf beside
    /// the mixed solve.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<crate::commands::args::Compare>,
    /// Also invert: time the factorisation and the inverse together (`hetla::Factor::inverse`: a
    /// tiled TRTRI then a tiled LAUUM, LAPACK's ?potri on the runtime), check ||A X - I||_1 / (n
    /// ||A||_1 ||X||_1 eps) (LAPACK's test, accepted below 30), and with `--compare` time each
    /// library's own inverse, factorisation included (faer's llt + inverse, OpenBLAS ?potrf +
    /// ?potri), the same way. Not with `--grid` or `--precision ds`.
    #[arg(long)]
    pub inverse: bool,
    /// One untimed warm-up, then R timed factorisations (each of a fresh copy of the matrix): the
    /// report gives the best (`seconds`, `gflops`) and the median; with `--compare` every peer is
    /// timed the same way. Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    #[command(flatten)]
    pub traces: TraceArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Factor across the ranks of an MPI job on a PxQ process grid, tiles 2D block-cyclic (start it
    /// with `mpirun -np P*Q`; feature `mpi`): every rank runs its tasks with `--clusters` inside
    /// the cores mpirun gives it; rank 0 reports. The tile defaults to the one a run on one node
    /// would take (rank 0's), at most n over the grid's longer side; `--compare` times ScaLAPACK's
    /// p?potrf and p?potrs in the same precision (feature `scalapack`).
    #[arg(long, value_name = "PxQ", value_parser = crate::commands::args::parse_grid)]
    pub grid: Option<hetla_factorizations::ProcessGrid>,
    /// The precision: s (f32), d (f64), c or z (complex Hermitian, f32 or f64 parts), or ds: a
    /// solve of one right-hand side factored in f32 and refined to f64 accuracy
    /// (`hetla::solve_spd_mixed`), timed beside the f64 factorisation and solve. Other than d runs
    /// on CPU clusters only.
    #[arg(long, default_value = "d", value_parser = crate::commands::args::run_precision())]
    pub precision: crate::commands::args::RunPrecision,
    /// With `--precision ds`: the condition number of the generated matrix
    /// (`hetla::matgen::random_hpd_conditioned`).
    #[arg(long, default_value_t = 1e6, value_parser = parse_condition)]
    pub cond: f64,
    /// With `--precision ds`: how the GPUs compute the f32 factor's trailing GEMMs (`off`; `tf32`
    /// or `bf16`: on tensor cores, operands rounded to TF32's or BF16's mantissa, f32 accumulation,
    /// `hetla::Cholesky::tensor_math`), the refinement restoring f64 accuracy.
    #[arg(long, default_value = "off", value_name = "MATH")]
    pub tensor_math: hetla::TensorMath,
}

fn parse_condition(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c >= 1.0 => Ok(c),
        _ => Err(format!(
            "`{s}` is not a condition number: expected a finite number >= 1"
        )),
    }
}
