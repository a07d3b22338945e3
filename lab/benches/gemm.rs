//! The time to plan and simulate the sirocco product of the PERI-SUM target (n = 30720, tile 960)
//! per strategy. Run: `cargo bench -p hetla-lab --bench gemm`.

use criterion::{Criterion, criterion_group, criterion_main};
use hetla::gemm::Strategy;
use hetla::{ClusterSpec, Gemm};
use hetla_lab::{Modelled, PlatformModel, simulate_gemm_traced};

fn simulated(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm-simulated-sirocco-30720");
    group.sample_size(10);
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let spec: ClusterSpec = "2x10".parse().unwrap();
    for strategy in Strategy::CONCRETE {
        group.bench_function(strategy.to_string(), |bench| {
            bench.iter(|| {
                simulate_gemm_traced(
                    &Gemm::new().strategy(strategy).tile(960),
                    &Modelled::new(&sirocco, &spec, 4),
                    (30720, 30720, 30720),
                    &Default::default(),
                )
                .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, simulated);
criterion_main!(benches);
