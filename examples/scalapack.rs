//! ScaLAPACK's factorisations on a 2D block-cyclic random matrix, timed on their own: the peers of
//! hetla's distributed runs (`hetla cholesky --grid PxQ --compare` times pdpotrf beside hetla's
//! distributed Cholesky).
//!
//! ```sh
//! cargo build --release --features scalapack --example scalapack
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack potrf 8192 256 1x2 3
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack getrf 8192 256 1x2 3
//! ```
//! Arguments: the routine (`potrf`: pdpotrf on an SPD matrix; `getrf`: pdgetrf on a general one,
//! then pdgetrs on 10 right-hand sides), n, tile (block size), grid, runs. Rank 0 prints one JSON
//! line: the best and median seconds (the slowest rank's), Gflop/s of the best (n^3 / 3 for
//! pdpotrf, 2 n^3 / 3 for pdgetrf) and, for n <= 4096 (gathered on rank 0), the scaled residual of
//! the Cholesky factor or the solve's backward error ||B - A X||_1 / (||A||_1 ||X||_1 n eps).

use faer::Mat;
use hetla::distributed::scalapack::{getrf, getrs, potrf};
use hetla::distributed::{DistributedMatrix, DistributedRhs, ProcessGrid};

fn main() -> hetla::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let routine = arg(0, "potrf");
    let n: usize = arg(1, "4096").parse().expect("n");
    let tile: usize = arg(2, "256").parse().expect("tile");
    let grid: ProcessGrid = arg(3, "1x2").parse()?;
    let runs: usize = arg(4, "3").parse().expect("runs");
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let small = n <= 4096;
    let (seconds, flops, check, extra) = match routine.as_str() {
        "potrf" => {
            let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, 1)?;
            let done = potrf(&world, &a, runs)?;
            let (a, l) = if small {
                (a.gather(&world)?, done.factor.gather(&world)?)
            } else {
                (None, None)
            };
            let residual = a.zip(l).map(|(a, l)| {
                hetla::check::cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq)
            });
            let flops = (n as f64).powi(3) / 3.0;
            (done.seconds, flops, ("residual", residual), String::new())
        }
        "getrf" => {
            let a = DistributedMatrix::<f64>::random(&world, (n, n), tile, grid, 1)?;
            let b = DistributedRhs::<f64>::random(&world, (n, 10), tile, grid, 2)?;
            let lu = getrf(&world, &a, runs)?;
            let solved = getrs(&world, &lu, &b, runs)?;
            let gathered = if small {
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
                    let r = &b - &a * &x;
                    Some(norm1(&r) / (norm1(&a) * norm1(&x) * n as f64 * f64::EPSILON))
                }
                _ => None,
            };
            let getrs_best = solved.seconds.iter().copied().fold(f64::INFINITY, f64::min);
            let flops = 2.0 * (n as f64).powi(3) / 3.0;
            let extra = format!(", \"getrs_best_seconds\": {getrs_best:.4}");
            (lu.seconds, flops, ("backward_error", backward), extra)
        }
        other => panic!("unknown routine {other}: potrf or getrf"),
    };
    if mpi::traits::Communicator::rank(&world) == 0 {
        let mut s = seconds;
        s.sort_by(f64::total_cmp);
        println!(
            "{{\"peer\": \"ScaLAPACK pd{routine}\", \"n\": {n}, \"tile\": {tile}, \"grid\": \"{grid}\", \"runs\": {runs}, \"best_seconds\": {:.4}, \"median_seconds\": {:.4}, \"gflops\": {:.2}, \"{}\": {}{extra}}}",
            s[0],
            s[s.len() / 2],
            flops / s[0] / 1e9,
            check.0,
            check.1.map_or("null".into(), |r| format!("{r:.3e}"))
        );
    }
    Ok(())
}

/// ||M||_1, the largest column sum of magnitudes.
fn norm1(m: &Mat<f64>) -> f64 {
    (0..m.ncols())
        .map(|j| (0..m.nrows()).map(|i| m[(i, j)].abs()).sum::<f64>())
        .fold(0.0, f64::max)
}
