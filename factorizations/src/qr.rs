//! The task graph of tiled Householder QR (PLASMA's tile QR): A (m x n, matrix [`FACTOR`]) in
//! tiles, overwritten by R on and above its diagonal and the reflectors that make Q below it; the
//! block reflectors' T's are kept beside the tiles by whoever runs the graph (one per tile for the
//! tile QRs, one per tile for the eliminations of stacked pairs, see [`qr_t_slot`]).
//!
//! Step k eliminates the tiles of tile column k below the diagonal by a **reduction tree** and
//! applies each elimination to the tile columns right of k:
//!
//! - [`QrTree::Flat`] (PLASMA's flat tree, the one for square matrices): `Geqrt(A_kk)` and
//!   `Unmqr(A_kk -> A_kj)`, then for i = k+1, k+2, ... in turn `Tsqrt(A_kk, A_ik)` and `Tsmqr(A_ik
//!   -> A_kj, A_ij)`: the eliminations of a column are a chain of mt - k tasks.
//! - [`QrTree::Binary`] (for tall matrices): `Geqrt(A_ik)` and `Unmqr(A_ik -> A_ij)` for every i >=
//!   k at once, then the triangles merged pairwise, `Ttqrt(A_pk, A_qk)` and `Ttmqr(A_qk -> A_pj,
//!   A_qj)` with q = p + s for s = 1, 2, 4, ...: a column's critical path is log2(mt - k) merges
//!   instead of mt - k eliminations, for the same flops (a tile QR and a merge of triangles cost
//!   what the elimination of a tile on a triangle costs).
//!
//! A stacked elimination writes two tiles (the R it merges into and the tile it eliminates), so
//! its tasks have two write accesses; the dependencies follow from the accesses as for every graph.

use hetla_kernels::Op;

use crate::{Access, FACTOR, Mode, TaskGraph, TileRef, Tiling, TilingError};

/// How the tiles of a tile column are eliminated (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QrTree {
    /// Chosen by shape ([`QrTree::for_shape`]).
    #[default]
    Auto,
    /// One chain per tile column: each tile eliminated on the diagonal tile's triangle.
    Flat,
    /// Every tile factored at once, their triangles merged pairwise.
    Binary,
}

impl QrTree {
    /// The name the CLI and reports use.
    pub fn name(self) -> &'static str {
        match self {
            QrTree::Auto => "auto",
            QrTree::Flat => "flat",
            QrTree::Binary => "binary",
        }
    }

    /// The tree for a matrix of `row_tiles` x `col_tiles` tiles: binary when the matrix has at
    /// least four times as many tile rows as tile columns (a tall matrix, whose columns' chains
    /// would be the critical path), else flat (a square matrix has parallelism across its
    /// columns, and the flat tree's kernels are the faster ones).
    pub fn for_shape(self, row_tiles: usize, col_tiles: usize) -> QrTree {
        match self {
            QrTree::Auto if row_tiles >= 4 * col_tiles.max(1) => QrTree::Binary,
            QrTree::Auto => QrTree::Flat,
            other => other,
        }
    }
}

impl std::fmt::Display for QrTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for QrTree {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [QrTree::Auto, QrTree::Flat, QrTree::Binary]
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown tree '{s}': expected auto, flat or binary"))
    }
}

/// Which T a QR task writes or reads, by the tile whose reflectors it belongs to: the T of a tile's
/// own QR (`Geqrt`, `Unmqr`: `false`) or of the elimination of that tile on a triangle (`Tsqrt`,
/// `Tsmqr`, `Ttqrt`, `Ttmqr`: `true`). The tile is the task's first tile for `Geqrt` and the
/// applications, its second for the stacked factorisations.
pub fn qr_t_slot(task: &crate::Task) -> (TileRef, bool) {
    match task.op {
        Op::Geqrt | Op::Unmqr => (task.accesses[0].tile, false),
        Op::Tsqrt | Op::Ttqrt => (task.accesses[1].tile, true),
        _ => (task.accesses[0].tile, true),
    }
}

/// The graph of the tiled QR of `a` with `tree` (see the module documentation).
pub fn qr(a: &Tiling, tree: QrTree) -> Result<TaskGraph, TilingError> {
    let (mt, nt) = (a.row_tiles(), a.col_tiles());
    let tile = |i, j| TileRef::new(FACTOR, i, j);
    let shape = |i, j| a.tile_shape(i, j);
    let mut g = TaskGraph::new();
    let add = |g: &mut TaskGraph, op: Op, reads: &[(usize, usize)], writes: &[(usize, usize)]| {
        let shapes: Vec<_> = reads
            .iter()
            .chain(writes)
            .map(|&(i, j)| shape(i, j))
            .collect();
        let accesses = reads
            .iter()
            .map(|&(i, j)| (i, j, Mode::Read))
            .chain(writes.iter().map(|&(i, j)| (i, j, Mode::ReadWrite)))
            .map(|(i, j, mode)| Access {
                tile: tile(i, j),
                mode,
            })
            .collect();
        g.add_task(op, accesses, flops(op, &shapes));
    };
    let tree = tree.for_shape(mt, nt);
    for k in 0..mt.min(nt) {
        match tree {
            QrTree::Binary => {
                for i in k..mt {
                    add(&mut g, Op::Geqrt, &[], &[(i, k)]);
                    for j in k + 1..nt {
                        add(&mut g, Op::Unmqr, &[(i, k)], &[(i, j)]);
                    }
                }
                let mut s = 1;
                while k + s < mt {
                    for p in (k..mt).step_by(2 * s) {
                        let q = p + s;
                        if q >= mt {
                            continue;
                        }
                        add(&mut g, Op::Ttqrt, &[], &[(p, k), (q, k)]);
                        for j in k + 1..nt {
                            add(&mut g, Op::Ttmqr, &[(q, k)], &[(p, j), (q, j)]);
                        }
                    }
                    s *= 2;
                }
            }
            _ => {
                add(&mut g, Op::Geqrt, &[], &[(k, k)]);
                for j in k + 1..nt {
                    add(&mut g, Op::Unmqr, &[(k, k)], &[(k, j)]);
                }
                for i in k + 1..mt {
                    add(&mut g, Op::Tsqrt, &[], &[(k, k), (i, k)]);
                    for j in k + 1..nt {
                        add(&mut g, Op::Tsmqr, &[(i, k)], &[(k, j), (i, j)]);
                    }
                }
            }
        }
    }
    Ok(g)
}

