//! Gflop/s (n^3/3 flops, shown as Gelem/s) of the whole tiled Cholesky factorisation with the
//! default tile size, for every backend in this build. Run: `cargo bench --bench cholesky` (add
//! `--features openblas` for OpenBLAS).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use hetla::{Backend, Cholesky, matgen::random_spd};

fn cholesky(c: &mut Criterion) {
    let mut group = c.benchmark_group("cholesky");
    group.sample_size(10);
    for n in [1024, 2048, 4096] {
        let a = random_spd(n, 1);
        group.throughput(Throughput::Elements((n as f64).powi(3) as u64 / 3));
        for backend in Backend::available() {
            let options = Cholesky::new().backend(backend);
            group.bench_function(
                format!("{backend}/{n}/tile{}", options.tile_size_for(n)),
                |bench| {
                    bench.iter_batched_ref(
                        || a.clone(),
                        |m| options.factor_in_place(m.as_mut()).unwrap(),
                        BatchSize::LargeInput,
                    )
                },
            );
        }
    }
    group.finish();
}

/// `solve_spd` per call (factor a copy and solve one right-hand side) beside faer's `llt` + `solve`
/// on the same matrix: the cost of a small system. The target is hetla <= 1.5x faer at n =
/// 64 and 512.
fn solve_spd(c: &mut Criterion) {
    use faer::linalg::solvers::Solve;
    let mut group = c.benchmark_group("solve_spd");
    group.sample_size(20);
    for n in [64, 512] {
        let a = random_spd(n, 1);
        let b = faer::Mat::<f64>::ones(n, 1);
        // The shared platform is built by the first call, outside the measurement.
        hetla::solve_spd(a.as_ref(), b.as_ref()).unwrap();
        group.bench_function(format!("hetla/{n}"), |bench| {
            bench.iter(|| hetla::solve_spd(a.as_ref(), b.as_ref()).unwrap())
        });
        group.bench_function(format!("faer-llt/{n}"), |bench| {
            bench.iter(|| a.llt(faer::Side::Lower).unwrap().solve(b.as_ref()))
        });
    }
    group.finish();
}

/// A rank-1 change of an n = 4096 factor (`Factor::update`, `Factor::downdate`) beside factoring
/// the changed matrix anew with the default options; and the reciprocal condition estimate. The
/// issue's target is an update >= 20x faster than refactoring.
fn factor_changes(c: &mut Criterion) {
    let mut group = c.benchmark_group("factor_changes");
    group.sample_size(10);
    let n = 4096;
    let a = random_spd(n, 1);
    let w = faer::Mat::from_fn(n, 1, |i, _| (i as f64 * 0.37).sin());
    let options = Cholesky::new();
    let factor = options.factor(a.as_ref()).unwrap();
    let changed = &a + &w * w.transpose();
    group.bench_function(format!("refactor/{n}"), |bench| {
        bench.iter_batched_ref(
            || changed.clone(),
            |m| options.factor_in_place(m.as_mut()).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.bench_function(format!("update-rank1/{n}"), |bench| {
        bench.iter_batched_ref(
            || factor.clone(),
            |f| f.update(w.as_ref()).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let updated = {
        let mut f = factor.clone();
        f.update(w.as_ref()).unwrap();
        f
    };
    group.bench_function(format!("downdate-rank1/{n}"), |bench| {
        bench.iter_batched_ref(
            || updated.clone(),
            |f| f.downdate(w.as_ref()).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.bench_function(format!("rcond/{n}"), |bench| {
        bench.iter(|| factor.rcond().unwrap())
    });
    group.finish();
}

/// The same factorisation (n = 4096, default options) of a faer matrix, an ndarray array in Fortran
/// and in C order, and a nalgebra matrix: the cost of the interop paths (features `ndarray` and
/// `nalgebra`; the target is <= 5% over faer). A C-ordered array is factored in a
/// column-major copy written back.
#[cfg(all(feature = "ndarray", feature = "nalgebra"))]
fn interop(c: &mut Criterion) {
    use ndarray::{Array2, ShapeBuilder};
    let mut group = c.benchmark_group("interop");
    group.sample_size(10);
    let n = 4096;
    let a = random_spd(n, 1);
    let options = Cholesky::new();
    group.bench_function(format!("faer/{n}"), |bench| {
        bench.iter_batched_ref(
            || a.clone(),
            |m| options.factor_in_place(m).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let fortran = Array2::from_shape_fn((n, n).f(), |(i, j)| a[(i, j)]);
    let c_order = Array2::from_shape_fn((n, n), |(i, j)| a[(i, j)]);
    for (name, array) in [("ndarray-f", &fortran), ("ndarray-c", &c_order)] {
        group.bench_function(format!("{name}/{n}"), |bench| {
            bench.iter_batched_ref(
                || array.clone(),
                |m| options.factor_in_place(m).unwrap(),
                BatchSize::LargeInput,
            )
        });
    }
    let dmatrix = nalgebra::DMatrix::from_fn(n, n, |i, j| a[(i, j)]);
    group.bench_function(format!("nalgebra/{n}"), |bench| {
        bench.iter_batched_ref(
            || dmatrix.clone(),
            |m| options.factor_in_place(m).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

#[cfg(not(all(feature = "ndarray", feature = "nalgebra")))]
fn interop(_: &mut Criterion) {}

criterion_group!(benches, cholesky, solve_spd, factor_changes, interop);
criterion_main!(benches);
