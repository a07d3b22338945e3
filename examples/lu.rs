//! General square systems with LU and partial pivoting, in every precision: the factor, its solves
//! (A, A^T, A^H), L, U and P, the determinant, the condition estimate, a singular matrix, and the
//! mixed-precision solve.
//!
//! Run: `cargo run --release --example lu [n]` (default n = 1000).

use faer::Mat;
use hetla::{Lu, Scalar, c32, c64};

fn norm1<T: Scalar>(m: &Mat<T>) -> f64 {
    (0..m.ncols())
        .map(|j| m.col(j).iter().map(|x| x.abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}

fn lu<T: Scalar>(n: usize) -> hetla::Result<()> {
    let a = hetla::matgen::random_conditioned::<T>(n, 1e3, 1);
    let b = Mat::<T>::ones(n, 2);

    // gesv in one call.
    let x = hetla::solve(&a, &b)?;

    // The factor, and what it gives.
    let lu = Lu::new().factor(&a)?;
    let xt = lu.solve_transposed(&b)?; // A^T X = B (solve_adjoint: A^H X = B)
    let (l, u, p) = (lu.l(), lu.u(), lu.permutation());
    let pa = Mat::<T>::from_fn(n, n, |i, j| a[(p[i], j)]);
    let factor_ratio = norm1(&(pa - &l * &u)) / (n as f64 * norm1(&a) * T::PRECISION.epsilon());
    let rcond = lu.rcond()?; // as LAPACK's ?gecon
    let log_abs_det = lu.log_abs_det();
    let det = lu
        .det()
        .map_or_else(|e| e.to_string(), |d| format!("{d:?}"));

    // An exactly singular matrix factors, says where, and refuses to solve.
    let mut singular = a.clone();
    for i in 0..n {
        singular[(i, n / 2)] = T::from_f64(0.0);
    }
    let s = Lu::new().factor(&singular)?;
    let refused = s.solve(&b).unwrap_err();

    let residual = |x: &Mat<T>, a: &Mat<T>| norm1(&(a * x - &b)) / (norm1(a) * norm1(x));
    println!(
        "{}: n = {n}, ||PA - LU|| / (n ||A|| eps) = {factor_ratio:.2e}, rcond = {rcond:.3e} \
         (cond 1e3 asked), ln |det A| = {log_abs_det:.4}, det = {det}, \
         ||AX - B|| / (||A|| ||X||) = {:.1e}, transposed {:.1e}; singular at column {:?}: {refused}",
        T::PRECISION,
        residual(&x, &a),
        residual(&xt, &a.transpose().to_owned()),
        s.singular(),
    );
    Ok(())
}

fn main() -> hetla::Result<()> {
    let n = std::env::args()
        .nth(1)
        .map_or(1000, |s| s.parse().expect("n: a positive integer"));
    lu::<f32>(n)?;
    lu::<f64>(n)?;
    lu::<c32>(n)?;
    lu::<c64>(n)?;

    // f32 LU refined to f64 accuracy (LAPACK's dsgesv), or a fallback to f64 that says why.
    let a = hetla::matgen::random_conditioned::<f64>(n, 1e5, 2);
    let (x, how) = hetla::solve_mixed(&a, &Mat::<f64>::ones(n, 1))?;
    println!("mixed: {how:?}, x[0] = {:.6e}", x[(0, 0)]);
    Ok(())
}