/// The flops of a QR task from its tiles' shapes, reads first. A tile eliminated on a triangle
/// contributes as many reflectors as the triangle has columns; the counts are [`Op::flops`]'s with
/// the reflector counts a ragged tile gives (a tile QR of m x n has min(m, n), and so has the T an
/// application reads).
fn flops(op: Op, shapes: &[(usize, usize)]) -> f64 {
    match op {
        Op::Unmqr => {
            let (v, c) = (shapes[0], shapes[1]);
            op.flops(&[(v.0, v.0.min(v.1)), c])
        }
        _ => op.flops(shapes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_parse_and_auto_picks_binary_for_tall_matrices() {
        for t in [QrTree::Auto, QrTree::Flat, QrTree::Binary] {
            assert_eq!(t.name().parse::<QrTree>(), Ok(t));
        }
        assert!("greedy".parse::<QrTree>().unwrap_err().contains("flat"));
        assert_eq!(QrTree::Auto.for_shape(32, 32), QrTree::Flat);
        assert_eq!(QrTree::Auto.for_shape(782, 1), QrTree::Binary);
        assert_eq!(QrTree::Flat.for_shape(782, 1), QrTree::Flat);
    }

    fn count(g: &TaskGraph, op: Op) -> usize {
        g.tasks().iter().filter(|t| t.op == op).count()
    }

    #[test]
    fn both_trees_have_the_tasks_and_the_flops_of_householder_qr() {
        // 9 x 4 tiles of 64, the last row ragged (40 rows): m = 552, n = 256.
        let a = Tiling::new(552, 256, 64).unwrap();
        let (mt, nt) = (9, 4);
        let flat = qr(&a, QrTree::Flat).unwrap();
        let binary = qr(&a, QrTree::Binary).unwrap();
        let pairs: usize = (0..nt).map(|k| mt - k - 1).sum();
        let updates = |k: usize| nt - k - 1;
        assert_eq!(count(&flat, Op::Geqrt), nt);
        assert_eq!(count(&flat, Op::Tsqrt), pairs);
        assert_eq!(
            count(&flat, Op::Tsmqr),
            (0..nt).map(|k| (mt - k - 1) * updates(k)).sum::<usize>()
        );
        assert_eq!(
            count(&binary, Op::Geqrt),
            (0..nt).map(|k| mt - k).sum::<usize>()
        );
        assert_eq!(count(&binary, Op::Ttqrt), pairs);
        assert_eq!(
            count(&binary, Op::Ttmqr),
            (0..nt).map(|k| (mt - k - 1) * updates(k)).sum::<usize>()
        );
        // Householder QR of m x n: 2 m n^2 - 2 n^3 / 3, up to lower-order terms.
        let (m, n) = (552.0, 256.0);
        let exact = 2.0 * m * n * n - 2.0 * n * n * n / 3.0;
        for g in [&flat, &binary] {
            let total: f64 = g.tasks().iter().map(|t| t.flops).sum();
            assert!((total / exact - 1.0).abs() < 0.06, "{total} vs {exact}");
        }
        // Every task writes one tile or, for a stacked elimination, two.
        for t in flat.tasks().iter().chain(binary.tasks()) {
            let writes = t.accesses.iter().filter(|a| a.mode != Mode::Read).count();
            assert_eq!(writes, t.op.writes(), "{:?}", t.op);
        }
    }

    #[test]
    fn the_binary_tree_shortens_a_tall_matrix_critical_path() {
        // 64 x 1 tiles: the flat tree is a chain of 64 eliminations, the binary tree 6 merges.
        let a = Tiling::new(64 * 128, 128, 128).unwrap();
        let path = |g: &TaskGraph| g.bottom_levels().into_iter().fold(0.0, f64::max);
        let flat = qr(&a, QrTree::Flat).unwrap();
        let binary = qr(&a, QrTree::Binary).unwrap();
        assert!(
            path(&binary) * 8.0 < path(&flat),
            "{} vs {}",
            path(&binary),
            path(&flat)
        );
        // A merge of column 0 waits for the two tile QRs below it, or for the merges before it.
        for id in binary.ids() {
            if binary.task(id).op == Op::Ttqrt {
                assert!(!binary.predecessors(id).is_empty());
            }
        }
    }

    #[test]
    fn t_slots_name_the_tile_whose_reflectors_a_task_uses() {
        let a = Tiling::new(256, 128, 64).unwrap();
        let g = qr(&a, QrTree::Flat).unwrap();
        for t in g.tasks() {
            let (tile, pair) = qr_t_slot(t);
            match t.op {
                Op::Geqrt | Op::Unmqr => assert!(!pair && tile == t.accesses[0].tile),
                Op::Tsqrt => assert!(pair && tile == t.accesses[1].tile),
                Op::Tsmqr => assert!(pair && tile == t.accesses[0].tile),
                other => panic!("{other:?} in a flat tree"),
            }
        }
    }
}
