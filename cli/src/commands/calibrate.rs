//! `hetla calibrate`: time the tile kernels on each cluster class (and the links of the GPUs),
//! store the performance models, and (`--output`) write this machine's platform file.

use super::args::{GpuArgs, PlatformArgs, parse_positive, parse_samples, parse_spec};
use super::output::{check_outputs, progress_bar, save_models_or_warn};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hetla::{ClusterSpec, Plan, Topology};
use hetla_lab::{
    Calibration, Family, IN_RUN_TILES, PlatformModel, calibrate_links, in_run_steps, link_steps,
    record_in_run,
};
use hetla_runtime::Platform;
use serde::Serialize;

/// Factorisations `calibrate --output` times per cluster spec and tile size (fewer where
/// `--samples` asks for fewer executions).
pub const IN_RUN_FACTORISATIONS: usize = 5;

#[derive(Args)]
pub struct CalibrateArgs {
    /// Tile sizes to calibrate (default 512; with --scaling 256 512 1024 2048).
    #[arg(long, num_args = 1.., value_parser = parse_positive)]
    pub tile: Vec<usize>,
    /// The scaling probe instead of a calibration: for Cholesky's kernels (gemm, trsm, syrk,
    /// potrf), each tile and each cluster size 1, 2, 4, ... up to all cores, the rate per core of
    /// one cluster alone and of every cluster of that size busy at once, beside one core's rate (k
    /// x one core is what a cluster of k cores should reach). Stores no model; --json gives every
    /// sample's seconds too; with --output, the CPU platform file of this machine from the probe
    /// (each size's rates alone, loaded reductions from every cluster busy), which `simulate`,
    /// `sweep` and `tune` take as --platform.
    #[arg(long, conflicts_with_all = ["clusters"])]
    pub scaling: bool,
    /// Cluster specs whose classes to calibrate (default: auto, or none with --output).
    #[arg(long, num_args = 1.., value_parser = parse_spec)]
    pub clusters: Vec<ClusterSpec>,
    /// Also write the platform file (TOML) of this machine: calibrates clusters of each size 1, 2,
    /// 4, ... and all cores (as many of each size as fit; sizes in between are interpolated by
    /// `simulate`), then runs each factorisation (Cholesky, its inverse, LU, QR, LDL^T) 5 times
    /// (--samples times where that is fewer) on matrices of 4 to 8 tiles per side (order 4096 where
    /// it can) on each, and writes every kernel's rate inside those runs (its tasks' seconds over
    /// their flops).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Executions per kernel, tile size and class (1 to 100000); with --output, also the runs of
    /// each factorisation where this is below 5.
    #[arg(long, default_value_t = 5, value_parser = parse_samples)]
    pub samples: usize,
    /// The precision of the kernels timed: s, d, c or z. Models are kept per precision; with
    /// --output, a platform file of this machine that exists already keeps its rates of the other
    /// precisions.
    #[arg(long, default_value = "d")]
    pub precision: hetla::Precision,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// GPUs to calibrate (kernels and links), with the first cluster spec.
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl CalibrateArgs {
    /// The tiles asked for, or the default: 512 for a calibration, 256 to 2048 for the probe.
    pub fn tiles(&self) -> Vec<usize> {
        match (self.tile.is_empty(), self.scaling) {
            (false, _) => self.tile.clone(),
            (true, false) => vec![512],
            (true, true) => vec![256, 512, 1024, 2048],
        }
    }

    /// Factorisations of each kind `--output` times per platform and tile: 5, or `--samples` where
    /// that is fewer.
    pub fn in_run_factorisations(&self) -> usize {
        self.samples.min(IN_RUN_FACTORISATIONS)
    }

    /// The calibration of `ops` these options ask for (tiles, samples, precision).
    pub fn kernels(&self, ops: &[hetla::Op]) -> hetla::KernelCalibration {
        hetla::KernelCalibration {
            ops: ops.to_vec(),
            tiles: self.tiles(),
            samples: self.samples,
            precision: self.precision,
        }
    }
}

#[derive(Serialize)]
pub struct CalibrateReport {
    pub file: Option<String>,
    pub entries: usize,
    pub steps: usize,
    pub seconds: f64,
    /// The platform file written with --output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_file: Option<String>,
    /// With --output on a machine with GPUs: the rates at which 1, 2, 4, ... cores pack a tile for
    /// the staged copies (the platform file's `gpu.staging`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packing: Vec<hetla_lab::StagingRate>,
    /// With --scaling: the probe's rows (nothing else is calibrated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<ScalingReport>,
}

/// What the scaling probe measured.
#[derive(Serialize)]
pub struct ScalingReport {
    /// The kernels' library.
    pub backend: hetla::Backend,
    /// The precision.
    pub precision: hetla::Precision,
    /// Cores of the machine's topology.
    pub cores: usize,
    /// Timed samples per row and way (after one untimed).
    pub samples: usize,
    /// One row per kernel, tile and cluster size.
    pub rows: Vec<ScalingRow>,
}

/// One kernel at one tile on clusters of one size: its samples, and its rate per core alone and
/// with every cluster of that size busy, beside one core's rate alone (the size-1 row's median: k x
/// it is what a cluster of k cores should reach).
#[derive(Serialize)]
pub struct ScalingRow {
    #[serde(flatten)]
    pub timed: hetla::ScalingSample,
    /// Clusters of that size busy at once for the busy samples (as many as fit).
    pub clusters: usize,
    pub alone_rate: CoreRate,
    pub busy_rate: CoreRate,
    pub one_core_gflops: f64,
}

/// Gflop/s per core at the median sample and at the best, and the median's share of one core's rate
/// (1: the cluster keeps every core's rate).
#[derive(Serialize)]
pub struct CoreRate {
    pub gflops: f64,
    pub best_gflops: f64,
    pub share: f64,
}

impl CoreRate {
    /// The rate per core of `flops` on `cores` cores over `seconds`, against `one_core` Gflop/s.
    fn of(flops: f64, seconds: &[f64], cores: usize, one_core: f64) -> Self {
        let t = crate::peers::timings(&mut seconds.to_vec());
        let per_core = |s: f64| flops / s / 1e9 / cores as f64;
        Self {
            gflops: per_core(t.median),
            best_gflops: per_core(t.best),
            share: per_core(t.median) / one_core,
        }
    }
}

/// Cholesky's four kernels: what the probe times.
const SCALING_OPS: [hetla::Op; 4] = [
    hetla::Op::GemmNt,
    hetla::Op::Trsm,
    hetla::Op::Syrk,
    hetla::Op::Potrf,
];

/// `hetla calibrate --scaling`: the probe (see [`CalibrateArgs::scaling`]).
fn scaling_cmd(args: &CalibrateArgs) -> crate::Result<CalibrateReport> {
    let start = Instant::now();
    let cores = Topology::detect()?.cores().len();
    let sizes = hetla_lab::calibration_sizes(cores);
    let tiles = args.tiles();
    let steps = tiles.len() * SCALING_OPS.len();
    let bar = progress_bar(steps);
    bar.set_message("scaling probe");
    let samples = args
        .kernels(&SCALING_OPS)
        .scaling(args.platform.backend, &sizes, || bar.inc(1))?;
    bar.finish_and_clear();
    let platform_file = match &args.output {
        Some(path) => {
            write_scaling_platform(args, path, &samples, &sizes, &tiles)?;
            Some(path.display().to_string())
        }
        None => None,
    };
    let flops = |s: &hetla::ScalingSample| {
        s.op.flops(&vec![(s.tile, s.tile); s.op.operands()]) * args.precision.flop_factor()
    };
    let one_core = |s: &hetla::ScalingSample| {
        samples
            .iter()
            .find(|o| o.op == s.op && o.tile == s.tile && o.cores == 1)
            .map_or(f64::NAN, |o| {
                CoreRate::of(flops(o), &o.alone, 1, 1.0).gflops
            })
    };
    let rows = samples
        .iter()
        .map(|s| {
            let one = one_core(s);
            ScalingRow {
                alone_rate: CoreRate::of(flops(s), &s.alone, s.cores, one),
                busy_rate: CoreRate::of(flops(s), &s.busy, s.cores, one),
                one_core_gflops: one,
                clusters: cores / s.cores,
                timed: s.clone(),
            }
        })
        .collect();
    Ok(CalibrateReport {
        file: None,
        entries: 0,
        steps,
        seconds: start.elapsed().as_secs_f64(),
        platform_file,
        packing: Vec::new(),
        scaling: Some(ScalingReport {
            backend: args.platform.backend,
            precision: args.precision,
            cores,
            samples: args.samples,
            rows,
        }),
    })
}

/// Writes the CPU platform file of this machine from the probe's `samples` (atomically): each
/// kernel's rate on one core alone, each cluster size's speedup alone, and its loaded reduction
/// from every cluster of that size busy, all from the samples' medians.
fn write_scaling_platform(
    args: &CalibrateArgs,
    path: &std::path::Path,
    samples: &[hetla::ScalingSample],
    sizes: &[usize],
    tiles: &[usize],
) -> crate::Result<()> {
    let mut loaded = hetla_runtime::PerfModels::new();
    let mut alone = hetla_runtime::PerfModels::new();
    for s in samples {
        let key = hetla_runtime::KernelKey::square(s.op, s.tile).in_precision(args.precision);
        let class = hetla_runtime::ResourceClass::CpuCluster { cores: s.cores };
        for (models, seconds) in [(&mut alone, &s.alone), (&mut loaded, &s.busy)] {
            let mut median = hetla_runtime::Stats::default();
            median.record(crate::peers::timings(&mut seconds.clone()).median);
            models.merge(key.clone(), class.clone(), &median);
        }
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "this-machine".into());
    let description = format!(
        "the scaling probe (`hetla calibrate --scaling`) on {host}: Cholesky's {} kernels in {}, medians of {} samples each of one cluster of each size alone (rates, speedups) and of every cluster of that size busy at once (loaded reductions); CPU only, no task overhead measured",
        args.platform.backend, args.precision, args.samples
    );
    let model = PlatformModel::from_calibration(&Calibration {
        name: &host,
        description: &description,
        topology: &Topology::detect()?,
        models: &loaded,
        alone: Some(&alone),
        cluster_sizes: sizes,
        ops: &SCALING_OPS,
        tiles,
        precision: args.precision,
        task_overhead_us: 0.0,
    })?;
    hetla_runtime::write_atomic(path, model.to_toml().as_bytes())?;
    Ok(())
}

/// The probe's table: a row per kernel, tile and cluster size.
fn print_scaling(r: &ScalingReport) {
    println!(
        "scaling probe: {} kernels in {}, {} cores; Gflop/s per core, median of {} samples (best), and its share of one core's rate",
        r.backend, r.precision, r.cores, r.samples
    );
    println!(
        "  {:<6} {:>5} {:>5} {:>8}  {:>22}  {:>22}  {:>8}",
        "kernel",
        "tile",
        "cores",
        "clusters",
        "alone: per core (best)",
        "busy: per core (best)",
        "one core"
    );
    for row in &r.rows {
        println!(
            "  {:<6} {:>5} {:>5} {:>8}  {:>6.2} ({:>6.2}) {:>5.0}%  {:>6.2} ({:>6.2}) {:>5.0}%  {:>8.2}",
            row.timed.op.name(),
            row.timed.tile,
            row.timed.cores,
            row.clusters,
            row.alone_rate.gflops,
            row.alone_rate.best_gflops,
            100.0 * row.alone_rate.share,
            row.busy_rate.gflops,
            row.busy_rate.best_gflops,
            100.0 * row.busy_rate.share,
            row.one_core_gflops
        );
    }
}

pub fn calibrate_cmd(args: &CalibrateArgs) -> crate::Result<CalibrateReport> {
    if args.tile.contains(&0) || args.samples == 0 {
        return Err(crate::Error::InvalidOption {
            option: "calibrate",
            reason: "--tile sizes and --samples must be at least 1".into(),
        });
    }
    check_outputs(&[("--output", args.output.as_deref())], None)?;
    if args.scaling {
        scaling_cmd(args)
    } else {
        calibrate_models(args)
    }
}

/// `hetla calibrate` without `--scaling`: the models (and with `--output` the platform file).
fn calibrate_models(args: &CalibrateArgs) -> crate::Result<CalibrateReport> {
    let start = Instant::now();
    // The kernels of the factorisation the platform file describes (and its in-run
    // factorisations run): a Cholesky plan's.
    let ops = Plan::new(
        hetla::Algorithm::Cholesky { n: IN_RUN_TILES },
        1,
        args.precision,
    )?
    .ops();
    let topology = Topology::detect()?;
    let devices = args.gpu.gpus.open(args.gpu.gpu_memory)?;
    let cores = topology.cores().len();
    let sizes = hetla_lab::calibration_sizes(cores);
    let specs = specs_to_time(args, cores, &sizes);
    let platforms = platforms_to_time(args, &specs, devices)?;
    if platforms.is_empty() {
        return Err(crate::Error::InvalidOption {
            option: "clusters",
            reason: "nothing to calibrate: --clusters none and no GPU selected".into(),
        });
    }
    let alone = platforms_alone(args, &sizes)?;
    // Factorisations timed per platform for the platform file.
    let in_run = match args.output {
        Some(_) => args.in_run_factorisations(),
        None => 0,
    };
    let families = |p: &Platform| in_run_families(p, args.precision);
    let mut steps = 0;
    for p in &platforms {
        steps += link_steps(p)
            + args.kernels(&ops).steps(p)
            + in_run_steps(&args.tiles(), in_run) * families(p)?.len();
    }
    let steps = steps
        + alone
            .iter()
            .map(|p| args.kernels(&ops).steps(p))
            .sum::<usize>();
    let bar = progress_bar(steps);
    let mut file = None;
    let mut models = None;
    let mut measured_in_run = hetla_runtime::PerfModels::new();
    let mut gaps = Vec::new();
    for platform in &platforms {
        bar.set_message(match platform.devices().len() {
            0 => format!("clusters {}", platform.spec()),
            k => format!("{k} GPU(s)"),
        });
        // Each platform loaded the store when it was built: start from what the previous
        // specs of this command measured.
        if let Some(previous) = models.take() {
            platform.update_models(|m| *m = previous);
        }
        calibrate_links(platform, || bar.inc(1))?;
        args.kernels(&ops).run(platform, || bar.inc(1))?;
        // Every family's kernels inside its own factorisations; the runtime's gaps between tasks
        // from Cholesky's, as the platform files before the other families had them.
        for family in families(platform)? {
            let family_gaps = record_in_run(
                platform,
                family,
                &args.tiles(),
                in_run,
                args.precision,
                &mut measured_in_run,
                || bar.inc(1),
            )?;
            if family == Family::Cholesky {
                gaps.extend(family_gaps.gaps);
            }
        }
        file = save_models_or_warn(platform).or(file);
        models = Some(platform.models());
    }
    if !alone.is_empty() {
        bar.set_message("each cluster size alone");
    }
    let measured_alone = time_alone(args, &alone, &ops, &sizes, || bar.inc(1))?;
    bar.finish_and_clear();
    let models = models.unwrap_or_default();
    let (platform_file, packing) = match &args.output {
        Some(path) => {
            let written = PlatformFile {
                platforms: &platforms,
                models: &models,
                topology: &topology,
                in_run: &measured_in_run,
                alone: &measured_alone,
                sizes: &sizes,
                gaps: &gaps,
            };
            let packing = written.write(args, path)?;
            (Some(path.display().to_string()), packing)
        }
        None => (None, Vec::new()),
    };
    Ok(CalibrateReport {
        file: file.map(|p| p.display().to_string()),
        entries: models.len(),
        steps,
        seconds: start.elapsed().as_secs_f64(),
        platform_file,
        packing,
        scaling: None,
    })
}

/// The families a calibration for a platform file times inside their runs on `platform`: every
/// family on a CPU platform; on the GPUs alone those whose every kernel runs there, besides
/// Cholesky's (whose kernels are timed alone): their GPU rates come from those runs.
fn in_run_families(platform: &Platform, precision: hetla::Precision) -> crate::Result<Vec<Family>> {
    if platform.devices().is_empty() {
        return Ok(Family::ALL.to_vec());
    }
    let mut on_gpus = Vec::new();
    for family in Family::ALL {
        let ops = family.run_ops(precision, platform.devices().len())?;
        if family != Family::Cholesky && ops.iter().all(|op| op.runs_on_gpus()) {
            on_gpus.push(family);
        }
    }
    Ok(on_gpus)
}

/// What `hetla calibrate --output` measured, for the platform file.
struct PlatformFile<'a> {
    platforms: &'a [std::sync::Arc<Platform>],
    models: &'a hetla_runtime::PerfModels,
    topology: &'a Topology,
    /// The kernels' durations inside the factorisations (their rates there, on square tiles).
    in_run: &'a hetla_runtime::PerfModels,
    /// Each cluster size timed alone.
    alone: &'a hetla_runtime::PerfModels,
    sizes: &'a [usize],
    /// The gaps between the tasks of the single-cluster runs, in seconds.
    gaps: &'a [f64],
}

