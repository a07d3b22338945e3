//! LU with partial pivoting checked as LAPACK's dchkge checks ?getrf and ?getrs: ||P A - L U||_1 /
//! (n ||A||_1 eps) < 30 and the solve's backward error < 30 eps n (here as the normwise ratio
//! ||B - A X||_1 / (||A||_1 ||X||_1 n eps) < 30), on random, singular-minor, ill-conditioned,
//! graded and Wilkinson matrices and exactly singular ones, in every precision, one block and
//! tiled, on every backend.

mod common;
use faer::Mat;
use hetla::{Backend, Error, Lu, Scalar, c32, c64};

/// The test ratios' threshold (LAPACK's THRESH).
const THRESHOLD: f64 = 30.0;

fn norm1<T: Scalar>(m: &Mat<T>) -> f64 {
    (0..m.ncols())
        .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// A deterministic uniform value in [-1, 1) (complex: both parts).
fn random<T: Scalar>(n: usize, seed: u64) -> Mat<T> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    Mat::from_fn(n, n, |_, _| T::from_parts(next(), next()))
}

/// ||P A - L U||_1 / (n ||A||_1 eps).
fn factor_ratio<T: Scalar>(a: &Mat<T>, f: &hetla::LuFactor<T>) -> f64 {
    let n = a.nrows();
    let perm = f.permutation();
    let pa = Mat::from_fn(n, n, |i, j| a[(perm[i], j)]);
    let lu = f.l() * f.u();
    let diff = Mat::from_fn(n, n, |i, j| pa[(i, j)] - lu[(i, j)]);
    norm1(&diff) / (n as f64 * norm1(a) * T::PRECISION.epsilon())
}

/// ||B - op(A) X||_1 / (||A||_1 ||X||_1 n eps).
fn solve_ratio<T: Scalar>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>) -> f64 {
    let n = a.nrows();
    let r = b - a * x;
    norm1(&r) / (norm1(a) * norm1(x) * n as f64 * T::PRECISION.epsilon())
}

/// The matrices of the test, each with its name.
fn matrices<T: Scalar>(n: usize) -> Vec<(&'static str, Mat<T>)> {
    let base = random::<T>(n, 7);
    let other = random::<T>(n, 8);
    // Leading minors singular: a zero (1, 1) entry and a rank-one leading 2 x 2 block; no-pivot LU
    // fails on its first step.
    let mut minors = base.clone();
    minors[(0, 0)] = T::from_f64(0.0);
    minors[(1, 0)] = T::from_f64(1.0);
    minors[(0, 1)] = T::from_f64(1.0);
    minors[(1, 1)] = T::from_f64(1.0);
    // cond about 1e12 (1e5 in single precision): the last column is the first plus a small
    // random one (column scaling would not do: LU is invariant under it).
    let delta = if T::PRECISION.epsilon() > 1e-10 {
        1e-5
    } else {
        1e-12
    };
    let mut ill = base.clone();
    for i in 0..n {
        ill[(i, n - 1)] = base[(i, 0)] + other[(i, 0)] * T::from_f64(delta);
    }
    // Graded: rows and columns scaled by 2^-k.
    let graded = Mat::from_fn(n, n, |i, j| {
        base[(i, j)] * T::from_f64(0.5f64.powi((i + j) as i32 / 4))
    });
    // Wilkinson's growth matrix: 1 on the diagonal and last column, -1 below the diagonal.
    let wilkinson = Mat::from_fn(n, n, |i, j| {
        if i == j || j == n - 1 {
            T::from_f64(1.0)
        } else if i > j {
            T::from_f64(-1.0)
        } else {
            T::from_f64(0.0)
        }
    });
    vec![
        ("random", base),
        ("singular minors", minors),
        ("ill-conditioned", ill),
        ("graded", graded),
        ("wilkinson", wilkinson),
    ]
}

