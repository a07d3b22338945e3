//! The symmetric indefinite factorisation (Aasen's, A = Q^T L T L^H Q), checked as LAPACK's
//! dchksy_aa checks it: ||A - Q^T L T L^H Q||_1 / (n ||A||_1 eps) < 30 and the solves' backward
//! errors
//! ||A x - b||_1 / (||A||_1 ||x||_1 n eps) < 30 (dget02's), in every precision, on random indefinite, KKT,
//! ill-conditioned, graded and scaled matrices, ragged tiles, one tile and many; the inertia exact
//! on matrices of known inertia; the determinant; singular matrices and bad input.

use faer::Mat;
use hetla::{Error, Ldlt, Precision, Scalar};

/// A random Hermitian matrix of order n: entries of both parts uniform in [-1, 1) below the
/// diagonal, a real diagonal.
fn random_hermitian<T: Scalar>(n: usize, seed: u64) -> Mat<T> {
    hetla::matgen::random_hermitian(n, seed)
}

fn conj<T: Scalar>(x: T) -> T {
    let z = x.to_c64();
    T::from_parts(z.re, -z.im)
}

/// The saddle-point matrix [H B^H; B 0]: H a random HPD matrix of order `nh` (seed `seed`), B a
/// random `nb x nh` block (seed `seed + 1`): `nh` positive eigenvalues and `nb` negative ones.
fn kkt<T: Scalar>(nh: usize, nb: usize, seed: u64) -> Mat<T> {
    let h = hetla::matgen::random_hpd::<T>(nh, seed);
    let c: Mat<T> = hetla::matgen::random_in(nb, nh, seed + 1);
    // By blocks (entry by entry, faer's checked indexing dominated the debug-built tests).
    let mut a = Mat::<T>::zeros(nh + nb, nh + nb);
    a.as_mut().submatrix_mut(0, 0, nh, nh).copy_from(&h);
    a.as_mut().submatrix_mut(nh, 0, nb, nh).copy_from(&c);
    a.as_mut()
        .submatrix_mut(0, nh, nh, nb)
        .copy_from(c.adjoint());
    a
}

fn check<T: Scalar>(a: &Mat<T>, tile: usize, what: &str) {
    let n = a.nrows();
    let f = Ldlt::new().tile(tile).factor(a.as_ref()).unwrap();
    let ratio = f.residual(a.as_ref()).unwrap();
    assert!(
        ratio < 30.0,
        "{what} {} n {n} tile {tile}: factor ratio {ratio}",
        T::PRECISION
    );
    let b: Mat<T> = hetla::matgen::random_in(n, 3, 99);
    let x = f.solve(b.as_ref()).unwrap();
    let ratio = hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
    assert!(
        ratio < 30.0,
        "{what} {} n {n} tile {tile}: solve ratio {ratio}",
        T::PRECISION
    );
}

