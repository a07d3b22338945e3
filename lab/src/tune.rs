//! The tuner: which cluster shape, tile and scheduler run a factorisation fastest on a machine,
//! found by simulating every combination on its model ([`tune`]).
//!
//! The machine is a [`PlatformModel`]: a preset, a platform file, or this machine's own file of
//! kernel rates measured inside runs of each family ([`this_machine`], which calibrates on first
//! use what a question needs and keeps it). For each candidate the family's plans are simulated
//! with the runtime's own schedulers on that model ([`crate::simulate`]'s executor, without noise)
//! and the candidates are ranked by the simulated makespan; the bounds of the same graphs are
//! computed for the few a report shows ([`with_bounds`]), not for all of them (the mixed bound's
//! linear programs cost more than the simulation).
//!
//! The space ([`TuneSpace::for_model`]):
//! - cluster shapes: every grid `k x c/k` of the c cores left after each GPU's host thread took
//!   one, so every core runs kernels (on sirocco with 4 GPUs: 1x20, 2x10, 4x5, 5x4, 10x2, 20x1);
//! - tiles: those the model has a rate for at every kernel of the family, cutting the matrix into
//!   [`MIN_TILES_PER_SIDE`] to [`MAX_TILES_PER_SIDE`] tiles per side (fewer leave no work to
//!   overlap the critical path with, more make graphs of tens of thousands of tasks whose
//!   simulation would dominate the tuner's own time);
//! - schedulers: MCT, eager and work stealing on CPU clusters; MCT and dmda (transfers priced) when
//!   GPUs take part.
//!
//! The simulation prices what the model knows: each kernel's rate at the tile on each cluster size
//! loaded, the runtime's cost per task, the links. It does not know what a real run adds (the
//! copies into and out of the tile store, the checks, a shared machine's noise), so the tuner's
//! times are predictions to verify (`hetla tune --verify`), and the ranking is what it offers.

use std::path::Path;

use hetla::{ClusterSpec, Precision, SchedulerKind};
use hetla_runtime::{PerfModels, Platform, SimOptions};
use serde::Serialize;

use crate::calibrate::{InRun, record_in_run};
use crate::model::{Calibration, Modelled, OutsideGraph, PlatformModel, calibration_sizes};
use crate::simulate::simulate_plan;
use crate::{Error, Result};
use hetla::Family;

/// Fewest tiles per side a candidate tile cuts the matrix into.
pub const MIN_TILES_PER_SIDE: usize = 4;

/// Most tiles per side a candidate tile cuts the matrix into.
pub const MAX_TILES_PER_SIDE: usize = 64;

/// Tile sizes [`this_machine`] calibrates (those cutting the question's matrix into 4 to 64 tiles
/// per side): the small ones LU's and LDL^T's block columns do best with, the large ones Cholesky's
/// tiles on many cores.
pub const THIS_MACHINE_TILES: [usize; 9] = [128, 192, 256, 384, 512, 768, 1024, 1536, 2048];

/// Runs per family, tile and cluster size [`this_machine`] takes its kernels' rates from.
pub const THIS_MACHINE_RUNS: usize = 3;

/// What to tune: a family's matrix on a modelled machine with a number of GPUs.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// The machine.
    pub model: &'a PlatformModel,
    /// The factorisation.
    pub family: Family,
    /// Rows (QR's; n for the others).
    pub m: usize,
    /// Order (columns).
    pub n: usize,
    /// Precision of the kernels.
    pub precision: Precision,
    /// GPUs taking part.
    pub gpus: usize,
}

/// The combinations a tuner tries.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSpace {
    /// Cluster shapes.
    pub clusters: Vec<ClusterSpec>,
    /// Tile sizes.
    pub tiles: Vec<usize>,
    /// Schedulers.
    pub schedulers: Vec<SchedulerKind>,
}

/// One configuration with its simulated makespan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Cluster spec.
    pub clusters: String,
    /// GPUs.
    pub gpus: usize,
    /// Tile size.
    pub tile: usize,
    /// Scheduler.
    #[serde(serialize_with = "scheduler_name")]
    pub scheduler: SchedulerKind,
    /// Simulated makespan of every plan of the family, one after the other, plus the time a run
    /// spends outside its graphs where the model measured it ([`OutsideGraph`]), milliseconds; 0
    /// when the model has no rate at the candidate's tile (then absent from JSON).
    #[serde(skip_serializing_if = "not_predicted")]
    pub predicted_ms: f64,
    /// The family's flops over the predicted makespan, Gflop/s (absent as `predicted_ms`).
    #[serde(skip_serializing_if = "not_predicted")]
    pub gflops: f64,
    /// The bounds of the same graphs with the same durations, summed over the family's plans (each
    /// runs after the previous one ends): computed for the candidates a report shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<CandidateBounds>,
}