fn every_matrix<T: Scalar>(backend: Backend, n: usize, tile: usize) {
    let lu = Lu::new()
        .backend(backend)
        .clusters("2x1".parse().unwrap())
        .tile(tile);
    for (name, a) in matrices::<T>(n) {
        let f = lu.factor(a.as_ref()).unwrap();
        assert_eq!(f.singular(), None, "{name}");
        if name == "wilkinson" {
            // Partial pivoting's worst case, growth 2^(n-1): no interchange, L = -1 below the
            // diagonal and U's last column 1, 2, 4, ... exactly. (The test ratios themselves
            // scale with the growth: L U computed in the working precision loses the 1s.)
            assert!(f.pivots().iter().enumerate().all(|(i, &p)| i == p));
            let u = f.u();
            // (2^i overflows single precision from i = 128 on.)
            for i in 0..n.min(100) {
                assert_eq!(u[(i, n - 1)], T::from_f64(2f64.powi(i as i32)), "{i}");
            }
            continue;
        }
        let ratio = factor_ratio(&a, &f);
        assert!(
            ratio < THRESHOLD,
            "{} {backend} {name} n={n} tile={tile}: factor ratio {ratio}",
            T::PRECISION
        );
        let b = random::<T>(n, 11).subcols(0, 3).to_owned();
        for (what, x, op) in [
            ("solve", f.solve(b.as_ref()).unwrap(), a.clone()),
            (
                "transposed",
                f.solve_transposed(b.as_ref()).unwrap(),
                a.transpose().to_owned(),
            ),
            (
                "adjoint",
                f.solve_adjoint(b.as_ref()).unwrap(),
                a.adjoint().to_owned(),
            ),
        ] {
            let ratio = solve_ratio(&op, &x, &b);
            assert!(
                ratio < THRESHOLD,
                "{} {backend} {name} {what}: backward error ratio {ratio}",
                T::PRECISION
            );
        }
    }
}

#[test]
fn every_kind_of_matrix_factors_and_solves_in_every_precision_on_every_backend() {
    for backend in Backend::available() {
        for (n, tile) in [(40, 64), (150, 32), (97, 20)] {
            every_matrix::<f32>(backend, n, tile);
            every_matrix::<f64>(backend, n, tile);
            every_matrix::<c32>(backend, n, tile);
            every_matrix::<c64>(backend, n, tile);
        }
    }
}

#[test]
fn an_exactly_singular_matrix_is_reported_at_its_column_as_dgetrf_does() {
    // Column 5 is zero, and stays so through the updates: dgetrf's info would be 6.
    let n = 60;
    let mut a = random::<f64>(n, 4);
    for i in 0..n {
        a[(i, 5)] = 0.0;
    }
    for tile in [60, 16, 4] {
        let f = Lu::new().tile(tile).factor(a.as_ref()).unwrap();
        assert_eq!(f.singular(), Some(5), "tile {tile}");
        assert!(factor_ratio(&a, &f) < THRESHOLD);
        assert_eq!(f.det().unwrap(), 0.0);
        assert_eq!(f.rcond().unwrap(), 0.0);
        let err = f.solve(Mat::<f64>::ones(n, 1).as_ref()).unwrap_err();
        assert!(matches!(err, Error::Singular { column: 5 }), "{err}");
        assert!(err.to_string().contains("info = 6"), "{err}");
    }
    let err = hetla::solve(a.as_ref(), Mat::<f64>::ones(n, 1).as_ref()).unwrap_err();
    assert!(matches!(err, Error::Singular { column: 5 }), "{err}");
}

#[test]
fn non_finite_input_and_wrong_shapes_are_refused_before_any_work() {
    let mut a = random::<f64>(30, 3);
    a[(4, 7)] = f64::NAN;
    let err = Lu::new().factor(a.as_ref()).unwrap_err();
    assert!(
        matches!(err, Error::NonFinite { row: 4, col: 7, .. }),
        "{err}"
    );
    let err = Lu::new()
        .factor(Mat::<f64>::zeros(3, 4).as_ref())
        .unwrap_err();
    assert!(matches!(err, Error::NotSquare { .. }), "{err}");
    let ok = random::<f64>(30, 3);
    let err = hetla::solve(ok.as_ref(), Mat::<f64>::ones(29, 1).as_ref()).unwrap_err();
    assert!(matches!(err, Error::DimensionMismatch { .. }), "{err}");
    let err = Lu::new().tile(0).factor(ok.as_ref()).unwrap_err();
    assert!(matches!(err, Error::ZeroTileSize), "{err}");
}

