//! The task graph of Aasen's symmetric indefinite factorisation Q A Q^T = L T L^H in blocks (T
//! Hermitian block tridiagonal), left-looking as in Ballard et al. (2014), over the square tiling
//! of one n x n matrix ([`FACTOR`]) laid out as PLASMA's:
//!
//! - tile (i, j), i > j: L(i, j + 1) (L's block column 0 is the identity, never stored);
//! - tile (k, k): T(k, k);
//! - tile (k + 1, k): L(k + 1, k + 1) below its diagonal, T(k + 1, k) (upper trapezoidal) on and
//!   above it;
//! - tile (m - 1, k), m <= k: H(m, k) of step k (H = T L^H, block upper Hessenberg; H(k, k)^H for m
//!   = k), a workspace.
//!
//! A itself is not a tile: tasks read it, mirrored, through the permutation Q that the panels build
//! (beside the tiles, as LU's interchanges). Step k:
//!
//! 1. `LdltHessenberg` (m, k), 1 <= m < k: H(m, k) = T(m, m-1) L(k, m-1)^H + T(m, m) L(k, m)^H +
//!    T(m+1, m)^H L(k, m+1)^H, in parallel;
//! 2. `LdltUpdate` (i, k), i > k: W(i) = A(i, k) - L(i, 1:k-1) H(1:k-1, k) into tile (i, k), in
//!    parallel (n^3/3 of the flops), beside
//! 3. `LdltDiagonal` k: T(k, k) from A(k, k), L's block row k and H(1:k-1, k), then H(k, k); and
//!    after it W(i) -= L(i, k) H(k, k), an [`Op::GemmNt`] (A B^H) of tiles (i, k-1) and (k-1, k)
//!    for each i (the diagonal task leaves H(k, k)^H in tile (k-1, k));
//! 4. `LdltPanel` k: LU with partial pivoting of tiles (k+1.., k) (L's block column k + 1), T(k+1,
//!    k) from its U, the interchanges into Q;
//! 5. `LdltSwap` (j, k), j < k: the interchanges on the rows of L's earlier block columns, in
//!    parallel;
//! 6. `LdltBand` k - 1: the second stage's block step k - 1 (the LU with partial pivoting of T's
//!    band, ?gbtrf), which needs T(k, k) and T(k+1, k): it runs beside step k + 1's tasks, so that
//!    the second stage ends a step or two after the first. Its steps are a chain: step k reads the
//!    state step k - 1 left, which is not a tile; the chain goes through tile (0, k), H(1, k)'s
//!    workspace of step k, dead when step k ends: step k - 1 writes it (after step k's tasks that
//!    read it), step k reads it. The last step writes (0, nt - 1) (the only tile of a one-tile
//!    graph).
//!
//! A task lists every tile its views span (a panel its whole block column: more than one written
//! tile), so the dependencies are exact; its kernel key has the shapes its kernel works on
//! ([`ldlt_shapes`]), one per operand of [`Op`]'s documentation.

use hetla_kernels::{Op, Shape};

use crate::{Access, FACTOR, MatrixId, Mode, Task, TaskGraph, TileRef, Tiling, TilingError};

