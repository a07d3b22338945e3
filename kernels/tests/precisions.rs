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

/// `$check::<T>(args)` for each scalar type T of hetla's four precisions.
macro_rules! each_precision {
    ($check:ident($($arg:expr),*)) => {{
        $check::<f32>($($arg),*);
        $check::<f64>($($arg),*);
        $check::<hetla_kernels::c32>($($arg),*);
        $check::<hetla_kernels::c64>($($arg),*);
    }};
}

/// What the kernels' tests below share: reproducible matrices (the kernels' unit tests' generator)
/// and the 1-norm their residual ratios divide by.
mod support {
    use faer::{Mat, MatRef};
    use hetla_kernels::Scalar;

    /// A reproducible m x n matrix of entries in [-1, 1) (both parts for a complex type): each part
    /// SplitMix64's finaliser of the seed, the entry and the part.
    pub fn random<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
        let draw = |key: u64| {
            let mut z = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        Mat::from_fn(m, n, |i, j| {
            let key = (seed << 40) ^ (((j * m + i) as u64) << 1);
            T::from_parts(draw(key), draw(key | 1))
        })
    }

    /// ||A||_1, the largest column sum of moduli.
    pub fn norm1<T: Scalar>(a: MatRef<'_, T>) -> f64 {
        (0..a.ncols())
            .map(|j| a.col(j).iter().map(|x| x.abs_f64()).sum::<f64>())
            .fold(0.0, f64::max)
    }
}

/// LU's panel and update on every backend (here, not beside the kernels: the build with every
/// feature runs this file, not the kernels' unit tests).
mod lu {
    use super::support::{norm1, random};
    use faer::Mat;
    use hetla_kernels::{Backend, Par, Scalar, swap_rows};

    /// ||P A - L U||_1 / (m ||A||_1 eps) of a factored m x b panel.
    fn panel_ratio<T: Scalar>(a: &Mat<T>, lu: &Mat<T>, ipiv: &[usize]) -> f64 {
        let (m, b) = (a.nrows(), a.ncols());
        let mut pa = a.clone();
        swap_rows(pa.as_mut(), ipiv);
        let l = Mat::<T>::from_fn(m, b, |i, j| {
            if i == j {
                T::from_f64(1.0)
            } else if i > j {
                lu[(i, j)]
            } else {
                T::from_f64(0.0)
            }
        });
        let u = Mat::<T>::from_fn(
            b,
            b,
            |i, j| {
                if i <= j { lu[(i, j)] } else { T::from_f64(0.0) }
            },
        );
        let product = &l * &u;
        let diff = Mat::<T>::from_fn(m, b, |i, j| pa[(i, j)] - product[(i, j)]);
        norm1(diff.as_ref()) / (m as f64 * norm1(a.as_ref()) * T::PRECISION.epsilon())
    }

    fn panel_in<T: Scalar>(backend: Backend) {
        for (m, b, par) in [(1, 1, Par::Seq), (7, 3, Par::Seq), (300, 64, Par::rayon(2))] {
            let a = random::<T>(m, b, 3);
            let mut lu = a.clone();
            let mut ipiv = vec![0; b];
            let zero = backend.lu_panel(lu.as_mut(), &mut ipiv, par).unwrap();
            assert_eq!(zero, None);
            let ratio = panel_ratio(&a, &lu, &ipiv);
            assert!(ratio < 30.0, "{} {m}x{b}: ratio {ratio}", T::PRECISION);
            // Partial pivoting: |L| <= 1 (in |re| + |im|, the pivot's measure, for a complex
            // type: |l| <= sqrt 2).
            let bound = if T::PRECISION.is_complex() {
                1.5
            } else {
                1.0 + 1e-6
            };
            for j in 0..b {
                for i in j + 1..m {
                    assert!(lu[(i, j)].abs_f64() <= bound);
                }
            }
        }
    }

    #[test]
    fn a_panel_factors_with_partial_pivoting_in_every_precision() {
        for backend in Backend::available() {
            each_precision!(panel_in(backend));
        }
    }

