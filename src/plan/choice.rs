//! The tile size of a factorisation, chosen from the platform's performance models instead of a
//! constant, and why ([`TileChoice`]). The factorisation is any plan constructor of the shape
//! `fn(n, tile, precision) -> Result<Plan>` ([`Algorithm::Cholesky`](crate::Algorithm::Cholesky)
//! today), in any precision (on a platform with devices, f64 only: the devices' kernels are f64).
//!
//! A matrix of order n <= 512 is one tile (direct kernel calls, no runtime). Otherwise the
//! candidates are the sizes of [`CANDIDATES`] (and [`DEVICE_CANDIDATES`] on a platform with
//! devices: one tile size for CPU clusters and GPUs, chosen from both's models) that cut n into 4
//! to 32 tiles per side. For each candidate b, every worker class needs the mean duration of the
//! factorisation's kernels (the four of Cholesky) on b x b tiles; the classes that lack one are
//! measured first with [`KernelCalibration`] ([`FIRST_USE_SAMPLES`] samples per kernel, every
//! worker of a class at once, as in a run), and the samples join the models (the CLI stores them
//! with the models after the run). Only calibration samples are compared
//! ([`PerfModels::calibration`]): the samples of runs depend on what ran beside them and would make
//! one candidate's model drift away from the others'. The prediction for b is the makespan of the
//! factorisation's graph of n in tiles of b simulated on this platform's workers with the same
//! scheduler as a run (`runtime::sim`, MCT), each task's duration its flops at its kernel's
//! measured rate on b x b tiles (a ragged edge tile at the same rate); on a platform with devices
//! the simulation has their memories, their links' models and their compute streams
//! ([`SimPlatform::of`]), so a GPU that runs several kernels at once shares its rate among them as
//! in `hetla simulate --streams`: where a step of large tiles leaves it idle (few tasks, a POTRF
//! and a TRSM that fill a fraction of it on the critical path) a smaller tile wins, where the
//! trailing updates fill it the larger one. Large tiles run the kernels near their peak, small ones
//! give the scheduler parallel work and a short critical path, and the simulation weighs both for
//! this backend, this cluster shape, these devices and this n (the bound alone is optimistic about
//! parallelism: it picked 4 x 4 tiles of 2048 at n = 8192 on two single-core clusters, which ran at
//! 0.84 of their bound). The chosen tile is the largest whose prediction is within [`TOLERANCE`] of
//! the smallest ([`TileChoice::tolerance`]): two predictions closer than the models can tell apart
//! would otherwise flip the choice from one calibration to the next, and of two equals the larger
//! tile has fewer tasks to schedule.
//!
//! On a platform with devices the choice then considers ending the chosen tile b in a tail of tiles
//! of b/2 ([`Plan::with_tail`]) over the last half or the last quarter of the tile rows
//! ([`tails`]), where b/2 is a candidate (its kernels timed with the others): each simulated as
//! above, every task at the rate of its own tile ([`Plan::rate_tile`]); the fastest is taken where
//! it beats b alone by more than [`TOLERANCE`] ([`TileChoice::tail`]). That is issue 72's smaller
//! tile on the critical path: the last steps of a large-tile Cholesky have few tasks beside their
//! POTRF and TRSMs, and a GPU that the first steps keep busy idles there. A platform of CPU
//! clusters alone considers no tail (its runs are as before).
//!
//! The choice is remembered per platform, factorisation and n for as long as the platform lives,
//! here and not in the platform (the runtime knows nothing of factorisations): a table of the
//! choices made, each with a weak reference to its platform, so that a dropped platform's entries
//! are dropped too and a new platform never inherits them.

use std::sync::{Arc, Mutex, Weak};

use hetla_factorizations::Tail;
use hetla_kernels::Precision;
use hetla_runtime::{KernelKey, PerfModels, Platform, ResourceClass, count_classes};
use hetla_runtime::{SimOptions, SimPlatform, SimWork, simulate};

use super::build::{Plan, TileChoice};
use crate::calibrate::KernelCalibration;
use hetla_kernels::Backend;

use crate::Result;

