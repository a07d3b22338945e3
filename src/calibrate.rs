//! Calibration ahead of runs: times the tile kernels of a plan on each class of worker of a
//! platform and records the samples in its performance models.
//!
//! Runs are otherwise calibrated on the fly (MCT sends uncalibrated kernels to be measured), which
//! costs the first run of a new configuration some balance; `hetla calibrate` fills the models
//! beforehand.
//!
//! Kernels are timed in the conditions of a run, not of a microbenchmark, so that models (and the
//! platform files simulations use) predict runs:
//! - every worker of a class runs the kernel at the same time (a barrier starts each sample),
//!   because in a run the clusters share the caches and the memory bandwidth; timing one core alone
//!   on an idle machine overestimates a busy machine by 20% and more;
//! - the tiles read are views into a matrix larger than the caches, with its leading dimension, a
//!   different tile each sample, as a run reads tiles another worker wrote long before. The written
//!   tile is refreshed before each sample (outside the timing) so that values stay in range.
//!
//! On a device worker the operands are uploaded before each sample and the copies waited for, so
//! that a sample times the kernel alone. (`hetla-lab` measures the devices' links and the kernels
//! inside factorisations, for platform files.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Barrier;
use std::time::Instant;

use faer::{Mat, MatRef};
use hetla_kernels::{KernelError, Op};
use hetla_kernels::{Precision, Scalar};

use crate::{Result, matgen};
use hetla_runtime::{Device, Handle, KernelKey, Platform};

/// Bytes of the matrix each worker reads its tiles from: larger than a last-level cache.
const READ_MATRIX_BYTES: usize = 64 << 20;

/// At most this many bytes of read matrices for all the workers of a class together.
const READ_MATRICES_BUDGET: usize = 2 << 30;

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

/// Tiles per side of the read matrix for tiles of `b`: enough to exceed the caches, fewer when
/// `members` such matrices would not fit the budget.
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

    /// Refreshes the written tile for sample `s` of `op`: a copy of an SPD tile for POTRF (and for
    /// the panel inverse, whose tile's lower triangle stands for a factor), the same values every
    /// time for the others.
    fn refresh(&mut self, op: Op, s: usize) {
        if matches!(op, Op::Potrf | Op::PanelInverse) {
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
        Op::Potrf | Op::PanelInverse => vec![],
        Op::Trsm => vec![diagonal(read, b, k, s)],
        Op::Syrk => vec![tile(read, b, k, s)],
        _ => vec![tile(read, b, k, s), tile(read, b, k, s + 1)],
    }
}

/// Where a member of a class runs its kernels.
#[derive(Clone, Copy)]
enum Member<'a> {
    /// A CPU cluster (the caller leads its team), with its backend and parallelism.
    Cluster(hetla_kernels::Backend, hetla_kernels::Par),
    /// A device: the operands are its replicas 0 (written) and 1, 2 (read).
    Device(&'a dyn Device),
}

/// Uploads a sample's operands to a device (the written tile as handle 0, the reads as 1, 2) and
/// waits for them.
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

/// Times `samples` executions of `op` on one member's operands, each started together with the
/// other members' behind `barrier`. Every member reaches every barrier, also after a failure, so
/// that no member waits forever.
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

/// Times `samples` executions of `op` on each of `members` (workers of `platform`, each with its
/// operands) at once, every sample started together: each member's seconds, or its error.
fn time_members<T: Scalar>(
    platform: &Platform,
    members: &[usize],
    operands: &mut [Operands<T>],
    op: Op,
    samples: usize,
) -> Vec<std::result::Result<Vec<f64>, KernelError>> {
    let backend = platform.backend();
    let barrier = Barrier::new(members.len());
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
                            cluster.run(false, || time_samples(ops, op, samples, barrier, member))
                        })
                    }
                    None => {
                        let worker = &platform.devices()[w - clusters.len()];
                        scope.spawn(move || {
                            hetla_clusters::pin_current_thread(worker.core);
                            let member = Member::Device(&*worker.device);
                            let timed = time_samples(ops, op, samples, barrier, member);
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
    })
}

