//! Gflop/s (2 n^3/3 flops, shown as Gelem/s) of the tiled LU with partial pivoting, for every
//! backend in this build, beside each library's own LU of the whole matrix (faer's `lu_in_place`,
//! OpenBLAS ?getrf) in the same run; and `hetla::solve` against faer's `partial_piv_lu` + `solve`
//! on a small system. Run: `cargo bench --bench lu` (add `--features openblas` for OpenBLAS).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use hetla::{Backend, Lu, matgen::random_in};

fn lu(c: &mut Criterion) {
    let mut group = c.benchmark_group("lu");
    group.sample_size(10);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for n in [1024, 2048, 4096] {
        let a = random_in::<f64>(n, n, 1);
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3) / 3));
        for backend in Backend::available() {
            let options = Lu::new().backend(backend);
            group.bench_function(
                format!("hetla-{backend}/{n}/tile{}", options.tile_size_for(n)),
                |bench| {
                    bench.iter_batched(
                        || a.clone(),
                        |m| options.factor_owned(m).unwrap(),
                        BatchSize::LargeInput,
                    )
                },
            );
            group.bench_function(format!("library-{backend}/{n}"), |bench| {
                bench.iter_batched_ref(
                    || a.clone(),
                    |m| {
                        backend
                            .library_lu(m.as_mut(), hetla::Par::rayon(threads))
                            .unwrap()
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

/// `hetla::solve` per call beside faer's `partial_piv_lu` + `solve`: the cost of a small system.
fn solve(c: &mut Criterion) {
    use faer::linalg::solvers::Solve;
    let mut group = c.benchmark_group("solve");
    group.sample_size(20);
    for n in [64, 512] {
        let a = random_in::<f64>(n, n, 1);
        let b = faer::Mat::<f64>::ones(n, 1);
        hetla::solve(a.as_ref(), b.as_ref()).unwrap();
        group.bench_function(format!("hetla/{n}"), |bench| {
            bench.iter(|| hetla::solve(a.as_ref(), b.as_ref()).unwrap())
        });
        group.bench_function(format!("faer-lu/{n}"), |bench| {
            bench.iter(|| a.partial_piv_lu().solve(b.as_ref()))
        });
    }
    group.finish();
}

criterion_group!(benches, lu, solve);
criterion_main!(benches);
