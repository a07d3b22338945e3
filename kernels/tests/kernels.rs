//! Every tile operation against a naive reference, on every backend this build has, with square,
//! ragged and transposed operands.

use faer::{Mat, MatRef};
use hetla_kernels::{Backend, KernelError, Op, Par};

fn pseudo_random(rows: usize, cols: usize, seed: usize) -> Mat<f64> {
    Mat::from_fn(rows, cols, |i, j| {
        let h = (i * 7919 + j * 104_729 + seed * 1_299_709) % 10_007;
        h as f64 / 10_007.0 - 0.5
    })
}

/// A well-conditioned lower triangular tile (strict upper part filled with junk that a kernel must
/// not read).
fn lower_tile(n: usize, seed: usize) -> Mat<f64> {
    let mut l = pseudo_random(n, n, seed);
    for i in 0..n {
        l[(i, i)] = 2.0 + i as f64 / n as f64;
        for j in i + 1..n {
            l[(i, j)] = f64::NAN;
        }
    }
    l
}

fn lower_only(l: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(
        l.nrows(),
        l.ncols(),
        |i, j| if i >= j { l[(i, j)] } else { 0.0 },
    )
}

fn naive_mul(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), b.ncols(), |i, j| {
        (0..a.ncols()).map(|k| a[(i, k)] * b[(k, j)]).sum()
    })
}

fn max_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut d = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            d = d.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    d
}

const SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (7, 3, 5),
    (64, 64, 64),
    (33, 17, 50),
    (130, 129, 3),
];
const PARS: [Par; 2] = [
    Par::Seq,
    Par::Rayon(std::num::NonZeroUsize::new(2).unwrap()),
];

#[test]
fn potrf_factors_and_leaves_upper_untouched() {
    for backend in Backend::available() {
        for n in [1, 2, 5, 64, 97] {
            let m = pseudo_random(n, n, n);
            let spd =
                naive_mul(m.as_ref(), m.transpose()) + Mat::<f64>::identity(n, n) * (n as f64);
            let mut a = spd.clone();
            for j in 1..n {
                for i in 0..j {
                    a[(i, j)] = 42.0;
                }
            }
            for par in PARS {
                let mut f = a.clone();
                backend.run(Op::Potrf, &[], f.as_mut(), par).unwrap();
                let l = lower_only(f.as_ref());
                let llt = naive_mul(l.as_ref(), l.transpose());
                assert!(
                    max_diff(llt.as_ref(), spd.as_ref()) < 1e-12 * n as f64 * n as f64,
                    "{backend} n={n}"
                );
                for j in 1..n {
                    for i in 0..j {
                        assert_eq!(f[(i, j)], 42.0, "{backend} wrote the upper triangle");
                    }
                }
            }
        }
    }
}

#[test]
fn potrf_reports_the_failing_column() {
    for backend in Backend::available() {
        for bad in [0, 3, 9] {
            let mut a = Mat::<f64>::identity(10, 10);
            a[(bad, bad)] = -1.0;
            let err = backend.potrf(a.as_mut(), Par::Seq).unwrap_err();
            assert_eq!(
                err,
                KernelError::NotPositiveDefinite { index: bad },
                "{backend}"
            );
        }
        // A zero pivot that appears only after elimination: [[1, 1], [1, 1]].
        let mut a = Mat::from_fn(2, 2, |_, _| 1.0);
        let err = backend.potrf(a.as_mut(), Par::Seq).unwrap_err();
        assert_eq!(
            err,
            KernelError::NotPositiveDefinite { index: 1 },
            "{backend}"
        );
        let mut a = Mat::from_fn(1, 1, |_, _| f64::NAN);
        assert!(
            backend.potrf(a.as_mut(), Par::Seq).is_err(),
            "{backend} accepted NaN"
        );
    }
}

#[test]
fn trsm_solves_from_the_right_with_l_transposed() {
    for backend in Backend::available() {
        for &(m, n, _) in &SHAPES {
            let l = lower_tile(n, 1);
            let b = pseudo_random(m, n, 2);
            for par in PARS {
                let mut x = b.clone();
                backend
                    .run(Op::Trsm, &[l.as_ref()], x.as_mut(), par)
                    .unwrap();
                let back = naive_mul(x.as_ref(), lower_only(l.as_ref()).transpose());
                assert!(
                    max_diff(back.as_ref(), b.as_ref()) < 1e-12,
                    "{backend} {m}x{n}"
                );
            }
        }
    }
}

