//! ScaLAPACK's LU with partial pivoting, pdgetrf, on a 2D block-cyclic random general matrix, timed
//! on its own, then pdgetrs on 10 right-hand sides: the peer distributed LU is measured against.
//!
//! ```sh
//! cargo build --release --features scalapack --example pdgetrf
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/pdgetrf 8192 256 1x2 3
//! ```
//! Arguments: n, tile (block size), grid, runs. Rank 0 prints one JSON line: the best and median
//! seconds of pdgetrf (the slowest rank's), Gflop/s of the best (2 n^3 / 3), the best pdgetrs
//! seconds, and the solve's backward error ||B - A X||_1 / (||A||_1 ||X||_1 n eps) for n <= 4096
//! (gathered on rank 0).

use hetla::distributed::scalapack::{getrf, getrs};
use hetla::distributed::{DistributedMatrix, DistributedRhs, ProcessGrid};

fn main() -> hetla::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let n: usize = arg(0, "4096").parse().expect("n");
    let tile: usize = arg(1, "256").parse().expect("tile");
    let grid: ProcessGrid = arg(2, "1x2").parse()?;
    let runs: usize = arg(3, "3").parse().expect("runs");
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let a = DistributedMatrix::<f64>::random(&world, (n, n), tile, grid, 1)?;
    let b = DistributedRhs::<f64>::random(&world, (n, 10), tile, grid, 2)?;
    let lu = getrf(&world, &a, runs)?;
    let solved = getrs(&world, &lu, &b, runs)?;
    let gathered = if n <= 4096 {
        (
            a.gather(&world)?,
            b.gather(&world)?,
            solved.x.gather(&world)?,
        )
    } else {
        (None, None, None)
    };
    let backward = match gathered {
        (Some(a), Some(b), Some(x)) => {
            let norm1 = |m: &faer::Mat<f64>| {
                (0..m.ncols())
                    .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs()).sum::<f64>())
                    .fold(0.0, f64::max)
            };
            let r = &b - &a * &x;
            format!(
                "{:.3e}",
                norm1(&r) / (norm1(&a) * norm1(&x) * n as f64 * f64::EPSILON)
            )
        }
        _ => "null".into(),
    };
    if mpi::traits::Communicator::rank(&world) == 0 {
        let sorted = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            s
        };
        let (s, t) = (sorted(&lu.seconds), sorted(&solved.seconds));
        let flops = 2.0 * (n as f64).powi(3) / 3.0;
        println!(
            "{{\"peer\": \"ScaLAPACK pdgetrf\", \"n\": {n}, \"tile\": {tile}, \"grid\": \"{grid}\", \"runs\": {runs}, \"best_seconds\": {:.4}, \"median_seconds\": {:.4}, \"gflops\": {:.2}, \"getrs_best_seconds\": {:.4}, \"backward_error\": {backward}}}",
            s[0],
            s[s.len() / 2],
            flops / s[0] / 1e9,
            t[0],
        );
    }
    Ok(())
}