#[test]
fn random_indefinite_matrices_factor_and_solve_in_every_precision_and_tiling() {
    // The ratio sees a factor of another matrix.
    let (a, other) = (
        random_hermitian::<f64>(50, 1),
        random_hermitian::<f64>(50, 2),
    );
    let f = Ldlt::new().tile(8).factor(a.as_ref()).unwrap();
    assert!(f.residual(other.as_ref()).unwrap() > 1e10);
    assert!(f.residual(Mat::<f64>::zeros(49, 49).as_ref()).is_err());
    fn case<T: Scalar>() {
        for (n, tile) in [
            (1, 4),
            (5, 8),
            (8, 8),
            (37, 8),
            (64, 16),
            (100, 32),
            (150, 64),
            (130, 256),
        ] {
            check(&random_hermitian::<T>(n, n as u64), tile, "random");
        }
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

/// The block-column graph (what a platform with GPUs runs: its products and interchanges as kernels
/// of two block columns) on the CPU alone: LAPACK's ratios, the tile graph's inertia, in every
/// precision, with one block, ragged last blocks (one row; narrower than the panel) and KKT
/// matrices.
#[test]
fn the_block_column_graph_factors_as_the_tile_graph_does_in_every_precision() {
    fn case<T: Scalar>() {
        let cases = [
            (1, 4),
            (5, 8),
            (37, 37),
            (49, 16),
            (97, 24),
            (130, 32),
            (129, 16),
        ];
        for (n, tile) in cases {
            for (what, a) in [
                ("random", random_hermitian::<T>(n, n as u64)),
                ("kkt", kkt::<T>(n - n / 3, n / 3, 3)),
            ] {
                let ldlt = Ldlt::new().tile(tile);
                let algorithm = hetla::Algorithm::LdltColumns { n };
                let plan = hetla::Plan::new(algorithm, tile, T::PRECISION).unwrap();
                let (_, f) = ldlt.factor_planned(&plan, a.as_ref()).unwrap();
                let what = format!("{what} {} n {n} block {tile}", T::PRECISION);
                let ratio = f.residual(a.as_ref()).unwrap();
                assert!(ratio < 30.0, "{what}: factor ratio {ratio}");
                let b: Mat<T> = hetla::matgen::random_in(n, 2, 9);
                let x = f.solve(b.as_ref()).unwrap();
                let ratio = hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
                assert!(ratio < 30.0, "{what}: solve ratio {ratio}");
                let tiles = ldlt.factor(a.as_ref()).unwrap();
                assert_eq!(f.inertia().unwrap(), tiles.inertia().unwrap(), "{what}");
            }
        }
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

#[test]
fn inertia_is_exact_on_matrices_of_known_inertia() {
    // Q diag(d) Q^H with chosen signs: Q from the QR of a random matrix.
    let n = 90;
    let g: Mat<f64> = hetla::matgen::random_in(n, n, 5);
    let q = g.qr().compute_Q();
    let d: Vec<f64> = (0..n)
        .map(|i| match i % 3 {
            0 => -(1.0 + i as f64),
            _ => 0.5 + i as f64,
        })
        .collect();
    let a = &q * Mat::from_fn(n, n, |i, j| if i == j { d[i] } else { 0.0 }) * q.transpose();
    let f = Ldlt::new().tile(16).factor(a.as_ref()).unwrap();
    let inertia = f.inertia().unwrap();
    assert_eq!(
        (inertia.positive, inertia.negative, inertia.zero),
        (60, 30, 0)
    );
    // det A = prod d.
    let log: f64 = d.iter().map(|x| x.abs().ln()).sum();
    assert!(
        (f.log_abs_det() - log).abs() < 1e-9 * log.abs(),
        "{} {log}",
        f.log_abs_det()
    );
}

#[test]
fn kkt_matrices_have_as_many_negative_eigenvalues_as_constraints() {
    for (nh, na, tile) in [(40, 10, 8), (100, 30, 32), (7, 3, 4)] {
        // [H A^T; A 0], H SPD, A of full row rank.
        let a = kkt::<f64>(nh, na, 3);
        check(&a, tile, "kkt");
        let inertia = Ldlt::new()
            .tile(tile)
            .factor(a.as_ref())
            .unwrap()
            .inertia()
            .unwrap();
        assert_eq!(
            (inertia.positive, inertia.negative, inertia.zero),
            (nh, na, 0)
        );
    }
}

#[test]
fn kkt_inertia_is_exact_in_every_precision_where_small_eigenvalues_are_not_zeros() {
    // [H B^H; B 0] of order 600 (H = 450 I + noise, B uniform in [-1, 1)): 150 negative
    // eigenvalues of about -0.06 to -0.8. The tolerance n eps max |a_ij| (0.03 in f32) once counted
    // 42 of them as zeros here (99 at order 1000, `hetla ldlt --kind kkt --precision s` 263 at
    // 2000); eps ||A||_1, the rounding of A's scale, counts none.
    fn case<T: Scalar>() {
        let (nh, nb) = (450, 150);
        let a = kkt::<T>(nh, nb, 7);
        let inertia = Ldlt::new().factor(a.as_ref()).unwrap().inertia().unwrap();
        assert_eq!(
            (inertia.positive, inertia.negative, inertia.zero),
            (nh, nb, 0),
            "{}",
            T::PRECISION
        );
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

/// ||A x - b||_1 / (||A||_1 ||x||_1 eps): the backward error in units of eps, unscaled by n (the
/// issue's and scipy's measure; LAPACK's ?sysv leaves 2-13 on these matrices).
fn backward_eps<T: Scalar>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>) -> f64 {
    let n = a.nrows();
    hetla::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref()) * n as f64
}

#[test]
fn solves_are_refined_to_a_few_eps_of_backward_error_in_every_precision() {
    // The factor alone leaves 20-1300 eps at order 1000 (T grows with the block); a step or two
    // of refinement in the working precision brings it to about 1.
    fn case<T: Scalar>() {
        for (what, a) in [
            ("random", random_hermitian::<T>(600, 11)),
            ("kkt", kkt::<T>(450, 150, 12)),
        ] {
            let f = Ldlt::new().factor(a.as_ref()).unwrap();
            let b: Mat<T> = hetla::matgen::random_in(600, 2, 13);
            let (x, how) = f.solve_refined(b.as_ref()).unwrap();
            let backward = backward_eps(&a, &x, &b);
            assert!(
                backward <= 10.0,
                "{what} {}: backward error {backward} eps after {} steps",
                T::PRECISION,
                how.iterations
            );
            assert_eq!(how.path, hetla::RefinementPath::Working);
            assert!(how.iterations >= 1 && how.iterations <= 5);
            // `solve` is the same refined solve.
            let y = f.solve(b.as_ref()).unwrap();
            assert!(backward_eps(&a, &y, &b) <= 10.0, "{what} {}", T::PRECISION);
        }
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

#[test]
fn a_solve_whose_refinement_stalls_is_made_by_bunch_kaufman_in_double() {
    // [H B^H; B 0] of order 2000 in c32 (cond ~1e4): refinement with the block Aasen factor (ratio
    // 18) stalls near 180 eps; the solve is made again by A's Bunch-Kaufman factor in double and
    // refined, to about 1 eps. A second solve reuses that factor.
    let a = kkt::<hetla::c32>(1500, 500, 7);
    let f = Ldlt::new().factor(a.as_ref()).unwrap();
    let ratio = f.residual(a.as_ref()).unwrap();
    assert!(ratio < 30.0, "factor ratio {ratio} at the default block");
    for seed in [13, 14] {
        let b: Mat<hetla::c32> = hetla::matgen::random_in(2000, 2, seed);
        let (x, how) = f.solve_refined(b.as_ref()).unwrap();
        let backward = backward_eps(&a, &x, &b);
        assert!(backward <= 10.0, "backward error {backward} eps ({how:?})");
        match how.path {
            hetla::RefinementPath::BunchKaufman { stalled_at } => {
                assert!(stalled_at > 10.0 && stalled_at > backward, "{how:?}")
            }
            ref path => panic!("{path:?}: the Aasen factor's refinement sufficed"),
        }
        assert_eq!(how.factored_in, Precision::Z);
    }
}

#[test]
fn the_default_block_keeps_lapacks_ratio_on_kkt_matrices_in_every_precision() {
    // The factor's error grows with the block (complex types 3-4 times faster than real ones): the
    // default (96 real, 32 complex) keeps KKT matrices under 30 to order 4000; order 1000 here,
    // where 128 gives 53 in c32 (`hetla ldlt --kind kkt --n 1000 --tile 128`: 55 in c32, 49 in
    // c64; 73 in c64 at order 1600).
    fn case<T: Scalar>() {
        let a = kkt::<T>(750, 250, 21);
        let f = Ldlt::new().factor(a.as_ref()).unwrap();
        let ratio = f.residual(a.as_ref()).unwrap();
        assert!(ratio < 30.0, "{}: factor ratio {ratio}", T::PRECISION);
        let inertia = f.inertia().unwrap();
        assert_eq!(
            (inertia.positive, inertia.negative, inertia.zero),
            (750, 250, 0),
            "{}",
            T::PRECISION
        );
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

#[test]
fn zero_eigenvalues_are_judged_on_as_scale_not_on_ts() {
    // [H B^H; B 0] of order 2000 in c32: A's smallest |eigenvalue| is 0.12, far from eps ||A||_1
    // = 3e-4, but L's congruence shrinks it to T's 2.5e-4: counted on T, one negative eigenvalue
    // was a zero (`hetla ldlt --kind kkt --precision c`: 1500/499/1).
    assert_kkt_inertia::<hetla::c32>(1500, 500, 7);
}

/// The inertia of `kkt(nh, nb, seed)` by the default factorisation is (nh, nb, 0).
fn assert_kkt_inertia<T: Scalar>(nh: usize, nb: usize, seed: u64) {
    let a = kkt::<T>(nh, nb, seed);
    let inertia = Ldlt::new().factor(a.as_ref()).unwrap().inertia().unwrap();
    assert_eq!(
        (inertia.positive, inertia.negative, inertia.zero),
        (nh, nb, 0),
        "{} order {}",
        T::PRECISION,
        nh + nb
    );
}

#[test]
fn signs_come_from_a_bunch_kaufman_in_double_when_the_factor_is_too_far_from_a() {
    // [H B^H; B 0] of order 4000 in f32: cond(A) ~ 3e5 and the factor's ratio 31, so ||F^-1 A -
    // I|| > 1 and T's signs are not A's (they gave 3006 positive, 994 negative: `hetla ldlt --kind
    // kkt --precision s --n 4000`, seed 42).
    assert_kkt_inertia::<f32>(3000, 1000, 42);
}

#[test]
fn a_singular_matrix_factors_and_its_solve_is_refused() {
    // Rank n - 1: the last row and column repeat the first.
    let n = 40;
    let mut a = random_hermitian::<f64>(n, 8);
    for i in 0..n {
        a[(n - 1, i)] = a[(0, i)];
        a[(i, n - 1)] = a[(i, 0)];
    }
    a[(n - 1, n - 1)] = a[(0, 0)];
    let f = Ldlt::new().tile(8).factor(a.as_ref()).unwrap();
    let inertia = f.inertia().unwrap();
    assert_eq!(inertia.zero, 1, "{inertia:?}");
    let b = Mat::<f64>::ones(n, 1);
    match f.solve(b.as_ref()) {
        Err(Error::Singular { .. }) => {}
        // Rounding may leave T's pivot tiny but not exactly zero; the solve is then not refused.
        Ok(_) => assert!(f.singular().is_none()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn an_empty_matrix_factors_into_nothing() {
    let f = Ldlt::new()
        .factor(Mat::<f64>::zeros(0, 0).as_ref())
        .unwrap();
    let inertia = f.inertia().unwrap();
    assert_eq!(
        (inertia.positive, inertia.negative, inertia.zero),
        (0, 0, 0)
    );
    assert_eq!(
        f.solve(Mat::<f64>::zeros(0, 2).as_ref()).unwrap().ncols(),
        2
    );
    assert_eq!(
        (f.log_abs_det(), f.det().unwrap(), f.rcond().unwrap()),
        (0.0, 1.0, 1.0)
    );
}

#[test]
fn bad_input_is_refused_before_any_work() {
    let mut a = random_hermitian::<f64>(10, 1);
    a[(7, 2)] = f64::NAN;
    assert!(matches!(
        Ldlt::new().factor(a.as_ref()),
        Err(Error::NonFinite { row: 7, col: 2, .. })
    ));
    // Only the lower triangle is read.
    let mut a = random_hermitian::<f64>(10, 1);
    a[(2, 7)] = f64::NAN;
    assert!(Ldlt::new().factor(a.as_ref()).is_ok());
    assert!(matches!(
        Ldlt::new().factor(Mat::<f64>::zeros(3, 4).as_ref()),
        Err(Error::NotSquare { .. })
    ));
    assert!(matches!(
        Ldlt::new().tile(0).factor(a.as_ref()),
        Err(Error::ZeroTileSize)
    ));
    let f = Ldlt::new().factor(a.as_ref()).unwrap();
    assert!(matches!(
        f.solve(Mat::<f64>::ones(9, 1).as_ref()),
        Err(Error::DimensionMismatch { n: 10, rows: 9 })
    ));
    // A plan of another order, or of another precision, is refused; its own runs.
    let ldlt = Ldlt::new().tile(4);
    let plan = ldlt.plan(9, hetla::Precision::D).unwrap();
    let err = ldlt.factor_planned(&plan, a.as_ref()).unwrap_err();
    assert!(
        matches!(err, Error::InvalidOption { option: "plan", .. }),
        "{err}"
    );
    let single = ldlt.plan(10, hetla::Precision::S).unwrap();
    assert!(ldlt.factor_planned(&single, a.as_ref()).is_err());
    let plan = ldlt.plan(10, hetla::Precision::D).unwrap();
    let (trace, f) = ldlt.factor_planned(&plan, a.as_ref()).unwrap();
    assert_eq!(trace.tasks.len(), plan.graph().len());
    assert!(f.residual(a.as_ref()).unwrap() < 30.0);
}

/// Q diag(d) Q^H for a random unitary Q (the QR of a random matrix) and the given eigenvalues.
fn with_eigenvalues<T: Scalar>(d: &[f64], seed: u64) -> Mat<T> {
    let n = d.len();
    let g: Mat<T> = hetla::matgen::random_in(n, n, seed);
    let q = g.qr().compute_Q();
    let scaled = Mat::from_fn(n, n, |i, j| q[(i, j)] * T::from_f64(d[j]));
    let mut a = &scaled * q.adjoint();
    for i in 0..n {
        a[(i, i)] = T::from_f64(a[(i, i)].to_c64().re);
    }
    a
}

#[test]
fn ill_conditioned_graded_and_scaled_matrices_keep_lapacks_ratios() {
    fn case<T: Scalar>() {
        let n = 120;
        // cond 1e12 in double (1e5 in single), eigenvalues of both signs spread geometrically.
        let cond: f64 = if T::PRECISION.epsilon() > 1e-10 {
            1e5
        } else {
            1e12
        };
        let d: Vec<f64> = (0..n)
            .map(|i| {
                let x = cond.powf(-(i as f64) / (n - 1) as f64);
                if i % 2 == 0 { x } else { -x }
            })
            .collect();
        let a = with_eigenvalues::<T>(&d, 3);
        check(&a, 32, "cond");
        let f = Ldlt::new().tile(32).factor(a.as_ref()).unwrap();
        let inertia = f.inertia().unwrap();
        assert_eq!(
            (inertia.positive, inertia.negative),
            (60, 60),
            "{inertia:?}"
        );
        // Graded: D A D with D from 1 to 1e-4 (rows and columns of very different sizes).
        let r = random_hermitian::<T>(n, 4);
        let g = |i: usize| 10f64.powf(-4.0 * i as f64 / n as f64);
        check(
            &Mat::from_fn(n, n, |i, j| r[(i, j)] * T::from_f64(g(i) * g(j))),
            32,
            "graded",
        );
        // Scaled near the ends of the range (double: 1e+-150; single: 1e+-15).
        let big: f64 = if T::PRECISION.epsilon() > 1e-10 {
            1e15
        } else {
            1e150
        };
        for s in [big, 1.0 / big] {
            check(
                &Mat::from_fn(n, n, |i, j| r[(i, j)] * T::from_f64(s)),
                32,
                "scaled",
            );
        }
    }
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => case::<T>());
    }
}

#[test]
fn complex_kkt_matrices_and_the_determinant_of_a_known_spectrum() {
    let (nh, na) = (30, 12);
    let a = kkt::<hetla::c64>(nh, na, 3);
    check(&a, 8, "complex kkt");
    let f = Ldlt::new().tile(8).factor(a.as_ref()).unwrap();
    let inertia = f.inertia().unwrap();
    assert_eq!(
        (inertia.positive, inertia.negative, inertia.zero),
        (nh, na, 0)
    );
    // det = prod of the eigenvalues, with its sign: 3 negative ones.
    let d: Vec<f64> = (0..20).map(|i| if i < 3 { -2.0 } else { 1.5 }).collect();
    let f = Ldlt::new()
        .tile(4)
        .factor(with_eigenvalues::<f64>(&d, 9).as_ref())
        .unwrap();
    let expected = -(8.0 * 1.5f64.powi(17));
    assert!(
        (f.det().unwrap() / expected - 1.0).abs() < 1e-12,
        "{}",
        f.det().unwrap()
    );
}

#[test]
fn rcond_estimates_the_condition_of_a_known_spectrum() {
    // Eigenvalues of both signs from 1 to 1e-6: cond_2 = 1e6, cond_1 within a factor n of it.
    let n = 80;
    let d: Vec<f64> = (0..n)
        .map(|i| {
            let x = 1e-6f64.powf(i as f64 / (n - 1) as f64);
            if i % 3 == 0 { -x } else { x }
        })
        .collect();
    let f = Ldlt::new()
        .tile(16)
        .factor(with_eigenvalues::<f64>(&d, 2).as_ref())
        .unwrap();
    let rcond = f.rcond().unwrap();
    assert!(
        rcond > 1e-6 / n as f64 && rcond < 1e-6 * n as f64,
        "{rcond}"
    );
    assert_eq!(
        Ldlt::new()
            .factor(Mat::<f64>::identity(5, 5).as_ref())
            .unwrap()
            .rcond()
            .unwrap(),
        1.0
    );
}

/// `solve_batch` solves each symmetric (Hermitian) indefinite system to dget02's ratio, with a
/// condition estimate near the factor's own, reads only the lower triangles, and reports a singular
/// member (its B untouched) and a wrong shape at their place, in every precision.
fn solve_batch_case<T: Scalar>() {
    let mut a: Vec<Mat<T>> = [8usize, 33, 1, 64, 0]
        .iter()
        .enumerate()
        .map(|(i, &n)| random_hermitian::<T>(n, 400 + i as u64))
        .collect();
    a.push(kkt::<T>(30, 10, 410));
    // The strictly upper triangle is not read.
    a[1][(2, 20)] = T::from_f64(f64::NAN);
    // Row and column 3 zero: singular.
    let hermitian = random_hermitian::<T>(6, 420);
    let zero_at_3 = |i: usize, j: usize| i != 3 && j != 3;
    a.push(Mat::from_fn(6, 6, |i, j| {
        if zero_at_3(i, j) {
            hermitian[(i, j)]
        } else {
            T::from_f64(0.0)
        }
    }));
    a.push(random_hermitian::<T>(5, 421));
    // The last system's B has a row too many.
    let rows: Vec<usize> = (0..a.len())
        .map(|i| a[i].nrows() + usize::from(i + 1 == a.len()))
        .collect();
    let b: Vec<Mat<T>> = (0..a.len())
        .map(|i| hetla::matgen::random_in(rows[i], 3, 430 + i as u64))
        .collect();
    let before = a.clone();
    let mut x = b.clone();
    let views: Vec<_> = a.iter().map(|m| m.as_ref()).collect();
    let mut xs: Vec<_> = x.iter_mut().map(|m| m.as_mut()).collect();
    let results = Ldlt::new().solve_batch(&views, &mut xs).unwrap();
    assert_eq!(
        format!("{a:?}"),
        format!("{before:?}"),
        "the matrices are left unchanged"
    );
    for i in 0..6 {
        let rcond = *results[i].as_ref().unwrap();
        let n = a[i].nrows();
        if n == 0 {
            assert_eq!(rcond, 1.0);
            continue;
        }
        let mut full = a[i].clone();
        for r in 0..n {
            for c in r + 1..n {
                full[(r, c)] = conj(full[(c, r)]);
            }
        }
        let alone = Ldlt::new().factor(full.as_ref()).unwrap().rcond().unwrap();
        assert!(
            (rcond - alone).abs() <= 0.1 * alone,
            "{} member {i}: rcond {rcond} against {alone}",
            T::PRECISION
        );
        let ratio = hetla::check::backward_error(full.as_ref(), x[i].as_ref(), b[i].as_ref());
        assert!(
            ratio < 30.0,
            "{} member {i} order {n}: {ratio}",
            T::PRECISION
        );
    }
    assert!(
        matches!(results[6], Err(Error::Singular { .. })),
        "{:?}",
        results[6]
    );
    assert_eq!(x[6], b[6], "a singular system's B is untouched");
    assert!(results[7].is_err(), "{:?}", results[7]);
    assert!(Ldlt::new().solve_batch::<T>(&views, &mut []).is_err());
}

#[test]
fn batches_of_indefinite_systems_solve_each_as_lapack_would_in_every_precision() {
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => solve_batch_case::<T>());
    }
}

/// `Ldl` (scipy's `ldl`): P A P^T = L D L^* to LAPACK's ratio on random, KKT, zero-diagonal and
/// singular matrices, Hermitian and complex symmetric, with L unit lower triangular and D block
/// diagonal (1 x 1 and 2 x 2 blocks, 2 x 2 ones where the diagonal is zero).
fn ldl_case<T: Scalar>(hermitian: bool) {
    let symmetric = |n: usize, seed: u64| {
        let g: Mat<T> = hetla::matgen::random_in(n, n, seed);
        Mat::from_fn(n, n, |i, j| {
            let (x, y) = (g[(i, j)], g[(j, i)]);
            if hermitian { x + conj(y) } else { x + y }
        })
    };
    let mut zero_diagonal = symmetric(12, 500);
    for i in 0..12 {
        zero_diagonal[(i, i)] = T::from_f64(0.0);
    }
    let mut singular = symmetric(9, 501);
    for i in 0..9 {
        singular[(i, 4)] = T::from_f64(0.0);
        singular[(4, i)] = T::from_f64(0.0);
    }
    let mut cases = vec![
        ("1 x 1", symmetric(1, 502)),
        ("random 2", symmetric(2, 503)),
        ("random 30", symmetric(30, 504)),
        ("random 90", symmetric(90, 505)),
        ("zero diagonal", zero_diagonal),
        ("singular", singular),
    ];
    if hermitian {
        cases.push(("kkt", kkt::<T>(30, 12, 506)));
    }
    for (what, a) in cases {
        let n = a.nrows();
        let f = hetla::Ldl::factor(a.as_ref(), hermitian).unwrap();
        let (l, d, p) = (f.l(), f.d(), f.perm());
        let star = |m: faer::MatRef<'_, T>| -> Mat<T> {
            if hermitian {
                m.adjoint().to_owned()
            } else {
                m.transpose().to_owned()
            }
        };
        let pap = Mat::from_fn(n, n, |i, j| a[(p[i], p[j])]);
        let error = hetla::check::norm1((&pap - l * d * star(l)).as_ref());
        let ratio = error / (n as f64 * hetla::check::norm1(a.as_ref()) * T::PRECISION.epsilon());
        let label = format!("{} hermitian {hermitian} {what}", T::PRECISION);
        assert!(ratio < 30.0, "{label}: ratio {ratio}");
        let mut sorted = p.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{label}: a permutation");
        let mut blocks_2x2 = 0;
        for j in 0..n {
            assert_eq!(l[(j, j)], T::from_f64(1.0), "{label}");
            for i in 0..n {
                if i < j {
                    assert_eq!(
                        l[(i, j)],
                        T::from_f64(0.0),
                        "{label}: L upper at ({i}, {j})"
                    );
                }
                if i > j + 1 || j > i + 1 {
                    assert_eq!(
                        d[(i, j)],
                        T::from_f64(0.0),
                        "{label}: D({i}, {j}) off its blocks"
                    );
                }
            }
            if j + 1 < n && d[(j + 1, j)] != T::from_f64(0.0) {
                blocks_2x2 += 1;
                // 2 x 2 blocks do not overlap.
                assert!(
                    j + 2 >= n || d[(j + 2, j + 1)] == T::from_f64(0.0),
                    "{label}: D at {j}"
                );
                assert!(
                    j == 0 || d[(j, j - 1)] == T::from_f64(0.0),
                    "{label}: D at {j}"
                );
            }
        }
        if what == "zero diagonal" {
            assert!(blocks_2x2 > 0, "{label}: no 2 x 2 block");
        }
    }
    let mut nan = symmetric(4, 507);
    nan[(3, 1)] = T::from_f64(f64::NAN);
    assert!(matches!(
        hetla::Ldl::factor(nan.as_ref(), hermitian),
        Err(Error::NonFinite { .. })
    ));
    assert!(hetla::Ldl::factor(Mat::<T>::zeros(3, 4).as_ref(), hermitian).is_err());
}

#[test]
fn explicit_bunch_kaufman_factors_reconstruct_every_kind_of_symmetric_matrix() {
    for precision in Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => {
            ldl_case::<T>(true);
            if precision.is_complex() {
                ldl_case::<T>(false);
            }
        });
    }
}