#[test]
fn syrk_updates_the_lower_triangle_only() {
    for backend in Backend::available() {
        for &(n, _, k) in &SHAPES {
            let a = pseudo_random(n, k, 3);
            let c0 = pseudo_random(n, n, 4);
            let mut c = c0.clone();
            backend
                .run(Op::Syrk, &[a.as_ref()], c.as_mut(), Par::Seq)
                .unwrap();
            let want = &c0 - naive_mul(a.as_ref(), a.transpose());
            for j in 0..n {
                for i in 0..n {
                    let expect = if i >= j { want[(i, j)] } else { c0[(i, j)] };
                    assert!((c[(i, j)] - expect).abs() < 1e-12, "{backend} ({i},{j})");
                }
            }
        }
    }
}

#[test]
fn gemm_and_updates_match_the_naive_products() {
    for backend in Backend::available() {
        for &(m, n, k) in &SHAPES {
            let c0 = pseudo_random(m, n, 5);
            // Gemm: C - A B^T with A m x k and B n x k.
            let (a, b) = (pseudo_random(m, k, 6), pseudo_random(n, k, 7));
            let mut c = c0.clone();
            backend
                .run(Op::GemmNt, &[a.as_ref(), b.as_ref()], c.as_mut(), Par::Seq)
                .unwrap();
            let want = &c0 - naive_mul(a.as_ref(), b.transpose());
            assert!(
                max_diff(c.as_ref(), want.as_ref()) < 1e-12,
                "{backend} gemm"
            );
            // Update: Y - L X with L m x k and X k x n.
            let x = pseudo_random(k, n, 8);
            let mut y = c0.clone();
            backend
                .run(Op::Update, &[a.as_ref(), x.as_ref()], y.as_mut(), Par::Seq)
                .unwrap();
            let want = &c0 - naive_mul(a.as_ref(), x.as_ref());
            assert!(
                max_diff(y.as_ref(), want.as_ref()) < 1e-12,
                "{backend} update"
            );
            // Add: Y + X with X of Y's shape.
            let mut y = c0.clone();
            backend
                .run(
                    Op::Add,
                    &[a.as_ref().subrows(0, m).subcols(0, k.min(n))],
                    y.as_mut().subcols_mut(0, k.min(n)),
                    Par::Seq,
                )
                .unwrap();
            let added =
                |i: usize, j: usize| c0[(i, j)] + if j < k.min(n) { a[(i, j)] } else { 0.0 };
            assert!(
                max_diff(y.as_ref(), Mat::from_fn(m, n, added).as_ref()) < 1e-15,
                "{backend} add"
            );
            // UpdateTrans: Y - L^T X with L k x m.
            let lt = pseudo_random(k, m, 9);
            let mut y = c0.clone();
            backend
                .run(
                    Op::UpdateTrans,
                    &[lt.as_ref(), x.as_ref()],
                    y.as_mut(),
                    Par::Seq,
                )
                .unwrap();
            let want = &c0 - naive_mul(lt.transpose(), x.as_ref());
            assert!(
                max_diff(y.as_ref(), want.as_ref()) < 1e-12,
                "{backend} update_trans"
            );
        }
    }
}

#[test]
fn left_triangular_solves_invert_l_and_its_transpose() {
    for backend in Backend::available() {
        for &(m, r, _) in &SHAPES {
            let l = lower_tile(m, 10);
            let b = pseudo_random(m, r, 11);
            for (op, tri) in [
                (Op::SolveLower, lower_only(l.as_ref())),
                (
                    Op::SolveLowerTrans,
                    lower_only(l.as_ref()).transpose().to_owned(),
                ),
            ] {
                let mut x = b.clone();
                backend
                    .run(op, &[l.as_ref()], x.as_mut(), Par::Seq)
                    .unwrap();
                let back = naive_mul(tri.as_ref(), x.as_ref());
                assert!(
                    max_diff(back.as_ref(), b.as_ref()) < 1e-12,
                    "{backend} {op}"
                );
            }
        }
    }
}