impl PlatformFile<'_> {
    /// Writes the platform file to `path` (atomically, keeping its other precisions' rates); the
    /// packing rates it measured on a machine with GPUs.
    fn write(
        &self,
        args: &CalibrateArgs,
        path: &std::path::Path,
    ) -> crate::Result<Vec<hetla_lab::StagingRate>> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "this-machine".into());
        let gpu = gpu_section(self.platforms, (self.models, self.in_run), args)?;
        let description = format!(
            "calibrated by `hetla calibrate` on {host}: {} kernels; rates of each cluster size alone (one cluster, the machine otherwise idle), loaded reductions (and the rates of the kernels of LU, QR, LDL^T and the inverse) from the tasks' rates inside {} factorisations of each kind in 4 to {IN_RUN_TILES} tiles per side with every cluster of that size busy; task overhead from the gaps between the tasks of the single-cluster runs",
            args.platform.backend,
            args.in_run_factorisations()
        );
        let gaps = self.gaps;
        let model = PlatformModel::from_calibration(&Calibration {
            name: &host,
            description: &description,
            topology: self.topology,
            models: self.in_run,
            alone: Some(self.alone),
            cluster_sizes: self.sizes,
            ops: &every_family_op(args.precision)?,
            tiles: &args.tiles(),
            precision: args.precision,
            task_overhead_us: gaps.iter().sum::<f64>() / gaps.len().max(1) as f64 * 1e6,
        })?;
        let mut packing = Vec::new();
        let model = match gpu {
            Some(mut gpu) => {
                // What the staged copies cost: packing on pools of each cluster size.
                packing = hetla_lab::calibrate_packing(self.topology, self.sizes)?;
                gpu.staging = packing.clone();
                model.with_gpu(gpu)?
            }
            None => model,
        };
        let model = keep_other_precisions(path, model, args.precision)?;
        hetla_runtime::write_atomic(path, model.to_toml().as_bytes())?;
        Ok(packing)
    }
}

