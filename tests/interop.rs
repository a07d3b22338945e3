//! ndarray's and nalgebra's matrices through hetla's calls (features `ndarray`, `nalgebra`): the
//! same answers as faer's, results in the caller's type, in place also on C-ordered arrays.

#![cfg(any(feature = "ndarray", feature = "nalgebra"))]

use faer::Mat;
use hetla::{Cholesky, c64};

/// The faer reference: L of `a` and the solution of A X = B.
fn reference(a: &Mat<f64>, b: &Mat<f64>) -> (Mat<f64>, Mat<f64>) {
    let factor = Cholesky::new().factor(a).unwrap();
    (factor.l(), factor.solve(b).unwrap())
}

#[cfg(feature = "ndarray")]
mod with_ndarray {
    use ndarray::{Array2, ShapeBuilder};

    use super::*;

    fn to_ndarray<T: Copy>(m: &Mat<T>, fortran: bool) -> Array2<T> {
        let shape = (m.nrows(), m.ncols());
        let f = |(i, j): (usize, usize)| m[(i, j)];
        if fortran {
            Array2::from_shape_fn(shape.f(), f)
        } else {
            Array2::from_shape_fn(shape, f)
        }
    }

    #[test]
    fn ndarray_matrices_in_either_order_solve_and_factor_like_faer() {
        for (n, tile) in [(50, 64), (300, 64)] {
            let a = hetla::matgen::random_spd(n, 3);
            let b = Mat::from_fn(n, 3, |i, j| (i * 3 + j) as f64 * 0.01);
            let (l, x) = reference(&a, &b);
            let (anorm, xnorm) = (a.norm_max(), x.norm_max());
            let solver = Cholesky::new().tile(tile);
            for fortran in [false, true] {
                let (an, bn) = (to_ndarray(&a, fortran), to_ndarray(&b, fortran));
                let xn: Array2<f64> = hetla::solve_spd(&an, bn.view()).unwrap();
                let factor = solver.factor(an.view()).unwrap();
                let xf: Array2<f64> = factor.solve(&bn).unwrap();
                for (i, j) in (0..n).flat_map(|i| (0..3).map(move |j| (i, j))) {
                    assert!((xn[[i, j]] - x[(i, j)]).abs() < 1e-13 * xnorm);
                    assert!((xf[[i, j]] - x[(i, j)]).abs() < 1e-13 * xnorm);
                }
                // In place: L in the lower triangle, the strict upper one untouched, in C order
                // too.
                // Through the tile-major copy (the default) and in place (a column-major copy).
                for storage in [hetla::Storage::Auto, hetla::Storage::InPlace] {
                    let mut inplace = an.clone();
                    solver
                        .clone()
                        .storage(storage)
                        .factor_in_place(&mut inplace)
                        .unwrap();
                    for i in 0..n {
                        for j in 0..n {
                            let expected = if i >= j { l[(i, j)] } else { a[(i, j)] };
                            assert!((inplace[[i, j]] - expected).abs() < 1e-13 * anorm);
                        }
                    }
                }
                // Solve in place into a C-ordered right-hand side.
                let mut bc = to_ndarray(&b, fortran);
                factor.solve_in_place(bc.view_mut()).unwrap();
                assert!((bc[[n - 1, 2]] - x[(n - 1, 2)]).abs() < 1e-13 * xnorm);
            }
        }
    }

    #[test]
    fn ndarray_complex_updates_and_batches() {
        let n = 40;
        let a = hetla::matgen::random_hpd::<c64>(n, 7);
        let an = to_ndarray(&a, false);
        let w = Array2::from_shape_fn((n, 2), |(i, j)| c64::new(i as f64 * 0.01, j as f64));
        let mut factor = Cholesky::new().factor(&an).unwrap();
        factor.update(&w).unwrap();
        let mut expected = Cholesky::new().factor(&a).unwrap();
        let wf = Mat::from_fn(n, 2, |i, j| w[[i, j]]);
        expected.update(&wf).unwrap();
        assert!((&factor.l() - &expected.l()).norm_max() < 1e-13);
        // Mixed precision: an f64 ndarray system factored in f32 and refined.
        let real = to_ndarray(&hetla::matgen::random_spd(60, 2), false);
        let ones = Array2::from_elem((60, 1), 1.0);
        let (x, how) = hetla::solve_spd_mixed(&real, &ones).unwrap();
        let x64: Array2<f64> = hetla::solve_spd(&real, &ones).unwrap();
        assert_eq!(how.path, hetla::RefinementPath::Mixed);
        assert!((&x - &x64).iter().all(|d| d.abs() < 1e-13));
        // A batch of ndarray matrices gives ndarray solutions.
        let systems: Vec<Array2<c64>> = (0..20)
            .map(|i| {
                to_ndarray(
                    &hetla::matgen::random_hpd::<c64>(8 + i, i as u64),
                    i % 2 == 0,
                )
            })
            .collect();
        let rhs: Vec<Array2<c64>> = systems
            .iter()
            .map(|a| Array2::from_elem((a.nrows(), 1), c64::new(1.0, -1.0)))
            .collect();
        let solved: Vec<Array2<c64>> = hetla::solve_spd_batch(&systems, &rhs)
            .unwrap()
            .into_iter()
            .map(|x| x.unwrap())
            .collect();
        for (i, x) in solved.iter().enumerate() {
            let one = hetla::solve_spd(&systems[i], &rhs[i]).unwrap();
            assert_eq!(x.dim(), (8 + i, 1));
            assert!((x - &one).iter().all(|d| d.norm() < 1e-13));
        }
    }
}

#[cfg(feature = "nalgebra")]
mod with_nalgebra {
    use nalgebra::DMatrix;

    use super::*;

    #[test]
    fn nalgebra_matrices_and_views_solve_and_factor_like_faer() {
        let n = 200;
        let a = hetla::matgen::random_spd(n, 5);
        let b = Mat::from_fn(n, 2, |i, j| (i + j) as f64);
        let (l, x) = reference(&a, &b);
        let (anorm, xnorm) = (a.norm_max(), x.norm_max());
        let an = DMatrix::from_fn(n, n, |i, j| a[(i, j)]);
        let bn = DMatrix::from_fn(n, 2, |i, j| b[(i, j)]);
        let solver = Cholesky::new().tile(48);
        let xn: DMatrix<f64> = solver.factor(&an).unwrap().solve(&bn).unwrap();
        let xs: DMatrix<f64> = hetla::solve_spd(an.view((0, 0), (n, n)), &bn).unwrap();
        for i in 0..n {
            assert!((xn[(i, 1)] - x[(i, 1)]).abs() < 1e-12 * xnorm);
            assert!((xs[(i, 0)] - x[(i, 0)]).abs() < 1e-12 * xnorm);
        }
        // In place on a view into a larger matrix (column stride = the larger one's rows).
        let mut big = DMatrix::<f64>::zeros(n + 7, n + 3);
        big.view_mut((7, 3), (n, n)).copy_from(&an);
        solver
            .factor_in_place(big.view_mut((7, 3), (n, n)))
            .unwrap();
        for j in 0..n {
            for i in j..n {
                assert!((big[(7 + i, 3 + j)] - l[(i, j)]).abs() < 1e-12 * anorm);
            }
        }
        assert!(
            big.row(0).iter().all(|&v| v == 0.0),
            "outside the view untouched"
        );
        // A transposed view (rows not contiguous) is read where it lies.
        let at = an.transpose();
        let xt: DMatrix<f64> = hetla::solve_spd(&at, &bn).unwrap();
        assert!((xt - xn).amax() < 1e-12 * xnorm);
    }
}
