//! QR's plans: tiled with a reduction tree ([`tiled`]), and LAPACK's blocked QR in block columns
//! ([`columns`]), what a distributed QR on one process row runs.

use hetla_factorizations::{
    FACTOR, QrTree, RHS, Tiling, qr, qr_apply_rhs, qr_columns, qr_columns_shape, qr_with_rhs,
};
use hetla_kernels::{Op, Precision};
use hetla_runtime::ResourceKind;

use crate::plan::{Algorithm, Layout, Plan, cpu_only_ops};
use crate::{Error, Result};

/// The tiled Householder QR of an `m x n` matrix in tiles of `tile` with `rhs` columns of B (m
/// rows, matrix [`RHS`]) overwritten by Q^H B in the same graph (`factor`: [`Algorithm::Qr`]), or
/// Q^H B alone with a matrix already factored (not `factor`: [`Algorithm::QrApply`]); each tile
/// column's tiles eliminated by `tree` ([`QrTree::Auto`]: binary only for a tall matrix of one tile
/// column, see [`QrTree::for_shape`]). On CPU clusters only (its work gives a device's kernels no
/// T's; [`columns`] is QR on GPUs).
pub(crate) fn tiled(
    m: usize,
    n: usize,
    rhs: usize,
    tile: usize,
    tree: QrTree,
    precision: Precision,
    factor: bool,
) -> Result<Plan> {
    let (mt, nt, bt) = (
        m.div_ceil(tile) as u128,
        n.div_ceil(tile) as u128,
        rhs.div_ceil(tile) as u128,
    );
    // Step k has about 2 (mt - k)(nt - k + bt) tasks.
    crate::limits::check_graph(
        &format!("the QR graph of {m} x {n} in tiles of {tile}"),
        (2 * mt).saturating_mul(nt + bt).saturating_mul(mt.min(nt)),
        0,
    )?;
    let tiling = Tiling::new(m, n, tile)?;
    let tree = tree.for_shape(tiling.row_tiles(), tiling.col_tiles(), 2);
    let b = match rhs {
        0 => None,
        _ => Some(Tiling::new(m, rhs, tile)?),
    };
    let graph = match (&b, factor) {
        (None, _) => qr(&tiling, tree)?,
        (Some(b), true) => qr_with_rhs(&tiling, b, tree)?,
        (Some(b), false) => qr_apply_rhs(&tiling, b, tree)?,
    };
    let (mf, nf, kf) = (m as f64, n as f64, rhs as f64);
    let (long, short) = if m >= n { (mf, nf) } else { (nf, mf) };
    let factorisation = 2.0 * long * short * short - 2.0 * short * short * short / 3.0;
    let application = (4.0 * mf * short - 2.0 * short * short) * kf;
    let (algorithm, flops) = if factor {
        (
            Algorithm::Qr { m, n, rhs, tree },
            factorisation + application,
        )
    } else {
        (Algorithm::QrApply { m, n, rhs, tree }, application)
    };
    let mut layouts = vec![(FACTOR, Layout::Tiled(tiling))];
    if let Some(b) = b {
        layouts.push((RHS, Layout::Tiled(b)));
    }
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.schedule.restrictions = cpu_only_ops();
    // Its factorisations and applications of tiles too: its work gives a device's kernels no slot
    // and no T's (only the block columns' does).
    for op in [Op::Geqrt, Op::Unmqr] {
        plan.schedule
            .restrictions
            .push((op, vec![ResourceKind::Cpu]));
    }
    Ok(plan)
}

/// LAPACK's blocked QR of an `m x n` matrix (m >= n) in block columns of `tile` columns
/// ([`qr_columns`]), each panel factored in inner blocks of `inner` columns (its T has `inner`
/// rows, or the panel's width if less), in `precision`, with `rhs` columns of right-hand sides B (m
/// rows) overwritten by Q^H B in the same graph; 2 m n^2 - 2 n^3 / 3 flops (plus (4 m n - 2 n^2)
/// rhs). Each task's kernel key has the rows it works on (the panel's rows down,
/// [`qr_columns_shape`]). The applications of the panels' reflectors run on GPUs too, with the
/// panel's T's as their kernels' arguments; the panels on the CPU clusters where the platform has
/// them (MAGMA's hybrid), on the GPUs where it has none (cuSOLVER's ?geqrf on the panel, the T's
/// made on the host from what it copies back, [`hetla_kernels::reflector_ts`]).
pub(crate) fn columns(
    (m, n, rhs): (usize, usize, usize),
    (tile, inner): (usize, usize),
    precision: Precision,
) -> Result<Plan> {
    if inner == 0 {
        return Err(Error::InvalidOption {
            option: "inner block",
            reason: "0 columns: the block reflectors need at least one".into(),
        });
    }
    let (t, bt) = (n.div_ceil(tile) as u128, rhs.div_ceil(tile) as u128);
    crate::limits::check_graph(
        &format!("the QR graph of {m} x {n} in block columns of {tile}"),
        t.saturating_mul(t + bt),
        0,
    )?;
    let tiling = Tiling::new(m, n, tile)?;
    let b = match rhs {
        0 => None,
        _ => Some(Tiling::new(m, rhs, tile)?),
    };
    let graph = qr_columns(&tiling, b.as_ref())?;
    let (mf, nf, kf) = (m as f64, n as f64, rhs as f64);
    let flops =
        2.0 * mf * nf * nf - 2.0 * nf * nf * nf / 3.0 + (4.0 * mf * nf - 2.0 * nf * nf) * kf;
    let mut layouts = vec![(FACTOR, Layout::Columns(tiling))];
    layouts.extend(b.map(|b| (RHS, Layout::Columns(b))));
    let algorithm = Algorithm::QrColumns { m, n, rhs, inner };
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.set_keys(|task| {
        let step = task.accesses[0].tile.col;
        let width = |a: &hetla_factorizations::Access| match (a.tile.matrix, &b) {
            (RHS, Some(b)) => b.tile_cols(a.tile.col),
            _ => tiling.tile_cols(a.tile.col),
        };
        task.accesses
            .iter()
            .map(|a| qr_columns_shape(&tiling, step, width(a)))
            .collect()
    });
    plan.schedule.restrictions = cpu_only_ops();
    plan.schedule.preferences = vec![(Op::Geqrt, vec![ResourceKind::Cpu])];
    Ok(plan)
}
