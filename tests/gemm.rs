//! The matrix product: results equal faer's for every strategy, transpose, ragged tiling, scalar
//! and placement, on CPU clusters and on emulated devices with budgets small enough to evict (the
//! simulated targets are `hetla-lab`'s tests).

use faer::{Mat, Par};
use hetla::gemm::{Discretisation, Placement, Strategy};
use hetla::{Backend, ClusterSpec, Gemm, Platform};
use hetla_runtime::{EmulatedDevice, ModelStore};
use std::sync::Arc;

fn strategies() -> Vec<Strategy> {
    let mut all = Strategy::CONCRETE.to_vec();
    all.push(Strategy::PeriSum {
        discretisation: Discretisation::Precise,
        steal: false,
    });
    all.push(Strategy::Auto);
    all
}

fn emulated(count: usize, budget: usize) -> Platform {
    let devices: Vec<Arc<dyn hetla_runtime::Device>> = (0..count)
        .map(|_| Arc::new(EmulatedDevice::new(budget)) as Arc<dyn hetla_runtime::Device>)
        .collect();
    Platform::with_devices(
        &"1x1".parse::<ClusterSpec>().unwrap(),
        Backend::Faer,
        ModelStore::None,
        devices,
    )
    .unwrap()
}

/// Runs `gemm` on random operands of an (m, n, k) product and checks it against faer.
fn check(platform: &Platform, gemm: Gemm, (m, n, k): (usize, usize, usize), seed: u64) {
    let stored = |r, c, t: bool| if t { (c, r) } else { (r, c) };
    let (trans_a, trans_b) = gemm.transposes();
    let (ar, ac) = stored(m, k, trans_a);
    let (br, bc) = stored(k, n, trans_b);
    let a = hetla::matgen::random_in::<f64>(ar, ac, seed);
    let b = hetla::matgen::random_in::<f64>(br, bc, seed + 1);
    let c0 = hetla::matgen::random_in::<f64>(m, n, seed + 2);
    let mut c = c0.clone();
    let report = gemm
        .run(platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap_or_else(|e| panic!("{gemm:?}: {e}"));
    let reference = hetla::check::reference_product(
        a.as_ref(),
        b.as_ref(),
        c0.as_ref(),
        gemm.transposes(),
        gemm.factors(),
        Par::Seq,
    );
    let error = hetla::check::relative_error(c.as_ref(), reference.as_ref());
    assert!(
        error < 1e-14 * k.max(1) as f64,
        "{gemm:?} on ({m}, {n}, {k}): relative error {error}"
    );
    assert_ne!(report.strategy, "auto");
}

#[test]
fn every_strategy_matches_faer_on_cpu_clusters() {
    let platform = Platform::new(&"2x1".parse().unwrap(), Backend::Faer).unwrap();
    for (i, strategy) in strategies().into_iter().enumerate() {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let gemm = Gemm::new()
                .strategy(strategy)
                .transpose(ta, tb)
                .scalars(-0.5, if i % 2 == 0 { 0.0 } else { 1.5 })
                .tile(7);
            // Ragged in every dimension.
            check(&platform, gemm, (30, 23, 19), i as u64);
        }
    }
    // One tile, and k smaller than a tile.
    check(&platform, Gemm::new().tile(64), (5, 4, 3), 9);
}

#[test]
fn every_strategy_matches_faer_on_emulated_devices_that_must_evict() {
    // 3 devices of 6 tiles of 10 x 10 (800 bytes each): far less than the operands.
    let platform = emulated(3, 6 * 800);
    for (i, strategy) in strategies().into_iter().enumerate() {
        let gemm = Gemm::new()
            .strategy(strategy)
            .transpose(i % 2 == 1, i % 3 == 1)
            .scalars(2.0, 0.25)
            .tile(10);
        check(&platform, gemm, (47, 52, 33), 20 + i as u64);
    }
    // Operands already on devices (C only on its device, written back at the end).
    let placed = Gemm::new()
        .strategy(Strategy::Dmda)
        .placement(
            Placement::Device(0),
            Placement::Device(1),
            Placement::Device(2),
        )
        .scalars(1.0, -1.0)
        .tile(10);
    check(&emulated(3, usize::MAX), placed, (40, 30, 20), 40);
}