/// The tile size used when no platform's models can choose one (see
/// [`Cholesky::plan`](crate::Cholesky::plan)), from the order `n` and the backend.
///
/// Matrices up to 512 are one tile: a single kernel call on all cores beats any split. Beyond that,
/// in real precisions 512 for faer and 1024 for OpenBLAS (capped at n), the best tiles of a sweep
/// over b in {256, 384, 512, 768, 1024, n} at n = 2048 and 4096 on a 2-core machine. A complex tile
/// holds 4 times the flops of a real one of its side, so complex tiles are smaller: 384 and 768 (z
/// at n = 4096 on OpenBLAS: 70 Gflop/s at 768, 66 at 512, 55 at 1024).
pub(crate) fn default_tile_size(n: usize, backend: Backend, precision: Precision) -> usize {
    if n <= SINGLE_TILE_UP_TO {
        return n.max(1);
    }
    match (backend, precision.is_complex()) {
        (Backend::Faer, false) => 512,
        (Backend::Faer, true) => 384,
        (Backend::OpenBlas, false) => n.min(1024),
        (Backend::OpenBlas, true) => n.min(768),
    }
}

/// Tile sizes a choice considers.
const CANDIDATES: [usize; 7] = [256, 384, 512, 768, 1024, 1536, 2048];

/// Larger tile sizes a choice also considers on a platform with devices: a big GPU runs its kernels
/// near peak only on tiles of 2048 and more, and each task costs it a launch and copies.
const DEVICE_CANDIDATES: [usize; 2] = [3072, 4096];

/// Matrices up to this order are one tile.
pub(crate) const SINGLE_TILE_UP_TO: usize = 512;

/// Fewest whole tiles per side a candidate must cut the matrix into. A graph of 2 or 3 tiles per
/// side has its whole critical path in a few large kernels and no work beside them, and the
/// calibrated rates of such large tiles were optimistic: with 2 (n >= 2b) the choice took tile 2048
/// at n = 4096 on one 2-core cluster, which ran at 63.5 Gflop/s where tile 256 ran at 92-104.
const MIN_TILES_PER_SIDE: usize = 4;

/// Most tiles per side a candidate may cut the matrix into (the bound's graph grows as its cube: 32
/// tiles are 5984 tasks).
const MAX_TILES_PER_SIDE: usize = 32;

/// Calibration samples per kernel, class and candidate measured on first use.
const FIRST_USE_SAMPLES: usize = 3;

/// The relative gap between two candidates' predictions below which the choice takes the larger
/// tile. Widening it to twice the relative standard error of the calibrated GEMM means (3 samples
/// each on a shared VM) gave 25% at n = 4096 on one 2-core cluster and chose tile 2048 (63.5
/// Gflop/s) over the fastest prediction, 256 (92-107 Gflop/s in other runs): the simulation is
/// optimistic about large tiles, so the margin stays small.
const TOLERANCE: f64 = 0.03;

/// A plan constructor: order, tile, precision.
pub(crate) type Build = fn(usize, usize, Precision) -> Result<Plan>;

