//! Builders of the task graphs of the tiled Cholesky factorisation and of the solve, on one node
//! and over a process grid.

use hetla_kernels::{Op, Shape};

use crate::{Access, MatrixId, Mode, ProcessGrid, TaskGraph, TileRef, Tiling, TilingError};

/// The matrix factored in place: A, then its Cholesky factor L (lower tiles only).
pub const FACTOR: MatrixId = MatrixId(0);
/// The right-hand sides of a solve, overwritten by the solution.
pub const RHS: MatrixId = MatrixId(1);
/// The partial sums of a distributed substitution ([`distributed_substitution`]): tiles that start
/// at zero and collect the updates of one rank, to be added where they belong.
pub const SUMS: MatrixId = MatrixId(2);

/// Adds one task whose accesses are `reads` then the written tile, with flops computed from the
/// tile shapes.
fn push(g: &mut TaskGraph, op: Op, reads: &[(TileRef, &Tiling)], write: (TileRef, &Tiling)) {
    let shaped = |(t, tiling): (TileRef, &Tiling)| (t, tiling.tile_shape(t.row, t.col));
    let reads: Vec<_> = reads.iter().map(|&x| shaped(x)).collect();
    push_shaped(g, op, &reads, shaped(write));
}

/// [`push`] with the operands' shapes given.
fn push_shaped(g: &mut TaskGraph, op: Op, reads: &[(TileRef, Shape)], write: (TileRef, Shape)) {
    let mut shapes: Vec<_> = reads.iter().map(|&(_, s)| s).collect();
    shapes.push(write.1);
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

/// The right-looking tiled Cholesky factorisation of the lower triangle of a square matrix: for
/// each k, POTRF(A_kk), TRSM(A_kk, A_ik) for i > k, then SYRK(A_ik, A_ii) and GEMM(A_ik, A_jk,
/// A_ij) for k < j < i. Only lower tiles are touched.
pub fn cholesky(a: &Tiling) -> Result<TaskGraph, TilingError> {
    cholesky_inverting_panels(a, usize::MAX)
}

/// [`cholesky`] with the panels of at least `min_solves` solves through the inverse of their
/// diagonal tile: an [`Op::PanelInverse`] task after each such POTRF, which the panel's TRSMs
/// follow (it writes the diagonal tile, as far as the graph knows: the inverse lies beside it).
/// MAGMA's shape of the factorisation; `usize::MAX` gives the plain graph.
pub fn cholesky_inverting_panels(a: &Tiling, min_solves: usize) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.row_tiles();
    let tile = |i, j| (TileRef::new(FACTOR, i, j), a);
    let mut g = TaskGraph::new();
    for k in 0..nt {
        push(&mut g, Op::Potrf, &[], tile(k, k));
        if nt - 1 - k >= min_solves {
            push(&mut g, Op::PanelInverse, &[], tile(k, k));
        }
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

/// The inverse of a lower triangular matrix L of `a`'s tiling, in place (LAPACK's ?trtri with uplo
/// = 'L', diag = 'N'; the first half of [`cholesky_inverse`]): for each k
///
/// - `SolveRight(L_kk, L_mk)`: L_mk <- -L_mk L_kk^-1 for m > k;
/// - `MatMul(L_mk, L_kn, L_mn)`: L_mn <- L_mn + L_mk L_kn for m > k > n;
/// - `SolveLower(L_kk, L_kn)`: L_kn <- L_kk^-1 L_kn for n < k;
/// - `Trtri(L_kk)`.
///
/// n^3 / 3 flops; only lower tiles are touched.
pub fn triangular_inverse(a: &Tiling) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.row_tiles();
    let tile = |i, j| (TileRef::new(FACTOR, i, j), a);
    let mut g = TaskGraph::new();
    let accumulate = Op::MatMul(hetla_kernels::MatMul::ACCUMULATE);
    for k in 0..nt {
        for m in k + 1..nt {
            push(&mut g, Op::SolveRight, &[tile(k, k)], tile(m, k));
        }
        for m in k + 1..nt {
            for n in 0..k {
                push(&mut g, accumulate, &[tile(m, k), tile(k, n)], tile(m, n));
            }
        }
        for n in 0..k {
            push(&mut g, Op::SolveLower, &[tile(k, k)], tile(k, n));
        }
        push(&mut g, Op::Trtri, &[], tile(k, k));
    }
    Ok(g)
}

/// The inverse A^-1 = L^-H L^-1 of a Hermitian positive definite matrix from its Cholesky factor L
/// (lower tiles of [`FACTOR`], overwritten by the lower triangle of A^-1), as LAPACK's ?potri tiled
/// as Chameleon's: first L <- L^-1 (TRTRI), for each k
///
/// - `SolveRight(L_kk, L_mk)`: L_mk <- -L_mk L_kk^-1 for m > k;
/// - `MatMul(L_mk, L_kn, L_mn)`: L_mn <- L_mn + L_mk L_kn for m > k > n;
/// - `SolveLower(L_kk, L_kn)`: L_kn <- L_kk^-1 L_kn for n < k;
/// - `Trtri(L_kk)`;
///
/// then L <- L^H L (LAUUM), for each k
///
/// - `SyrkAdjoint(L_kn, L_nn)`: L_nn <- L_nn + L_kn^H L_kn, and `MatMul^H(L_km, L_kn, L_mn)`: L_mn
///   <- L_mn + L_km^H L_kn for n < m < k;
/// - `TrmmAdjoint(L_kk, L_kn)`: L_kn <- L_kk^H L_kn for n < k;
/// - `Lauum(L_kk)`.
///
/// 2 n^3 / 3 flops (n^3/3 each); only lower tiles are touched.
pub fn cholesky_inverse(a: &Tiling) -> Result<TaskGraph, TilingError> {
    let mut g = triangular_inverse(a)?;
    let nt = a.row_tiles();
    let tile = |i, j| (TileRef::new(FACTOR, i, j), a);
    let adjoint_product = Op::MatMul(hetla_kernels::MatMul::new(true, false, 1.0, 1.0));
    for k in 0..nt {
        for n in 0..k {
            push(&mut g, Op::SyrkAdjoint, &[tile(k, n)], tile(n, n));
            for m in n + 1..k {
                push(
                    &mut g,
                    adjoint_product,
                    &[tile(k, m), tile(k, n)],
                    tile(m, n),
                );
            }
        }
        for n in 0..k {
            push(&mut g, Op::TrmmAdjoint, &[tile(k, k)], tile(k, n));
        }
        push(&mut g, Op::Lauum, &[], tile(k, k));
    }
    Ok(g)
}

/// The right-looking LU factorisation with partial pivoting of a square matrix (matrix [`FACTOR`],
/// overwritten by L and U) cut into column blocks of `a.tile()` columns: tile (0, j) of the graph
/// is the whole block column j, all n rows (see [`lu_shape`] for the rows each task works on). For
/// each k:
///
/// - `LuPanel(A_k)`: the panel, block column k from row k b down, factored with its row
///   interchanges;
/// - `LuUpdate(A_k, A_j)` for j > k: block column j from row k b down gets the panel's
///   interchanges, its U block (the triangular solve) and its trailing update (the product);
/// - `LuSwap(A_k, A_j)` for j < k: the panel's interchanges applied to the columns of L left of it.
///
/// Each task writes one block column, so the dependencies follow from the accesses as Cholesky's
/// do, and the interchanges a panel writes are read only by tasks that read its block column (after
/// it). The updates of block column k + 1 and its panel form the critical path (the bottom levels
/// prioritise them: the lookahead). 2 n^3 / 3 flops.
pub fn lu(a: &Tiling) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.col_tiles();
    let column = |j| TileRef::new(FACTOR, 0, j);
    let mut g = TaskGraph::new();
    let at = |k: usize, j: usize| (column(j), lu_shape(a, k, j));
    for k in 0..nt {
        push_shaped(&mut g, Op::LuPanel, &[], at(k, k));
        for j in k + 1..nt {
            push_shaped(&mut g, Op::LuUpdate, &[at(k, k)], at(k, j));
        }
        for j in 0..k {
            push_shaped(&mut g, Op::LuSwap, &[at(k, k)], at(k, j));
        }
    }
    Ok(g)
}

