//! ScaLAPACK's pdpotrf on a 2D block-cyclic random SPD matrix, timed on its own
//! (`hetla cholesky --grid PxQ --compare` times it beside hetla's distributed factorisation).
//!
//! ```sh
//! cargo build --release --features scalapack --example pdpotrf
//! OPENBLAS_NUM_THREADS=1 mpirun -np 2 target/release/examples/pdpotrf 8192 256 1x2 3
//! ```
//! Arguments: n, tile (block size), grid, runs. Rank 0 prints one JSON line: the best and median
//! seconds (the slowest rank's), Gflop/s of the best, and the scaled residual for n <= 4096
//! (gathered on rank 0).

use hetla::distributed::{DistributedMatrix, ProcessGrid};

fn main() -> hetla::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let n: usize = arg(0, "4096").parse().expect("n");
    let tile: usize = arg(1, "256").parse().expect("tile");
    let grid: ProcessGrid = arg(2, "1x2").parse()?;
    let runs: usize = arg(3, "3").parse().expect("runs");
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let a = DistributedMatrix::<f64>::random_spd(&world, n, tile, grid, 1)?;
    let done = hetla::distributed::scalapack::potrf(&world, &a, runs)?;
    let residual = if n <= 4096 {
        let (a, l) = (a.gather(&world)?, done.factor.gather(&world)?);
        a.zip(l)
            .map(|(a, l)| hetla::check::cholesky_residual(a.as_ref(), l.as_ref(), faer::Par::Seq))
    } else {
        None
    };
    if mpi::traits::Communicator::rank(&world) == 0 {
        let mut s = done.seconds.clone();
        s.sort_by(f64::total_cmp);
        let flops = (n as f64).powi(3) / 3.0;
        println!(
            "{{\"peer\": \"ScaLAPACK pdpotrf\", \"n\": {n}, \"tile\": {tile}, \"grid\": \"{grid}\", \"runs\": {runs}, \"best_seconds\": {:.4}, \"median_seconds\": {:.4}, \"gflops\": {:.2}, \"residual\": {}}}",
            s[0],
            s[s.len() / 2],
            flops / s[0] / 1e9,
            residual.map_or("null".into(), |r| format!("{r:.3e}"))
        );
    }
    Ok(())
}