#[test]
fn determinant_permutation_and_condition_agree_with_direct_computations() {
    // det of a permuted triangular matrix is known exactly.
    let n = 70;
    let u = Mat::<f64>::from_fn(n, n, |i, j| {
        if i == j {
            1.0 + (i % 3) as f64
        } else if i < j {
            0.3
        } else {
            0.0
        }
    });
    // Reverse the rows: (n/2 transpositions) sign (-1)^(n/2).
    let a = Mat::from_fn(n, n, |i, j| u[(n - 1 - i, j)]);
    let f = Lu::new().tile(16).factor(a.as_ref()).unwrap();
    let log_exact: f64 = (0..n).map(|i| (1.0 + (i % 3) as f64).ln()).sum();
    assert!((f.log_abs_det() - log_exact).abs() < 1e-12 * log_exact);
    let sign = if (n / 2) % 2 == 0 { 1.0 } else { -1.0 };
    let det = f.det().unwrap();
    assert!(
        (det / (sign * log_exact.exp()) - 1.0).abs() < 1e-12,
        "{det}"
    );
    // The permutation reproduces P A = L U.
    assert!(factor_ratio(&a, &f) < THRESHOLD);
    // rcond within a factor 10 of the exact 1 / (||A||_1 ||A^-1||_1).
    let a = random::<f64>(120, 5);
    let f = Lu::new().tile(32).factor(a.as_ref()).unwrap();
    let inv = f.solve(Mat::<f64>::identity(120, 120).as_ref()).unwrap();
    let exact = 1.0 / (norm1(&a) * norm1(&inv));
    let estimate = f.rcond().unwrap();
    assert!(
        estimate >= exact / 1.0001 && estimate <= 10.0 * exact,
        "{estimate} vs {exact}"
    );
    assert_eq!(f.norm1().unwrap(), norm1(&a));
}

#[test]
fn the_mixed_solve_refines_to_double_accuracy_or_falls_back() {
    let n = 300;
    let a = Mat::<f64>::from_fn(n, n, |i, j| {
        if i == j {
            10.0
        } else {
            ((i * 13 + j * 7) % 11) as f64 / 11.0 - 0.5
        }
    });
    let b = Mat::<f64>::ones(n, 2);
    let (x, how) = hetla::solve_mixed(a.as_ref(), b.as_ref()).unwrap();
    assert_eq!(how.path, hetla::RefinementPath::Mixed);
    assert_eq!(how.factored_in, hetla::Precision::S);
    assert!(solve_ratio(&a, &x, &b) < THRESHOLD);
    // cond about 1e10 (the last column nearly the first): beyond classical refinement with a
    // single factor (it fell back to double before GMRES-IR), within GMRES-IR's reach.
    let other = random::<f64>(n, 9);
    let mut ill = a.clone();
    for i in 0..n {
        ill[(i, n - 1)] = a[(i, 0)] + 1e-10 * other[(i, 0)];
    }
    let (x, how) = hetla::solve_mixed(ill.as_ref(), b.as_ref()).unwrap();
    let gmres = matches!(how.path, hetla::RefinementPath::GmresIr { shift, .. } if shift == 0.0);
    assert!(gmres && how.factored_in == hetla::Precision::S, "{how:?}");
    assert!(solve_ratio(&ill, &x, &b) < THRESHOLD);
    // cond 1e13 with singular values spread evenly in log scale: beyond both (GMRES-IR's steps
    // within its budget), the solve falls back to double and says why.
    let ill = hetla::matgen::random_conditioned::<f64>(n, 1e13, 3);
    let (x, how) = hetla::solve_mixed(ill.as_ref(), b.as_ref()).unwrap();
    let hetla::RefinementPath::Fallback { reason } = &how.path else {
        panic!("expected a fallback: {how:?}")
    };
    assert!(reason.contains("GMRES-IR did not converge"), "{reason}");
    assert!(solve_ratio(&ill, &x, &b) < THRESHOLD);
    let (xz, how) = hetla::solve_mixed(
        Mat::<c64>::from_fn(n, n, |i, j| c64::new(a[(i, j)], 0.1)).as_ref(),
        Mat::<c64>::ones(n, 1).as_ref(),
    )
    .unwrap();
    assert_eq!(how.factored_in, hetla::Precision::C);
    assert_eq!(xz.nrows(), n);
}

