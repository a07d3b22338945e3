//! A plan run on a platform, and how a failed run reads to the caller.

use hetla_factorizations::{FACTOR, Mode, TaskGraph, TaskId, TileRef};
use hetla_kernels::{KernelError, Op, Scalar};
use hetla_runtime::{
    MemoryNode, Platform, ResourceKind, RunError, RunOptions, RunStep, TaskFailure, Trace,
    WriteBack, execute,
};

use super::build::{Algorithm, Plan, expect_precision};
use crate::tiles::{Storage, TileStore, TileWork};
use crate::{Error, Result};

impl Plan {
    /// Where a run of this plan on `platform` finds its tiles when `asked` is what the caller asked
    /// for ([`Storage::resolve_on`]), as [`Storage::InPlace`] or [`Storage::TileMajor`]: a plan
    /// whose tiling ends in a tail of smaller tiles ([`Plan::tail`]) runs in place, since a
    /// tile-major copy holds tiles of one size (the Cholesky builder refuses it when asked for).
    pub fn storage<T: Scalar>(&self, platform: &crate::Platform, asked: Storage) -> Storage {
        match self.tail() {
            Some(_) => Storage::InPlace,
            None => asked.resolve_on::<T>(platform, self.algorithm().order(), self.tile()),
        }
    }

    /// Runs the plan on `platform` over the tiles `store` holds, with `options` and what the plan
    /// imposes on its runs ([`Plan::run_options`]); the trace of the run. Every task runs on the
    /// tiles alone: a family whose tasks keep side data runs its plans through its own work
    /// (Cholesky's panel inverses, LU's interchanges, QR's T's, Aasen's permutation).
    pub(crate) fn execute<T: Scalar>(
        &self,
        platform: &Platform,
        store: &dyn TileStore<T>,
        options: &RunOptions,
    ) -> Result<Trace> {
        expect_precision(self, T::PRECISION)?;
        let shape = |tile| self.shape(tile);
        let work = tile_work(self, &shape, store, platform);
        let options = self.run_options_on(platform, options);
        execute(platform, &work, &options).map_err(|e| run_error(self, e))
    }

    /// [`Plan::run_options`] for a run on GPUs of `budgets` bytes (each device's; none on a
    /// CPU-only platform). A factorisation in tiles (Cholesky, LU) whose tiles do not fit in the
    /// budget of one of them runs out of core: unless `base` ranks the tasks itself, they are
    /// ranked in left-looking order (by the column of the tile each writes, then in submission
    /// order), where a right-looking order would fetch the whole trailing matrix again at every
    /// step; LU's interchanges of factored columns come last, each column's together. Left-looking,
    /// the tiles one block column's updates read (the factored columns' rows below it) are at most
    /// a quarter of the matrix's: a Cholesky factor up to about twice a GPU's budget is fetched
    /// about once, the registry evicting by next use on the same order
    /// ([`hetla_runtime::DataRegistry::expect_order`]).
    pub fn run_options_for(&self, budgets: &[usize], base: &RunOptions) -> RunOptions {
        let mut options = self.run_options(base);
        let factorisation = matches!(
            self.algorithm(),
            Algorithm::Cholesky { .. } | Algorithm::Lu { .. }
        );
        let smallest_budget = budgets.iter().min();
        let out_of_core = smallest_budget.is_some_and(|&budget| budget < self.matrix_bytes());
        if factorisation && out_of_core && options.priorities.is_none() {
            options.priorities = Some(left_looking(self.graph()).into());
        }
        options
    }

    /// [`Plan::run_options_for`] the budgets of `platform`'s GPUs.
    pub(crate) fn run_options_on(&self, platform: &Platform, base: &RunOptions) -> RunOptions {
        let budgets: Vec<usize> = (platform.devices().iter())
            .map(|d| d.device.budget())
            .collect();
        self.run_options_for(&budgets, base)
    }

    /// Every tile the plan's tasks use, placed read-write on GPU `gpu` of `platform` before a
    /// resident run's clock starts ([`crate::Cholesky::resident`], the device matrices'
    /// factorisations). Errors before any work: a platform without that GPU, or tiles beyond its
    /// budget (an eviction would copy tiles inside the timed run).
    pub(crate) fn resident_placement(
        &self,
        platform: &Platform,
        gpu: usize,
    ) -> Result<Vec<(TileRef, MemoryNode, Mode)>> {
        let gpus = platform.devices().len();
        if gpu >= gpus {
            return Err(Error::InvalidOption {
                option: "resident",
                reason: format!(
                    "a resident factorisation on GPU {gpu} needs that GPU, but the platform has \
                     {gpus} GPU(s)"
                ),
            });
        }
        let placement = self.placed_on(MemoryNode(gpu + 1));
        let bytes: usize = placement
            .iter()
            .map(|&(tile, ..)| self.tile_bytes(tile))
            .sum();
        let budget = platform.devices()[gpu].device.budget();
        if bytes > budget {
            return Err(Error::InvalidOption {
                option: "resident",
                reason: format!(
                    "the matrix's tiles take {:.1} MB, more than GPU {gpu}'s budget of {:.1} MB: a \
                     resident factorisation keeps them all on the GPU (give it more memory, or \
                     factor from host memory)",
                    bytes as f64 / 1e6,
                    budget as f64 / 1e6
                ),
            });
        }
        Ok(placement)
    }

