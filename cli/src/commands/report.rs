//! The core every factorisation's run report shares (`cholesky`, `lu`, `qr`): what ran, its time
//! and rate, its check, where the work went (workers, kernels), its bounds and efficiency, and the
//! peers timed beside it with hetla's ratio to each, in one shape. A command's report holds it
//! flattened (`#[serde(flatten)]`: the JSON keys stay at the top level) beside what only that
//! command has. `gemm` and `batch` share its peers' shape: `peers` and `ratios` ([`ratios`]).

use hetla::{BoundReport, Plan, Precision, Trace};
use hetla_runtime::{KernelSummary, PieceSummary, Platform, WorkerSummary};
use serde::Serialize;

use crate::peers::{PeerRate, Timings};

/// What a timed and checked run measured: its best time, median and rate, and its check. Each run's
/// report holds it flattened (a run on one node's [`RunReport`], a distributed run's `GridRun`, the
/// inverse's section of `hetla cholesky`), so the keys are the report's own.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// The best timed run, seconds.
    pub seconds: f64,
    /// The median of the timed runs' seconds (`seconds` for one run).
    pub median_seconds: f64,
    /// Timed runs (1 without `--repeat`; a warm-up before them is not counted).
    pub runs: usize,
    /// The run's flops over `seconds`, in Gflop/s.
    pub gflops: f64,
    /// The check's LAPACK ratio.
    pub residual: f64,
    /// Whether every check of the run is below LAPACK's threshold, 30.
    pub residual_ok: bool,
}

impl Measured {
    /// A run of `flops` (real flops) timed as `timings` say, its check's ratio `residual`.
    pub fn new(timings: &Timings, flops: f64, residual: f64) -> Self {
        Self {
            seconds: timings.best,
            median_seconds: timings.median,
            runs: timings.runs,
            gflops: flops / timings.best / 1e9,
            residual,
            residual_ok: residual < hetla::check::RESIDUAL_THRESHOLD,
        }
    }
}

#[derive(Serialize, Debug, Clone)]
pub struct RunReport {
    /// The precision: s, d, c or z (complex rates count 4 real flops per complex one).
    pub precision: Precision,
    /// The tile (LU: the block width).
    pub tile: usize,
    /// The kernels' library: faer or openblas.
    pub backend: hetla::Backend,
    /// Cores of every cluster.
    pub cores: usize,
    /// Tasks of the graph.
    pub tasks: usize,
    /// Its time and rate (the factorisation's flops: LAPACK Working Note 41's leading terms, 4
    /// times as many real ones for complex) and the plan's LAPACK ratio
    /// ([`hetla::Plan::residual`]).
    #[serde(flatten)]
    pub measured: Measured,
    /// Each worker's tasks and busy time in the best run.
    pub workers: Vec<WorkerSummary>,
    /// Each kernel's executions, mean time and rate in the best run.
    pub kernels: Vec<KernelSummary>,
    /// Per cluster of several cores, how its kernels' pieces ran in the best run: pieces per team
    /// thread, pieces off their core, busy fraction inside split kernels, straggler share.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pieces: Vec<PieceSummary>,
    /// The bounds of the graph with the durations the best run's tasks took (absent, with a warning
    /// on stderr, when they could not be computed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundReport>,
    /// The mixed bound over the time, at most 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<f64>,
    /// The libraries timed beside hetla on the same matrix in the same process (`--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's rate over each peer's, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

impl RunReport {
    /// The report of `plan` run on `platform`: `timings` of a run of `flops` (real flops), the best
    /// run's `trace` (its summary, and its bounds: the run succeeded, so bounds that cannot be
    /// computed are a warning on stderr, not a reason to withhold the result), its check
    /// `residual`.
    pub fn new(
        (plan, platform): (&Plan, &Platform),
        timings: &Timings,
        flops: f64,
        trace: &Trace,
        residual: f64,
    ) -> Self {
        let bounds = plan
            .run_bounds(trace)
            .inspect_err(|e| eprintln!("warning: no makespan bounds for this run: {e}"))
            .ok();
        let summary = trace.summary();
        Self {
            precision: plan.precision(),
            tile: plan.tile(),
            backend: platform.backend(),
            cores: platform.clusters().iter().map(|c| c.size()).sum(),
            tasks: plan.graph().len(),
            measured: Measured::new(timings, flops, residual),
            workers: summary.workers,
            kernels: summary.kernels,
            pieces: summary.pieces,
            efficiency: bounds.as_ref().map(|b| b.mixed_ms * 1e-3 / timings.best),
            bounds,
            peers: None,
            ratios: Vec::new(),
        }
    }

    /// Records the peers timed beside the run, and hetla's ratio to each.
    pub fn add_peers(&mut self, peers: Vec<PeerRate>) {
        self.ratios = ratios(self.measured.gflops, &peers);
        self.peers = Some(peers);
    }

    /// The time lines of the text report: the best seconds and rate over `flops` (its formula), and
    /// with `--repeat` the runs and their median.
    pub fn print_time(&self, flops: &str) {
        super::output::print_time(
            self.measured.seconds,
            self.measured.gflops,
            flops,
            self.precision,
            self.measured.runs,
            self.measured.median_seconds,
        );
    }

    /// The workers, kernels, bounds, efficiency, peers and ratios of the text report.
    pub fn print_run(&self) {
        super::output::print_run(
            &self.workers,
            &self.kernels,
            &self.pieces,
            self.bounds.as_ref(),
            self.efficiency,
            self.peers.as_deref(),
            &self.ratios,
        );
    }
}

/// hetla's rate (`gflops`) over each peer's, by the peer's name: the `ratios` of every report with
/// peers (`cholesky`, `lu`, `qr`, `gemm`, `batch`).
pub fn ratios(gflops: f64, peers: &[PeerRate]) -> Vec<(String, f64)> {
    peers
        .iter()
        .map(|p| (p.name.clone(), gflops / p.gflops))
        .collect()
}
