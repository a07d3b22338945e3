//! Calibration into platform files: the devices' links, and the kernels timed inside
//! factorisations.
//!
//! The kernels alone are timed by the library (`hetla::KernelCalibration`): every worker of a class
//! at once, on tiles read from a matrix larger than the caches. For a platform file two more
//! measurements are needed:
//!
//! - [`calibrate_links`] measures each device's link: copies of 64 KiB to 64 MiB each way (from and
//!   into page-locked host memory where the device can lock it: the DMA alone), a least-squares fit
//!   of latency plus bytes over bandwidth to their medians, stored per GPU model with the kernel
//!   models;
//! - [`measure_pageable`] times the same copies from and into pageable host memory (a caller's
//!   matrix that is not locked), [`measure_device_copies`] the copies within a device's memory,
//!   [`measure_launch`] a kernel's launch, [`measure_locking`] the page-locking of host memory and
//!   [`measure_tensor`] the speedups of single-precision products on tensor cores;
//! - [`calibrate_packing`] times the packing of a 64 MiB tile into a contiguous buffer on pools of
//!   1, 2, 4, ... cores (what the staged data path does before each upload, [`StagingRate`]);
//! - [`record_in_run`] runs a factorisation ([`Family`]) on matrices of 4 to [`IN_RUN_TILES`] tiles
//!   per side and keeps each kernel's rate inside them (kernels run slower in a run than alone),
//!   and the gaps between the tasks of a single worker (the runtime's own cost per task).

use std::sync::Arc;
use std::time::Instant;

use faer::Mat;
use hetla_kernels::{DeviceSpan, KernelError, Op, Precision};
use hetla_runtime::{Device, Handle, KernelKey, LinkModel, LinkRate, PerfModels, Platform};

use crate::Result;
use crate::StagingRate;
use hetla::Family;

/// The operations of the tiled Cholesky, which a platform file gives rates for.
pub const CHOLESKY_OPS: [Op; 4] = [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt];

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

/// Latency and bandwidth fitted (least squares) to (bytes, seconds) points; `None` when the fit has
/// no positive slope.
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

