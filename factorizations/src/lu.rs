//! LU with partial pivoting on b x b tiles whose tile rows are spread over `P` process rows: the
//! graph a distributed LU runs on a P x Q grid with P > 1 ([`lu_tiles`]). (The one-node LU and the
//! 1 x Q grids keep the block-column graph, [`crate::lu`].)
//!
//! A column's pivot search needs every row of the panel, and an interchange moves rows between tile
//! rows that may live on different process rows. Both are written as tasks on tiles so that the
//! distributed engine (owner computes, each version of a tile sent once to each rank that reads it)
//! carries them with messages of a fixed size, known before the run:
//!
//! - **The panel** of step k is one task ([`Op::LuPanel`]) that reads and writes every tile of
//!   block column k from the diagonal down, with the diagonal tile last, so it runs where that tile
//!   lives: the other process rows' tiles travel there, are factored with partial pivoting as one
//!   panel, and travel on as L to the ranks that update their rows (their owners among them). It
//!   also writes the step's interchanges into a tile of their own ([`PIVOTS`], tile (k, k): one
//!   column of `w` global row numbers), which every task of the step that moves rows reads.
//! - **The interchanges** of step k in another block column j (right of k, and left of it, as
//!   LAPACK leaves L), all [`Op::LuSwap`] tasks after the pivots:
//!   1. for each process row p but the top tile's: *out* — p's tiles of column j below row k
//!      (all on one rank) write the rows the pivots take up into an exchange tile ([`EXCHANGE`],
//!      tile (p, j): `b` rows, row t the row that goes to the top's row t, others left as they
//!      are);
//!   2. for each such p: *in* — the top tile (k, j) as it was (read before it changes) gives p's
//!      tiles the top rows the interchanges send down;
//!   3. *top* — the top tile takes its new rows from itself, from its own process row's tiles
//!      below it (which it also updates) and from the exchange tiles.
//!
//!   So two tiles travel per other process row and column at each step, whatever the pivots
//!   (ScaLAPACK's pdlaswp sends the rows that move, at most as many).
//! - **The updates**: U's block row by the unit lower triangle (`SolveUnitLower` on (k, j)), then
//!   each tile below by the product of its L tile and U's tile (`Update`), where it lives.
//!
//! The role of an [`Op::LuSwap`] task follows from its accesses ([`LuSwapRole::of`]).

use hetla_kernels::Shape;

use crate::{Access, MatrixId, Mode, Op, Task, TaskGraph, TileRef, Tiling, TilingError};

/// The interchanges of each step of [`lu_tiles`]: tile (k, k) is a column of the step's `w` global
/// row numbers (row k b + t was swapped with row `ipiv[t]`, in order), as whole numbers in the
/// matrix's scalar type.
pub const PIVOTS: MatrixId = MatrixId(3);
/// The exchange tiles of [`lu_tiles`]'s interchanges: tile (p, j), `b` x (block column j's width),
/// carries the rows of process row p that an interchange takes up to the top tile of column j.
pub const EXCHANGE: MatrixId = MatrixId(4);

/// What an [`Op::LuSwap`] task of [`lu_tiles`] does (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LuSwapRole {
    /// Writes the exchange tile (its last access) from its process row's tiles.
    Out,
    /// Puts the rows the old top tile (its second access) sends down into its tiles.
    In,
    /// Builds the top tile (its last access) from itself, its process row's tiles and the exchange
    /// tiles.
    Top,
}

impl LuSwapRole {
    /// The role of `task`, an [`Op::LuSwap`] of [`lu_tiles`] (its first access is the step's
    /// pivots).
    pub fn of(task: &Task) -> Self {
        let step = task.accesses[0].tile.row;
        match task.accesses.last() {
            Some(a) if a.tile.matrix == EXCHANGE => LuSwapRole::Out,
            Some(a) if a.tile.row == step => LuSwapRole::Top,
            _ => LuSwapRole::In,
        }
    }
}

