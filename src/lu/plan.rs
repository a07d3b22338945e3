//! LU's plans: in block columns on one node ([`factor`]), on tiles spread over process rows
//! ([`tiles`]).

use hetla_factorizations::{
    EXCHANGE, FACTOR, PIVOTS, Tiling, lu, lu_shape, lu_step, lu_tiles, lu_tiles_shapes,
};
use hetla_kernels::{Op, Precision};
use hetla_runtime::ResourceKind;

use crate::Result;
use crate::plan::{Algorithm, Layout, Plan, cpu_only_ops};

/// The LU factorisation with partial pivoting of an `n x n` matrix in block columns of `tile`
/// columns ([`lu`]), in `precision`; 2 n^3 / 3 flops. Each task's kernel key has the rows it works
/// on (the panel's rows down, [`lu_shape`]), not its block column's. Every kernel runs on GPUs too,
/// with the panel's interchanges as the arguments of the updates and interchanges; the panels run
/// on the CPU clusters where the platform has them (MAGMA's hybrid), on the GPUs where it has none
/// (cuSOLVER's ?getrf on the panel, its interchanges copied back to the host).
pub(crate) fn factor(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    // A panel, then an update or an interchange task per other block column: t^2 tasks.
    let t = n.div_ceil(tile) as u128;
    crate::limits::check_graph(
        &format!("the LU graph of n = {n} in block columns of {tile}"),
        t.saturating_mul(t),
        0,
    )?;
    let tiling = Tiling::square(n, tile)?;
    let graph = lu(&tiling)?;
    let nf = n as f64;
    let flops = 2.0 * nf * nf * nf / 3.0;
    let layouts = vec![(FACTOR, Layout::Columns(tiling))];
    let mut plan = Plan::assemble(Algorithm::Lu { n }, precision, tile, layouts, graph, flops);
    plan.set_keys(|task| {
        task.accesses
            .iter()
            .map(|a| lu_shape(&tiling, lu_step(task), a.tile.col))
            .collect()
    });
    plan.schedule.restrictions = cpu_only_ops();
    plan.schedule.preferences = vec![(Op::LuPanel, vec![ResourceKind::Cpu])];
    Ok(plan)
}

/// The LU factorisation with partial pivoting of an `n x n` matrix on tiles of `tile` whose tile
/// rows are spread over `process_rows` process rows ([`lu_tiles`]: the panel gathered where its
/// diagonal tile lives, the interchanges between process rows through exchange tiles), in
/// `precision`; 2 n^3 / 3 flops. Each task's kernel key has the shapes of its work
/// ([`lu_tiles_shapes`]). Its kernels run on CPU clusters only.
pub(crate) fn tiles(
    n: usize,
    tile: usize,
    process_rows: usize,
    precision: Precision,
) -> Result<Plan> {
    // t^3 / 3 updates, and as many accesses of 32 bytes (the interchanges list their rows).
    let t = n.div_ceil(tile) as u128;
    let p = process_rows.max(1);
    crate::limits::check_graph(
        &format!("the tiled LU graph of n = {n} in tiles of {tile}"),
        t.saturating_mul(t).saturating_mul(t) / 3 + t.saturating_mul(t) * (2 * p as u128 + 1),
        t.saturating_mul(t).saturating_mul(t).saturating_mul(32),
    )?;
    let tiling = Tiling::square(n, tile)?;
    let graph = lu_tiles(&tiling, p)?;
    let nf = n as f64;
    let flops = 2.0 * nf * nf * nf / 3.0;
    let layouts = vec![
        (FACTOR, Layout::Tiled(tiling)),
        (PIVOTS, Layout::Pivots(tiling)),
        (EXCHANGE, Layout::Tiled(Tiling::new(p * tile, n, tile)?)),
    ];
    let algorithm = Algorithm::LuTiles { n, process_rows: p };
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.set_keys(|task| lu_tiles_shapes(&tiling, task));
    plan.schedule.restrictions = cpu_only_ops();
    // Its solves and products run with the interchanges, on CPU clusters too, and so do its
    // interchange tasks (its work gives a device's kernels no interchanges).
    for op in [
        Op::SolveUnitLower,
        Op::Update,
        Op::LuPanel,
        Op::LuUpdate,
        Op::LuSwap,
    ] {
        plan.schedule
            .restrictions
            .push((op, vec![ResourceKind::Cpu]));
    }
    Ok(plan)
}