/// The kernels of every family, which a platform file of this machine gives rates for.
fn every_family_op(precision: hetla::Precision) -> crate::Result<Vec<hetla::Op>> {
    let mut ops = Vec::new();
    for family in Family::ALL {
        ops.extend(family.ops(precision)?);
    }
    ops.sort_by_key(|op| op.name());
    ops.dedup();
    Ok(ops)
}

/// For the platform file, each cluster size also timed alone (one cluster, the rest of the machine
/// idle, models not stored): the file's rates are those, and its loaded reductions compare them
/// with the durations inside the factorisations. None without `--output`.
fn platforms_alone(args: &CalibrateArgs, sizes: &[usize]) -> crate::Result<Vec<Platform>> {
    if args.output.is_none() {
        return Ok(Vec::new());
    }
    let platforms = sizes
        .iter()
        .map(|&size| {
            let one = ClusterSpec::Grid { count: 1, size };
            Platform::with_store(&one, args.platform.backend, hetla_runtime::ModelStore::None)
        })
        .collect::<hetla_runtime::Result<_>>()?;
    Ok(platforms)
}

/// The cluster specs a calibration times: those asked for (`none`, the GPUs alone, is not one), and
/// for the platform file as many clusters of each size as fit, timed together as in a run; `auto`
/// when nothing was asked.
fn specs_to_time(args: &CalibrateArgs, cores: usize, sizes: &[usize]) -> Vec<ClusterSpec> {
    let mut specs = args.clusters.clone();
    specs.retain(|s| *s != ClusterSpec::None);
    if args.output.is_some() {
        specs.extend(sizes.iter().map(|&size| ClusterSpec::Grid {
            count: cores / size,
            size,
        }));
    } else if args.clusters.is_empty() {
        specs.push(ClusterSpec::Auto);
    }
    specs
}

