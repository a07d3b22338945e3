//! `hetla simulate`: one Cholesky (or LU) run on a modelled platform, with its bounds.

use clap::Args;
use hetla::{ClusterSpec, SchedulerKind};
use hetla_factorizations::ProcessGrid;
use hetla_lab::{GridSimReport, Modelled, PlatformModel, SimReport, parse_network};
use hetla_runtime::{LinkRate, RunOptions, SimOptions};
use serde::Serialize;

/// Options shared by `simulate` and `sweep`: how each simulated run is scheduled and perturbed.
#[derive(Args, Clone)]
pub struct SimRunArgs {
    /// Scheduler: mct, dmda, eager or ws.
    #[arg(long, default_value = "mct")]
    pub scheduler: SchedulerKind,
    /// dmda's beta: the weight of a task's transfer time in its expected completion.
    #[arg(long, default_value_t = hetla_runtime::DMDA_BETA, value_parser = parse_beta)]
    pub dmda_beta: f64,
    /// Seed of the duration noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Relative amplitude of the duration noise: each task lasts its model duration times 1 +
    /// noise * u, u uniform in [-1, 1). 0 (default) gives exact model durations.
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,
    /// When tiles modified on a GPU go back to host memory: final (as soon as the last task writing
    /// them ends, hetla's policy), end (in the flush after the last task, StarPU's, the policy of
    /// the papers' runs) or resident (after the run's clock stops; set by --resident, which places
    /// the matrix on the GPU as it needs).
    #[arg(long, default_value = "final")]
    pub write_back: hetla_runtime::WriteBack,
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
    /// A preset (sirocco, knl, a100x8, h200, h100, xeon16, xeon16-target) or a TOML platform file
    /// (see `hetla calibrate --output`).
    #[arg(long)]
    pub platform: String,
    /// CPU clusters, resolved on the platform's cores minus one per GPU.
    #[arg(long, default_value = "auto", value_parser = super::args::parse_spec)]
    pub clusters: ClusterSpec,
    /// Number of GPUs used.
    #[arg(long, default_value_t = 0)]
    pub gpus: usize,
    /// How host tiles meet the GPUs' links: staged (packed by CPU cores into page-locked buffers at
    /// the platform's packing rates, as h200 gives them and real runs do by default; a platform
    /// without them copies at its links' rates) or page-locked (copied straight by the GPUs' DMA
    /// engines), as `hetla cholesky --host-memory`.
    #[arg(long, default_value = "staged")]
    pub host_memory: hetla::HostMemory,
    /// On a staged data path, how many cores each GPU packs its copies on (its host thread's
    /// included; default: the rule of real runs, HETLA_GPU_COPY_CORES there).
    #[arg(long, value_parser = super::args::parse_positive)]
    pub copy_cores: Option<usize>,
    /// Compute streams of each GPU: how many kernels it runs at once, sharing its rate (a kernel
    /// filling part of the GPU runs at its own rate beside others until together they fill it;
    /// HETLA_GPU_STREAMS on a real run). 1 to 16.
    #[arg(long, default_value_t = 1, value_parser = hetla_runtime::parse_streams)]
    pub streams: usize,
    /// Memory budget for tiles on each GPU, in place of the platform's: bytes, or with KiB, MiB,
    /// GiB ("8GiB"), as `hetla cholesky --gpu-memory`. A Cholesky or LU whose tiles exceed it runs
    /// out of core, as on a real GPU.
    #[arg(long, value_parser = super::args::parse_bytes, value_name = "BYTES")]
    pub gpu_memory: Option<usize>,
    /// The matrix resident on the first GPU, as `hetla cholesky --resident` times it: every tile
    /// there before the clock starts and left there when it stops (the copies in and out not
    /// simulated). Needs --gpus 1 or more.
    #[arg(long)]
    pub resident: bool,
    /// Order of the matrix.
    #[arg(long, value_parser = super::args::parse_positive)]
    pub n: usize,
    /// Tile size (one the platform has rates for; LU's block width).
    #[arg(long, value_parser = super::args::parse_positive)]
    pub tile: usize,
    /// Rows of the matrix, for QR (its columns are --n; default: square). Its tree: binary for a
    /// tall matrix of one tile column, else flat.
    #[arg(long, value_parser = super::args::parse_positive)]
    pub m: Option<usize>,
    /// The factorisation (beside GPUs: LU's panels on the clusters, on the GPUs with
    /// `--clusters none`; QR's and LDL^T's in block columns, their panels on the clusters, their
    /// products on the GPUs; inverse: its own graph, 2 n^3/3 flops, without the Cholesky before
    /// it).
    #[arg(long, default_value_t = hetla::Family::Cholesky, value_parser = super::args::family())]
    pub factorization: hetla::Family,
    /// Simulate a distributed run on this many nodes of the platform (one rank each, as `mpirun`
    /// with `cholesky --grid`), on the most square grid P x Q (P <= Q) unless `--grid` says.
    #[arg(long, value_parser = super::args::parse_positive)]
    pub nodes: Option<usize>,
    /// The process grid of a distributed run (P x Q nodes, tiles 2D block-cyclic).
    #[arg(long, value_name = "PxQ", value_parser = super::args::parse_grid)]
    pub grid: Option<ProcessGrid>,
    /// The network between nodes, "latency,bandwidth": each message takes the latency plus its
    /// bytes over the bandwidth, and each node's NIC sends one message at a time and receives one
    /// at a time. Units: ns/us/ms/s, GB/s, MB/s, Gb/s, Mb/s.
    #[arg(long, default_value = "1.5us,100Gb/s", value_parser = parse_network)]
    pub network: LinkRate,
    /// The precision of the simulated kernels: s, d, c or z (the platform needs rates in it; the
    /// presets state theirs).
    #[arg(long, default_value = "d")]
    pub precision: hetla::Precision,
    /// With `--precision s` or `c` and GPUs: their GEMMs (and LU's updates) on tensor cores
    /// (`tf32`, `bf16`: the model's rates times its GPU's tensor speedups, `hetla::TensorMath`);
    /// `off` by default.
    #[arg(long, default_value = "off", value_name = "MATH")]
    pub tensor_math: hetla::TensorMath,
    #[command(flatten)]
    pub tail: super::args::TailArgs,
    #[command(flatten)]
    pub run: SimRunArgs,
    #[command(flatten)]
    pub traces: super::args::TraceArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A simulated run on one node, or over several.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Simulated {
    /// One node.
    Node(SimReport),
    /// Several nodes.
    Grid(GridSimReport),
}

/// The grid of `--nodes` and `--grid`: none when neither is given (one node).
pub fn grid_of(
    nodes: Option<usize>,
    grid: Option<ProcessGrid>,
) -> crate::Result<Option<ProcessGrid>> {
    let invalid = |reason: String| crate::Error::InvalidOption {
        option: "nodes",
        reason,
    };
    match (nodes, grid) {
        (None, None) => Ok(None),
        (None, Some(g)) => Ok(Some(g)),
        (Some(n), Some(g)) if n == g.size() => Ok(Some(g)),
        (Some(n), Some(g)) => Err(invalid(format!(
            "--nodes {n} and --grid {g} ({} ranks) disagree: each node runs one rank, so give P x Q = {n}, or leave one out",
            g.size()
        ))),
        (Some(n), None) => {
            let p = (1..=n)
                .take_while(|p| p * p <= n)
                .filter(|p| n % p == 0)
                .last();
            let p = p.unwrap_or(1);
            ProcessGrid::new(p, n / p)
                .map(Some)
                .map_err(|e| invalid(e.to_string()))
        }
    }
}

/// Runs `hetla simulate`.
pub fn run(args: &SimulateArgs) -> crate::Result<Simulated> {
    super::output::check_outputs(&args.traces.outputs(), None)?;
    // LU and QR run on one process row: --nodes N alone is 1 x N for them.
    let one_row = args.factorization.on_one_process_row();
    let grid = match (args.nodes, args.grid) {
        (Some(n), None) if one_row => {
            Some(
                ProcessGrid::new(1, n).map_err(|e| crate::Error::InvalidOption {
                    option: "nodes",
                    reason: e.to_string(),
                })?,
            )
        }
        (nodes, grid) => grid_of(nodes, grid)?,
    };
    if args.tensor_math != hetla::TensorMath::Off
        && !matches!(args.precision, hetla::Precision::S | hetla::Precision::C)
    {
        return Err(crate::Error::InvalidOption {
            option: "tensor-math",
            reason: format!(
                "{} rounds the products of single-precision tiles: give --precision s or c, not {}",
                args.tensor_math, args.precision
            ),
        });
    }
    let model = PlatformModel::resolve(&args.platform)?.with_tensor_math(args.tensor_math)?;
    let mut options = args.run.options();
    let machine = Modelled {
        compute_streams: args.streams,
        ..Modelled::new(&model, &args.clusters, args.gpus)
            .precision(args.precision)
            .host_memory(args.host_memory)
            .copy_cores(args.copy_cores)
            .gpu_memory(args.gpu_memory)
    };
    let shape = (args.m, args.n, args.tile);
    let plan = args
        .factorization
        .modelled_plan((grid, args.gpus), shape, args.precision)?;
    let plan = args.tail.apply(plan)?;
    if args.resident {
        // The matrix on the first GPU for the whole run, as `hetla cholesky --resident` times it.
        if args.gpus == 0 {
            return Err(crate::Error::InvalidOption {
                option: "resident",
                reason: "a resident run needs a GPU: give --gpus 1 or more".into(),
            });
        }
        options.run.placement = plan.placed_on(hetla_runtime::MemoryNode(1));
        options.run.write_back = hetla_runtime::WriteBack::Resident;
    }
    let (report, trace) = match grid {
        None => {
            let (report, trace) = hetla_lab::simulate(&plan, &machine, &options)?;
            (Simulated::Node(report), trace)
        }
        Some(grid) => {
            let (report, trace) =
                hetla_lab::simulate_grid(&plan, &machine, grid, args.network, &options)?;
            (Simulated::Grid(report), trace)
        }
    };
    args.traces.write(&trace);
    Ok(report)
}

/// Prints a simulated run as a table.
pub fn print(r: &Simulated) {
    match r {
        Simulated::Node(r) => print_node(r),
        Simulated::Grid(r) => print_grid(r),
    }
}

/// Prints a simulated distributed run as a table.
pub fn print_grid(r: &GridSimReport) {
    let (title, flops) = title_and_flops(r.algorithm);
    println!(
        "hetla simulate: {title} n = {}, tile = {}, precision {} on {} nodes ({} grid) of {} with clusters {} and {} GPU(s) each, scheduler {}",
        r.n, r.tile, r.precision, r.nodes, r.grid, r.platform, r.clusters, r.gpus, r.scheduler
    );
    println!(
        "  network   {} us + bytes / {} GB/s per message, one at a time per NIC and direction",
        r.network_latency_us, r.network_gb_per_s
    );
    println!(
        "  makespan  {:.3} ms simulated ({:.3} s to simulate), noise {} seed {}",
        r.makespan_ms, r.simulation_seconds, r.noise, r.seed
    );
    println!(
        "  rate      {:.2} Gflop/s, {:.2} per node ({}{flops} flops; CPU kernel rates: {})",
        r.gflops,
        r.gflops_per_node,
        if r.precision.is_complex() {
            "4x real "
        } else {
            ""
        },
        r.cpu_rates
    );
    println!(
        "  messages  {} ({:.1} MB)",
        r.messages,
        r.bytes_sent as f64 / 1e6
    );
    for n in &r.ranks {
        println!(
            "  node {:<4} {:7} tasks, CPU busy {:5.1}%, GPU busy {:5.1}%, sent {:10.1} MB (count {:.1} MB)",
            n.rank,
            n.tasks,
            100.0 * n.cpu_busy,
            100.0 * n.gpu_busy,
            n.bytes_sent as f64 / 1e6,
            n.bytes_expected as f64 / 1e6
        );
    }
    let mixed = r.bounds.mixed_ms.map_or_else(
        || "not computed (too many tasks)".to_owned(),
        |ms| format!("{ms:.3} ms"),
    );
    println!(
        "  bounds    critical path {:.3} ms, area {:.3} ms, mixed {mixed} ({} tasks on every node's workers together)",
        r.bounds.cp_ms, r.bounds.area_ms, r.bounds.tasks
    );
    println!(
        "  network   {:.3} ms bound (the busiest NIC's messages); critical path with messages {:.3} ms",
        r.bounds.network_ms, r.bounds.cp_network_ms
    );
    println!(
        "  node area {:.3} ms (the busiest node's own tasks on its own workers)",
        r.bounds.node_area_ms
    );
    println!(
        "  efficiency {:.3} ({} bound {:.3} ms = {:.1} Gflop/s, over the simulated makespan)",
        r.efficiency, r.bounds.bound_by, r.bounds.bound_ms, r.bounds.bound_gflops
    );
}

/// Prints a simulated run on one node as a table.
pub fn print_node(r: &SimReport) {
    let (title, flops) = title_and_flops(r.algorithm);
    let heading = super::output::modelled_heading(
        (r.n, r.tile, r.tail),
        (r.precision, &r.platform, &r.clusters, r.gpus),
    );
    println!(
        "hetla simulate: {title} {heading}, scheduler {}",
        r.scheduler
    );
    println!(
        "  makespan  {:.3} ms simulated ({:.3} s to simulate), noise {} seed {}",
        r.makespan_ms, r.simulation_seconds, r.noise, r.seed
    );
    println!(
        "  rate      {:.2} Gflop/s ({}{flops} flops; CPU kernel rates: {})",
        r.gflops,
        if r.precision.is_complex() {
            "4x real "
        } else {
            ""
        },
        r.cpu_rates
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

/// The title and the flop count of a simulated algorithm (QR's order is its rows, m).
fn title_and_flops(algorithm: hetla::Algorithm) -> (String, &'static str) {
    let (title, flops) = algorithm.title_and_flops();
    match algorithm.family() {
        Some(family) if family.takes_rows() => (format!("{title} (rows)"), flops),
        _ => (title.to_string(), flops),
    }
}
