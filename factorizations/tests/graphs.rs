//! Properties of the task graphs: counts, flops, tile coverage and dependency soundness.

use std::collections::HashSet;

use hetla_factorizations::{
    Access, FACTOR, MatrixId, Mode, Op, ProcessGrid, RHS, Rank, SUMS, Substitution, Tail,
    TaskGraph, TaskId, TileRef, Tiling, TilingError, backward_substitution, bytes_sent, cholesky,
    distributed_substitution, forward_substitution, messages, task_rank,
};
use proptest::prelude::*;

/// Whether `to` is reachable from `from` (from < to) following successor edges.
fn reachable(g: &TaskGraph, from: TaskId, to: TaskId) -> bool {
    let mut seen = vec![false; g.len()];
    let mut stack = vec![from];
    while let Some(t) = stack.pop() {
        if t == to {
            return true;
        }
        for &s in g.successors(t) {
            if s <= to && !seen[s] {
                seen[s] = true;
                stack.push(s);
            }
        }
    }
    false
}

/// Every pair of tasks that touch a common tile, one of them writing it, is ordered by a path in
/// the graph: that is what makes any edge-respecting execution sequentially consistent.
fn assert_conflicts_are_ordered(g: &TaskGraph) {
    for b in g.ids() {
        for a in (0..b.0).map(TaskId) {
            let conflict = g.task(a).accesses.iter().any(|x| {
                g.task(b).accesses.iter().any(|y| {
                    x.tile == y.tile && (x.mode == Mode::ReadWrite || y.mode == Mode::ReadWrite)
                })
            });
            if conflict {
                assert!(
                    reachable(g, a, b),
                    "tasks {a} and {b} conflict but are unordered"
                );
            }
        }
    }
}

#[test]
fn cholesky_task_counts_and_exact_flops() {
    let tail = |n, b, from, tile| {
        let tail = Tail { from, tile };
        Tiling::square(n, b).unwrap().with_tail(tail).unwrap()
    };
    let uniform = [(1, 1), (7, 3), (10, 5), (13, 4), (100, 32), (5, 8)]
        .map(|(n, b)| Tiling::square(n, b).unwrap());
    // Smaller tiles at the end: 2 of 32, then 4 of 8 and a ragged 4; 3 of 4 then one of 1; one of 4
    // then 3 of 3.
    let tailed = [tail(100, 32, 64, 8), tail(13, 4, 12, 1), tail(13, 4, 4, 3)];
    for tiling in uniform.into_iter().chain(tailed) {
        let (n, b) = (tiling.rows(), tiling.tile());
        let g = cholesky(&tiling).unwrap();
        let nt = tiling.row_tiles();
        let pairs = nt * (nt - 1) / 2;
        let gemms = nt * (nt - 1) * nt.saturating_sub(2) / 6;
        assert_eq!(
            g.op_counts(),
            [
                (Op::Potrf, nt),
                (Op::Trsm, pairs),
                (Op::Syrk, pairs),
                (Op::GemmNt, gemms)
            ]
            .into_iter()
            .filter(|&(_, c)| c > 0)
            .collect::<Vec<_>>()
        );
        // The tiled algorithm does exactly the arithmetic of the unblocked one.
        let whole = Op::Potrf.flops(&[(n, n)]);
        assert!(
            (g.total_flops() - whole).abs() <= 1e-9 * whole,
            "n={n} b={b}"
        );
        assert!(
            g.tasks()
                .iter()
                .all(|t| t.accesses.iter().all(|a| a.tile.row >= a.tile.col))
        );
        assert_conflicts_are_ordered(&g);
    }
    assert_eq!(tailed[0].row_tiles(), 2 + 5);
}

