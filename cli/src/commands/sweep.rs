//! `hetla sweep`: every combination of cluster specs, GPU counts, orders and tile sizes, simulated
//! on a modelled platform (or run for real on this machine with `--platform this`), written as
//! results.csv, results.json and one SVG plot of Gflop/s against n per (tile, GPU count), each
//! configuration a colour, its mixed bound dashed in the same colour (the layout of Cojean et al.'s
//! (2016) Figs. 9 and 10).
//!
//! A combination that cannot run (a spec that does not fit, more GPUs than the platform has, a tile
//! without rates) is recorded as skipped with the reason; the others still run.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use hetla::{ClusterSpec, Precision};
use hetla_factorizations::ProcessGrid;
use hetla_lab::{Modelled, PlatformModel};
use hetla_runtime::{LinkRate, write_atomic};
use plotters::prelude::*;
use serde::Serialize;

use crate::Error;

use super::simulate::SimRunArgs;

/// The `--platform` value that means real runs on this machine.
pub const THIS_MACHINE: &str = "this";

/// Arguments of `hetla sweep`.
#[derive(Args)]
pub struct SweepArgs {
    /// A preset (sirocco, knl, a100x8, h200, h100, xeon16, xeon16-target), a TOML platform file, or
    /// `this` for real runs on this machine (a GPU count K uses its first K GPUs; more than it has
    /// is a skipped row).
    #[arg(long)]
    pub platform: String,
    /// Cluster specs, comma-separated ("20x1,2x10,4x5").
    #[arg(long, value_delimiter = ',', default_value = "auto", value_parser = super::args::parse_spec)]
    pub clusters: Vec<ClusterSpec>,
    /// GPU counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub gpus: Vec<usize>,
    /// Matrix orders: start:end:step (end included) or a comma-separated list.
    #[arg(long, value_parser = parse_orders)]
    pub n: Orders,
    /// Tile sizes, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_parser = super::args::parse_positive)]
    pub tile: Vec<usize>,
    /// Node counts or process grids of distributed simulated runs, comma-separated ("1,4,16" or
    /// "2x2,1x4"): each node runs one rank, a count N on the most square grid. Without it, each run
    /// is one node.
    #[arg(long, value_delimiter = ',', value_parser = parse_nodes)]
    pub nodes: Vec<ProcessGrid>,
    /// The network between nodes (see `simulate --network`).
    #[arg(long, default_value = "1.5us,100Gb/s", value_parser = hetla_lab::parse_network)]
    pub network: LinkRate,
    /// Weak scaling: each `--n` is the order on one node, and a run on N nodes factors n * sqrt(N)
    /// (rounded to a multiple of the tile), the same memory per node.
    #[arg(long, requires = "nodes")]
    pub weak: bool,
    /// Directory for results.csv, results.json and the plots (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// The factorisation (real runs: Cholesky; the others are simulated; inverse: its own graph, 2
    /// n^3/3 flops, without the Cholesky before it).
    #[arg(long, default_value_t = hetla::Family::Cholesky, value_parser = super::args::family())]
    pub factorization: hetla::Family,
    #[command(flatten)]
    pub run: SimRunArgs,
    /// Kernel backend and performance models of real runs (`--platform this`).
    #[command(flatten)]
    pub real: super::args::PlatformArgs,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A node count N (the most square grid) or a grid PxQ.
fn parse_nodes(s: &str) -> Result<ProcessGrid, String> {
    let grid = if s.contains(['x', 'X']) {
        super::args::parse_grid(s)?
    } else {
        let n = super::args::parse_positive(s)?;
        super::simulate::grid_of(Some(n), None)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{s:?} is not a node count"))?
    };
    Ok(grid)
}

/// Matrix orders of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Orders(pub Vec<usize>);

/// The most matrix orders one `--n` may list.
pub const MAX_ORDERS: usize = 10_000;

/// The most combinations one sweep may run (each a simulation or a factorisation).
pub const MAX_COMBINATIONS: usize = 100_000;

/// Parses "start:end:step" (end included) or "a,b,c".
pub fn parse_orders(s: &str) -> Result<Orders, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("{t:?} is not a matrix order"))
    };
    let orders = match s.split(':').collect::<Vec<_>>().as_slice() {
        [start, end, step] => {
            let (start, end, step) = (number(start)?, number(end)?, number(step)?);
            if step == 0 || start > end {
                return Err(format!(
                    "{s:?}: expected start:end:step with start <= end and step >= 1"
                ));
            }
            if (end - start) / step >= MAX_ORDERS {
                return Err(format!(
                    "{s:?} lists {} orders; a sweep takes at most {MAX_ORDERS}: use a larger step",
                    (end - start) / step + 1
                ));
            }
            (start..=end).step_by(step).collect()
        }
        [list] => list.split(',').map(number).collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(format!(
                "{s:?}: expected start:end:step or a comma-separated list"
            ));
        }
    };
    if orders.len() > MAX_ORDERS {
        return Err(format!("a sweep takes at most {MAX_ORDERS} orders"));
    }
    if orders.contains(&0) {
        return Err("matrix orders must be at least 1".into());
    }
    Ok(Orders(orders))
}

