//! LDL^T's plan: Aasen's factorisation in blocks.

use hetla_factorizations::{FACTOR, Tiling, ldlt, ldlt_columns, ldlt_columns_shapes, ldlt_shapes};
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
    // So are its interchanges, which write several tiles (the block-column graph's run on GPUs).
    for op in [Op::GemmNt, Op::LdltSwap] {
        plan.schedule
            .restrictions
            .push((op, vec![ResourceKind::Cpu]));
    }
    Ok(plan)
}

/// Aasen's factorisation of an `n x n` Hermitian matrix in block columns of `tile`
/// ([`ldlt_columns`], what a run beside GPUs executes), in `precision`; reported against n^3 / 3
/// flops as [`factor`]'s. Its products and interchanges run on GPUs too (on the rows their
/// arguments name); the gather, T's diagonal blocks, the panels and the band steps on CPU clusters.
pub(crate) fn columns(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    // About t^2 tasks: H's terms, the update's terms and the interchanges of each step.
    let t = n.div_ceil(tile) as u128;
    crate::limits::check_graph(
        &format!("the LDL^T graph of n = {n} in block columns of {tile}"),
        t.saturating_mul(t).saturating_mul(2),
        0,
    )?;
    let tiling = Tiling::square(n, tile)?;
    let graph = ldlt_columns(&tiling)?;
    let nf = n as f64;
    let layouts = vec![(FACTOR, Layout::Columns(tiling))];
    let algorithm = Algorithm::LdltColumns { n };
    let mut plan = Plan::assemble(
        algorithm,
        precision,
        tile,
        layouts,
        graph,
        nf * nf * nf / 3.0,
    );
    plan.set_keys(|task| ldlt_columns_shapes(&tiling, task));
    plan.schedule.restrictions = cpu_only_ops();
    // On the GPUs where the platform has them: a cluster's product or interchange would move two
    // block columns to the host and back for a few of a block column's flops.
    let gpus = |op| (op, vec![ResourceKind::Gpu]);
    plan.schedule.preferences = [Op::LdltColumnUpdate, Op::LdltColumnHessenberg, Op::LdltSwap]
        .map(gpus)
        .to_vec();
    Ok(plan)
}
