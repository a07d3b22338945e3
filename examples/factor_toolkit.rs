//! What a Cholesky factor gives beyond a solve, in every precision: the log-determinant, the
//! condition estimate, the inverse, L, rank-k updates and downdates, and batches of small systems.
//!
//! Run: `cargo run --release --example factor_toolkit [n]` (default n = 1000). At n = 4096 it also
//! reports the time of a rank-1 update against factoring the changed matrix anew, and the update's
//! backward error.

use std::time::Instant;

use faer::Mat;
use hetla::{Cholesky, Scalar, c32, c64};

fn toolkit<T: Scalar>(n: usize) -> hetla::Result<()> {
    let a = hetla::matgen::random_hpd_conditioned::<T>(n, 1e3, 1);
    let mut factor = Cholesky::new().factor(&a)?;

    // ln det A without overflow (det A itself, when it is a normal f64).
    let log_det = factor.log_det();
    let det = factor
        .det()
        .map_or_else(|e| e.to_string(), |d| format!("{d:e}"));
    // 1 / (||A||_1 ||A^-1||_1), estimated as LAPACK's ?pocon does.
    let rcond = factor.rcond()?;

    // A + W W^H and back: O(n^2 k) each instead of a new O(n^3) factorisation.
    let w = Mat::<T>::from_fn(n, 2, |i, j| T::from_f64(((i + 3 * j) as f64).sin()));
    factor.update(&w)?;
    factor.downdate(&w)?;
    // A downdate that would leave an indefinite matrix is refused, the factor unchanged.
    let big = Mat::<T>::from_fn(n, 1, |_, _| T::from_f64(1e3));
    let refused = factor.downdate(&big).is_err();

    // A^-1 (both triangles), as LAPACK's ?potri tiled on the runtime.
    let inverse = factor.inverse()?;

    let x = factor.solve(Mat::<T>::ones(n, 1).as_ref())?;
    let l = factor.into_l();
    println!(
        "{}: n = {n}, ln det A = {log_det:.6}, {det}, rcond = {rcond:.3e}, \
         indefinite downdate refused: {refused}, x[0] = {:?}, L[0,0] = {:?}, inv(A)[0,0] = {:?}",
        T::PRECISION,
        x[(0, 0)],
        l[(0, 0)],
        inverse[(0, 0)]
    );

    // 1000 small systems of mixed sizes, each one task on one core; one result per system.
    let systems: Vec<Mat<T>> = (0..1000)
        .map(|i| hetla::matgen::random_hpd::<T>(16 + i % 49, i as u64))
        .collect();
    let rhs: Vec<Mat<T>> = systems.iter().map(|a| Mat::ones(a.nrows(), 1)).collect();
    let solved = hetla::solve_spd_batch(&systems, &rhs)?;
    let failed = solved.iter().filter(|x| x.is_err()).count();
    println!("   batch of {} systems: {failed} failed", systems.len());
    Ok(())
}

/// A rank-1 update against a new factorisation of the changed matrix, with the update's backward
/// error ||A + w w^T - L' L'^T||_1 / ||A + w w^T||_1.
fn update_against_refactoring(n: usize) -> hetla::Result<()> {
    let a = hetla::matgen::random_spd(n, 1);
    let w = Mat::from_fn(n, 1, |i, _| (i as f64 * 0.37).sin());
    let solver = Cholesky::new();
    let mut factor = solver.factor(&a)?;
    let changed = &a + &w * w.transpose();
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let mut copy = changed.clone();
        let start = Instant::now();
        solver.factor_in_place(&mut copy)?;
        best.0 = best.0.min(start.elapsed().as_secs_f64());
        let mut updated = factor.clone();
        let start = Instant::now();
        updated.update(&w)?;
        best.1 = best.1.min(start.elapsed().as_secs_f64());
    }
    factor.update(&w)?;
    let residual =
        hetla::check::cholesky_residual(changed.as_ref(), factor.storage(), faer::Par::Seq);
    let backward = residual * n as f64 * f64::EPSILON;
    println!(
        "rank-1 update at n = {n}: {:.2} ms, refactoring {:.1} ms ({:.1}x faster, best of 3); \
         backward error {backward:.2e}",
        best.1 * 1e3,
        best.0 * 1e3,
        best.0 / best.1
    );
    Ok(())
}

fn main() -> hetla::Result<()> {
    let n = std::env::args()
        .nth(1)
        .map_or(1000, |s| s.parse().expect("n: a positive integer"));
    toolkit::<f32>(n)?;
    toolkit::<f64>(n)?;
    toolkit::<c32>(n)?;
    toolkit::<c64>(n)?;
    update_against_refactoring(n)?;
    Ok(())
}