/// The platforms a calibration times: the GPUs first, on their own (kernels and links), then each
/// cluster spec.
fn platforms_to_time(
    args: &CalibrateArgs,
    specs: &[ClusterSpec],
    devices: Vec<Arc<dyn hetla_runtime::Device>>,
) -> crate::Result<Vec<Arc<Platform>>> {
    let mut platforms = Vec::new();
    if !devices.is_empty() {
        let store = args.platform.store();
        let gpus =
            Platform::with_devices(&ClusterSpec::None, args.platform.backend, store, devices)?;
        platforms.push(Arc::new(gpus));
    }
    for spec in specs {
        let platform = Platform::with_store(spec, args.platform.backend, args.platform.store())?;
        platforms.push(Arc::new(platform));
    }
    Ok(platforms)
}

/// Each cluster size timed alone (one cluster, the rest of the machine idle, models not stored):
/// the rates of `ops` at every tile, by cluster size; `step` after each kernel timed.
fn time_alone(
    args: &CalibrateArgs,
    alone: &[Platform],
    ops: &[hetla::Op],
    sizes: &[usize],
    mut step: impl FnMut(),
) -> crate::Result<hetla_runtime::PerfModels> {
    let mut measured_alone = hetla_runtime::PerfModels::new();
    for platform in alone {
        args.kernels(ops).run(platform, &mut step)?;
        let timed = platform.models();
        for (&size, tile) in sizes
            .iter()
            .flat_map(|s| args.tiles().into_iter().map(move |t| (s, t)))
        {
            let class = hetla_runtime::ResourceClass::CpuCluster { cores: size };
            for &op in ops {
                let key = hetla_runtime::KernelKey::square(op, tile).in_precision(args.precision);
                if let Some(stats) = timed.get(&key, &class) {
                    measured_alone.merge(key, class.clone(), stats);
                }
            }
        }
    }
    Ok(measured_alone)
}