    #[test]
    fn a_zero_pivot_is_reported_at_its_column_and_the_factorisation_goes_on() {
        // Column 2 equals column 0, whose entries are powers of two (so the elimination is
        // exact): its pivot is exactly zero.
        let a = Mat::<f64>::from_fn(6, 4, |i, j| match j {
            0 | 2 => (1 << i) as f64,
            1 => ((i * i) % 5) as f64 + 1.0,
            _ => (i as f64).sin(),
        });
        for backend in Backend::available() {
            let mut lu = a.clone();
            let mut ipiv = vec![0; 4];
            let zero = backend.lu_panel(lu.as_mut(), &mut ipiv, Par::Seq).unwrap();
            assert_eq!(zero, Some(2));
            assert!(lu.col_iter().flat_map(|c| c.iter()).all(|x| x.is_finite()));
            assert!(panel_ratio(&a, &lu, &ipiv) < 30.0);
        }
    }

    #[test]
    fn an_update_is_the_factorisation_of_the_wider_panel() {
        // Factoring [P C] as one panel equals factoring P, then updating C by it.
        for backend in Backend::available() {
            let (m, b, c) = (50, 8, 5);
            let whole = random::<f64>(m, b + c, 9);
            let mut lu = whole.clone();
            let mut ipiv = vec![0; b + c];
            backend.lu_panel(lu.as_mut(), &mut ipiv, Par::Seq).unwrap();

            let mut p = whole.subcols(0, b).to_owned();
            let mut right = whole.subcols(b, c).to_owned();
            let mut ipiv_p = vec![0; b];
            backend.lu_panel(p.as_mut(), &mut ipiv_p, Par::Seq).unwrap();
            backend
                .lu_update(p.as_ref(), &ipiv_p, right.as_mut(), Par::rayon(2))
                .unwrap();
            assert_eq!(&ipiv[..b], &ipiv_p[..]);
            for j in 0..c {
                for i in 0..m {
                    let (x, y) = (lu[(i, b + j)], right[(i, j)]);
                    // Rows below b are the trailing matrix before its own factorisation: only the
                    // first b rows (U) are final in `lu`; compare those, and the Schur complement
                    // through a fresh panel.
                    if i < b {
                        assert!((x - y).abs() < 1e-12, "({i}, {j}): {x} vs {y}");
                    }
                }
            }
            let mut schur = right.subrows(b, m - b).to_owned();
            let mut ipiv_s = vec![0; c];
            backend
                .lu_panel(schur.as_mut(), &mut ipiv_s, Par::Seq)
                .unwrap();
            for j in 0..c {
                for i in 0..m - b {
                    let (x, y) = (lu[(b + i, b + j)], schur[(i, j)]);
                    assert!((x - y).abs() < 1e-12, "({i}, {j}): {x} vs {y}");
                }
            }
        }
    }
}

/// The inverse's unit factors and the solves through them on every backend.
mod inverse {
    use faer::Mat;
    use hetla_kernels::{Backend, Par, Scalar, c32, c64};

    fn spd<T: Scalar>(n: usize, spread: f64) -> Mat<T> {
        // A diagonally dominant Hermitian matrix whose diagonal spans `spread` (graded).
        let off = Mat::<T>::from_fn(n, n, |i, j| {
            T::from_parts(
                ((i * 7 + j * 3) % 11) as f64 / 11.0 - 0.5,
                (i as f64 - j as f64) / (4.0 * n as f64),
            )
        });
        Mat::from_fn(n, n, |i, j| {
            let d = spread.powf(i as f64 / n as f64);
            if i == j {
                T::from_f64(n as f64 * d)
            } else {
                let x = if i > j {
                    off[(i, j)]
                } else {
                    faer::traits::ComplexField::conj_impl(&off[(j, i)])
                };
                x * T::from_f64(d.min(spread.powf(j as f64 / n as f64)).sqrt())
            }
        })
    }

