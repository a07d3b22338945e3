//! The task graph of tiled Householder QR (PLASMA's tile QR): A (m x n, matrix [`FACTOR`]) in
//! tiles, overwritten by R on and above its diagonal and the reflectors that make Q below it; the
//! block reflectors' T's are kept beside the tiles by whoever runs the graph (one per tile for the
//! tile QRs, one per tile for the eliminations of stacked pairs, see [`qr_t_slot`]).
//!
//! Step k eliminates the tiles of tile column k below the diagonal by a **reduction tree** and
//! applies each elimination to the tile columns right of k:
//!
//! - [`QrTree::Flat`] (PLASMA's flat tree, the one for square matrices): `Geqrt(A_kk)` and
//!   `Unmqr(A_kk -> A_kj)`, then for i = k+1, k+2, ... in turn `Tsqrt(A_kk, A_ik)` and
//!   `Tsmqr(A_ik -> A_kj, A_ij)`: the eliminations of a column are a chain of mt - k tasks.
//! - [`QrTree::Binary`] (for tall matrices): `Geqrt(A_ik)` and `Unmqr(A_ik -> A_ij)` for every i >=
//!   k at once, then the triangles merged pairwise, `Ttqrt(A_pk, A_qk)` and
//!   `Ttmqr(A_qk -> A_pj, A_qj)` with q = p + s for s = 1, 2, 4, ...: a column's critical path is
//!   log2(mt - k) merges instead of mt - k eliminations, for the same flops (a tile QR and a merge
//!   of triangles cost what the elimination of a tile on a triangle costs).
//! - [`QrTree::Domains`] (the hierarchical tree of a distributed QR, communication-avoiding): the
//!   tile rows are cut into p domains by their index mod p (the rows a process row of a p x Q grid
//!   holds); within each domain a flat tree eliminates the domain's tiles on its top tile (the
//!   first of the domain at or below the diagonal), then the domains' top triangles are merged
//!   pairwise as the binary tree merges (`Ttqrt(A_tk, A_uk)`, u = t + s for s = 1, 2, 4, ... over
//!   the domains' tops in order): log2 p merges on the diagonal's path. Every task but the merges
//!   touches one domain's tiles only; a merge writes both tops' rows and runs (owner computes by
//!   its last access) where the eliminated triangle lives, so only the surviving tops' tile rows
//!   travel, to the merge's rank, and home (mid-run for a survivor eliminated later where it
//!   lives). Two and three domains merge as a chain would; one domain is [`QrTree::Flat`].
//!
//! A stacked elimination writes two tiles (the R it merges into and the tile it eliminates), so its
//! tasks have two write accesses; the dependencies follow from the accesses as for every graph.

use hetla_kernels::{Op, Shape};

use crate::{Access, FACTOR, MatrixId, Mode, RHS, TaskGraph, TileRef, Tiling, TilingError};

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
    /// A flat tree within each of this many domains of tile rows (by index mod the count), the
    /// domains' triangles then merged on the diagonal one: a distributed QR's tree over a process
    /// column.
    Domains(usize),
}

impl QrTree {
    /// The name the CLI and reports use.
    pub fn name(self) -> &'static str {
        match self {
            QrTree::Auto => "auto",
            QrTree::Flat => "flat",
            QrTree::Binary => "binary",
            QrTree::Domains(_) => "domains",
        }
    }

    /// The tree for a matrix of `row_tiles` x `col_tiles` tiles run by `workers` workers: binary
    /// when the matrix is tall (at least four times as many tile rows as tile columns) and has too
    /// few tile columns to keep the workers busy (fewer than two per worker), where the flat tree's
    /// chain down each tile column would be the critical path; else flat, whose kernels are the
    /// faster ones (2 cores, 20000 x 1000 in tiles of 256: least squares 0.87 s flat, 0.99 s
    /// binary).
    pub fn for_shape(self, row_tiles: usize, col_tiles: usize, workers: usize) -> QrTree {
        let tall = row_tiles >= 4 * col_tiles.max(1);
        match self {
            QrTree::Auto if tall && col_tiles < workers.max(1) => QrTree::Binary,
            QrTree::Auto => QrTree::Flat,
            other => other,
        }
    }
}

impl std::fmt::Display for QrTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QrTree::Domains(p) => write!(f, "domains:{p}"),
            other => f.write_str(other.name()),
        }
    }
}