/// The tiled LU factorisation with partial pivoting of a square matrix ([`crate::FACTOR`],
/// overwritten by L and U in LAPACK's layout) whose tile rows are spread over `process_rows`
/// process rows (tile row i on process row i mod P): see the module documentation. 2 n^3 / 3 flops;
/// with one process row there are no exchange tiles.
pub fn lu_tiles(a: &Tiling, process_rows: usize) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let (nt, p_rows) = (a.col_tiles(), process_rows.max(1));
    let factor = |i, j| TileRef::new(crate::FACTOR, i, j);
    let access = |tile, mode| Access { tile, mode };
    let mut g = TaskGraph::new();
    for k in 0..nt {
        let w = a.tile_cols(k);
        let rows = a.rows() - a.offset(k);
        let pivots = access(TileRef::new(PIVOTS, k, k), Mode::Read);
        // The panel, its diagonal tile last (where it runs).
        let mut panel: Vec<Access> = (k + 1..nt)
            .map(|i| access(factor(i, k), Mode::ReadWrite))
            .collect();
        panel.push(access(pivots.tile, Mode::Write));
        panel.push(access(factor(k, k), Mode::ReadWrite));
        g.add_task(Op::LuPanel, panel, Op::LuPanel.flops(&[(rows, w)]));
        let top_row = k % p_rows;
        let below = |p: usize| (k + 1..nt).filter(move |i| i % p_rows == p);
        for j in (k + 1..nt).chain(0..k) {
            let others: Vec<usize> = (0..p_rows)
                .filter(|&p| p != top_row && below(p).next().is_some())
                .collect();
            for &p in &others {
                let mut out = vec![pivots];
                out.extend(below(p).map(|i| access(factor(i, j), Mode::Read)));
                out.push(access(TileRef::new(EXCHANGE, p, j), Mode::Write));
                g.add_task(Op::LuSwap, out, 0.0);
                let mut down = vec![pivots, access(factor(k, j), Mode::Read)];
                down.extend(below(p).map(|i| access(factor(i, j), Mode::ReadWrite)));
                g.add_task(Op::LuSwap, down, 0.0);
            }
            let mut top = vec![pivots];
            top.extend((others.iter()).map(|&p| access(TileRef::new(EXCHANGE, p, j), Mode::Read)));
            top.extend(below(top_row).map(|i| access(factor(i, j), Mode::ReadWrite)));
            top.push(access(factor(k, j), Mode::ReadWrite));
            g.add_task(Op::LuSwap, top, 0.0);
            if j < k {
                continue;
            }
            let c = a.tile_cols(j);
            let solve = [(w, w), (w, c)];
            let reads = vec![
                access(factor(k, k), Mode::Read),
                access(factor(k, j), Mode::ReadWrite),
            ];
            g.add_task(Op::SolveUnitLower, reads, Op::SolveUnitLower.flops(&solve));
            for i in k + 1..nt {
                let r = a.tile_rows(i);
                let update = [(r, w), (w, c), (r, c)];
                let accesses = vec![
                    access(factor(i, k), Mode::Read),
                    access(factor(k, j), Mode::Read),
                    access(factor(i, j), Mode::ReadWrite),
                ];
                g.add_task(Op::Update, accesses, Op::Update.flops(&update));
            }
        }
    }
    Ok(g)
}

/// The shapes a task of [`lu_tiles`] is keyed by (its kernel's work, for models): the panel's rows
/// from the diagonal down, an interchange task's `w` rows of its column, a solve's and an update's
/// tiles.
pub fn lu_tiles_shapes(a: &Tiling, task: &Task) -> Vec<Shape> {
    let shape = |t: TileRef| a.tile_shape(t.row, t.col);
    match task.op {
        Op::LuPanel => {
            let k = task.accesses[task.accesses.len() - 1].tile.col;
            vec![(a.rows() - a.offset(k), a.tile_cols(k))]
        }
        Op::LuSwap => {
            let k = task.accesses[0].tile.row;
            let w = a.tile_cols(k);
            let c = a.tile_cols(task.accesses[task.accesses.len() - 1].tile.col);
            vec![(w, w), (w, c)]
        }
        _ => task.accesses.iter().map(|x| shape(x.tile)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_interchange_task_has_one_role_and_the_flops_are_lus() {
        for (n, b, p) in [(100, 16, 2), (96, 16, 3), (64, 16, 1), (70, 16, 4)] {
            let a = Tiling::square(n, b).unwrap();
            let g = lu_tiles(&a, p).unwrap();
            let nt = a.col_tiles();
            let count = |role| {
                (g.tasks().iter())
                    .filter(|t| t.op == Op::LuSwap && LuSwapRole::of(t) == role)
                    .count()
            };
            // A top task per step and other column; out and in tasks per other process row with
            // rows below.
            assert_eq!(count(LuSwapRole::Top), nt * (nt - 1));
            let pairs: usize = (0..nt)
                .map(|k| {
                    let rows = (0..p)
                        .filter(|&q| q != k % p && (k + 1..nt).any(|i| i % p == q))
                        .count();
                    rows * (nt - 1)
                })
                .sum();
            assert_eq!(
                (count(LuSwapRole::Out), count(LuSwapRole::In)),
                (pairs, pairs)
            );
            // The block-column LU's count, kernel for kernel.
            let total = |g: &TaskGraph| g.tasks().iter().map(|t| t.flops).sum::<f64>();
            let (flops, expected) = (total(&g), total(&crate::lu(&a).unwrap()));
            assert!(
                (flops - expected).abs() < 1e-9 * expected,
                "{flops} {expected}"
            );
            for t in g.tasks() {
                assert_eq!(lu_tiles_shapes(&a, t).len(), t.op.operands());
            }
        }
    }
}