/// One combination of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// "simulated" or "real".
    pub mode: &'static str,
    /// Cluster spec.
    pub clusters: String,
    /// GPUs used.
    pub gpus: usize,
    /// Tile size.
    pub tile: usize,
    /// Matrix order.
    pub n: usize,
    /// Nodes of a distributed simulated run (1 otherwise).
    pub nodes: usize,
    /// Its process grid.
    pub grid: Option<String>,
    /// "ok" or "skipped".
    pub status: &'static str,
    /// Makespan (simulated, or the runtime's measured makespan), ms.
    pub makespan_ms: Option<f64>,
    /// Wall-clock seconds of a real factorisation call (checks and tiling included).
    pub seconds: Option<f64>,
    /// Simulated Gflop/s, or achieved Gflop/s over the wall-clock seconds of a real run.
    pub gflops: Option<f64>,
    /// Critical-path bound, Gflop/s.
    pub cp_gflops: Option<f64>,
    /// Area bound, Gflop/s.
    pub area_gflops: Option<f64>,
    /// Mixed bound, Gflop/s.
    pub mixed_gflops: Option<f64>,
    /// Mixed bound / makespan.
    pub efficiency: Option<f64>,
    /// Bytes copied between memory nodes (inside nodes, for a distributed run).
    pub bytes_moved: Option<usize>,
    /// Distributed runs: Gflop/s per node.
    pub gflops_per_node: Option<f64>,
    /// Distributed runs: the busiest NIC's time, ms.
    pub network_ms: Option<f64>,
    /// Distributed runs: the largest bound (see `simulate --nodes`), in Gflop/s.
    pub bound_gflops: Option<f64>,
    /// Distributed runs: which bound it is.
    pub bound_by: Option<&'static str>,
    /// Distributed runs: bytes sent over the network.
    pub bytes_sent: Option<usize>,
    /// Why a combination was skipped.
    pub reason: Option<String>,
    /// The line of the scaling plot a distributed run is a point of.
    #[serde(skip)]
    pub series: String,
}

/// What `hetla sweep` reports.
#[derive(Debug, Serialize)]
pub struct SweepReport {
    /// Platform name.
    pub platform: String,
    /// Output directory.
    pub out: String,
    /// Files written.
    pub files: Vec<String>,
    /// Combinations run.
    pub runs: usize,
    /// Combinations skipped.
    pub skipped: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Every combination.
    pub rows: Vec<SweepRow>,
}

/// The sweep's options, checked before any combination runs: tiles, run options, the output
/// directory (created, and its files proven writable), and what real runs can do.
fn check_args(args: &SweepArgs, real: bool) -> crate::Result<()> {
    args.run.options().check()?;
    if args.tile.contains(&0) {
        return Err(Error::InvalidOption {
            option: "tile",
            reason: "tile sizes must be at least 1".into(),
        });
    }
    // The output directory, proven writable before the first combination runs.
    if args.out.exists() && !args.out.is_dir() {
        return Err(Error::output(
            &args.out,
            "--out: is a file; give a directory (created if missing)",
        ));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| hetla_runtime::Error::io("create the --out directory", &args.out, e))?;
    for name in ["results.csv", "results.json"] {
        hetla_runtime::check_writable("--out", &args.out.join(name))?;
    }
    for &grid in &args.nodes {
        args.factorization.check_grid(Some(grid))?;
    }
    if real && args.factorization != hetla::Family::Cholesky {
        return Err(Error::InvalidOption {
            option: "factorization",
            reason: "a sweep of real runs factors by Cholesky; LU and QR sweeps are simulated (give --platform with a model), real runs are `hetla lu` and `hetla qr`".into(),
        });
    }
    if real && !args.nodes.is_empty() {
        return Err(Error::InvalidOption {
            option: "nodes",
            reason: "distributed runs are simulated; real ones run under mpirun with `hetla cholesky --grid`".into(),
        });
    }
    Ok(())
}

