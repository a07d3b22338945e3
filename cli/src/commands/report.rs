//! The one run report every factorisation command shares (`cholesky`, `lu`, `qr`, `ldlt`, on one
//! node or on a grid of ranks): what ran, its time and rate, its check, where the work went (one
//! node's workers and kernels, or a grid's ranks: the section `S` of [`RunReport`]), its bounds and
//! efficiency, the inverse when it was timed, and the peers timed beside it with hetla's ratio to
//! each. A command's report holds it flattened (`#[serde(flatten)]`: the JSON keys stay at the top
//! level) beside what only that command has. `gemm` and `batch` share its peers' shape: `peers` and
//! `ratios` ([`ratios`]).

use hetla::{BoundReport, Plan, Precision, Trace};
use hetla_runtime::{KernelSummary, PieceSummary, Platform, WorkerSummary};
use serde::Serialize;

use crate::peers::{PeerRate, Timings};

/// What a timed and checked run measured: its best time, median and rate, and its check. A
/// [`RunReport`] holds it flattened, and so does its inverse's section, so the keys are the
/// report's own.
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

/// A factorisation's run, on one node or on a grid of ranks (`S`: where it ran, [`NodeRun`] or a
/// distributed run's `GridRun`): what ran, what it measured, the inverse when it was timed too, and
/// the peers timed beside it. Every section's keys are the report's own (flattened).
#[derive(Serialize, Debug, Clone)]
pub struct RunReport<S = NodeRun> {
    /// The precision: s, d, c or z (complex rates count 4 real flops per complex one).
    pub precision: Precision,
    /// The tile (LU: the block width; a grid's: ScaLAPACK's block size).
    pub tile: usize,
    /// The kernels' library: faer or openblas (each rank's, on a grid).
    pub backend: hetla::Backend,
    /// Where it ran: its workers and kernels on one node, its ranks on a grid.
    #[serde(flatten)]
    pub on: S,
    /// Its time and rate (the factorisation's flops: LAPACK Working Note 41's leading terms, 4
    /// times as many real ones for complex) and its check: the plan's LAPACK ratio
    /// ([`hetla::Plan::residual`]) on one node, the ratio probed with random columns where the
    /// tiles live on a grid.
    #[serde(flatten)]
    pub measured: Measured,
    /// With `hetla cholesky --inverse`: the factorisation and the inverse timed together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inverse: Option<InverseReport>,
    /// The libraries timed beside hetla on the same matrix in the same process (`--compare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's rate over each peer's, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<(String, f64)>,
}

/// Where a run on one node went: its cores, tasks, workers and kernels, its bounds.
#[derive(Serialize, Debug, Clone)]
pub struct NodeRun {
    /// Cores of every cluster.
    pub cores: usize,
    /// Tasks of the graph.
    pub tasks: usize,
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
}

/// `hetla cholesky --inverse`: A^-1 from a fresh factorisation into a matrix allocated before the
/// clock (`Factor::inverse_into`), timed and checked, beside the libraries' own.
#[derive(Serialize, Debug, Clone)]
pub struct InverseReport {
    /// The best factorisation + inverse, its n^3 flops (n^3/3 for the factor, 2 n^3/3 for the
    /// inverse; 4x real for complex) and ||A X - I||_1 / (n ||A||_1 ||X||_1 eps).
    #[serde(flatten)]
    pub measured: Measured,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<PeerRate>>,
    /// hetla's rate over the fastest CPU peer's (`--compare cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_best_peer: Option<f64>,
    /// hetla's rate over cuSOLVER ?potrf + ?potri's.
    #[serde(flatten)]
    pub cusolver: CusolverRatios,
}

/// hetla's rate over a cuSOLVER peer's three timings (`--compare gpu` with a CUDA GPU; each key
/// absent without): on the matrix already in GPU memory, as a program calls it on a matrix in
/// pageable host memory (copy in, the call, copy out), and the same from page-locked host memory
/// (its copies by DMA: the best a cuSOLVER user does on one GPU).
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct CusolverRatios {
    #[serde(rename = "ratio_to_cusolver", skip_serializing_if = "Option::is_none")]
    pub resident: Option<f64>,
    #[serde(
        rename = "ratio_to_cusolver_from_host",
        skip_serializing_if = "Option::is_none"
    )]
    pub from_host: Option<f64>,
    #[serde(
        rename = "ratio_to_cusolver_page_locked",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_locked: Option<f64>,
}

impl CusolverRatios {
    /// hetla's `gflops` over the peer's `[resident, from host, page-locked]` rates.
    #[cfg(feature = "cuda")]
    pub fn of(gflops: f64, [resident, from_host, locked]: &[PeerRate; 3]) -> Self {
        Self {
            resident: Some(gflops / resident.gflops),
            from_host: Some(gflops / from_host.gflops),
            page_locked: Some(gflops / locked.gflops),
        }
    }
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
        let on = NodeRun {
            cores: platform.clusters().iter().map(|c| c.size()).sum(),
            tasks: plan.graph().len(),
            workers: summary.workers,
            kernels: summary.kernels,
            pieces: summary.pieces,
            efficiency: bounds.as_ref().map(|b| b.mixed_ms * 1e-3 / timings.best),
            bounds,
        };
        RunReport::of(
            (plan.precision(), plan.tile(), platform.backend()),
            on,
            Measured::new(timings, flops, residual),
        )
    }

    /// The workers, kernels, bounds, efficiency, peers and ratios of the text report.
    pub fn print_run(&self) {
        super::output::print_run(
            &self.on.workers,
            &self.on.kernels,
            &self.on.pieces,
            self.on.bounds.as_ref(),
            self.on.efficiency,
            self.peers.as_deref(),
            &self.ratios,
        );
    }
}

impl<S> RunReport<S> {
    /// The report of a run in (precision, tile, backend) that ran `on` and `measured`, with no
    /// inverse and no peers yet.
    pub fn of(
        (precision, tile, backend): (Precision, usize, hetla::Backend),
        on: S,
        measured: Measured,
    ) -> Self {
        Self {
            precision,
            tile,
            backend,
            on,
            measured,
            inverse: None,
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
}

/// hetla's rate (`gflops`) over each peer's, by the peer's name: the `ratios` of every report with
/// peers (`cholesky`, `lu`, `qr`, `gemm`, `batch`).
pub fn ratios(gflops: f64, peers: &[PeerRate]) -> Vec<(String, f64)> {
    peers
        .iter()
        .map(|p| (p.name.clone(), gflops / p.gflops))
        .collect()
}
