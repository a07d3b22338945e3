//! Gflop/s (2 m n k flops, shown as Gelem/s) of `hetla::Gemm` on this machine's cores
//! beside faer's product of the same matrices on the same cores, and the time to plan and
//! simulate the sirocco product of the PERI-SUM target (n = 30720, tile 960) per strategy.
//! Run: `cargo bench --bench gemm`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use faer::{Accum, Mat, Par};
use hetla::gemm::Strategy;
use hetla::model::{Modelled, PlatformModel};
use hetla::{Backend, ClusterSpec, Gemm, Platform, matgen::random};

fn real(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    group.sample_size(10);
    let platform = Platform::new(&ClusterSpec::Auto, Backend::Faer).unwrap();
    let cores = platform.topology().cores().len();
    for n in [1024, 2048] {
        let (a, b) = (random(n, n, 1), random(n, n, 2));
        let mut out = Mat::<f64>::zeros(n, n);
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.bench_function(format!("hetla/{n}"), |bench| {
            bench.iter(|| {
                Gemm::new()
                    .tile(512)
                    .run(&platform, a.as_ref(), b.as_ref(), out.as_mut())
                    .unwrap()
            })
        });
        let par = if cores > 1 {
            Par::rayon(cores)
        } else {
            Par::Seq
        };
        group.bench_function(format!("faer/{n}"), |bench| {
            bench.iter(|| {
                faer::linalg::matmul::matmul(
                    out.as_mut(),
                    Accum::Replace,
                    a.as_ref(),
                    b.as_ref(),
                    1.0,
                    par,
                )
            })
        });
    }
    group.finish();
}

fn simulated(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm-simulated-sirocco-30720");
    group.sample_size(10);
    let sirocco = PlatformModel::preset("sirocco").unwrap();
    let spec: ClusterSpec = "2x10".parse().unwrap();
    for strategy in Strategy::CONCRETE {
        group.bench_function(strategy.to_string(), |bench| {
            bench.iter(|| {
                Gemm::new()
                    .strategy(strategy)
                    .tile(960)
                    .simulate_traced(
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

criterion_group!(benches, real, simulated);
criterion_main!(benches);