/// Runs `hetla sweep`.
pub fn run(args: &SweepArgs) -> crate::Result<SweepReport> {
    let start = Instant::now();
    let real = args.platform == THIS_MACHINE;
    let model = if real {
        None
    } else {
        Some(PlatformModel::resolve(&args.platform)?)
    };
    check_args(args, real)?;
    let options = args.run.options();
    let grids: Vec<Option<ProcessGrid>> = if args.nodes.is_empty() {
        vec![None]
    } else {
        args.nodes.iter().copied().map(Some).collect()
    };
    // Every combination is listed before the first runs: count them first.
    let counts = [
        args.tile.len(),
        args.gpus.len(),
        args.clusters.len(),
        args.n.0.len(),
        grids.len(),
    ];
    let combinations = counts.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    if combinations.is_none_or(|c| c > MAX_COMBINATIONS) {
        return Err(Error::InvalidOption {
            option: "sweep",
            reason: format!(
                "{} tiles x {} GPU counts x {} cluster specs x {} orders x {} grids are more than the {MAX_COMBINATIONS} combinations a sweep may run: list fewer",
                counts[0], counts[1], counts[2], counts[3], counts[4]
            ),
        });
    }
    let mut combos = Vec::new();
    for &tile in &args.tile {
        for &gpus in &args.gpus {
            for spec in &args.clusters {
                for &n in &args.n.0 {
                    for &grid in &grids {
                        let (order, series) = match grid {
                            Some(g) if args.weak => (
                                weak_order(n, g.size(), tile),
                                format!("{spec} + {gpus} GPU, n = {n} x sqrt(nodes)"),
                            ),
                            _ => (n, format!("{spec} + {gpus} GPU, n = {n}")),
                        };
                        combos.push((spec, gpus, tile, order, grid, series));
                    }
                }
            }
        }
    }
    let bar = super::output::progress_bar(combos.len());
    let mut rows = Vec::with_capacity(combos.len());
    for (spec, gpus, tile, n, grid, series) in combos {
        bar.set_message(format!("{spec} + {gpus} GPU, n {n}"));
        let empty = || SweepRow {
            nodes: grid.map_or(1, |g| g.size()),
            grid: grid.map(|g| g.to_string()),
            series: series.clone(),
            ..empty_row(model.is_some(), spec, gpus, tile, n)
        };
        let row = match &model {
            Some(model) => {
                let machine = Modelled::new(model, spec, gpus);
                simulated_row(args, &machine, (n, tile, grid), &options, empty())
            }
            None => real_run(args, spec, gpus, tile, n),
        };
        rows.push(row.unwrap_or_else(|e| SweepRow {
            status: "skipped",
            reason: Some(e.to_string()),
            ..empty()
        }));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let platform = model.map_or_else(|| THIS_MACHINE.to_owned(), |m| m.name);
    let title = format!(
        "{} on {platform}",
        super::args::modelled_title(args.factorization)
    );
    let files = write_outputs(&args.out, &title, &rows)?;
    let runs = rows.iter().filter(|r| r.status == "ok").count();
    if runs == 0 {
        let reason = rows
            .first()
            .and_then(|r| r.reason.clone())
            .unwrap_or_else(|| "no combination given".into());
        return Err(Error::InvalidOption {
            option: "sweep",
            reason: format!("no combination could run; the first: {reason}"),
        });
    }
    Ok(SweepReport {
        platform,
        out: args.out.display().to_string(),
        files,
        runs,
        skipped: rows.len() - runs,
        seconds: start.elapsed().as_secs_f64(),
        rows,
    })
}

/// The order of a weak-scaling run on `nodes` nodes whose one-node order is `n`: n times
/// sqrt(nodes), to the nearest multiple of the tile (at least one tile).
pub fn weak_order(n: usize, nodes: usize, tile: usize) -> usize {
    let scaled = n as f64 * (nodes as f64).sqrt() / tile as f64;
    (scaled.round() as usize).max(1) * tile
}

/// A simulated combination's row: order `n` in tiles of `tile` on `machine`, split over `grid`'s
/// nodes when there is one; `empty` carries the combination's own fields.
fn simulated_row(
    args: &SweepArgs,
    machine: &Modelled<'_>,
    (n, tile, grid): (usize, usize, Option<ProcessGrid>),
    options: &hetla_lab::SimOptions,
    empty: SweepRow,
) -> crate::Result<SweepRow> {
    let plan =
        args.factorization
            .modelled_plan((grid, machine.gpus), (None, n, tile), Precision::D)?;
    let gflops = |ms: f64| plan.flops() / (ms * 1e-3) / 1e9;
    Ok(match grid {
        Some(grid) => {
            let (r, _) = hetla_lab::simulate_grid(&plan, machine, grid, args.network, options)?;
            SweepRow {
                makespan_ms: Some(r.makespan_ms),
                gflops: Some(r.gflops),
                cp_gflops: Some(gflops(r.bounds.cp_ms)),
                area_gflops: Some(gflops(r.bounds.area_ms)),
                mixed_gflops: r.bounds.mixed_ms.map(gflops),
                efficiency: Some(r.efficiency),
                gflops_per_node: Some(r.gflops_per_node),
                network_ms: Some(r.bounds.network_ms),
                bound_gflops: Some(r.bounds.bound_gflops),
                bound_by: Some(r.bounds.bound_by),
                bytes_sent: Some(r.bytes_sent),
                ..empty
            }
        }
        None => {
            let (r, _) = hetla_lab::simulate(&plan, machine, options)?;
            SweepRow {
                makespan_ms: Some(r.makespan_ms),
                gflops: Some(r.gflops),
                cp_gflops: Some(r.bounds.cp_gflops),
                area_gflops: Some(r.bounds.area_gflops),
                mixed_gflops: Some(r.bounds.mixed_gflops),
                efficiency: Some(r.efficiency),
                bytes_moved: Some(r.bytes.iter().map(|l| l.bytes).sum()),
                ..empty
            }
        }
    })
}

/// A row with the combination filled in and no figures.
fn empty_row(simulated: bool, spec: &ClusterSpec, gpus: usize, tile: usize, n: usize) -> SweepRow {
    SweepRow {
        mode: if simulated { "simulated" } else { "real" },
        clusters: spec.to_string(),
        gpus,
        tile,
        n,
        nodes: 1,
        grid: None,
        status: "ok",
        makespan_ms: None,
        seconds: None,
        gflops: None,
        cp_gflops: None,
        area_gflops: None,
        mixed_gflops: None,
        efficiency: None,
        bytes_moved: None,
        gflops_per_node: None,
        network_ms: None,
        bound_gflops: None,
        bound_by: None,
        bytes_sent: None,
        reason: None,
        series: String::new(),
    }
}

/// One real factorisation on this machine.
fn real_run(
    args: &SweepArgs,
    spec: &ClusterSpec,
    gpus: usize,
    tile: usize,
    n: usize,
) -> crate::Result<SweepRow> {
    // The first `gpus` GPUs of this machine (an error, hence a skipped row, if it has fewer).
    let selection = match gpus {
        0 => hetla_runtime::GpuSelection::None,
        k => hetla_runtime::GpuSelection::List((0..k).collect()),
    };
    let output = super::cholesky::run(&super::cholesky::CholeskyArgs {
        n,
        tile: Some(tile),
        seed: 42,
        clusters: spec.clone(),
        scheduler: args.run.scheduler,
        storage: hetla::Storage::Auto,
        host_memory: hetla::HostMemory::Staged,
        resident: false,
        huge_pages: false,
        tail: Default::default(),
        platform: args.real.clone(),
        gpu: super::args::GpuArgs {
            gpus: selection,
            gpu_memory: None,
        },
        compare: None,
        inverse: false,
        repeat: None,
        traces: Default::default(),
        json: false,
        precision: Default::default(),
        cond: 1.0,
        tensor_math: hetla::TensorMath::Off,
        grid: None,
    })?;
    let Some(super::cholesky::CholeskyOutput::Factor(report)) = output else {
        return Err(Error::InvalidOption {
            option: "platform",
            reason: "a real run of the sweep did not factor".into(),
        });
    };
    let bounds = report.run.on.bounds.as_ref();
    Ok(SweepRow {
        makespan_ms: Some(report.makespan_ms),
        seconds: Some(report.run.measured.seconds),
        gflops: Some(report.run.measured.gflops),
        cp_gflops: bounds.map(|b| b.cp_gflops),
        area_gflops: bounds.map(|b| b.area_gflops),
        mixed_gflops: bounds.map(|b| b.mixed_gflops),
        efficiency: report.run.on.efficiency,
        bytes_moved: Some(report.bytes.iter().map(|b| b.bytes).sum()),
        ..empty_row(false, spec, gpus, tile, n)
    })
}

/// Writes results.csv, results.json and the plots (titled by `title`, "Cholesky on sirocco");
/// returns their paths.
fn write_outputs(out: &Path, title: &str, rows: &[SweepRow]) -> crate::Result<Vec<String>> {
    let csv_path = out.join("results.csv");
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer
            .serialize(row)
            .map_err(|e| Error::output(&csv_path, e))?;
    }
    let csv = writer
        .into_inner()
        .map_err(|e| Error::output(&csv_path, e))?;
    write_atomic(&csv_path, &csv)?;
    let json_path = out.join("results.json");
    let json = serde_json::to_string_pretty(rows).map_err(|e| Error::output(&json_path, e))?;
    write_atomic(&json_path, json.as_bytes())?;
    let mut files = vec![csv_path, json_path];
    for distributed in [false, true] {
        let mut groups: Vec<(usize, usize)> = rows
            .iter()
            .filter(|r| r.status == "ok" && r.grid.is_some() == distributed)
            .map(|r| (r.tile, r.gpus))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        for (tile, gpus) in groups {
            let name = if distributed { "scaling" } else { "gflops" };
            let path = out.join(format!("{name}_tile{tile}_gpus{gpus}.svg"));
            let mine: Vec<&SweepRow> = rows
                .iter()
                .filter(|r| r.status == "ok" && r.grid.is_some() == distributed)
                .filter(|r| r.tile == tile && r.gpus == gpus)
                .collect();
            let mut svg = String::new();
            let drawn = if distributed {
                plot_scaling(&mut svg, title, tile, &mine)
            } else {
                plot(&mut svg, title, tile, gpus, &mine)
            };
            drawn.map_err(|e| Error::output(&path, e))?;
            write_atomic(&path, svg.as_bytes())?;
            files.push(path);
        }
    }
    Ok(files.iter().map(|p| p.display().to_string()).collect())
}

