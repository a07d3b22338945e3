//! Argument groups and value parsers shared by the subcommands.

use std::path::{Path, PathBuf};

use clap::Args;
use hetla::{Backend, ClusterSpec};
use hetla_runtime::{GpuSelection, ModelStore, Platform};

impl PlatformArgs {
    pub fn store(&self) -> ModelStore {
        self.perfmodel_dir
            .clone()
            .map_or(ModelStore::Default, ModelStore::Dir)
    }

    /// The CPU platform of `clusters` with these options' backend and models, shared by the
    /// command's runs and its library calls.
    pub fn cpu_platform(
        &self,
        clusters: &hetla::ClusterSpec,
    ) -> hetla::Result<std::sync::Arc<hetla::Platform>> {
        let platform = hetla::Platform::with_store(clusters, self.backend, self.store())?;
        Ok(std::sync::Arc::new(platform))
    }
}

#[derive(Args, Clone)]
pub struct PlatformArgs {
    /// Kernel backend: faer or openblas (the latter needs the `openblas` feature).
    #[arg(long, default_value = "faer", value_parser = parse_backend)]
    pub backend: Backend,
    /// Directory of the performance models (default: $HETLA_PERFMODEL_DIR, else the user's cache
    /// directory).
    #[arg(long)]
    pub perfmodel_dir: Option<PathBuf>,
}

/// A tail of smaller tiles at the end of a Cholesky factorisation (`hetla::Tail`).
#[derive(Args, Clone, Default)]
pub struct TailArgs {
    /// Cholesky: the side of the tiles from row and column --tail-from on (smaller than --tile: a
    /// smaller tile on the critical path of the factorisation's end, where few tasks are left
    /// beside it). Needs --tail-from and --tile.
    #[arg(long, value_parser = parse_positive, requires = "tail_from")]
    pub tail_tile: Option<usize>,
    /// Cholesky: the first row and column of the tail's smaller tiles (a multiple of --tile, inside
    /// the matrix). Needs --tail-tile.
    #[arg(long, value_parser = parse_positive, requires = "tail_tile")]
    pub tail_from: Option<usize>,
}

impl TailArgs {
    /// The tail asked for, if any.
    pub fn tail(&self) -> Option<hetla::Tail> {
        match (self.tail_tile, self.tail_from) {
            (Some(tile), Some(from)) => Some(hetla::Tail { from, tile }),
            _ => None,
        }
    }

    /// `plan` with the tail asked for, if any ([`hetla::Plan::with_tail`]).
    pub fn apply(&self, plan: hetla::Plan) -> hetla::Result<hetla::Plan> {
        match self.tail() {
            Some(tail) => plan.with_tail(tail),
            None => Ok(plan),
        }
    }
}

#[derive(Args, Clone)]
pub struct GpuArgs {
    /// GPUs to use: all, none, indices ("0,1"), or emulated:K (K devices emulated in host memory:
    /// CPU kernels and real copies, the GPU code paths on any machine). Each GPU reserves one core
    /// for its host thread.
    #[arg(long, default_value = "all", value_parser = parse_gpus)]
    pub gpus: GpuSelection,
    /// Memory budget for tiles on each GPU: bytes, or with KiB, MiB, GiB ("8GiB") (default: 90% of
    /// its free memory; emulated devices: no limit).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    pub gpu_memory: Option<usize>,
}

/// An error when a run across MPI ranks (`--grid`) is given GPUs: its ranks run on their cores
/// only.
pub fn no_gpus_on_a_grid(gpus: &GpuSelection, grid: impl std::fmt::Display) -> crate::Result<()> {
    if *gpus == GpuSelection::None {
        return Ok(());
    }
    Err(crate::Error::Library(hetla::Error::InvalidOption {
        option: "gpus",
        reason: format!(
            "a run across MPI ranks (--grid {grid}) runs on the ranks' cores only: give --gpus \
             none (the default), not {gpus}"
        ),
    }))
}

impl GpuArgs {
    /// The platform of `spec` with `gpus` and their `gpu_memory` budget (`None`: 90% of the free
    /// memory), the CPU platform of `spec` alone when `gpus` selects none (the families whose GPUs
    /// are opt-in).
    pub fn platform_or_cpus(
        (gpus, gpu_memory): (&GpuSelection, Option<usize>),
        spec: &ClusterSpec,
        cpu: &PlatformArgs,
    ) -> crate::Result<std::sync::Arc<Platform>> {
        match gpus {
            GpuSelection::None => Ok(cpu.cpu_platform(spec)?),
            gpus => {
                let gpu = GpuArgs {
                    gpus: gpus.clone(),
                    gpu_memory,
                };
                Ok(std::sync::Arc::new(gpu.platform(spec, cpu)?))
            }
        }
    }