    /// `base` for a run over tiles in GPU `gpu`'s memory with no host view (device matrices'):
    /// every tile placed read-write there before the clock starts ([`Plan::resident_placement`]),
    /// kept there until it stops ([`WriteBack::Resident`]), and every operation restricted to GPUs
    /// (no CPU cluster could read a tile).
    pub(crate) fn on_device_only(
        &self,
        platform: &Platform,
        gpu: usize,
        base: RunOptions,
    ) -> Result<RunOptions> {
        Ok(RunOptions {
            write_back: WriteBack::Resident,
            placement: self.resident_placement(platform, gpu)?,
            restrictions: (self.ops().into_iter())
                .map(|op| (op, vec![ResourceKind::Gpu]))
                .collect(),
            ..base
        })
    }

    /// Bytes of the tiles of every matrix the plan's tasks use.
    fn matrix_bytes(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let tiles = (self.graph().tasks().iter()).flat_map(|task| &task.accesses);
        (tiles.filter(|access| seen.insert(access.tile)))
            .map(|access| self.tile_bytes(access.tile))
            .fold(0, usize::saturating_add)
    }
}

/// Priorities (larger first) ranking `graph`'s tasks by the column of the tile each writes (its
/// last access: [`hetla_factorizations::Task`]'s operand order), then in submission order; a task
/// that reads a column right of the one it writes (LU's interchanges of factored columns) after
/// every other.
fn left_looking(graph: &TaskGraph) -> Vec<f64> {
    let column = |t: TaskId| graph.task(t).accesses.last().map_or(0, |a| a.tile.col);
    let behind = |t: TaskId| (graph.task(t).accesses.iter()).any(|a| a.tile.col > column(t));
    let mut order: Vec<TaskId> = graph.ids().collect();
    order.sort_by_key(|&t| (behind(t), column(t), t));
    let mut priorities = vec![0.0; graph.len()];
    for (rank, t) in order.into_iter().enumerate() {
        priorities[t.0] = -(rank as f64);
    }
    priorities
}

/// The plan's graph and keys over `store`, tiles of `shape`, on `platform`'s backend.
pub(crate) fn tile_work<'w, T: Scalar>(
    plan: &'w Plan,
    shape: &'w (dyn Fn(hetla_factorizations::TileRef) -> (usize, usize) + Sync),
    store: &'w dyn TileStore<T>,
    platform: &Platform,
) -> TileWork<'w, T> {
    TileWork {
        graph: plan.graph(),
        keys: &plan.keys,
        shape,
        store,
        backend: platform.backend(),
    }
}

pub(crate) fn not_for<T: Scalar>(other: Algorithm, a: &faer::MatRef<'_, T>) -> Error {
    Error::InvalidOption {
        option: "plan",
        reason: format!(
            "the plan is a {} ({other:?}), the matrix {}x{}",
            other.name(),
            a.nrows(),
            a.ncols()
        ),
    }
}

/// A failed run of this plan (or of its share on a rank, whose graph is `graph`) as the caller's
/// error: a POTRF pivot failure is [`Error::NotPositiveDefinite`] with the global column of the
/// factored matrix.
pub(crate) fn run_error_in(plan: &Plan, graph: &TaskGraph, e: RunError) -> Error {
    let task = match e.step {
        RunStep::Task(t) => Some(t),
        _ => None,
    };
    let op = task.map(|t| graph.task(t).op);
    match (e.step, op, e.failure) {
        (_, Some(Op::Potrf), TaskFailure::Kernel(KernelError::NotPositiveDefinite { index }))
            if plan.tiling(FACTOR).is_some() =>
        {
            let k = graph.task(task.unwrap_or_default()).accesses[0].tile.col;
            let tiling = plan.tiling(FACTOR).expect("checked above");
            Error::NotPositiveDefinite {
                column: tiling.offset(k) + index,
            }
        }
        (RunStep::WriteBack, _, TaskFailure::Kernel(error)) => Error::WriteBack(error),
        (_, _, TaskFailure::Kernel(error)) => Error::Kernel(error),
        (_, _, TaskFailure::Panic(message)) => Error::TaskPanicked {
            task: task.unwrap_or_default(),
            op: op.map_or("setup", |op| op.name()).to_owned(),
            message,
        },
        (_, _, TaskFailure::Memory(no_room)) => hetla_runtime::Error::Memory(no_room).into(),
        (_, _, TaskFailure::NoWorker) => hetla_runtime::Error::NoWorker {
            task: task.unwrap_or_default(),
            op: op.map_or("?", |op| op.name()).to_owned(),
        }
        .into(),
        (_, _, TaskFailure::Plan(reason)) => hetla_runtime::Error::Plan { reason }.into(),
        (_, _, failure) => hetla_runtime::Error::Plan {
            reason: format!("the run failed: {failure:?}"),
        }
        .into(),
    }
}

/// A failed run of this plan as the caller's error (see [`Plan::run_error_in`]).
pub(crate) fn run_error(plan: &Plan, e: RunError) -> Error {
    run_error_in(plan, plan.graph(), e)
}