/// The rows of block column `column` a task of step `step` of [`lu`] works on: from row `step` b
/// down (the panel's rows), all of the column's columns. The graph's tiles are whole block columns;
/// kernel keys and flops use these shapes.
pub fn lu_shape(a: &Tiling, step: usize, column: usize) -> Shape {
    (a.rows() - a.offset(step), a.tile_cols(column))
}

/// The step of a task of [`lu`]'s graph: the block column of its panel (the first tile it
/// accesses).
pub fn lu_step(task: &crate::Task) -> usize {
    task.accesses[0].tile.col
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

/// Adds to `g` the forward substitution L Y = B, overwriting the right-hand sides B (tiled by `b`,
/// same tile size as the factor `l`) with Y.
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

/// Which substitution of a distributed solve [`distributed_substitution`] builds, with which
/// factor's tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Substitution {
    /// L Y = B, L a Cholesky factor (its tiles on and below the diagonal).
    Lower,
    /// L^H X = Y, L a Cholesky factor.
    LowerAdjoint,
    /// L Y = B, L an LU's unit lower triangle (its tiles below the diagonal and the strict lower
    /// triangles of the diagonal ones).
    UnitLower,
    /// U X = Y, U an LU's upper triangle (its tiles above the diagonal and the upper triangles of
    /// the diagonal ones).
    Upper,
}