#[test]
fn the_inverse_graph_touches_lower_tiles_orders_conflicts_and_counts_two_thirds_n_cubed() {
    let tiling = Tiling::square(1000, 100).unwrap();
    let g = hetla_factorizations::cholesky_inverse(&tiling).unwrap();
    assert!(
        g.tasks()
            .iter()
            .all(|t| t.accesses.iter().all(|a| a.tile.row >= a.tile.col))
    );
    assert_conflicts_are_ordered(&g);
    // n^3/3 for TRTRI and as much for LAUUM, up to lower-order terms.
    let leading = 2.0 * 1000f64.powi(3) / 3.0;
    assert!(
        (g.total_flops() / leading - 1.0).abs() < 0.02,
        "{}",
        g.total_flops()
    );
    // t TRTRI and t LAUUM on the diagonal, one per tile of every other kind's step.
    let t = 10;
    let count = |op: Op| g.tasks().iter().filter(|task| task.op == op).count();
    assert_eq!((count(Op::Trtri), count(Op::Lauum)), (t, t));
    assert_eq!(count(Op::SolveRight), t * (t - 1) / 2);
    assert_eq!(count(Op::TrmmAdjoint), t * (t - 1) / 2);
    assert_eq!(count(Op::SyrkAdjoint), t * (t - 1) / 2);
}

#[test]
fn the_lu_graph_orders_its_block_columns_and_counts_two_thirds_n_cubed() {
    for (n, b) in [(1000, 100), (1000, 300), (7, 7), (10, 3)] {
        let tiling = Tiling::square(n, b).unwrap();
        let g = hetla_factorizations::lu(&tiling).unwrap();
        assert!(
            g.tasks()
                .iter()
                .all(|t| t.accesses.iter().all(|a| a.tile.row == 0))
        );
        assert_conflicts_are_ordered(&g);
        // LAPACK's dgetrf count: 2 n^3/3 - n^2/2 + 5 n/6, exactly, whatever the blocks.
        let n = n as f64;
        let exact = 2.0 * n * n * n / 3.0 - n * n / 2.0 + 5.0 * n / 6.0;
        assert!(
            (g.total_flops() / exact - 1.0).abs() < 1e-12,
            "{n} {b}: {} against {exact}",
            g.total_flops()
        );
        // One panel per block column; an update for each pair right of a panel, a swap left.
        let t = tiling.col_tiles();
        let count = |op: Op| g.tasks().iter().filter(|task| task.op == op).count();
        assert_eq!(count(Op::LuPanel), t);
        assert_eq!(count(Op::LuUpdate), t * (t - 1) / 2);
        assert_eq!(count(Op::LuSwap), t * (t - 1) / 2);
        // Every update of step k comes after its panel; each panel after the last update of
        // its column.
        for (id, task) in g.tasks().iter().enumerate() {
            let k = hetla_factorizations::lu_step(task);
            let panel = g
                .tasks()
                .iter()
                .position(|p| p.op == Op::LuPanel && p.accesses[0].tile.col == k)
                .unwrap();
            if task.op != Op::LuPanel {
                assert!(reachable(&g, TaskId(panel), TaskId(id)));
            }
        }
    }
}