#[cfg(feature = "openblas")]
#[test]
fn rcond_equals_lapack_dgecon_on_the_same_factor() {
    for (n, cond, tile) in [(50, 1e3, 64), (300, 1e8, 64), (700, 1e11, 256)] {
        let a = hetla::matgen::random_conditioned::<f64>(n, cond, 5);
        let factor = Lu::new()
            .backend(Backend::OpenBlas)
            .tile(tile)
            .factor(a.as_ref())
            .unwrap();
        let lu = factor.storage().to_owned();
        let anorm = factor.norm1().unwrap();
        let rcond = common::lapack::dgecon(lu.as_ref(), anorm);
        let ours = factor.rcond().unwrap();
        eprintln!("n {n} cond {cond:e}: hetla rcond {ours:.15e}, dgecon {rcond:.15e}");
        assert!(
            (ours / rcond - 1.0).abs() < 1e-10,
            "n {n}: hetla {ours:e}, dgecon {rcond:e}"
        );
    }
}

#[test]
fn solve_factored_takes_lapacks_lu_and_pivots_and_checks_them() {
    fn check<T: Scalar>() {
        let n = 150;
        let a = random::<T>(n, 7);
        let lu = Lu::new().tile(32);
        let f = lu.factor(a.as_ref()).unwrap();
        let b = random::<T>(n, 8).as_ref().subcols(0, 3).to_owned();
        for (trans, expected) in [
            (hetla::Trans::No, f.solve(b.as_ref()).unwrap()),
            (
                hetla::Trans::Transpose,
                f.solve_transposed(b.as_ref()).unwrap(),
            ),
            (hetla::Trans::Adjoint, f.solve_adjoint(b.as_ref()).unwrap()),
        ] {
            let mut x = b.clone();
            lu.solve_factored(f.storage(), f.pivots(), x.as_mut(), trans)
                .unwrap();
            let max_abs = |m: &Mat<T>| {
                (0..m.ncols())
                    .flat_map(|j| (0..m.nrows()).map(move |i| (i, j)))
                    .map(|ij| m[ij].abs_f64())
                    .fold(0.0, f64::max)
            };
            let scale = max_abs(&expected);
            assert!(
                max_abs(&(&x - &expected)) <= 1e3 * T::PRECISION.epsilon() * scale,
                "{trans:?}"
            );
        }
        let op = |x: &Mat<T>| solve_ratio(&a, x, &b);
        let mut x = b.clone();
        lu.solve_factored(f.storage(), f.pivots(), x.as_mut(), hetla::Trans::No)
            .unwrap();
        assert!(op(&x) < THRESHOLD);
    }
    check::<f64>();
    check::<c32>();
    check::<c64>();
    let a = random::<f64>(4, 1);
    let f = Lu::new().factor(a.as_ref()).unwrap();
    let mut x = Mat::<f64>::ones(4, 1);
    let lu = Lu::new();
    assert!(matches!(
        lu.solve_factored(f.storage(), &[0, 1, 2], x.as_mut(), hetla::Trans::No),
        Err(Error::InvalidOption {
            option: "pivots",
            ..
        })
    ));
    assert!(matches!(
        lu.solve_factored(f.storage(), &[0, 0, 2, 3], x.as_mut(), hetla::Trans::No),
        Err(Error::InvalidOption {
            option: "pivots",
            ..
        })
    ));
    let mut singular = f.storage().to_owned();
    singular[(2, 2)] = 0.0;
    assert!(matches!(
        lu.solve_factored(singular.as_ref(), f.pivots(), x.as_mut(), hetla::Trans::No),
        Err(Error::Singular { column: 2 })
    ));
    let mut short = Mat::<f64>::ones(3, 1);
    assert!(matches!(
        lu.solve_factored(f.storage(), f.pivots(), short.as_mut(), hetla::Trans::No),
        Err(Error::DimensionMismatch { n: 4, rows: 3 })
    ));
}

