//! Gflop/s (2 m n k flops, shown as Gelem/s) of `hetla::Gemm` on this machine's cores beside faer's
//! product of the same matrices on the same cores (the simulated product is `hetla-lab`'s bench).
//! Run: `cargo bench --bench gemm`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use faer::{Accum, Mat, Par};
use hetla::{Backend, ClusterSpec, Gemm, Platform, matgen::random_in};

fn real(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    group.sample_size(10);
    let platform = Platform::new(&ClusterSpec::Auto, Backend::Faer).unwrap();
    let cores = platform.topology().cores().len();
    for n in [1024, 2048] {
        let (a, b) = (random_in::<f64>(n, n, 1), random_in::<f64>(n, n, 2));
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

criterion_group!(benches, real);
criterion_main!(benches);
