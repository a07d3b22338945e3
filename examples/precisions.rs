//! f32, complex Hermitian and mixed-precision solves with hetla: the README's example. Run:
//! `cargo run --release --example precisions`

use faer::Mat;
use hetla::{RefinementPath, c64};

fn main() -> Result<(), hetla::Error> {
    let n = 1000;
    // Single precision: the same API, the type of the matrix chooses the kernels.
    // (hetla's generator of random SPD matrices; any SPD matrix will do.)
    let a32 = hetla::matgen::random_hpd::<f32>(n, 7);
    let b32 = Mat::from_fn(n, 1, |i, _| i as f32);
    let x32 = hetla::solve_spd(a32.as_ref(), b32.as_ref())?;

    // Complex Hermitian (c32 and c64): the factor is L L^H.
    let z = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Equal => c64::new(n as f64, 0.0),
        std::cmp::Ordering::Greater => c64::new(0.5, 1.0 / (1 + i - j) as f64),
        std::cmp::Ordering::Less => c64::new(0.5, -1.0 / (1 + j - i) as f64),
    });
    let l = hetla::Cholesky::new().factor(z.as_ref())?.l();
    assert!((&l * l.adjoint() - &z).norm_max() < 1e-10 * n as f64);

    // Mixed: factored in f32, refined to f64 accuracy (falls back to an f64
    // factorisation, and says why, when f32 is not enough).
    let a = Mat::from_fn(n, n, |i, j| f64::from(a32[(i, j)]));
    let b = Mat::from_fn(n, 1, |i, _| i as f64);
    let (x, how) = hetla::solve_spd_mixed(a.as_ref(), b.as_ref())?;
    assert_eq!(how.path, RefinementPath::Mixed);
    let error =
        hetla::check::solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), faer::Par::Seq);
    println!(
        "f32 solve: x[1] = {}; mixed: {} refinement steps, backward error {error:.1e}",
        x32[(1, 0)],
        how.iterations
    );
    Ok(())
}