impl std::str::FromStr for QrTree {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(p) = s.strip_prefix("domains:") {
            return match p.parse::<usize>() {
                Ok(p) if p > 0 => Ok(QrTree::Domains(p)),
                _ => Err(format!(
                    "tree '{s}': domains:P needs P, the number of domains, a whole number >= 1"
                )),
            };
        }
        [QrTree::Auto, QrTree::Flat, QrTree::Binary]
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown tree '{s}': expected auto, flat, binary or domains:P"))
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
    build(a, None, tree, true)
}

/// The graph of the tiled QR of `a` (matrix [`FACTOR`]) that also applies Q^H to `b` (matrix
/// [`RHS`], tiled by rows as `a`): each factorisation's application to B's tiles in the same step
/// as its application to A's, so that B's updates overlap A's factorisation (what least squares
/// needs: Q^H B, then R X = (Q^H B)'s first n rows).
pub fn qr_with_rhs(a: &Tiling, b: &Tiling, tree: QrTree) -> Result<TaskGraph, TilingError> {
    check_rhs_rows(a, b)?;
    build(a, Some(b), tree, true)
}

/// The graph that applies Q^H of an already factored `a` (read only, factored by [`qr`] with the
/// same `tree`) to `b`: the applications of [`qr_with_rhs`] without the factorisation.
pub fn qr_apply_rhs(a: &Tiling, b: &Tiling, tree: QrTree) -> Result<TaskGraph, TilingError> {
    check_rhs_rows(a, b)?;
    build(a, Some(b), tree, false)
}

/// LAPACK's blocked Householder QR (?geqrf) of an `m x n` matrix `a` (m >= n, matrix [`FACTOR`])
/// cut into block columns of `a.tile()` columns, as a task graph: tile (0, j) of the graph is the
/// whole block column j, all m rows ([`qr_columns_shape`] gives the rows each task works on). For
/// each k:
///
/// - `Geqrt(A_k)`: the panel, block column k from row k b down, factored into its reflectors and R
///   block (its T beside it, as [`qr_t_slot`] names it: block column k's);
/// - `Unmqr(A_k -> A_j)` for j > k: block column j from row k b down multiplied by the panel's Q^H;
///   with `b` (matrix [`RHS`], m rows, in block columns of the same width), the same for each of
///   B's block columns (Q^H B, least squares' right-hand side).
///
/// Each task writes one block column, so the dependencies follow from the accesses; the update of
/// block column k + 1 and its panel form the critical path (the bottom levels prioritise them: the
/// look-ahead). A block column is the unit a distributed QR on a grid of one process row moves (see
/// `hetla::distributed`), as LU's block-column graph is. 2 m n^2 - 2 n^3 / 3 flops (plus 4 m n c -
/// 2 n^2 c for c columns of B).
pub fn qr_columns(a: &Tiling, b: Option<&Tiling>) -> Result<TaskGraph, TilingError> {
    if let Some(b) = b {
        check_rhs_rows(a, b)?;
    }
    if a.rows() < a.cols() {
        return Err(TilingError::Wide {
            rows: a.rows(),
            cols: a.cols(),
        });
    }
    let column = |m: MatrixId, j| TileRef::new(m, 0, j);
    let mut g = TaskGraph::new();
    let add = |g: &mut TaskGraph, op: Op, reads: &[(TileRef, Shape)], write: (TileRef, Shape)| {
        let shapes: Vec<Shape> = reads.iter().map(|r| r.1).chain([write.1]).collect();
        let accesses = reads
            .iter()
            .map(|&(tile, _)| Access {
                tile,
                mode: Mode::Read,
            })
            .chain([Access {
                tile: write.0,
                mode: Mode::ReadWrite,
            }])
            .collect();
        g.add_task(op, accesses, flops(op, &shapes));
    };
    for k in 0..a.col_tiles() {
        let panel = (column(FACTOR, k), qr_columns_shape(a, k, a.tile_cols(k)));
        add(&mut g, Op::Geqrt, &[], panel);
        for j in k + 1..a.col_tiles() {
            let to = (column(FACTOR, j), qr_columns_shape(a, k, a.tile_cols(j)));
            add(&mut g, Op::Unmqr, &[panel], to);
        }
        for c in 0..b.map_or(0, Tiling::col_tiles) {
            let width = b.map_or(0, |b| b.tile_cols(c));
            let to = (column(RHS, c), qr_columns_shape(a, k, width));
            add(&mut g, Op::Unmqr, &[panel], to);
        }
    }
    Ok(g)
}

