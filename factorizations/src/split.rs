//! How a task graph splits over the ranks of a process grid: the one split that hetla's distributed
//! executor (feature `mpi`) and its distributed simulation both follow, so that a simulated run
//! sends exactly what a real one does.
//!
//! - **Tasks** run where the tile they write lives ([`task_rank`], owner computes); each rank's
//!   tasks form a graph of their own, in the whole graph's order.
//! - **Priorities** are the tasks' bottom levels in the whole graph: a rank's own part misses the
//!   remote successors, and would rank the tasks that feed other ranks too low.
//! - **Messages** are [`messages`]' list: each version of a tile that a remote task reads, once to
//!   each rank that runs such a task (for Cholesky, each final tile of L). The sender is the task
//!   that wrote the version (or, for a tile the run only reads, the start of the run); the
//!   receivers are every task of the destination that reads it, which wait for it as an input from
//!   outside their run.
//! - **Tiles written away from their owner** (a distributed QR's merges of two ranks' triangles
//!   write both): the writer's rank receives the tile's current version like any input, sends its
//!   write on to later readers elsewhere, and the final version returns to the owner once written
//!   ([`RankShare::returning`]); the owner's tile in place is not touched meanwhile (a version of
//!   it the owner reads comes back as below).
//! - **Versions**: a rank may receive several versions of one tile (a distributed QR's updates on
//!   another process column read a tile's reflectors from its tile QR, then from its merge), each
//!   into a slot of its own ([`Receipt`]), which the rank's tasks that access the tile while that
//!   version is its copy use (a version written here into a received slot stays in that slot).
//! - **Versions back at their owner**: a version written away from its owner that a task of the
//!   owner reads before the run ends (a distributed LU's panel, factored where its diagonal tile
//!   lives, read by the updates of its rows everywhere) is received by the owner like any other,
//!   into a slot of its own; the owner's later accesses use that slot, and if it holds the tile's
//!   final version ([`Receipt::home`]) it is copied into the owner's tile once the run ends (the
//!   owner's tile stays as it was until then, so that tasks of the owner still reading an earlier
//!   version never race the arrival).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::distribution::{Message, ProcessGrid, Rank, messages, task_rank};
use crate::graph::{TaskGraph, TaskId, TileRef};

/// One rank's share of a distributed run.
pub struct RankShare {
    /// This rank's tasks, in the whole graph's order.
    pub graph: TaskGraph,
    /// The whole graph's id of each of them.
    pub whole: Vec<TaskId>,
    /// Their bottom levels in the whole graph (remote successors included).
    pub priorities: Arc<[f64]>,
    /// Per task of `graph`, the tiles it writes that go to other ranks, each with a rank it goes
    /// to, once it ends.
    pub sends: Vec<Vec<(TileRef, Rank)>>,
    /// Tiles of this rank sent as the run finds them, each with the ranks it goes to.
    pub initial_sends: Vec<(TileRef, Vec<Rank>)>,
    /// The remote tile versions this rank receives, by tile and version.
    pub receives: Vec<Receipt>,
    /// This rank's tiles whose final version another rank writes, which return to it after their
    /// last writer (received in place, read by no task here).
    pub returning: Vec<TileRef>,
    /// Tiles expected from each rank that sends this one any, by rank (the others send none: a grid
    /// of many ranks costs memory in proportion to its messages, not to its ranks squared).
    pub expected_from: BTreeMap<Rank, usize>,
}

/// A version of a remote tile a rank receives, and the rank's tasks that use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The tile.
    pub tile: TileRef,
    /// The task whose write it is (`None`: the tile as the run found it).
    pub version: Option<TaskId>,
    /// The rank's tasks (local ids) that access the tile while this version, or a write of it made
    /// on the rank, is the rank's copy, once per access: each waits for it as an input from outside
    /// its run, and the copy is freed once they all ran.
    pub readers: Vec<TaskId>,
    /// Whether the slot ends the run holding the tile's final version on its owner (this rank): it
    /// is copied into the owner's tile once the run ends, and not freed before.
    pub home: bool,
}

