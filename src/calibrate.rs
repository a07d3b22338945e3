//! Calibration ahead of runs: times each tile kernel on each class of worker of a platform
//! and records the samples in its performance models.
//!
//! Runs are otherwise calibrated on the fly (MCT sends uncalibrated kernels to be
//! measured), which costs the first run of a new configuration some balance; `hetla
//! calibrate` fills the models beforehand.
//!
//! Kernels are timed in the conditions of a run, not of a microbenchmark, so that models
//! (and the platform files simulations use) predict runs:
//! - every worker of a class runs the kernel at the same time (a barrier starts each
//!   sample), because in a run the clusters share the caches and the memory bandwidth;
//!   timing one core alone on an idle machine overestimates a busy machine by 20% and more;
//! - the tiles read are views into a matrix larger than the caches, with its leading
//!   dimension, a different tile each sample, as a run reads tiles another worker wrote
//!   long before. The written tile is refreshed before each sample (outside the timing) so
//!   that values stay in range.
//!
//! On a device worker the operands are uploaded before each sample and the copies waited
//! for, so that a sample times the kernel alone. [`calibrate_links`] measures each
//! device's link: copies of 64 KiB to 64 MiB each way, a least-squares fit of latency plus
//! bytes over bandwidth to their medians, stored per GPU model with the kernel models.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Barrier;
use std::time::Instant;

use faer::{Mat, MatRef};
use hetla_kernels::{KernelError, Op};
use hetla_kernels::{Precision, Scalar, c32, c64};

use crate::model::{LinkModel, LinkRate};
use crate::{Result, matgen};
use hetla_runtime::{Device, Handle, KernelKey, PerfModels, Platform};

/// The operations of the tiled Cholesky, which calibration measures.
pub const CHOLESKY_OPS: [Op; 4] = [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt];

/// Bytes of the matrix each worker reads its tiles from: larger than a last-level cache.
const READ_MATRIX_BYTES: usize = 64 << 20;

/// At most this many bytes of read matrices for all the workers of a class together.
const READ_MATRICES_BUDGET: usize = 2 << 30;

/// Number of kernel executions [`calibrate`] records.
pub fn calibration_steps(platform: &Platform, tiles: &[usize], samples: usize) -> usize {
    distinct_classes(platform).len() * tiles.len() * CHOLESKY_OPS.len() * samples
}

/// The workers of each class, class by class.
fn distinct_classes(platform: &Platform) -> Vec<Vec<usize>> {
    let workers = platform.workers();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for w in 0..workers.len() {
        match groups
            .iter_mut()
            .find(|g| workers[g[0]].class == workers[w].class)
        {
            Some(g) => g.push(w),
            None => groups.push(vec![w]),
        }
    }
    groups
}

/// Tiles per side of the read matrix for tiles of `b`: enough to exceed the caches, fewer
/// when `members` such matrices would not fit the budget.
fn read_tiles_per_side(b: usize, members: usize, element: usize) -> usize {
    let tile_bytes = b * b * element;
    let mut k = (READ_MATRIX_BYTES as f64 / tile_bytes as f64)
        .sqrt()
        .ceil()
        .clamp(1.0, 8.0) as usize;
    while k > 1 && members * k * k * tile_bytes > READ_MATRICES_BUDGET {
        k -= 1;
    }
    k
}

/// One worker's operands: a `k b x k b` SPD matrix to read tiles from, and the tile written.
struct Operands<T: Scalar> {
    read: Mat<T>,
    b: usize,
    k: usize,
    out: Mat<T>,
    fresh: Mat<T>,
}

impl<T: Scalar> Operands<T> {
    fn new(b: usize, k: usize, seed: u64) -> Self {
        Self {
            read: matgen::random_hpd::<T>(k * b, seed),
            b,
            k,
            out: Mat::zeros(b, b),
            fresh: Mat::from_fn(b, b, |i, j| {
                T::from_f64(((i * 13 + j * 7) % 17) as f64 / 17.0)
            }),
        }
    }

    /// Refreshes the written tile for sample `s` of `op`: a copy of an SPD tile for
    /// POTRF, the same values every time for the others.
    fn refresh(&mut self, op: Op, s: usize) {
        if op == Op::Potrf {
            let d = diagonal(&self.read, self.b, self.k, s).to_owned();
            self.out.copy_from(&d);
        } else {
            self.out.copy_from(&self.fresh);
        }
    }
}

/// Tile `index` (column-major over the k x k tiles) of `read`.
fn tile<T: Scalar>(read: &Mat<T>, b: usize, k: usize, index: usize) -> MatRef<'_, T> {
    let (i, j) = (index % k, (index / k) % k);
    read.as_ref().submatrix(i * b, j * b, b, b)
}