#[test]
fn views_that_are_not_column_major_give_the_same_result() {
    for backend in Backend::available() {
        let (m, n, k) = (9, 6, 4);
        let (a, b) = (pseudo_random(m, k, 12), pseudo_random(k, n, 13));
        let c0 = pseudo_random(m, n, 14);
        let want = &c0 - naive_mul(a.as_ref(), b.as_ref());
        // The output written through a transposed (row-major) view of an n x m matrix,
        // and A read from a transposed copy: both must be handled, not assumed away.
        let mut ct = c0.transpose().to_owned();
        let at = a.transpose().to_owned();
        backend
            .gemm_sub(
                at.transpose(),
                b.as_ref(),
                ct.as_mut().transpose_mut(),
                Par::Seq,
            )
            .unwrap();
        assert!(max_diff(ct.transpose(), want.as_ref()) < 1e-12, "{backend}");
        // A triangle handed over as a transposed view of its stored transpose.
        let l = lower_only(lower_tile(m, 15).as_ref());
        let lt = l.transpose().to_owned();
        let rhs = pseudo_random(m, 3, 16);
        let mut x = rhs.clone();
        backend
            .solve_lower(lt.transpose(), false, x.as_mut(), Par::Seq)
            .unwrap();
        assert!(
            max_diff(naive_mul(l.as_ref(), x.as_ref()).as_ref(), rhs.as_ref()) < 1e-12,
            "{backend}"
        );
    }
}

#[test]
fn wrong_operands_are_errors_not_panics() {
    let (a, b) = (Mat::<f64>::zeros(3, 4), Mat::<f64>::zeros(2, 4));
    let mut c = Mat::<f64>::zeros(3, 3);
    let err = Backend::Faer
        .run(Op::GemmNt, &[a.as_ref(), b.as_ref()], c.as_mut(), Par::Seq)
        .unwrap_err();
    assert!(err.to_string().contains("B is 2x4, expected 3x4"), "{err}");
    assert!(
        matches!(err, KernelError::Operands { op: Op::GemmNt, .. }),
        "{err}"
    );
    let err = Backend::Faer
        .run(Op::Trsm, &[], c.as_mut(), Par::Seq)
        .unwrap_err();
    assert!(err.to_string().contains("expected 2 operands"), "{err}");
    let mut rect = Mat::<f64>::zeros(3, 4);
    assert!(
        Backend::Faer
            .run(Op::Potrf, &[], rect.as_mut(), Par::Seq)
            .is_err()
    );
}

#[test]
fn backends_parse_and_report_availability() {
    assert_eq!("faer".parse::<Backend>().unwrap(), Backend::Faer);
    assert_eq!("OpenBLAS".parse::<Backend>().unwrap(), Backend::OpenBlas);
    let err = "mkl".parse::<Backend>().unwrap_err();
    assert!(err.to_string().contains("expected `faer` or `openblas`"));
    assert_eq!(Backend::OpenBlas.is_available(), cfg!(feature = "openblas"));
    if !cfg!(feature = "openblas") {
        let mut a = Mat::<f64>::identity(2, 2);
        let err = Backend::OpenBlas.potrf(a.as_mut(), Par::Seq).unwrap_err();
        assert_eq!(err, KernelError::BackendUnavailable { name: "openblas" });
        assert!(err.to_string().contains("--features openblas"));
    }
}

/// A cluster of p cores runs OpenBLAS as p sequential calls on its own pool threads: OpenBLAS's
/// process-wide thread count stays 1 through parallel kernels (a 2x1 run uses one thread per
/// kernel), and the library peer restores it after using all threads.
#[cfg(feature = "openblas")]
#[test]
fn openblas_runs_one_thread_per_pool_thread() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let a = pseudo_random(300, 200, 1);
    let b = pseudo_random(250, 200, 2);
    let mut c = pseudo_random(300, 250, 3);
    let expected = {
        let mut e = c.clone();
        Backend::Faer
            .gemm_sub(a.as_ref(), b.transpose(), e.as_mut(), Par::Seq)
            .unwrap();
        e
    };
    pool.install(|| {
        Backend::OpenBlas
            .gemm_sub(a.as_ref(), b.transpose(), c.as_mut(), Par::rayon(2))
            .unwrap()
    });
    assert_eq!(Backend::OpenBlas.library_threads(), Some(1));
    assert!(max_diff(c.as_ref(), expected.as_ref()) < 1e-12);
    let mut spd = Mat::from_fn(300, 300, |i, j| if i == j { 300.0 } else { 0.5 });
    pool.install(|| Backend::OpenBlas.library_potrf(spd.as_mut(), Par::rayon(2)))
        .unwrap();
    assert_eq!(Backend::OpenBlas.library_threads(), Some(1));
}
