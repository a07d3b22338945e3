//! Device workers: emulated devices (host memory, CPU kernels, real copies) check with real numbers
//! that replicas, transfers, eviction and write-back keep every tile right; real GPUs are tested
//! when the machine has them, and the test says why it is skipped when not.

use std::io::Write;
use std::sync::Arc;

use faer::Par;
use hetla::check::{RESIDUAL_THRESHOLD, cholesky_residual};
use hetla::matgen::{random_hpd, random_spd};
use hetla::{Backend, Cholesky, ClusterSpec, Error, HostMemory, Scalar, Storage, c32, c64};
use hetla_runtime::Handle;
use hetla_runtime::{Device, EmulatedDevice, GpuSelection, ModelStore, Platform, Trace};
use hetla_runtime::{HOST, MemoryNode};

/// Emulated devices with a budget of `tiles` tiles of `b x b`, kept to query afterwards.
fn emulated(count: usize, tiles: usize, b: usize) -> Vec<Arc<EmulatedDevice>> {
    (0..count)
        .map(|_| Arc::new(EmulatedDevice::new(tiles * b * b * 8)))
        .collect()
}

fn platform(spec: &str, devices: &[Arc<EmulatedDevice>]) -> Arc<Platform> {
    let spec: ClusterSpec = spec.parse().unwrap();
    let devices = devices
        .iter()
        .map(|d| d.clone() as Arc<dyn Device>)
        .collect();
    Arc::new(Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices).unwrap())
}

/// Factors a random SPD matrix of order n in tiles of b; returns the residual and trace.
fn factor(platform: &Arc<Platform>, n: usize, b: usize) -> (f64, Trace) {
    factor_in::<f64>(platform, n, b)
}

/// [`factor`] of a random Hermitian positive definite matrix in `T`.
fn factor_in<T: Scalar>(platform: &Arc<Platform>, n: usize, b: usize) -> (f64, Trace) {
    let a = random_hpd::<T>(n, 7);
    let mut l = a.clone();
    let trace = Cholesky::new()
        .platform(platform.clone())
        .tile(b)
        .factor_in_place_traced(l.as_mut())
        .unwrap();
    (cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq), trace)
}

fn bytes_to_devices(trace: &Trace) -> usize {
    trace
        .transfers
        .iter()
        .filter(|t| t.transfer.to != HOST)
        .map(|t| t.transfer.bytes)
        .sum()
}

fn cores() -> usize {
    hetla::Topology::detect().unwrap().cores().len()
}

/// Whether the machine has the 2 cores a cluster beside a device needs (one for each worker); when
/// not, says on stderr (past the test harness's capture) that the test is skipped.
#[allow(clippy::explicit_write)] // eprintln! would be captured by the test harness
fn room_for_a_cluster_beside_a_device() -> bool {
    let room = cores() >= 2;
    if !room {
        writeln!(
            std::io::stderr(),
            "skipped: a cluster and a device need 2 cores"
        )
        .unwrap();
    }
    room
}

#[test]
fn several_emulated_devices_with_a_small_budget_keep_every_tile_right() {
    let (n, b, budget_tiles) = (1200, 150, 5);
    let devices = emulated(3, budget_tiles, b);
    let p = platform("none", &devices);
    let (residual, trace) = factor(&p, n, b);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    assert_eq!(trace.tasks.len(), 120);
    // 5 tiles cannot hold the 36 lower tiles: they were evicted and fetched again, and
    // tiles modified on a device were written back (evicted or at the end).
    let lower_tiles = 8 * 9 / 2;
    assert!(
        bytes_to_devices(&trace) > lower_tiles * b * b * 8,
        "{} bytes to the devices",
        bytes_to_devices(&trace)
    );
    let written_back = trace
        .transfers
        .iter()
        .filter(|t| t.transfer.to == HOST)
        .count();
    assert!(written_back >= lower_tiles, "{written_back} write-backs");
    for (i, d) in devices.iter().enumerate() {
        assert!(
            d.peak_bytes() <= d.budget(),
            "device {i} held {} bytes, budget {}",
            d.peak_bytes(),
            d.budget()
        );
    }
    // Every device ran tasks; each copy named a real node.
    for w in 0..3 {
        assert!(
            trace.tasks.iter().any(|t| t.worker.0 == w),
            "gpu{w} ran nothing"
        );
    }
    assert!(trace.transfers.iter().all(|t| t.transfer.from.0 <= 3
        && t.transfer.to.0 <= 3
        && t.transfer.from != t.transfer.to));
}

/// Factors a random Hermitian positive definite matrix in `T` on emulated devices holding at most
/// `tiles` tiles: the residual of its precision, and the trace.
fn factor_on_devices<T: Scalar>(devices: usize, tiles: usize, n: usize, b: usize) -> (f64, Trace) {
    let devices: Vec<_> = (0..devices)
        .map(|_| Arc::new(EmulatedDevice::new(tiles * b * b * size_of::<T>())))
        .collect();
    let p = platform("none", &devices);
    let a = random_hpd::<T>(n, 11);
    let mut l = a.clone();
    let trace = Cholesky::new()
        .platform(p)
        .tile(b)
        .factor_in_place_traced(l.as_mut())
        .unwrap();
    for d in &devices {
        assert!(
            d.peak_bytes() <= d.budget(),
            "{} held {} bytes",
            T::PRECISION,
            d.peak_bytes()
        );
    }
    (cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq), trace)
}

#[test]
fn emulated_devices_move_and_factor_tiles_in_every_precision() {
    fn check<T: Scalar>() {
        let (n, b) = (700, 100);
        let (residual, trace) = factor_on_devices::<T>(2, 5, n, b);
        assert!(
            residual < RESIDUAL_THRESHOLD,
            "{}: residual {residual}",
            T::PRECISION
        );
        assert_eq!(trace.tasks.len(), 84, "{}", T::PRECISION);
        // Tiles went to the devices and back at the precision's size, with evictions
        // (5 tiles cannot hold the 28 lower ones).
        let tile_bytes = b * b * size_of::<T>();
        assert!(
            trace
                .transfers
                .iter()
                .all(|t| t.transfer.bytes == tile_bytes)
        );
        assert!(
            bytes_to_devices(&trace) > 28 * tile_bytes,
            "{}",
            T::PRECISION
        );
    }
    check::<f32>();
    check::<c32>();
    check::<c64>();
}

/// A device with a pool of compute streams runs independent kernels at once and stays right: the
/// One emulated device of 3 compute streams and no memory limit, alone on a platform.
fn three_streams() -> (Arc<EmulatedDevice>, Arc<Platform>) {
    let device = Arc::new(EmulatedDevice::new(usize::MAX).with_compute_streams(3));
    let p = platform("none", std::slice::from_ref(&device));
    (device, p)
}

/// Cholesky factor of every precision on one emulated device of 3 streams (tiles of 256, whose
/// products outlast a launch; a step's trailing updates are independent), its residual LAPACK's,
/// its kernels spread over the streams with every panel kernel (POTRF, TRSM) on the first; a matrix
/// that is not positive definite is the same clear error as with one stream, and the run does not
/// hang.
#[test]
fn a_device_with_several_streams_runs_kernels_at_once_in_every_precision() {
    fn check<T: Scalar>() {
        let (n, b) = (1024, 256);
        let (device, p) = three_streams();
        let (residual, trace) = factor_in::<T>(&p, n, b);
        let what = T::PRECISION;
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        assert_eq!(device.early_reads(), 0, "{what}");
        // 4 tile rows: 4 POTRFs and 6 TRSMs on the priority stream, the 10 updates on the others.
        let by_stream = device.kernels_by_stream();
        assert_eq!(by_stream[0], 4 + 6, "{what}: {by_stream:?}");
        assert_eq!(by_stream[1] + by_stream[2], 10, "{what}: {by_stream:?}");
        assert!(
            by_stream[1] > 0 && by_stream[2] > 0,
            "{what}: {by_stream:?}"
        );
        // Whether two kernels ran at once is the device's unit test's to show: here the kernels
        // run on the host's cores beside the runtime's threads, and 2 cores leave no room.
        assert_eq!(trace.tasks.len(), 20, "{what}");
        // Not positive definite: the error names the column, with the streams still running.
        let mut bad = random_hpd::<T>(n, 7);
        bad[(n / 2, n / 2)] = T::from_parts(-1.0, 0.0);
        let err = Cholesky::new()
            .platform(p)
            .tile(b)
            .factor_in_place_traced(bad.as_mut())
            .unwrap_err();
        assert!(
            matches!(err, Error::NotPositiveDefinite { .. }),
            "{what}: {err}"
        );
    }
    check::<f32>();
    check::<f64>();
    check::<c32>();
    check::<c64>();
}

/// With one compute stream (the default) the device runs one kernel at a time, all on it.
#[test]
fn a_device_with_one_stream_runs_one_kernel_at_a_time() {
    let device = Arc::new(EmulatedDevice::new(usize::MAX));
    let p = platform("none", std::slice::from_ref(&device));
    let (residual, _) = factor(&p, 480, 96);
    assert!(residual < RESIDUAL_THRESHOLD);
    assert_eq!(device.peak_running(), 1);
    assert_eq!(device.kernels_by_stream(), vec![35]);
}

/// Factors in `T` on one emulated device with host memory `host` and `storage`: the residual, the
/// trace and the device's (direct, staged) copies.
fn factor_with_host_memory<T: Scalar>(
    host: HostMemory,
    storage: Storage,
    spec: &str,
) -> (f64, Trace, (usize, usize)) {
    let (n, b) = (700, 100);
    let device = Arc::new(EmulatedDevice::new(8 * b * b * size_of::<T>()));
    let p = platform(spec, std::slice::from_ref(&device));
    let a = random_hpd::<T>(n, 13);
    let mut l = a.clone();
    let trace = Cholesky::new()
        .platform(p)
        .tile(b)
        .storage(storage)
        .host_memory(host)
        .factor_in_place_traced(l.as_mut())
        .unwrap();
    // Nothing of the run stays page-locked.
    let whole = hetla_kernels::HostRange::of_matrix(l.as_ptr(), n, n, l.col_stride());
    assert!(!hetla_kernels::PinnedRanges::global().covers(&whole));
    (
        cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq),
        trace,
        device.copies(),
    )
}

#[test]
fn page_locked_tiles_are_copied_straight_in_every_precision_and_storage_and_staged_ones_packed() {
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let (residual, trace, (direct, staged)) =
                factor_with_host_memory::<T>(HostMemory::PageLocked, storage, "none");
            assert!(residual < RESIDUAL_THRESHOLD, "{p} {storage:?}: {residual}");
            // Every copy, up (with re-fetches under the budget of 8 tiles) and down, went
            // straight from or into the page-locked tiles. The tile-major store is locked before
            // the run (and kept locked); the caller's matrix in place is locked by tile columns,
            // the first before the run and the others beside it, so a copy of a tile whose
            // column was not locked yet is staged (rarely on these small runs, but a slow machine
            // may): the first column's 7 tiles always go straight.
            let locked = &trace.host_memory;
            assert!(locked.failed.is_none(), "{p}: {:?}", locked.failed);
            assert_eq!(direct + staged, trace.transfers.len(), "{p} {storage:?}");
            let tile_bytes = 100 * 100 * size_of::<T>();
            if storage == Storage::TileMajor {
                assert_eq!(staged, 0, "{p} {storage:?}");
                assert!(direct > 2 * 28, "{p} {storage:?}: {direct} copies");
                assert!(
                    locked.bytes >= 28 * tile_bytes,
                    "{p}: {} bytes",
                    locked.bytes
                );
            } else {
                assert!(direct >= 7, "{p} {storage:?}: {direct} copies");
                assert!(
                    locked.bytes >= 7 * tile_bytes,
                    "{p}: {} bytes",
                    locked.bytes
                );
            }
            // The same run staged packs every copy and locks nothing.
            let (residual, trace, (direct, staged)) =
                factor_with_host_memory::<T>(HostMemory::Staged, storage, "none");
            assert!(residual < RESIDUAL_THRESHOLD, "{p} {storage:?}: {residual}");
            assert_eq!(
                (direct, staged),
                (0, trace.transfers.len()),
                "{p} {storage:?}"
            );
            assert_eq!(trace.host_memory.bytes, 0);
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn the_tile_major_buffer_stays_page_locked_between_runs_on_one_platform_until_a_staged_run() {
    let (n, b) = (600, 100);
    let device = Arc::new(EmulatedDevice::new(30 * b * b * 8));
    let p = platform("none", std::slice::from_ref(&device));
    let a = random_spd(n, 21);
    let run = |host| {
        let mut l = a.clone();
        let before = device.copies();
        let trace = Cholesky::new()
            .platform(p.clone())
            .tile(b)
            .storage(Storage::TileMajor)
            .host_memory(host)
            .factor_in_place_traced(l.as_mut())
            .unwrap();
        let residual = cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq);
        assert!(residual < RESIDUAL_THRESHOLD, "{host:?}: {residual}");
        let after = device.copies();
        (trace.host_memory, after.0 - before.0, after.1 - before.1)
    };
    // The first run locks the buffer; the second finds it locked and pays nothing; both copy
    // every tile straight (21 up, 21 down).
    let (first, direct, staged) = run(HostMemory::PageLocked);
    assert!(
        first.bytes >= 21 * b * b * 8 && first.already == 0,
        "{first:?}"
    );
    assert_eq!((direct, staged), (42, 0));
    let (second, direct, staged) = run(HostMemory::PageLocked);
    assert_eq!(
        (second.bytes, second.already),
        (0, first.bytes),
        "{second:?}"
    );
    assert_eq!((direct, staged), (42, 0));
    // A staged run drops the lock: it packs, and so does the next one.
    let (third, direct, staged) = run(HostMemory::Staged);
    assert_eq!(third, Default::default());
    assert_eq!((direct, staged), (0, 42));
}

#[test]
fn page_locked_tiles_beside_a_cluster_keep_every_tile_right_and_a_failed_lock_stays_staged() {
    let (residual, trace, (direct, staged)) =
        factor_with_host_memory::<f64>(HostMemory::PageLocked, Storage::TileMajor, "1x1");
    assert!(residual < RESIDUAL_THRESHOLD, "{residual}");
    assert_eq!((direct, staged), (trace.transfers.len(), 0));
    // A part of the matrix's first tile column page-locked by someone else: the run's lock of
    // that column (its first piece, locked before the run) fails, says why, no other piece is
    // locked, and the run is staged and right.
    let n = 700;
    let a = random_spd(n, 3);
    let mut l = a.clone();
    let whole = hetla_kernels::HostRange::of_matrix(l.as_ptr(), n, n, l.col_stride());
    let half = hetla_kernels::HostRange {
        start: whole.start + 80,
        len: 800,
    };
    assert!(hetla_kernels::PinnedRanges::global().insert(half));
    let device = Arc::new(EmulatedDevice::new(8 * 100 * 100 * 8));
    let trace = Cholesky::new()
        .platform(platform("none", std::slice::from_ref(&device)))
        .tile(100)
        .storage(Storage::InPlace)
        .host_memory(HostMemory::PageLocked)
        .factor_in_place_traced(l.as_mut());
    assert!(hetla_kernels::PinnedRanges::global().remove(half));
    let trace = trace.unwrap();
    let failed = trace.host_memory.failed.clone().unwrap_or_default();
    assert!(
        failed.contains("overlaps memory page-locked already"),
        "{failed}"
    );
    assert_eq!(trace.host_memory.bytes, 0);
    // Every tile was packed (none lies inside the part someone else locked).
    assert_eq!(device.copies().0, 0, "{:?}", device.copies());
    assert!(device.copies().1 > 0, "{:?}", device.copies());
    let residual = cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq);
    assert!(residual < RESIDUAL_THRESHOLD, "{residual}");
}