/// A diagonal tile of `read`: symmetric positive definite.
fn diagonal<T: Scalar>(read: &Mat<T>, b: usize, k: usize, index: usize) -> MatRef<'_, T> {
    tile(read, b, k, (index % k) * (k + 1))
}

/// The tiles sample `s` of `op` reads.
fn reads<T: Scalar>(read: &Mat<T>, b: usize, k: usize, op: Op, s: usize) -> Vec<MatRef<'_, T>> {
    match op {
        Op::Potrf => vec![],
        Op::Trsm => vec![diagonal(read, b, k, s)],
        Op::Syrk => vec![tile(read, b, k, s)],
        _ => vec![tile(read, b, k, s), tile(read, b, k, s + 1)],
    }
}

/// Where a member of a class runs its kernels.
#[derive(Clone, Copy)]
enum Member<'a> {
    /// A CPU cluster (the caller runs inside its pool), with its backend and parallelism.
    Cluster(hetla_kernels::Backend, hetla_kernels::Par),
    /// A device: the operands are its replicas 0 (written) and 1, 2 (read).
    Device(&'a dyn Device),
}

/// Uploads a sample's operands to a device (the written tile as handle 0, the reads as
/// 1, 2) and waits for them.
fn stage<T: Scalar>(
    device: &dyn Device,
    reads: &[MatRef<'_, T>],
    out: MatRef<'_, T>,
) -> std::result::Result<(), KernelError> {
    device.upload(Handle(0), out.into())?;
    for (i, &tile) in reads.iter().enumerate() {
        device.upload(Handle(i + 1), tile.into())?;
    }
    device.wait_uploads()
}

/// Times `samples` executions of `op` on one member's operands, each started together
/// with the other members' behind `barrier`. Every member reaches every barrier, also
/// after a failure, so that no member waits forever.
fn time_samples<T: Scalar>(
    ops: &mut Operands<T>,
    op: Op,
    samples: usize,
    barrier: &Barrier,
    member: Member<'_>,
) -> std::result::Result<Vec<f64>, KernelError> {
    let mut seconds = Vec::with_capacity(samples);
    let mut failure = None;
    let read_handles: Vec<Handle> = (1..=op.reads()).map(Handle).collect();
    for s in 0..samples {
        ops.refresh(op, s);
        let reads = reads(&ops.read, ops.b, ops.k, op, s);
        let staged = match member {
            Member::Device(device) if failure.is_none() => stage(device, &reads, ops.out.as_ref()),
            _ => Ok(()),
        };
        barrier.wait();
        if failure.is_some() {
            continue;
        }
        if let Err(e) = staged {
            failure = Some(e);
            continue;
        }
        let out = ops.out.as_mut();
        // A cluster's kernel is timed on the host; a device's by the device (the kernel
        // alone).
        let run = || match member {
            Member::Cluster(backend, par) => {
                let start = Instant::now();
                backend
                    .run(op, &reads, out, par)
                    .map(|()| start.elapsed().as_secs_f64())
            }
            Member::Device(device) => device.run(op, &read_handles, Handle(0)),
        };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(time)) => seconds.push(time),
            Ok(Err(e)) => failure = Some(e),
            Err(_) => {
                failure = Some(KernelError::Operands {
                    op,
                    reason: "the kernel panicked during calibration".into(),
                })
            }
        }
    }
    failure.map_or(Ok(seconds), Err)
}

/// Times every Cholesky kernel `samples` times on b x b tiles for each b in `tiles`, in
/// `precision`, on all the workers of each class at once, and records the durations
/// (keyed by precision); `step` is called once per recorded sample.
pub fn calibrate(
    platform: &Platform,
    tiles: &[usize],
    samples: usize,
    precision: Precision,
    step: impl FnMut(),
) -> Result<()> {
    match precision {
        Precision::S => calibrate_in::<f32>(platform, tiles, samples, step),
        Precision::D => calibrate_in::<f64>(platform, tiles, samples, step),
        Precision::C => calibrate_in::<c32>(platform, tiles, samples, step),
        Precision::Z => calibrate_in::<c64>(platform, tiles, samples, step),
    }
}