    fn check<T: Scalar>(backend: Backend, tol: f64) {
        let n = 70;
        let mut a = spd::<T>(n, 10.0);
        backend.potrf(a.as_mut(), Par::Seq).unwrap();
        let mut inverted = a.clone();
        assert!(
            backend
                .invert_unit_factor(inverted.as_mut(), Par::Seq)
                .unwrap()
        );
        // The lower triangle is L's.
        assert!((0..n).all(|j| (j..n).all(|i| inverted[(i, j)] == a[(i, j)])));
        let b = Mat::<T>::from_fn(45, n, |i, j| {
            T::from_parts((i * 3 + j) as f64 % 7.0 - 3.0, 1.0)
        });
        let mut by_solve = b.clone();
        backend
            .trsm(a.as_ref(), by_solve.as_mut(), Par::Seq)
            .unwrap();
        for par in [Par::Seq, Par::rayon(2)] {
            let mut by_inverse = b.clone();
            backend
                .trsm_by_inverse(inverted.as_ref(), by_inverse.as_mut(), par)
                .unwrap();
            let gap = (0..n)
                .flat_map(|j| (0..45).map(move |i| (i, j)))
                .map(|(i, j)| (by_inverse[(i, j)] - by_solve[(i, j)]).abs_f64())
                .fold(0.0, f64::max);
            let size = (0..n)
                .map(|j| by_solve[(0, j)].abs_f64())
                .fold(0.0, f64::max);
            assert!(gap <= tol * size, "{backend} {}: gap {gap}", T::PRECISION);
        }
    }

    #[test]
    fn solves_through_the_inverse_match_the_triangular_solve_in_every_precision() {
        for backend in Backend::available() {
            check::<f64>(backend, 1e-12);
            check::<f32>(backend, 1e-4);
            check::<c64>(backend, 1e-12);
            check::<c32>(backend, 1e-4);
        }
    }

    #[test]
    fn an_ill_conditioned_unit_factor_is_not_inverted() {
        // L1 with a large multiplier below the diagonal: cond_1(L1) ~ 1e8.
        let n = 4;
        let mut l = Mat::<f64>::identity(n, n);
        l[(1, 0)] = 1e4;
        l[(2, 1)] = 1e4;
        let before = l.clone();
        for backend in Backend::available() {
            let mut tile = before.clone();
            assert!(!backend.invert_unit_factor(tile.as_mut(), Par::Seq).unwrap());
            assert!(tile == before, "{backend} wrote the upper triangle");
        }
        l[(1, 0)] = 0.5;
        l[(2, 1)] = 0.5;
        assert!(
            Backend::Faer
                .invert_unit_factor(l.as_mut(), Par::Seq)
                .unwrap()
        );
        assert_eq!((l[(0, 1)], l[(1, 2)], l[(0, 2)]), (-0.5, -0.5, 0.25));
    }
}

/// The inverse's tile kernels (trtri, lauum and the panel steps) on every backend.
mod potri {
    use faer::{Mat, MatRef};
    use hetla_kernels::{Backend, KernelError, Op, Par, Scalar};

