//! How a task graph splits over the ranks of a process grid: the one plan that the
//! distributed executor (feature `mpi`, `distributed/cholesky.rs`) and the distributed
//! simulation ([`crate::simulation::simulate_cholesky_grid`]) both follow, so that a
//! simulated run sends exactly what a real one does.
//!
//! - **Tasks** run where the tile they write lives ([`task_rank`], owner computes); each
//!   rank's tasks form a graph of their own, in the whole graph's order.
//! - **Priorities** are the tasks' bottom levels in the whole graph: a rank's own part
//!   misses the remote successors, and would rank the tasks that feed other ranks too low.
//! - **Messages** are [`messages`]' list: each final tile of L once to each rank that runs
//!   a task reading it. The sender is the task that wrote the tile last; the receivers are
//!   every task of the destination that reads it, which wait for it as an input from
//!   outside their run.
//! - **Refused**: a graph that would send a tile's initial contents or two versions of one
//!   tile to one rank (not Cholesky's communication; supporting it needs one receive
//!   buffer per version).

use std::collections::HashMap;
use std::sync::Arc;

use hetla_factorizations::{
    Message, ProcessGrid, Rank, TaskGraph, TaskId, TileRef, messages, task_rank,
};

/// One rank's share of a distributed run.
pub(crate) struct RankPlan {
    /// This rank's tasks, in the whole graph's order.
    pub graph: TaskGraph,
    /// The whole graph's id of each of them.
    pub whole: Vec<TaskId>,
    /// Their bottom levels in the whole graph (remote successors included).
    pub priorities: Arc<[f64]>,
    /// Per task of `graph`, the ranks its written tile goes to once it ends.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub sends: Vec<Vec<Rank>>,
    /// The remote tiles this rank reads, each with its tasks that read it, by tile.
    pub receives: Vec<(TileRef, Vec<TaskId>)>,
    /// Tiles expected from each rank.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub expected_from: Vec<usize>,
}

/// A graph split over every rank of a grid.
pub(crate) struct GridPlan {
    /// Each rank's share, by rank.
    pub ranks: Vec<RankPlan>,
    /// Every message, in [`messages`]' order.
    pub messages: Vec<Message>,
    /// Each task of the whole graph's id on its rank.
    pub local: Vec<TaskId>,
}

/// Why a graph's communication is not what a distributed run carries: the tile, and what
/// would be sent of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsupported {
    pub tile: TileRef,
    pub what: &'static str,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tile ({}, {}) would be sent with {}: a distributed run sends final tiles only",
            self.tile.row, self.tile.col, self.what
        )
    }
}

impl GridPlan {
    /// Splits `whole` over `grid` (see the module documentation).
    pub fn new(whole: &TaskGraph, grid: &ProcessGrid) -> Result<Self, Unsupported> {
        let levels = hetla_runtime::bottom_levels(whole);
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
        let mut sends: Vec<Vec<Vec<Rank>>> =
            graphs.iter().map(|g| vec![Vec::new(); g.len()]).collect();
        let mut receives: Vec<HashMap<TileRef, Vec<TaskId>>> = vec![HashMap::new(); size];
        let mut expected_from = vec![vec![0; size]; size];
        for m in &all {
            let Some(version) = m.version else {
                return Err(Unsupported {
                    tile: m.tile,
                    what: "its initial contents",
                });
            };
            // Its writer runs on its owner, the sender.
            debug_assert_eq!(rank_of[version.0], m.from);
            sends[m.from.0][local[version.0].0].push(m.to);
            expected_from[m.to.0][m.from.0] += 1;
            if receives[m.to.0].insert(m.tile, Vec::new()).is_some() {
                return Err(Unsupported {
                    tile: m.tile,
                    what: "two versions of it",
                });
            }
        }
        let ranks = graphs
            .into_iter()
            .zip(wholes)
            .zip(priorities)
            .zip(sends)
            .zip(receives)
            .zip(expected_from)
            .map(
                |(((((graph, whole), priorities), sends), mut receives), expected_from)| {
                    for t in graph.ids() {
                        for a in &graph.task(t).accesses {
                            // Once per access: the count of its inputs from outside.
                            if let Some(readers) = receives.get_mut(&a.tile) {
                                readers.push(t);
                            }
                        }
                    }
                    let mut receives: Vec<_> = receives.into_iter().collect();
                    receives.sort_unstable_by_key(|(tile, _)| *tile);
                    RankPlan {
                        graph,
                        whole,
                        priorities: priorities.into(),
                        sends,
                        receives,
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
    use hetla_factorizations::{Tiling, cholesky};

    use super::*;

    #[test]
    fn every_task_runs_once_and_every_message_has_a_sender_and_readers() {
        let tiling = Tiling::square(100, 16).unwrap();
        let whole = cholesky(&tiling).unwrap();
        let grid: ProcessGrid = "2x3".parse().unwrap();
        let plan = GridPlan::new(&whole, &grid).unwrap();
        let tasks: usize = plan.ranks.iter().map(|r| r.graph.len()).sum();
        assert_eq!(tasks, whole.len());
        let sent: usize = plan.ranks.iter().flat_map(|r| &r.sends).map(Vec::len).sum();
        assert_eq!(sent, plan.messages.len());
        for m in &plan.messages {
            let to = &plan.ranks[m.to.0];
            let (_, readers) = to.receives.iter().find(|(t, _)| *t == m.tile).unwrap();
            assert!(!readers.is_empty());
            // The first reader is the message's.
            assert_eq!(to.whole[readers[0].0], m.first_reader);
        }
        for (r, rank) in plan.ranks.iter().enumerate() {
            let expected: usize = rank.expected_from.iter().sum();
            let arriving = plan.messages.iter().filter(|m| m.to.0 == r).count();
            assert_eq!(expected, arriving);
        }
    }
}