/// A calibration of tile kernels ahead of runs (the module documentation says how they are timed):
/// which operations, on which tile sizes, how many samples of each, in which precision.
/// `hetla calibrate` fills a platform's models with [`KernelCalibration::run`] and measures how
/// clusters of several cores scale with [`KernelCalibration::scaling`]; a plan that lacks the rates
/// it chooses its tile from runs one first.
///
/// ```
/// # fn main() -> hetla::Result<()> {
/// use hetla::{Backend, ClusterSpec, KernelCalibration, Op, Platform, Precision};
/// let platform = Platform::new(&ClusterSpec::Grid { count: 1, size: 1 }, Backend::Faer)?;
/// let calibration = KernelCalibration {
///     ops: vec![Op::GemmNt],
///     tiles: vec![32],
///     samples: 3,
///     precision: Precision::D,
/// };
/// assert_eq!(calibration.steps(&platform), 3);
/// calibration.run(&platform, || {})?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCalibration {
    /// The operations timed (a plan's: [`Plan::ops`](crate::Plan::ops)), each on square b x b
    /// tiles.
    pub ops: Vec<Op>,
    /// The tile sizes b.
    pub tiles: Vec<usize>,
    /// Samples of each operation at each tile size, on each class of worker.
    pub samples: usize,
    /// The precision the kernels compute in (models are kept per precision).
    pub precision: Precision,
}

impl KernelCalibration {
    /// Number of kernel executions [`KernelCalibration::run`] records on `platform` (a progress
    /// bar's length: `run` calls its `step` as often).
    pub fn steps(&self, platform: &Platform) -> usize {
        distinct_classes(platform).len() * self.tiles.len() * self.ops.len() * self.samples
    }

    /// Times each operation `samples` times on each tile size, on all the workers of each class of
    /// `platform` at once, and records the durations in the platform's models (keyed by precision);
    /// `step` is called once per recorded sample. Errors before any work on a tile of 0 or on tiles
    /// the memory cannot hold.
    pub fn run(&self, platform: &Platform, step: impl FnMut()) -> Result<()> {
        let (ops, tiles, samples) = (&self.ops, &self.tiles, self.samples);
        hetla_kernels::with_scalar!(self.precision, T => calibrate_in::<T>(platform, ops, tiles, samples, step))
    }

    /// The scaling probe (`hetla calibrate --scaling`): for each cluster size of `sizes` (cores of
    /// the machine's topology), each tile and each operation, `samples` executions on one cluster
    /// of that size alone, and as many on each of as many clusters of that size as fit, all busy at
    /// once (each sample started together), with `backend`'s kernels. The sizes take turns sample
    /// by sample (after one untimed round), so that a machine whose speed drifts over minutes
    /// drifts alike for every size and the ratios between sizes hold. The kernels run as in a run:
    /// on the cluster's team, operands read from a matrix larger than the caches. `step` is called
    /// after each operation and tile. Errors before any work on a size of 0 or above the machine's
    /// cores, a tile of 0, or tiles the memory cannot hold.
    pub fn scaling(
        &self,
        backend: hetla_kernels::Backend,
        sizes: &[usize],
        step: impl FnMut(),
    ) -> Result<Vec<ScalingSample>> {
        let (ops, tiles, samples) = (&self.ops, &self.tiles, self.samples);
        hetla_kernels::with_scalar!(self.precision, T => scaling_in::<T>(backend, sizes, ops, tiles, samples, step))
    }
}