/// A graph split over every rank of a grid.
pub struct GridSplit {
    /// Each rank's share, by rank.
    pub ranks: Vec<RankShare>,
    /// Every message, in [`messages`]' order.
    pub messages: Vec<Message>,
    /// Each task of the whole graph's id on its rank.
    pub local: Vec<TaskId>,
}

/// Why a graph's communication is not what a distributed run carries: the tile, and what would be
/// sent of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitError {
    /// The tile.
    pub tile: TileRef,
    /// What would be sent of it.
    pub what: &'static str,
}

impl std::error::Error for SplitError {}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tile ({}, {}) would be sent with {}: a distributed run sends one version of a tile to a rank",
            self.tile.row, self.tile.col, self.what
        )
    }
}

impl GridSplit {
    /// Splits `whole` over `grid` (see the module documentation).
    pub fn new(whole: &TaskGraph, grid: &ProcessGrid) -> Result<Self, SplitError> {
        let levels = whole.bottom_levels();
        let size = grid.size();
        let mut graphs: Vec<TaskGraph> = (0..size).map(|_| TaskGraph::new()).collect();
        let mut wholes: Vec<Vec<TaskId>> = vec![Vec::new(); size];
        let mut priorities: Vec<Vec<f64>> = vec![Vec::new(); size];
        let mut rank_of = Vec::with_capacity(whole.len());
        let mut local = Vec::with_capacity(whole.len());
        for t in whole.ids() {
            let r = task_rank(whole, grid, t);
            let task = whole.task(t);
            local.push(graphs[r.0].add_task(task.op, task.accesses.clone(), task.flops));
            wholes[r.0].push(t);
            priorities[r.0].push(levels[t]);
            rank_of.push(r);
        }
        let all = messages(whole, grid);
        let mut sends: Vec<Vec<Vec<(TileRef, Rank)>>> =
            graphs.iter().map(|g| vec![Vec::new(); g.len()]).collect();
        let mut initial: Vec<Vec<(TileRef, Vec<Rank>)>> = vec![Vec::new(); size];
        let mut initial_index: HashMap<TileRef, usize> = HashMap::new();
        let mut receives: Vec<Vec<Receipt>> = vec![Vec::new(); size];
        let mut expected_from: Vec<BTreeMap<Rank, usize>> = vec![BTreeMap::new(); size];
        let mut returning: Vec<Vec<TileRef>> = vec![Vec::new(); size];
        for m in &all {
            *expected_from[m.to.0].entry(m.from).or_default() += 1;
            if m.first_reader.is_none() {
                returning[m.to.0].push(m.tile);
            }
            match m.version {
                Some(version) => {
                    // Its writer's rank holds it.
                    debug_assert_eq!(rank_of[version.0], m.from);
                    sends[m.from.0][local[version.0].0].push((m.tile, m.to));
                }
                // A tile's owner sends it: one index over the ranks.
                None => {
                    let mine = &mut initial[m.from.0];
                    let i = *initial_index.entry(m.tile).or_insert_with(|| {
                        mine.push((m.tile, Vec::new()));
                        mine.len() - 1
                    });
                    mine[i].1.push(m.to);
                }
            }
            if m.first_reader.is_some() {
                receives[m.to.0].push(Receipt {
                    tile: m.tile,
                    version: m.version,
                    readers: Vec::new(),
                    home: false,
                });
            }
        }
        for r in &mut receives {
            r.sort_unstable_by_key(|x| (x.tile, x.version));
        }
        // Which receipt each access of a rank's task uses: the version it finds, if received, else
        // the receipt a task of the rank wrote that version into (once per access).
        let mut version: HashMap<TileRef, TaskId> = HashMap::new();
        let mut held: Vec<HashMap<TileRef, usize>> = vec![HashMap::new(); size];
        for t in whole.ids() {
            let r = rank_of[t.0].0;
            let task = whole.task(t);
            for a in &task.accesses {
                let v = version.get(&a.tile).copied();
                let key = (a.tile, v);
                if let Ok(i) = receives[r].binary_search_by_key(&key, |x| (x.tile, x.version)) {
                    held[r].insert(a.tile, i);
                }
                if let Some(&i) = held[r].get(&a.tile) {
                    receives[r][i].readers.push(local[t.0]);
                }
            }
            for a in task.accesses.iter().filter(|a| a.mode.writes()) {
                version.insert(a.tile, t);
            }
        }
        // A rank's own tile whose last copy here is a slot, and whose final version does not
        // return to it by a message of its own: that slot holds the final version.
        for (r, held) in held.iter().enumerate() {
            for (&tile, &i) in held {
                if grid.owner(tile).0 == r && !returning[r].contains(&tile) {
                    receives[r][i].home = true;
                }
            }
        }
        let ranks = graphs
            .into_iter()
            .zip(wholes)
            .zip(priorities)
            .zip(sends.into_iter().zip(initial))
            .zip(receives)
            .zip(expected_from.into_iter().zip(returning))
            .map(
                |(
                    ((((graph, whole), priorities), (sends, initial_sends)), receives),
                    (expected_from, returning),
                )| {
                    RankShare {
                        graph,
                        whole,
                        priorities: priorities.into(),
                        sends,
                        initial_sends,
                        receives,
                        returning,
                        expected_from,
                    }
                },
            )
            .collect();
        Ok(Self {
            ranks,
            messages: all,
            local,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{FACTOR, cholesky, forward_substitution};
    use crate::tiling::Tiling;

    #[test]
    fn every_task_runs_once_and_every_message_has_a_sender_and_readers() {
        let tiling = Tiling::square(100, 16).unwrap();
        let whole = cholesky(&tiling).unwrap();
        let grid: ProcessGrid = "2x3".parse().unwrap();
        let plan = GridSplit::new(&whole, &grid).unwrap();
        let tasks: usize = plan.ranks.iter().map(|r| r.graph.len()).sum();
        assert_eq!(tasks, whole.len());
        let sent: usize = plan.ranks.iter().flat_map(|r| &r.sends).map(Vec::len).sum();
        assert_eq!(sent, plan.messages.len());
        for m in &plan.messages {
            let to = &plan.ranks[m.to.0];
            let receipt = to
                .receives
                .iter()
                .find(|x| (x.tile, x.version) == (m.tile, m.version));
            let readers = &receipt.unwrap().readers;
            assert!(!readers.is_empty());
            // The first reader is the message's.
            assert_eq!(Some(to.whole[readers[0].0]), m.first_reader);
        }
        for (r, rank) in plan.ranks.iter().enumerate() {
            let expected: usize = rank.expected_from.values().sum();
            let arriving = plan.messages.iter().filter(|m| m.to.0 == r).count();
            assert_eq!(expected, arriving);
        }
    }

    #[test]
    fn tiles_a_run_only_reads_are_sent_from_its_start_by_their_owners() {
        let l = Tiling::square(70, 16).unwrap();
        let b = Tiling::new(70, 20, 16).unwrap();
        let mut whole = TaskGraph::new();
        forward_substitution(&mut whole, &l, &b).unwrap();
        let grid: ProcessGrid = "2x2".parse().unwrap();
        let plan = GridSplit::new(&whole, &grid).unwrap();
        let initial: Vec<_> = plan
            .messages
            .iter()
            .filter(|m| m.version.is_none())
            .collect();
        // L is only read: all of its messages, and none of B's, leave as the run starts.
        assert!(!initial.is_empty());
        assert!(
            plan.messages
                .iter()
                .all(|m| (m.tile.matrix == FACTOR) == m.version.is_none())
        );
        for m in initial {
            let sends = &plan.ranks[m.from.0].initial_sends;
            let (_, to) = sends.iter().find(|(t, _)| *t == m.tile).unwrap();
            assert!(to.contains(&m.to));
        }
        let listed: usize = plan
            .ranks
            .iter()
            .flat_map(|r| &r.initial_sends)
            .map(|(_, to)| to.len())
            .sum();
        assert_eq!(
            listed,
            plan.messages.iter().filter(|m| m.version.is_none()).count()
        );
    }

    #[test]
    fn tiles_a_merge_writes_away_from_their_owner_travel_on_and_return_home() {
        use crate::qr::{QrTree, qr};
        let a = Tiling::new(8 * 16 - 5, 3 * 16, 16).unwrap();
        let (mt, nt) = (8, 3);
        for p in [2usize, 3, 4] {
            let mut back = 0;
            let whole = qr(&a, QrTree::Domains(p)).unwrap();
            let grid = ProcessGrid::new(p, 1).unwrap();
            let split = GridSplit::new(&whole, &grid).unwrap();
            // The diagonal rows travel (every merge of step k writes row k where the eliminated
            // triangle lives), and come home: tile (k, j), j >= k, for each step with a merge.
            let mut returning: Vec<TileRef> = split
                .ranks
                .iter()
                .flat_map(|r| r.returning.iter().copied())
                .collect();
            returning.sort_unstable();
            let expected: Vec<TileRef> = (0..nt)
                .filter(|&k| k + 1 < mt)
                .flat_map(|k| (k..nt).map(move |j| TileRef::new(crate::FACTOR, k, j)))
                .collect();
            assert_eq!(returning, expected, "{p} x 1");
            for (r, rank) in split.ranks.iter().enumerate() {
                assert!(rank.returning.iter().all(|&t| grid.owner(t).0 == r));
                let expected: usize = rank.expected_from.values().sum();
                let arriving = split.messages.iter().filter(|m| m.to.0 == r).count();
                assert_eq!(expected, arriving);
            }
            for m in &split.messages {
                // Sent by the rank whose task wrote it, with the tile among that task's writes.
                let v = m.version.expect("every tile is written before it travels");
                assert_eq!(task_rank(&whole, &grid, v), m.from);
                let sends = &split.ranks[m.from.0].sends[split.local[v.0].0];
                assert!(sends.contains(&(m.tile, m.to)), "{m:?}");
                if m.first_reader.is_none() {
                    assert_eq!(m.to, grid.owner(m.tile), "{m:?}");
                }
                // A survivor of the first merges, eliminated later where it lives, comes back to
                // its owner mid-run (on four process rows: the third domain's top).
                back += usize::from(m.first_reader.is_some() && m.to == grid.owner(m.tile));
            }
            let sent: usize = split
                .ranks
                .iter()
                .flat_map(|r| &r.sends)
                .map(Vec::len)
                .sum();
            assert_eq!(sent, split.messages.len());
            // Row k + 2 of each step with four domains, from the rank of its first merge.
            let expected: usize = (0..nt)
                .filter(|&k| p == 4 && k + 3 < mt)
                .map(|k| nt - k)
                .sum();
            assert_eq!(back, expected, "{p} x 1");
        }
    }

    #[test]
    fn a_rank_receives_two_versions_of_a_tile_and_each_access_uses_one_of_them() {
        use crate::qr::{QrTree, qr};
        let a = Tiling::new(8 * 16, 4 * 16, 16).unwrap();
        let whole = qr(&a, QrTree::Domains(2)).unwrap();
        let grid = ProcessGrid::new(2, 2).unwrap();
        let split = GridSplit::new(&whole, &grid).unwrap();
        let mut twice = 0;
        for (r, rank) in split.ranks.iter().enumerate() {
            for pair in rank.receives.windows(2) {
                twice += usize::from(pair[0].tile == pair[1].tile);
            }
            // Every access of a task here to a tile another rank owns uses exactly one receipt.
            for t in rank.graph.ids() {
                for acc in &rank.graph.task(t).accesses {
                    let uses = rank
                        .receives
                        .iter()
                        .filter(|x| x.tile == acc.tile)
                        .map(|x| x.readers.iter().filter(|&&u| u == t).count())
                        .sum::<usize>();
                    let accesses = rank.graph.task(t).accesses.iter();
                    let same = accesses.filter(|b| b.tile == acc.tile).count();
                    let away = grid.owner(acc.tile).0 != r;
                    assert_eq!(uses, if away { same } else { 0 }, "rank {r} task {t:?}");
                }
            }
        }
        // The tile QR's version of a domain's top tile, then its merge's, to the ranks updating
        // its row in other process columns.
        assert!(twice > 0);
    }
}
