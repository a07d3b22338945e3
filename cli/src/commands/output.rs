//! How commands report: JSON or text, errors, trace files, checked outputs, progress.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use crate::gantt::Gantt;
use hetla::BoundReport;
use hetla_runtime::Platform;
use serde::Serialize;

/// One phase of a command and the wall-clock seconds it took.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    pub seconds: f64,
}

/// Times a command's phases one after the other: where a run's wall-clock time went besides the
/// timed factorisation (the platform, the tile choice, the generated matrix, the check, the bounds,
/// the peers). What a row of a GPU lease must fit into its time limit.
pub struct Stopwatch {
    last: Instant,
    phases: Vec<Phase>,
}

impl Stopwatch {
    pub fn start() -> Self {
        Self {
            last: Instant::now(),
            phases: Vec::new(),
        }
    }

    /// Ends the phase `name` (begun at the last lap, or the start) and begins the next.
    pub fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases.push(Phase {
            name,
            seconds: (now - self.last).as_secs_f64(),
        });
        self.last = now;
    }

    /// The phases so far, in the order they ran.
    pub fn phases(&self) -> Vec<Phase> {
        self.phases.clone()
    }
}

/// The phases on one line: "platform 0.01 s, plan 0.20 s, ... (total 3.10 s)".
pub fn print_phases(phases: &[Phase]) {
    let list: Vec<String> = phases
        .iter()
        .map(|p| format!("{} {:.2} s", p.name, p.seconds))
        .collect();
    println!(
        "  phases    {} (total {:.2} s)",
        list.join(", "),
        phases.iter().map(|p| p.seconds).sum::<f64>()
    );
}

#[derive(Serialize)]
pub struct ClustersReport {
    pub spec: String,
    pub cpusets: Vec<String>,
}

#[derive(Serialize)]
pub struct MemoryReport {
    /// Bytes of the matrix (n^2 doubles).
    pub matrix_bytes: usize,
    /// Peak heap bytes allocated during the factorisation beyond those live before it.
    pub peak_extra_bytes: usize,
    /// peak_extra_bytes / matrix_bytes.
    pub ratio: f64,
    /// Heap bytes the platform holds, allocated once when it was built (pools, and the per-thread
    /// packing slabs of the `gemm` crate that the warm-up allocates), shared by every factorisation
    /// run on it.
    pub platform_bytes: usize,
}

#[derive(Serialize)]
pub struct GpuReport {
    /// Worker name ("gpu0").
    pub name: String,
    /// Device model ("NVIDIA H100 80GB HBM3", "emulated").
    pub model: String,
    /// Memory budget for tiles, in bytes.
    pub budget_bytes: usize,
    /// The logical CPU of its host thread.
    pub host_cpu: usize,
}

/// The GPU workers of a platform, for reports.
pub fn gpu_reports(platform: &Platform) -> Vec<GpuReport> {
    platform
        .devices()
        .iter()
        .enumerate()
        .map(|(i, d)| GpuReport {
            name: format!("gpu{i}"),
            model: d.device.name().to_owned(),
            budget_bytes: d.device.budget(),
            host_cpu: d.core,
        })
        .collect()
}

/// Writes the trace and the Gantt chart of a finished run (paths checked before it): a failure now
/// (a full disk) is a warning that keeps the run's report.
pub fn write_trace_files(
    trace: &hetla::Trace,
    chrome: Option<&std::path::Path>,
    gantt: Option<&std::path::Path>,
) {
    if let Some(path) = chrome {
        let _ = trace
            .write_chrome_json(path)
            .inspect_err(|e| eprintln!("warning: {e}"));
    }
    if let Some(path) = gantt {
        let _ = trace
            .write_gantt_svg(path)
            .inspect_err(|e| eprintln!("warning: {e}"));
    }
}

/// Checks a command's output files before its work starts: each can be written, no two (nor the
/// performance-model file the run will save) are the same file.
pub fn check_outputs(
    outputs: &[(&str, Option<&std::path::Path>)],
    model_file: Option<&std::path::Path>,
) -> crate::Result<()> {
    let mut given: Vec<(&str, &std::path::Path)> = Vec::new();
    for (option, path) in outputs {
        if let Some(path) = path {
            hetla_runtime::check_writable(option, path)?;
            given.push((option, path));
        }
    }
    if let Some(models) = model_file {
        given.push(("the performance-model file", models));
    }
    Ok(hetla_runtime::check_distinct(&given)?)
}

/// Saves the models a finished run learned: a failure is a warning that keeps the run's report and
/// exit status.
pub fn save_models_or_warn(platform: &Platform) -> Option<PathBuf> {
    platform
        .save_models()
        .inspect_err(|e| eprintln!("warning: the run's samples were not saved: {e}"))
        .ok()
        .flatten()
}

pub fn progress_bar(len: usize) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(len as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:24} {wide_bar} {pos}/{len} {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    }
}