/// Whether a candidate's figure is no prediction (the model has no rate at its tile).
fn not_predicted(x: &f64) -> bool {
    x.is_nan() || *x <= 0.0
}

/// A candidate's bounds ([`with_bounds`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CandidateBounds {
    /// Critical path, milliseconds.
    pub cp_ms: f64,
    /// Area bound, milliseconds.
    pub area_ms: f64,
    /// Mixed bound, milliseconds.
    pub mixed_ms: f64,
    /// Mixed bound over the predicted makespan.
    pub efficiency: f64,
}

impl TuneSpace {
    /// Every grid shape of the cores left to clusters, the tiles of [`TuneSpace::tiles_for`] and
    /// the schedulers for CPU clusters (MCT, eager, work stealing) or, with GPUs, MCT and dmda.
    pub fn for_model(q: &Question<'_>) -> Result<Self> {
        let cores = q.model.cores().saturating_sub(q.gpus);
        let clusters = (1..=cores)
            .filter(|k| cores.is_multiple_of(*k))
            .map(|count| ClusterSpec::Grid {
                count,
                size: cores / count,
            })
            .collect();
        let schedulers = if q.gpus > 0 {
            vec![SchedulerKind::Mct, SchedulerKind::Dmda]
        } else {
            vec![
                SchedulerKind::Mct,
                SchedulerKind::Eager,
                SchedulerKind::WorkStealing,
            ]
        };
        Ok(Self {
            clusters,
            tiles: Self::tiles_for(q)?,
            schedulers,
        })
    }

    /// The tiles the model has a rate for at every kernel of the family (on the CPU or, with GPUs,
    /// on either), that cut the matrix into [`MIN_TILES_PER_SIDE`] to [`MAX_TILES_PER_SIDE`] tiles
    /// per side; an error that says which tiles the model has when none does.
    pub fn tiles_for(q: &Question<'_>) -> Result<Vec<usize>> {
        let (ops, gpu_ops) = (
            q.family.run_ops(q.precision, q.gpus)?,
            q.family.gpu_ops(q.precision, q.gpus)?,
        );
        let side = q.m.min(q.n);
        let all = q.model.tiles();
        let tiles: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&b| {
                side >= MIN_TILES_PER_SIDE * b && q.m.max(q.n).div_ceil(b) <= MAX_TILES_PER_SIDE
            })
            .filter(|&b| (q.model.check_tile((&ops, &gpu_ops), b, q.precision, q.gpus)).is_ok())
            .collect();
        if tiles.is_empty() {
            return Err(Error::InvalidOption {
                option: "n",
                reason: format!(
                    "platform {} has rates of every {} kernel at no tile that cuts {}x{} into {MIN_TILES_PER_SIDE} to {MAX_TILES_PER_SIDE} tiles per side (its tiles: {all:?}); calibrate them (`hetla calibrate --tile ... --output`) or give another order",
                    q.model.name,
                    q.family.title(),
                    q.m,
                    q.n
                ),
            });
        }
        Ok(tiles)
    }
}

/// The simulated makespan of `q` in the configuration (`clusters`, `tile`, `scheduler`), without
/// its bounds.
pub fn predict(
    q: &Question<'_>,
    clusters: &ClusterSpec,
    tile: usize,
    scheduler: SchedulerKind,
) -> Result<Candidate> {
    let machine = Modelled::new(q.model, clusters, q.gpus).precision(q.precision);
    let platform = machine.sim_platform()?;
    let workers = platform.workers.len();
    let plans = q
        .family
        .plans(q.m, q.n, tile, q.precision, (workers, q.gpus))?;
    let options = SimOptions {
        run: hetla_runtime::RunOptions {
            scheduler,
            ..Default::default()
        },
        ..SimOptions::default()
    };
    let mut seconds = 0.0;
    let (ops, gpu_ops) = (
        q.family.run_ops(q.precision, q.gpus)?,
        q.family.gpu_ops(q.precision, q.gpus)?,
    );
    q.model
        .check_tile((&ops, &gpu_ops), tile, q.precision, q.gpus)?;
    for plan in &plans {
        seconds += simulate_plan(plan, &machine, &platform, &options)?.makespan;
    }
    // What the run adds outside its graphs on this machine (copies, checks), when measured.
    seconds += q
        .model
        .cpu
        .outside_graph
        .iter()
        .find(|o| (o.factorization, o.precision) == (q.family, q.precision))
        .map_or(0.0, |o| o.ns_per_entry * 1e-9 * (q.m * q.n) as f64);
    let flops: f64 = plans.iter().map(|p| p.flops()).sum();
    Ok(Candidate {
        clusters: clusters.to_string(),
        gpus: q.gpus,
        tile,
        scheduler,
        predicted_ms: seconds * 1e3,
        gflops: flops / seconds.max(f64::MIN_POSITIVE) / 1e9,
        bounds: None,
    })
}