/// Times copies of [`LINK_BYTES`] to and from `device` and fits its link model: from and into
/// page-locked host memory where the device can lock it and `lock` asks for it, else from and into
/// pageable memory (the device's own way with it: hetla's devices stage such copies).
fn measure_link(
    device: &dyn Device,
    step: &mut (impl FnMut() + Send),
    lock: bool,
) -> std::result::Result<LinkModel, KernelError> {
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for bytes in LINK_BYTES {
        // A square-ish tile of `bytes`.
        let rows = 1 << ((bytes / size_of::<f64>()).ilog2() / 2);
        let mut host =
            Mat::<f64>::from_fn(rows, bytes / size_of::<f64>() / rows, |i, j| (i + j) as f64);
        // The DMA alone, where the device can page-lock the tile (the staged path's packing is
        // timed apart, `calibrate_packing`).
        let range = hetla_kernels::HostRange::of_matrix(
            host.as_ptr(),
            host.nrows(),
            host.ncols(),
            host.col_stride(),
        );
        // SAFETY: `host` outlives the lock, which is undone below before it is dropped.
        let locked = lock && unsafe { device.page_lock(range) }.is_ok();
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
        if locked {
            device.page_unlock(range)?;
        }
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

/// Measures each device's link both ways and stores it, per device model (the mean of the devices
/// of a model), in the platform's models; returns the links in device order. `step` is called once
/// per copy size and device.
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
                    measure_link(&*worker.device, &mut step, true)
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

/// The copies between `device` and pageable host memory, timed and fitted as [`calibrate_links`]
/// does the page-locked ones (copies of 64 KiB to 64 MiB each way, the medians of 5, latency plus
/// bytes over bandwidth): what a copy costs a caller whose matrix is not page-locked, on hetla's
/// devices the staged path whole (the packing into page-locked staging and the DMA; the platform
/// file's `gpu.pageable`, beside `gpu.link` and `gpu.staging`, which model the two apart). Run on
/// the calling thread (pin it to the device's host core first, as a run does).
pub fn measure_pageable(device: &dyn Device) -> std::result::Result<LinkModel, KernelError> {
    measure_link(device, &mut || (), false)
}

/// Columns of the blocks [`measure_device_copies`] copies: 1 to 64 MiB of f64 in 4096 rows.
const DEVICE_COPY_COLS: [usize; 7] = [32, 64, 128, 256, 512, 1024, 2048];

/// Copies within `device`'s own memory between the block `span` (a caller's matrix there, f64, at
/// least 4096 x 2048) and a run's replica, both ways (what a run on a caller's device matrix does
/// for each tile it reads and writes, `Device::import` and `Device::export`): blocks of 4096 rows
/// and 32 to 2048 columns (1 to 64 MiB), the median of 5 each way after a warm-up, fitted to a
/// latency and a rate (the platform file's `gpu.device_copies`). An error when the device has no
/// such memory or `span` is too small.
pub fn measure_device_copies(
    device: &dyn Device,
    span: &DeviceSpan,
) -> std::result::Result<LinkRate, KernelError> {
    let rows = 4096;
    let cols = DEVICE_COPY_COLS[DEVICE_COPY_COLS.len() - 1];
    if span.precision != Precision::D || span.rows < rows || span.cols < cols {
        return Err(KernelError::Gpu {
            message: format!(
                "the device copies' probe needs an f64 block of at least {rows} x {cols}, got {} x {} in {}",
                span.rows, span.cols, span.precision
            ),
        });
    }
    device.check_span(span)?;
    let mut points = Vec::with_capacity(2 * DEVICE_COPY_COLS.len());
    for cols in DEVICE_COPY_COLS {
        let block = DeviceSpan {
            rows,
            cols,
            ..*span
        };
        let (mut import, mut export) = (Vec::new(), Vec::new());
        for sample in 0..=LINK_SAMPLES {
            let start = Instant::now();
            // SAFETY: `block` lies in `span`, the device's memory (checked), which nothing else
            // uses during the probe; the import is waited for before the export writes it.
            unsafe { device.import(Handle(0), &block) }?;
            device.wait_uploads()?;
            let imported = start.elapsed().as_secs_f64();
            let start = Instant::now();
            // SAFETY: as above.
            unsafe { device.export(Handle(0), &block) }?;
            if sample > 0 {
                import.push(imported);
                export.push(start.elapsed().as_secs_f64());
            }
        }
        device.clear();
        let bytes = (rows * cols * size_of::<f64>()) as f64;
        for times in [&mut import, &mut export] {
            times.sort_by(f64::total_cmp);
            points.push((bytes, times[times.len() / 2]));
        }
    }
    fit_link(&points).ok_or_else(|| KernelError::Gpu {
        message: format!(
            "the copies within {} did not get slower with size: no rate can be fitted",
            device.name()
        ),
    })
}

/// Bytes of host memory [`measure_locking`] page-locks each time.
const LOCK_BYTES: usize = 256 << 20;

/// Times [`measure_locking`] locks its buffer (the median is kept).
const LOCK_SAMPLES: usize = 3;

/// GB/s at which `device` page-locks host memory (`cuMemHostRegister` on a GPU): the median of 3
/// locks of a 256 MiB buffer whose pages are touched first, each undone before the next (the
/// platform file's `gpu.lock_gb_per_s`, with which a page-locked run is simulated locking its
/// matrix beside the workers). An error when the device cannot lock host memory.
pub fn measure_locking(device: &dyn Device) -> std::result::Result<f64, KernelError> {
    let buffer = vec![1.0_f64; LOCK_BYTES / size_of::<f64>()];
    let range = hetla_kernels::HostRange {
        start: buffer.as_ptr() as usize,
        len: buffer.len() * size_of::<f64>(),
    };
    let mut seconds = Vec::with_capacity(LOCK_SAMPLES);
    for _ in 0..LOCK_SAMPLES {
        let start = Instant::now();
        // SAFETY: `buffer` outlives the lock, which is undone at once.
        unsafe { device.page_lock(range) }?;
        seconds.push(start.elapsed().as_secs_f64());
        device.page_unlock(range)?;
    }
    seconds.sort_by(f64::total_cmp);
    Ok(range.len as f64 / seconds[seconds.len() / 2].max(1e-9) / 1e9)
}

/// Kernels [`measure_launch`] times (after one warm-up).
const LAUNCHES: usize = 50;

/// Order of the tile [`measure_launch`]'s kernels factor: small enough that the kernel is a few
/// microseconds, so that the launch is what is timed.
const LAUNCH_ORDER: usize = 64;

/// Microseconds from the host's launch of a kernel on an idle `device` to its end, beyond the
/// kernel itself: the median over 50 calls (`LAUNCHES`), after a warm-up, of a POTRF of the
/// identity of order 64 (which it leaves as it is) launched and waited for, less the kernel's own
/// seconds (its events). What a device's worker adds to each task when nothing is queued behind it
/// (the platform file's `launch_us`, the simulator's `gpu_launch`).
pub fn measure_launch(device: &dyn Device) -> std::result::Result<f64, KernelError> {
    let identity = Mat::<f64>::identity(LAUNCH_ORDER, LAUNCH_ORDER);
    device.upload(Handle(0), identity.as_ref().into())?;
    device.wait_uploads()?;
    let mut beyond = Vec::with_capacity(LAUNCHES);
    for call in 0..=LAUNCHES {
        let start = Instant::now();
        let kernel = device.launch(Op::Potrf, &[], Handle(0))?.wait()?;
        let wall = start.elapsed().as_secs_f64();
        if call > 0 {
            beyond.push((wall - kernel).max(0.0));
        }
    }
    device.clear();
    beyond.sort_by(f64::total_cmp);
    Ok(beyond[beyond.len() / 2] * 1e6)
}

/// Timed products of each math [`measure_tensor`] takes the median of (after one warm-up).
const TENSOR_SAMPLES: usize = 5;

/// The speedup of each tensor math ([`hetla::TensorMath::Tf32`], `Bf16`) over f32 for the product
/// of single-precision tiles of order `b` on an idle `device` ([`Op::GemmNt`], C <- C - A B^T: the
/// kernel a run's math changes): the median over 5 (`TENSOR_SAMPLES`) of the kernel's own seconds
/// in f32 over its seconds with the math, each after a warm-up (the platform file's `tensor`). An
/// emulated device rounds in software: its speedups are below 1, as measured.
pub fn measure_tensor(
    device: &dyn Device,
    b: usize,
) -> std::result::Result<Vec<crate::TensorRate>, KernelError> {
    use hetla::TensorMath;
    let tile = |seed: usize| {
        Mat::<f32>::from_fn(b, b, |i, j| {
            ((i * 31 + j * 17 + seed) % 97) as f32 / 97.0 - 0.5
        })
    };
    let (a, c) = (tile(1), tile(3));
    device.upload(Handle(0), a.as_ref().into())?;
    device.upload(Handle(1), tile(2).as_ref().into())?;
    device.upload(Handle(2), c.as_ref().into())?;
    device.wait_uploads()?;
    let median = |math: TensorMath| -> std::result::Result<f64, KernelError> {
        let call = hetla_runtime::KernelCall {
            op: Op::GemmNt,
            reads: &[Handle(0), Handle(1)],
            write: Handle(2),
            args: &hetla_kernels::KernelArgs::None,
            math,
        };
        let mut seconds = Vec::with_capacity(TENSOR_SAMPLES);
        for sample in 0..=TENSOR_SAMPLES {
            let kernel = device.launch_with(&call)?.wait()?;
            if sample > 0 {
                seconds.push(kernel);
            }
        }
        seconds.sort_by(f64::total_cmp);
        Ok(seconds[seconds.len() / 2])
    };
    let measured = (|| {
        let f32_seconds = median(TensorMath::Off)?;
        [TensorMath::Tf32, TensorMath::Bf16]
            .into_iter()
            .map(|math| {
                Ok(crate::TensorRate {
                    math,
                    speedup: f32_seconds / median(math)?.max(f64::MIN_POSITIVE),
                })
            })
            .collect()
    })();
    device.clear();
    measured
}

/// Rows and columns of the tile [`calibrate_packing`] packs (64 MiB of f64), and the leading
/// dimension of the matrix it is read from (a tile of a larger matrix, as in place).
const PACK_TILE: (usize, usize, usize) = (4096, 2048, 8192);

/// Packings of each pool size [`calibrate_packing`] takes the median of (after one warm-up).
const PACK_SAMPLES: usize = 5;

/// The rates at which pools of each of `sizes` cores (the first cores of `topology`, one thread a
/// core) pack a 64 MiB tile read from a larger column-major matrix into a contiguous buffer, by the
/// staged data path's own copy (`copy_by_columns`): the median of 5 (`PACK_SAMPLES`) after a
/// warm-up.
pub fn calibrate_packing(
    topology: &hetla_clusters::Topology,
    sizes: &[usize],
) -> Result<Vec<StagingRate>> {
    let (rows, cols, ld) = PACK_TILE;
    let matrix = Mat::<f64>::from_fn(ld, cols, |i, j| (i * 7 + j) as f64);
    let src = matrix.as_ref().subrows(0, rows);
    let mut dst = Mat::<f64>::zeros(rows, cols);
    let cores: Vec<usize> = topology.cores().iter().map(|c| c[0]).collect();
    let mut rates = Vec::new();
    for &size in sizes.iter().filter(|&&s| s >= 1 && s <= cores.len()) {
        let threads = hetla_clusters::CopyThreads::new(&cores[..size], &[], "hetla-pack")?;
        let mut times = Vec::with_capacity(PACK_SAMPLES);
        for sample in 0..=PACK_SAMPLES {
            let start = Instant::now();
            hetla_kernels::copy_by_columns(dst.as_mut(), src, Some(&threads));
            if sample > 0 {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        rates.push(StagingRate {
            cores: size,
            gb_per_s: (rows * cols * size_of::<f64>()) as f64 / median / 1e9,
        });
    }
    Ok(rates)
}

/// Most tiles per side of the factorisations [`record_in_run`] times ([`in_run_order`]).
pub const IN_RUN_TILES: usize = 8;

/// The order below which [`record_in_run`] takes more tiles per side than 4 (up to
/// [`IN_RUN_TILES`]).
const IN_RUN_ORDER: usize = 4096;

/// The order of the matrices [`record_in_run`] factors in tiles of `b`: [`IN_RUN_TILES`] tiles per
/// side up to order 4096, fewer for larger tiles, at least 4 (tiles of 2048: order 8192), so that a
/// calibration of large tiles stays a few seconds per run and every kernel still runs beside
/// others.
pub fn in_run_order(b: usize) -> usize {
    b * (IN_RUN_ORDER / b.max(1)).clamp(4, IN_RUN_TILES)
}

/// Factorisations [`record_in_run`] performs on `platform` for `tiles`.
pub fn in_run_steps(tiles: &[usize], runs: usize) -> usize {
    tiles.len() * runs
}

/// Runs `family` `runs` times on random matrices of order [`in_run_order`] in tiles of b on
/// `platform` for each b in `tiles`, and records into `models`, for each kernel and worker class,
/// the rate its tasks ran at in the fastest of those runs, as the duration of one task on b x b
/// tiles: their seconds over their flops ([`KernelKey::leading_flops`]) times the square key's
/// flops. Tasks of other shapes (LU's panels are as tall as the rows below them, QR's tiles on a
/// triangle) count with their own flops, so that the key's rate times a run's flops gives that
/// run's time in the kernel: the total, not a typical task (a median of the tasks' rates was 15%
/// optimistic for LU's updates, whose short tasks are the slow ones). The fastest run's, because a
/// shared machine only ever slows a run down, and runs are reported by their best time. `step` is
/// called after each run. Kernels run slower inside a factorisation than alone (tiles come from
/// memory, clusters compete), so these are the durations that predict runs.
///
/// Also returned ([`InRun`]): on a platform with a single worker, where the next task is always
/// ready when one ends (the worker released it), the time between two tasks, the runtime's own
/// overhead; and each run's time outside its graphs.
pub fn record_in_run(
    platform: &Arc<Platform>,
    family: Family,
    tiles: &[usize],
    runs: usize,
    precision: Precision,
    models: &mut PerfModels,
    mut step: impl FnMut(),
) -> Result<InRun> {
    let mut measured = InRun::default();
    for &b in tiles {
        let n = in_run_order(b);
        // Each kernel's and class's fastest run: its seconds per flop.
        let mut fastest: std::collections::BTreeMap<_, f64> = Default::default();
        for run in 0..runs {
            // Seconds and flops of each kernel and class in this run.
            let mut totals: std::collections::BTreeMap<_, (f64, f64)> = Default::default();
            let scheduler = family.default_scheduler();
            let seed = (b + run) as u64;
            let done = family.run(platform, (n, n), b, scheduler, precision, seed)?;
            for (plan, trace) in &done.traces {
                let keys = plan.keys();
                for event in &trace.tasks {
                    let class = trace.workers[event.worker].class.clone();
                    // A trace of another graph than its plan's would pair kernels wrongly.
                    let key = keys
                        .get(event.task.0)
                        .ok_or_else(|| hetla_runtime::Error::Plan {
                            reason: format!(
                                "{family}'s run traced task {} of a plan of {} tasks: its trace is \
                                 not of its plan",
                                event.task.0,
                                keys.len()
                            ),
                        })?;
                    let square = KernelKey::square(key.op, b).in_precision(precision);
                    let work = key.leading_flops();
                    if work <= 0.0 {
                        continue;
                    }
                    let total = totals.entry((square, class)).or_default();
                    total.0 += event.end - event.start;
                    total.1 += work;
                }
                if trace.workers.len() == 1 {
                    // Events are sorted by start time.
                    measured.gaps.extend(
                        trace
                            .tasks
                            .windows(2)
                            .map(|p| (p[1].start - p[0].end).max(0.0)),
                    );
                }
            }
            for (key, (seconds, flops)) in totals {
                let rate = fastest.entry(key).or_insert(f64::INFINITY);
                *rate = rate.min(seconds / flops);
            }
            let graphs: f64 = done.traces.iter().map(|(_, t)| t.makespan).sum();
            let entries = (n * n) as f64;
            measured
                .outside_per_entry
                .push((done.seconds - graphs).max(0.0) / entries);
            step();
        }
        for ((key, class), seconds_per_flop) in fastest {
            models.record(&key, &class, seconds_per_flop * key.leading_flops());
        }
    }
    Ok(measured)
}

/// What [`record_in_run`] measured beside the kernels' rates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InRun {
    /// The gaps between the tasks of a single worker, in seconds (none on other platforms).
    pub gaps: Vec<f64>,
    /// Each run's seconds outside its task graphs (its wall-clock time less its traces' makespans:
    /// copies into and out of the tile store, checks, the inverse's mirror of its triangle) per
    /// entry of its matrix.
    pub outside_per_entry: Vec<f64>,
}
