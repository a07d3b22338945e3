//! Least squares and QR in every precision: `hetla::lstsq` in one call, the factor (R, the thin Q,
//! Q^H applied to a matrix), CholeskyQR2 on a tall-skinny matrix, and what a rank-deficient matrix
//! gives.
//!
//! Run: `cargo run --release --example qr [m] [n]` (default 2000 x 300).

use faer::Mat;
use hetla::{CholeskyQr, Qr, Scalar, c32, c64};

fn norm1<T: Scalar>(m: &Mat<T>) -> f64 {
    (0..m.ncols())
        .map(|j| m.col(j).iter().map(|x| x.abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}

fn qr<T: Scalar>(m: usize, n: usize) -> hetla::Result<()> {
    let a: Mat<T> = hetla::matgen::random_block_in(m, 1, 0..m, 0..n);
    let b: Mat<T> = hetla::matgen::random_block_in(m, 2, 0..m, 0..2);
    let eps = T::PRECISION.epsilon();

    // min ||A X - B||_2 in one call (LAPACK's ?gels): the residual is orthogonal to A's columns.
    let x = hetla::lstsq(&a, &b)?;
    let r = &b - &a * &x;
    let normal = norm1(&(a.adjoint() * &r)) / (norm1(&a) * norm1(&r) * m as f64 * eps);

    // The factor: R, the thin Q, Q^H applied to a matrix.
    let f = Qr::new().factor(&a)?;
    let (q, r_factor) = (f.thin_q()?, f.r());
    let ratio = norm1(&(&q * &r_factor - &a)) / (m as f64 * norm1(&a) * eps);
    let orth = norm1(&(Mat::<T>::identity(n, n) - q.adjoint() * &q)) / (m as f64 * eps);
    let qhb = f.apply_qh(&b)?;

    // CholeskyQR2: Q and R from two Gram matrices, or Householder QR when A is too ill-conditioned.
    let c = CholeskyQr::new().factor(&a)?;

    println!(
        "{}: {m} x {n}, ||A^H (B - AX)|| ratio {normal:.1e}; ||A - QR|| / (m ||A|| eps) = {ratio:.2e}, \
         ||I - Q^H Q|| / (m eps) = {orth:.2e}; (Q^H B)[0, 0] = {:?}; CholeskyQR2 path {:?}",
        T::PRECISION,
        qhb[(0, 0)],
        c.path(),
    );
    Ok(())
}

fn main() -> hetla::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: usize| {
        args.next()
            .map_or(default, |s| s.parse().expect("a positive integer"))
    };
    let (m, n) = (next(2000), next(300));
    qr::<f32>(m, n)?;
    qr::<f64>(m, n)?;
    qr::<c32>(m, n)?;
    qr::<c64>(m, n)?;

    // A rank-deficient matrix factors, and least squares through it say where R is singular.
    let mut a: Mat<f64> = hetla::matgen::random_block_in(m, 3, 0..m, 0..n);
    for i in 0..m {
        a[(i, n / 2)] = 0.0;
    }
    let refused = hetla::lstsq(&a, &Mat::<f64>::ones(m, 1)).unwrap_err();
    println!("rank deficient: {refused}");
    Ok(())
}
