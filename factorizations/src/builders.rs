//! Builders of the task graphs of the tiled Cholesky factorisation and of the solve.

use hetla_kernels::Op;

use crate::{Access, MatrixId, Mode, TaskGraph, TileRef, Tiling, TilingError};

/// The matrix factored in place: A, then its Cholesky factor L (lower tiles only).
pub const FACTOR: MatrixId = MatrixId(0);
/// The right-hand sides of a solve, overwritten by the solution.
pub const RHS: MatrixId = MatrixId(1);

/// Adds one task whose accesses are `reads` then the written tile, with flops computed
/// from the tile shapes.
fn push(g: &mut TaskGraph, op: Op, reads: &[(TileRef, &Tiling)], write: (TileRef, &Tiling)) {
    let shape = |(t, tiling): (TileRef, &Tiling)| tiling.tile_shape(t.row, t.col);
    let mut shapes: Vec<_> = reads.iter().map(|&x| shape(x)).collect();
    shapes.push(shape(write));
    let mut accesses: Vec<_> = reads
        .iter()
        .map(|&(tile, _)| Access {
            tile,
            mode: Mode::Read,
        })
        .collect();
    accesses.push(Access {
        tile: write.0,
        mode: Mode::ReadWrite,
    });
    g.add_task(op, accesses, op.flops(&shapes));
}

/// The right-looking tiled Cholesky factorisation of the lower triangle of a square
/// matrix: for each k, POTRF(A_kk), TRSM(A_kk, A_ik) for i > k, then SYRK(A_ik, A_ii) and
/// GEMM(A_ik, A_jk, A_ij) for k < j < i. Only lower tiles are touched.
pub fn cholesky(a: &Tiling) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.row_tiles();
    let tile = |i, j| (TileRef::new(FACTOR, i, j), a);
    let mut g = TaskGraph::new();
    for k in 0..nt {
        push(&mut g, Op::Potrf, &[], tile(k, k));
        for i in k + 1..nt {
            push(&mut g, Op::Trsm, &[tile(k, k)], tile(i, k));
        }
        for i in k + 1..nt {
            push(&mut g, Op::Syrk, &[tile(i, k)], tile(i, i));
            for j in k + 1..i {
                push(&mut g, Op::GemmNt, &[tile(i, k), tile(j, k)], tile(i, j));
            }
        }
    }
    Ok(g)
}

fn check_rhs(l: &Tiling, b: &Tiling) -> Result<(), TilingError> {
    l.ensure_square()?;
    if b.rows() != l.rows() || b.tile() != l.tile() {
        return Err(TilingError::Mismatch {
            n: l.rows(),
            tile: l.tile(),
            rhs_rows: b.rows(),
            rhs_tile: b.tile(),
        });
    }
    Ok(())
}

/// Adds to `g` the forward substitution L Y = B, overwriting the right-hand sides B (tiled
/// by `b`, same tile size as the factor `l`) with Y.
pub fn forward_substitution(g: &mut TaskGraph, l: &Tiling, b: &Tiling) -> Result<(), TilingError> {
    check_rhs(l, b)?;
    let lt = |i, j| (TileRef::new(FACTOR, i, j), l);
    let bt = |i, c| (TileRef::new(RHS, i, c), b);
    for k in 0..l.row_tiles() {
        for c in 0..b.col_tiles() {
            push(g, Op::SolveLower, &[lt(k, k)], bt(k, c));
            for i in k + 1..l.row_tiles() {
                push(g, Op::Update, &[lt(i, k), bt(k, c)], bt(i, c));
            }
        }
    }
    Ok(())
}

/// Adds to `g` the backward substitution L^T X = Y, overwriting Y (tiled by `b`) with X.
pub fn backward_substitution(g: &mut TaskGraph, l: &Tiling, b: &Tiling) -> Result<(), TilingError> {
    check_rhs(l, b)?;
    let lt = |i, j| (TileRef::new(FACTOR, i, j), l);
    let bt = |i, c| (TileRef::new(RHS, i, c), b);
    for k in (0..l.row_tiles()).rev() {
        for c in 0..b.col_tiles() {
            push(g, Op::SolveLowerTrans, &[lt(k, k)], bt(k, c));
            for i in 0..k {
                push(g, Op::UpdateTrans, &[lt(k, i), bt(k, c)], bt(i, c));
            }
        }
    }
    Ok(())
}
