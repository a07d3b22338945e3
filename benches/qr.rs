//! Gflop/s (2 m n^2 - 2 n^3/3 flops, shown as Gelem/s) of the tiled QR for every backend in this
//! build, beside each library's own QR of the whole matrix (faer's blocked `qr_in_place`, OpenBLAS
//! ?geqrf) in the same run, on a square and a tall-skinny matrix; and CholeskyQR2 on the tall one.
//! Run: `cargo bench --bench qr` (add `--features openblas` for OpenBLAS).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use hetla::{Backend, CholeskyQr, Qr, matgen::random_block_in};

fn qr(c: &mut Criterion) {
    let mut group = c.benchmark_group("qr");
    group.sample_size(10);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (m, n) in [(2048, 2048), (50000, 128)] {
        let a = random_block_in::<f64>(m, 1, 0..m, 0..n);
        let (mf, nf) = (m as f64, n as f64);
        group.throughput(Throughput::Elements(
            (2.0 * mf * nf * nf - 2.0 * nf * nf * nf / 3.0) as u64,
        ));
        for backend in Backend::available() {
            let options = Qr::new().backend(backend);
            group.bench_function(
                format!(
                    "hetla-{backend}/{m}x{n}/tile{}",
                    options.tile_size_for(m, n)
                ),
                |bench| {
                    bench.iter_batched(
                        || a.clone(),
                        |f| options.factor_owned(f).unwrap(),
                        BatchSize::LargeInput,
                    )
                },
            );
            group.bench_function(format!("library-{backend}/{m}x{n}"), |bench| {
                bench.iter_batched_ref(
                    || a.clone(),
                    |f| {
                        backend
                            .library_qr(f.as_mut(), hetla::Par::rayon(threads))
                            .unwrap()
                    },
                    BatchSize::LargeInput,
                )
            });
        }
        if m > n {
            group.bench_function(format!("cholesky-qr2/{m}x{n}"), |bench| {
                bench.iter(|| CholeskyQr::new().factor(a.as_ref()).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, qr);
criterion_main!(benches);