/// Every candidate of `space` for `q`, fastest first (ties: the larger tile, then the fewer
/// clusters, then the order of `space`'s schedulers); combinations the model cannot run (a shape
/// that does not fit it) are left out.
pub fn tune(q: &Question<'_>, space: &TuneSpace) -> Result<Vec<Candidate>> {
    let mut ranked = Vec::new();
    let mut last_error = None;
    for clusters in &space.clusters {
        for &tile in &space.tiles {
            for &scheduler in &space.schedulers {
                match predict(q, clusters, tile, scheduler) {
                    Ok(c) => ranked.push((ranked.len(), c)),
                    Err(e) => last_error = Some(e),
                }
            }
        }
    }
    if ranked.is_empty() {
        return Err(last_error.unwrap_or_else(|| Error::InvalidOption {
            option: "clusters",
            reason: "the tuning space is empty".into(),
        }));
    }
    ranked.sort_by(|(i, x), (j, y)| {
        x.predicted_ms
            .total_cmp(&y.predicted_ms)
            .then(y.tile.cmp(&x.tile))
            .then(i.cmp(j))
    });
    Ok(ranked.into_iter().map(|(_, c)| c).collect())
}

/// `candidate` with the bounds of its graphs (see [`CandidateBounds`]).
pub fn with_bounds(q: &Question<'_>, mut candidate: Candidate) -> Result<Candidate> {
    let clusters: ClusterSpec = candidate
        .clusters
        .parse()
        .map_err(|e| Error::InvalidOption {
            option: "clusters",
            reason: format!("{e}"),
        })?;
    let machine = Modelled::new(q.model, &clusters, q.gpus).precision(q.precision);
    let workers = machine.sim_platform()?.workers.len();
    let (mut cp_ms, mut area_ms, mut mixed_ms) = (0.0, 0.0, 0.0);
    for plan in q
        .family
        .plans(q.m, q.n, candidate.tile, q.precision, (workers, q.gpus))?
    {
        let b = crate::simulate::bounds(&plan, &machine)?;
        cp_ms += b.cp_ms;
        area_ms += b.area_ms;
        mixed_ms += b.mixed_ms;
    }
    candidate.bounds = Some(CandidateBounds {
        cp_ms,
        area_ms,
        mixed_ms,
        efficiency: mixed_ms / candidate.predicted_ms.max(f64::MIN_POSITIVE),
    });
    Ok(candidate)
}