/// The rows and columns a task of step `step` of [`qr_columns`] works on in a block column of
/// `cols` columns: from row `step` b down.
pub fn qr_columns_shape(a: &Tiling, step: usize, cols: usize) -> Shape {
    (a.rows() - a.offset(step), cols)
}

fn check_rhs_rows(a: &Tiling, b: &Tiling) -> Result<(), TilingError> {
    if b.rows() != a.rows() || b.tile() != a.tile() {
        return Err(TilingError::Mismatch {
            n: a.rows(),
            tile: a.tile(),
            rhs_rows: b.rows(),
            rhs_tile: b.tile(),
        });
    }
    Ok(())
}

/// Step k of `tree` over A's tile column k: A's tasks when `factor`, and with `b` the same
/// applications to every tile column of B.
fn build(
    a: &Tiling,
    b: Option<&Tiling>,
    tree: QrTree,
    factor: bool,
) -> Result<TaskGraph, TilingError> {
    let (mt, nt) = (a.row_tiles(), a.col_tiles());
    let bt = b.map_or(0, Tiling::col_tiles);
    let tiling = |m: MatrixId| if m == RHS { b.unwrap_or(a) } else { a };
    let mut g = TaskGraph::new();
    let add = |g: &mut TaskGraph, op: Op, reads: &[TileRef], writes: &[TileRef]| {
        let shape = |t: &TileRef| tiling(t.matrix).tile_shape(t.row, t.col);
        let shapes: Vec<_> = reads.iter().chain(writes).map(shape).collect();
        let accesses = reads
            .iter()
            .map(|&tile| Access {
                tile,
                mode: Mode::Read,
            })
            .chain(writes.iter().map(|&tile| Access {
                tile,
                mode: Mode::ReadWrite,
            }))
            .collect();
        g.add_task(op, accesses, flops(op, &shapes));
    };
    let at = |i, j| TileRef::new(FACTOR, i, j);
    let rhs = |i, j| TileRef::new(RHS, i, j);
    // Tile row i's QR at step k (A's when `factor`), applied to its tiles right of k and to B's.
    let tile_qr = |g: &mut TaskGraph, i: usize, k: usize| {
        if factor {
            add(g, Op::Geqrt, &[], &[at(i, k)]);
            for j in k + 1..nt {
                add(g, Op::Unmqr, &[at(i, k)], &[at(i, j)]);
            }
        }
        for j in 0..bt {
            add(g, Op::Unmqr, &[at(i, k)], &[rhs(i, j)]);
        }
    };
    // Tile row q eliminated on row p's triangle at step k by `op` (`Tsqrt`: a tile, `Ttqrt`: a
    // triangle), applied to both rows right of k and to B's.
    let eliminate = |g: &mut TaskGraph, op: Op, (p, q): (usize, usize), k: usize| {
        let apply = if op == Op::Tsqrt {
            Op::Tsmqr
        } else {
            Op::Ttmqr
        };
        if factor {
            add(g, op, &[], &[at(p, k), at(q, k)]);
            for j in k + 1..nt {
                add(g, apply, &[at(q, k)], &[at(p, j), at(q, j)]);
            }
        }
        for j in 0..bt {
            add(g, apply, &[at(q, k)], &[rhs(p, j), rhs(q, j)]);
        }
    };
    // Without a platform: binary only for a tall matrix of one tile column.
    let tree = tree.for_shape(mt, nt, 2);
    for k in 0..mt.min(nt) {
        match tree {
            QrTree::Binary => {
                for i in k..mt {
                    tile_qr(&mut g, i, k);
                }
                let mut s = 1;
                while k + s < mt {
                    for p in (k..mt).step_by(2 * s).filter(|&p| p + s < mt) {
                        eliminate(&mut g, Op::Ttqrt, (p, p + s), k);
                    }
                    s *= 2;
                }
            }
            tree => {
                // Flat: one domain. Each domain's top at step k is k + d (the first tile row at
                // or below the diagonal with index d + k mod p).
                let p = match tree {
                    QrTree::Domains(p) => p.max(1),
                    _ => 1,
                };
                let tops = k..mt.min(k + p);
                for top in tops.clone() {
                    tile_qr(&mut g, top, k);
                    for i in (top + p..mt).step_by(p) {
                        eliminate(&mut g, Op::Tsqrt, (top, i), k);
                    }
                }
                // The domains' triangles merged pairwise, as the binary tree's: log2 of the
                // domains' count merges on the diagonal's path.
                let tops: Vec<usize> = tops.collect();
                let mut s = 1;
                while s < tops.len() {
                    for i in (0..tops.len())
                        .step_by(2 * s)
                        .filter(|i| i + s < tops.len())
                    {
                        eliminate(&mut g, Op::Ttqrt, (tops[i], tops[i + s]), k);
                    }
                    s *= 2;
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
        assert_eq!("domains:3".parse::<QrTree>(), Ok(QrTree::Domains(3)));
        assert_eq!(QrTree::Domains(3).to_string(), "domains:3");
        for bad in ["domains:0", "domains:", "domains:x"] {
            assert!(
                bad.parse::<QrTree>().unwrap_err().contains("domains:P"),
                "{bad}"
            );
        }
        assert_eq!(QrTree::Domains(2).for_shape(782, 1, 2), QrTree::Domains(2));
        assert_eq!(QrTree::Auto.for_shape(32, 32, 2), QrTree::Flat);
        assert_eq!(QrTree::Auto.for_shape(782, 1, 2), QrTree::Binary);
        assert_eq!(QrTree::Flat.for_shape(782, 1, 2), QrTree::Flat);
        // Tall, but with as many tile columns as workers; not for 16.
        assert_eq!(QrTree::Auto.for_shape(53, 3, 2), QrTree::Flat);
        assert_eq!(QrTree::Auto.for_shape(53, 3, 16), QrTree::Binary);
        assert_eq!(QrTree::Auto.for_shape(782, 1, 1), QrTree::Flat);
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

    #[test]
    fn domains_eliminate_within_each_domain_then_merge_on_the_diagonal_one() {
        // 11 x 3 tiles, the last row ragged, with B: one domain is the flat tree, task for task.
        let a = Tiling::new(11 * 32 - 7, 3 * 32, 32).unwrap();
        let b = Tiling::new(11 * 32 - 7, 40, 32).unwrap();
        let flat = qr_with_rhs(&a, &b, QrTree::Flat).unwrap();
        let one = qr_with_rhs(&a, &b, QrTree::Domains(1)).unwrap();
        assert_eq!(flat.tasks(), one.tasks());
        let (mt, nt) = (11, 3);
        for p in [2, 3, 4] {
            let g = qr(&a, QrTree::Domains(p)).unwrap();
            // Householder QR's flops, and one elimination per tile below the diagonal.
            let total: f64 = g.tasks().iter().map(|t| t.flops).sum();
            let flat_total: f64 = qr(&a, QrTree::Flat)
                .unwrap()
                .tasks()
                .iter()
                .map(|t| t.flops)
                .sum();
            assert!(
                (total / flat_total - 1.0).abs() < 0.05,
                "{p}: {total} vs {flat_total}"
            );
            let pairs: usize = (0..nt).map(|k| mt - k - 1).sum();
            let merges = count(&g, Op::Ttqrt);
            assert_eq!(count(&g, Op::Tsqrt) + merges, pairs);
            assert_eq!(merges, (0..nt).map(|k| (mt - k).min(p) - 1).sum::<usize>());
            for t in g.tasks() {
                let rows: std::collections::BTreeSet<usize> =
                    t.accesses.iter().map(|x| x.tile.row % p).collect();
                match t.op {
                    // A merge touches the diagonal row and one other domain's top, and writes
                    // the latter last (it runs where that triangle lives).
                    Op::Ttqrt | Op::Ttmqr => {
                        assert_eq!(rows.len(), 2, "{t:?}");
                        let last = t.accesses.last().unwrap().tile;
                        let k = t.accesses.iter().map(|x| x.tile.row).min().unwrap();
                        assert!(last.row > k && last.row < k + p, "{t:?}");
                    }
                    _ => assert_eq!(rows.len(), 1, "{t:?}"),
                }
            }
        }
    }
}
