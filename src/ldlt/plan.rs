//! LDL^T's plan: Aasen's factorisation in blocks.

use hetla_factorizations::{FACTOR, Tiling, ldlt, ldlt_shapes};
use hetla_kernels::{Op, Precision};
use hetla_runtime::ResourceKind;

use crate::Result;
use crate::plan::{Algorithm, Layout, Plan, cpu_only_ops};

/// Aasen's symmetric indefinite factorisation of an `n x n` Hermitian matrix in blocks of `tile`
/// ([`ldlt`]), in `precision`; reported against n^3 / 3 flops (its products' count, as Cholesky's).
/// Each task's kernel key has the shapes its kernel works on ([`ldlt_shapes`]). Its kernels have no
/// GPU version: runs keep them on CPU clusters.
pub(crate) fn factor(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    // About 3 t^2 / 2 tasks, and t^3 / 3 accesses of 32 bytes beside them (an update lists the
    // row and the column of tiles it reads).
    let t = n.div_ceil(tile) as u128;
    crate::limits::check_graph(
        &format!("the LDL^T graph of n = {n} in blocks of {tile}"),
        t.saturating_mul(t).saturating_mul(3) / 2,
        t.saturating_mul(t).saturating_mul(t).saturating_mul(32) / 3,
    )?;
    let tiling = Tiling::square(n, tile)?;
    let graph = ldlt(&tiling)?;
    let nf = n as f64;
    let layouts = vec![(FACTOR, Layout::Tiled(tiling))];
    let flops = nf * nf * nf / 3.0;
    let algorithm = Algorithm::Ldlt { n };
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.set_keys(|task| ldlt_shapes(&tiling, task));
    // Its products of two tiles (the end of each update, `Op::GemmNt`) run beside the family's
    // other tasks, on CPU clusters too: their tiles live where the run's work reads them.
    plan.schedule.restrictions = cpu_only_ops();
    plan.schedule
        .restrictions
        .push((Op::GemmNt, vec![ResourceKind::Cpu]));
    Ok(plan)
}