#[test]
fn a_device_refuses_a_copy_or_kernel_that_mixes_precisions() {
    let device = EmulatedDevice::new(usize::MAX);
    let a = faer::Mat::<f32>::identity(8, 8);
    device.upload(Handle(0), a.as_ref().into()).unwrap();
    let mut back = faer::Mat::<f64>::zeros(8, 8);
    let err = device
        .download(Handle(0), back.as_mut().into())
        .unwrap_err()
        .to_string();
    assert!(err.contains("in s") && err.contains("in d"), "{err}");
    let z = faer::Mat::<c64>::identity(8, 8);
    device.upload(Handle(1), z.as_ref().into()).unwrap();
    let err = device
        .run(hetla::Op::Trsm, &[Handle(1)], Handle(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("precision z") && err.contains("in s"), "{err}");
    // The same kernel in one precision runs.
    device.upload(Handle(2), a.as_ref().into()).unwrap();
    device
        .run(hetla::Op::Trsm, &[Handle(2)], Handle(0))
        .unwrap();
}

#[test]
fn a_cluster_and_an_emulated_device_share_the_graph() {
    if !room_for_a_cluster_beside_a_device() {
        return;
    }
    let devices = emulated(1, 6, 100);
    let p = platform("1x1", &devices);
    assert_eq!(p.workers().len(), 2);
    assert_eq!(p.workers()[1].node, MemoryNode(1));
    let (residual, trace) = factor(&p, 1000, 100);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    for w in 0..2 {
        assert!(
            trace.tasks.iter().any(|t| t.worker.0 == w),
            "worker {w} ran nothing"
        );
    }
    // The CPU cluster reads tiles the device wrote: copies came back to host memory.
    assert!(trace.transfers.iter().any(|t| t.transfer.to == HOST));
    assert!(devices[0].peak_bytes() <= devices[0].budget());
    // The device's host thread has a core of its own, outside the cluster.
    assert!(!p.workers()[0].cpus.contains(&p.devices()[0].core));
}

/// LU of a random matrix of order n in block columns of b on a 1-core cluster beside `devices`: its
/// residual (LAPACK's ratio), the kernels each device ran, the factors and the interchanges.
fn lu_beside<T: Scalar>(
    devices: Vec<Arc<dyn Device>>,
    (n, b): (usize, usize),
) -> (f64, Vec<hetla::Op>, faer::Mat<T>, Vec<usize>) {
    let a = hetla::matgen::random_in::<T>(n, n, 3);
    let (on_devices, lu, ipiv, zero) = lu_on("1x1", devices, &a, b);
    assert_eq!(zero, None, "{}", T::PRECISION);
    let residual = hetla::check::lu_residual(a.as_ref(), lu.as_ref(), &ipiv);
    (residual, on_devices, lu, ipiv)
}

/// LU of `a` in block columns of b on the clusters of `spec` and `devices`: the kernels each device
/// ran, the factors, the interchanges and the first zero pivot.
fn lu_on<T: Scalar>(
    spec: &str,
    devices: Vec<Arc<dyn Device>>,
    a: &faer::Mat<T>,
    b: usize,
) -> (Vec<hetla::Op>, faer::Mat<T>, Vec<usize>, Option<usize>) {
    let spec: ClusterSpec = spec.parse().unwrap();
    let p = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices).unwrap();
    let clusters = p.clusters().len();
    let mut lu = a.clone();
    let builder = hetla::Lu::new().platform(Arc::new(p)).tile(b);
    let plan = builder.plan(a.nrows(), T::PRECISION).unwrap();
    let (trace, ipiv, zero) = builder.factor_planned(&plan, lu.as_mut()).unwrap();
    let on_devices = (trace.tasks.iter())
        .filter(|t| t.worker.0 >= clusters)
        .map(|t| t.op)
        .collect();
    (on_devices, lu, ipiv, zero)
}

/// The largest |x - y| over the entries of two matrices of one shape, and the largest |y|.
fn largest_difference<T: Scalar>(x: &faer::Mat<T>, y: &faer::Mat<T>) -> (f64, f64) {
    let abs = |x: T| x.to_c64().re.hypot(x.to_c64().im);
    let entries = || (0..y.ncols()).flat_map(|j| (0..y.nrows()).map(move |i| (i, j)));
    let diff = entries().fold(0.0, |m, (i, j)| f64::max(m, abs(x[(i, j)] - y[(i, j)])));
    let largest = entries().fold(0.0, |m, (i, j)| f64::max(m, abs(y[(i, j)])));
    (diff, largest)
}

