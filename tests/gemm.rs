//! The matrix product: results equal faer's for every strategy, transpose, ragged tiling,
//! scalar and placement, on CPU clusters and on emulated devices with budgets small enough
//! to evict; the simulated targets (max-reuse's exact traffic, PERI-SUM against dmda).

use faer::{Mat, Par};
use hetla::gemm::{Discretisation, Placement, Strategy};
use hetla::model::{Modelled, PlatformModel};
use hetla::runtime::{EmulatedDevice, ModelStore};
use hetla::{Backend, ClusterSpec, Gemm, Platform};
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
    let devices: Vec<Arc<dyn hetla::runtime::Device>> = (0..count)
        .map(|_| Arc::new(EmulatedDevice::new(budget)) as Arc<dyn hetla::runtime::Device>)
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
    let a = hetla::matgen::random(ar, ac, seed);
    let b = hetla::matgen::random(br, bc, seed + 1);
    let c0 = hetla::matgen::random(m, n, seed + 2);
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
fn max_reuse_moves_exactly_2rs_plus_2rst_over_mu_tiles_in_simulation() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let tile = 960;
    let bytes = tile * tile * 8;
    let (r, s, t) = (8usize, 8usize, 5usize);
    // 21 tiles: mu = 4 single-buffered; 26 tiles: mu = 4 double-buffered (prefetch on).
    for buffers in [21, 26] {
        let (report, trace) = Gemm::new()
            .strategy(Strategy::MaxReuse)
            .tile(tile)
            .scalars(1.0, 1.0)
            .simulate_traced(
                &Modelled::new(&sirocco, &ClusterSpec::None, 1).gpu_memory(Some(buffers * bytes)),
                (r * tile, s * tile, t * tile),
                &Default::default(),
            )
            .unwrap();
        let mu = 4;
        let expected = 2 * r * s + 2 * r * s * t / mu;
        assert_eq!(
            report.bytes_moved.total,
            expected * bytes,
            "{buffers} buffers"
        );
        assert_eq!(trace.tasks.len(), r * s * t);
        // The bound with 21 buffers is below what max-reuse moves.
        assert!(report.comm_ratio.unwrap() >= 1.0);
    }
}

#[test]
fn peri_sum_moves_less_than_dmda_on_sirocco_at_a_similar_makespan() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let spec: ClusterSpec = "2x10".parse().unwrap();
    let run = |strategy| {
        Gemm::new()
            .strategy(strategy)
            .tile(960)
            .simulate_traced(
                &Modelled::new(&sirocco, &spec, 4),
                (30720, 30720, 30720),
                &Default::default(),
            )
            .unwrap()
            .0
    };
    let dmda = run(Strategy::Dmda);
    let peri = run(Strategy::PeriSum {
        discretisation: Discretisation::Rounded,
        steal: true,
    });
    let bytes = peri.bytes_moved.total as f64 / dmda.bytes_moved.total as f64;
    let time = peri.seconds / dmda.seconds;
    eprintln!("sirocco n = 30720: peri-sum / dmda bytes {bytes:.3}, makespan {time:.3}");
    assert!(bytes <= 0.7, "bytes ratio {bytes}");
    assert!(time <= 1.05, "makespan ratio {time}");
    assert!(peri.comm_ratio.unwrap() >= 1.0 && dmda.comm_ratio.unwrap() >= 1.0);
}

#[test]
fn on_a100x8_the_host_sends_each_tile_once_over_every_shared_link_and_gpus_relay() {
    // Anastasiadis (2024) chapter 4: 8 A100 behind NVSwitch; pairs of GPUs share a PCIe link to the
    // host (96 GB/s in all). A tile another GPU holds comes over NVLink, a tile only the
    // host has comes over whichever host link delivers it first (possibly another pair's,
    // then NVLink), so host memory sends each of A and B once, over all four links, and C,
    // overwritten unread with beta = 0, not at all.
    let a100 = PlatformModel::preset("a100x8").unwrap();
    let link = a100.gpu.as_ref().unwrap().link;
    let n = 16384;
    let (report, trace) = Gemm::new()
        .simulate_traced(
            &Modelled::new(&a100, &ClusterSpec::None, 8),
            (n, n, n),
            &Default::default(),
        )
        .unwrap();
    let host = |t: &&hetla::runtime::TransferEvent| t.transfer.from.0 == 0;
    let from_host: usize = trace
        .transfers
        .iter()
        .filter(host)
        .map(|t| t.transfer.bytes)
        .sum();
    let peer = trace
        .transfers
        .iter()
        .filter(|t| t.transfer.from.0 != 0 && t.transfer.to.0 != 0)
        .count();
    let matrix = n * n * 8;
    assert_eq!(
        from_host,
        2 * matrix,
        "each tile of A and B leaves the host once"
    );
    assert!(peer > 0);
    // One copy at a time per shared link and direction, at the link's own rate, and every
    // link carries a share of the host's bytes.
    for pair in 0..4 {
        let on_pair = |t: &&hetla::runtime::TransferEvent| (t.transfer.to.0 - 1) / 2 == pair;
        let mut spans: Vec<(f64, f64)> = trace
            .transfers
            .iter()
            .filter(host)
            .filter(on_pair)
            .map(|t| {
                let seconds = link.h2d.seconds(t.transfer.bytes);
                assert!((t.end - t.start - seconds).abs() < 1e-12);
                (t.start, t.end)
            })
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            spans.windows(2).all(|w| w[1].0 >= w[0].1 - 1e-12),
            "pair {pair}"
        );
        let bytes = spans.len() * (n / 8).pow(2) * 8;
        assert!(
            bytes * 8 >= from_host,
            "pair {pair} carries {bytes} of {from_host} bytes"
        );
    }
    // With every GPU on its own 12 GB/s link and no routing through another GPU's link:
    // 57.8 Tflop/s; the bound is 137.6.
    assert!(report.gflops > 100_000.0, "{} Gflop/s", report.gflops);
}

#[test]
fn with_beta_zero_c_is_never_uploaded_and_its_old_contents_never_matter() {
    // Devices only, so every first step of a chain runs on a device; C starts as NaN.
    let devices: Vec<Arc<dyn hetla::runtime::Device>> = (0..2)
        .map(|_| Arc::new(EmulatedDevice::new(usize::MAX)) as Arc<dyn hetla::runtime::Device>)
        .collect();
    let platform =
        Platform::with_devices(&ClusterSpec::None, Backend::Faer, ModelStore::None, devices)
            .unwrap();
    let (m, n, k) = (150, 130, 70);
    let a = hetla::matgen::random(m, k, 1);
    let b = hetla::matgen::random(k, n, 2);
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
            t.transfer.tile.matrix == hetla::factorizations::MATMUL_C && t.transfer.from.0 == 0
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
    let devices = hetla::runtime::GpuSelection::All.open(None).unwrap();
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