/// The time lines of a run's text report, shared by `lu`, `qr` and `batch`: the best seconds and
/// rate over `flops` (its formula; complex runs count 4x the real flops), and with `--repeat` the
/// runs and their median.
pub fn print_time(
    seconds: f64,
    gflops: f64,
    flops: &str,
    precision: hetla::Precision,
    runs: usize,
    median_seconds: f64,
) {
    let complex = if precision.is_complex() {
        ", 4x real"
    } else {
        ""
    };
    println!("  time      {seconds:.4} s, {gflops:.2} Gflop/s ({flops}{complex} flops)");
    if runs > 1 {
        println!("  repeat    best of {runs} runs after a warm-up; median {median_seconds:.4} s");
    }
}

/// One line per cluster of several cores: how its kernels' pieces ran on its team.
pub fn print_pieces(pieces: &[hetla_runtime::PieceSummary]) {
    for p in pieces {
        let per_thread: Vec<String> = p.pieces_per_thread.iter().map(usize::to_string).collect();
        println!(
            "  pieces    {:<6} {} threads ran {} pieces; busy {:5.1}% inside split kernels, straggler share {:4.1}%, {} off their core",
            p.name,
            p.threads,
            per_thread.join("/"),
            100.0 * p.busy_fraction,
            100.0 * p.straggler_share,
            p.off_core
        );
    }
}

/// The bounds table shared by `bound` and `cholesky`. A real run's workers (tasks, busy share),
/// kernels (count, mean time, rate), its bounds with the efficiency, and the peers timed beside it
/// with hetla's ratio to each: the lines `hetla lu` and `hetla qr` share.
pub fn print_run(
    workers: &[hetla_runtime::WorkerSummary],
    kernels: &[hetla_runtime::KernelSummary],
    pieces: &[hetla_runtime::PieceSummary],
    bounds: Option<&BoundReport>,
    efficiency: Option<f64>,
    peers: Option<&[crate::peers::PeerRate]>,
    ratios: &[(String, f64)],
) {
    for w in workers {
        println!(
            "  worker    {:<6} {:5} tasks, busy {:5.1}%",
            w.name,
            w.tasks,
            100.0 * w.busy_fraction
        );
    }
    print_pieces(pieces);
    for k in kernels {
        println!(
            "  kernel    {:<9} {:6} x {:9.3} ms  {:7.2} Gflop/s",
            k.op,
            k.count,
            k.mean_seconds * 1e3,
            k.gflops
        );
    }
    if let (Some(bounds), Some(efficiency)) = (bounds, efficiency) {
        print_bounds(bounds);
        println!(
            "  efficiency {efficiency:.3} (mixed bound / time; bounds from the durations this run's tasks took)"
        );
    }
    for p in peers.into_iter().flatten() {
        println!(
            "  peer      {:<16} {:8.4} s  {:7.2} Gflop/s (median {:.4} s)",
            p.name, p.seconds, p.gflops, p.median_seconds
        );
    }
    for (name, ratio) in ratios {
        println!("  ratio     hetla / {name} {ratio:.3}");
    }
}

pub fn print_bounds(b: &BoundReport) {
    let classes: Vec<String> = b
        .classes
        .iter()
        .map(|c| format!("{} x {}", c.count, c.class))
        .collect();
    println!(
        "  graph     {} tasks, {} edges; resources {}",
        b.tasks,
        b.edges,
        classes.join(", ")
    );
    for (name, ms, gflops) in [
        ("critical path", b.cp_ms, b.cp_gflops),
        ("area", b.area_ms, b.area_gflops),
        ("mixed", b.mixed_ms, b.mixed_gflops),
    ] {
        println!("  bound     {name:<13} {ms:12.3} ms  {gflops:10.2} Gflop/s");
    }
    println!(
        "  mixed     {} LP solve(s); bounds computed in {:.3} s",
        b.iterations, b.seconds
    );
}

/// Prints an error: on stderr, and with `--json` also as one JSON object on stdout.
pub fn report_error(json: bool, kind: &str, message: &str) {
    eprintln!("error: {message}");
    if json {
        println!(
            "{}",
            serde_json::json!({ "error": { "kind": kind, "message": message } })
        );
    }
}

/// " (then tiles of T from R)" after a tile, for a plan with a tail; nothing without one.
pub fn tail_words(tail: Option<hetla::Tail>) -> String {
    tail.map_or(String::new(), |t| format!(" (then {t})"))
}

/// What a modelled run's heading says of its plan, (order, tile, tail), and of where it runs,
/// (precision, platform, clusters, GPUs): "n = 8192, tile = 2048, precision d on h200 with clusters
/// none and 1 GPU(s)".
pub fn modelled_heading(
    (n, tile, tail): (usize, usize, Option<hetla::Tail>),
    (precision, platform, clusters, gpus): (hetla::Precision, &str, &str, usize),
) -> String {
    format!(
        "n = {n}, tile = {tile}{}, precision {precision} on {platform} with clusters {clusters} \
         and {gpus} GPU(s)",
        tail_words(tail)
    )
}