/// The platform file of this machine at `path`, with rates of every kernel of `family` in
/// `precision` at each of `tiles` on clusters of 1, 2, 4, ... and all cores: what the file lacks is
/// measured first (`family` run [`THIS_MACHINE_RUNS`] times per tile on each cluster size, every
/// cluster of the size busy, by [`record_in_run`]) and the file rewritten with it (atomically,
/// keeping what it had). `step` is called after each run; `steps` says how many runs that takes (0:
/// nothing to measure). A file that is not a platform model of this machine (another core count) is
/// replaced.
pub fn this_machine(
    path: &Path,
    backend: hetla::Backend,
    family: Family,
    tiles: &[usize],
    precision: Precision,
    steps: impl FnOnce(usize),
    mut step: impl FnMut(),
) -> Result<PlatformModel> {
    let topology = hetla::Topology::detect()?;
    let cores = topology.cores().len();
    let old = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| PlatformModel::from_toml(&text).ok())
        .filter(|m| m.cores() == cores);
    let ops = family.ops(precision)?;
    let missing: Vec<usize> = tiles
        .iter()
        .copied()
        .filter(|&b| {
            old.as_ref()
                .is_none_or(|m| m.check_tile((&ops, &ops), b, precision, 0).is_err())
        })
        .collect();
    let sizes = calibration_sizes(cores);
    steps(missing.len() * sizes.len() * THIS_MACHINE_RUNS);
    if missing.is_empty() {
        return old.ok_or_else(|| Error::InvalidOption {
            option: "tile",
            reason: "no tile to calibrate".into(),
        });
    }
    let mut in_run = PerfModels::new();
    let mut measured_runs = InRun::default();
    for &size in &sizes {
        let spec = ClusterSpec::Grid {
            count: cores / size,
            size,
        };
        let platform = std::sync::Arc::new(Platform::with_store(
            &spec,
            backend,
            hetla_runtime::ModelStore::None,
        )?);
        let done = record_in_run(
            &platform,
            family,
            &missing,
            THIS_MACHINE_RUNS,
            precision,
            &mut in_run,
            &mut step,
        )?;
        measured_runs.gaps.extend(done.gaps);
        measured_runs
            .outside_per_entry
            .extend(done.outside_per_entry);
    }
    let InRun {
        gaps,
        outside_per_entry,
    } = measured_runs;
    // The fastest run's, as the kernels' rates.
    let outside = OutsideGraph {
        factorization: family,
        precision,
        ns_per_entry: outside_per_entry
            .iter()
            .copied()
            .reduce(f64::min)
            .unwrap_or(0.0)
            * 1e9,
    };
    let description = format!(
        "this machine's kernels ({backend}) timed by `hetla tune` inside runs of each factorisation, every cluster of a size busy ({THIS_MACHINE_RUNS} runs of 4 to 8 tiles per side)"
    );
    let overhead_us = match old.as_ref() {
        Some(m) if gaps.is_empty() => m.cpu.task_overhead_us,
        _ => gaps.iter().sum::<f64>() / gaps.len().max(1) as f64 * 1e6,
    };
    let measured = PlatformModel::from_calibration(&Calibration {
        name: "this",
        description: &description,
        topology: &topology,
        models: &in_run,
        alone: None,
        cluster_sizes: &sizes,
        ops: &ops,
        tiles: &missing,
        precision,
        task_overhead_us: overhead_us,
    })?;
    let model = match old {
        Some(mut old) => {
            old.cpu.kernels.retain(|k| {
                !measured
                    .cpu
                    .kernels
                    .iter()
                    .any(|n| n.op == k.op && n.tile == k.tile && n.precision == k.precision)
            });
            old.cpu.kernels.extend(measured.cpu.kernels);
            old.cpu.task_overhead_us = overhead_us;
            old
        }
        None => measured,
    };
    let mut model = model;
    model
        .cpu
        .outside_graph
        .retain(|o| (o.factorization, o.precision) != (family, precision));
    model.cpu.outside_graph.push(outside);
    let model = PlatformModel::from_toml(&model.to_toml())?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| hetla_runtime::Error::io("create", dir, e))?;
    }
    hetla_runtime::write_atomic(path, model.to_toml().as_bytes())?;
    Ok(model)
}