/// The platform file's GPU section from the GPU platform's (the first's) kernels and links, when it
/// has devices.
fn gpu_section(
    platforms: &[Arc<Platform>],
    (models, in_run): (&hetla_runtime::PerfModels, &hetla_runtime::PerfModels),
    args: &CalibrateArgs,
) -> crate::Result<Option<hetla_lab::GpuModel>> {
    platforms
        .first()
        .and_then(|p| Some(p).zip(p.devices().first()))
        .map(|(p, d)| {
            let mut gpu = hetla_lab::GpuModel::from_calibration(
                d.device.name(),
                p.devices().len(),
                d.device.budget(),
                (models, in_run),
                &args.tiles(),
                args.precision,
            )?;
            // On the device's host core, as in a run (and without pinning the caller).
            let largest = args.tiles().into_iter().max().unwrap_or(1);
            let (launch, pageable, lock, tensor) = std::thread::scope(|s| {
                s.spawn(|| {
                    hetla_clusters::pin_current_thread(d.core);
                    let launch = hetla_lab::measure_launch(&*d.device)?;
                    let pageable = hetla_lab::measure_pageable(&*d.device)?;
                    // A device that cannot lock host memory has no rate for it (0).
                    let lock = hetla_lab::measure_locking(&*d.device).unwrap_or(0.0);
                    let tensor = hetla_lab::measure_tensor(&*d.device, largest)?;
                    Ok((launch, pageable, lock, tensor))
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(hetla_kernels::KernelError::Gpu {
                        message: "the launch, copy, locking and tensor-core probes panicked".into(),
                    })
                })
            })?;
            gpu.launch_us = launch;
            gpu.pageable = Some(hetla_lab::PageableCopies {
                h2d: pageable.h2d,
                d2h: pageable.d2h,
            });
            gpu.lock_gb_per_s = lock;
            gpu.tensor = tensor;
            // Copies within the GPU's memory, from a block of it as a caller's matrix there; a
            // failure leaves them unmeasured (said) rather than the file unwritten.
            let mut block = faer::Mat::<f64>::zeros(4096, 2048);
            let copies =
                crate::device_buffers::in_gpu_memory(p, &mut [(block.as_mut(), false)], |on| {
                    hetla_lab::measure_device_copies(&*d.device, on[0].span())
                        .map_err(hetla::Error::Kernel)
                });
            gpu.device_copies = copies
                .inspect_err(|e| eprintln!("warning: copies within the GPU not measured: {e}"))
                .ok();
            Ok::<_, crate::Error>(gpu)
        })
        .transpose()
}

