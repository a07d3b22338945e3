//! The task graph: tasks with tile accesses, and dependencies inferred from them.

use std::collections::HashMap;

use hetla_kernels::Op;

/// Identifies one of the matrices a graph works on (the factor, the right-hand sides...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatrixId(pub u8);

/// One tile of one matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileRef {
    /// The matrix the tile belongs to.
    pub matrix: MatrixId,
    /// Tile row.
    pub row: usize,
    /// Tile column.
    pub col: usize,
}

impl TileRef {
    /// Tile (row, col) of `matrix`.
    pub fn new(matrix: MatrixId, row: usize, col: usize) -> Self {
        Self { matrix, row, col }
    }
}

/// How a task uses a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Only read.
    Read,
    /// Read and overwritten.
    ReadWrite,
    /// Overwritten without being read (a product with beta = 0 on its first step): no copy of the
    /// old contents is ever needed.
    Write,
}

impl Mode {
    /// Whether the access changes the tile.
    pub fn writes(self) -> bool {
        self != Mode::Read
    }

    /// Whether the access needs the tile's current contents.
    pub fn reads(self) -> bool {
        self != Mode::Write
    }
}

/// One tile access of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// The tile.
    pub tile: TileRef,
    /// How it is used.
    pub mode: Mode,
}

/// A task of a graph: its index in submission order. Tables over a graph's tasks index by it
/// directly (`Vec<T>` and `[T]` implement `Index<TaskId>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct TaskId(pub usize);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

crate::index_by!(TaskId);

/// One task: a tile operation, its tile accesses in the operand order of [`Op`] (reads first, the
/// written tile last), and its flop count.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The operation.
    pub op: Op,
    /// Tiles used, in operand order.
    pub accesses: Vec<Access>,
    /// Floating-point operations the task performs.
    pub flops: f64,
}

/// Who last wrote a tile and who read it since, while a graph is being built.
#[derive(Debug, Clone, Default)]
struct TileHistory {
    last_writer: Option<TaskId>,
    readers_since_write: Vec<TaskId>,
}

/// A directed acyclic graph of tasks built in sequential order. Every edge goes from an earlier
/// task to a later one, so submission order is a valid topological order.
#[derive(Debug, Clone, Default)]
pub struct TaskGraph {
    tasks: Vec<Task>,
    predecessors: Vec<Vec<TaskId>>,
    successors: Vec<Vec<TaskId>>,
    history: HashMap<TileRef, TileHistory>,
}

impl TaskGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a task and returns its id. Its predecessors are the tasks it must wait for: the last
    /// writer of every tile it uses (read after write, write after write) and, for every tile it
    /// overwrites, the readers since that write (write after read).
    pub fn add_task(&mut self, op: Op, accesses: Vec<Access>, flops: f64) -> TaskId {
        let id = TaskId(self.tasks.len());
        let mut preds = Vec::new();
        for access in &accesses {
            let h = self.history.entry(access.tile).or_default();
            preds.extend(h.last_writer);
            match access.mode {
                Mode::Read => h.readers_since_write.push(id),
                Mode::ReadWrite | Mode::Write => {
                    preds.append(&mut h.readers_since_write);
                    h.last_writer = Some(id);
                }
            }
        }
        // A task that reads a tile it also writes must not wait for itself.
        preds.retain(|&p| p != id);
        preds.sort_unstable();
        preds.dedup();
        for &p in &preds {
            self.successors[p].push(id);
        }
        self.predecessors.push(preds);
        self.successors.push(Vec::new());
        self.tasks.push(Task {
            op,
            accesses,
            flops,
        });
        id
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the graph has no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// All tasks in submission order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Task `id`.
    pub fn task(&self, id: TaskId) -> &Task {
        &self.tasks[id]
    }

    /// The tasks `id` waits for, sorted.
    pub fn predecessors(&self, id: TaskId) -> &[TaskId] {
        &self.predecessors[id]
    }

    /// The tasks that wait for `id`, sorted.
    pub fn successors(&self, id: TaskId) -> &[TaskId] {
        &self.successors[id]
    }

    /// The ids of the tasks, in submission order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = TaskId> + ExactSizeIterator + use<> {
        (0..self.tasks.len()).map(TaskId)
    }

    /// Number of dependency edges.
    pub fn edge_count(&self) -> usize {
        self.predecessors.iter().map(Vec::len).sum()
    }

    /// Multiplies every task's flops by `factor`: builders count real flops, and a graph run in
    /// complex arithmetic does 4 times as many (`Precision::flop_factor`).
    pub fn scale_flops(&mut self, factor: f64) {
        for task in &mut self.tasks {
            task.flops *= factor;
        }
    }

    /// Bottom levels in flops: each task's flops plus the largest bottom level of its successors
    /// (the schedulers' priorities: the critical path runs first).
    pub fn bottom_levels(&self) -> Vec<f64> {
        let mut levels = vec![0.0; self.len()];
        // Edges go from earlier to later tasks: one backward sweep suffices.
        for t in self.ids().rev() {
            let below = self
                .successors(t)
                .iter()
                .map(|&s| levels[s])
                .fold(0.0, f64::max);
            levels[t] = self.task(t).flops + below;
        }
        levels
    }

    /// Total flops of all tasks.
    pub fn total_flops(&self) -> f64 {
        self.tasks.iter().map(|t| t.flops).sum()
    }

    /// Number of tasks of each kind of operation, in [`Op::KINDS`] order, kinds absent omitted.
    pub fn op_counts(&self) -> Vec<(Op, usize)> {
        Op::KINDS
            .into_iter()
            .map(|op| (op, self.tasks.iter().filter(|t| t.op.same_kind(op)).count()))
            .filter(|&(_, c)| c > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(row: usize) -> TileRef {
        TileRef::new(MatrixId(0), row, 0)
    }
    fn r(row: usize) -> Access {
        Access {
            tile: t(row),
            mode: Mode::Read,
        }
    }
    fn w(row: usize) -> Access {
        Access {
            tile: t(row),
            mode: Mode::ReadWrite,
        }
    }

    #[test]
    fn the_three_hazards_become_edges() {
        let mut g = TaskGraph::new();
        let a = g.add_task(Op::Potrf, vec![w(0)], 1.0); // writes 0
        let b = g.add_task(Op::Trsm, vec![r(0), w(1)], 1.0); // RAW on 0
        let c = g.add_task(Op::Trsm, vec![r(0), w(2)], 1.0); // RAW on 0, independent of b
        let d = g.add_task(Op::Potrf, vec![w(0)], 1.0); // WAR on 0 (b, c), WAW on 0 (a)
        let e = g.add_task(Op::Potrf, vec![w(1)], 1.0); // WAW on 1 (b)
        assert_eq!(g.predecessors(b), [a]);
        assert_eq!(g.predecessors(c), [a]);
        assert_eq!(g.predecessors(d), [a, b, c]);
        assert_eq!(g.predecessors(e), [b]);
        assert_eq!(g.successors(a), [b, c, d]);
        assert_eq!(g.edge_count(), 6);
        // Different matrices never conflict.
        let other = Access {
            tile: TileRef::new(MatrixId(1), 0, 0),
            mode: Mode::ReadWrite,
        };
        let f = g.add_task(Op::Potrf, vec![other], 1.0);
        assert!(g.predecessors(f).is_empty());
    }
}