    /// The platform of `spec` with the selected GPUs.
    pub fn platform(&self, spec: &ClusterSpec, cpu: &PlatformArgs) -> crate::Result<Platform> {
        let devices = self.gpus.open(self.gpu_memory)?;
        Ok(Platform::with_devices(
            spec,
            cpu.backend,
            cpu.store(),
            devices,
        )?)
    }
}

/// Bytes from "123", "512KiB", "64MiB" or "8GiB" (also K, M, G: binary units).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}: use bytes or KiB, MiB, GiB (\"8GiB\")"
            ));
        }
    };
    match number.parse::<f64>() {
        Ok(x)
            if x.is_finite()
                && x * scale as f64 >= 1.0
                && x * (scale as f64) < usize::MAX as f64 =>
        {
            Ok((x * scale as f64) as usize)
        }
        Ok(x) if x.is_finite() && x > 0.0 && x * (scale as f64) < 1.0 => Err(format!(
            "{s:?} is less than one byte: give bytes or KiB, MiB, GiB (\"8GiB\")"
        )),
        _ => Err(format!(
            "{s:?} is not a positive size (\"8GiB\", \"512MiB\", bytes)"
        )),
    }
}

/// A whole number >= 1 (matrix orders, tile sizes, sample counts).
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1, got 0".into()),
        Ok(v) => Ok(v),
        Err(_) => Err(format!("{s:?} is not a whole number >= 1")),
    }
}

/// The most executions `calibrate --samples` takes per kernel: 100000 of a tile of 64 already take
/// about 6 s per class, and a model's mean settles within a few dozen.
pub const MAX_SAMPLES: usize = 100_000;

pub fn parse_samples(s: &str) -> Result<usize, String> {
    match parse_positive(s)? {
        v if v > MAX_SAMPLES => Err(format!(
            "at most {MAX_SAMPLES} executions per kernel, got {v} (a model's mean settles within a few dozen)"
        )),
        v => Ok(v),
    }
}

pub fn parse_gpus(s: &str) -> Result<GpuSelection, String> {
    s.parse::<GpuSelection>().map_err(|e| e.to_string())
}

pub fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse::<Backend>().map_err(|e| e.to_string())
}

pub fn parse_spec(s: &str) -> Result<ClusterSpec, String> {
    s.parse::<ClusterSpec>().map_err(|e| e.to_string())
}

/// Where a command writes the trace of its run.
#[derive(Args, Clone, Default)]
pub struct TraceArgs {
    /// Write the trace as Chrome trace-event JSON (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write a Gantt chart of the run as SVG.
    #[arg(long, value_name = "FILE")]
    pub gantt: Option<PathBuf>,
}

impl TraceArgs {
    /// The two outputs with their options' names, for the checks before a run.
    pub fn outputs(&self) -> [(&'static str, Option<&Path>); 2] {
        [
            ("--trace", self.trace.as_deref()),
            ("--gantt", self.gantt.as_deref()),
        ]
    }

    /// Writes the files asked for (a failure is a warning: the run's report stands).
    pub fn write(&self, trace: &hetla::Trace) {
        super::output::write_trace_files(trace, self.trace.as_deref(), self.gantt.as_deref());
    }
}

/// Which peers `--compare` times beside hetla.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compare {
    /// Every peer this build and platform have.
    All,
    /// The CPU libraries only (faer, OpenBLAS).
    Cpu,
    /// The GPU libraries only (cuSOLVER, cuBLAS on device-resident matrices): large runs whose CPU
    /// peers would take minutes.
    Gpu,
}

impl Compare {
    /// Whether the CPU peers are timed.
    pub fn cpu(self) -> bool {
        self != Self::Gpu
    }

    /// Whether the GPU peers are timed (on a platform with a CUDA GPU).
    pub fn gpu(self) -> bool {
        self != Self::Cpu
    }
}

/// A process grid `PxQ`.
pub fn parse_grid(s: &str) -> Result<hetla_factorizations::ProcessGrid, String> {
    s.parse()
        .map_err(|e: hetla_factorizations::GridError| e.to_string())
}

/// The precision of a run (`--precision`): one of hetla's four, or a working precision reached from
/// a factor in the lower one, `ds` (`zc` for complex): a solve factored in single precision and
/// refined in double, the one spelling of mixed precision on every command that offers it. The
/// default is `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunPrecision {
    /// The precision of the matrix, the solution and the checks.
    pub working: hetla::Precision,
    /// The precision the factor is computed in: `working`, or the single precision of its kind.
    pub factor: hetla::Precision,
}

impl RunPrecision {
    /// The one precision of a run that factors in one (`s`, `d`, `c`, `z`); `None` for a mixed one.
    pub fn single(self) -> Option<hetla::Precision> {
        (self.working == self.factor).then_some(self.working)
    }

    /// Whether the run factors in single precision and refines in double (`ds`, `zc`).
    pub fn is_mixed(self) -> bool {
        self.working != self.factor
    }
}