pub fn print_calibrate(r: &CalibrateReport) {
    if let Some(scaling) = &r.scaling {
        print_scaling(scaling);
        println!("probed in {:.1} s", r.seconds);
        if let Some(path) = &r.platform_file {
            println!("CPU platform file of this machine written to {path}");
        }
        return;
    }
    println!(
        "calibrated {} kernel executions in {:.1} s; {} model entries in {}",
        r.steps,
        r.seconds,
        r.entries,
        r.file.as_deref().unwrap_or("(not saved)")
    );
    if let Some(path) = &r.platform_file {
        println!("platform file of this machine written to {path}");
    }
    if !r.packing.is_empty() {
        let rates: Vec<String> = r
            .packing
            .iter()
            .map(|p| format!("{} core(s) {:.1} GB/s", p.cores, p.gb_per_s))
            .collect();
        println!("packing for staged copies: {}", rates.join(", "));
    }
}

/// `model` with the kernel rates of the other precisions than `precision` that the platform file at
/// `path` has, when it exists and describes the same machine (its cores and GPUs): calibrating s
/// after d into one file gives a file with both. A file that cannot be read as a platform model is
/// replaced, with a warning.
fn keep_other_precisions(
    path: &std::path::Path,
    mut model: PlatformModel,
    precision: hetla::Precision,
) -> crate::Result<PlatformModel> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(model);
    };
    let old = match PlatformModel::from_toml(&text) {
        Ok(old) => old,
        Err(e) => {
            eprintln!("warning: {} is replaced: {e}", path.display());
            return Ok(model);
        }
    };
    let same_gpus = old.gpu.as_ref().map(|g| (&g.name, g.count))
        == model.gpu.as_ref().map(|g| (&g.name, g.count));
    if old.cores() != model.cores() || !same_gpus {
        eprintln!(
            "warning: {} described another machine; it is replaced",
            path.display()
        );
        return Ok(model);
    }
    let kept = old
        .cpu
        .kernels
        .into_iter()
        .filter(|k| k.precision != precision);
    model.cpu.kernels.extend(kept);
    if let (Some(gpu), Some(old_gpu)) = (&mut model.gpu, old.gpu) {
        let kept = old_gpu
            .kernels
            .into_iter()
            .filter(|k| k.precision != precision);
        gpu.kernels.extend(kept);
    }
    // Checked as a platform file is.
    Ok(PlatformModel::from_toml(&model.to_toml())?)
}
