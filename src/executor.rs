//! The sequential executor: runs a task graph in submission order.
//!
//! This is the executor of the foundation: one task at a time, in the order the graph was
//! built (always a valid topological order), each kernel parallel over all the executor's
//! threads. It is correct for any graph and has no scheduling overhead, but it cannot
//! overlap tasks; the runtime (CPU clusters, MCT scheduling) replaces it.
//! The executor owns a rayon pool so that faer kernels never touch the global pool.

use std::num::NonZeroUsize;

use hetla_factorizations::{MatrixId, Mode, Task, TaskGraph};
use hetla_kernels::{Backend, KernelError, Op, Par};

use crate::{Error, Result, TiledMatrix};

/// Runs task graphs one task at a time with parallel kernels.
pub struct SequentialExecutor {
    backend: Backend,
    threads: NonZeroUsize,
    pool: rayon::ThreadPool,
}

/// Why a task failed: the task and the kernel's error.
#[derive(Debug)]
pub struct TaskFailure {
    /// Index of the task in its graph.
    pub task: usize,
    /// What the kernel reported.
    pub error: KernelError,
}

impl SequentialExecutor {
    /// An executor running `backend`'s kernels on `threads` threads.
    pub fn new(backend: Backend, threads: NonZeroUsize) -> Result<Self> {
        backend.ensure_available()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.get())
            .thread_name(|i| format!("hetla-kernel-{i}"))
            .build()
            .map_err(|e| Error::InvalidOption {
                option: "threads",
                reason: format!("cannot start {threads} threads: {e}"),
            })?;
        Ok(Self {
            backend,
            threads,
            pool,
        })
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Number of threads each kernel uses.
    pub fn threads(&self) -> usize {
        self.threads.get()
    }

    /// Runs every task of `graph` on the tiles of `matrices` (indexed by `MatrixId.0`).
    /// Stops at the first failing task and returns it; tasks before it have run.
    pub fn run(&self, graph: &TaskGraph, matrices: &[&TiledMatrix<'_>]) -> Result<(), TaskFailure> {
        let par = Par::Rayon(self.threads);
        for (id, task) in graph.tasks().iter().enumerate() {
            self.pool
                .install(|| self.run_task(task, matrices, par))
                .map_err(|error| TaskFailure { task: id, error })?;
        }
        Ok(())
    }

    fn run_task(
        &self,
        task: &Task,
        matrices: &[&TiledMatrix<'_>],
        par: Par,
    ) -> Result<(), KernelError> {
        let operands = |reason: String| KernelError::Operands {
            op: task.op,
            reason,
        };
        let matrix = |id: MatrixId| {
            matrices
                .get(id.0 as usize)
                .copied()
                .ok_or_else(|| operands(format!("no matrix {} was given", id.0)))
        };
        let (write, reads) = task
            .accesses
            .split_last()
            .filter(|(w, _)| w.mode == Mode::ReadWrite)
            .ok_or_else(|| operands("the last access must be the written tile".into()))?;
        if reads
            .iter()
            .any(|r| r.mode != Mode::Read || r.tile == write.tile)
        {
            return Err(operands(
                "a tile is written while also read by the task".into(),
            ));
        }
        let target = matrix(write.tile.matrix)?;
        if !target.is_writable() {
            return Err(operands(format!(
                "matrix {} is read-only",
                write.tile.matrix.0
            )));
        }
        let views = reads
            .iter()
            .map(|r| Ok(matrix(r.tile.matrix)?.tile(r.tile.row, r.tile.col)))
            .collect::<Result<Vec<_>, KernelError>>()?;
        // SAFETY: the matrix is writable (checked above), tasks run one at a time, and the
        // written tile is distinct from every tile the task reads (checked above), so no
        // other view of it is alive while the kernel runs.
        let out = unsafe { target.tile_mut_unchecked(write.tile.row, write.tile.col) };
        self.backend.run(task.op, &views, out, par)
    }
}

/// Turns a failed task of a factorisation into the user-facing error: a POTRF pivot
/// failure becomes [`Error::NotPositiveDefinite`] with the global column.
pub(crate) fn factorisation_error(
    graph: &TaskGraph,
    a: &TiledMatrix<'_>,
    failure: TaskFailure,
) -> Error {
    let task = graph.task(failure.task);
    match (task.op, failure.error) {
        (Op::Potrf, KernelError::NotPositiveDefinite { index }) => {
            let k = task.accesses[0].tile.col;
            Error::NotPositiveDefinite {
                column: a.tiling().offset(k) + index,
            }
        }
        (_, error) => Error::Kernel(error),
    }
}
