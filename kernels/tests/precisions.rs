//! Every tile operation in every precision (f32, f64, c32, c64) on every backend this build has,
//! against a naive product computed in complex f64: complex operands with non-zero imaginary parts,
//! so that a kernel which transposes where it must conjugate (or the reverse) fails.

use faer::{Mat, MatRef};
use hetla_kernels::{Backend, KernelError, MatMul, Op, Par, Precision, Scalar, c32, c64};

fn pseudo_random<T: Scalar>(rows: usize, cols: usize, seed: usize) -> Mat<T> {
    Mat::from_fn(rows, cols, |i, j| {
        let h = |s: usize| ((i * 7919 + j * 104_729 + s * 1_299_709) % 10_007) as f64 / 10_007.0;
        T::from_parts(h(seed) - 0.5, h(seed + 17) - 0.5)
    })
}

fn wide(m: MatRef<'_, impl Scalar>) -> Mat<c64> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[(i, j)].to_c64())
}

fn adjoint(m: &Mat<c64>) -> Mat<c64> {
    Mat::from_fn(m.ncols(), m.nrows(), |i, j| m[(j, i)].conj())
}

fn lower(m: &Mat<c64>) -> Mat<c64> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
        if i >= j {
            m[(i, j)]
        } else {
            c64::new(0.0, 0.0)
        }
    })
}

fn mul(a: &Mat<c64>, b: &Mat<c64>) -> Mat<c64> {
    Mat::from_fn(a.nrows(), b.ncols(), |i, j| {
        (0..a.ncols()).map(|k| a[(i, k)] * b[(k, j)]).sum()
    })
}

fn max_diff(a: &Mat<c64>, b: &Mat<c64>) -> f64 {
    let mut d = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            d = d.max((a[(i, j)] - b[(i, j)]).norm());
        }
    }
    d
}

/// A well-conditioned lower triangular tile with a real positive diagonal (a Cholesky factor's) and
/// NaN junk above it that no kernel may read.
fn lower_tile<T: Scalar>(n: usize, seed: usize) -> Mat<T> {
    let mut l = pseudo_random::<T>(n, n, seed);
    for i in 0..n {
        l[(i, i)] = T::from_f64(2.0 + i as f64 / n as f64);
        for j in i + 1..n {
            l[(i, j)] = T::from_f64(f64::NAN);
        }
    }
    l
}

/// The tolerance of a result of magnitude about `scale` after sums of `k` terms.
fn tol<T: Scalar>(k: usize, scale: f64) -> f64 {
    20.0 * (k as f64 + 1.0) * T::PRECISION.epsilon() * scale.max(1.0)
}

const SHAPES: [(usize, usize, usize); 4] = [(1, 1, 1), (7, 3, 5), (64, 64, 64), (130, 129, 3)];
const PARS: [Par; 2] = [
    Par::Seq,
    Par::Rayon(std::num::NonZeroUsize::new(2).unwrap()),
];