/// Gflop/s per node against the node count (log scale), a colour per series (cluster spec, GPUs,
/// order or weak-scaling order); the bound per node dashed.
fn plot_scaling(
    svg: &mut String,
    title: &str,
    tile: usize,
    rows: &[&SweepRow],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut series: Vec<&str> = Vec::new();
    for r in rows {
        if !series.contains(&r.series.as_str()) {
            series.push(&r.series);
        }
    }
    let nodes_max = rows.iter().map(|r| r.nodes).max().unwrap_or(1).max(2) as f64;
    let per_node = |r: &SweepRow, v: Option<f64>| v.map(|v| v / r.nodes as f64);
    let y_max = rows
        .iter()
        .flat_map(|r| [per_node(r, r.gflops), per_node(r, r.bound_gflops)])
        .flatten()
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::with_string(svg, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title} nodes, tile {tile}: simulated (solid), bound (dashed), per node"),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        // x is log2(nodes) on a linear axis: one labelled tick per power of two (plotters' log
        // axis labels 1..10 per decade, which overlap).
        .build_cartesian_2d(0.0..nodes_max.log2() * 1.05, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("nodes")
        .y_desc("Gflop/s per node")
        .x_labels(nodes_max.log2() as usize + 1)
        .x_label_formatter(&|x: &f64| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{}", 2f64.powi(x.round() as i32))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&integer_label)
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    for (i, name) in series.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let mut mine: Vec<&&SweepRow> = rows.iter().filter(|r| r.series == *name).collect();
        mine.sort_by_key(|r| r.nodes);
        let points = |v: fn(&SweepRow) -> Option<f64>| -> Vec<(f64, f64)> {
            mine.iter()
                .filter_map(|r| Some(((r.nodes as f64).log2(), per_node(r, v(r))?)))
                .collect()
        };
        let achieved = points(|r| r.gflops);
        chart
            .draw_series(LineSeries::new(achieved.clone(), colour.stroke_width(2)))?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart.draw_series(achieved.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        let bound = points(|r| r.bound_gflops);
        chart.draw_series(DashedLineSeries::new(bound, 6, 4, colour.stroke_width(1)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Gflop/s against n, a colour per cluster spec; the mixed bound dashed.
fn plot(
    svg: &mut String,
    title: &str,
    tile: usize,
    gpus: usize,
    rows: &[&SweepRow],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut specs: Vec<&str> = Vec::new();
    for r in rows {
        if !specs.contains(&r.clusters.as_str()) {
            specs.push(&r.clusters);
        }
    }
    let n_max = rows.iter().map(|r| r.n).max().unwrap_or(1) as f64;
    let n_min = rows.iter().map(|r| r.n).min().unwrap_or(0) as f64;
    let y_max = rows
        .iter()
        .flat_map(|r| [r.gflops, r.mixed_gflops])
        .flatten()
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::with_string(svg, (900, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mode = rows.first().map_or("simulated", |r| r.mode);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}, tile {tile}, {gpus} GPU(s): {mode} (solid), mixed bound (dashed)"),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(n_min * 0.95..n_max * 1.02, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("matrix order n")
        .y_desc("Gflop/s")
        .x_label_formatter(&integer_label)
        .y_label_formatter(&integer_label)
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    for (i, spec) in specs.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let mut mine: Vec<&&SweepRow> = rows.iter().filter(|r| r.clusters == *spec).collect();
        mine.sort_by_key(|r| r.n);
        let achieved: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| Some((r.n as f64, r.gflops?)))
            .collect();
        let bound: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| Some((r.n as f64, r.mixed_gflops?)))
            .collect();
        chart
            .draw_series(LineSeries::new(achieved.clone(), colour.stroke_width(2)))?
            .label(format!("{spec} + {gpus} GPU"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart.draw_series(achieved.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        chart.draw_series(DashedLineSeries::new(bound, 6, 4, colour.stroke_width(1)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A tick label as a published figure writes it: "5000", not "5000.0" (one decimal below 10, where
/// ticks can be fractional).
fn integer_label(v: &f64) -> String {
    if v.abs() < 10.0 && v.fract().abs() > 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Prints a sweep as a table.
pub fn print(r: &SweepReport) {
    println!(
        "hetla sweep on {}: {} run(s), {} skipped, in {:.1} s",
        r.platform, r.runs, r.skipped, r.seconds
    );
    println!(
        "  {:<9} {:>4} {:>5} {:>6} {:>6}  {:>12} {:>9} {:>9} {:>6}",
        "clusters", "gpus", "tile", "n", "nodes", "makespan ms", "Gflop/s", "bound", "eff"
    );
    for row in &r.rows {
        match (row.makespan_ms, row.gflops) {
            (Some(ms), Some(gflops)) => println!(
                "  {:<9} {:>4} {:>5} {:>6} {:>6}  {:>12.2} {:>9.1} {:>9.1} {:>6.3}",
                row.clusters,
                row.gpus,
                row.tile,
                row.n,
                row.grid.as_deref().unwrap_or("1"),
                ms,
                gflops,
                row.bound_gflops.or(row.mixed_gflops).unwrap_or(f64::NAN),
                row.efficiency.unwrap_or(f64::NAN)
            ),
            _ => println!(
                "  {:<9} {:>4} {:>5} {:>6} {:>6}  skipped: {}",
                row.clusters,
                row.gpus,
                row.tile,
                row.n,
                row.grid.as_deref().unwrap_or("1"),
                row.reason.as_deref().unwrap_or("")
            ),
        }
    }
    println!("  files     {}", r.files.join(", "));
}
