//! hetla's calls on ndarray's and nalgebra's matrices (features `ndarray` and `nalgebra`): the
//! answers come back in the caller's type, and no input is copied to be read.
//!
//! Run: `cargo run --release --features ndarray,nalgebra --example interop`.

use hetla::Cholesky;
use nalgebra::DMatrix;
use ndarray::Array2;

fn main() -> hetla::Result<()> {
    let n = 500;
    // ndarray, C order (its default): A is read where it lies.
    let a = Array2::from_shape_fn((n, n), |(i, j)| {
        if i == j {
            n as f64
        } else {
            1.0 / (1 + i + j) as f64
        }
    });
    let b = Array2::from_elem((n, 2), 1.0);
    let x: Array2<f64> = hetla::solve_spd(&a, &b)?;
    let factor = Cholesky::new().factor(a.view())?;
    println!(
        "ndarray:  x[0, 0] = {:.6e}, ln det A = {:.3}",
        x[[0, 0]],
        factor.log_det()
    );

    // nalgebra: a DMatrix, a view into it, and the factor in place in the lower triangle.
    let mut m = DMatrix::from_fn(n, n, |i, j| a[[i, j]]);
    let y: DMatrix<f64> =
        hetla::solve_spd(m.view((0, 0), (n, n)), &DMatrix::from_element(n, 1, 1.0))?;
    Cholesky::new().factor_in_place(&mut m)?;
    println!("nalgebra: y[0] = {:.6e}, L[1, 0] = {:.6e}", y[0], m[(1, 0)]);

    // Complex: num_complex::Complex64 is hetla::c64.
    let z = Array2::from_shape_fn((4, 4), |(i, j)| {
        hetla::c64::new(
            if i == j { 4.0 } else { 0.5 },
            if i > j {
                0.25
            } else if i < j {
                -0.25
            } else {
                0.0
            },
        )
    });
    let rcond = Cholesky::new().factor(&z)?.rcond()?;
    println!("complex:  rcond = {rcond:.4}");
    Ok(())
}