impl std::fmt::Display for RunPrecision {
    /// LAPACK's letters: one for a single precision, the working one then the factor's for a mixed
    /// one (as in dsgesv).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.single() {
            Some(p) => write!(f, "{p}"),
            None => write!(f, "{}{}", self.working, self.factor),
        }
    }
}

/// The parser of a `--precision` that may be mixed ([`RunPrecision`]; `--help` lists each).
pub fn run_precision() -> impl clap::builder::TypedValueParser<Value = RunPrecision> {
    use clap::builder::TypedValueParser;
    use hetla::Precision::{C, D, S, Z};
    const VALUES: [(&str, &str, hetla::Precision, hetla::Precision); 6] = [
        ("s", "f32", S, S),
        ("d", "f64", D, D),
        ("c", "Complex f32, Hermitian", C, C),
        ("z", "Complex f64, Hermitian", Z, Z),
        (
            "ds",
            "Mixed: factor in f32, refine to f64 accuracy (falls back to f64 when needed)",
            D,
            S,
        ),
        (
            "zc",
            "Mixed complex: factor in c32, refine to c64 accuracy (falls back to c64 when needed)",
            Z,
            C,
        ),
    ];
    let values = VALUES.map(|(name, help, ..)| clap::builder::PossibleValue::new(name).help(help));
    clap::builder::PossibleValuesParser::new(values).map(|name| {
        let (.., working, factor) = VALUES
            .into_iter()
            .find(|v| v.0 == name)
            .expect("one of the precisions' names");
        RunPrecision { working, factor }
    })
}

/// A run's `--tensor-math` checked before any work: tensor cores compute the products of a
/// single-precision factor on a GPU, which a mixed solve (`--precision ds`, `zc`) refines to double
/// accuracy; without a mixed precision or a device on `platform` (when given: the precision alone
/// is checked before a platform is built) it would change nothing or leave an f32 factor of TF32's
/// accuracy, so either is refused, naming what would be right.
pub fn check_tensor_math(
    math: hetla::TensorMath,
    precision: RunPrecision,
    platform: Option<&Platform>,
) -> crate::Result<()> {
    let refuse = |reason: String| {
        Err(crate::Error::Library(hetla::Error::InvalidOption {
            option: "tensor-math",
            reason,
        }))
    };
    if math == hetla::TensorMath::Off {
        return Ok(());
    }
    if !precision.is_mixed() {
        return refuse(format!(
            "{math} rounds the products of a factor that a mixed solve refines: give --precision \
             ds or zc, not {precision}"
        ));
    }
    if platform.is_some_and(|p| p.devices().is_empty()) {
        return refuse(format!(
            "{math} runs on a GPU's tensor cores and this platform has none: give --gpus (all, \
             indices, or emulated:K to round as a GPU does on this machine)"
        ));
    }
    Ok(())
}

/// The parser of a `--factorization` ([`hetla::Family`] by its name; `--help` lists each with its
/// flop count).
pub fn family() -> impl clap::builder::TypedValueParser<Value = hetla::Family> {
    use clap::builder::TypedValueParser;
    let values = hetla::Family::ALL.map(|f| {
        clap::builder::PossibleValue::new(f.name()).help(format!(
            "{} ({} flops)",
            f.title(),
            f.flops_formula()
        ))
    });
    clap::builder::PossibleValuesParser::new(values).map(|name| {
        name.parse::<hetla::Family>()
            .expect("one of the families' names")
    })
}

/// The title of the plan a modelled command builds of `family` ("Inverse" for the inverse's graph
/// alone, which follows Cholesky's).
pub fn modelled_title(family: hetla::Family) -> &'static str {
    let plan = family.modelled_plan((None, 0), (None, 1, 1), hetla::Precision::D);
    plan.map_or(family.title(), |p| p.algorithm().title_and_flops().0)
}

/// Refuses, before any work, `count` matrices of `rows x cols` entries of `T` that the machine's
/// memory cannot hold (`what` names them in the error).
pub fn check_matrices<T: hetla::Scalar>(
    what: &str,
    count: u128,
    (rows, cols): (usize, usize),
) -> crate::Result<()> {
    let bytes = count * hetla::limits::matrix_bytes(rows, cols) * T::PRECISION.bytes() as u128;
    Ok(hetla::limits::check_memory(what, bytes / 8)?)
}

/// `--resident` refused before any work without a GPU.
pub fn check_resident(resident: bool, platform: &hetla::Platform) -> crate::Result<()> {
    if !resident || !platform.devices().is_empty() {
        return Ok(());
    }
    Err(crate::Error::Library(hetla::Error::InvalidOption {
        option: "resident",
        reason: "--resident factors and solves matrices in a GPU's memory: give --gpus all (or \
                 emulated:1)"
            .into(),
    }))
}