fn calibrate_in<T: Scalar>(
    platform: &Platform,
    tiles: &[usize],
    samples: usize,
    mut step: impl FnMut(),
) -> Result<()> {
    let backend = platform.backend();
    let classes = distinct_classes(platform);
    // Each worker of a class times its kernels on at least three tiles of its own.
    let most = classes.iter().map(Vec::len).max().unwrap_or(0) as u128;
    for &b in tiles {
        if b == 0 {
            return Err(crate::Error::ZeroTileSize);
        }
        crate::limits::check_memory(
            &format!("calibrating tiles of {b}"),
            (b as u128 * b as u128).saturating_mul(3 * most * size_of::<T>() as u128),
        )?;
    }
    for members in classes {
        let class = platform.workers()[members[0]].class.clone();
        for &b in tiles {
            let k = read_tiles_per_side(b, members.len(), size_of::<T>());
            let mut operands: Vec<Operands<T>> = (0..members.len())
                .map(|i| Operands::new(b, k, (b + i) as u64))
                .collect();
            for op in CHOLESKY_OPS {
                let key = KernelKey::square(op, b).in_precision(T::PRECISION);
                let barrier = Barrier::new(members.len());
                let timings: Vec<std::result::Result<Vec<f64>, KernelError>> =
                    std::thread::scope(|scope| {
                        let handles: Vec<_> = members
                            .iter()
                            .zip(operands.iter_mut())
                            .map(|(&w, ops)| {
                                let barrier = &barrier;
                                let clusters = platform.clusters();
                                match clusters.get(w) {
                                    Some(cluster) => {
                                        let par = hetla_kernels::par_for(cluster.size());
                                        let member = Member::Cluster(backend, par);
                                        scope.spawn(move || {
                                            cluster.pool().install(|| {
                                                time_samples(ops, op, samples, barrier, member)
                                            })
                                        })
                                    }
                                    None => {
                                        let worker = &platform.devices()[w - clusters.len()];
                                        scope.spawn(move || {
                                            hetla_clusters::pin_current_thread(worker.core);
                                            let member = Member::Device(&*worker.device);
                                            let timed =
                                                time_samples(ops, op, samples, barrier, member);
                                            worker.device.clear();
                                            timed
                                        })
                                    }
                                }
                            })
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| h.join().unwrap_or_else(|_| Ok(Vec::new())))
                            .collect()
                    });
                for seconds in timings {
                    let seconds = seconds?;
                    platform.update_models(|m| {
                        for &t in &seconds {
                            m.record(&key, &class, t);
                        }
                    });
                }
                for _ in 0..samples {
                    step();
                }
            }
        }
    }
    Ok(())
}

/// Copy sizes [`calibrate_links`] times: 64 KiB to 64 MiB, doubling.
const LINK_BYTES: [usize; 11] = [
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    32 << 20,
    64 << 20,
];

/// Copies of each size and direction [`calibrate_links`] takes the median of.
const LINK_SAMPLES: usize = 5;

/// Number of copies [`calibrate_links`] makes.
pub fn link_steps(platform: &Platform) -> usize {
    platform.devices().len() * LINK_BYTES.len()
}

/// Latency and bandwidth fitted (least squares) to (bytes, seconds) points; `None` when
/// the fit has no positive slope.
fn fit_link(points: &[(f64, f64)]) -> Option<LinkRate> {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let cov: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = cov / var;
    (slope > 0.0 && slope.is_finite()).then(|| LinkRate {
        latency_us: ((my - slope * mx) * 1e6).max(0.0),
        gb_per_s: 1.0 / slope / 1e9,
    })
}

/// Times copies of [`LINK_BYTES`] to and from `device` and fits its link model.
fn measure_link(
    device: &dyn Device,
    step: &mut (impl FnMut() + Send),
) -> std::result::Result<LinkModel, KernelError> {
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for bytes in LINK_BYTES {
        // A square-ish tile of `bytes`.
        let rows = 1 << ((bytes / size_of::<f64>()).ilog2() / 2);
        let mut host =
            Mat::<f64>::from_fn(rows, bytes / size_of::<f64>() / rows, |i, j| (i + j) as f64);
        let (mut t_up, mut t_down) = (Vec::new(), Vec::new());
        for _ in 0..LINK_SAMPLES {
            let start = Instant::now();
            device.upload(Handle(0), host.as_ref().into())?;
            device.wait_uploads()?;
            t_up.push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            device.download(Handle(0), host.as_mut().into())?;
            t_down.push(start.elapsed().as_secs_f64());
        }
        device.clear();
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        up.push((bytes as f64, median(&mut t_up)));
        down.push((bytes as f64, median(&mut t_down)));
        step();
    }
    let unfit = || KernelError::Gpu {
        message: format!(
            "the copies to and from {} did not get slower with size: no link model can be fitted",
            device.name()
        ),
    };
    Ok(LinkModel {
        h2d: fit_link(&up).ok_or_else(unfit)?,
        d2h: fit_link(&down).ok_or_else(unfit)?,
        p2p: None,
        host_shared_by: 1,
    })
}