#[test]
fn the_ldlt_graph_orders_every_view_and_its_updates_count_n_cubed_over_three() {
    for (n, b) in [(1000, 100), (1000, 300), (7, 7), (10, 3), (20, 6)] {
        let tiling = Tiling::square(n, b).unwrap();
        let g = hetla_factorizations::ldlt(&tiling).unwrap();
        // Every task's views lie in the tiles it lists, so listed conflicts are all there are.
        assert_conflicts_are_ordered(&g);
        let t = tiling.row_tiles();
        let count = |op: Op| g.tasks().iter().filter(|task| task.op == op).count();
        let pairs = |m: usize| m * m.saturating_sub(1) / 2;
        assert_eq!(count(Op::LdltDiagonal), t);
        assert_eq!(count(Op::LdltPanel), t - 1);
        assert_eq!(count(Op::LdltUpdate), pairs(t));
        let finish = Op::GemmNt;
        assert_eq!(count(finish), pairs(t - 1));
        assert_eq!(count(Op::LdltHessenberg), pairs(t - 1));
        assert_eq!(count(Op::LdltSwap), pairs(t - 1));
        // The updates and the products that end them are the left-looking Aasen's: sum over k of 2
        // (n - (k+1) b) k b b_k, n^3/3 to leading order.
        let updates: f64 = g
            .tasks()
            .iter()
            .filter(|task| task.op == Op::LdltUpdate || task.op == finish)
            .map(|task| task.flops)
            .sum();
        let exact: f64 = (0..t.saturating_sub(1))
            .map(|k| {
                let below = (n - tiling.offset(k + 1)) as f64;
                2.0 * below * tiling.offset(k) as f64 * tiling.tile_rows(k) as f64
            })
            .sum();
        assert_eq!(updates, exact, "{n} {b}");
        // Step k + 1 waits for panel k: each of its tasks reads a tile the panel wrote, or one the
        // panel's interchanges wrote.
        for (id, task) in g.tasks().iter().enumerate() {
            let (_, k) = hetla_factorizations::ldlt_step(task);
            if k == 0 || task.op == Op::LdltSwap {
                continue;
            }
            let panel = g
                .tasks()
                .iter()
                .position(|p| {
                    p.op == Op::LdltPanel && hetla_factorizations::ldlt_step(p).1 == k - 1
                })
                .unwrap();
            assert!(reachable(&g, TaskId(panel), TaskId(id)), "{n} {b}: {id}");
        }
        // T's block steps: one per block, a chain, each after the tasks that make the blocks of
        // T it reads (diagonal k and k + 1, panel k + 1), and their chain's tiles dead to every
        // other task after them.
        assert_eq!(count(Op::LdltBand), t);
        let find = |op: Op, k: usize| {
            g.tasks()
                .iter()
                .position(|p| p.op == op && hetla_factorizations::ldlt_step(p).1 == k)
                .map(TaskId)
        };
        for k in 0..t {
            let band = find(Op::LdltBand, k).unwrap();
            let before = [
                k.checked_sub(1).and_then(|j| find(Op::LdltBand, j)),
                find(Op::LdltDiagonal, k),
                find(Op::LdltDiagonal, k + 1),
                find(Op::LdltPanel, k + 1),
            ];
            for p in before.into_iter().flatten() {
                assert!(reachable(&g, p, band), "{n} {b}: step {k}");
            }
            let written = g.task(band).accesses.last().unwrap().tile;
            for later in &g.tasks()[band.0 + 1..] {
                if later.op != Op::LdltBand {
                    assert!(later.accesses.iter().all(|a| a.tile != written), "{n} {b}");
                }
            }
        }
        let flops = |op: Op| -> f64 {
            g.tasks()
                .iter()
                .filter(|task| task.op == op)
                .map(|task| task.flops)
                .sum()
        };
        // O(n b^2): per step at most a 2b x b panel's LU (10/3 b^3), the solve of a b x 2b block
        // row (2 b^3) and the update of b rows of it (4 b^3).
        let band = flops(Op::LdltBand);
        assert!(
            band > 0.0 && band <= 10.0 * (n * b * b) as f64,
            "{n} {b}: {band}"
        );
        // Each task's kernel shapes fit its operation.
        for task in g.tasks() {
            let shapes = hetla_factorizations::ldlt_shapes(&tiling, task);
            task.op.check_shapes(&shapes).unwrap();
        }
    }
    let wide = Tiling::new(10, 12, 3).unwrap();
    assert!(hetla_factorizations::ldlt(&wide).is_err());
}

#[test]
fn solve_graphs_have_the_flops_of_two_triangular_solves() {
    for (n, r, b) in [(7, 1, 3), (10, 4, 5), (9, 9, 4), (1, 3, 2)] {
        let l = Tiling::square(n, b).unwrap();
        let rhs = Tiling::new(n, r, b).unwrap();
        let mut g = TaskGraph::new();
        forward_substitution(&mut g, &l, &rhs).unwrap();
        let forward = g.total_flops();
        backward_substitution(&mut g, &l, &rhs).unwrap();
        let nf = (n * n * r) as f64;
        assert!(
            (forward - nf).abs() < 1e-9 * nf,
            "forward n={n} r={r} b={b}"
        );
        assert!((g.total_flops() - 2.0 * nf).abs() < 1e-9 * nf);
        assert_conflicts_are_ordered(&g);
        // The factor is only read, and only its lower tiles.
        for t in g.tasks() {
            for a in &t.accesses {
                if a.tile.matrix == FACTOR {
                    assert_eq!(a.mode, Mode::Read);
                    assert!(a.tile.row >= a.tile.col);
                } else {
                    assert_eq!(a.tile.matrix, RHS);
                }
            }
        }
    }
}