#[test]
fn the_sign_of_a_determinant_beyond_f64_and_the_inverse_come_from_the_factor() {
    use hetla::{Lu, Scalar, c64};
    // det = -(1e200)^3 overflows f64: det() says so, slogdet() gives its sign and log.
    let mut a = faer::Mat::<f64>::zeros(3, 3);
    a[(0, 1)] = 1e200;
    a[(1, 0)] = 1e200;
    a[(2, 2)] = 1e200;
    let f = Lu::new().factor(a.as_ref()).unwrap();
    assert!(matches!(
        f.det(),
        Err(hetla::Error::DeterminantOutOfRange { .. })
    ));
    let (sign, log) = f.slogdet();
    assert_eq!(sign, -1.0);
    assert!((log - 3.0 * 1e200f64.ln()).abs() < 1e-12 * log);
    // A complex sign of unit modulus, and det = sign exp(log) where det is in range.
    let z = hetla::matgen::random_in::<c64>(6, 6, 5);
    let f = Lu::new().factor(z.as_ref()).unwrap();
    let (sign, log) = f.slogdet();
    assert!((sign.to_c64().norm() - 1.0).abs() < 1e-14);
    let det = f.det().unwrap();
    assert!((det - sign * log.exp()).norm() < 1e-12 * det.norm());
    // A^-1 A = I, and a singular factor's inverse is an error.
    let a = hetla::matgen::random_in::<f64>(40, 40, 6);
    let inverse = Lu::new().factor(a.as_ref()).unwrap().inverse().unwrap();
    let identity = &inverse * &a;
    assert!((identity - faer::Mat::<f64>::identity(40, 40)).norm_max() < 1e-10);
    let singular = faer::Mat::<f64>::zeros(3, 3);
    let f = Lu::new().factor(singular.as_ref()).unwrap();
    assert!(f.inverse().is_err());
    assert_eq!(f.slogdet(), (0.0, f64::NEG_INFINITY));
}