fn every_op<T: Scalar>() {
    let p = T::PRECISION;
    for backend in Backend::available() {
        for &(m, n, k) in &SHAPES {
            for par in PARS {
                let what = format!("{p} {backend} {m}x{n}x{k} {par:?}");
                let c0 = pseudo_random::<T>(m, n, 5);
                let w0 = wide(c0.as_ref());
                let run = |op: Op, reads: &[MatRef<'_, T>], out: &mut Mat<T>| {
                    backend.run(op, reads, out.as_mut(), par).unwrap();
                    wide(out.as_ref())
                };
                // GemmNt: C - A B^H.
                let (a, b) = (pseudo_random::<T>(m, k, 6), pseudo_random::<T>(n, k, 7));
                let got = run(Op::GemmNt, &[a.as_ref(), b.as_ref()], &mut c0.clone());
                let want = &w0 - mul(&wide(a.as_ref()), &adjoint(&wide(b.as_ref())));
                assert!(max_diff(&got, &want) < tol::<T>(k, 1.0), "{what} gemm");
                // Update: Y - L X; UpdateTrans: Y - L^H X.
                let x = pseudo_random::<T>(k, n, 8);
                let got = run(Op::Update, &[a.as_ref(), x.as_ref()], &mut c0.clone());
                let want = &w0 - mul(&wide(a.as_ref()), &wide(x.as_ref()));
                assert!(max_diff(&got, &want) < tol::<T>(k, 1.0), "{what} update");
                let lt = pseudo_random::<T>(k, m, 9);
                let got = run(Op::UpdateTrans, &[lt.as_ref(), x.as_ref()], &mut c0.clone());
                let want = &w0 - mul(&adjoint(&wide(lt.as_ref())), &wide(x.as_ref()));
                assert!(
                    max_diff(&got, &want) < tol::<T>(k, 1.0),
                    "{what} update_trans"
                );
                // MatMul with both operands "transposed": alpha A^H B^H + beta C.
                let op = Op::MatMul(MatMul::new(true, true, 1.5, -0.5));
                let (at, bt) = (pseudo_random::<T>(k, m, 10), pseudo_random::<T>(n, k, 11));
                let got = run(op, &[at.as_ref(), bt.as_ref()], &mut c0.clone());
                let prod = mul(&adjoint(&wide(at.as_ref())), &adjoint(&wide(bt.as_ref())));
                let want = Mat::from_fn(m, n, |i, j| prod[(i, j)] * 1.5 - w0[(i, j)] * 0.5);
                assert!(max_diff(&got, &want) < tol::<T>(k, 2.0), "{what} matmul");
                // Add.
                let got = run(Op::Add, &[c0.as_ref()], &mut c0.clone());
                assert!(
                    max_diff(&got, &(&w0 + &w0)) < tol::<T>(1, 1.0),
                    "{what} add"
                );
                // Trsm: B L^-H, so (B L^-H) L^H = B.
                let l = lower_tile::<T>(n, 1);
                let got = run(Op::Trsm, &[l.as_ref()], &mut c0.clone());
                let back = mul(&got, &adjoint(&lower(&wide(l.as_ref()))));
                assert!(max_diff(&back, &w0) < tol::<T>(n, 1.0), "{what} trsm");
                // SolveLower and SolveLowerTrans: L^-1 X and L^-H X.
                let l = lower_tile::<T>(m, 2);
                let wl = lower(&wide(l.as_ref()));
                let got = run(Op::SolveLower, &[l.as_ref()], &mut c0.clone());
                assert!(
                    max_diff(&mul(&wl, &got), &w0) < tol::<T>(m, 1.0),
                    "{what} solve"
                );
                let got = run(Op::SolveLowerTrans, &[l.as_ref()], &mut c0.clone());
                let back = mul(&adjoint(&wl), &got);
                assert!(
                    max_diff(&back, &w0) < tol::<T>(m, 1.0),
                    "{what} solve_trans"
                );
                // SolveUnitLower and SolveUpper, an LU's two triangles of one tile: L^-1 X (unit
                // diagonal) and U^-1 X, each reading only its own part of the tile.
                let mut f = pseudo_random::<T>(m, m, 14);
                for i in 0..m {
                    f[(i, i)] = T::from_f64(m as f64 + 2.0);
                }
                let wf = wide(f.as_ref());
                let one = c64::new(1.0, 0.0);
                let unit_lower = Mat::from_fn(m, m, |i, j| match i.cmp(&j) {
                    std::cmp::Ordering::Greater => wf[(i, j)],
                    std::cmp::Ordering::Equal => one,
                    std::cmp::Ordering::Less => c64::new(0.0, 0.0),
                });
                let upper = Mat::from_fn(m, m, |i, j| {
                    if i <= j {
                        wf[(i, j)]
                    } else {
                        c64::new(0.0, 0.0)
                    }
                });
                for (op, triangle) in [(Op::SolveUnitLower, unit_lower), (Op::SolveUpper, upper)] {
                    let got = run(op, &[f.as_ref()], &mut c0.clone());
                    let back = mul(&triangle, &got);
                    assert!(max_diff(&back, &w0) < tol::<T>(m, 2.0), "{what} {op}");
                }
                // Syrk (HERK): C - A A^H on the lower triangle, the upper one untouched.
                let a = pseudo_random::<T>(m, k, 12);
                // Hermitian C has a real diagonal (BLAS's HERK drops its imaginary part).
                let mut c = pseudo_random::<T>(m, m, 13);
                for i in 0..m {
                    c[(i, i)] = T::from_f64(c[(i, i)].re_f64());
                }
                let got = run(Op::Syrk, &[a.as_ref()], &mut c.clone());
                let wa = wide(a.as_ref());
                let full = &wide(c.as_ref()) - mul(&wa, &adjoint(&wa));
                let want = Mat::from_fn(m, m, |i, j| {
                    if i >= j {
                        full[(i, j)]
                    } else {
                        c[(i, j)].to_c64()
                    }
                });
                assert!(max_diff(&got, &want) < tol::<T>(k, 1.0), "{what} syrk");
            }
        }
    }
}

/// A Hermitian positive definite matrix with complex off-diagonal entries (real ones for a real
/// type): M M^H + n I.
fn hpd<T: Scalar>(n: usize) -> Mat<T> {
    let m = wide(pseudo_random::<T>(n, n, 3).as_ref());
    let a = mul(&m, &adjoint(&m));
    Mat::from_fn(n, n, |i, j| {
        let x = a[(i, j)]
            + if i == j {
                c64::new(n as f64, 0.0)
            } else {
                c64::new(0.0, 0.0)
            };
        T::from_parts(x.re, x.im)
    })
}