/// A choice's key besides its platform: the algorithm's name, the order and the precision.
type Key = (&'static str, usize, Precision);

/// The choices made, each with its platform (see the module documentation).
static CHOICES: Mutex<Vec<(Weak<Platform>, Key, TileChoice)>> = Mutex::new(Vec::new());

/// The choice made earlier for `key` on `platform`; forgets the dropped platforms'.
fn remembered(platform: &Arc<Platform>, key: Key) -> Option<TileChoice> {
    let mut choices = CHOICES.lock().unwrap_or_else(|e| e.into_inner());
    choices.retain(|(p, _, _)| p.strong_count() > 0);
    let here = Arc::downgrade(platform);
    choices
        .iter()
        .find(|(p, k, _)| *k == key && p.ptr_eq(&here))
        .map(|(_, _, c)| c.clone())
}

/// Remembers `choice` for `key` on `platform`.
fn remember(platform: &Arc<Platform>, key: Key, choice: TileChoice) {
    let mut choices = CHOICES.lock().unwrap_or_else(|e| e.into_inner());
    let here = Arc::downgrade(platform);
    choices.retain(|(p, k, _)| !(*k == key && p.ptr_eq(&here)));
    choices.push((here, key, choice));
}

/// The candidates for order `n`, with the larger ones when the platform has devices.
fn candidates(n: usize, devices: bool) -> Vec<usize> {
    let larger: &[usize] = if devices { &DEVICE_CANDIDATES } else { &[] };
    CANDIDATES
        .iter()
        .chain(larger)
        .copied()
        .filter(|&b| MIN_TILES_PER_SIDE * b <= n && n.div_ceil(b) <= MAX_TILES_PER_SIDE)
        .collect()
}

/// The calibrations' statistics of `op` on b x b tiles in `precision` on `class`, when there are
/// some.
fn calibrated(
    models: &PerfModels,
    op: hetla_kernels::Op,
    b: usize,
    precision: Precision,
    class: &ResourceClass,
) -> Option<hetla_runtime::Stats> {
    let key = KernelKey::square(op, b).in_precision(precision);
    models
        .calibration(&key, class)
        .filter(|s| s.samples > 0)
        .copied()
}

/// The tile size for the factorisation `build` makes of order `n` in `precision` on `platform` (see
/// the module doc): may calibrate the candidates the models lack, and remembers its answer.
pub(crate) fn choose_tile(
    platform: &Arc<Platform>,
    n: usize,
    precision: Precision,
    build: Build,
) -> Result<TileChoice> {
    if n <= SINGLE_TILE_UP_TO {
        return Ok(TileChoice::given(n.max(1)));
    }
    // The kernels of the factorisation, which the candidates' predictions need: a graph of 6 x 6
    // tiles has every one (Cholesky's panel inverse needs 4 solves below its panel).
    let small = build(6, 1, precision)?;
    let key = (small.algorithm().name(), n, precision);
    if let Some(choice) = remembered(platform, key) {
        return Ok(choice);
    }
    let candidates = candidates(n, !platform.devices().is_empty());
    let ops = small.ops();
    let classes = count_classes(platform.workers().iter().map(|w| w.class.clone()));
    let missing: Vec<usize> = {
        let models = platform.models();
        candidates
            .iter()
            .copied()
            .filter(|&b| {
                classes.iter().any(|(c, _)| {
                    ops.iter()
                        .any(|&op| calibrated(&models, op, b, precision, c).is_none())
                })
            })
            .collect()
    };
    if !missing.is_empty() {
        // The platform's pools time the kernels: no run may share them meanwhile.
        let _busy = platform.lock_run();
        let calibration = KernelCalibration {
            ops,
            tiles: missing.clone(),
            samples: FIRST_USE_SAMPLES,
            precision,
        };
        calibration.run(platform, || {})?;
    }
    let models = platform.models();
    let mut predictions = Vec::with_capacity(candidates.len());
    for &b in &candidates {
        let plan = build(n, b, precision)?;
        let predicted_ms = predicted_ms(platform, &plan, &calibrated_duration(&models, &plan))?;
        predictions.push((b, predicted_ms));
    }
    let tolerance = TOLERANCE;
    let fastest = predictions
        .iter()
        .min_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
        .copied();
    let tile = match fastest {
        Some((_, best)) => predictions
            .iter()
            .filter(|&&(_, ms)| ms <= best * (1.0 + tolerance))
            .map(|&(b, _)| b)
            .max()
            .unwrap_or_default(),
        None => default_tile_size(n, platform.backend(), precision),
    };
    // A tail of smaller tiles after the tile, where devices may be left idle by the last steps.
    let (tail, tail_predictions) = match !platform.devices().is_empty()
        && candidates.contains(&(tile / 2))
    {
        true => {
            let plan = build(n, tile, precision)?;
            let alone = (predictions.iter().find(|p| p.0 == tile)).map_or(f64::INFINITY, |p| p.1);
            choose_tail(platform, &plan, alone, |plan, key, class| {
                calibrated_duration(&models, plan)(key, class)
            })?
        }
        false => (None, Vec::new()),
    };
    drop(models);
    let choice = TileChoice {
        tile,
        fastest: fastest.map(|(b, _)| b),
        tolerance,
        predictions,
        calibrated: missing,
        tail,
        tail_predictions,
    };
    remember(platform, key, choice.clone());
    Ok(choice)
}

/// The tails a choice of tile `tile` at order `n` considers: tiles of half the side over the last
/// half, then over the last quarter, of the tile rows (those that fit: [`Plan::with_tail`]).
fn tails(n: usize, tile: usize) -> Vec<Tail> {
    let rows = n.div_ceil(tile);
    let mut tails: Vec<Tail> = [rows / 2, rows - rows / 4]
        .into_iter()
        .filter(|&head| head > 0 && head < rows)
        .map(|head| Tail {
            from: head * tile,
            tile: tile / 2,
        })
        .collect();
    tails.dedup();
    tails
}

/// A tail chosen (or none) and every tail's predicted makespan in milliseconds.
type TailChoice = (Option<Tail>, Vec<(Tail, f64)>);

/// The tail of [`tails`] that `plan` (of the chosen tile, predicted `alone` ms without one) runs
/// fastest with on `platform`, each task lasting what `duration` gives (for the tailed plan), if
/// faster than `alone` by more than [`TOLERANCE`]; and every tail's prediction.
fn choose_tail(
    platform: &Platform,
    plan: &Plan,
    alone: f64,
    duration: impl Fn(&Plan, &KernelKey, &ResourceClass) -> Option<f64>,
) -> Result<TailChoice> {
    let n = plan.algorithm().order();
    let mut predictions = Vec::new();
    for tail in tails(n, plan.tile()) {
        let Ok(plan) = plan.with_tail(tail) else {
            continue;
        };
        let ms = predicted_ms(platform, &plan, &|key, class| duration(&plan, key, class))?;
        predictions.push((tail, ms));
    }
    let tail = (predictions.iter())
        .filter(|p| p.1 < alone * (1.0 - TOLERANCE))
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .map(|p| p.0);
    Ok((tail, predictions))
}

/// Each task's duration on a class from the calibrations: the seconds per flop of its kernel on b x
/// b tiles (b the tile whose rates time it, [`Plan::rate_tile`]), times its flops.
fn calibrated_duration<'m>(
    models: &'m PerfModels,
    plan: &'m Plan,
) -> impl Fn(&KernelKey, &ResourceClass) -> Option<f64> + 'm {
    let precision = plan.precision();
    move |key, class| {
        let b = plan.rate_tile(key);
        let square = KernelKey::square(key.op, b).in_precision(precision);
        let stats = calibrated(models, key.op, b, precision, class)?;
        Some(stats.mean / square.leading_flops() * key.leading_flops())
    }
}