/// Measures each device's link both ways and stores it, per device model (the mean of the
/// devices of a model), in the platform's models; returns the links in device order.
/// `step` is called once per copy size and device.
pub fn calibrate_links(
    platform: &Platform,
    mut step: impl FnMut() + Send,
) -> Result<Vec<LinkModel>> {
    let mut links = Vec::new();
    for worker in platform.devices() {
        // On the worker's host core, as in a run (and without pinning the caller).
        let link = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    hetla_clusters::pin_current_thread(worker.core);
                    measure_link(&*worker.device, &mut step)
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(KernelError::Gpu {
                        message: "the link measurement panicked".into(),
                    })
                })
        })?;
        links.push(link);
    }
    let mut by_model: std::collections::BTreeMap<&str, Vec<LinkModel>> = Default::default();
    for (worker, link) in platform.devices().iter().zip(&links) {
        by_model
            .entry(worker.device.name())
            .or_default()
            .push(*link);
    }
    platform.update_models(|m| {
        for (model, links) in by_model {
            let mean = |f: fn(&LinkModel) -> LinkRate| {
                let n = links.len() as f64;
                LinkRate {
                    latency_us: links.iter().map(|l| f(l).latency_us).sum::<f64>() / n,
                    gb_per_s: links.iter().map(|l| f(l).gb_per_s).sum::<f64>() / n,
                }
            };
            m.set_link(
                model,
                LinkModel {
                    h2d: mean(|l| l.h2d),
                    d2h: mean(|l| l.d2h),
                    p2p: None,
                    host_shared_by: 1,
                },
            );
        }
    });
    Ok(links)
}

/// Tiles per side of the factorisations [`record_in_run`] times.
pub const IN_RUN_TILES: usize = 8;

/// Factorisations [`record_in_run`] performs on `platform` for `tiles`.
pub fn in_run_steps(tiles: &[usize], runs: usize) -> usize {
    tiles.len() * runs
}

/// Factors `runs` random SPD matrices of order [`IN_RUN_TILES`] x b on `platform` for each
/// b in `tiles`, and records into `models`, for each kernel (square b x b tiles) and worker
/// class, the median of the tasks' durations as the runs measured them; `step` is called
/// after each factorisation. Kernels run slower inside a factorisation than alone (tiles
/// come from memory, clusters compete), so these are the durations that predict runs; the
/// median keeps a burst of load from other processes out of them.
///
/// On a platform with a single worker, the next task is always ready when one ends (the
/// worker released it), so the time between two tasks is the runtime's own overhead:
/// those gaps are returned, in seconds (none on other platforms).
pub fn record_in_run(
    platform: &std::sync::Arc<Platform>,
    tiles: &[usize],
    runs: usize,
    precision: Precision,
    models: &mut PerfModels,
    step: impl FnMut(),
) -> Result<Vec<f64>> {
    match precision {
        Precision::S => record_in_run_in::<f32>(platform, tiles, runs, models, step),
        Precision::D => record_in_run_in::<f64>(platform, tiles, runs, models, step),
        Precision::C => record_in_run_in::<c32>(platform, tiles, runs, models, step),
        Precision::Z => record_in_run_in::<c64>(platform, tiles, runs, models, step),
    }
}

fn record_in_run_in<T: Scalar>(
    platform: &std::sync::Arc<Platform>,
    tiles: &[usize],
    runs: usize,
    models: &mut PerfModels,
    mut step: impl FnMut(),
) -> Result<Vec<f64>> {
    let mut gaps = Vec::new();
    for &b in tiles {
        let n = IN_RUN_TILES * b;
        let a = matgen::random_hpd::<T>(n, b as u64);
        let cholesky = crate::Cholesky::new().platform(platform.clone()).tile(b);
        let mut durations: std::collections::BTreeMap<_, Vec<f64>> = Default::default();
        for _ in 0..runs {
            let mut factor = a.clone();
            let trace = cholesky.factor_in_place_traced(factor.as_mut())?;
            for event in &trace.tasks {
                let class = trace.workers[event.worker].class.clone();
                let key = KernelKey::square(event.op, b).in_precision(T::PRECISION);
                durations
                    .entry((key, class))
                    .or_default()
                    .push(event.end - event.start);
            }
            if trace.workers.len() == 1 {
                // Events are sorted by start time.
                gaps.extend(
                    trace
                        .tasks
                        .windows(2)
                        .map(|p| (p[1].start - p[0].end).max(0.0)),
                );
            }
            step();
        }
        for ((key, class), mut seconds) in durations {
            seconds.sort_by(f64::total_cmp);
            models.record(&key, &class, seconds[seconds.len() / 2]);
        }
    }
    Ok(gaps)
}