/// A batch of mixed shapes (square, tall, wide, empty) factored in place, one matrix per core,
/// gives what one factorisation in place gives for each (interchanges, factors, zero pivot), and
/// its solves LAPACK's ratios, in every precision; a non-finite member and a singular one are
/// reported at their place while the others are done.
fn batch_case<T: Scalar>() {
    let shapes = [(24, 24), (40, 17), (9, 30), (0, 0), (64, 64), (1, 1)];
    let mut originals: Vec<Mat<T>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(m, n))| Mat::from_fn(m, n, |r, c| random::<T>(m.max(n), 70 + i as u64)[(r, c)]))
        .collect();
    // An exactly singular square member (a zero column), and one with a NaN.
    let singular = {
        let mut a = random::<T>(12, 90);
        for i in 0..12 {
            a[(i, 5)] = T::from_f64(0.0);
        }
        a
    };
    originals.push(singular);
    let mut nan = random::<T>(10, 91);
    nan[(3, 4)] = T::from_f64(f64::NAN);
    originals.push(nan);
    let mut factored = originals.clone();
    let mut views: Vec<_> = factored.iter_mut().map(|a| a.as_mut()).collect();
    let results = Lu::new().factor_batch_in_place(&mut views).unwrap();
    assert_eq!(results.len(), originals.len());
    for (i, result) in results.iter().enumerate().take(shapes.len()) {
        let (pivots, zero) = result.as_ref().unwrap();
        let mut alone = originals[i].clone();
        let (expected, expected_zero) = Lu::new().factor_in_place(alone.as_mut()).unwrap();
        assert_eq!(
            (pivots, zero),
            (&expected, &expected_zero),
            "{} member {i}",
            T::PRECISION
        );
        let largest = |m: &Mat<T>| {
            (0..m.ncols())
                .flat_map(|j| (0..m.nrows()).map(move |i| (i, j)))
                .map(|(i, j)| m[(i, j)].abs_f64())
                .fold(0.0, f64::max)
        };
        let difference = largest(&(&alone - &factored[i]));
        let scale = largest(&alone).max(1.0);
        assert!(
            difference <= 1e3 * T::PRECISION.epsilon() * scale,
            "{} member {i}: {difference}",
            T::PRECISION
        );
    }
    assert!(
        matches!(results[shapes.len()], Ok((_, Some(_)))),
        "{:?}",
        results[shapes.len()]
    );
    assert!(
        matches!(results[shapes.len() + 1], Err(Error::NonFinite { .. })),
        "{:?}",
        results[shapes.len() + 1]
    );

    // Into outputs, each A read where it lies in the other order (a C-ordered stack, as numpy
    // hands it): the same factors and interchanges bit for bit, the singular member's fallback
    // reading the original, the NaN one refused; outputs of the wrong shape or count are errors.
    let c_ordered: Vec<Mat<T>> = originals.iter().map(|a| a.transpose().to_owned()).collect();
    let sources: Vec<_> = c_ordered.iter().map(|a| a.transpose()).collect();
    let mut into: Vec<Mat<T>> = originals
        .iter()
        .map(|a| Mat::zeros(a.nrows(), a.ncols()))
        .collect();
    let mut outputs: Vec<_> = into.iter_mut().map(|a| a.as_mut()).collect();
    let done = Lu::new().factor_batch_into(&sources, &mut outputs).unwrap();
    for (i, (got, want)) in done.iter().zip(&results).enumerate() {
        match (got, want) {
            (Ok(got), Ok(want)) => {
                assert_eq!(got, want, "{} member {i}", T::PRECISION);
                assert!(into[i] == factored[i], "{} member {i}", T::PRECISION);
            }
            (Err(Error::NonFinite { .. }), Err(Error::NonFinite { .. })) => {}
            other => panic!("{} member {i}: {other:?}", T::PRECISION),
        }
    }
    let mut wrong = [Mat::<T>::zeros(3, 4)];
    let mut wrong_views: Vec<_> = wrong.iter_mut().map(|a| a.as_mut()).collect();
    let refused = Lu::new()
        .factor_batch_into(&sources[..1], &mut wrong_views)
        .unwrap();
    assert!(
        matches!(&refused[0], Err(Error::InvalidOption { option: "out", .. })),
        "{refused:?}"
    );
    assert!(
        Lu::new()
            .factor_batch_into(&sources, &mut wrong_views)
            .is_err()
    );

    // Solves of the square members (and the singular one, refused), every trans.
    let square: Vec<usize> = (0..shapes.len())
        .filter(|&i| shapes[i].0 == shapes[i].1)
        .collect();
    for trans in [
        hetla::Trans::No,
        hetla::Trans::Transpose,
        hetla::Trans::Adjoint,
    ] {
        let mut picked: Vec<usize> = square.clone();
        picked.push(shapes.len());
        let lu: Vec<_> = picked.iter().map(|&i| factored[i].as_ref()).collect();
        let pivots: Vec<&[usize]> = picked
            .iter()
            .map(|&i| results[i].as_ref().unwrap().0.as_slice())
            .collect();
        let b: Vec<Mat<T>> = picked
            .iter()
            .map(|&i| {
                random::<T>(factored[i].nrows().max(2), 200 + i as u64)
                    .subcols(0, 2)
                    .subrows(0, factored[i].nrows())
                    .to_owned()
            })
            .collect();
        let mut x = b.clone();
        let mut views: Vec<_> = x.iter_mut().map(|x| x.as_mut()).collect();
        let solved = Lu::new()
            .solve_factored_batch(&lu, &pivots, &mut views, trans)
            .unwrap();
        for (slot, &i) in picked.iter().enumerate() {
            if i == shapes.len() {
                assert!(
                    matches!(solved[slot], Err(Error::Singular { .. })),
                    "{:?}",
                    solved[slot]
                );
                assert_eq!(x[slot], b[slot], "a refused system's B is untouched");
                continue;
            }
            solved[slot].as_ref().unwrap();
            let a = &originals[i];
            if a.nrows() == 0 {
                continue;
            }
            let op = match trans {
                hetla::Trans::No => a.clone(),
                hetla::Trans::Transpose => a.transpose().to_owned(),
                hetla::Trans::Adjoint => a.adjoint().to_owned(),
            };
            let ratio = solve_ratio(&op, &x[slot], &b[slot]);
            assert!(
                ratio < THRESHOLD,
                "{} member {i} {trans:?}: {ratio}",
                T::PRECISION
            );
        }
    }
    // Lengths that do not match are the call's error.
    let mut one = [Mat::<T>::zeros(2, 1)];
    let mut views: Vec<_> = one.iter_mut().map(|x| x.as_mut()).collect();
    assert!(
        Lu::new()
            .solve_factored_batch::<T>(&[], &[], &mut views, hetla::Trans::No)
            .is_err()
    );
}

