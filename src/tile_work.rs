//! Tiled task graphs as runtime workloads: each task's kernel runs on views of the tiles
//! of the matrices it names.

use hetla_factorizations::{Access, MatrixId, Mode, Task, TaskGraph, TaskId, TileRef, Tiling};
use hetla_kernels::{AnyMut, AnyRef, Backend, KernelError, Op, Par, Scalar};

use crate::{Error, TiledMatrix};
use hetla_runtime::{Error as RuntimeError, KernelKey, RunError, RunStep, TaskFailure, Workload};

/// A task graph over tiled matrices of one precision (indexed by `MatrixId.0`) with a
/// kernel backend.
pub(crate) struct TileWork<'g, 'm, T: Scalar = f64> {
    pub graph: &'g TaskGraph,
    pub matrices: &'g [&'g TiledMatrix<'m, T>],
    pub backend: Backend,
}

impl<T: Scalar> TileWork<'_, '_, T> {
    fn matrix(&self, id: MatrixId, op: Op) -> Result<&TiledMatrix<'_, T>, KernelError> {
        self.matrices
            .get(id.0 as usize)
            .copied()
            .ok_or_else(|| KernelError::Operands {
                op,
                reason: format!("no matrix {} was given", id.0),
            })
    }

    fn shape(&self, tile: TileRef) -> (usize, usize) {
        self.matrices
            .get(tile.matrix.0 as usize)
            .map_or((0, 0), |m| m.tiling().tile_shape(tile.row, tile.col))
    }
}

impl<T: Scalar> Workload for TileWork<'_, '_, T> {
    fn graph(&self) -> &TaskGraph {
        self.graph
    }

    fn key(&self, task: TaskId) -> KernelKey {
        KernelKey::of_task(self.graph.task(task), |tile| self.shape(tile))
            .in_precision(T::PRECISION)
    }

    fn tile_bytes(&self, tile: TileRef) -> usize {
        let (r, c) = self.shape(tile);
        r * c * size_of::<T>()
    }

    fn host_tile(&self, tile: TileRef) -> Option<AnyRef<'_>> {
        let m = self.matrices.get(tile.matrix.0 as usize)?;
        Some(m.tile(tile.row, tile.col).into())
    }

    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<AnyMut<'_>> {
        let m = self.matrices.get(tile.matrix.0 as usize)?;
        if !m.is_writable() {
            return None;
        }
        // SAFETY: the matrix is writable (checked), and the caller guarantees that no
        // other view of the tile is used while this one lives.
        Some(unsafe { m.tile_mut_unchecked(tile.row, tile.col) }.into())
    }

    fn run(&self, id: TaskId, par: Par) -> Result<(), KernelError> {
        let task = self.graph.task(id);
        let (write, reads) = operands(task)?;
        let target = self.matrix(write.tile.matrix, task.op)?;
        if !target.is_writable() {
            return Err(KernelError::Operands {
                op: task.op,
                reason: format!("matrix {} is read-only", write.tile.matrix.0),
            });
        }
        let views = reads
            .iter()
            .map(|r| {
                Ok(self
                    .matrix(r.tile.matrix, task.op)?
                    .tile(r.tile.row, r.tile.col))
            })
            .collect::<Result<Vec<_>, KernelError>>()?;
        // SAFETY: the matrix is writable (checked above). The runtime runs a task only
        // once every earlier task touching its tiles has finished (the graph has RAW, WAR
        // and WAW edges), and no later such task starts before it ends, so no other view
        // of the written tile exists while this kernel runs; the written tile is distinct
        // from every tile the task reads (checked above).
        let out = unsafe { target.tile_mut_unchecked(write.tile.row, write.tile.col) };
        self.backend.run(task.op, &views, out, par)
    }
}

/// A task's written tile (its last access) and the tiles it only reads, checked: the
/// written one is not also read.
pub(crate) fn operands(task: &Task) -> Result<(&Access, &[Access]), KernelError> {
    let operands = |reason: &str| KernelError::Operands {
        op: task.op,
        reason: reason.into(),
    };
    let (write, reads) = task
        .accesses
        .split_last()
        .filter(|(w, _)| w.mode.writes())
        .ok_or_else(|| operands("the last access must be the written tile"))?;
    if reads
        .iter()
        .any(|r| r.mode != Mode::Read || r.tile == write.tile)
    {
        return Err(operands("a tile is written while also read by the task"));
    }
    Ok((write, reads))
}

/// Turns a failed run into the user-facing error: a POTRF pivot failure becomes
/// [`Error::NotPositiveDefinite`] with the global column of the factored matrix, tiled as
/// `a`.
pub(crate) fn run_error(graph: &TaskGraph, a: Option<&Tiling>, e: RunError) -> Error {
    let task = match e.step {
        RunStep::Task(t) => Some(t),
        _ => None,
    };
    let op = task.map(|t| graph.task(t).op);
    match (e.step, op, e.failure, a) {
        (
            _,
            Some(Op::Potrf),
            TaskFailure::Kernel(KernelError::NotPositiveDefinite { index }),
            Some(a),
        ) => {
            let k = graph.task(task.unwrap_or_default()).accesses[0].tile.col;
            Error::NotPositiveDefinite {
                column: a.offset(k) + index,
            }
        }
        (RunStep::WriteBack, _, TaskFailure::Kernel(error), _) => Error::WriteBack(error),
        (_, _, TaskFailure::Kernel(error), _) => Error::Kernel(error),
        (_, _, TaskFailure::Memory(no_room), _) => Error::Memory(no_room),
        (_, _, TaskFailure::Panic(message), _) => Error::TaskPanicked {
            task: task.unwrap_or_default(),
            op: op.map_or("setup", |op| op.name()).to_owned(),
            message,
        },
        (_, _, TaskFailure::NoWorker, _) => Error::Runtime(RuntimeError::NoWorker {
            task: task.unwrap_or_default(),
            op: op.map_or("?", |op| op.name()).to_owned(),
        }),
        (_, _, TaskFailure::Plan(reason), _) => Error::Runtime(RuntimeError::Plan { reason }),
        (_, _, failure, _) => Error::Runtime(RuntimeError::Plan {
            reason: format!("the run failed: {failure:?}"),
        }),
    }
}
