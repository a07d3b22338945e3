//! The tiled general matrix product C <- alpha op(A) op(B) + beta C as a task graph.
//!
//! C (m x n) is cut into r x s tiles and the inner dimension k into t steps, all with the same tile
//! side. Task (i, j, l) is one [`Op::MatMul`] on A's tile of op(A) block (i, l), B's tile of op(B)
//! block (l, j) and C's tile (i, j); the step l = 0 applies beta, later steps add (beta = 1). The
//! tasks of one C tile form a chain in l order (they all write C(i, j)); chains are independent, so
//! any assignment of whole chains, or of single steps, to processors is valid. Tasks are numbered
//! `(i * s + j) * t + l`.

use hetla_kernels::{MatMul, Op};

use crate::{Access, MatrixId, Mode, TaskGraph, TaskId, TileRef, Tiling, TilingError};

/// The left factor A of a product.
pub const MATMUL_A: MatrixId = MatrixId(0);
/// The right factor B of a product.
pub const MATMUL_B: MatrixId = MatrixId(1);
/// The result C of a product.
pub const MATMUL_C: MatrixId = MatrixId(2);

/// The shape of a tiled product: the tilings of A, B and C as stored, and the tile grid of the
/// iteration space (r x s tiles of C, t steps of the inner dimension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatMulTiling {
    /// The product's parameters.
    pub params: MatMul,
    /// A as stored (m x k, or k x m when transposed).
    pub a: Tiling,
    /// B as stored (k x n, or n x k when transposed).
    pub b: Tiling,
    /// C (m x n).
    pub c: Tiling,
    /// Tile rows of C.
    pub r: usize,
    /// Tile columns of C.
    pub s: usize,
    /// Steps of the inner dimension.
    pub t: usize,
}

impl MatMulTiling {
    /// The tiling of an (m, n, k) product with square tiles of side `tile`.
    pub fn new(
        m: usize,
        n: usize,
        k: usize,
        tile: usize,
        params: MatMul,
    ) -> Result<Self, TilingError> {
        let (ar, ac) = if params.trans_a { (k, m) } else { (m, k) };
        let (br, bc) = if params.trans_b { (n, k) } else { (k, n) };
        let c = Tiling::new(m, n, tile)?;
        Ok(Self {
            params,
            a: Tiling::new(ar, ac, tile)?,
            b: Tiling::new(br, bc, tile)?,
            c,
            r: c.row_tiles(),
            s: c.col_tiles(),
            t: k.div_ceil(tile),
        })
    }

    /// The id of task (i, j, l).
    pub fn task(&self, i: usize, j: usize, l: usize) -> TaskId {
        TaskId((i * self.s + j) * self.t + l)
    }

    /// The (i, j, l) of a task id.
    pub fn coordinates(&self, task: TaskId) -> (usize, usize, usize) {
        let (chain, l) = (task.0 / self.t, task.0 % self.t);
        (chain / self.s, chain % self.s, l)
    }

    /// The stored tile of A that task (i, *, l) reads.
    pub fn a_tile(&self, i: usize, l: usize) -> TileRef {
        if self.params.trans_a {
            TileRef::new(MATMUL_A, l, i)
        } else {
            TileRef::new(MATMUL_A, i, l)
        }
    }

    /// The stored tile of B that task (*, j, l) reads.
    pub fn b_tile(&self, l: usize, j: usize) -> TileRef {
        if self.params.trans_b {
            TileRef::new(MATMUL_B, j, l)
        } else {
            TileRef::new(MATMUL_B, l, j)
        }
    }

    /// The tiling of one of the three matrices.
    pub fn tiling(&self, matrix: MatrixId) -> Option<&Tiling> {
        match matrix {
            MATMUL_A => Some(&self.a),
            MATMUL_B => Some(&self.b),
            MATMUL_C => Some(&self.c),
            _ => None,
        }
    }
}

/// The task graph of the tiled product (see the module documentation). An empty inner dimension
/// gives no task (C <- beta C is then the caller's, without tiles to read).
pub fn matmul(tiling: &MatMulTiling) -> TaskGraph {
    let mut g = TaskGraph::new();
    let p = tiling.params;
    for i in 0..tiling.r {
        for j in 0..tiling.s {
            let c = TileRef::new(MATMUL_C, i, j);
            let (rows, cols) = tiling.c.tile_shape(i, j);
            for l in 0..tiling.t {
                let op = Op::MatMul(if l == 0 { p } else { p.with_beta(1.0) });
                let read = |tile| Access {
                    tile,
                    mode: Mode::Read,
                };
                let accesses = vec![
                    read(tiling.a_tile(i, l)),
                    read(tiling.b_tile(l, j)),
                    Access {
                        tile: c,
                        // With beta = 0 the first step overwrites C without reading it.
                        mode: if l == 0 && p.beta() == 0.0 {
                            Mode::Write
                        } else {
                            Mode::ReadWrite
                        },
                    },
                ];
                let flops = 2.0 * rows as f64 * cols as f64 * tiling.t_size(l) as f64;
                g.add_task(op, accesses, flops);
            }
        }
    }
    g
}

impl MatMulTiling {
    /// The inner size of step `l` (the ragged last step is shorter).
    pub fn t_size(&self, l: usize) -> usize {
        let k = if self.params.trans_a {
            self.a.rows()
        } else {
            self.a.cols()
        };
        self.a.tile().min(k - l * self.a.tile())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_follow_the_inner_dimension_and_are_independent() {
        let p = MatMul::new(true, false, 2.0, 0.0);
        let t = MatMulTiling::new(5, 3, 7, 2, p).unwrap();
        assert_eq!((t.r, t.s, t.t), (3, 2, 4));
        let g = matmul(&t);
        assert_eq!(g.len(), 3 * 2 * 4);
        for task in g.ids() {
            let (i, j, l) = t.coordinates(task);
            assert_eq!(t.task(i, j, l), task);
            let preds = g.predecessors(task);
            if l == 0 {
                assert!(preds.is_empty());
                assert_eq!(g.task(task).op, Op::MatMul(p));
            } else {
                assert_eq!(preds, [TaskId(task.0 - 1)]);
                assert_eq!(g.task(task).op, Op::MatMul(p.with_beta(1.0)));
            }
            // A is stored transposed: op(A) block (i, l) is stored tile (l, i).
            assert_eq!(g.task(task).accesses[0].tile, TileRef::new(MATMUL_A, l, i));
        }
        // The ragged last step has k = 7 - 6 = 1; the last C tile is 1 x 1.
        let last = t.task(2, 1, 3);
        assert_eq!(g.task(last).flops, 2.0);
        let total: f64 = g.tasks().iter().map(|x| x.flops).sum();
        assert_eq!(total, 2.0 * 5.0 * 3.0 * 7.0);
    }
}