    /// The lower triangle of `m`, zeros above.
    fn lower_copy<T: Scalar>(m: MatRef<'_, T>) -> Mat<T> {
        Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
            if i >= j { m[(i, j)] } else { T::from_f64(0.0) }
        })
    }

    /// A well-conditioned lower triangular matrix with a garbage strict upper triangle.
    fn lower<T: Scalar>(n: usize) -> Mat<T> {
        Mat::from_fn(n, n, |i, j| {
            if i == j {
                T::from_f64(2.0 + (i % 3) as f64)
            } else if i > j {
                // At most 1 in modulus per row off the diagonal: diagonally dominant, so well
                // conditioned at any order.
                let scale = 0.5 / n as f64;
                T::from_parts(
                    (((i * 7 + j) % 5) as f64 - 2.0) * scale,
                    ((i + j) % 3) as f64 * scale,
                )
            } else {
                T::from_f64(99.0)
            }
        })
    }

    fn full<T: Scalar>(m: &Mat<T>) -> Mat<T> {
        lower_copy(m.as_ref())
    }

    fn every_op<T: Scalar>(backend: Backend) {
        let max = |m: &Mat<T>| {
            (0..m.ncols())
                .flat_map(|j| (0..m.nrows()).map(move |i| (i, j)))
                .map(|(i, j)| m[(i, j)].abs_f64())
                .fold(0.0_f64, f64::max)
        };
        let close = |x: &Mat<T>, y: &Mat<T>, n: usize, what: &str| {
            let tol = 20.0 * n as f64 * T::PRECISION.epsilon();
            let scale = max(y).max(1.0);
            let diff = max(&(x - y)) / scale;
            assert!(diff < tol, "{backend} {} {what}: {diff:e}", T::PRECISION);
        };
        for n in [37, 300] {
            let l = lower::<T>(n);
            let lf = full(&l);
            for par in [Par::Seq, hetla_kernels::par_for(2)] {
                // Trtri: L^-1 L = I on the lower triangle; the upper triangle untouched.
                let mut inv = l.clone();
                backend.run(Op::Trtri, &[], inv.as_mut(), par).unwrap();
                assert_eq!(inv[(0, 1)], T::from_f64(99.0));
                close(&(&full(&inv) * &lf), &Mat::identity(n, n), n, "trtri");
                // Lauum: the lower triangle of L^H L.
                let mut prod = l.clone();
                backend.run(Op::Lauum, &[], prod.as_mut(), par).unwrap();
                close(&full(&prod), &full(&(lf.adjoint() * &lf)), n, "lauum");
                assert_eq!(prod[(0, 1)], T::from_f64(99.0));
                // SolveRight: B <- -B L^-1.
                let b =
                    Mat::<T>::from_fn(40, n, |i, j| T::from_parts((i + 2 * j) as f64 * 0.1, 0.3));
                let mut x = b.clone();
                backend
                    .run(Op::SolveRight, &[l.as_ref()], x.as_mut(), par)
                    .unwrap();
                close(&(-(&x * &lf)), &b, n, "solve_right");
                // SyrkAdjoint: C <- C + A^H A on the lower triangle.
                let a =
                    Mat::<T>::from_fn(40, n, |i, j| T::from_parts((i * j % 7) as f64 - 3.0, 0.5));
                let c0 = full(&l);
                let mut c = c0.clone();
                backend
                    .run(Op::SyrkAdjoint, &[a.as_ref()], c.as_mut(), par)
                    .unwrap();
                close(
                    &full(&c),
                    &full(&(&c0 + a.adjoint() * &a)),
                    n,
                    "syrk_adjoint",
                );
                // TrmmAdjoint: B <- L^H B.
                let b = Mat::<T>::from_fn(n, 60, |i, j| T::from_parts((i + j) as f64 * 0.05, -0.1));
                let mut y = b.clone();
                backend
                    .run(Op::TrmmAdjoint, &[l.as_ref()], y.as_mut(), par)
                    .unwrap();
                close(&y, &(lf.adjoint() * &b), n, "trmm_adjoint");
            }
        }
        // A zero on the diagonal: no inverse, an error with its index.
        let mut singular = lower::<T>(37);
        singular[(4, 4)] = T::from_f64(0.0);
        assert!(matches!(
            backend.run(Op::Trtri, &[], singular.as_mut(), Par::Seq),
            Err(KernelError::Singular { index: 4 })
        ));
    }

    #[test]
    fn the_inverse_kernels_in_every_precision_and_backend() {
        for backend in Backend::available() {
            each_precision!(every_op(backend));
        }
    }
}

/// QR's tile kernels (a tile, a triangle stacked on a tile or a triangle) on every backend.
mod qr {
    use super::support::{norm1, random};
    use faer::{Mat, MatRef};
    use hetla_kernels::{Backend, Par, Scalar, Stack};

    fn zero<T: Scalar>() -> T {
        T::from_f64(0.0)
    }

    fn eps<T: Scalar>() -> f64 {
        T::PRECISION.epsilon()
    }

