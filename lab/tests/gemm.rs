//! The matrix product simulated on modelled machines: max-reuse's exact traffic, PERI-SUM against
//! dmda on sirocco, and the host's links on a100x8.

use hetla::gemm::{Discretisation, Strategy};
use hetla::{ClusterSpec, Gemm};
use hetla_lab::{Modelled, PlatformModel, simulate_gemm, simulate_gemm_traced};

#[test]
fn max_reuse_moves_exactly_2rs_plus_2rst_over_mu_tiles_in_simulation() {
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let tile = 960;
    let bytes = tile * tile * 8;
    let (r, s, t) = (8usize, 8usize, 5usize);
    // 21 tiles: mu = 4 single-buffered; 26 tiles: mu = 4 double-buffered (prefetch on).
    for buffers in [21, 26] {
        let gemm = Gemm::new()
            .strategy(Strategy::MaxReuse)
            .tile(tile)
            .scalars(1.0, 1.0);
        let (report, trace) = simulate_gemm_traced(
            &gemm,
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
        simulate_gemm(
            &Gemm::new().strategy(strategy).tile(960),
            &Modelled::new(&sirocco, &spec, 4),
            (30720, 30720, 30720),
            &Default::default(),
        )
        .unwrap()
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
    let (report, trace) = simulate_gemm_traced(
        &Gemm::new(),
        &Modelled::new(&a100, &ClusterSpec::None, 8),
        (n, n, n),
        &Default::default(),
    )
    .unwrap();
    let host = |t: &&hetla_runtime::TransferEvent| t.transfer.from.0 == 0;
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
        let on_pair = |t: &&hetla_runtime::TransferEvent| (t.transfer.to.0 - 1) / 2 == pair;
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