fn calibrate_in<T: Scalar>(
    platform: &Platform,
    ops: &[Op],
    tiles: &[usize],
    samples: usize,
    mut step: impl FnMut(),
) -> Result<()> {
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
            for &op in ops {
                let key = KernelKey::square(op, b).in_precision(T::PRECISION);
                let timings = time_members(platform, &members, &mut operands, op, samples);
                for seconds in timings {
                    let seconds = seconds?;
                    platform.update_models(|m| {
                        for &t in &seconds {
                            m.record_calibration(&key, &class, t);
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

/// One kernel at one tile on clusters of one size, as the scaling probe
/// ([`KernelCalibration::scaling`]) timed it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScalingSample {
    /// The operation (its name in JSON).
    #[serde(serialize_with = "op_name")]
    pub op: Op,
    /// The tile size b (b x b tiles).
    pub tile: usize,
    /// The cores of each cluster.
    pub cores: usize,
    /// Each sample's seconds on one cluster, the rest of the machine idle.
    pub alone: Vec<f64>,
    /// Each sample's seconds on every cluster of this size that fits the machine, all busy at once
    /// (the clusters' samples one after another).
    pub busy: Vec<f64>,
}

/// An operation by its name in JSON.
fn op_name<S: serde::Serializer>(op: &Op, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(op.name())
}

/// How long the probe's team helpers spin after a piece: longer than the refresh of a 2048 tile
/// between two samples.
const PROBE_SPIN: std::time::Duration = std::time::Duration::from_millis(10);

/// The platforms of the scaling probe for one cluster size: one cluster alone, and as many as fit
/// (None when that is one).
struct Shape {
    size: usize,
    count: usize,
    alone: Platform,
    busy: Option<Platform>,
}

fn scaling_in<T: Scalar>(
    backend: hetla_kernels::Backend,
    sizes: &[usize],
    ops: &[Op],
    tiles: &[usize],
    samples: usize,
    mut step: impl FnMut(),
) -> Result<Vec<ScalingSample>> {
    use hetla_clusters::ClusterSpec;
    let cores = hetla_clusters::Topology::detect()?.cores().len();
    let mut shapes = Vec::new();
    for &size in sizes {
        if size == 0 || size > cores {
            return Err(crate::Error::InvalidOption {
                option: "scaling",
                reason: format!("a cluster of {size} cores on a machine of {cores} cores"),
            });
        }
        let count = cores / size;
        let platform = |count| {
            let spec = ClusterSpec::Grid { count, size };
            Platform::with_store(&spec, backend, hetla_runtime::ModelStore::None)
        };
        let shape = Shape {
            size,
            count,
            alone: platform(1)?,
            busy: if count > 1 {
                Some(platform(count)?)
            } else {
                None
            },
        };
        // The helpers spin through the refresh of the written tile between two samples, as a
        // busy cluster's do between its kernels in a run (they yield to any other thread).
        for p in std::iter::once(&shape.alone).chain(&shape.busy) {
            for cluster in p.clusters() {
                cluster.team().set_spin(PROBE_SPIN);
            }
        }
        shapes.push(shape);
    }
    let most = shapes.iter().map(|s| s.count).max().unwrap_or(1);
    let mut rows = Vec::new();
    for &b in tiles {
        if b == 0 {
            return Err(crate::Error::ZeroTileSize);
        }
        crate::limits::check_memory(
            &format!("the scaling probe's tiles of {b}"),
            (b as u128 * b as u128).saturating_mul(3 * most as u128 * size_of::<T>() as u128),
        )?;
        let k = read_tiles_per_side(b, most, size_of::<T>());
        let mut operands: Vec<Operands<T>> = (0..most)
            .map(|i| Operands::new(b, k, (b + i) as u64))
            .collect();
        for &op in ops {
            let mut alone = vec![Vec::new(); shapes.len()];
            let mut busy = vec![Vec::new(); shapes.len()];
            // One untimed round, then the timed ones.
            for round in 0..=samples {
                for (i, shape) in shapes.iter().enumerate() {
                    // Two executions back to back, the second timed: the first wakes the
                    // cluster's team, as the previous kernel of a busy cluster has in a run.
                    let mut once = |platform: &Platform, count: usize| {
                        let members: Vec<usize> = (0..count).collect();
                        time_members(platform, &members, &mut operands[..count], op, 2)
                            .into_iter()
                            .map(|r| r.map(|s| s[1..].to_vec()))
                            .collect::<std::result::Result<Vec<Vec<f64>>, KernelError>>()
                            .map(|s| s.concat())
                    };
                    let a = once(&shape.alone, 1)?;
                    let z = match &shape.busy {
                        Some(p) => once(p, shape.count)?,
                        None => a.clone(),
                    };
                    if round > 0 {
                        alone[i].extend(a);
                        busy[i].extend(z);
                    }
                }
            }
            for ((shape, alone), busy) in shapes.iter().zip(alone).zip(busy) {
                rows.push(ScalingSample {
                    op,
                    tile: b,
                    cores: shape.size,
                    alone,
                    busy,
                });
            }
            step();
        }
    }
    Ok(rows)
}
