//! ScaLAPACK's factorisations on a 2D block-cyclic random matrix, timed on their own: the peers of
//! hetla's distributed runs (`hetla cholesky --grid PxQ --compare` times pdpotrf beside hetla's
//! distributed Cholesky).
//!
//! ```sh
//! cargo build --release --features scalapack --example scalapack
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack potrf 8192 256 1x2 3
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack getrf 8192 256 1x2 3
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack geqrf 200000x256 256 2x1 3
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/scalapack gels 20000x1000 256 2x1 3
//! ```
//! Arguments: the routine (`potrf`: pdpotrf on an SPD matrix; `getrf`: pdgetrf on a general one,
//! then pdgetrs on 10 right-hand sides; `geqrf`: pdgeqrf on a general m x n one; `gels`: pdgels
//! with 10 right-hand sides), n (or m x n for the QR routines), tile (block size), grid, runs. Rank
//! 0 prints one JSON line: the best and median seconds (the slowest rank's), Gflop/s of the best
//! (n^3 / 3 for pdpotrf, 2 n^3 / 3 for pdgetrf, 2 m n^2 - 2 n^3 / 3 for pdgeqrf, and for pdgels
//! that plus Q^H B and the triangular solve) and, for matrices of at most 2^24 entries (gathered on
//! rank 0), the scaled residual of the Cholesky factor, the solve's backward error ||B - A X||_1 /
//! (||A||_1 ||X||_1 n eps), R's ratio ||A^H A - R^H R||_1 / (||A||_1^2 m eps), or the least-squares
//! solutions' ratio ||A^H (B - A X)||_1 / (||A||_1 ||B||_1 m eps) (LAPACK's dqrt17).

use faer::Mat;
use hetla::distributed::scalapack::{gels, geqrf, getrf, getrs, potrf};
use hetla::distributed::{DistributedMatrix, DistributedRhs, ProcessGrid};

fn main() -> hetla::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let routine = arg(0, "potrf");
    let shape = arg(1, "4096");
    let (m, n): (usize, usize) = match shape.split_once('x') {
        Some((m, n)) => (m.parse().expect("m"), n.parse().expect("n")),
        None => (shape.parse().expect("n"), shape.parse().expect("n")),
    };
    let tile: usize = arg(2, "256").parse().expect("tile");
    let grid: ProcessGrid = arg(3, "1x2").parse()?;
    let runs: usize = arg(4, "3").parse().expect("runs");
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let small = m * n <= 1 << 24;
    let (mf, nf) = (m as f64, n as f64);
    let qr_flops = 2.0 * mf * nf * nf - 2.0 * nf.powi(3) / 3.0;
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
        "geqrf" => {
            let a = DistributedMatrix::<f64>::random(&world, (m, n), tile, grid, 1)?;
            let qr = geqrf(&world, &a, runs)?;
            let gathered = if small {
                (a.gather(&world)?, qr.factor.gather(&world)?)
            } else {
                (None, None)
            };
            let ratio = match gathered {
                (Some(a), Some(f)) => {
                    let r = Mat::from_fn(n, n, |i, j| if i <= j { f[(i, j)] } else { 0.0 });
                    let gram = a.transpose() * &a - r.transpose() * &r;
                    Some(norm1(&gram) / (norm1(&a).powi(2) * mf * f64::EPSILON))
                }
                _ => None,
            };
            (qr.seconds, qr_flops, ("r_ratio", ratio), String::new())
        }
        "gels" => {
            let nrhs = 10;
            let a = DistributedMatrix::<f64>::random(&world, (m, n), tile, grid, 1)?;
            let b = DistributedRhs::<f64>::random(&world, (m, nrhs), tile, grid, 2)?;
            let solved = gels(&world, &a, &b, runs)?;
            let gathered = if small {
                (
                    a.gather(&world)?,
                    b.gather(&world)?,
                    solved.x.gather(&world)?,
                )
            } else {
                (None, None, None)
            };
            let ratio = match gathered {
                (Some(a), Some(b), Some(x)) => {
                    let normal = a.transpose() * (&b - &a * &x);
                    Some(norm1(&normal) / (norm1(&a) * norm1(&b) * mf * f64::EPSILON))
                }
                _ => None,
            };
            let k = nrhs as f64;
            let flops = qr_flops + (4.0 * mf * nf - 2.0 * nf * nf) * k + nf * nf * k;
            (
                solved.seconds,
                flops,
                ("dqrt17_ratio", ratio),
                String::new(),
            )
        }
        other => panic!("unknown routine {other}: potrf, getrf, geqrf or gels"),
    };
    if mpi::traits::Communicator::rank(&world) == 0 {
        let mut s = seconds;
        s.sort_by(f64::total_cmp);
        println!(
            "{{\"peer\": \"ScaLAPACK pd{routine}\", \"m\": {m}, \"n\": {n}, \"tile\": {tile}, \"grid\": \"{grid}\", \"runs\": {runs}, \"best_seconds\": {:.4}, \"median_seconds\": {:.4}, \"gflops\": {:.2}, \"{}\": {}{extra}}}",
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
