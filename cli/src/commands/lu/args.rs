//! The arguments of `hetla lu`, on one node and across an MPI job's ranks.

use clap::Args;
use hetla::{ClusterSpec, SchedulerKind};

use crate::commands::args::{PlatformArgs, parse_positive, parse_spec};

#[derive(Args)]
pub struct LuArgs {
    /// Order of the matrix (entries uniform in [-1, 1), `hetla::matgen::random_block_in`).
    #[arg(long, default_value_t = 2000, value_parser = parse_positive)]
    pub n: usize,
    /// Block width (default: 256 above order 512, 384 from 4096 on with faer).
    #[arg(long, value_parser = parse_positive)]
    pub tile: Option<usize>,
    /// How cores are grouped: NxM ("2x1"), a level (package, numa, l3, l2, core), CPU lists ("0/1")
    /// or auto. LU's default is a cluster per core (`hetla::Lu`'s: the next panel on one core while
    /// the others update).
    #[arg(long, default_value = "core", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// GPUs for the updates and interchanges, the panels staying on the clusters (MAGMA's hybrid),
    /// or for every task with `--clusters none` (the panels by cuSOLVER's ?getrf): none (the
    /// default until a GPU lease has timed it), all, indices ("0,1"), or emulated:K (K devices
    /// emulated in host memory). Each GPU keeps a core for its host thread. Not with `--grid`.
    #[arg(long, default_value = "none", value_parser = crate::commands::args::parse_gpus)]
    pub gpus: hetla_runtime::GpuSelection,
    /// Memory budget for tiles on each GPU: bytes, or with KiB, MiB, GiB ("8GiB") (default: 90% of
    /// its free memory; emulated devices: no limit). A matrix larger runs out of core: its tasks in
    /// left-looking order, the interchanges of factored columns last, the GPU evicting the block
    /// column needed last.
    #[arg(long, value_parser = crate::commands::args::parse_bytes, value_name = "BYTES")]
    pub gpu_memory: Option<usize>,
    /// Factor a matrix that lives in the first GPU's memory where it lies, as cuSOLVER's resident
    /// ?getrf does (`hetla::Lu::factor_device`, every task on the GPU): the generated matrix is
    /// copied into a buffer of the GPU (for an emulated device, its memory is host memory) before
    /// the call, and L\U back after it, neither timed; inside the call each block column is copied
    /// within the GPU into the run's replicas before the clock starts and back after it stops, and
    /// `seconds` is the runtime's makespan. With `--precision ds` or `zc`: the mixed solve of A and
    /// b in the GPU's memory (`Lu::solve_refined_device`) beside `factor_device` + `solve_device`
    /// in double, each timed as a call. Needs a GPU.
    #[arg(long)]
    pub resident: bool,
    /// The precision: s (f32), d (f64), c or z (complex, f32 or f64 parts), or ds (zc): a solve of
    /// A x = b to double accuracy from an f32 (c32) LU refined in double (`hetla::solve_mixed`,
    /// LAPACK dsgesv), timed beside the factorisation and solve in f64 (c64).
    #[arg(long, default_value = "d", value_parser = crate::commands::args::run_precision())]
    pub precision: crate::commands::args::RunPrecision,
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    #[command(flatten)]
    pub traces: crate::commands::args::TraceArgs,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Generate a matrix of this 2-norm condition number instead (singular values geometric from 1
    /// to 1/COND between random Householder reflections, `hetla::matgen::random_conditioned`).
    #[arg(long, value_parser = parse_cond)]
    pub cond: Option<f64>,
    /// Also time, in this process and on the same matrix, faer's partial-pivoting LU (`faer-lu`)
    /// and, when built with the `openblas` feature, LAPACK ?getrf on OpenBLAS's threads
    /// (`openblas-dgetrf`) (`cpu`), and with a CUDA GPU among `--gpus` cuSOLVER ?getrf on the
    /// device-resident matrix, from pageable and from page-locked host memory, copies included
    /// (`gpu`); `--compare` alone: all.
    #[arg(long, value_name = "PEERS", num_args = 0..=1, default_missing_value = "all", value_enum)]
    pub compare: Option<crate::commands::args::Compare>,
    /// The earlier spelling of `--precision ds` (with d) or `zc` (with z), kept for scripts.
    #[arg(long, hide = true)]
    pub mixed: bool,
    /// With `--precision ds` or `zc`: how the GPUs compute the single-precision LU's trailing
    /// updates (`off`; `tf32` or `bf16`: on tensor cores, operands rounded to TF32's or BF16's
    /// mantissa, f32 accumulation, `hetla::Lu::tensor_math`), the refinement restoring double
    /// accuracy.
    #[arg(long, default_value = "off", value_name = "MATH")]
    pub tensor_math: hetla::TensorMath,
    /// One untimed warm-up, then R timed runs of each: the report gives the best and the median.
    /// Without it: one cold run.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: Option<u64>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Factor across the ranks of an MPI job (start it with `mpirun -np P*Q`; feature `mpi`): on a
    /// 1xQ grid by block columns 1D block-cyclic, on a PxQ grid with P > 1 by tiles 2D block-cyclic
    /// (ScaLAPACK's layout; each panel factored where its diagonal tile lives, the interchanges
    /// between process rows through exchange tiles), every rank running its tasks with `--clusters`
    /// inside the cores mpirun gives it; rank 0 reports. The block width (tile) defaults to the one
    /// a run on one node would take, at most n over the grid's longer side; `--compare` times
    /// ScaLAPACK's p?getrf in the same precision (feature `scalapack`).
    #[arg(long, value_name = "PxQ", value_parser = crate::commands::args::parse_grid)]
    pub grid: Option<hetla_factorizations::ProcessGrid>,
}

/// A condition number: finite and at least 1.
fn parse_cond(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c >= 1.0 => Ok(c),
        _ => Err(format!(
            "{s:?} is not a condition number (a finite number >= 1)"
        )),
    }
}
