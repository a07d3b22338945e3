//! `hetla simulate`: one Cholesky run on a modelled platform, with its bounds.

use clap::Args;
use hetla::model::PlatformModel;
use hetla::runtime::RunOptions;
use hetla::runtime::SimOptions;
use hetla::simulation::{SimReport, simulate_cholesky};
use hetla::{ClusterSpec, SchedulerKind};

/// Options shared by `simulate` and `sweep`: how each simulated run is scheduled and
/// perturbed.
#[derive(Args, Clone)]
pub struct SimRunArgs {
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    /// dmda's beta: the weight of a task's transfer time in its expected completion.
    #[arg(long, default_value_t = hetla::runtime::DMDA_BETA, value_parser = parse_beta)]
    pub dmda_beta: f64,
    /// Seed of the duration noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Relative amplitude of the duration noise: each task lasts its model duration times
    /// 1 + noise * u, u uniform in [-1, 1). 0 (default) gives exact model durations.
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,
    /// When tiles modified on a GPU go back to host memory: final (as soon as the last
    /// task writing them ends, hetla's policy) or end (in the flush after the last task,
    /// StarPU's, the policy of the papers' runs).
    #[arg(long, default_value = "final")]
    pub write_back: hetla::runtime::WriteBack,
}

impl SimRunArgs {
    /// The simulation options (`simulate` checks them).
    pub fn options(&self) -> SimOptions {
        SimOptions {
            run: RunOptions {
                scheduler: self.scheduler,
                restrictions: Vec::new(),
                dmda_beta: Some(self.dmda_beta),
                write_back: self.write_back,
                ..Default::default()
            },
            seed: self.seed,
            noise: self.noise,
        }
    }
}

/// A weight >= 0.
fn parse_beta(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(b) if b.is_finite() && b >= 0.0 => Ok(b),
        _ => Err(format!(
            "{s:?} is not a weight >= 0 (1 is StarPU's default)"
        )),
    }
}

/// Arguments of `hetla simulate`.
#[derive(Args)]
pub struct SimulateArgs {
    /// A preset (sirocco, knl) or a TOML platform file (see `hetla calibrate --output`).
    #[arg(long)]
    pub platform: String,
    /// CPU clusters, resolved on the platform's cores minus one per GPU.
    #[arg(long, default_value = "auto", value_parser = super::args::parse_spec)]
    pub clusters: ClusterSpec,
    /// Number of GPUs used.
    #[arg(long, default_value_t = 0)]
    pub gpus: usize,
    /// Order of the matrix.
    #[arg(long, value_parser = super::args::parse_positive)]
    pub n: usize,
    /// Tile size (one the platform has rates for).
    #[arg(long, value_parser = super::args::parse_positive)]
    pub tile: usize,
    #[command(flatten)]
    pub run: SimRunArgs,
    #[command(flatten)]
    pub traces: super::args::TraceArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `hetla simulate`.
pub fn run(args: &SimulateArgs) -> hetla::Result<SimReport> {
    super::output::check_outputs(&args.traces.outputs(), None)?;
    let model = PlatformModel::resolve(&args.platform)?;
    let (report, trace) = simulate_cholesky(
        &model,
        &args.clusters,
        args.gpus,
        args.n,
        args.tile,
        &args.run.options(),
    )?;
    args.traces.write(&trace);
    Ok(report)
}

/// Prints a simulated run as a table.
pub fn print(r: &SimReport) {
    println!(
        "hetla simulate: Cholesky n = {}, tile = {} on {} with clusters {} and {} GPU(s), scheduler {}",
        r.n, r.tile, r.platform, r.clusters, r.gpus, r.scheduler
    );
    println!(
        "  makespan  {:.3} ms simulated ({:.3} s to simulate), noise {} seed {}",
        r.makespan_ms, r.simulation_seconds, r.noise, r.seed
    );
    println!(
        "  rate      {:.2} Gflop/s (n^3/3 flops; CPU kernel rates: {})",
        r.gflops, r.cpu_rates
    );
    for w in &r.workers {
        println!(
            "  worker    {:<6} {:<16} {:5} tasks, busy {:5.1}%",
            w.name,
            w.class,
            w.tasks,
            100.0 * w.busy_fraction
        );
    }
    for l in &r.bytes {
        println!(
            "  link      {:<12} {:10.1} MB",
            l.link,
            l.bytes as f64 / 1e6
        );
    }
    super::output::print_bounds(&r.bounds);
    println!(
        "  efficiency {:.3} (mixed bound / simulated makespan)",
        r.efficiency
    );
}