    fn upper<T: Scalar>(a: MatRef<'_, T>) -> Mat<T> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
            if i <= j { a[(i, j)] } else { zero() }
        })
    }

    /// Q (m x m) of a factored tile, by applying Q to the identity.
    fn q_of_tile<T: Scalar>(backend: Backend, v: MatRef<'_, T>, t: MatRef<'_, T>) -> Mat<T> {
        let m = v.nrows();
        let mut q = Mat::<T>::identity(m, m);
        backend.qr_apply(v, t, q.as_mut(), false, Par::Seq).unwrap();
        q
    }

    /// ||I - Q^H Q||_1 / (m eps).
    fn orthogonality<T: Scalar>(q: MatRef<'_, T>) -> f64 {
        let m = q.nrows();
        let mut e = Mat::<T>::identity(q.ncols(), q.ncols());
        faer::linalg::matmul::matmul_with_conj(
            e.as_mut(),
            faer::Accum::Add,
            q.transpose(),
            faer::Conj::Yes,
            q,
            faer::Conj::No,
            T::from_f64(-1.0),
            Par::Seq,
        );
        norm1(e.as_ref()) / (m as f64 * eps::<T>())
    }

    fn product<T: Scalar>(a: MatRef<'_, T>, b: MatRef<'_, T>) -> Mat<T> {
        let mut c = Mat::<T>::zeros(a.nrows(), b.ncols());
        faer::linalg::matmul::matmul(
            c.as_mut(),
            faer::Accum::Replace,
            a,
            b,
            T::from_f64(1.0),
            Par::Seq,
        );
        c
    }

    fn each_backend(f: impl Fn(Backend)) {
        f(Backend::Faer);
        if Backend::OpenBlas.ensure_available().is_ok() {
            f(Backend::OpenBlas);
        }
    }

    #[test]
    fn a_tile_factors_into_an_orthogonal_q_and_r_in_every_precision() {
        each_backend(|backend| {
            // Each shape m x n with its inner block.
            let shapes = [(40, 40), (57, 33), (33, 57), (1, 1), (64, 64), (20, 3)];
            for ((m, n), ib) in shapes.into_iter().zip([8, 5, 7, 1, 64, 4]) {
                for par in [Par::Seq, Par::rayon(2)] {
                    each_precision!(tile_case(backend, m, n, ib, par));
                }
            }
        });
    }

    #[test]
    fn a_triangle_stacked_on_a_tile_or_a_triangle_factors_in_every_precision() {
        each_backend(|backend| {
            for stack in [Stack::OnTile, Stack::OnTriangle] {
                // Each triangle's order n and the rows m below it, with the inner block.
                let shapes = [(24, 24), (24, 24), (17, 40), (16, 9), (1, 1), (8, 8)];
                for ((n, m), ib) in shapes.into_iter().zip([8, 5, 4, 3, 1, 8]) {
                    each_precision!(stacked_case(backend, n, m, stack, ib));
                }
            }
        });
    }

    /// LAPACK's residual ratio ||got - want||_1 / (m ||a||_1 eps), m = a's rows.
    fn ratio_to<T: Scalar>(want: &Mat<T>, mut got: Mat<T>, a: &Mat<T>) -> f64 {
        got -= want;
        norm1(got.as_ref()) / (a.nrows() as f64 * norm1(a.as_ref()) * eps::<T>())
    }

    fn tile_case<T: Scalar>(backend: Backend, m: usize, n: usize, ib: usize, par: Par) {
        let a = random::<T>(m, n, (m * 31 + n * 7 + ib) as u64);
        let mut f = a.clone();
        let k = m.min(n);
        let mut t = Mat::<T>::zeros(ib, k);
        backend.qr_tile(f.as_mut(), t.as_mut(), par).unwrap();
        let q = q_of_tile(backend, f.as_ref(), t.as_ref());
        let r = upper(f.as_ref());
        let ratio = ratio_to(&a, product(q.as_ref(), r.as_ref()), &a);
        assert!(
            ratio < 30.0,
            "{} {m}x{n} ib {ib}: ||A - QR|| ratio {ratio}",
            T::PRECISION
        );
        let orth = orthogonality(q.as_ref());
        assert!(
            orth < 30.0,
            "{} {m}x{n} ib {ib}: ||I - Q^H Q|| ratio {orth}",
            T::PRECISION
        );
        // Q^H A = R through the adjoint application.
        let mut qha = a.clone();
        backend
            .qr_apply(f.as_ref(), t.as_ref(), qha.as_mut(), true, par)
            .unwrap();
        let ratio = ratio_to(&r, qha, &a);
        assert!(
            ratio < 30.0,
            "{} {m}x{n}: ||Q^H A - R|| ratio {ratio}",
            T::PRECISION
        );
    }

    /// Stacked QR of [R; B]: Q [R'; 0] = [R; B] and Q orthogonal, with Q formed by applying it to
    /// the identity's columns through qr_stacked_apply.
    fn stacked_case<T: Scalar>(backend: Backend, n: usize, m: usize, stack: Stack, ib: usize) {
        let seed = (n * 13 + m * 5 + ib) as u64;
        // R: an upper triangle, with junk below it that must be left alone.
        let r0 = random::<T>(n, n, seed);
        let b0 = random::<T>(m, n, seed + 1);
        let b_used = match stack {
            Stack::OnTile => b0.clone(),
            Stack::OnTriangle => upper(b0.as_ref()),
        };
        let mut r = r0.clone();
        let mut b = b0.clone();
        let mut t = Mat::<T>::zeros(ib, n);
        backend
            .qr_stacked(r.as_mut(), b.as_mut(), stack, t.as_mut(), Par::Seq)
            .unwrap();
        // The strict lower part of R, and of a triangle B, are untouched.
        for j in 0..n {
            for i in j + 1..n {
                assert_eq!(r[(i, j)], r0[(i, j)]);
            }
            if stack == Stack::OnTriangle {
                for i in j + 1..m {
                    assert_eq!(b[(i, j)], b0[(i, j)]);
                }
            }
        }
        // The stacked input [triu(R0); B_used] and Q^H applied to it: [R'; 0].
        let mut top = upper(r0.as_ref());
        let mut bottom = b_used.clone();
        backend
            .qr_stacked_apply(
                b.as_ref(),
                stack,
                t.as_ref(),
                (top.as_mut(), bottom.as_mut()),
                true,
                Par::rayon(2),
            )
            .unwrap();
        let scale = norm1(upper(r0.as_ref()).as_ref()) + norm1(b_used.as_ref());
        let mut d = top.clone();
        d -= upper(r.as_ref());
        let rows = (n + m) as f64;
        let ratio = (norm1(d.as_ref()) + norm1(bottom.as_ref())) / (rows * scale * eps::<T>());
        assert!(
            ratio < 30.0,
            "{} {stack:?} {n}/{m} ib {ib}: ||Q^H A - [R; 0]|| ratio {ratio}",
            T::PRECISION
        );
        // Q formed from the identity: orthogonal, and Q [R'; 0] = the input.
        let mut q_top = Mat::<T>::zeros(n, n + m);
        let mut q_bottom = Mat::<T>::zeros(m, n + m);
        for i in 0..n {
            q_top[(i, i)] = T::from_f64(1.0);
        }
        for i in 0..m {
            q_bottom[(i, n + i)] = T::from_f64(1.0);
        }
        backend
            .qr_stacked_apply(
                b.as_ref(),
                stack,
                t.as_ref(),
                (q_top.as_mut(), q_bottom.as_mut()),
                false,
                Par::Seq,
            )
            .unwrap();
        let q = Mat::from_fn(n + m, n + m, |i, j| {
            if i < n {
                q_top[(i, j)]
            } else {
                q_bottom[(i - n, j)]
            }
        });
        let orth = orthogonality(q.as_ref());
        assert!(
            orth < 30.0,
            "{} {stack:?} {n}/{m}: ||I - Q^H Q|| ratio {orth}",
            T::PRECISION
        );
        let rr = Mat::from_fn(
            n + m,
            n,
            |i, j| if i <= j && i < n { r[(i, j)] } else { zero() },
        );
        let mut d = product(q.as_ref(), rr.as_ref());
        let input = Mat::from_fn(n + m, n, |i, j| {
            if i < n {
                if i <= j { r0[(i, j)] } else { zero() }
            } else {
                b_used[(i - n, j)]
            }
        });
        d -= &input;
        let ratio = norm1(d.as_ref()) / (rows * scale * eps::<T>());
        assert!(
            ratio < 30.0,
            "{} {stack:?} {n}/{m}: ||A - QR|| ratio {ratio}",
            T::PRECISION
        );
    }
}

