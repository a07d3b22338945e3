//! Gflop/s of each CPU tile kernel of the Cholesky factorisation beside the library's own plain
//! GEMM (C -= A B, column-major operands: its fast path, on its own threads), for every backend in
//! this build, at tiles 128 to 2048, on 1 and 2 threads.
//!
//! Throughput is declared in flops, so criterion's "Gelem/s" reads as Gflop/s. Run:
//! `cargo bench -p hetla-kernels` (add `--features openblas` for OpenBLAS).

use std::num::NonZeroUsize;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use faer::Mat;
use hetla_kernels::{Backend, Op, Par};

fn operands(op: Op, b: usize) -> (Vec<Mat<f64>>, Mat<f64>) {
    let m = |seed: usize| {
        Mat::from_fn(b, b, |i, j| {
            ((i * 7919 + j * 104_729 + seed) % 1000) as f64 / 1000.0 - 0.5
        })
    };
    let spd = Mat::from_fn(b, b, |i, j| if i == j { b as f64 } else { 0.0 })
        + m(1) * 0.5
        + m(1).transpose() * 0.5;
    let lower = Mat::from_fn(b, b, |i, j| {
        if i == j {
            2.0
        } else if i > j {
            0.01
        } else {
            0.0
        }
    });
    match op {
        Op::Potrf => (vec![], spd),
        Op::Trsm => (vec![lower], m(2)),
        Op::Syrk => (vec![m(3)], spd),
        _ => (vec![m(4), m(5)], m(6)),
    }
}

fn kernels(c: &mut Criterion) {
    for backend in Backend::available() {
        for threads in [1usize, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let par = if threads > 1 {
                Par::Rayon(NonZeroUsize::new(threads).unwrap())
            } else {
                Par::Seq
            };
            let mut group = c.benchmark_group(format!("kernels/{backend}/{threads}t"));
            group.sample_size(10);
            group.warm_up_time(std::time::Duration::from_millis(300));
            group.measurement_time(std::time::Duration::from_secs(1));
            for b in [128, 256, 512, 1024, 2048] {
                for op in [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt] {
                    let (reads, write) = operands(op, b);
                    let shapes: Vec<_> = reads
                        .iter()
                        .chain([&write])
                        .map(|m| (m.nrows(), m.ncols()))
                        .collect();
                    group.throughput(Throughput::Elements(op.flops(&shapes) as u64));
                    let views: Vec<_> = reads.iter().map(|m| m.as_ref()).collect();
                    group.bench_function(format!("{op}/{b}"), |bench| {
                        // A fresh copy of the written tile each time: POTRF and TRSM cannot
                        // be repeated in place, and updates would drift the values.
                        bench.iter_batched_ref(
                            || write.clone(),
                            |out| {
                                pool.install(|| backend.run(op, &views, out.as_mut(), par).unwrap())
                            },
                            BatchSize::LargeInput,
                        )
                    });
                }
                let (reads, write) = operands(Op::GemmNt, b);
                group.throughput(Throughput::Elements(2 * (b as u64).pow(3)));
                group.bench_function(format!("library-gemm/{b}"), |bench| {
                    bench.iter_batched_ref(
                        || write.clone(),
                        |out| {
                            pool.install(|| {
                                backend
                                    .library_gemm_sub(
                                        reads[0].as_ref(),
                                        reads[1].as_ref(),
                                        out.as_mut(),
                                        par,
                                    )
                                    .unwrap()
                            })
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
            group.finish();
        }
    }
}

/// The panel's triangular solve X L^T = B as MAGMA does it on GPUs: the diagonal tile inverted once
/// per panel (TRTRI, b^3/3 flops), then each solve of the panel a triangular product X = B L^-T
/// (TRMM, b^3 flops, as many as the solve); beside the solve itself. One thread, the in-run kernel
/// rate: the product replaces the solve only where it is faster (docs/cpu-performance.md).
fn trsm_by_inverse(c: &mut Criterion) {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    let mut group = c.benchmark_group("trsm-by-inverse/1t");
    group.sample_size(10);
    group.warm_up_time(std::time::Duration::from_millis(300));
    group.measurement_time(std::time::Duration::from_secs(1));
    for b in [256, 512, 1024] {
        let (reads, write) = operands(Op::Trsm, b);
        let l = reads[0].as_ref();
        group.throughput(Throughput::Elements((b as u64).pow(3)));
        for backend in Backend::available() {
            group.bench_function(format!("{backend}-trsm/{b}"), |bench| {
                bench.iter_batched_ref(
                    || write.clone(),
                    |out| backend.run(Op::Trsm, &[l], out.as_mut(), Par::Seq).unwrap(),
                    BatchSize::LargeInput,
                )
            });
        }
        let mut inverse = Mat::<f64>::zeros(b, b);
        faer::linalg::triangular_inverse::invert_lower_triangular(inverse.as_mut(), l, Par::Seq);
        group.bench_function(format!("faer-trmm/{b}"), |bench| {
            bench.iter_batched_ref(
                || (write.clone(), Mat::<f64>::zeros(b, b)),
                |(rhs, out)| {
                    matmul(
                        out.as_mut(),
                        BlockStructure::Rectangular,
                        faer::Accum::Replace,
                        rhs.as_ref(),
                        BlockStructure::Rectangular,
                        inverse.transpose(),
                        BlockStructure::TriangularUpper,
                        1.0,
                        Par::Seq,
                    )
                },
                BatchSize::LargeInput,
            )
        });
        #[cfg(feature = "openblas")]
        group.bench_function(format!("openblas-trmm/{b}"), |bench| {
            use cblas_sys::{
                CBLAS_DIAG, CBLAS_LAYOUT, CBLAS_SIDE, CBLAS_TRANSPOSE, CBLAS_UPLO, cblas_dtrmm,
            };
            bench.iter_batched_ref(
                || write.clone(),
                |out| {
                    let (n, ld) = (b as i32, out.col_stride() as i32);
                    // SAFETY: both matrices are b x b, column-major with the given strides.
                    unsafe {
                        cblas_dtrmm(
                            CBLAS_LAYOUT::CblasColMajor,
                            CBLAS_SIDE::CblasRight,
                            CBLAS_UPLO::CblasLower,
                            CBLAS_TRANSPOSE::CblasTrans,
                            CBLAS_DIAG::CblasNonUnit,
                            n,
                            n,
                            1.0,
                            inverse.as_ptr(),
                            inverse.col_stride() as i32,
                            out.as_ptr_mut(),
                            ld,
                        )
                    }
                },
                BatchSize::LargeInput,
            )
        });
        // The inversion, once per panel: its cost is shared by the panel's solves.
        group.throughput(Throughput::Elements((b as u64).pow(3) / 3));
        group.bench_function(format!("faer-trtri/{b}"), |bench| {
            bench.iter_batched_ref(
                || Mat::<f64>::zeros(b, b),
                |out| {
                    faer::linalg::triangular_inverse::invert_lower_triangular(
                        out.as_mut(),
                        l,
                        Par::Seq,
                    )
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, kernels, trsm_by_inverse);
criterion_main!(benches);