fn scheduler_name<S: serde::Serializer>(
    kind: &SchedulerKind,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(kind.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(model: &PlatformModel, n: usize, gpus: usize) -> Question<'_> {
        Question {
            model,
            family: Family::Cholesky,
            m: n,
            n,
            precision: Precision::D,
            gpus,
        }
    }

    /// The best configuration of Cojean et al. (2016) on KNL for large matrices (34560: 4 clusters
    /// of 16 cores, tile 2880), found without being told.
    #[test]
    fn knl_picks_the_papers_four_clusters_of_sixteen_at_tile_2880() {
        let knl = PlatformModel::preset("knl").unwrap();
        let q = question(&knl, 34560, 0);
        let space = TuneSpace::for_model(&q).unwrap();
        assert_eq!(space.clusters.len(), 7, "1x64 ... 64x1");
        let ranked = tune(&q, &space).unwrap();
        assert_eq!(ranked.len(), 7 * space.tiles.len() * 3);
        assert_eq!(
            (ranked[0].clusters.as_str(), ranked[0].tile),
            ("4x16", 2880)
        );
        assert!(
            ranked
                .windows(2)
                .all(|w| w[0].predicted_ms <= w[1].predicted_ms)
        );
        let pick = with_bounds(&q, ranked[0].clone()).unwrap();
        let b = pick.bounds.unwrap();
        assert!(
            b.mixed_ms <= pick.predicted_ms && b.efficiency <= 1.0,
            "{b:?}"
        );
    }

    /// sirocco with its 4 GPUs: 20 cores left to clusters, the paper's 2 x 10 picked at a large
    /// order.
    #[test]
    fn sirocco_with_four_gpus_picks_two_clusters_of_ten() {
        let sirocco = PlatformModel::preset("sirocco").unwrap();
        let q = question(&sirocco, 38400, 4);
        let space = TuneSpace::for_model(&q).unwrap();
        let shapes: Vec<String> = space.clusters.iter().map(ToString::to_string).collect();
        assert_eq!(shapes, ["1x20", "2x10", "4x5", "5x4", "10x2", "20x1"]);
        assert_eq!(space.schedulers, [SchedulerKind::Mct, SchedulerKind::Dmda]);
        let ranked = tune(&q, &space).unwrap();
        assert_eq!(ranked[0].clusters, "2x10");
    }

    /// Beside GPUs QR and LDL^T are tuned as a run there executes them, in block columns: their GPU
    /// kernels (the reflectors' applications; Aasen's products and interchanges) are the ones the
    /// tiles are checked for (the tiled graphs', which keep every kernel on the clusters, left the
    /// GPUs idle and were refused).
    #[test]
    fn qr_and_ldlt_beside_gpus_are_tuned_in_block_columns() {
        let sirocco = PlatformModel::preset("sirocco").unwrap();
        for family in [Family::Qr, Family::Ldlt] {
            let q = Question {
                family,
                ..question(&sirocco, 9600, 4)
            };
            let space = TuneSpace::for_model(&q).unwrap();
            let spec = ClusterSpec::Grid { count: 2, size: 10 };
            let c = predict(&q, &spec, space.tiles[0], SchedulerKind::Mct).unwrap();
            assert!(c.predicted_ms > 0.0 && c.gpus == 4, "{family}: {c:?}");
            let plans = family.plans(9600, 9600, space.tiles[0], Precision::D, (20, 4));
            let name = plans.unwrap()[0].algorithm().name();
            assert!(name.ends_with("-columns"), "{family}: {name}");
        }
    }

    #[test]
    fn tiles_cut_the_matrix_into_four_to_sixty_four_and_none_is_an_error() {
        let knl = PlatformModel::preset("knl").unwrap();
        let tiles = TuneSpace::tiles_for(&question(&knl, 7680, 0)).unwrap();
        assert_eq!(tiles, [480, 960, 1440, 1920]);
        let e = TuneSpace::tiles_for(&question(&knl, 1000, 0)).unwrap_err();
        assert!(e.to_string().contains("its tiles"), "{e}");
    }

    /// The inverse's prediction is its two graphs' one after the other: more than Cholesky's alone,
    /// its flops n^3.
    #[test]
    fn the_inverse_adds_its_graph_to_the_factorisation() {
        let knl = PlatformModel::preset("knl").unwrap();
        let q = question(&knl, 9600, 0);
        let inverse = Question {
            family: Family::Inverse,
            ..q
        };
        let spec = ClusterSpec::Grid { count: 4, size: 16 };
        let c = predict(&q, &spec, 960, SchedulerKind::Mct).unwrap();
        let i = predict(&inverse, &spec, 960, SchedulerKind::Mct).unwrap();
        assert!(i.predicted_ms > c.predicted_ms * 1.5, "{i:?} {c:?}");
        let flops = Family::Inverse.flops(9600, 9600, Precision::D).unwrap();
        assert!((flops / 9600f64.powi(3) - 1.0).abs() < 1e-9);
    }

    /// This machine's file: measured at the tiles asked for, then read back without measuring; a
    /// file of another machine is replaced.
    #[test]
    fn this_machine_measures_what_its_file_lacks_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("platform-faer.toml");
        let mut planned = 0;
        let mut runs = 0;
        let ask = |planned: &mut usize, runs: &mut usize| {
            this_machine(
                &path,
                hetla::Backend::Faer,
                Family::Lu,
                &[128],
                Precision::D,
                |s| *planned = s,
                || *runs += 1,
            )
            .unwrap()
        };
        let model = ask(&mut planned, &mut runs);
        assert!(planned > 0 && runs == planned, "{planned} {runs}");
        let ops = Family::Lu.ops(Precision::D).unwrap();
        model
            .check_tile((&ops, &ops), 128, Precision::D, 0)
            .unwrap();
        runs = 0;
        let again = ask(&mut planned, &mut runs);
        assert_eq!((planned, runs), (0, 0));
        assert_eq!(again, model);
        // Another machine's file (other cores) is measured anew.
        let other = PlatformModel::preset("knl").unwrap();
        std::fs::write(&path, other.to_toml()).unwrap();
        ask(&mut planned, &mut runs);
        assert!(runs > 0);
    }
}