/// The graph of Aasen's factorisation of the square `a` (see the module documentation).
pub fn ldlt(a: &Tiling) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.row_tiles();
    let t = |i, j| TileRef::new(FACTOR, i, j);
    let mut g = TaskGraph::new();
    let mut add = |op, reads, writes| add_task(&mut g, (a, ldlt_shapes), op, (reads, writes));
    for k in 0..nt {
        for m in 1..k {
            let mut reads = vec![t(m, m), t(k, m - 1)];
            // T(m+1, m), and L(k, m+1) in the same block when m + 1 = k.
            reads.push(t(m + 1, m));
            if m + 1 < k {
                reads.push(t(k, m));
            }
            if m >= 2 {
                reads.extend([t(m, m - 1), t(k, m - 2)]);
            }
            add(Op::LdltHessenberg, reads, vec![t(m - 1, k)]);
        }
        let row = (0..k).map(|j| t(k, j));
        let hessenberg = (0..k.saturating_sub(1)).map(move |i| t(i, k));
        let mut writes = Vec::new();
        if k >= 1 && k + 1 < nt {
            writes.push(t(k - 1, k));
        }
        writes.push(t(k, k));
        if k + 1 == nt {
            add(Op::LdltDiagonal, row.chain(hessenberg).collect(), writes);
            for step in k.saturating_sub(1)..=k {
                let (reads, writes) = band_step(nt, step);
                add(Op::LdltBand, reads, writes);
            }
            break;
        }
        // The bulk of each block's update needs H(1:k-1, k), not the diagonal task's H(k, k): it
        // runs beside the diagonal task; L(i, k) H(k, k) follows it, a product of two tiles.
        for i in k + 1..nt {
            let reads = (0..k).map(|j| t(i, j)).chain(hessenberg.clone());
            add(Op::LdltUpdate, reads.collect(), vec![t(i, k)]);
        }
        add(Op::LdltDiagonal, row.chain(hessenberg).collect(), writes);
        for i in (k + 1..nt).filter(|_| k >= 1) {
            add(Op::GemmNt, vec![t(i, k - 1), t(k - 1, k)], vec![t(i, k)]);
        }
        let previous = if k >= 1 {
            vec![t(k, k - 1)]
        } else {
            Vec::new()
        };
        add(
            Op::LdltPanel,
            previous,
            (k + 1..nt).map(|i| t(i, k)).collect(),
        );
        for j in 0..k {
            let column = (k + 1..nt).map(|i| t(i, j)).collect();
            add(Op::LdltSwap, vec![t(k + 1, k)], column);
        }
        if k >= 1 {
            let (reads, writes) = band_step(nt, k - 1);
            add(Op::LdltBand, reads, writes);
        }
    }
    Ok(g)
}

/// The shapes of a task's operands as its kernel works on them ([`ldlt_shapes`],
/// [`ldlt_columns_shapes`]).
type KernelShapes = fn(&Tiling, &Task) -> Vec<Shape>;

/// Adds to `g` a task of `op` that reads `reads` and writes `writes`, its flops counted on the
/// shapes `shapes` gives its kernel (over the tiling `a`).
fn add_task(
    g: &mut TaskGraph,
    (a, shapes): (&Tiling, KernelShapes),
    op: Op,
    (reads, writes): (Vec<TileRef>, Vec<TileRef>),
) {
    let mode = |mode| move |tile| Access { tile, mode };
    let accesses: Vec<Access> = (reads.into_iter().map(mode(Mode::Read)))
        .chain(writes.into_iter().map(mode(Mode::ReadWrite)))
        .collect();
    let task = Task {
        op,
        accesses,
        flops: 0.0,
    };
    let flops = op.flops(&shapes(a, &task));
    g.add_task(op, task.accesses, flops);
}

/// The tiles the second stage's block step k reads and writes: T(k, k), T(k+1, k), T(k+1, k+1),
/// T(k+2, k+1) (those that exist), the chain's tile (0, k) from step k - 1; it writes the chain's
/// tile (0, k + 1), the last step (0, k) (see the module documentation).
fn band_step(nt: usize, k: usize) -> (Vec<TileRef>, Vec<TileRef>) {
    let t = |i, j| TileRef::new(FACTOR, i, j);
    let written = t(0, (k + 1).min(nt - 1));
    let mut reads = vec![t(k, k)];
    if k + 1 < nt {
        reads.extend([t(k + 1, k), t(k + 1, k + 1)]);
    }
    if k + 2 < nt {
        reads.push(t(k + 2, k + 1));
    }
    if k >= 1 {
        reads.push(t(0, k));
    }
    reads.retain(|&tile| tile != written);
    (reads, vec![written])
}

/// The blocks a task of [`ldlt`]'s graph works on, (block, step): (m, k) for `LdltHessenberg`, (k,
/// k) for `LdltDiagonal`, `LdltPanel` and `LdltBand`, (i, k) for `LdltUpdate`, (j, k) for
/// `LdltSwap`.
pub fn ldlt_step(task: &Task) -> (usize, usize) {
    let last = task.accesses[task.accesses.len() - 1].tile;
    match task.op {
        // T(k, k) first, but in a one-tile graph, where the chain's tile (0, 0) is all.
        Op::LdltBand => {
            let first = task.accesses[0].tile;
            (first.row, first.row)
        }
        Op::LdltHessenberg => (last.row + 1, last.col),
        Op::LdltPanel => (last.col, last.col),
        Op::LdltSwap => (last.col, task.accesses[0].tile.col),
        _ => (last.row, last.col),
    }
}