/// LU on emulated devices with no cluster beside them, in every precision: the devices factor the
/// panels too (their interchanges and zero pivots back through the panel's slot), with LAPACK's
/// residual, the interchanges and factors of a cluster alone, and a zero pivot at its global column
/// (a zero column inside the second block column, and in the last, ragged one).
#[test]
fn lu_panels_run_on_devices_where_no_cluster_is_beside_them_in_every_precision() {
    fn check<T: Scalar>() {
        let what = T::PRECISION;
        let (n, b) = (230, 40);
        let devices = || -> Vec<Arc<dyn Device>> {
            (0..2)
                .map(|_| Arc::new(EmulatedDevice::new(usize::MAX)) as Arc<dyn Device>)
                .collect()
        };
        let a = hetla::matgen::random_in::<T>(n, n, 3);
        let (on_devices, lu, ipiv, zero) = lu_on("none", devices(), &a, b);
        assert_eq!(zero, None, "{what}");
        let panels = n.div_ceil(b);
        let count = |op| on_devices.iter().filter(|&&o| o == op).count();
        assert_eq!(count(hetla::Op::LuPanel), panels, "{what}: {on_devices:?}");
        let residual = hetla::check::lu_residual(a.as_ref(), lu.as_ref(), &ipiv);
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        let (_, alone, ipiv_alone, _) = lu_on("1x1", Vec::new(), &a, b);
        assert_eq!(ipiv, ipiv_alone, "{what}");
        let (diff, largest) = largest_difference(&lu, &alone);
        assert!(diff <= 1e3 * what.epsilon() * largest, "{what}: {diff}");
        for column in [55, n - 3] {
            let mut singular = a.clone();
            singular.col_mut(column).fill(T::from_f64(0.0));
            let (_, _, _, zero) = lu_on("none", devices(), &singular, b);
            assert_eq!(zero, Some(column), "{what}");
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// LU out of core on an emulated device holding 1/1.3 and 1/2 of the matrix (24 block columns on 18
/// and 12), in every precision: LAPACK's residual, the budget kept, the interchanges of a cluster
/// alone, and the copies within 4x and 8x the fewest (each block column in and out once: 48), by
/// the left-looking order (the interchanges of factored columns last) and the eviction by next use.
#[test]
fn lu_out_of_core_factors_in_every_precision_within_a_few_times_the_fewest_copies() {
    fn check<T: Scalar>() {
        let what = T::PRECISION;
        let (n, b) = (480, 20);
        let a = hetla::matgen::random_in::<T>(n, n, 5);
        let (_, _, ipiv_alone, _) = lu_on("1x1", Vec::new(), &a, b);
        for columns in [18, 12] {
            let device = Arc::new(EmulatedDevice::new(columns * n * b * size_of::<T>()));
            let spec: ClusterSpec = "none".parse().unwrap();
            let devices = vec![device.clone() as Arc<dyn Device>];
            let p = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices);
            let builder = hetla::Lu::new().platform(Arc::new(p.unwrap())).tile(b);
            let plan = builder.plan(n, T::PRECISION).unwrap();
            let mut lu = a.clone();
            let (trace, ipiv, _) = builder.factor_planned(&plan, lu.as_mut()).unwrap();
            let residual = hetla::check::lu_residual(a.as_ref(), lu.as_ref(), &ipiv);
            assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
            assert!(device.peak_bytes() <= device.budget(), "{what}");
            assert_eq!(ipiv, ipiv_alone, "{what}");
            let copies = trace.transfers.len();
            // Least-recently-used eviction under the default order made 565 and 937.
            let most = if columns == 18 { 4 * 48 } else { 8 * 48 };
            assert!(copies <= most, "{what}, {columns} columns: {copies} copies");
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// Whether a device ran LU's kernels, and only those that have GPU kernels (the updates and
/// interchanges, with the panel's interchanges as their arguments; the panels stay on the cluster).
fn ran_lu_updates(on_devices: &[hetla::Op]) -> bool {
    let gpu_kernels = |op: &hetla::Op| matches!(op, hetla::Op::LuUpdate | hetla::Op::LuSwap);
    !on_devices.is_empty() && on_devices.iter().all(gpu_kernels)
}

/// LU beside an emulated device, in every precision: LAPACK's residual, the device ran updates and
/// interchanges, and the factors are the cluster's alone (the same kernels per block column).
#[test]
fn lu_updates_and_interchanges_run_on_a_device_beside_a_cluster_in_every_precision() {
    if !room_for_a_cluster_beside_a_device() {
        return;
    }
    fn check<T: Scalar>() {
        let what = T::PRECISION;
        let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(usize::MAX));
        let (residual, on_device, lu, ipiv) = lu_beside::<T>(vec![device], (450, 50));
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        assert!(ran_lu_updates(&on_device), "{what}: {on_device:?}");
        let (_, _, alone, ipiv_alone) = lu_beside::<T>(Vec::new(), (450, 50));
        assert_eq!(ipiv, ipiv_alone, "{what}");
        let (diff, largest) = largest_difference(&lu, &alone);
        assert!(diff <= 1e3 * what.epsilon() * largest, "{what}: {diff}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// LDL^T beside an emulated device, in every precision: the block-column graph (Aasen's products
/// and interchanges on the device, their rows and T's block columns as the kernels' arguments; the
/// gather, T's diagonal blocks, the panels and the band steps on the cluster), LAPACK's ratio, the
/// solve's backward error and the cluster's inertia.
#[test]
fn ldlt_products_and_interchanges_run_on_a_device_beside_a_cluster_in_every_precision() {
    for precision in hetla::Precision::ALL {
        if room_for_a_cluster_beside_a_device() {
            hetla_kernels::with_scalar!(precision, T => ldlt_beside_an_emulated_device::<T>());
        }
    }
}

/// A random Hermitian matrix of order 230 in blocks of 40 (6 blocks, the last one of 30: T's last
/// block narrower than the panels) beside an emulated device, its tasks counted by worker.
fn ldlt_beside_an_emulated_device<T: Scalar>() {
    use hetla::Op;
    let what = T::PRECISION;
    let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(usize::MAX));
    let count = ldlt_beside::<T>(vec![device], (230, 40));
    // H's terms 0 + 0 + 1 + 2 + 3 + 4, the update's 0 + 0 + 1 + 2 + 3 + 4 and 1 + 1 + 1 + 1 at the
    // ends of steps 1-4, the interchanges 0 + 1 + 2 + 3 + 4: all on the device.
    assert_eq!(count(Op::LdltColumnHessenberg), (10, 10), "{what}");
    assert_eq!(count(Op::LdltColumnUpdate), (14, 14), "{what}");
    assert_eq!(count(Op::LdltSwap), (10, 10), "{what}");
    let host = count(Op::LdltPanel).0 + count(Op::LdltGather).0 + count(Op::LdltDiagonal).0;
    assert_eq!(host, 0, "{what}");
}

/// LDL^T of a random Hermitian matrix of order n in blocks of b beside `devices` on a 1-core
/// cluster, checked (dchksy_aa's ratio and the solve's backward error < 30, the cluster's inertia):
/// for each operation, the tasks of it on the devices and in all.
fn ldlt_beside<T: Scalar>(
    devices: Vec<Arc<dyn Device>>,
    (n, b): (usize, usize),
) -> impl Fn(hetla::Op) -> (usize, usize) {
    let what = T::PRECISION;
    let spec: ClusterSpec = "1x1".parse().unwrap();
    let p = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices);
    let p = Arc::new(p.unwrap());
    let clusters = p.clusters().len();
    let a = hetla::matgen::random_hermitian::<T>(n, 11);
    let ldlt = hetla::Ldlt::new().platform(p).tile(b);
    let plan = ldlt.plan(n, T::PRECISION).unwrap();
    assert_eq!(plan.algorithm(), hetla::Algorithm::LdltColumns { n });
    let (trace, f) = ldlt.factor_planned(&plan, a.as_ref()).unwrap();
    let ratio = f.residual(a.as_ref()).unwrap();
    assert!(ratio < 30.0, "{what}: factor ratio {ratio}");
    let rhs = hetla::matgen::random_in::<T>(n, 2, 12);
    let x = f.solve(rhs.as_ref()).unwrap();
    let ratio = hetla::check::backward_error(a.as_ref(), x.as_ref(), rhs.as_ref());
    assert!(ratio < 30.0, "{what}: solve ratio {ratio}");
    let alone = hetla::Ldlt::new().tile(b).factor(a.as_ref()).unwrap();
    assert_eq!(f.inertia().unwrap(), alone.inertia().unwrap(), "{what}");
    move |op| {
        let tasks = trace.tasks.iter().filter(|t| t.op == op);
        let on_devices = tasks.clone().filter(|t| t.worker.0 >= clusters).count();
        (on_devices, tasks.count())
    }
}

/// QR of `a` in tiles of b beside `devices` on a 1-core cluster: the factor and the kernels each
/// device ran.
fn qr_beside<T: Scalar>(
    spec: &str,
    devices: Vec<Arc<dyn Device>>,
    a: &faer::Mat<T>,
    b: usize,
) -> hetla::Result<(hetla::QrFactor<T>, Vec<hetla::Op>)> {
    let spec: ClusterSpec = spec.parse().unwrap();
    let p = Arc::new(Platform::with_devices(
        &spec,
        Backend::Faer,
        ModelStore::None,
        devices,
    )?);
    let clusters = p.clusters().len();
    let builder = hetla::Qr::new().platform(p).tile(b).inner_block(8);
    let plan = builder.plan(a.nrows(), a.ncols(), T::PRECISION)?;
    let mut factored = a.clone();
    let trace = builder.factor_planned(&plan, factored.as_mut())?;
    let on_devices = (trace.tasks.iter())
        .filter(|t| t.worker.0 >= clusters)
        .map(|t| t.op)
        .collect();
    Ok((builder.factor(a.as_ref())?, on_devices))
}

/// QR beside an emulated device, in every precision: MAGMA's hybrid in block columns (the panels on
/// the cluster, the applications of their reflectors on the device too, their T's as the kernels'
/// arguments), and the device alone (its panels by the device's kernel, their T's made from what it
/// copies back into their slots), with LAPACK's dqrt01 ratios for Q R = A and Q's orthogonality,
/// Q^H A = R, and least squares as faer's.
#[test]
fn qr_runs_its_panels_and_reflectors_on_a_device_alone_or_beside_a_cluster_in_every_precision() {
    fn hybrid<T: Scalar>(spec: &str) {
        let what = format!("{} beside {spec}", T::PRECISION);
        let device = || -> Vec<Arc<dyn Device>> { vec![Arc::new(EmulatedDevice::new(usize::MAX))] };
        let (m, n, b) = (260, 150, 40);
        let a = hetla::matgen::random_in::<T>(m, n, 5);
        let (qr, on_device) = qr_beside(spec, device(), &a, b).unwrap();
        let panels = on_device
            .iter()
            .filter(|&&op| op == hetla::Op::Geqrt)
            .count();
        let applications = on_device
            .iter()
            .filter(|&&op| op == hetla::Op::Unmqr)
            .count();
        // 4 block columns: 4 panels, 3 + 2 + 1 applications.
        let expected = match spec {
            "none" => (4, 6),
            _ => (0, applications.max(1)),
        };
        assert_eq!(
            (panels, applications, on_device.len()),
            (expected.0, expected.1, expected.0 + expected.1),
            "{what}: {on_device:?}"
        );
        let q = qr.thin_q().unwrap();
        let residual = hetla::check::qr_residual(a.as_ref(), q.as_ref(), qr.r().as_ref());
        let orthogonality = hetla::check::orthogonality(q.as_ref());
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        assert!(
            orthogonality < RESIDUAL_THRESHOLD,
            "{what}: {orthogonality}"
        );
        // Q^H A = R: the block columns' reflectors applied in order.
        let back = qr.apply_qh(a.as_ref()).unwrap();
        let epsilon = T::PRECISION.epsilon();
        let (diff, largest) = largest_difference(&back.subrows(0, n).to_owned(), &qr.r());
        assert!(diff <= 1e3 * epsilon * largest, "{what}: {diff}");
        let rhs = hetla::matgen::random_in::<T>(m, 2, 6);
        let x = qr.solve_least_squares(rhs.as_ref()).unwrap();
        let spec: ClusterSpec = spec.parse().unwrap();
        let p = Arc::new(
            Platform::with_devices(&spec, Backend::Faer, ModelStore::None, device()).unwrap(),
        );
        let y = hetla::Qr::new()
            .platform(p)
            .tile(b)
            .solve_least_squares(a.as_ref(), rhs.as_ref())
            .unwrap();
        let (diff, largest) = largest_difference(&x, &y);
        assert!(diff <= 1e4 * epsilon * largest.max(1.0), "{what}: {diff}");
        let alone = hetla::Qr::new().factor(a.as_ref()).unwrap();
        let z = alone.solve_least_squares(rhs.as_ref()).unwrap();
        let (diff, largest) = largest_difference(&x, &z);
        assert!(diff <= 1e4 * epsilon * largest.max(1.0), "{what}: {diff}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => hybrid::<T>("none"));
        if room_for_a_cluster_beside_a_device() {
            hetla_kernels::with_scalar!(precision, T => hybrid::<T>("1x1"));
        }
    }
}

/// QR beside real GPUs and on them alone in every precision (LAPACK's ?larfb as cuBLAS ?trmm, ?gemm
/// and ?geam on the block columns from each step's first row, ragged last block and inner blocks
/// included; alone, the panels by cuSOLVER's ?geqrf), with dqrt01's ratios.
#[test]
fn real_gpus_run_qr_panels_and_reflectors_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() || !room_for_a_cluster_beside_a_device() {
        return;
    }
    fn check<T: Scalar>() {
        let what = T::PRECISION;
        let (m, n, b) = (2500, 1100, 256);
        let a = hetla::matgen::random_in::<T>(m, n, 5);
        // Beside a cluster, then alone: cuSOLVER's ?geqrf on the panels, their T's made on the
        // host from the Gram matrices and heads copied back.
        for (spec, op) in [("1x1", hetla::Op::Unmqr), ("none", hetla::Op::Geqrt)] {
            let devices = GpuSelection::All.open(None).unwrap();
            let (qr, on_devices) = qr_beside(spec, devices, &a, b).unwrap();
            assert!(on_devices.contains(&op), "{what} {spec}: {on_devices:?}");
            let q = qr.thin_q().unwrap();
            let residual = hetla::check::qr_residual(a.as_ref(), q.as_ref(), qr.r().as_ref());
            assert!(
                residual < RESIDUAL_THRESHOLD,
                "{what} {spec}: residual {residual}"
            );
            let orthogonality = hetla::check::orthogonality(q.as_ref());
            assert!(
                orthogonality < RESIDUAL_THRESHOLD,
                "{what} {spec}: {orthogonality}"
            );
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// LDL^T beside real GPUs in every precision: Aasen's products (cuBLAS's ?gemm, H's terms with T's
/// block column uploaded) and interchanges (cuSOLVER's ?laswp) on the rows their arguments name,
/// ragged last block included, with dchksy_aa's ratio.
#[test]
fn real_gpus_run_ldlt_products_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() || !room_for_a_cluster_beside_a_device() {
        return;
    }
    fn check<T: Scalar>() {
        use hetla::Op;
        let devices = GpuSelection::All.open(None).unwrap();
        let count = ldlt_beside::<T>(devices, (1500, 256));
        for op in [Op::LdltColumnHessenberg, Op::LdltColumnUpdate, Op::LdltSwap] {
            let (on_devices, all) = count(op);
            assert!(
                on_devices > 0 && on_devices == all,
                "{}: {op} {on_devices} of {all}",
                T::PRECISION
            );
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// LU beside real GPUs in every precision (cuSOLVER's ?laswp, cuBLAS's ?trsm and ?gemm on the block
/// columns from each step's first row, ragged last block included).
#[test]
fn real_gpus_run_lu_updates_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() || !room_for_a_cluster_beside_a_device() {
        return;
    }
    fn check<T: Scalar>() {
        let devices = GpuSelection::All.open(None).unwrap();
        let (residual, on_devices, _, _) = lu_beside::<T>(devices, (3000, 384));
        let what = T::PRECISION;
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        assert!(ran_lu_updates(&on_devices), "{what}: {on_devices:?}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn a_budget_below_one_task_is_a_memory_error_before_any_work() {
    // GEMM pins three tiles; two do not fit: refused before any copy or kernel, beside a cluster
    // too (which would have factored the first tiles).
    for spec in ["none", "1x1"] {
        let devices = emulated(2, 2, 100);
        let p = platform(spec, &devices);
        let mut a = random_spd(400, 1);
        let before = a.clone();
        let err = Cholesky::new()
            .platform(p)
            .tile(100)
            .factor_in_place(a.as_mut())
            .unwrap_err();
        match err {
            Error::Runtime(hetla_runtime::Error::Memory(no_room)) => {
                assert_eq!(no_room.capacity, 2 * 100 * 100 * 8);
                assert_eq!(no_room.needed, 3 * 100 * 100 * 8);
                assert!(no_room.to_string().contains("--gpu-memory"), "{no_room}");
            }
            other => panic!("expected a memory error, got {other}"),
        }
        for d in &devices {
            assert_eq!(d.copies(), (0, 0), "{spec}");
            assert_eq!(d.kernels_by_stream().iter().sum::<usize>(), 0, "{spec}");
        }
        assert!(a == before, "{spec}: the matrix was changed");
    }
}

/// A Cholesky factorisation of order `n` in tiles of `b` on one emulated device holding `tiles`
/// tiles, from host memory: LAPACK's residual and the budget checked, the device's traffic
/// returned.
fn out_of_core_traffic<T: Scalar>(
    n: usize,
    b: usize,
    tiles: usize,
) -> hetla_runtime::DeviceTraffic {
    let what = T::PRECISION;
    let devices = vec![Arc::new(EmulatedDevice::new(
        tiles * b * b * size_of::<T>(),
    ))];
    let p = platform("none", &devices);
    let plan = Cholesky::new().tile(b).plan(n, T::PRECISION).unwrap();
    let (residual, trace) = factor_in::<T>(&p, n, b);
    assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
    assert!(devices[0].peak_bytes() <= devices[0].budget(), "{what}");
    let traffic = plan.device_traffic(&trace, &[devices[0].budget()]);
    let [gpu] = &traffic[..] else {
        panic!("{what}: {traffic:?}")
    };
    assert_eq!(gpu.buffers, tiles, "{what}");
    gpu.clone()
}

/// Out of core: a matrix of 55 lower tiles on one emulated device that holds 8, in every precision:
/// LAPACK's residual, the budget kept, and no fewer tile copies than the bound of its updates in
/// that budget (`Plan::device_traffic`), which is not trivial here.
#[test]
fn a_matrix_larger_than_the_budget_factors_in_every_precision_above_the_copies_bound() {
    fn out_of_core<T: Scalar>() {
        let what = T::PRECISION;
        let gpu = out_of_core_traffic::<T>(600, 60, 8);
        assert_eq!(gpu.updates, 165, "{what}");
        // Its 55 tiles come in and go out.
        assert_eq!(gpu.written, 55, "{what}");
        assert!(gpu.lower_bound >= 110.0, "{what}: {gpu:?}");
        assert!(gpu.copies as f64 >= gpu.lower_bound, "{what}: {gpu:?}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => out_of_core::<T>());
    }
}

/// Out of core with a budget of 1/1.3 and 1/2 of the matrix (300 lower tiles of a 24 x 24 grid on
/// 230 and 150 tiles), in every precision: the left-looking order and the eviction by next use copy
/// each tile about once in and once out, within 1.5x the bound (the right-looking order under
/// least-recently-used eviction made 898 and 4378 copies, 1.43x and 7.0x).
#[test]
fn out_of_core_runs_copy_within_one_and_a_half_times_the_bound_in_every_precision() {
    fn within<T: Scalar>() {
        let what = T::PRECISION;
        for tiles in [230, 150] {
            let gpu = out_of_core_traffic::<T>(480, 20, tiles);
            assert_eq!(gpu.written, 300, "{what}");
            let ratio = gpu.copies as f64 / gpu.lower_bound;
            let within = (1.0..=1.5).contains(&ratio);
            assert!(within, "{what}, {tiles} tiles: {gpu:?}");
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => within::<T>());
    }
}

#[test]
fn a_pivot_failure_on_a_device_names_the_global_column() {
    let devices = emulated(2, 64, 150);
    let p = platform("none", &devices);
    let mut a = random_spd(1200, 3);
    a[(700, 700)] = -1.0;
    let err = Cholesky::new()
        .platform(p.clone())
        .tile(150)
        .factor_in_place(a.as_mut())
        .unwrap_err();
    assert_eq!(err, Error::NotPositiveDefinite { column: 700 });
    // The platform and its devices serve the next run.
    let (residual, _) = factor(&p, 600, 150);
    assert!(residual < RESIDUAL_THRESHOLD);
}

#[test]
fn gpu_selections_parse_and_missing_gpus_are_named() {
    let parse = |s: &str| s.parse::<GpuSelection>();
    assert_eq!(parse("all").unwrap(), GpuSelection::All);
    assert_eq!(parse("NONE").unwrap(), GpuSelection::None);
    assert_eq!(parse("0,2").unwrap(), GpuSelection::List(vec![0, 2]));
    assert_eq!(parse("0-2").unwrap(), GpuSelection::List(vec![0, 1, 2]));
    assert_eq!(parse("emulated:3").unwrap(), GpuSelection::Emulated(3));
    assert_eq!(parse("emulated").unwrap(), GpuSelection::Emulated(1));
    for bad in ["emulated:0", "gpu", "emulated:x", ""] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
    let err = GpuSelection::List(vec![99])
        .open(None)
        .err()
        .expect("there is no GPU 99");
    assert!(err.to_string().contains("no GPU 99"), "{err}");
    assert!(GpuSelection::None.open(None).unwrap().is_empty());
    assert_eq!(
        GpuSelection::Emulated(2).open(Some(1 << 20)).unwrap().len(),
        2
    );
    // A platform with no cluster needs a device.
    let none: ClusterSpec = "none".parse().unwrap();
    assert!(Platform::with_store(&none, Backend::Faer, ModelStore::None).is_err());
}

/// Whether this machine has a CUDA GPU; when not, says why on stderr (past the test harness's
/// capture, so the skip shows) and the test returns.
#[allow(clippy::explicit_write)] // eprintln! would be captured by the test harness
fn gpus_here() -> bool {
    if !hetla_clusters::gpus().is_empty() {
        return true;
    }
    let why = if hetla_clusters::driver_present() {
        "the CUDA driver reports no device"
    } else {
        "no CUDA driver library (libcuda) on this machine"
    };
    writeln!(std::io::stderr(), "GPU test skipped: {why}").unwrap();
    false
}

/// This machine's GPUs, opened with the default budget; `None` (the skip said why) where it has
/// none.
fn real_gpus() -> Option<Vec<Arc<dyn Device>>> {
    gpus_here().then(|| GpuSelection::All.open(None).unwrap())
}

#[test]
fn real_gpus_factor_correctly_or_the_skip_says_why() {
    if !gpus_here() {
        return;
    }
    for spec in ["none", "auto"] {
        let spec: ClusterSpec = spec.parse().unwrap();
        let devices = GpuSelection::All.open(None).unwrap();
        let p = Arc::new(
            Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices).unwrap(),
        );
        for (n, b) in [(4096, 1024), (3000, 512)] {
            let (residual, trace) = factor(&p, n, b);
            assert!(
                residual < RESIDUAL_THRESHOLD,
                "{spec}: n = {n}: residual {residual}"
            );
            assert!(bytes_to_devices(&trace) > 0);
        }
    }
}

/// Factors a random Hermitian positive definite matrix in `T` on the real GPUs alone.
fn factor_on_real_gpus<T: Scalar>(n: usize, b: usize) -> f64 {
    let none: ClusterSpec = "none".parse().unwrap();
    let devices = GpuSelection::All.open(None).unwrap();
    let p =
        Arc::new(Platform::with_devices(&none, Backend::Faer, ModelStore::None, devices).unwrap());
    let a = random_hpd::<T>(n, 5);
    let mut l = a.clone();
    Cholesky::new()
        .platform(p)
        .tile(b)
        .factor_in_place(l.as_mut())
        .unwrap();
    cholesky_residual(a.as_ref(), l.as_ref(), Par::rayon(0))
}

#[test]
fn real_gpus_copy_page_locked_tiles_straight_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() {
        return;
    }
    fn check<T: Scalar>() {
        let none: ClusterSpec = "none".parse().unwrap();
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let devices = GpuSelection::All.open(None).unwrap();
            let p = Arc::new(
                Platform::with_devices(&none, Backend::Faer, ModelStore::None, devices).unwrap(),
            );
            let (n, b) = (3000, 512);
            let a = random_hpd::<T>(n, 5);
            let mut l = a.clone();
            let trace = Cholesky::new()
                .platform(p)
                .tile(b)
                .storage(storage)
                .host_memory(HostMemory::PageLocked)
                .factor_in_place_traced(l.as_mut())
                .unwrap();
            let locked = &trace.host_memory;
            assert!(locked.failed.is_none(), "{:?}", locked.failed);
            assert!(locked.bytes > 0);
            let residual = cholesky_residual(a.as_ref(), l.as_ref(), Par::rayon(0));
            assert!(
                residual < RESIDUAL_THRESHOLD,
                "{} {storage:?}: residual {residual}",
                T::PRECISION
            );
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn a_real_gpus_inverse_and_lu_solve_kernels_match_the_cpu_ones_in_every_precision_or_the_skip_says_why()
 {
    use hetla_kernels::{Op, Par as KPar};
    if !gpus_here() {
        return;
    }
    // Each of the five steps of the inverse, and the two triangular solves of an LU's solve, on
    // GPU 0 against faer's kernel on the same tiles, ragged shapes, the triangles of the
    // triangular tiles that a kernel must not read filled with values that would show it.
    fn check<T: Scalar>() {
        let gpu = hetla_kernels::cuda::GpuContext::new(0).unwrap();
        let (n, m) = (300, 170);
        let a = random_hpd::<T>(n, 7);
        let mut l = a.clone();
        Backend::Faer
            .run(Op::Potrf, &[], l.as_mut(), KPar::Seq)
            .unwrap();
        for j in 0..n {
            for i in 0..j {
                l[(i, j)] = T::from_f64(1e3 + i as f64);
            }
        }
        let b = hetla::matgen::random_in::<T>(m, n, 8);
        let panel = hetla::matgen::random_in::<T>(m, n, 9);
        // An LU's tile: both triangles and the diagonal used, the diagonal dominant.
        let mut f = hetla::matgen::random_in::<T>(n, n, 10);
        for i in 0..n {
            f[(i, i)] = T::from_f64(n as f64);
        }
        let cases: [(Op, Vec<faer::Mat<T>>, faer::Mat<T>); 7] = [
            (Op::Trtri, vec![], l.clone()),
            (Op::Lauum, vec![], l.clone()),
            (Op::SolveRight, vec![l.clone()], b.clone()),
            (Op::SyrkAdjoint, vec![panel], l.clone()),
            (Op::TrmmAdjoint, vec![l.clone()], b.transpose().to_owned()),
            (
                Op::SolveUnitLower,
                vec![f.clone()],
                b.transpose().to_owned(),
            ),
            (Op::SolveUpper, vec![f], b.transpose().to_owned()),
        ];
        let eps = 1e3 * T::PRECISION.epsilon();
        for (op, reads, write) in cases {
            let views: Vec<_> = reads.iter().map(|r| r.as_ref()).collect();
            let mut cpu = write.clone();
            Backend::Faer
                .run(op, &views, cpu.as_mut(), KPar::Seq)
                .unwrap();
            let tiles: Vec<_> = reads
                .iter()
                .map(|r| {
                    let mut t = gpu.alloc(T::PRECISION, r.nrows(), r.ncols()).unwrap();
                    gpu.upload(r.as_ref().into(), &mut t, None).unwrap();
                    t
                })
                .collect();
            let mut w = gpu
                .alloc(T::PRECISION, write.nrows(), write.ncols())
                .unwrap();
            gpu.upload(write.as_ref().into(), &mut w, None).unwrap();
            let refs: Vec<_> = tiles.iter().collect();
            gpu.run(op, &refs, &mut w).unwrap();
            let mut out = write.clone();
            gpu.download(&w, out.as_mut().into(), None).unwrap();
            let max_abs = |m: faer::MatRef<'_, T>| {
                let mut worst = 0.0f64;
                for j in 0..m.ncols() {
                    for i in 0..m.nrows() {
                        worst = worst.max(m[(i, j)].abs_f64());
                    }
                }
                worst
            };
            let scale = max_abs(cpu.as_ref());
            let diff = max_abs((&out - &cpu).as_ref()) / scale;
            assert!(
                diff < eps,
                "{} {op}: max difference {diff:e} of {scale:e}",
                T::PRECISION
            );
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn real_gpus_invert_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() {
        return;
    }
    // The inverse on the GPUs alone (every step on them), ragged edge tiles, the residual
    // ||A X - I|| / (n ||A|| ||X|| eps) as `hetla cholesky --inverse` checks it.
    fn check<T: Scalar>() {
        let none: ClusterSpec = "none".parse().unwrap();
        let devices = GpuSelection::All.open(None).unwrap();
        let p = Arc::new(
            Platform::with_devices(&none, Backend::Faer, ModelStore::None, devices).unwrap(),
        );
        let n = 3000;
        let a = random_hpd::<T>(n, 11);
        let factor = Cholesky::new()
            .platform(p)
            .tile(512)
            .factor(a.as_ref())
            .unwrap();
        let (x, trace) = factor.inverse_traced().unwrap();
        let trace = trace.unwrap();
        assert!(trace.tasks.iter().any(|t| t.op.name() == "lauum"));
        let residual = hetla::Plan::new(hetla::Algorithm::CholeskyInverse { n }, n, T::PRECISION)
            .unwrap()
            .residual(a.as_ref(), x.as_ref(), Par::rayon(0))
            .unwrap();
        assert!(
            residual < RESIDUAL_THRESHOLD,
            "{}: inverse residual {residual}",
            T::PRECISION
        );
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn real_gpus_factor_in_every_precision_or_the_skip_says_why() {
    if !gpus_here() {
        return;
    }
    // cuBLAS S/C/Z (TRSM with the adjoint, SYRK or HERK, GEMM) and cuSOLVER S/C/Z POTRF,
    // ragged edge tiles included.
    for (precision, residual) in [
        ("s", factor_on_real_gpus::<f32>(3000, 512)),
        ("c", factor_on_real_gpus::<c32>(3000, 512)),
        ("z", factor_on_real_gpus::<c64>(3000, 512)),
    ] {
        assert!(
            residual < RESIDUAL_THRESHOLD,
            "{precision}: residual {residual}"
        );
    }
}

#[test]
fn real_gpus_report_a_pivot_at_its_global_column_and_evict_under_a_small_budget() {
    if !gpus_here() {
        return;
    }
    let none: ClusterSpec = "none".parse().unwrap();
    let open = |budget| {
        let devices = GpuSelection::All.open(budget).unwrap();
        Arc::new(Platform::with_devices(&none, Backend::Faer, ModelStore::None, devices).unwrap())
    };
    // A planted negative pivot inside a tile a GPU factors.
    let p = open(None);
    let mut a = random_spd(3000, 3);
    a[(1700, 1700)] = -1.0;
    let err = Cholesky::new()
        .platform(p.clone())
        .tile(512)
        .factor_in_place(a.as_mut())
        .unwrap_err();
    assert_eq!(err, Error::NotPositiveDefinite { column: 1700 });
    // Room for 8 tiles of 512 (a 4096 matrix has 36 lower tiles): eviction and
    // write-back on the real device, ragged edge tiles too.
    let small = open(Some(8 * 512 * 512 * 8));
    let (residual, trace) = factor(&small, 4000, 512);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    assert!(bytes_to_devices(&trace) > 36 * 512 * 512 * 8);
}

#[test]
fn a_device_keeps_several_kernels_in_flight_and_none_reads_a_tile_before_its_upload() {
    // Uploads that take 2 ms each: a kernel queued behind them must wait on the device,
    // while the worker goes on popping and launching the next tasks.
    let (n, b) = (800, 100);
    let devices: Vec<Arc<EmulatedDevice>> = (0..2)
        .map(|_| {
            Arc::new(
                EmulatedDevice::new(usize::MAX)
                    .with_upload_delay(std::time::Duration::from_millis(2)),
            )
        })
        .collect();
    let p = platform("none", &devices);
    let (residual, trace) = factor(&p, n, b);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    assert_eq!(trace.tasks.len(), 120);
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.early_reads(), 0, "device {i}");
        assert!(
            (2..=hetla_runtime::QUEUE_DEPTH).contains(&d.peak_in_flight()),
            "device {i} had at most {} kernels in flight",
            d.peak_in_flight()
        );
    }
}

#[test]
fn a_queued_task_that_does_not_fit_waits_for_the_queue_instead_of_failing() {
    // Room for 4 tiles of 100 x 100: a GEMM pins 3, so two queued tasks rarely fit at
    // once; the worker must wait for its queue, not report the memory as too small.
    let (n, b) = (800, 100);
    let devices: Vec<Arc<EmulatedDevice>> = vec![Arc::new(
        EmulatedDevice::new(4 * b * b * 8).with_upload_delay(std::time::Duration::from_millis(1)),
    )];
    let p = platform("none", &devices);
    let (residual, _) = factor(&p, n, b);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    assert!(devices[0].peak_bytes() <= devices[0].budget());
    assert_eq!(devices[0].early_reads(), 0);
}

#[test]
fn a_device_goes_on_queueing_kernels_while_final_tiles_go_back_to_host_memory() {
    // Downloads that take 20 ms each: the tiles each task makes final are written back by
    // the device's write-back thread, so its worker keeps launching kernels meanwhile. (At 3 ms
    // the 36 write-backs could all end between two launches when the test ran beside the file's
    // others on 2 busy cores: CI failed once so, 2026-12-02.)
    let (n, b) = (800, 100);
    let devices = vec![Arc::new(
        EmulatedDevice::new(usize::MAX).with_download_delay(std::time::Duration::from_millis(20)),
    )];
    let p = platform("none", &devices);
    let (residual, trace) = factor(&p, n, b);
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    let back: usize = trace
        .transfers
        .iter()
        .filter(|t| t.transfer.to == HOST)
        .count();
    // Every tile of L (8 x 9 / 2) goes back once.
    assert_eq!(back, 36, "{back} write-backs");
    assert!(
        devices[0].launched_beside_downloads() > 0,
        "no kernel was queued during a write-back"
    );
    assert_eq!(devices[0].early_reads(), 0);
}

#[test]
fn the_inverse_runs_beside_a_device_and_on_the_device_alone() {
    if !room_for_a_cluster_beside_a_device() {
        return;
    }
    let devices = emulated(1, 64, 50);
    let p = platform("1x1", &devices);
    let a = random_spd(400, 3);
    let factor = Cholesky::new()
        .platform(p.clone())
        .tile(50)
        .factor(a.as_ref())
        .unwrap();
    let x = factor.inverse().unwrap();
    let r = &a * &x - faer::Mat::<f64>::identity(400, 400);
    assert!(r.norm_max() < 1e-12, "{}", r.norm_max());
    // Every step of the inverse has a GPU kernel: on the device alone, all of them run there.
    let alone = platform("none", &emulated(1, 64, 50));
    let factor = Cholesky::new()
        .platform(alone)
        .tile(50)
        .factor(a.as_ref())
        .unwrap();
    let (x, trace) = factor.inverse_traced().unwrap();
    let r = &a * &x - faer::Mat::<f64>::identity(400, 400);
    assert!(r.norm_max() < 1e-12, "{}", r.norm_max());
    let trace = trace.expect("a run on a platform is traced");
    for op in [
        "trtri",
        "lauum",
        "solve_right",
        "syrk_adjoint",
        "trmm_adjoint",
    ] {
        assert!(
            trace.tasks.iter().any(|t| t.op.name() == op),
            "no {op} task in the inverse's trace"
        );
    }
}

/// The inverse on a device of three compute streams, into the caller's matrix: its panel steps
/// (TRTRI, the panel solves) on the first stream, its updates on the others, LAPACK's residual.
#[test]
fn the_inverse_on_a_device_of_several_streams_keeps_its_panel_on_the_first_in_every_precision() {
    fn check<T: Scalar>() {
        let (n, b) = (400, 100);
        let (device, p) = three_streams();
        let a = random_hpd::<T>(n, 5);
        let factor = Cholesky::new()
            .platform(p)
            .tile(b)
            .factor(a.as_ref())
            .unwrap();
        let before = device.kernels_by_stream();
        let mut x = faer::Mat::<T>::zeros(n, n);
        let trace = factor.inverse_into(x.as_mut()).unwrap().expect("traced");
        let after = device.kernels_by_stream();
        let what = T::PRECISION;
        let panel = (trace.tasks.iter())
            .filter(|t| t.op.on_critical_path())
            .count();
        assert!(panel > 0 && panel < trace.tasks.len(), "{what}: {panel}");
        assert_eq!(after[0] - before[0], panel, "{what}: {after:?}");
        let others = after[1] + after[2] - before[1] - before[2];
        assert_eq!(others, trace.tasks.len() - panel, "{what}: {after:?}");
        let residual = hetla::Plan::new(hetla::Algorithm::CholeskyInverse { n }, b, what)
            .unwrap()
            .residual(a.as_ref(), x.as_ref(), Par::Seq)
            .unwrap();
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn automatic_storage_is_in_place_on_every_platform_with_a_device() {
    use hetla::Storage;
    let devices = emulated(1, 64, 64);
    let alone = platform("none", &devices);
    assert_eq!(
        Storage::Auto.resolve_on::<f64>(&alone, 512, 64),
        Storage::InPlace
    );
    // What the caller asks for is what runs.
    assert_eq!(
        Storage::TileMajor.resolve_on::<f64>(&alone, 512, 64),
        Storage::TileMajor
    );
    // Beside a cluster too: the GPU runs nearly every flop, and the copy is a pass each way.
    let beside = platform("1x1", &devices);
    assert_eq!(
        Storage::Auto.resolve_on::<f64>(&beside, 512, 64),
        Storage::InPlace
    );
    // Without a device the copy where it fits.
    let cores: ClusterSpec = "1x1".parse().unwrap();
    let cpus = Platform::with_store(&cores, Backend::Faer, ModelStore::None).unwrap();
    assert_eq!(
        Storage::Auto.resolve_on::<f64>(&cpus, 512, 64),
        Storage::TileMajor
    );
    // Both factor correctly.
    for p in [&alone, &beside] {
        let (residual, _) = factor(p, 300, 64);
        assert!(residual < 30.0, "residual {residual}");
    }
}

#[test]
fn a_resident_factorisation_times_no_copy_and_leaves_l_in_the_callers_matrix_in_every_precision() {
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        let (n, b) = (700, 100);
        for storage in [Storage::InPlace, Storage::TileMajor] {
            let device = Arc::new(EmulatedDevice::new(64 * b * b * size_of::<T>()));
            let platform = platform("none", std::slice::from_ref(&device));
            let a = random_hpd::<T>(n, 17);
            let mut l = a.clone();
            let trace = Cholesky::new()
                .platform(platform)
                .tile(b)
                .storage(storage)
                .resident(0)
                .factor_in_place_traced(l.as_mut())
                .unwrap();
            let residual = cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq);
            assert!(residual < RESIDUAL_THRESHOLD, "{p} {storage:?}: {residual}");
            // The 28 tiles were placed before the clock and flushed after it: the run moved
            // nothing it timed, yet the device copied every tile in and out.
            assert!(
                trace.transfers.is_empty(),
                "{p} {storage:?}: {:?}",
                trace.transfers.len()
            );
            let (direct, staged) = device.copies();
            assert!(
                direct + staged >= 2 * 28,
                "{p} {storage:?}: {direct} + {staged} copies"
            );
            let last_task = trace.tasks.iter().map(|e| e.end).fold(0.0, f64::max);
            assert!(trace.makespan >= last_task && trace.makespan > 0.0);
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
    // No GPU to be resident on: an error naming the option, before any work.
    let mut a = random_spd(300, 3);
    let error = Cholesky::new()
        .threads(1)
        .tile(100)
        .resident(0)
        .factor_in_place_traced(a.as_mut())
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::InvalidOption {
                option: "resident",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(a, random_spd(300, 3), "the matrix was touched");
    // A matrix larger than the GPU's budget (6 tiles of 100 x 100, room for 5): an error, not a
    // run that evicts inside its time.
    let device = Arc::new(EmulatedDevice::new(5 * 100 * 100 * 8));
    let error = Cholesky::new()
        .platform(platform("none", std::slice::from_ref(&device)))
        .tile(100)
        .resident(0)
        .factor_in_place_traced(a.as_mut())
        .unwrap_err();
    assert!(error.to_string().contains("budget"), "{error}");
    assert_eq!(device.copies(), (0, 0));
}

/// `a` (n x n) in the top-left corner of a column-major buffer with leading dimension `ld`, the
/// rest of the buffer `fill`.
fn in_buffer<T: Scalar>(a: faer::MatRef<'_, T>, ld: usize, cols: usize, fill: T) -> faer::Mat<T> {
    faer::Mat::from_fn(ld, cols, |i, j| {
        if i < a.nrows() && j < a.ncols() {
            a[(i, j)]
        } else {
            fill
        }
    })
}

#[test]
fn a_matrix_in_device_memory_is_factored_and_solved_where_it_lies_in_every_precision() {
    use hetla::DeviceMatrix;
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        let (n, b, ld, k) = (500, 100, 517, 3);
        // A cluster beside the device: the tiles have no host view, so it must take no task.
        let device = Arc::new(EmulatedDevice::new(64 * b * b * size_of::<T>()));
        let platform = platform("1x1", std::slice::from_ref(&device));
        let a = random_hpd::<T>(n, 29);
        // The device's memory is host memory: A inside a larger buffer (ld > n), a sentinel around
        // it and in its strict upper triangle, which the factorisation must not touch.
        let sentinel = T::from_f64(-7.0);
        let mut buffer = in_buffer(a.as_ref(), ld, n, sentinel);
        for j in 1..n {
            for i in 0..j {
                buffer[(i, j)] = sentinel;
            }
        }
        let stride = buffer.col_stride() as usize;
        let mut on_device = DeviceMatrix::emulated(buffer.as_mut().subrows_mut(0, n)).unwrap();
        assert_eq!(on_device.ld(), stride);
        assert!(on_device.ld() >= ld);
        let trace = Cholesky::new()
            .platform(platform.clone())
            .tile(b)
            .factor_device(&mut on_device)
            .unwrap();
        let l = buffer.as_ref().subrows(0, n);
        let residual = cholesky_residual(a.as_ref(), l, Par::Seq);
        assert!(residual < RESIDUAL_THRESHOLD, "{p}: residual {residual}");
        for j in 0..n {
            for i in (0..ld).filter(|&i| i < j || i >= n) {
                assert_eq!(buffer[(i, j)], sentinel, "{p}: ({i}, {j}) was written");
            }
        }
        // No copy through host memory: the 15 tiles were imported before the clock and exported
        // after it, within the device, and the timed run moved nothing.
        assert_eq!(device.copies(), (0, 0), "{p}");
        assert_eq!(device.device_copies(), 2 * 15, "{p}");
        assert!(trace.transfers.is_empty(), "{p}: {:?}", trace.transfers);
        let gpu = platform.clusters().len();
        assert!(
            trace.tasks.iter().all(|t| t.worker.0 == gpu),
            "{p}: a task ran on a CPU cluster"
        );
        // The solve with L and B (n x k, ld + 2) where they lie: L is read (imported, never
        // exported), B overwritten by X.
        let rhs = hetla::matgen::random_in::<T>(n, k, 31);
        let mut b_buffer = in_buffer(rhs.as_ref(), n + 2, k, sentinel);
        let l_on_device = DeviceMatrix::emulated(buffer.as_mut().subrows_mut(0, n)).unwrap();
        let mut b_on_device = DeviceMatrix::emulated(b_buffer.as_mut().subrows_mut(0, n)).unwrap();
        let before = device.device_copies();
        Cholesky::new()
            .platform(platform.clone())
            .tile(b)
            .solve_device(&l_on_device, &mut b_on_device)
            .unwrap();
        assert_eq!(device.device_copies() - before, 15 + 2 * 5, "{p}");
        let x = b_buffer.as_ref().subrows(0, n);
        // Against the solve from host memory (both backward stable, A well conditioned).
        let reference = Cholesky::new()
            .factor(a.as_ref())
            .unwrap()
            .solve(rhs.as_ref())
            .unwrap();
        let error = hetla::check::relative_error(x, reference.as_ref());
        assert!(error < 1e3 * p.epsilon(), "{p}: X differs by {error}");
        assert!((n..n + 2).all(|i| (0..k).all(|j| b_buffer[(i, j)] == sentinel)));
        assert_eq!(device.copies(), (0, 0), "{p}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

/// QR of a matrix in device memory (`Qr::factor_device`), in every precision: every task on the
/// device (its panels there, though a cluster is beside it), no host copy and one device copy each
/// way per block column, the rows below the matrix untouched; the factor and its T's make a
/// `QrFactor` on the host (`Qr::factor_from_block_columns`) with LAPACK's dqrt01 ratios, equal to
/// the same QR of a host matrix and with its least squares. Refused before any work: a wide matrix,
/// no GPU, block columns beyond the budget; T's not of the factor refused.
#[test]
fn qr_of_a_matrix_in_device_memory_factors_where_it_lies_in_every_precision() {
    use hetla::DeviceMatrix;
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        let (m, n, b, ld) = (230, 150, 40, 237);
        let device = Arc::new(EmulatedDevice::new(n * ld * size_of::<T>()));
        let platform = platform("1x1", std::slice::from_ref(&device));
        let a = hetla::matgen::random_in::<T>(m, n, 3);
        let sentinel = T::from_f64(-7.0);
        let qr = hetla::Qr::new()
            .platform(platform.clone())
            .tile(b)
            .inner_block(8);
        let mut buffer = in_buffer(a.as_ref(), ld, n, sentinel);
        let mut on_device = DeviceMatrix::emulated(buffer.as_mut().subrows_mut(0, m)).unwrap();
        let (trace, ts) = qr.factor_device(&mut on_device).unwrap();
        let columns = n.div_ceil(b);
        assert_eq!(ts.len(), columns, "{p}");
        ran_where_it_lies(&device, &platform, &trace, (hetla::Op::Geqrt, columns));
        assert!(
            (m..ld).all(|i| (0..n).all(|j| buffer[(i, j)] == sentinel)),
            "{p}"
        );
        let factored = buffer.as_ref().subrows(0, m).to_owned();
        let on_host = qr.factor(a.as_ref()).unwrap();
        let (diff, largest) = largest_difference(&factored, &on_host.storage().to_owned());
        assert!(diff <= 1e3 * p.epsilon() * largest, "{p}: {diff}");
        let wrong = qr.factor_from_block_columns(factored.clone(), ts[1..].to_vec());
        assert!(
            matches!(wrong, Err(Error::InvalidOption { option: "ts", .. })),
            "{p}"
        );
        let f = qr.factor_from_block_columns(factored, ts).unwrap();
        let q = f.thin_q().unwrap();
        let residual = hetla::check::qr_residual(a.as_ref(), q.as_ref(), f.r().as_ref());
        assert!(residual < RESIDUAL_THRESHOLD, "{p}: residual {residual}");
        let orthogonality = hetla::check::orthogonality(q.as_ref());
        assert!(orthogonality < RESIDUAL_THRESHOLD, "{p}: {orthogonality}");
        let rhs = hetla::matgen::random_in::<T>(m, 2, 6);
        let x = f.solve_least_squares(rhs.as_ref()).unwrap();
        let y = on_host.solve_least_squares(rhs.as_ref()).unwrap();
        let (diff, largest) = largest_difference(&x, &y);
        assert!(diff <= 1e4 * p.epsilon() * largest.max(1.0), "{p}: {diff}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
    // Refused before any work: wider than tall, no GPU on the platform, block columns beyond the
    // budget (4 of 40 columns, room for 3).
    let a = hetla::matgen::random_in::<f64>(230, 150, 3);
    let one = platform("none", &emulated(1, usize::MAX / (40 * 40 * 8), 40));
    let mut wide = a.transpose().to_owned();
    let error = hetla::Qr::new()
        .platform(one)
        .factor_device(&mut DeviceMatrix::emulated(wide.as_mut()).unwrap())
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidOption { option: "A", .. }),
        "{error}"
    );
    refused_without_a_gpu_or_room(&a, 3, |platform, m| {
        let qr = hetla::Qr::new().tile(40);
        let qr = match platform {
            Some(p) => qr.platform(p),
            None => qr.threads(1),
        };
        qr.factor_device(m).map(|_| ()).unwrap_err()
    });
}

/// A factorisation of a device matrix of `columns` block columns ran where it lies: every task on
/// the device (a cluster beside it idle), one `panel` per block column, nothing copied through the
/// host, one copy within the device each way per block column, nothing on a link.
fn ran_where_it_lies(
    device: &EmulatedDevice,
    platform: &Platform,
    trace: &Trace,
    (panel, columns): (hetla::Op, usize),
) {
    assert_eq!(device.copies(), (0, 0), "{panel}");
    assert_eq!(device.device_copies(), 2 * columns, "{panel}");
    assert!(trace.transfers.is_empty(), "{panel}: {:?}", trace.transfers);
    let gpu = platform.clusters().len();
    assert!(
        trace.tasks.iter().all(|t| t.worker.0 == gpu),
        "{panel}: a task ran on a CPU cluster"
    );
    let panels = (trace.tasks.iter()).filter(|t| t.op == panel).count();
    assert_eq!(panels, columns, "{panel}");
}

/// A factorisation of the 230-row `a` in device memory (`factor` given a platform, or none for the
/// builder's own, and the matrix; tiles of 40) refused before any work on a platform without a GPU
/// and on a device whose budget holds `room` block columns, fewer than it has: the matrix
/// untouched, nothing copied.
fn refused_without_a_gpu_or_room(
    a: &faer::Mat<f64>,
    room: usize,
    factor: impl Fn(Option<Arc<Platform>>, &mut hetla::DeviceMatrix<'_, f64>) -> Error,
) {
    let mut buffer = a.clone();
    let error = factor(
        None,
        &mut hetla::DeviceMatrix::emulated(buffer.as_mut()).unwrap(),
    );
    assert!(
        matches!(
            &error,
            Error::InvalidOption {
                option: "platform",
                ..
            }
        ),
        "{error}"
    );
    let small = Arc::new(EmulatedDevice::new(room * 230 * 40 * 8));
    let error = factor(
        Some(platform("none", std::slice::from_ref(&small))),
        &mut hetla::DeviceMatrix::emulated(buffer.as_mut()).unwrap(),
    );
    assert!(error.to_string().contains("budget"), "{error}");
    assert_eq!(&buffer, a, "the matrix was touched");
    assert_eq!(small.device_copies(), 0);
}

/// LU of a matrix in an emulated device's memory where it lies, in every precision, a cluster
/// beside the device: every task on the device (a panel per block column), no copy through host
/// memory (each block column copied within the device before the clock and back after it), the rows
/// below the matrix (ld > n) untouched, the interchanges and factors of the cluster alone; a zero
/// column reported at its global column; the refusals before any work.
#[test]
fn lu_of_a_matrix_in_device_memory_factors_where_it_lies_in_every_precision() {
    use hetla::DeviceMatrix;
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        let (n, b, ld) = (230, 40, 237);
        let device = Arc::new(EmulatedDevice::new(n * ld * size_of::<T>()));
        let platform = platform("1x1", std::slice::from_ref(&device));
        let a = hetla::matgen::random_in::<T>(n, n, 3);
        let sentinel = T::from_f64(-7.0);
        let lu_of = |m: &faer::Mat<T>| {
            let mut buffer = in_buffer(m.as_ref(), ld, n, sentinel);
            let mut on_device = DeviceMatrix::emulated(buffer.as_mut().subrows_mut(0, n)).unwrap();
            let (trace, ipiv, zero) = hetla::Lu::new()
                .platform(platform.clone())
                .tile(b)
                .factor_device(&mut on_device)
                .unwrap();
            (buffer, trace, ipiv, zero)
        };
        let (buffer, trace, ipiv, zero) = lu_of(&a);
        assert_eq!(zero, None, "{p}");
        let lu = buffer.as_ref().subrows(0, n).to_owned();
        let residual = hetla::check::lu_residual(a.as_ref(), lu.as_ref(), &ipiv);
        assert!(residual < RESIDUAL_THRESHOLD, "{p}: residual {residual}");
        assert!(
            (n..ld).all(|i| (0..n).all(|j| buffer[(i, j)] == sentinel)),
            "{p}"
        );
        let (_, alone, ipiv_alone, _) = lu_on("1x1", Vec::new(), &a, b);
        assert_eq!(ipiv, ipiv_alone, "{p}");
        let (diff, largest) = largest_difference(&lu, &alone);
        assert!(diff <= 1e3 * p.epsilon() * largest, "{p}: {diff}");
        let columns = n.div_ceil(b);
        ran_where_it_lies(&device, &platform, &trace, (hetla::Op::LuPanel, columns));
        // The solve with the factor and B (n x 3, ld n + 2) where they lie: X over B, the rows
        // below untouched, as the host's solve with its own factor.
        let (mut buffer, ipiv) = (buffer, ipiv);
        let rhs = hetla::matgen::random_in::<T>(n, 3, 31);
        let mut b_buffer = in_buffer(rhs.as_ref(), n + 2, 3, sentinel);
        let solve = |buffer: &mut faer::Mat<T>, b_buffer: &mut faer::Mat<T>, ipiv: &[usize]| {
            hetla::Lu::new().platform(platform.clone()).solve_device(
                &DeviceMatrix::emulated(buffer.as_mut().subrows_mut(0, n)).unwrap(),
                ipiv,
                &mut DeviceMatrix::emulated(b_buffer.as_mut().subrows_mut(0, n)).unwrap(),
            )
        };
        solve(&mut buffer, &mut b_buffer, &ipiv).unwrap();
        let reference = hetla::Lu::new().tile(b).factor(a.as_ref()).unwrap();
        let reference = reference.solve(rhs.as_ref()).unwrap();
        let error =
            hetla::check::relative_error(b_buffer.as_ref().subrows(0, n), reference.as_ref());
        assert!(error < 1e4 * p.epsilon(), "{p}: X differs by {error}");
        assert!(
            (n..n + 2).all(|i| (0..3).all(|j| b_buffer[(i, j)] == sentinel)),
            "{p}"
        );
        assert_eq!(device.copies(), (0, 0), "{p}");
        // Refused before any work: interchanges not of this order or outside their rows.
        let before = b_buffer.clone();
        for wrong in [&ipiv[1..], &[&[n][..], &ipiv[1..]].concat()] {
            let error = solve(&mut buffer, &mut b_buffer, wrong).unwrap_err();
            assert!(
                matches!(error, Error::InvalidOption { option: "ipiv", .. }),
                "{p}: {error}"
            );
        }
        assert!(b_buffer == before, "{p}: a refused solve wrote B");
        for column in [55, n - 3] {
            let mut singular = a.clone();
            singular.col_mut(column).fill(T::from_f64(0.0));
            let (mut factor, _, ipiv, zero) = lu_of(&singular);
            assert_eq!(zero, Some(column), "{p}");
            let error = solve(&mut factor, &mut b_buffer, &ipiv).unwrap_err();
            assert!(
                matches!(error, Error::Singular { column: c } if c == column),
                "{p}: {error}"
            );
            assert!(b_buffer == before, "{p}: a refused solve wrote B");
        }
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
    // Refused before any work: no GPU on the platform, block columns beyond the budget (6 of 40
    // columns, room for 5), not square; an empty matrix has nothing to do.
    let a = hetla::matgen::random_in::<f64>(230, 230, 3);
    let mut buffer = a.clone();
    refused_without_a_gpu_or_room(&a, 5, |platform, m| {
        let lu = hetla::Lu::new().tile(40);
        let lu = match platform {
            Some(p) => lu.platform(p),
            None => lu.threads(1),
        };
        lu.factor_device(m).map(|_| ()).unwrap_err()
    });
    let one = platform("none", &emulated(1, usize::MAX / (40 * 40 * 8), 40));
    let error = hetla::Lu::new()
        .platform(one.clone())
        .factor_device(&mut DeviceMatrix::emulated(buffer.as_mut().subcols_mut(0, 229)).unwrap())
        .unwrap_err();
    assert!(
        matches!(error, Error::NotSquare { what: "A", .. }),
        "{error}"
    );
    assert_eq!(buffer, a, "the matrix was touched");
    let mut empty = faer::Mat::<f64>::zeros(0, 0);
    let (_, ipiv, zero) = hetla::Lu::new()
        .platform(one)
        .factor_device(&mut DeviceMatrix::emulated(empty.as_mut()).unwrap())
        .unwrap();
    assert_eq!((ipiv.len(), zero), (0, None));
}

#[test]
fn a_device_matrix_that_cannot_be_factored_where_it_lies_is_an_error_before_any_work() {
    use hetla::DeviceMatrix;
    let a = random_spd(300, 3);
    let mut buffer = a.clone();
    // No GPU on the platform.
    let error = Cholesky::new()
        .threads(1)
        .tile(100)
        .factor_device(&mut DeviceMatrix::emulated(buffer.as_mut()).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::InvalidOption {
                option: "resident",
                ..
            }
        ),
        "{error}"
    );
    // GPU 1 of a platform with one.
    let device = Arc::new(EmulatedDevice::new(64 * 100 * 100 * 8));
    let one = platform("none", std::slice::from_ref(&device));
    let error = Cholesky::new()
        .platform(one.clone())
        .tile(100)
        .resident(1)
        .factor_device(&mut DeviceMatrix::emulated(buffer.as_mut()).unwrap())
        .unwrap_err();
    assert!(error.to_string().contains("GPU 1"), "{error}");
    // Larger than the budget (6 tiles, room for 5).
    let small = Arc::new(EmulatedDevice::new(5 * 100 * 100 * 8));
    let error = Cholesky::new()
        .platform(platform("none", std::slice::from_ref(&small)))
        .tile(100)
        .factor_device(&mut DeviceMatrix::emulated(buffer.as_mut()).unwrap())
        .unwrap_err();
    assert!(error.to_string().contains("budget"), "{error}");
    // Not square; B's rows not L's order; a leading dimension below the rows.
    let error = Cholesky::new()
        .platform(one.clone())
        .factor_device(&mut DeviceMatrix::emulated(buffer.as_mut().subcols_mut(0, 299)).unwrap())
        .unwrap_err();
    assert!(
        matches!(error, Error::NotSquare { what: "A", .. }),
        "{error}"
    );
    let mut rhs = faer::Mat::<f64>::zeros(299, 2);
    let error = Cholesky::new()
        .platform(one.clone())
        .solve_device(
            &DeviceMatrix::emulated(buffer.as_mut()).unwrap(),
            &mut DeviceMatrix::emulated(rhs.as_mut()).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(error, Error::DimensionMismatch { n: 300, rows: 299 }),
        "{error}"
    );
    // SAFETY: never used: the constructor refuses it.
    let error = unsafe { DeviceMatrix::<f64>::from_raw_parts(8, 10, 10, 9) }.unwrap_err();
    assert!(error.to_string().contains("leading dimension 9"), "{error}");
    // A row-major view.
    let mut t = faer::Mat::<f64>::zeros(4, 4);
    let error = DeviceMatrix::emulated(t.as_mut().transpose_mut()).unwrap_err();
    assert!(error.to_string().contains("column-major"), "{error}");
    assert_eq!(buffer, a, "the matrix was touched");
    assert_eq!((device.device_copies(), small.device_copies()), (0, 0));
    // Not positive definite at column 250: the error names it (the run did start).
    let mut bad = a.clone();
    bad[(250, 250)] = -1.0;
    let error = Cholesky::new()
        .platform(one.clone())
        .tile(100)
        .factor_device(&mut DeviceMatrix::emulated(bad.as_mut()).unwrap())
        .unwrap_err();
    assert!(
        matches!(error, Error::NotPositiveDefinite { column: 250 }),
        "{error}"
    );
    // An empty matrix: nothing to do.
    let mut empty = faer::Mat::<f64>::zeros(0, 0);
    Cholesky::new()
        .platform(one)
        .factor_device(&mut DeviceMatrix::emulated(empty.as_mut()).unwrap())
        .unwrap();
}

#[cfg(feature = "cuda")]
#[test]
fn a_real_gpu_factors_and_solves_its_own_buffer_and_refuses_host_memory_or_the_skip_says_why() {
    use hetla::DeviceMatrix;
    use hetla::cudarc::driver::CudaContext;
    if !gpus_here() {
        return;
    }
    let none: ClusterSpec = "none".parse().unwrap();
    let devices = GpuSelection::All.open(None).unwrap();
    let p =
        Arc::new(Platform::with_devices(&none, Backend::Faer, ModelStore::None, devices).unwrap());
    let (n, ld, k) = (3000, 3008, 4);
    let a = random_spd(n, 11);
    let host = in_buffer(a.as_ref(), ld, n, 0.0);
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let column_major = |m: &faer::Mat<f64>| -> Vec<f64> {
        (0..m.ncols())
            .flat_map(|j| m.col(j).iter().copied().collect::<Vec<_>>())
            .collect()
    };
    let mut buffer = stream.clone_htod(&column_major(&host)).unwrap();
    let trace = Cholesky::new()
        .platform(p.clone())
        .tile(512)
        .factor_device(&mut DeviceMatrix::<f64>::cuda(&mut buffer, n, n, ld).unwrap())
        .unwrap();
    assert!(trace.transfers.is_empty());
    let back = stream.clone_dtoh(&buffer).unwrap();
    let l = faer::MatRef::from_column_major_slice_with_stride(&back, n, n, ld);
    let residual = cholesky_residual(a.as_ref(), l, Par::rayon(0));
    assert!(residual < RESIDUAL_THRESHOLD, "residual {residual}");
    let rhs = hetla::matgen::random_in::<f64>(n, k, 3);
    let mut b = stream.clone_htod(&column_major(&rhs)).unwrap();
    Cholesky::new()
        .platform(p.clone())
        .tile(512)
        .solve_device(
            &DeviceMatrix::<f64>::cuda(&mut buffer, n, n, ld).unwrap(),
            &mut DeviceMatrix::<f64>::cuda(&mut b, n, k, n).unwrap(),
        )
        .unwrap();
    let x = stream.clone_dtoh(&b).unwrap();
    let x = faer::MatRef::from_column_major_slice(&x, n, k);
    let error = hetla::check::solve_backward_error(a.as_ref(), x, rhs.as_ref(), Par::rayon(0));
    assert!(error < 1e-12, "backward error {error}");
    // C <- A B on the GPU's own buffers: every product there, C left in its buffer.
    let (m, k) = (700, 300);
    let (ga, gb) = (
        hetla::matgen::random_in::<f64>(m, k, 5),
        hetla::matgen::random_in::<f64>(k, m, 6),
    );
    let mut expected = faer::Mat::<f64>::zeros(m, m);
    hetla::Gemm::new()
        .tile(256)
        .run(&p, ga.as_ref(), gb.as_ref(), expected.as_mut())
        .unwrap();
    let (mut da, mut db) = (
        stream.clone_htod(&column_major(&ga)).unwrap(),
        stream.clone_htod(&column_major(&gb)).unwrap(),
    );
    let mut dc = stream.alloc_zeros::<f64>(m * m).unwrap();
    let (_, trace) = hetla::Gemm::new()
        .tile(256)
        .run_device(
            &p,
            &DeviceMatrix::<f64>::cuda(&mut da, m, k, m).unwrap(),
            &DeviceMatrix::<f64>::cuda(&mut db, k, m, k).unwrap(),
            &mut DeviceMatrix::<f64>::cuda(&mut dc, m, m, m).unwrap(),
        )
        .unwrap();
    assert!(trace.transfers.is_empty());
    let c = stream.clone_dtoh(&dc).unwrap();
    let c = faer::MatRef::from_column_major_slice(&c, m, m);
    let error = hetla::check::relative_error(c, expected.as_ref());
    assert!(error < 1e-13, "product differs by {error}");
    // LU of a general matrix in the GPU's buffer where it lies (every task on the GPU, the panels
    // by cuSOLVER's ?getrf): LAPACK's residual with the interchanges it returns.
    let general = hetla::matgen::random_in::<f64>(n, n, 13);
    let mut buffer = stream
        .clone_htod(&column_major(&in_buffer(general.as_ref(), ld, n, 0.0)))
        .unwrap();
    let (trace, ipiv, zero) = hetla::Lu::new()
        .platform(p.clone())
        .tile(512)
        .factor_device(&mut DeviceMatrix::<f64>::cuda(&mut buffer, n, n, ld).unwrap())
        .unwrap();
    assert!(trace.transfers.is_empty() && zero.is_none());
    let back = stream.clone_dtoh(&buffer).unwrap();
    let lu = faer::MatRef::from_column_major_slice_with_stride(&back, n, n, ld);
    let residual = hetla::check::lu_residual(general.as_ref(), lu, &ipiv);
    assert!(residual < RESIDUAL_THRESHOLD, "LU residual {residual}");
    // Its solve where both lie (cuSOLVER's ?laswp, two cuBLAS ?trsm).
    let mut b = stream.clone_htod(&column_major(&rhs)).unwrap();
    hetla::Lu::new()
        .platform(p.clone())
        .solve_device(
            &DeviceMatrix::<f64>::cuda(&mut buffer, n, n, ld).unwrap(),
            &ipiv,
            &mut DeviceMatrix::<f64>::cuda(&mut b, n, rhs.ncols(), n).unwrap(),
        )
        .unwrap();
    let x = stream.clone_dtoh(&b).unwrap();
    let x = faer::MatRef::from_column_major_slice(&x, n, rhs.ncols());
    let error =
        hetla::check::solve_backward_error(general.as_ref(), x, rhs.as_ref(), Par::rayon(0));
    assert!(error < 1e-12, "LU solve's backward error {error}");
    // Host memory is not the GPU's, and a buffer too small for its matrix is refused.
    let mut on_host = a.clone();
    let error = Cholesky::new()
        .platform(p)
        .factor_device(&mut DeviceMatrix::emulated(on_host.as_mut()).unwrap())
        .unwrap_err();
    assert!(error.to_string().contains("not device memory"), "{error}");
    assert!(DeviceMatrix::<f64>::cuda(&mut b, n, k + 1, n).is_err());
}

/// A matrix with a non-finite entry factored in place on `platform` in tiles of `b`, the entry in
/// the last tile row (so that the run has factored columns before the check reaches it): the error
/// names the entry, and the matrix is as it was (the check beside the run holds every write).
fn refused_beside_the_run<T: Scalar>(platform: &Arc<Platform>, n: usize, b: usize) {
    let (row, col) = (n - 2, n - 3);
    let mut a = random_hpd::<T>(n, 11);
    a[(row, col)] = T::from_f64(f64::NAN);
    let mut l = a.clone();
    let err = Cholesky::new()
        .platform(platform.clone())
        .tile(b)
        .factor_in_place_traced(l.as_mut())
        .unwrap_err();
    assert!(
        matches!(err, Error::NonFinite { what: "A", row: r, col: c, .. } if (r, c) == (row, col)),
        "{} {err}",
        T::PRECISION.letter()
    );
    for j in 0..n {
        for i in 0..n {
            let (x, y) = (l[(i, j)], a[(i, j)]);
            assert!(
                x == y || (i, j) == (row, col),
                "{}: entry ({i}, {j}) written ({} for {})",
                T::PRECISION.letter(),
                x.to_c64(),
                y.to_c64()
            );
        }
    }
}

#[test]
fn an_input_check_beside_the_run_refuses_a_nan_before_any_host_memory_is_written() {
    // A device alone, one with room for 4 tiles (evictions write tiles back during the run), and
    // a device beside a cluster (its tasks write the matrix in place).
    let (n, b) = (600, 100);
    for (spec, budget) in [("none", 64), ("none", 4), ("1x1", 64)] {
        if spec != "none" && !room_for_a_cluster_beside_a_device() {
            continue;
        }
        let p = platform(spec, &emulated(1, budget, b));
        refused_beside_the_run::<f32>(&p, n, b);
        refused_beside_the_run::<f64>(&p, n, b);
        refused_beside_the_run::<c32>(&p, n, b);
        refused_beside_the_run::<c64>(&p, n, b);
        // The same platform then factors a good matrix as before.
        let (residual, trace) = factor(&p, n, b);
        assert!(residual < RESIDUAL_THRESHOLD, "{spec}: residual {residual}");
        assert_eq!(trace.tasks.len(), 56, "{spec}");
    }
}

/// Tensor math on an emulated device: an f32 (c32) Cholesky and LU whose trailing products are
/// rounded to TF32 or BF16 carry that rounding's error (residual ratios of f32 far above 30, within
/// the short mantissa's), none with the math off or on a platform of CPU clusters alone; and the
/// mixed solves of f64 (c64) systems refine such factors to double's backward error.
#[test]
fn tensor_math_rounds_single_products_on_devices_and_refinement_restores_double_accuracy() {
    let device = vec![Arc::new(EmulatedDevice::new(usize::MAX))];
    check_tensor_math(&platform("none", &device), (240, 40));
    // A run's products on tensor cores teach the f32 models nothing (they are another kernel);
    // the same run with the math off does.
    let p = platform("none", &[Arc::new(EmulatedDevice::new(usize::MAX))]);
    let key =
        hetla_runtime::KernelKey::square(hetla::Op::GemmNt, 40).in_precision(hetla::Precision::S);
    let gpu = hetla_runtime::ResourceClass::Gpu {
        name: "emulated".into(),
    };
    let samples = || p.models().get(&key, &gpu).map_or(0, |s| s.samples);
    for (math, learned) in [
        (hetla::TensorMath::Tf32, false),
        (hetla::TensorMath::Off, true),
    ] {
        let mut l = random_hpd::<f32>(240, 2);
        (Cholesky::new()
            .platform(p.clone())
            .tile(40)
            .tensor_math(math))
        .factor_in_place(l.as_mut())
        .unwrap();
        assert_eq!(samples() > 0, learned, "{math}: {} samples", samples());
    }
}

/// [`tensor_math_rounds_single_products_on_devices_and_refinement_restores_double_accuracy`] on
/// real GPUs: cuBLAS's GEMM with the fast compute types, its error that of the short mantissa.
#[test]
fn real_gpus_compute_single_products_on_tensor_cores_or_the_skip_says_why() {
    if !gpus_here() {
        return;
    }
    let devices = GpuSelection::All.open(None).unwrap();
    let spec: ClusterSpec = "none".parse().unwrap();
    let p = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices).unwrap();
    check_tensor_math(&Arc::new(p), (1024, 256));
}

/// The checks of the tensor-math tests on `gpu` (devices alone) in order n, tiles of b.
fn check_tensor_math(gpu: &Arc<Platform>, (n, b): (usize, usize)) {
    use hetla::{Lu, RefinementPath, TensorMath};
    fn cholesky_ratio<T: Scalar>(p: &Arc<Platform>, math: TensorMath, n: usize, b: usize) -> f64 {
        // G G^H + (n / 4) I: the updates are of A's size (a diagonally dominant matrix's are
        // small beside its diagonal, and hide their rounding).
        let g = hetla::matgen::random_in::<T>(n, n, 5);
        let mut a = &g * g.adjoint();
        for i in 0..n {
            a[(i, i)] += T::from_f64(n as f64 / 4.0);
        }
        let mut l = a.clone();
        (Cholesky::new()
            .platform(p.clone())
            .tile(b)
            .tensor_math(math))
        .factor_in_place_traced(l.as_mut())
        .unwrap();
        cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq)
    }
    fn lu_ratio<T: Scalar>(p: &Arc<Platform>, math: TensorMath, n: usize, b: usize) -> f64 {
        let a = hetla::matgen::random_in::<T>(n, n, 9);
        let factor = (hetla::Lu::new()
            .platform(p.clone())
            .tile(b)
            .tensor_math(math))
        .factor(a.as_ref())
        .unwrap();
        hetla::check::lu_residual(a.as_ref(), factor.storage(), factor.pivots())
    }
    // The short mantissa's unit roundoff over f32's eps: how much larger its ratios may be.
    let scale = |m: TensorMath| m.unit_roundoff() / f64::from(f32::EPSILON);
    let cpu = platform("1x1", &[]);
    for (math, what) in [(TensorMath::Tf32, "tf32"), (TensorMath::Bf16, "bf16")] {
        for (ratio, precision) in [
            (
                cholesky_ratio::<f32> as fn(&_, _, _, _) -> f64,
                "s Cholesky",
            ),
            (cholesky_ratio::<c32>, "c Cholesky"),
            (lu_ratio::<f32>, "s LU"),
            (lu_ratio::<c32>, "c LU"),
        ] {
            let (off, on) = (ratio(gpu, TensorMath::Off, n, b), ratio(gpu, math, n, b));
            let cpu_on = ratio(&cpu, math, n, b);
            let context = format!("{precision} {what}: off {off:.4}, on {on:.4}, cpu {cpu_on:.4}");
            assert!(
                off < RESIDUAL_THRESHOLD && cpu_on < RESIDUAL_THRESHOLD,
                "{context}"
            );
            // The rounded products' error: hundreds of times f32's (8192 and 65536 times its unit
            // roundoff, spread over the residual's n eps scale).
            assert!(on > 50.0 * off.max(1e-3), "{context}: not rounded");
            assert!(on < RESIDUAL_THRESHOLD * scale(math), "{context}");
        }
    }
    // Mixed solves refine the rounded factors to double's backward error.
    let spd = random_spd(n, 3);
    let general = hetla::matgen::random_in::<c64>(n, n, 4);
    let rhs = faer::Mat::from_fn(n, 2, |i, j| (i as f64 * 0.3 + j as f64).cos());
    let zrhs = faer::Mat::from_fn(n, 1, |i, _| c64::new(1.0, i as f64 * 1e-2));
    for math in [TensorMath::Tf32, TensorMath::Bf16] {
        let (x, how) = (Cholesky::new()
            .platform(gpu.clone())
            .tile(b)
            .tensor_math(math))
        .solve_refined(spd.as_ref(), rhs.as_ref())
        .unwrap();
        assert_eq!(how.path, RefinementPath::Mixed, "{math}: {how:?}");
        // Factored and refined on the GPU, whose budget holds A and the factor.
        assert_eq!(how.device, Some(0), "{math}: {how:?}");
        let berr = hetla::check::backward_error(spd.as_ref(), x.as_ref(), rhs.as_ref());
        assert!(
            berr < RESIDUAL_THRESHOLD,
            "d Cholesky {math}: {berr:e} {how:?}"
        );
        let (x, how) = (Lu::new().platform(gpu.clone()).tile(b).tensor_math(math))
            .solve_refined(general.as_ref(), zrhs.as_ref())
            .unwrap();
        assert_eq!(how.factored_in, hetla::Precision::C, "{math}: {how:?}");
        let berr = hetla::check::backward_error(general.as_ref(), x.as_ref(), zrhs.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "z LU {math}: {berr:e} {how:?}");
    }
}

/// A mixed SPD solve on a platform whose GPU's budget holds A, the single factor and a run's copies
/// factors and refines there (issue 74 item 5), in d and z: A whole in the working precision on the
/// device (made whole from the lower triangle: the junk above it is not read), the factor resident,
/// each step's residual and solves on the device; LAPACK's backward error, the answer of the host's
/// refinement; GMRES-IR with its widened preconditioner on the device where the single factor needs
/// a raised diagonal (d) or classical refinement stalls (z); a fallback to double that says why;
/// and the host's refinement where the budget is too small.
#[test]
fn mixed_spd_solves_factor_and_refine_on_a_device_whose_budget_holds_them_in_d_and_z() {
    use hetla::RefinementPath;
    fn check<T: hetla::Refinable>() {
        let what = T::PRECISION;
        let n = 240;
        let device = Arc::new(EmulatedDevice::new(usize::MAX));
        let on_gpu = Cholesky::new()
            .platform(platform("none", std::slice::from_ref(&device)))
            .tile(60);
        let on_host = Cholesky::new().platform(platform("1x1", &[])).tile(60);
        let a = random_hpd::<T>(n, 5);
        let mut given = a.clone();
        for j in 1..n {
            for i in 0..j {
                given[(i, j)] = T::from_parts(1e3, -7.0);
            }
        }
        let b = faer::Mat::from_fn(n, 2, |i, j| T::from_parts((i + j) as f64 * 0.1, 1.0));
        let (x, how) = on_gpu.solve_refined(given.as_ref(), b.as_ref()).unwrap();
        assert_eq!(
            (&how.path, how.device),
            (&RefinementPath::Mixed, Some(0)),
            "{what}"
        );
        assert!(
            how.factor_seconds.is_some_and(|s| s > 0.0),
            "{what}: {how:?}"
        );
        assert!(
            device.device_copies() > 0,
            "{what}: nothing ran on the device"
        );
        let berr = hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
        let (y, host) = on_host.solve_refined(given.as_ref(), b.as_ref()).unwrap();
        mixed_on_the_host(&host);
        let (diff, scale) = largest_difference(&x, &y);
        assert!(diff <= 1e-12 * scale, "{what}: {diff:e} of {scale:e}");
        // A GPU without hetla's elementwise kernels (no NVRTC): A made whole and rounded on the
        // host, written, refined on the device alike.
        let on_plain = |tile: usize, a: &faer::Mat<T>, b: &faer::Mat<T>| {
            let plain = Arc::new(EmulatedDevice::new(usize::MAX).without_elementwise());
            let cholesky = Cholesky::new().platform(platform("none", &[plain]));
            cholesky
                .tile(tile)
                .solve_refined(a.as_ref(), b.as_ref())
                .unwrap()
        };
        let (z, how) = on_plain(60, &given, &b);
        assert_eq!(
            (&how.path, how.device),
            (&RefinementPath::Mixed, Some(0)),
            "{what}"
        );
        let (diff, scale) = largest_difference(&x, &z);
        assert!(diff <= 1e-12 * scale, "{what}: {diff:e} of {scale:e}");
        // A budget that holds A but not its copies and the factor: refined on the host.
        let small = EmulatedDevice::new(2 * n * n * what.bytes());
        let (_, how) = Cholesky::new()
            .platform(platform("1x1", &[Arc::new(small)]))
            .tile(60)
            .solve_refined(a.as_ref(), b.as_ref())
            .unwrap();
        mixed_on_the_host(&how);
        // M^H M with M's last column nearly its first (condition about 1e14): GMRES-IR.
        let n = 300;
        let m = general_test_matrix::<T>(n, Some(1e-7));
        let hard = m.adjoint() * &m;
        let rhs = faer::Mat::from_fn(n, 1, |i, _| T::from_parts(1.0 + i as f64 * 1e-3, 0.5));
        let on_gpu = on_gpu.tile(100);
        let (x, how) = on_gpu.solve_refined(hard.as_ref(), rhs.as_ref()).unwrap();
        let RefinementPath::GmresIr { shift, .. } = how.path else {
            panic!("{what}: {how:?}")
        };
        assert_eq!(
            (shift > 0.0, how.device),
            (!what.is_complex(), Some(0)),
            "{what}"
        );
        let berr = hetla::check::backward_error(hard.as_ref(), x.as_ref(), rhs.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
        // The raised diagonal rounded on the host, where the device has no elementwise kernels.
        let (y, again) = on_plain(100, &hard, &rhs);
        assert_eq!(again.path, how.path, "{what}");
        let (diff, scale) = largest_difference(&x, &y);
        assert!(diff <= 1e-9 * scale, "{what}: {diff:e} of {scale:e}");
        // Condition 1e10: beyond single precision and GMRES-IR's budget; double on the platform.
        let worst = hetla::matgen::random_hpd_conditioned::<T>(n, 1e10, 5);
        let (x, how) = on_gpu.solve_refined(worst.as_ref(), rhs.as_ref()).unwrap();
        assert!(
            matches!(how.path, RefinementPath::Fallback { .. }),
            "{what}: {how:?}"
        );
        assert_eq!((how.factored_in, how.device), (what, Some(0)), "{what}");
        let berr = hetla::check::backward_error(worst.as_ref(), x.as_ref(), rhs.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
        // An entry beyond single precision's range, found where A is rounded (on the device, and
        // on the host for a device without the elementwise kernels): no single factorisation.
        let hpd = random_hpd::<T>(50, 6);
        let big = faer::Mat::from_fn(50, 50, |i, j| {
            let v = hpd[(i, j)].to_c64() * 1e38;
            T::from_parts(v.re, v.im)
        });
        let ones = faer::Mat::<T>::from_fn(50, 1, |_, _| T::from_f64(1.0));
        for device in [
            EmulatedDevice::new(usize::MAX),
            EmulatedDevice::new(usize::MAX).without_elementwise(),
        ] {
            let (x, how) = Cholesky::new()
                .platform(platform("none", &[Arc::new(device)]))
                .solve_refined(big.as_ref(), ones.as_ref())
                .unwrap();
            fell_back(&how, "overflows");
            assert_eq!((how.factor_seconds, how.device), (None, Some(0)), "{what}");
            let berr = hetla::check::backward_error(big.as_ref(), x.as_ref(), ones.as_ref());
            assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e}");
        }
    }
    check::<f64>();
    check::<c64>();
    // The elementwise kernels' checks, on the emulated device (the host twins against themselves:
    // the checks' own code).
    check_elementwise::<f64>(&EmulatedDevice::new(usize::MAX));
    check_elementwise::<c64>(&EmulatedDevice::new(usize::MAX));
}

/// The mixed SPD solve of matrices in a device's memory (`Cholesky::solve_refined_device`), in d
/// and z: X overwrites B, A is left as it was (junk above its diagonal included), LAPACK's backward
/// error; a fallback factors in double on the device, an overflow is found there; a device without
/// the elementwise kernels or a budget too small is refused before any work.
#[test]
fn mixed_spd_solves_of_device_matrices_run_on_the_device_in_d_and_z() {
    fn check<T: hetla::Refinable>() {
        let what = T::PRECISION;
        let n = 200;
        let solve: &DeviceSolve<T> = &|p, a, b| {
            Cholesky::new()
                .platform(p)
                .tile(50)
                .solve_refined_device(a, b)
        };
        let spd = random_hpd::<T>(n, 8);
        let mut given = spd.clone();
        for j in 1..n {
            for i in 0..j {
                given[(i, j)] = T::from_parts(-5.0, 3.0);
            }
        }
        let b = faer::Mat::from_fn(n, 2, |i, j| T::from_parts(1.0 + (i * j) as f64, 0.5));
        let (how, after) = solved_on_device(EmulatedDevice::new(usize::MAX), (&given, &b), solve);
        let (how, x) = how.unwrap();
        assert!(after == given, "{what}: A changed");
        mixed_on_gpu_0((spd.as_ref(), x.as_ref(), b.as_ref()), &how);
        // Beyond single precision (condition 1e10); an entry beyond its range (A scaled by 1e38).
        let worst = hetla::matgen::random_hpd_conditioned::<T>(n, 1e10, 5);
        let big = faer::Mat::from_fn(n, n, |i, j| {
            let v = spd[(i, j)].to_c64() * 1e38;
            T::from_parts(v.re, v.im)
        });
        device_solves_fall_back_and_refuse(solve, [&spd, &worst, &big, &b], "overflows");
    }
    check::<f64>();
    check::<c64>();
}

/// A mixed solve of matrices in a device's memory on the platform given (of that device alone).
type DeviceSolve<T> = dyn Fn(
    Arc<Platform>,
    &hetla::DeviceMatrix<'_, T>,
    &mut hetla::DeviceMatrix<'_, T>,
) -> hetla::Result<hetla::Refinement>;

/// What [`solved_on_device`] gives: the solve's report and X (or its error), and A afterwards.
type DeviceSolved<T> = (
    hetla::Result<(hetla::Refinement, faer::Mat<T>)>,
    faer::Mat<T>,
);

/// `solve` of copies of `a` and `b` in the memory of `device` (emulated: host memory), on a
/// platform of that device alone.
fn solved_on_device<T: Scalar>(
    device: EmulatedDevice,
    (a, b): (&faer::Mat<T>, &faer::Mat<T>),
    solve: &DeviceSolve<T>,
) -> DeviceSolved<T> {
    use hetla::DeviceMatrix;
    let (mut a, mut b) = (a.clone(), b.clone());
    let how = solve(
        platform("none", &[Arc::new(device)]),
        &DeviceMatrix::emulated(a.as_mut()).unwrap(),
        &mut DeviceMatrix::emulated(b.as_mut()).unwrap(),
    )
    .map(|how| (how, b));
    (how, a)
}

/// What every mixed solve of device matrices (`solve`) does beyond its mixed path, with `good` A,
/// `worst` beyond single precision and `big` overflowing it: the fallback in double on the device
/// for `worst` and for `big` (its reason containing `says`), both to LAPACK's backward error; a
/// device without the elementwise kernels and a budget of n^2 words refused before any work.
fn device_solves_fall_back_and_refuse<T: hetla::Refinable>(
    solve: &DeviceSolve<T>,
    [good, worst, big, b]: [&faer::Mat<T>; 4],
    says: &str,
) {
    let what = T::PRECISION;
    for (a, why) in [(worst, "did not converge"), (big, says)] {
        let (how, _) = solved_on_device(EmulatedDevice::new(usize::MAX), (a, b), solve);
        let (how, x) = how.unwrap();
        fell_back(&how, why);
        let berr = hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
    }
    let n = good.nrows();
    for (device, says) in [
        (
            EmulatedDevice::new(usize::MAX).without_elementwise(),
            "elementwise",
        ),
        (EmulatedDevice::new(n * n * 8), "budget"),
    ] {
        let (how, _) = solved_on_device(device, (good, b), solve);
        let err = how.unwrap_err().to_string();
        assert!(err.contains(says), "{what}: {err}");
    }
}

/// The mixed general solve of matrices in a device's memory (`Lu::solve_refined_device`), in d and
/// z: X overwrites B, A is left as it was, the host refinement's answer, LAPACK's backward error;
/// GMRES-IR where classical refinement stalls; a fallback factors in double on the device; an
/// overflow above the diagonal is found there (a general matrix's, where the SPD solve's triangle
/// would not look); a device without the elementwise kernels, a budget too small and B outside the
/// device are refused before any work.
#[test]
fn mixed_general_solves_of_device_matrices_run_on_the_device_in_d_and_z() {
    use hetla::Lu;
    fn check<T: hetla::Refinable>() {
        let what = T::PRECISION;
        let n = 200;
        let solve: &DeviceSolve<T> =
            &|p, a, b| Lu::new().platform(p).tile(50).solve_refined_device(a, b);
        let a = general_test_matrix::<T>(n, None);
        let b = faer::Mat::from_fn(n, 2, |i, j| T::from_parts(1.0 + (i * j) as f64, 0.5));
        let (how, after) = solved_on_device(EmulatedDevice::new(usize::MAX), (&a, &b), solve);
        let (how, x) = how.unwrap();
        assert!(after == a, "{what}: A changed");
        mixed_on_gpu_0((a.as_ref(), x.as_ref(), b.as_ref()), &how);
        let (y, _) = Lu::new().solve_refined(a.as_ref(), b.as_ref()).unwrap();
        let (diff, scale) = largest_difference(&x, &y);
        assert!(diff <= 1e-12 * scale, "{what}: {diff:e} of {scale:e}");
        // The last column nearly the first (condition about 1e10): GMRES-IR, on the device.
        let ill = general_test_matrix::<T>(n, Some(1e-10));
        let (how, _) = solved_on_device(EmulatedDevice::new(usize::MAX), (&ill, &b), solve);
        let (how, x) = how.unwrap();
        gmres_ir_on_gpu_0((ill.as_ref(), x.as_ref(), b.as_ref()), &how);
        // Beyond both (condition 1e13); one entry above the diagonal beyond single precision's
        // range, found on the device where the SPD solve's triangle would not look.
        let worst = hetla::matgen::random_conditioned::<T>(n, 1e13, 3);
        let mut big = a.clone();
        big[(3, n - 2)] = T::from_f64(1e39);
        let says = format!("A(3, {})", n - 2);
        device_solves_fall_back_and_refuse(solve, [&a, &worst, &big, &b], &says);
    }
    check::<f64>();
    check::<c64>();
}

/// A general matrix of order `n` whose diagonal dominates (10 on it, entries in [-0.5, 0.5) off it,
/// their tenth as imaginary parts), its last column `eps` apart from its first when `eps` is given
/// (condition about 1 / eps: beyond classical refinement from single precision).
fn general_test_matrix<T: Scalar>(n: usize, eps: Option<f64>) -> faer::Mat<T> {
    let mut a = faer::Mat::from_fn(n, n, |i, j| {
        let v = ((i * 13 + j * 7) % 11) as f64 / 11.0 - 0.5;
        T::from_parts(if i == j { 10.0 } else { v }, 0.1 * v)
    });
    if let Some(eps) = eps {
        for i in 0..n {
            a[(i, n - 1)] = a[(i, 0)] + T::from_f64(eps * ((i * 7 % 5) as f64 - 2.0));
        }
    }
    a
}

/// Asserts that a mixed solve took the mixed path refined on the host (no GPU held it).
fn mixed_on_the_host(how: &hetla::Refinement) {
    let expected = (&hetla::RefinementPath::Mixed, None);
    assert_eq!((&how.path, how.device), expected, "{how:?}");
}

/// Asserts that a mixed solve fell back to the working precision and that its reason says `says`.
fn fell_back(how: &hetla::Refinement, says: &str) {
    let hetla::RefinementPath::Fallback { reason } = &how.path else {
        panic!("{how:?}")
    };
    assert!(reason.contains(says), "{reason}");
}

/// A system A, its solve x and B, as a check reads them.
type Solved<'a, T> = (
    faer::MatRef<'a, T>,
    faer::MatRef<'a, T>,
    faer::MatRef<'a, T>,
);

/// Asserts that an ill-conditioned system's solve was refined by GMRES-IR on GPU 0 to LAPACK's
/// backward error.
fn gmres_ir_on_gpu_0<T: Scalar>(solved: Solved<'_, T>, how: &hetla::Refinement) {
    let gmres = matches!(how.path, hetla::RefinementPath::GmresIr { .. });
    refined_on_gpu_0(solved, how, gmres);
}

/// Asserts that a mixed solve took the mixed path on GPU 0 and that its solution `x` of A X = B has
/// LAPACK's backward error.
fn mixed_on_gpu_0<T: Scalar>(solved: Solved<'_, T>, how: &hetla::Refinement) {
    refined_on_gpu_0(solved, how, how.path == hetla::RefinementPath::Mixed);
}

/// Asserts that a solve took the path it should (`path_ok`) on GPU 0 to LAPACK's backward error.
fn refined_on_gpu_0<T: Scalar>((a, x, b): Solved<'_, T>, how: &hetla::Refinement, path_ok: bool) {
    let what = T::PRECISION;
    assert!(path_ok && how.device == Some(0), "{what}: {how:?}");
    let berr = hetla::check::backward_error(a, x, b);
    assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
}

/// A mixed general solve (`Lu::solve_refined`) on a platform whose GPU's budget holds A and the
/// single factor refines there (issue 74 item 5), in d and z: the host refinement's answer,
/// LAPACK's backward error; GMRES-IR with its widened preconditioner on the device where classical
/// refinement stalls; a fallback at condition 1e13 and an overflow, both saying why; the host's
/// refinement where the budget is too small.
#[test]
fn mixed_general_solves_refine_on_a_device_whose_budget_holds_them_in_d_and_z() {
    use hetla::Lu;
    fn check<T: hetla::Refinable>() {
        let what = T::PRECISION;
        let n = 240;
        let lu = |device: Option<EmulatedDevice>| {
            let p = match device {
                Some(d) => platform("none", &[Arc::new(d)]),
                None => platform("1x1", &[]),
            };
            Lu::new().platform(p).tile(60)
        };
        let a = general_test_matrix::<T>(n, None);
        let b = faer::Mat::from_fn(n, 2, |i, j| T::from_parts(1.0 + (i + j) as f64 * 0.01, 0.5));
        let (y, host) = lu(None).solve_refined(a.as_ref(), b.as_ref()).unwrap();
        assert_eq!(host.device, None, "{what}");
        let device = Arc::new(EmulatedDevice::new(usize::MAX));
        let on_gpu = Lu::new()
            .platform(platform("none", std::slice::from_ref(&device)))
            .tile(60);
        let (x, how) = on_gpu.solve_refined(a.as_ref(), b.as_ref()).unwrap();
        let (diff, scale) = largest_difference(&x, &y);
        assert!(diff <= 1e-12 * scale, "{what}: {diff:e} of {scale:e}");
        assert_eq!(host.path, how.path, "{what}");
        // The single LU ran where A rounded was written (each block column copied within the
        // device into the run and back), no tile crossing to or from host memory.
        let moved = (device.copies(), device.device_copies());
        assert_eq!(moved, ((0, 0), 2 * n.div_ceil(60)), "{what}");
        mixed_on_gpu_0((a.as_ref(), x.as_ref(), b.as_ref()), &how);
        let small = lu(Some(EmulatedDevice::new(2 * n * n * what.bytes())));
        let (_, how) = small.solve_refined(a.as_ref(), b.as_ref()).unwrap();
        mixed_on_the_host(&how);
        // The last column nearly the first (condition about 1e10): GMRES-IR, on the device.
        let ill = general_test_matrix::<T>(n, Some(1e-10));
        let (x, how) = on_gpu.solve_refined(ill.as_ref(), b.as_ref()).unwrap();
        gmres_ir_on_gpu_0((ill.as_ref(), x.as_ref(), b.as_ref()), &how);
        // Condition 1e13: beyond both; the fallback in double on the platform says why.
        let worst = hetla::matgen::random_conditioned::<T>(n, 1e13, 3);
        let (x, how) = on_gpu.solve_refined(worst.as_ref(), b.as_ref()).unwrap();
        fell_back(&how, "did not converge");
        let berr = hetla::check::backward_error(worst.as_ref(), x.as_ref(), b.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{what}: {berr:e} {how:?}");
        let big = faer::Mat::from_fn(n, n, |i, j| {
            let v = a[(i, j)].to_c64() * 1e38;
            T::from_parts(v.re, v.im)
        });
        let (_, how) = on_gpu.solve_refined(big.as_ref(), b.as_ref()).unwrap();
        fell_back(&how, "overflows");
    }
    check::<f64>();
    check::<c64>();
}

/// [`mixed_spd_solves_of_device_matrices_run_on_the_device_in_d_and_z`] on a real GPU: A and B in
/// the GPU's memory, the single factor in f32 and on tensor cores, LAPACK's backward error, A left
/// as it was.
#[test]
fn real_gpus_solve_mixed_spd_systems_of_device_matrices_or_the_skip_says_why() {
    mixed_solves_of_real_gpu_matrices(random_spd(1024, 4), |p, math, a, b| {
        (Cholesky::new()
            .platform(p.clone())
            .tile(256)
            .tensor_math(math))
        .solve_refined_device(a, b)
    });
}

/// A mixed solve of A and b (`sin(i / 10)`) in a real GPU's memory by `solve` with an f32 and a
/// TF32 factor: on GPU 0 by the mixed path, LAPACK's backward error, A left as it was; skipped
/// where the machine has no GPU.
fn mixed_solves_of_real_gpu_matrices(
    a: faer::Mat<f64>,
    solve: impl Fn(
        &Arc<Platform>,
        hetla::TensorMath,
        &hetla::DeviceMatrix<'_, f64>,
        &mut hetla::DeviceMatrix<'_, f64>,
    ) -> hetla::Result<hetla::Refinement>,
) {
    use hetla::{DeviceMatrix, RefinementPath, TensorMath};
    let Some(devices) = real_gpus() else {
        return;
    };
    let device = devices[0].clone();
    let spec: ClusterSpec = "none".parse().unwrap();
    let p =
        Arc::new(Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices).unwrap());
    let n = a.nrows();
    let b = faer::Mat::from_fn(n, 1, |i, _| (i as f64 * 0.1).sin());
    let on_device = |m: &faer::Mat<f64>| {
        let memory = device
            .allocate_span((hetla::Precision::D, m.nrows(), m.ncols()))
            .unwrap();
        // SAFETY: the span is the device's memory, allocated above and used by nothing else.
        unsafe { device.write_span(memory.span(), hetla::Scalar::any_ref(m.as_ref())) }.unwrap();
        memory
    };
    for math in [TensorMath::Off, TensorMath::Tf32] {
        let (a_mem, b_mem) = (on_device(&a), on_device(&b));
        // SAFETY: the spans are the allocations above, alive until the end of the iteration.
        let (da, mut db) = unsafe {
            (
                DeviceMatrix::<f64>::from_raw_parts(a_mem.span().addr, n, n, n).unwrap(),
                DeviceMatrix::<f64>::from_raw_parts(b_mem.span().addr, n, 1, n).unwrap(),
            )
        };
        let how = solve(&p, math, &da, &mut db).unwrap();
        assert_eq!(
            (&how.path, how.device),
            (&RefinementPath::Mixed, Some(0)),
            "{math}"
        );
        let (mut x, mut a_after) = (faer::Mat::<f64>::zeros(n, 1), faer::Mat::<f64>::zeros(n, n));
        // SAFETY: as above; the solve has returned.
        unsafe {
            device
                .read_span(b_mem.span(), hetla::Scalar::any_mut(x.as_mut()))
                .unwrap();
            device
                .read_span(a_mem.span(), hetla::Scalar::any_mut(a_after.as_mut()))
                .unwrap();
        }
        assert!(a_after == a, "{math}: A changed");
        let berr = hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        assert!(berr < RESIDUAL_THRESHOLD, "{math}: {berr:e} {how:?}");
    }
}

/// [`mixed_general_solves_of_device_matrices_run_on_the_device_in_d_and_z`] on a real GPU: A and B
/// in the GPU's memory, the single LU in f32 and on tensor cores made there, LAPACK's backward
/// error, A left as it was.
#[test]
fn real_gpus_solve_mixed_general_systems_of_device_matrices_or_the_skip_says_why() {
    let a = hetla::matgen::random_conditioned(1024, 1e3, 4);
    mixed_solves_of_real_gpu_matrices(a, |p, math, a, b| {
        (hetla::Lu::new()
            .platform(p.clone())
            .tile(256)
            .tensor_math(math))
        .solve_refined_device(a, b)
    });
}

/// hetla's elementwise kernels on a real GPU (compiled by NVRTC) give what their host twins give
/// (`hetla_kernels::elementwise`, which emulated devices run): a matrix made whole from its lower
/// triangle, its column norms, and its rounding with a raised diagonal and an overflow, in d and z.
#[test]
fn real_gpus_run_the_elementwise_kernels_as_their_host_twins_or_the_skip_says_why() {
    let Some(devices) = real_gpus() else {
        return;
    };
    let device = devices[0].as_ref();
    if let Err(why) = device.elementwise() {
        panic!("NVRTC is part of the CUDA libraries on a GPU machine: {why}");
    }
    check_elementwise::<f64>(device);
    check_elementwise::<c64>(device);
}

/// The checks of the elementwise kernels' test on `device`: A with an entry beyond single
/// precision's range written, made whole, summed and rounded with a raised diagonal on the device,
/// each result the host twin's.
fn check_elementwise<T: hetla::Refinable>(device: &dyn Device) {
    use hetla_kernels::elementwise::{
        self, FactorKind::Cholesky, FactorKind::Lu, SpanKernel, Watched,
    };
    let what = T::PRECISION;
    let n = 100;
    let mut a = hetla::matgen::random_in::<T>(n, n, 3);
    a[(n - 1, 7)] = T::from_f64(1e39);
    let whole = device.allocate_span((what, n, n)).unwrap();
    let low = device.allocate_span((T::Low::PRECISION, n, n)).unwrap();
    let (whole, low) = (*whole.span(), *low.span());
    let mut expected = a.clone();
    elementwise::mirror_lower(T::any_mut(expected.as_mut())).unwrap();
    let norms = elementwise::column_norms(T::any_ref(expected.as_ref())).unwrap();
    let mut rounded = faer::Mat::<T::Low>::zeros(n, n);
    let factor = 1.0 + 8.0 * f64::from(f32::EPSILON);
    let overflow = elementwise::lower_into(
        T::any_ref(expected.as_ref()),
        T::Low::any_mut(rounded.as_mut()),
        factor,
        Watched::Whole,
    )
    .unwrap();
    let row_norms = elementwise::row_norms(T::any_ref(expected.as_ref())).unwrap();
    let mut back = faer::Mat::<T>::zeros(n, n);
    let mut low_back = faer::Mat::<T::Low>::zeros(n, n);
    // SAFETY: the spans are this device's memory, allocated above and used by nothing else.
    unsafe {
        device.write_span(&whole, T::any_ref(a.as_ref())).unwrap();
        device.run_span_kernel(SpanKernel::Mirror(&whole)).unwrap();
        let got = device
            .run_span_kernel(SpanKernel::ColumnNorms(&whole))
            .unwrap()
            .norms();
        assert_eq!(got.len(), n, "{what}");
        for (j, (g, e)) in got.iter().zip(&norms).enumerate() {
            assert!((g - e).abs() <= 1e-13 * e, "{what}: column {j}: {g} vs {e}");
        }
        let (from, to) = (&whole, &low);
        let got = device
            .run_span_kernel(SpanKernel::RowNorms(&whole))
            .unwrap()
            .norms();
        assert_eq!(got.len(), n, "{what}");
        for (i, (g, e)) in got.iter().zip(&row_norms).enumerate() {
            assert!((g - e).abs() <= 1e-13 * e, "{what}: row {i}: {g} vs {e}");
        }
        let watched = Watched::Whole;
        let lowered = device.run_span_kernel(SpanKernel::Lower {
            from,
            to,
            factor,
            watched,
        });
        assert_eq!(lowered.unwrap().overflow(), overflow, "{what}");
        device.read_span(&whole, T::any_mut(back.as_mut())).unwrap();
        device
            .read_span(&low, T::Low::any_mut(low_back.as_mut()))
            .unwrap();
    }
    assert_eq!(overflow, Some((n - 1, 7)), "{what}");
    assert!(back == expected, "{what}: the mirrored matrix differs");
    assert!(low_back == rounded, "{what}: the rounded matrix differs");
    // A refinement step's kernels: R -= A X, then (L L^H)^-1 R with a well-conditioned L, then
    // U^-1 L^-1 P R with the same matrix read as an LU factor and interchanges of every kind (none,
    // the last row, a row below).
    let ipiv: Vec<usize> = (0..n)
        .map(|i| [i, n - 1, (i + 3).min(n - 1)][i % 3])
        .collect();
    let l = faer::Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Less => T::from_f64(0.0),
        std::cmp::Ordering::Equal => T::from_f64(n as f64),
        std::cmp::Ordering::Greater => a[(i, j)],
    });
    a[(n - 1, 7)] = T::from_f64(0.5);
    let x = hetla::matgen::random_in::<T>(n, 2, 4);
    let r = hetla::matgen::random_in::<T>(n, 2, 5);
    let spans = [(n, n), (n, 2), (n, 2), (n, n)]
        .map(|(rows, cols)| device.allocate_span((what, rows, cols)).unwrap());
    let [sa, sx, sr, sl] = [0, 1, 2, 3].map(|i| *spans[i].span());
    let mut expected = r.clone();
    let mut got = faer::Mat::<T>::zeros(n, 2);
    // SAFETY: the spans are this device's memory, allocated above and used by nothing else.
    unsafe {
        for (span, m) in [(&sa, &a), (&sx, &x), (&sr, &r), (&sl, &l)] {
            device.write_span(span, T::any_ref(m.as_ref())).unwrap();
        }
        let (on_host, on_device) = (
            |k: SpanKernel<'_>| k.run_on_host().unwrap(),
            |k: SpanKernel<'_>| device.run_span_kernel(k).unwrap(),
        );
        on_device(SpanKernel::Product {
            a: &sa,
            x: &sx,
            r: &sr,
        });
        on_device(SpanKernel::Solve {
            factor: &sl,
            kind: Cholesky,
            b: &sr,
        });
        on_device(SpanKernel::Interchange {
            b: &sr,
            ipiv: &ipiv,
        });
        on_device(SpanKernel::Solve {
            factor: &sl,
            kind: Lu,
            b: &sr,
        });
        device.read_span(&sr, T::any_mut(got.as_mut())).unwrap();
        // The host twins on host copies of the same matrices.
        let (mut ha, mut hx, mut hl) = (a.clone(), x.clone(), l.clone());
        let host = |m: &mut faer::Mat<T>| hetla_kernels::DeviceSpan {
            addr: m.as_ptr_mut() as u64,
            rows: m.nrows(),
            cols: m.ncols(),
            ld: m.col_stride() as usize,
            precision: what,
        };
        let (ha, hx, hr, hl) = (
            host(&mut ha),
            host(&mut hx),
            host(&mut expected),
            host(&mut hl),
        );
        on_host(SpanKernel::Product {
            a: &ha,
            x: &hx,
            r: &hr,
        });
        on_host(SpanKernel::Solve {
            factor: &hl,
            kind: Cholesky,
            b: &hr,
        });
        on_host(SpanKernel::Interchange {
            b: &hr,
            ipiv: &ipiv,
        });
        on_host(SpanKernel::Solve {
            factor: &hl,
            kind: Lu,
            b: &hr,
        });
    }
    let (diff, scale) = largest_difference(&got, &expected);
    assert!(
        diff <= 1e-12 * scale,
        "{what}: a refinement step's kernels: {diff:e} of {scale:e}"
    );
}

/// cuSOLVER's peers the lease times for the first time on a real GPU: the refined solvers of every
/// lower precision (DSgesv, DXgesv, DBgesv; ZCgesv, ZYgesv, ZEgesv) and least squares (?geqrf,
/// ?ormqr or ?unmqr, ?trsm), each timed once, resident; a refined solver in single precision is
/// refused before any device work.
#[test]
fn real_gpus_time_cusolvers_refined_solvers_and_least_squares_or_the_skip_says_why() {
    use hetla_kernels::cuda::{GpuContext, SolverPeer};
    if !gpus_here() {
        return;
    }
    fn check<T: Scalar>(gpu: &GpuContext) {
        let n = 512;
        let a = hetla::matgen::random_in::<T>(n, n + 2, 11);
        let mut ab = a.clone();
        for i in 0..n {
            ab[(i, i)] += T::from_f64(n as f64);
        }
        for math in hetla::TensorMath::ALL {
            let irs = SolverPeer::Irs { columns: n, math };
            let times = gpu.time_resident_solver(irs, ab.as_ref(), 1).unwrap();
            assert!(
                times.iter().all(|&t| t > 0.0),
                "{} {math}: {times:?}",
                T::PRECISION
            );
        }
        let tall = hetla::matgen::random_in::<T>(3 * n, n + 2, 12);
        let gels = SolverPeer::Gels { columns: n };
        let times = gpu.time_resident_solver(gels, tall.as_ref(), 1).unwrap();
        assert!(
            times.iter().all(|&t| t > 0.0),
            "{}: {times:?}",
            T::PRECISION
        );
    }
    let gpu = GpuContext::new(0).unwrap();
    check::<f64>(&gpu);
    check::<c64>(&gpu);
    let single = hetla::matgen::random_in::<f32>(64, 65, 1);
    let irs = SolverPeer::Irs {
        columns: 64,
        math: hetla::TensorMath::Tf32,
    };
    let err = gpu
        .time_resident_solver(irs, single.as_ref(), 1)
        .unwrap_err();
    assert!(err.to_string().contains("f64 or c64"), "{err}");
}

/// A Cholesky plan that ends in smaller tiles (`Cholesky::tail`: 3 tiles of 128, then tiles of 64
/// from row 384, the last ragged: 8 tile rows) factors on an emulated device with room for 6 of its
/// large tiles (evictions), beside a 1x1 cluster where the machine has the cores, in every
/// precision: LAPACK's residual, the tail's tiles moved at their own size, and a pivot failure in
/// the tail named by its global column.
#[test]
fn a_tail_of_smaller_tiles_factors_on_a_device_beside_a_cluster_in_every_precision() {
    fn check<T: Scalar>() {
        let what = T::PRECISION;
        let (n, b, tail) = (
            700,
            128,
            hetla::Tail {
                from: 384,
                tile: 64,
            },
        );
        let device = Arc::new(EmulatedDevice::new(6 * b * b * size_of::<T>()));
        let spec = if room_for_a_cluster_beside_a_device() {
            "1x1"
        } else {
            "none"
        };
        let p = platform(spec, std::slice::from_ref(&device));
        let options = Cholesky::new().platform(p).tile(b).tail(tail);
        let a = random_hpd::<T>(n, 5);
        let mut l = a.clone();
        let trace = options.factor_in_place_traced(l.as_mut()).unwrap();
        let residual = cholesky_residual(a.as_ref(), l.as_ref(), Par::Seq);
        assert!(residual < RESIDUAL_THRESHOLD, "{what}: residual {residual}");
        // 8 tile rows: 8 POTRFs, 28 TRSMs, 28 SYRKs, 56 GEMMs.
        assert_eq!(trace.tasks.len(), 120, "{what}");
        let sizes: Vec<usize> = trace.transfers.iter().map(|t| t.transfer.bytes).collect();
        for (rows, cols) in [(b, b), (64, b), (64, 64), (60, 64)] {
            let bytes = rows * cols * size_of::<T>();
            assert!(
                sizes.contains(&bytes),
                "{what}: no {rows}x{cols} copy in {sizes:?}"
            );
        }
        assert!(device.peak_bytes() <= device.budget(), "{what}");
        // A pivot that fails in the tail's fourth tile (rows 576 to 639) is named by its column.
        let mut bad = random_hpd::<T>(n, 5);
        bad[(600, 600)] = T::from_parts(-1.0, 0.0);
        let err = options.factor_in_place(bad.as_mut()).unwrap_err();
        assert!(
            matches!(err, Error::NotPositiveDefinite { column: 600 }),
            "{what}: {err}"
        );
        // A tile-major copy holds tiles of one size: refused before the matrix is touched.
        let mut untouched = a.clone();
        let err = (options.clone().storage(Storage::TileMajor))
            .factor_in_place(untouched.as_mut())
            .unwrap_err();
        assert!(err.to_string().contains("tile-major"), "{what}: {err}");
        assert!(untouched == a, "{what}: the refused matrix was changed");
    }
    check::<f32>();
    check::<f64>();
    check::<c32>();
    check::<c64>();
}

/// The tile choice on a device platform whose models hold calibrations of every candidate tile (so
/// nothing is timed; one emulated device of 3 compute streams, its link modelled at 54 GB/s): with
/// the H100's rates at 2048 and, at 1024, its panel kernels as fast per flop but its products at a
/// third (smaller tiles a tenth), n = 8192 takes tile 2048 and ends in a tail of 1024, which the
/// simulation predicts faster than either tile alone, and the builder's plan ends in it.
#[test]
fn the_choice_beside_a_device_ends_its_tile_in_a_tail_and_the_builders_plan_takes_it() {
    use hetla::{Op, Precision};
    use hetla_runtime::{KernelKey, LinkModel, LinkRate};
    let rate = |op: Op, b: usize| {
        let at_2048 = match op {
            Op::Potrf => 3095.0,
            Op::Trsm => 9272.0,
            Op::Syrk => 48758.0,
            _ => 54537.0,
        };
        match (b, op) {
            (2048.., _) | (1024, Op::Potrf | Op::Trsm) => at_2048,
            (1024, _) => at_2048 / 3.0,
            _ => at_2048 / 10.0,
        }
    };
    let n = 8192;
    let device = Arc::new(EmulatedDevice::new(usize::MAX).with_compute_streams(3));
    let p = platform("none", std::slice::from_ref(&device));
    let class = p.workers()[0].class.clone();
    let link = LinkRate {
        latency_us: 10.0,
        gb_per_s: 54.0,
    };
    p.update_models(|m| {
        m.set_link(
            device.name(),
            LinkModel {
                h2d: link,
                d2h: link,
                p2p: None,
                host_shared_by: 1,
            },
        );
        for b in [256, 384, 512, 768, 1024, 1536, 2048] {
            for op in [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt] {
                let key = KernelKey::square(op, b);
                let seconds = key.leading_flops() / (rate(op, b) * 1e9);
                for _ in 0..3 {
                    m.record_calibration(&key, &class, seconds);
                }
            }
        }
    });
    let plan = Cholesky::new().platform(p).plan(n, Precision::D).unwrap();
    let choice = plan.tile_choice().unwrap();
    assert!(choice.calibrated.is_empty(), "{choice:?}");
    assert_eq!(choice.tile, 2048, "{choice:?}");
    let tail = choice.tail.unwrap();
    assert_eq!(tail.tile, 1024, "{choice:?}");
    assert_eq!((plan.tile(), plan.tail()), (2048, Some(tail)));
    // Faster than 2048 alone by more than the tolerance, and than 1024 alone.
    let predicted = |b| choice.predictions.iter().find(|p| p.0 == b).unwrap().1;
    let with_tail = (choice.tail_predictions.iter())
        .find(|p| p.0 == tail)
        .unwrap()
        .1;
    assert!(with_tail < predicted(2048) * 0.97, "{choice:?}");
    assert!(with_tail < predicted(1024), "{choice:?}");
    assert!(
        choice.reason().contains("then tiles of 1024"),
        "{}",
        choice.reason()
    );
}
