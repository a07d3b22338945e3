//! The triangular inverse's plan.

use hetla_factorizations::{FACTOR, Tiling, triangular_inverse};
use hetla_kernels::Precision;

use crate::Result;
use crate::plan::{Algorithm, Layout, Plan, cpu_only_ops};

/// The inverse of a lower triangular matrix of order `n` in tiles of `tile`
/// ([`triangular_inverse`]), in `precision`; n^3 / 3 flops. Its operations without a GPU kernel
/// stay on CPU clusters.
pub(crate) fn inverse(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    // As many tasks as Cholesky's graph, about.
    crate::limits::check_cholesky(n, tile, 0)?;
    let tiling = Tiling::square(n, tile)?;
    let graph = triangular_inverse(&tiling)?;
    let flops = (n as f64).powi(3) / 3.0;
    let layouts = vec![(FACTOR, Layout::Tiled(tiling))];
    let algorithm = Algorithm::TriangularInverse { n };
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.schedule.restrictions = cpu_only_ops();
    Ok(plan)
}