/// The shapes of the operands of a task of [`ldlt`]'s graph as its kernel sees them (views that
/// span tiles), in the order of its [`Op`]'s documentation: its kernel key and flop count.
pub fn ldlt_shapes(a: &Tiling, task: &Task) -> Vec<Shape> {
    let (block, k) = ldlt_step(task);
    let size = |i: usize| a.tile_rows(i);
    let below = |k: usize| a.rows() - a.offset(k + 1);
    match task.op {
        Op::LdltHessenberg => {
            let m = block;
            let width = if m >= 2 { size(m - 1) } else { 0 } + size(m) + size(m + 1);
            vec![(size(m), width), (size(k), width), (size(m), size(k))]
        }
        Op::LdltDiagonal => {
            let r = if k >= 1 { a.offset(k - 1) } else { 0 };
            vec![(size(k), r), (r, size(k)), (size(k), size(k))]
        }
        Op::LdltUpdate => {
            let r = if k >= 1 { a.offset(k - 1) } else { 0 };
            vec![(size(block), r), (r, size(k)), (size(block), size(k))]
        }
        Op::LdltPanel => vec![(size(k), size(k)), (below(k), size(k))],
        Op::LdltSwap => vec![(below(k), size(k)), (below(k), size(block))],
        Op::LdltBand => {
            let size = |i: usize| if i < a.row_tiles() { size(i) } else { 0 };
            let (top, c) = (size(k), size(k + 1) + size(k + 2));
            vec![(top + size(k + 1), top), (top, c)]
        }
        // The product of two tiles that ends an update.
        _ => task
            .accesses
            .iter()
            .map(|x| a.tile_shape(x.tile.row, x.tile.col))
            .collect(),
    }
}

/// What Aasen's steps leave beside the block columns of [`ldlt_columns`]' graph (T's blocks, L's
/// diagonal blocks, the interchanges, the second stage's state): tiles without data, (0, k) for
/// step k and (0, n_t) for the second stage's chain, that order the tasks which make and read them.
pub const STEPS: MatrixId = MatrixId(5);

/// The graph of Aasen's factorisation of the square `a` in whole block columns (tile (0, j) of
/// [`FACTOR`] is block column j, every row; LU's layout), for platforms with GPUs: its products and
/// interchanges are tasks of two block columns each (one read, one written), which a GPU runs on
/// the rows their kernel arguments name, and the rest is on the host. The run's matrix holds what
/// [`ldlt`]'s does, by blocks: H(m, k) in block (m - 1, k) while step k runs, T(k, k) in (k, k),
/// L(k + 1, k + 1) and T(k + 1, k) in (k + 1, k), L below. Step k:
///
/// 1. `LdltGather` k (host): A(Q rows, Q cols) into column k's rows from block k, zeros above but
///    T(k-1, k) L(k, k)^H, H(k - 1, k)'s term from L's diagonal block, in block k - 2;
/// 2. `LdltColumnHessenberg` (j, k), 1 <= j < k: H's terms T(j', j) L(k, j)^H for j' = j-1, j, j+1
///    (the last one, for j = k - 1, is H(k, k)'s term T(k, k-1) L(k, k-1)^H, into block k - 1),
///    reading L(k, j) in column j - 1 (T's block column j is the kernel's argument);
/// 3. `LdltColumnUpdate` (j, k), j <= k - 2: column k's rows from block k less L(:, j + 1) H(j+1,
///    k) (column j's rows times block j of column k): the diagonal block's sum and the next
///    panel's;
/// 4. `LdltDiagonal` k (host): T(k, k) and H(k, k) from column k's blocks k and k - 1 and L(k, k);
/// 5. `LdltColumnUpdate` (k - 1, k): the rows below block k less L(:, k) H(k, k);
/// 6. `LdltPanel` k (host): LU with partial pivoting of the rows below block k (L(:, k + 1)), T(k +
///    1, k), the interchanges into Q;
/// 7. `LdltSwap` (j, k), j < k: the interchanges on the rows below block k of column j;
/// 8. `LdltBand` k - 1 (host): the second stage's block step, beside step k + 1.
///
/// The host's tasks write [`STEPS`]' tile of their step (diagonal and panel) or read it (the next
/// step's gather and diagonal, the band steps), which orders them without moving a block column;
/// the band steps chain through tile (0, n_t).
pub fn ldlt_columns(a: &Tiling) -> Result<TaskGraph, TilingError> {
    a.ensure_square()?;
    let nt = a.row_tiles();
    let column = |j| TileRef::new(FACTOR, 0, j);
    let step = |k| TileRef::new(STEPS, 0, k);
    let mut g = TaskGraph::new();
    let mut add =
        |op, reads, writes| add_task(&mut g, (a, ldlt_columns_shapes), op, (reads, writes));
    let band = |s: usize| {
        let mut reads = vec![step(s)];
        if s + 1 < nt {
            reads.push(step(s + 1));
        }
        (reads, vec![step(nt)])
    };
    for k in 0..nt {
        let earlier = if k >= 1 {
            vec![step(k - 1)]
        } else {
            Vec::new()
        };
        add(Op::LdltGather, earlier.clone(), vec![column(k)]);
        for j in 1..k {
            add(
                Op::LdltColumnHessenberg,
                vec![column(j - 1)],
                vec![column(k)],
            );
        }
        for j in 0..k.saturating_sub(1) {
            add(Op::LdltColumnUpdate, vec![column(j)], vec![column(k)]);
        }
        add(Op::LdltDiagonal, earlier, vec![column(k), step(k)]);
        if k + 1 == nt {
            for s in k.saturating_sub(1)..=k {
                let (reads, writes) = band(s);
                add(Op::LdltBand, reads, writes);
            }
            break;
        }
        if k >= 1 {
            add(Op::LdltColumnUpdate, vec![column(k - 1)], vec![column(k)]);
        }
        add(Op::LdltPanel, Vec::new(), vec![column(k), step(k)]);
        for j in 0..k {
            add(Op::LdltSwap, vec![column(k)], vec![column(j)]);
        }
        if k >= 1 {
            let (reads, writes) = band(k - 1);
            add(Op::LdltBand, reads, writes);
        }
    }
    Ok(g)
}