impl Substitution {
    /// Whether it runs from the last tile row up.
    pub fn backward(self) -> bool {
        matches!(self, Substitution::LowerAdjoint | Substitution::Upper)
    }

    /// Whether the update of tile row i by tile row k reads the factor's tile (k, i) (an adjoint),
    /// not (i, k).
    fn reads_adjoint(self) -> bool {
        self == Substitution::LowerAdjoint
    }
}

/// Adds to `g` the substitution `which` for a run over `grid`, where each update runs on the rank
/// that holds the tile of the factor it reads (owner computes on the tiles of [`SUMS`]): the factor
/// never travels, only tiles of B and partial sums, each of `tile x nrhs` entries at most.
///
/// - **Forward** (`Lower`, `UnitLower`; `Upper` alike from the last tile row up): the update of
///   B_(i,c) by F_ik B_(k,c) runs with F_ik on rank (i mod P, k mod Q). It goes into B_(i,c) itself
///   when that rank holds it (k = c mod Q), else into the partial sum [`SUMS`] (i, c Q + k mod Q),
///   which lives there too. Before B_(k,c) is solved it adds the partial sums of its row
///   ([`Op::Add`]).
/// - **Backward with the adjoint** (`LowerAdjoint`): the update of B_(i,c) by L_ki^H B_(k,c) runs
///   with L_ki on rank (k mod P, i mod Q), into B_(i,c) or into the partial sum (c P + k mod P, i).
///
/// A partial sum tile is `rows of tile row i x columns of tile column c` of B ([`sum_shape`]);
/// every rank runs one substitution as one run, each tile of B and each partial sum sent once, when
/// final.
pub fn distributed_substitution(
    g: &mut TaskGraph,
    l: &Tiling,
    b: &Tiling,
    grid: &ProcessGrid,
    which: Substitution,
) -> Result<(), TilingError> {
    check_rhs(l, b)?;
    let (p, q) = (grid.rows(), grid.cols());
    let shape = |t: TileRef| match t.matrix {
        SUMS => sum_shape(t, l, b, grid, which),
        FACTOR => l.tile_shape(t.row, t.col),
        _ => b.tile_shape(t.row, t.col),
    };
    let at = |t: TileRef| (t, shape(t));
    let lt = |i, j| TileRef::new(FACTOR, i, j);
    let bt = |i, c| TileRef::new(RHS, i, c);
    let nt = l.row_tiles();
    for c in 0..b.col_tiles() {
        // The partial sums of each tile row written so far.
        let mut sums: Vec<Vec<TileRef>> = vec![Vec::new(); nt];
        let order: Box<dyn Iterator<Item = usize>> = if which.backward() {
            Box::new((0..nt).rev())
        } else {
            Box::new(0..nt)
        };
        for k in order {
            for sum in std::mem::take(&mut sums[k]) {
                push_shaped(g, Op::Add, &[at(sum)], at(bt(k, c)));
            }
            let solve = match which {
                Substitution::Lower => Op::SolveLower,
                Substitution::LowerAdjoint => Op::SolveLowerTrans,
                Substitution::UnitLower => Op::SolveUnitLower,
                Substitution::Upper => Op::SolveUpper,
            };
            push_shaped(g, solve, &[at(lt(k, k))], at(bt(k, c)));
            let rows: Box<dyn Iterator<Item = usize>> = if which.backward() {
                Box::new(0..k)
            } else {
                Box::new(k + 1..nt)
            };
            for i in rows {
                let (factor, op) = if which.reads_adjoint() {
                    (lt(k, i), Op::UpdateTrans)
                } else {
                    (lt(i, k), Op::Update)
                };
                let target = bt(i, c);
                let into = if grid.owner(factor) == grid.owner(target) {
                    target
                } else if which.reads_adjoint() {
                    TileRef::new(SUMS, c * p + k % p, i)
                } else {
                    TileRef::new(SUMS, i, c * q + k % q)
                };
                if into != target && !sums[i].contains(&into) {
                    sums[i].push(into);
                }
                push_shaped(g, op, &[at(factor), at(bt(k, c))], at(into));
            }
        }
    }
    Ok(())
}

/// The shape of the partial sum `tile` of [`distributed_substitution`]: the rows of the tile row of
/// B it is added to, and the columns of its tile column.
pub fn sum_shape(
    tile: TileRef,
    l: &Tiling,
    b: &Tiling,
    grid: &ProcessGrid,
    which: Substitution,
) -> Shape {
    let (row, col) = if which.reads_adjoint() {
        (tile.col, tile.row / grid.rows())
    } else {
        (tile.row, tile.col / grid.cols())
    };
    (l.tile_rows(row), b.tile_cols(col))
}