#[test]
fn distributed_substitutions_update_beside_l_and_never_send_its_tiles_below_the_diagonal() {
    for (n, r, b, grid) in [(23, 1, 4, "2x3"), (40, 9, 4, "3x2"), (17, 5, 3, "1x2")] {
        let grid: ProcessGrid = grid.parse().unwrap();
        let l = Tiling::square(n, b).unwrap();
        let rhs = Tiling::new(n, r, b).unwrap();
        for which in [
            Substitution::Lower,
            Substitution::LowerAdjoint,
            Substitution::UnitLower,
            Substitution::Upper,
        ] {
            let mut g = TaskGraph::new();
            distributed_substitution(&mut g, &l, &rhs, &grid, which).unwrap();
            // The flops of a substitution, plus the partial sums' additions.
            let adds: f64 = g
                .tasks()
                .iter()
                .filter(|t| t.op == Op::Add)
                .map(|t| t.flops)
                .sum();
            // A unit diagonal divides nothing: n (n - 1) r.
            let unit = if which == Substitution::UnitLower {
                n * r
            } else {
                0
            };
            let nf = (n * n * r - unit) as f64;
            assert!((g.total_flops() - adds - nf).abs() < 1e-9 * nf);
            assert_conflicts_are_ordered(&g);
            for t in g.ids() {
                let task = g.task(t);
                if matches!(task.op, Op::Update | Op::UpdateTrans) {
                    assert_eq!(task_rank(&g, &grid, t), grid.owner(task.accesses[0].tile));
                }
            }
            for m in messages(&g, &grid) {
                let diagonal = m.tile.matrix == FACTOR && m.tile.row == m.tile.col;
                assert!(diagonal || m.tile.matrix != FACTOR, "{m:?}");
                // Partial sums go to their row's rank once complete.
                if m.tile.matrix == SUMS {
                    assert!(m.version.is_some());
                }
            }
        }
        // On one rank it is the plain substitution.
        let one: ProcessGrid = "1x1".parse().unwrap();
        let (mut plain, mut here) = (TaskGraph::new(), TaskGraph::new());
        forward_substitution(&mut plain, &l, &rhs).unwrap();
        distributed_substitution(&mut here, &l, &rhs, &one, Substitution::Lower).unwrap();
        // The same tasks (in another order: right-hand-side tile columns outermost).
        let sorted = |g: &TaskGraph| {
            let mut tasks: Vec<String> = g.tasks().iter().map(|t| format!("{t:?}")).collect();
            tasks.sort();
            tasks
        };
        assert!(sorted(&plain) == sorted(&here), "n {n}, r {r}, b {b}");
    }
}

#[test]
fn mismatched_tilings_are_errors() {
    let l = Tiling::square(10, 4).unwrap();
    let mut g = TaskGraph::new();
    assert!(matches!(
        forward_substitution(&mut g, &l, &Tiling::new(9, 2, 4).unwrap()),
        Err(TilingError::Mismatch { .. })
    ));
    assert!(matches!(
        cholesky(&Tiling::new(4, 5, 2).unwrap()),
        Err(TilingError::NotSquare { rows: 4, cols: 5 })
    ));
}