/// The makespan of `plan` simulated on `platform` as the simulator models it ([`SimPlatform::of`]:
/// its workers, devices, links and compute streams), each task lasting `duration`, in milliseconds.
fn predicted_ms(
    platform: &Platform,
    plan: &Plan,
    duration: &dyn Fn(&KernelKey, &ResourceClass) -> Option<f64>,
) -> Result<f64> {
    let sim = SimPlatform::of(platform);
    let tile_bytes = |t| plan.tile_bytes(t);
    let work = SimWork {
        graph: plan.graph(),
        keys: plan.keys(),
        tile_bytes: &tile_bytes,
        duration,
    };
    Ok(simulate(&sim, &work, &SimOptions::default())?.makespan * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_add_the_large_tiles_where_they_cut_the_matrix_in_four_or_more() {
        assert_eq!(candidates(32768, false), vec![1024, 1536, 2048]);
        assert_eq!(candidates(32768, true), vec![1024, 1536, 2048, 3072, 4096]);
        assert_eq!(candidates(7000, true), vec![256, 384, 512, 768, 1024, 1536]);
        assert!(candidates(1000, true).is_empty());
        assert_eq!(candidates(2100, false), vec![256, 384, 512]);
    }

    /// A platform of one emulated device of `streams` compute streams, no clusters, its link
    /// modelled at `gb_per_s` each way.
    fn device_platform(streams: usize, gb_per_s: f64) -> Platform {
        use hetla_runtime::{LinkModel, LinkRate};
        let device = hetla_runtime::EmulatedDevice::new(usize::MAX).with_compute_streams(streams);
        let name = hetla_runtime::Device::name(&device).to_owned();
        let spec = hetla_clusters::ClusterSpec::None;
        let devices: Vec<Arc<dyn hetla_runtime::Device>> = vec![Arc::new(device)];
        let platform = Platform::with_devices(
            &spec,
            Backend::Faer,
            hetla_runtime::ModelStore::None,
            devices,
        )
        .unwrap();
        let rate = LinkRate {
            latency_us: 10.0,
            gb_per_s,
        };
        platform.update_models(|m| {
            m.set_link(
                &name,
                LinkModel {
                    h2d: rate,
                    d2h: rate,
                    p2p: None,
                    host_shared_by: 1,
                },
            )
        });
        platform
    }

    #[test]
    fn a_tail_of_smaller_tiles_is_chosen_where_the_simulation_says_it_shortens_the_run() {
        use hetla_kernels::Op;
        // The H100's measured rates at 2048 (Gflop/s); at 1024 the same (`fast`) or a tenth.
        let rate = |op: Op, tile: usize, fast: bool| {
            let at_2048 = match op {
                Op::Potrf => 3095.0,
                Op::Trsm => 9272.0,
                Op::Syrk => 48758.0,
                _ => 54537.0,
            };
            match (tile, fast) {
                (2048, _) | (_, true) => at_2048,
                _ => at_2048 / 10.0,
            }
        };
        let platform = device_platform(3, 54.0);
        let plan = crate::cholesky::plan::factor(8192, 2048, Precision::D).unwrap();
        for fast in [true, false] {
            let duration = |plan: &Plan, key: &KernelKey, _: &ResourceClass| {
                Some(key.leading_flops() / (rate(key.op, plan.rate_tile(key), fast) * 1e9))
            };
            let alone = predicted_ms(&platform, &plan, &|k, c| duration(&plan, k, c)).unwrap();
            let (tail, predictions) = choose_tail(&platform, &plan, alone, duration).unwrap();
            // The last half and the last quarter of the tile rows, in tiles of 1024.
            let tails: Vec<Tail> = predictions.iter().map(|p| p.0).collect();
            let at = |from| Tail { from, tile: 1024 };
            assert_eq!(tails, [at(4096), at(6144)]);
            if fast {
                // 4 x 4 tiles of 2048 are their critical path; smaller ones at the end shorten it.
                let best = predictions
                    .iter()
                    .map(|p| p.1)
                    .fold(f64::INFINITY, f64::min);
                assert!(best < alone * 0.9, "{predictions:?} against {alone} ms");
                let chosen = predictions.iter().find(|p| Some(p.0) == tail).unwrap();
                assert_eq!(chosen.1, best);
            } else {
                assert_eq!(tail, None, "{predictions:?} against {alone} ms");
                assert!(predictions.iter().all(|p| p.1 > alone), "{predictions:?}");
            }
        }
    }

    #[test]
    fn a_device_platform_predicts_by_simulating_its_streams_and_a_smaller_tile_fills_them() {
        use hetla_kernels::Op;
        // A GPU as the leases timed an H100's kernels at tile 2048 (Gflop/s): the panel's
        // kernels fill a fraction of it.
        let rate = |op: Op| match op {
            Op::Potrf => 3095.0,
            Op::Trsm => 9272.0,
            Op::Syrk => 48758.0,
            _ => 54537.0,
        };
        let duration =
            |key: &KernelKey, _: &ResourceClass| Some(key.leading_flops() / (rate(key.op) * 1e9));
        let n = 8192;
        let predict = |streams: usize, b: usize| {
            let plan = crate::cholesky::plan::factor(n, b, Precision::D).unwrap();
            let platform = device_platform(streams, 54.0);
            let ms = predicted_ms(&platform, &plan, &duration).unwrap();
            let classes = count_classes(platform.workers().iter().map(|w| w.class.clone()));
            let path = plan.bounds(&classes, duration).unwrap().cp_ms;
            (ms, path)
        };
        let mut on_three = Vec::new();
        for b in [1024, 2048] {
            let (one, path) = predict(1, b);
            let (three, _) = predict(3, b);
            on_three.push(three);
            // Never faster than the critical path; kernels at once on three streams shorten the
            // run (the uploads from host memory are in both).
            assert!(
                three >= path * (1.0 - 1e-9),
                "tile {b}: {three} ms, path {path} ms"
            );
            assert!(
                three < one * 0.95,
                "tile {b}: 3 streams {three} ms, 1 stream {one} ms"
            );
        }
        // At the same rates, tiles of 1024 keep the GPU busier than 4 x 4 tiles of 2048, whose
        // critical path (7.0 ms) is most of the run: the simulation prefers them.
        assert!(on_three[0] < on_three[1], "{on_three:?}");
    }
}