/// The blocks a task of [`ldlt_columns`]' graph works on, (block, step): (j, k) for
/// `LdltColumnHessenberg` (L(k, j) read), `LdltColumnUpdate` (column j read) and `LdltSwap` (column
/// j written), (s, s) for `LdltBand` step s, (k, k) for the rest.
pub fn ldlt_columns_step(task: &Task) -> (usize, usize) {
    let (first, last) = (
        task.accesses[0].tile,
        task.accesses[task.accesses.len() - 1].tile,
    );
    match task.op {
        Op::LdltColumnHessenberg => (first.col + 1, last.col),
        Op::LdltColumnUpdate => (first.col, last.col),
        Op::LdltSwap => (last.col, first.col),
        Op::LdltBand => (first.col, first.col),
        _ => (last.col, last.col),
    }
}

/// The shapes of the operands of a task of [`ldlt_columns`]' graph as its kernel works on them (the
/// rows and blocks its arguments name), in the order of its [`Op`]'s documentation: its kernel key
/// and flop count.
pub fn ldlt_columns_shapes(a: &Tiling, task: &Task) -> Vec<Shape> {
    let (block, k) = ldlt_columns_step(task);
    let nt = a.row_tiles();
    let size = |i: usize| if i < nt { a.tile_rows(i) } else { 0 };
    let from = |k: usize| a.rows() - a.offset(k.min(nt));
    match task.op {
        Op::LdltGather => vec![(from(k), size(k))],
        Op::LdltColumnHessenberg => {
            let j = block;
            let rows = if j >= 2 { size(j - 1) } else { 0 } + size(j) + size(j + 1);
            vec![(size(k), size(j)), (rows, size(k))]
        }
        Op::LdltColumnUpdate => {
            // The term of the last column ends the update, below the diagonal block.
            let rows = if block + 1 == k { from(k + 1) } else { from(k) };
            vec![(rows, size(block)), (rows, size(k))]
        }
        Op::LdltDiagonal => vec![(size(k), 0), (0, size(k)), (size(k), size(k))],
        Op::LdltPanel => vec![(size(k), size(k)), (from(k + 1), size(k))],
        Op::LdltSwap => vec![(from(k + 1), size(k)), (from(k + 1), size(block))],
        _ => {
            let (top, c) = (size(k), size(k + 1) + size(k + 2));
            vec![(top + size(k + 1), top), (top, c)]
        }
    }
}