proptest! {
    // The check is cubic in the task count: keep graphs at 10 x 10 tiles or fewer.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn cholesky_dependencies_are_sound(n in 1usize..30, b in 3usize..12) {
        let g = cholesky(&Tiling::square(n, b).unwrap()).unwrap();
        assert_conflicts_are_ordered(&g);
    }

    #[test]
    fn random_access_sequences_are_sequentially_consistent(
        tasks in prop::collection::vec(prop::collection::vec((0usize..5, any::<bool>()), 1..4), 1..30)
    ) {
        let mut g = TaskGraph::new();
        for accesses in tasks {
            let accesses = accesses
                .into_iter()
                .map(|(tile, write)| Access {
                    tile: TileRef::new(MatrixId(0), tile, 0),
                    mode: if write { Mode::ReadWrite } else { Mode::Read },
                })
                .collect();
            g.add_task(Op::GemmNt, accesses, 0.0);
        }
        assert_conflicts_are_ordered(&g);
        for t in g.ids() {
            prop_assert!(g.predecessors(t).iter().all(|&p| p < t));
        }
    }
}

/// The Cholesky messages counted from the algorithm, not the graph: after step k, L_kk goes to the
/// ranks of the TRSMs below it, and L_ik to the ranks of the SYRK and GEMMs of row i and of column
/// i of the trailing matrix.
fn cholesky_closed_form(tiles: usize, grid: &ProcessGrid) -> HashSet<(usize, usize, Rank)> {
    let owner = |i, j| grid.owner(TileRef::new(FACTOR, i, j));
    let mut out = HashSet::new();
    for k in 0..tiles {
        for i in k + 1..tiles {
            if owner(i, k) != owner(k, k) {
                out.insert((k, k, owner(i, k)));
            }
        }
        for i in k + 1..tiles {
            let needs = (k + 1..=i)
                .map(|j| owner(i, j))
                .chain((i + 1..tiles).map(|r| owner(r, i)));
            for to in needs.filter(|&to| to != owner(i, k)) {
                out.insert((i, k, to));
            }
        }
    }
    out
}

#[test]
fn cholesky_messages_are_the_closed_form_each_sent_once() {
    for tiles in [1, 2, 5, 8] {
        for (p, q) in [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (4, 4)] {
            let grid = ProcessGrid::new(p, q).unwrap();
            let graph = cholesky(&Tiling::square(tiles * 10, 10).unwrap()).unwrap();
            let sent = messages(&graph, &grid);
            let got: HashSet<_> = sent
                .iter()
                .map(|m| (m.tile.row, m.tile.col, m.to))
                .collect();
            assert_eq!(got.len(), sent.len(), "a tile went twice to one rank");
            assert_eq!(
                got,
                cholesky_closed_form(tiles, &grid),
                "{tiles} tiles, {grid}"
            );
            for m in &sent {
                assert_eq!(m.from, grid.owner(m.tile));
                assert_ne!(m.from, m.to);
                // Only final tiles of L travel: the POTRF or TRSM that wrote them.
                let writer = graph.task(m.version.unwrap()).op.to_string();
                assert!(["potrf", "trsm"].contains(&writer.as_str()), "{writer}");
                assert!(m.version.unwrap() < m.first_reader.unwrap());
            }
        }
    }
}

#[test]
fn one_process_sends_nothing_and_ragged_tiles_count_their_own_bytes() {
    let graph = cholesky(&Tiling::square(1000, 300).unwrap()).unwrap();
    assert!(messages(&graph, &ProcessGrid::new(1, 1).unwrap()).is_empty());
    let grid = ProcessGrid::new(2, 2).unwrap();
    let sent = messages(&graph, &grid);
    let tiling = Tiling::square(1000, 300).unwrap();
    let bytes = bytes_sent(&grid, &sent, |t| {
        let (r, c) = tiling.tile_shape(t.row, t.col);
        r * c * 8
    });
    let expected: usize = sent
        .iter()
        .map(|m| {
            let (r, c) = tiling.tile_shape(m.tile.row, m.tile.col);
            r * c * 8
        })
        .sum();
    assert_eq!(bytes.iter().sum::<usize>(), expected);
    assert!(bytes.iter().all(|&b| b > 0), "{bytes:?}");
}