fn potrf<T: Scalar>() {
    for backend in Backend::available() {
        // 300 takes the blocked parallel path on two threads.
        for n in [1, 2, 5, 64, 97, 300] {
            let a = hpd::<T>(n);
            for par in PARS {
                let mut f = a.clone();
                backend.run(Op::Potrf, &[], f.as_mut(), par).unwrap();
                let l = lower(&wide(f.as_ref()));
                let llh = mul(&l, &adjoint(&l));
                let what = format!("{} {backend} n={n} {par:?}", T::PRECISION);
                assert!(
                    max_diff(&llh, &wide(a.as_ref())) < tol::<T>(n, 2.0 * n as f64),
                    "{what}"
                );
                for i in 0..n {
                    let d = f[(i, i)].to_c64();
                    assert!(d.im.abs() <= tol::<T>(n, d.re), "{what}: complex pivot {d}");
                    for j in i + 1..n {
                        assert_eq!(f[(i, j)], a[(i, j)], "{what} wrote the upper triangle");
                    }
                }
            }
        }
        // Not positive definite: the failing column is reported in every precision.
        let mut bad = hpd::<T>(6);
        bad[(3, 3)] = T::from_f64(-1e6);
        let err = backend.potrf(bad.as_mut(), Par::Seq).unwrap_err();
        assert_eq!(
            err,
            KernelError::NotPositiveDefinite { index: 3 },
            "{backend}"
        );
    }
}

#[test]
fn every_op_in_every_precision() {
    for precision in hetla_kernels::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => every_op::<T>());
    }
}

#[test]
fn hermitian_cholesky_in_every_precision() {
    for precision in hetla_kernels::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => potrf::<T>());
    }
}

#[test]
fn the_library_peers_run_every_precision() {
    fn peers<T: Scalar>() {
        for backend in Backend::available() {
            let a = hpd::<T>(200);
            let mut f = a.clone();
            backend.library_potrf(f.as_mut(), Par::Seq).unwrap();
            let l = lower(&wide(f.as_ref()));
            let err = max_diff(&mul(&l, &adjoint(&l)), &wide(a.as_ref()));
            assert!(
                err < tol::<T>(200, 400.0),
                "{} {backend}: {err}",
                T::PRECISION
            );
        }
    }
    peers::<f32>();
    peers::<c32>();
    peers::<c64>();
    assert_eq!(<c32 as Scalar>::PRECISION, Precision::C);
}

#[test]
fn singular_values_are_known_ones_in_every_precision_and_shape() {
    // A = Q1 diag(s) Q2^H with Householder reflectors Q1, Q2 (unit-modulus phases in complex): its
    // singular values are s, largest first, to a few eps of s_max.
    fn case<T: Scalar>(m: usize, n: usize) {
        let k = m.min(n);
        let s: Vec<f64> = (0..k).map(|i| 10.0 / (1.0 + i as f64)).collect();
        let reflector = |len: usize, seed: usize| {
            let v: Vec<T> = (0..len)
                .map(|i| T::from_parts(1.0 + ((i * 7 + seed) % 5) as f64, ((i + seed) % 3) as f64))
                .collect();
            let norm2: f64 = v.iter().map(|x| x.abs_f64().powi(2)).sum();
            Mat::<T>::from_fn(len, len, |i, j| {
                let delta = if i == j { 1.0 } else { 0.0 };
                let vv = v[i].to_c64() * v[j].to_c64().conj() * (2.0 / norm2);
                T::from_parts(delta - vv.re, -vv.im)
            })
        };
        let d = Mat::<T>::from_fn(m, n, |i, j| {
            if i == j {
                T::from_f64(s[i])
            } else {
                T::from_f64(0.0)
            }
        });
        let a = &reflector(m, 1) * &d * reflector(n, 2).adjoint();
        let got: Vec<f64> = Backend::Faer
            .singular_values(a.as_ref())
            .expect("the SVD converges")
            .iter()
            .map(|s| T::from_real_impl(s).re_f64())
            .collect();
        assert_eq!(got.len(), k, "{} {m} x {n}", T::PRECISION);
        for (g, want) in got.iter().zip(&s) {
            assert!(
                (g - want).abs() <= 50.0 * T::PRECISION.epsilon() * s[0],
                "{} {m} x {n}: {got:?} against {s:?}",
                T::PRECISION
            );
        }
    }
    for precision in Precision::ALL {
        for (m, n) in [(6, 6), (9, 4), (4, 9), (1, 1)] {
            hetla_kernels::with_scalar!(precision, T => case::<T>(m, n));
        }
    }
}
