//! Every call at the edge sizes: 0 x 0, (0, k) and (n, 0) right-hand sides, 1 x 1, and least
//! squares with no rows or no columns, with LAPACK's quick-return results (issue: "every size").

use faer::Mat;
use hetla::{Cholesky, Lu, Qr};

fn spd(n: usize) -> Mat<f64> {
    hetla::matgen::random_spd(n, 3)
}

#[test]
fn cholesky_at_every_size() {
    for n in [0, 1] {
        let f = Cholesky::new().factor(spd(n).as_ref()).unwrap();
        for k in [0, 1, 3] {
            let x = f.solve(Mat::<f64>::ones(n, k).as_ref()).unwrap();
            assert_eq!((x.nrows(), x.ncols()), (n, k));
        }
        let x = hetla::solve_spd(spd(n).as_ref(), Mat::<f64>::ones(n, 2).as_ref()).unwrap();
        assert_eq!((x.nrows(), x.ncols()), (n, 2));
    }
    // What a factor of order 0 says: LAPACK's quick returns (det 1, rcond 1, an empty inverse).
    let f = Cholesky::new().factor(spd(0).as_ref()).unwrap();
    assert_eq!(
        (f.log_det(), f.det().unwrap(), f.rcond().unwrap()),
        (0.0, 1.0, 1.0)
    );
    assert_eq!(f.inverse().unwrap().nrows(), 0);
    let f = Cholesky::new().factor(spd(4).as_ref()).unwrap();
    let x = f.solve(Mat::<f64>::zeros(4, 0).as_ref()).unwrap();
    assert_eq!((x.nrows(), x.ncols()), (4, 0));
}

#[test]
fn lu_at_every_size() {
    for n in [0, 1] {
        let a = Mat::<f64>::from_fn(n, n, |_, _| 2.0);
        let f = Lu::new().factor(a.as_ref()).unwrap();
        for k in [0, 1, 3] {
            let x = f.solve(Mat::<f64>::ones(n, k).as_ref()).unwrap();
            assert_eq!((x.nrows(), x.ncols()), (n, k));
        }
        let x = hetla::solve(a.as_ref(), Mat::<f64>::ones(n, 2).as_ref()).unwrap();
        assert_eq!((x.nrows(), x.ncols()), (n, 2));
        assert_eq!(f.det().unwrap(), if n == 0 { 1.0 } else { 2.0 });
    }
    let f = Lu::new()
        .factor(Mat::<hetla::c64>::zeros(0, 0).as_ref())
        .unwrap();
    assert_eq!(f.rcond().unwrap(), 1.0);
    let f = Lu::new().factor(spd(4).as_ref()).unwrap();
    let x = f.solve(Mat::<f64>::zeros(4, 0).as_ref()).unwrap();
    assert_eq!((x.nrows(), x.ncols()), (4, 0));
}

#[test]
fn qr_and_least_squares_at_every_size() {
    for (m, n) in [(0, 0), (1, 1), (3, 0), (3, 1)] {
        let a = Mat::<f64>::from_fn(m, n, |i, j| (i + 2 * j + 1) as f64);
        let f = Qr::new().factor(a.as_ref()).unwrap();
        assert_eq!((f.r().nrows(), f.r().ncols()), (m.min(n), n), "{m} x {n}");
        for k in [0, 2] {
            let x = Qr::new()
                .solve_least_squares(a.as_ref(), Mat::<f64>::ones(m, k).as_ref())
                .unwrap();
            assert_eq!((x.nrows(), x.ncols()), (n, k), "{m} x {n}, k = {k}");
        }
        let x = hetla::lstsq(a.as_ref(), Mat::<f64>::ones(m, 2).as_ref()).unwrap();
        assert_eq!((x.nrows(), x.ncols()), (n, 2), "{m} x {n}");
        assert!(x.col_iter().all(|c| c.iter().all(|v| v.is_finite())));
    }
}

#[test]
fn lu_of_any_shape_in_place_is_p_a_equals_l_u() {
    use hetla::Scalar;
    fn check<T: Scalar>(m: usize, n: usize, tile: usize) {
        let a = hetla::matgen::random_in::<T>(m, n, (m * 31 + n) as u64);
        let mut lu = a.clone();
        let (ipiv, zero) = Lu::new().tile(tile).factor_in_place(lu.as_mut()).unwrap();
        let k = m.min(n);
        assert_eq!((ipiv.len(), zero), (k, None), "{m} x {n}");
        let l = Mat::<T>::from_fn(m, k, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Equal => T::from_f64(1.0),
            std::cmp::Ordering::Greater => lu[(i, j)],
            std::cmp::Ordering::Less => T::from_f64(0.0),
        });
        let u = Mat::<T>::from_fn(
            k,
            n,
            |i, j| if i <= j { lu[(i, j)] } else { T::from_f64(0.0) },
        );
        let mut pa = a.clone();
        hetla_kernels::swap_rows(pa.as_mut(), &ipiv);
        let error = hetla::check::relative_error((&l * &u).as_ref(), pa.as_ref());
        assert!(
            error < 1e3 * T::PRECISION.epsilon(),
            "{m} x {n}, tile {tile}: {error}"
        );
    }
    for (m, n, tile) in [
        (7, 3, 8),
        (3, 7, 8),
        (300, 120, 64),
        (120, 300, 64),
        (200, 200, 64),
        (5, 5, 8),
        (4, 0, 8),
        (0, 4, 8),
        (1, 6, 8),
    ] {
        check::<f64>(m, n, tile);
        check::<hetla::c32>(m, n, tile);
    }
    // Row-major storage takes the same path through a column-major copy.
    let a = hetla::matgen::random_in::<f64>(150, 150, 3);
    let mut t = a.transpose().to_owned();
    let (ipiv, _) = Lu::new()
        .tile(64)
        .factor_in_place(t.as_mut().transpose_mut())
        .unwrap();
    let mut lu = a.clone();
    let (ipiv2, _) = Lu::new().tile(64).factor_in_place(lu.as_mut()).unwrap();
    assert_eq!(ipiv, ipiv2);
    assert_eq!(t.transpose().to_owned(), lu);
    // A non-finite entry: an error before any work.
    let mut bad = hetla::matgen::random_in::<f64>(6, 4, 1);
    bad[(2, 3)] = f64::NAN;
    assert!(Lu::new().factor_in_place(bad.as_mut()).is_err());
}