#[test]
fn bad_shapes_and_options_are_clear_errors() {
    let platform = Platform::new(&"1x1".parse().unwrap(), Backend::Faer).unwrap();
    let (a, b) = (Mat::<f64>::zeros(4, 3), Mat::<f64>::zeros(5, 2));
    let mut c = Mat::<f64>::zeros(4, 2);
    let err = Gemm::new()
        .run(&platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap_err()
        .to_string();
    assert!(err.contains("inner dimensions differ"), "{err}");
    let b = Mat::<f64>::zeros(3, 2);
    let err = Gemm::new()
        .placement(Placement::Host, Placement::Device(0), Placement::Host)
        .run(&platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap_err()
        .to_string();
    assert!(err.contains("0 device(s)"), "{err}");
    let err = Gemm::new()
        .scalars(f64::NAN, 0.0)
        .run(&platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap_err()
        .to_string();
    assert!(err.contains("alpha must be finite"), "{err}");
    // k = 0: C <- beta C.
    let (a, b) = (Mat::<f64>::zeros(2, 0), Mat::<f64>::zeros(0, 2));
    let mut c = Mat::<f64>::ones(2, 2);
    Gemm::new()
        .scalars(1.0, 3.0)
        .run(&platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap();
    assert_eq!(c[(1, 1)], 3.0);
}

#[test]
fn with_beta_zero_c_is_never_uploaded_and_its_old_contents_never_matter() {
    // Devices only, so every first step of a chain runs on a device; C starts as NaN.
    let devices: Vec<Arc<dyn hetla_runtime::Device>> = (0..2)
        .map(|_| Arc::new(EmulatedDevice::new(usize::MAX)) as Arc<dyn hetla_runtime::Device>)
        .collect();
    let platform =
        Platform::with_devices(&ClusterSpec::None, Backend::Faer, ModelStore::None, devices)
            .unwrap();
    let (m, n, k) = (150, 130, 70);
    let a = hetla::matgen::random_in::<f64>(m, k, 1);
    let b = hetla::matgen::random_in::<f64>(k, n, 2);
    let mut c = Mat::<f64>::from_fn(m, n, |_, _| f64::NAN);
    let (_, trace) = Gemm::new()
        .tile(32)
        .run_traced(&platform, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap();
    let reference = hetla::check::reference_product(
        a.as_ref(),
        b.as_ref(),
        Mat::<f64>::zeros(m, n).as_ref(),
        (false, false),
        (1.0, 0.0),
        Par::Seq,
    );
    assert!(hetla::check::relative_error(c.as_ref(), reference.as_ref()) < 1e-14 * k as f64);
    let c_uploads = trace
        .transfers
        .iter()
        .filter(|t| {
            t.transfer.tile.matrix == hetla_factorizations::MATMUL_C && t.transfer.from.0 == 0
        })
        .count();
    assert_eq!(c_uploads, 0);
}

#[test]
fn every_strategy_matches_faer_on_real_gpus_or_the_skip_says_why() {
    use std::io::Write;
    if hetla_clusters::gpus().is_empty() {
        writeln!(
            std::io::stderr(),
            "GPU test skipped: no CUDA GPU on this machine"
        )
        .unwrap();
        return;
    }
    let devices = hetla_runtime::GpuSelection::All.open(None).unwrap();
    let gpus = devices.len();
    let platform = Platform::with_devices(
        &"none".parse::<ClusterSpec>().unwrap(),
        Backend::Faer,
        ModelStore::None,
        devices,
    )
    .unwrap();
    for (i, strategy) in strategies().into_iter().enumerate() {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            for beta in [0.0, 0.75] {
                let gemm = Gemm::new()
                    .strategy(strategy)
                    .transpose(ta, tb)
                    .scalars(1.25, beta)
                    .tile(256);
                // Ragged in every dimension.
                check(&platform, gemm, (1000, 900, 700), i as u64);
            }
        }
    }
    let placed = Gemm::new().strategy(Strategy::Dmda).placement(
        Placement::Device(0),
        Placement::Device(gpus - 1),
        Placement::Device(0),
    );
    check(
        &platform,
        placed.scalars(1.0, -1.0).tile(512),
        (2000, 1500, 1000),
        50,
    );
}

#[test]
fn a_resident_product_moves_only_c_back_and_the_report_says_so_by_link() {
    let devices: Vec<Arc<dyn hetla_runtime::Device>> =
        vec![Arc::new(EmulatedDevice::new(usize::MAX))];
    let gpu_only =
        Platform::with_devices(&ClusterSpec::None, Backend::Faer, ModelStore::None, devices)
            .unwrap();
    let (m, n, k) = (40, 30, 20);
    let a = hetla::matgen::random_in::<f64>(m, k, 1);
    let b = hetla::matgen::random_in::<f64>(k, n, 2);
    let link = |report: &hetla::GemmReport, name: &str| {
        report
            .bytes_moved
            .per_link
            .iter()
            .find(|l| l.link == name)
            .map_or(0, |l| l.bytes)
    };
    let doubles = |count: usize| count * size_of::<f64>();
    // A, B and C on the device: C written back into the caller's matrix, nothing uploaded.
    let mut c = Mat::<f64>::zeros(m, n);
    let resident = Gemm::new()
        .tile(10)
        .placement(
            Placement::Device(0),
            Placement::Device(0),
            Placement::Device(0),
        )
        .run(&gpu_only, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap();
    assert_eq!(link(&resident, "gpu0->host"), doubles(m * n));
    assert_eq!(link(&resident, "host->gpu0"), 0);
    assert_eq!(resident.bytes_moved.total, doubles(m * n));
    // From the host (beta = 0: C is never uploaded): A and B up, C down, each at least once.
    let mut c = Mat::<f64>::zeros(m, n);
    let hosted = Gemm::new()
        .tile(10)
        .run(&gpu_only, a.as_ref(), b.as_ref(), c.as_mut())
        .unwrap();
    assert!(link(&hosted, "host->gpu0") >= doubles(m * k + k * n));
    assert_eq!(link(&hosted, "gpu0->host"), doubles(m * n));
    let by_link: usize = hosted.bytes_moved.per_link.iter().map(|l| l.bytes).sum();
    assert_eq!(by_link, hosted.bytes_moved.total);
}

#[test]
fn a_product_of_matrices_in_device_memory_runs_on_their_gpu_alone_in_every_precision() {
    use hetla::{DeviceMatrix, Scalar};
    fn check<T: Scalar>() {
        let p = T::PRECISION;
        // A cluster and two devices: the matrices live on GPU 1, which must take every product.
        let devices: Vec<Arc<EmulatedDevice>> = (0..2)
            .map(|_| Arc::new(EmulatedDevice::new(usize::MAX)))
            .collect();
        let platform = Platform::with_devices(
            &"1x1".parse::<ClusterSpec>().unwrap(),
            Backend::Faer,
            ModelStore::None,
            devices
                .iter()
                .map(|d| d.clone() as Arc<dyn hetla_runtime::Device>)
                .collect(),
        )
        .unwrap();
        let (m, n, k) = (130, 90, 70);
        // op(A) = A^H (stored k x m), B as it is; beta = -1 reads C.
        let a = hetla::matgen::random_in::<T>(k, m, 1);
        let b = hetla::matgen::random_in::<T>(k, n, 2);
        let c0 = hetla::matgen::random_in::<T>(m, n, 3);
        let gemm = Gemm::new()
            .transpose(true, false)
            .scalars(2.0, -1.0)
            .tile(32)
            .resident(1);
        let mut reference = c0.clone();
        gemm.run(&platform, a.as_ref(), b.as_ref(), reference.as_mut())
            .unwrap();
        let before = devices[1].device_copies();
        let (mut a_d, mut b_d, mut c) = (a.clone(), b.clone(), c0.clone());
        let (report, trace) = gemm
            .run_device(
                &platform,
                &DeviceMatrix::emulated(a_d.as_mut()).unwrap(),
                &DeviceMatrix::emulated(b_d.as_mut()).unwrap(),
                &mut DeviceMatrix::emulated(c.as_mut()).unwrap(),
            )
            .unwrap();
        let error = hetla::check::relative_error(c.as_ref(), reference.as_ref());
        assert!(error < 10.0 * p.epsilon(), "{p}: {error}");
        assert_eq!((a_d, b_d), (a, b), "{p}: A or B was written");
        // Tiles of 32: A 3 x 5, B 3 x 3, C 5 x 3, imported; C exported; nothing through the host.
        assert_eq!(devices[1].device_copies() - before, 15 + 9 + 15 + 15, "{p}");
        assert!(trace.transfers.is_empty(), "{p}");
        let gpu1 = platform.clusters().len() + 1;
        assert!(trace.tasks.iter().all(|t| t.worker.0 == gpu1), "{p}");
        assert!(
            report.strategy_reason.contains("one GPU"),
            "{p}: {}",
            report.strategy_reason
        );
        // k = 0 with beta != 1 (C <- -C alone): an error before any work.
        let mut other = c0.clone();
        let (mut a0, mut b0) = (Mat::<T>::zeros(0, m), Mat::<T>::zeros(0, n));
        let error = gemm
            .run_device(
                &platform,
                &DeviceMatrix::emulated(a0.as_mut()).unwrap(),
                &DeviceMatrix::emulated(b0.as_mut()).unwrap(),
                &mut DeviceMatrix::emulated(other.as_mut()).unwrap(),
            )
            .unwrap_err();
        assert!(error.to_string().contains("k = 0"), "{p}: {error}");
        assert_eq!(other, c0);
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}