/// Aasen's block-column kernels (the ones its graph beside GPUs runs there too) on the CPU, with
/// their arguments: the rows each works on against a naive product in complex f64, every backend
/// and precision; arguments that name rows outside the block columns refused before any work.
mod aasen {
    use super::{adjoint, max_diff, mul, pseudo_random, tol, wide};
    use faer::{Mat, MatRef};
    use hetla_kernels::{AnyMat, AnyMut, AnyRef, Backend, KernelArgs, Op, Par, Scalar};
    use std::sync::Arc;

    fn columns<T: Scalar>(backend: Backend) {
        let what = format!("{} {backend}", T::PRECISION);
        let (n, b, c) = (23, 4, 5);
        let (l, c0) = (pseudo_random::<T>(n, b, 1), pseudo_random::<T>(n, c, 2));
        let run = |op, args: &KernelArgs, out: &mut Mat<T>| {
            let reads = [AnyRef::from(l.as_ref())];
            backend.run_any_with(op, &reads, AnyMut::from(out.as_mut()), args, Par::Seq)
        };
        let rows = |m: MatRef<'_, T>, first: usize, count: usize| wide(m.subrows(first, count));
        // C[first..] -= L[first..] C[block..block + b], the rest of C untouched.
        let (first, block) = (9, 3);
        let mut out = c0.clone();
        let args = KernelArgs::AasenUpdate { first, block };
        run(Op::LdltColumnUpdate, &args, &mut out).unwrap();
        let x = rows(c0.as_ref(), block, b);
        let want =
            rows(c0.as_ref(), first, n - first) - mul(&rows(l.as_ref(), first, n - first), &x);
        assert!(
            max_diff(&rows(out.as_ref(), first, n - first), &want) < tol::<T>(b, 1.0),
            "{what}"
        );
        assert!(
            out.as_ref().subrows(0, first) == c0.as_ref().subrows(0, first),
            "{what}"
        );
        // C[top..top + r] += T L[source..source + c]^H.
        let (top, source, r) = (2, 11, 6);
        let t = pseudo_random::<T>(r, b, 3);
        let args = KernelArgs::AasenHessenberg {
            t: Arc::new(AnyMat::from(t.clone())),
            top,
            source,
        };
        let mut out = c0.clone();
        run(Op::LdltColumnHessenberg, &args, &mut out).unwrap();
        let want = rows(c0.as_ref(), top, r)
            + mul(&wide(t.as_ref()), &adjoint(&rows(l.as_ref(), source, c)));
        assert!(
            max_diff(&rows(out.as_ref(), top, r), &want) < tol::<T>(b, 1.0),
            "{what}"
        );
        // The interchanges of the rows from `first`.
        let args = KernelArgs::Pivots {
            first: 20,
            ipiv: vec![2, 1],
        };
        let mut out = c0.clone();
        run(Op::LdltSwap, &args, &mut out).unwrap();
        let swapped = |i: usize| match i {
            20 => 22,
            22 => 20,
            i => i,
        };
        assert!((0..n).all(|i| out.row(i) == c0.row(swapped(i))), "{what}");
        // Refused, C untouched: the product's block among the rows updated, T wider than L,
        // rows below the block columns, an interchange outside them, no arguments.
        for (op, args) in [
            (
                Op::LdltColumnUpdate,
                KernelArgs::AasenUpdate { first: 5, block: 3 },
            ),
            (
                Op::LdltColumnHessenberg,
                KernelArgs::AasenHessenberg {
                    t: Arc::new(AnyMat::from(pseudo_random::<T>(r, b + 1, 4))),
                    top,
                    source,
                },
            ),
            (
                Op::LdltColumnHessenberg,
                KernelArgs::AasenHessenberg {
                    t: Arc::new(AnyMat::from(t.clone())),
                    top: n - 1,
                    source,
                },
            ),
            (
                Op::LdltSwap,
                KernelArgs::Pivots {
                    first: 20,
                    ipiv: vec![3],
                },
            ),
            (Op::LdltColumnUpdate, KernelArgs::None),
        ] {
            let mut out = c0.clone();
            assert!(run(op, &args, &mut out).is_err(), "{what} {op} {args:?}");
            assert!(out == c0, "{what} {op}");
        }
    }

    #[test]
    fn aasens_block_column_kernels_work_on_the_rows_their_arguments_name() {
        for backend in Backend::available() {
            each_precision!(columns(backend));
        }
    }
}
