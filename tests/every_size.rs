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
