//! Solve a symmetric positive definite system with hetla: the README's example. Run:
//! `cargo run --release --example solve`

use faer::Mat;

fn main() -> Result<(), hetla::Error> {
    let n = 1000;
    // Any SPD matrix; only its lower triangle is read.
    let a = Mat::from_fn(n, n, |i, j| {
        if i == j {
            n as f64
        } else {
            1.0 / (1 + i + j) as f64
        }
    });
    let b = Mat::from_fn(n, 2, |i, j| (i + j) as f64);

    // One call...
    let x = hetla::solve_spd(a.as_ref(), b.as_ref())?;

    // ...or factor once with chosen options and solve many times.
    let factor = hetla::Cholesky::new().tile(256).factor(a.as_ref())?;
    let y = factor.solve(b.as_ref())?;
    // A platform keeps its pinned pools and learned models across calls.
    let spec: hetla::ClusterSpec = "auto".parse()?;
    let platform = std::sync::Arc::new(hetla::Platform::new(&spec, hetla::Backend::Faer)?);
    let factor = hetla::Cholesky::new()
        .platform(platform)
        .factor(a.as_ref())?;
    let z = factor.solve(b.as_ref())?;
    assert!((&y - &z).norm_max() < 1e-12);

    let error =
        hetla::check::solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), faer::Par::Seq);
    println!("||A x - b|| / (||A|| ||x||) = {error:.2e}");
    assert!((&x - &y).norm_max() < 1e-12);
    Ok(())
}