/// `solve_batch` solves each system as a factorisation of its own would, with ?gecon's estimate,
/// leaves the A_i unchanged, and reports a singular member (its B untouched) and a wrong shape at
/// their place, in every precision.
fn solve_batch_case<T: Scalar>() {
    let sizes = [8usize, 33, 1, 64];
    let mut a: Vec<Mat<T>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| random::<T>(n, 300 + i as u64))
        .collect();
    let mut singular = random::<T>(6, 310);
    for i in 0..6 {
        singular[(i, 4)] = T::from_f64(0.0);
    }
    a.push(singular);
    a.push(random::<T>(5, 311));
    let b: Vec<Mat<T>> = a
        .iter()
        .enumerate()
        .map(|(i, m)| {
            // The last system's B has a row too many.
            let rows = m.nrows() + usize::from(i == 5);
            random::<T>(rows.max(3), 320 + i as u64)
                .subrows(0, rows)
                .subcols(0, 3)
                .to_owned()
        })
        .collect();
    let before = a.clone();
    let mut x = b.clone();
    let views: Vec<_> = a.iter().map(|m| m.as_ref()).collect();
    let mut xs: Vec<_> = x.iter_mut().map(|m| m.as_mut()).collect();
    let results = Lu::new()
        .solve_batch(&views, &mut xs, hetla::Trans::No)
        .unwrap();
    assert_eq!(a, before, "the matrices are left unchanged");
    for (i, &n) in sizes.iter().enumerate() {
        let rcond = *results[i].as_ref().unwrap();
        let alone = Lu::new().factor(a[i].as_ref()).unwrap().rcond().unwrap();
        assert!(
            (rcond - alone).abs() <= 1e-3 * alone,
            "{} member {i}: rcond {rcond} against {alone}",
            T::PRECISION
        );
        let ratio = solve_ratio(&a[i], &x[i], &b[i]);
        assert!(ratio < THRESHOLD, "{} order {n}: {ratio}", T::PRECISION);
    }
    assert!(
        matches!(results[4], Err(Error::Singular { column: 4 })),
        "{:?}",
        results[4]
    );
    assert_eq!(x[4], b[4], "a singular system's B is untouched");
    assert!(results[5].is_err(), "{:?}", results[5]);
    assert!(
        Lu::new()
            .solve_batch::<T>(&views, &mut [], hetla::Trans::No)
            .is_err()
    );
}

#[test]
fn batches_factor_and_solve_each_matrix_as_alone_in_every_precision() {
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => {
            batch_case::<T>();
            solve_batch_case::<T>();
        });
    }
}
