//! What every run prepares before its first step, so that real and simulated runs schedule the same
//! way: model keys and resource classes interned into a dense statistics table, bottom-level
//! priorities, operation restrictions, one data handle per tile, what a static plan releases and
//! places, and the data registry ([`Tables`], [`prepare`]).

use std::collections::HashMap;
use std::sync::Mutex;

use hetla_factorizations::{Mode, TaskGraph, TaskId, TileRef};

use crate::data::{DataRegistry, HOST, Handle, MemoryNode, NoRoom};
use crate::perfmodel::{KernelKey, ResourceClass, Stats};
use crate::run::{RunOptions, RunStep, TaskFailure, WriteBack};
use crate::schedulers::{ModelTable, SchedContext, TaskInfo, TransferEstimate};
use crate::sync::lock;
use crate::workers::{ResourceKind, WorkerId, WorkerInfo};

/// Transfer estimates for MCT from the registry's replica states and the links' models: the copies
/// that would make a task's tiles valid on a worker's node, each from the node a copy would come
/// from.
pub(crate) struct LinkEstimate<'a> {
    /// The run's workers.
    pub workers: &'a [WorkerInfo],
    /// The run's data registry.
    pub data: &'a Mutex<DataRegistry>,
    /// Data handles of each task.
    pub handles: &'a [Vec<(Handle, Mode)>],
    /// Seconds of one copy of `bytes` from a node to another on idle links.
    pub copy_seconds: &'a (dyn Fn(MemoryNode, MemoryNode, usize) -> f64 + Sync),
}

impl TransferEstimate for LinkEstimate<'_> {
    fn seconds(&self, task: TaskId, worker: WorkerId) -> f64 {
        let node = self.workers[worker].node;
        let data = lock(self.data);
        self.handles[task]
            .iter()
            .filter(|&&(h, _)| !data.is_valid(h, node))
            .map(|&(h, _)| (self.copy_seconds)(data.source(h), node, data.bytes(h)))
            .sum()
    }
}

/// The scheduler's context and the run's data handles.
struct Context<'a> {
    /// Distinct model keys (`ctx`'s table rows).
    pub keys: Vec<KernelKey>,
    /// Distinct worker classes (`ctx`'s table columns).
    pub classes: Vec<ResourceClass>,
    /// The scheduler's view of the run.
    pub ctx: SchedContext<'a>,
    /// Data handles of each task with their access modes.
    pub handles: Vec<Vec<(Handle, Mode)>>,
    /// Each handle's tile and bytes.
    pub tiles: Vec<(TileRef, usize)>,
    /// Whether some task writes each handle (a tile no task writes may be copied ahead of any task;
    /// others only ahead of ready tasks).
    pub written: Vec<bool>,
}

/// Tasks a static plan lets a worker prefetch ahead (Eyraud-Dubois and Lambert (2018) uses two).
pub(crate) const PREFETCH_DEPTH: usize = 2;

/// The handles of `tasks` that are safe to copy now: those no task writes, and all of a task that
/// is ready.
pub(crate) fn prefetchable(
    tasks: &[TaskId],
    handles: &[Vec<(Handle, Mode)>],
    written: &[bool],
    ready: impl Fn(TaskId) -> bool,
) -> Vec<Handle> {
    let mut out = Vec::new();
    for &t in tasks {
        let ready = ready(t);
        out.extend(
            handles[t]
                .iter()
                .filter(|&&(h, mode)| mode.reads() && (ready || !written[h]))
                .map(|&(h, _)| h),
        );
    }
    out
}

/// The access handles each task's plan releases after it (empty without a static plan).
pub(crate) fn releases(options: &RunOptions, handles: &[Vec<(Handle, Mode)>]) -> Vec<Vec<Handle>> {
    let mut after = vec![Vec::new(); handles.len()];
    if let Some(plan) = &options.plan {
        for &(task, access) in &plan.releases {
            if let Some(&(h, _)) = handles.get(task.0).and_then(|a| a.get(access)) {
                after[task].push(h);
            }
        }
    }
    // A tile whose last access (tasks are numbered in submission order) writes it is final
    // once that task ends: released from the task's node, so a device's copy goes back to
    // the host while the run goes on instead of in the flush at its end. A resident run's
    // tiles stay on their device.
    if options.write_back == WriteBack::Resident {
        return after;
    }
    for (h, (last_access, last_write)) in last_uses(handles).into_iter().enumerate() {
        let h = Handle(h);
        if let Some(task) = last_write.filter(|&w| Some(w) == last_access)
            && !after[task].contains(&h)
        {
            after[task].push(h);
        }
    }
    after
}

/// For each handle (by index), the last task that accesses it and the last that writes it.
fn last_uses(handles: &[Vec<(Handle, Mode)>]) -> Vec<(Option<usize>, Option<usize>)> {
    let count = handles
        .iter()
        .flatten()
        .map(|&(h, _)| h.0 + 1)
        .max()
        .unwrap_or(0);
    let mut last = vec![(None, None); count];
    for (task, accesses) in handles.iter().enumerate() {
        for &(h, mode) in accesses {
            last[h.0].0 = Some(task);
            if mode.writes() {
                last[h.0].1 = Some(task);
            }
        }
    }
    last
}

/// The handles each task writes for the last time while later tasks still read them: a device's
/// copy of such a tile is final once the task ends, and is written back to host memory then (it
/// stays on the device as a shared copy), while the run goes on, instead of in the flush at the
/// end. (A tile whose last access is its last write is released instead, see [`releases`].)
pub(crate) fn write_backs(handles: &[Vec<(Handle, Mode)>]) -> Vec<Vec<Handle>> {
    let mut after = vec![Vec::new(); handles.len()];
    for (h, (last_access, last_write)) in last_uses(handles).into_iter().enumerate() {
        if let Some(task) = last_write.filter(|&w| Some(w) != last_access) {
            after[task].push(Handle(h));
        }
    }
    after
}

/// The handles and nodes of the tiles `options` places before the run, with the mode that places
/// them (read: a shared copy; read-write: the node's copy is the only one).
pub(crate) fn placements(
    options: &RunOptions,
    tiles: &[(TileRef, usize)],
) -> Vec<(Handle, MemoryNode, Mode)> {
    let index: HashMap<TileRef, Handle> = tiles
        .iter()
        .enumerate()
        .map(|(h, &(t, _))| (t, Handle(h)))
        .collect();
    options
        .placement
        .iter()
        .filter_map(|&(tile, node, mode)| index.get(&tile).map(|&h| (h, node, mode)))
        .collect()
}

/// Refuses, before any work, a memory node too small for the tiles of a task a worker there may run
/// (a GPU whose budget holds fewer than the three tiles of a GEMM): the run would otherwise stop at
/// the first such task, after the work before it.
fn budget_check(
    plan: &Context<'_>,
    workers: &[WorkerInfo],
    capacities: &[Option<usize>],
) -> Result<(), (RunStep, TaskFailure)> {
    if capacities.iter().all(Option::is_none) {
        return Ok(());
    }
    // Bytes of each task's distinct tiles.
    let needs: Vec<usize> = (plan.handles.iter())
        .map(|handles| {
            let mut distinct: Vec<Handle> = handles.iter().map(|&(h, _)| h).collect();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.iter().map(|h| plan.tiles[h.0].1).sum()
        })
        .collect();
    for (w, worker) in workers.iter().enumerate() {
        let Some(&Some(capacity)) = capacities.get(worker.node.0) else {
            continue;
        };
        let runs = |t: &usize| plan.ctx.can_run(TaskId(*t), WorkerId(w));
        let largest = (needs.iter().enumerate())
            .filter(|(t, _)| runs(t))
            .map(|(_, &bytes)| bytes)
            .max();
        if let Some(needed) = largest.filter(|&needed| needed > capacity) {
            let node = worker.node.0;
            let no_room = NoRoom {
                node,
                capacity,
                needed,
            };
            return Err((RunStep::Setup, TaskFailure::Memory(no_room)));
        }
    }
    Ok(())
}

/// A resident run ([`WriteBack::Resident`]) leaves its flush out of its time: every tile it writes
/// must live on a device, placed there read-write before the clock starts, or the time would leave
/// out copies that a run on host memory must make.
fn resident_check(
    options: &RunOptions,
    tiles: &[(TileRef, usize)],
    written: &[bool],
) -> Result<(), (RunStep, TaskFailure)> {
    let on_device: std::collections::HashSet<TileRef> = options
        .placement
        .iter()
        .filter(|&&(_, node, mode)| node != HOST && mode.writes())
        .map(|&(tile, _, _)| tile)
        .collect();
    match tiles
        .iter()
        .zip(written)
        .find(|&(&(tile, _), &written)| written && !on_device.contains(&tile))
    {
        None => Ok(()),
        Some((&(tile, _), _)) => Err((
            RunStep::Setup,
            TaskFailure::Plan(format!(
                "write-back resident: tile ({}, {}) of matrix {} is written by the run but not \
                 placed read-write on a device; a resident run's matrix lives on its device \
                 (place every tile it writes there, or write back final or at the end)",
                tile.row, tile.col, tile.matrix.0
            )),
        )),
    }
}

/// The scheduler's context for `graph`, whose task `t` has model key `task_keys[t]`, on `workers`;
/// `stats` gives the known statistics of a (key, class), `priorities` each task's priority. Errors
/// with the first task no worker may run under the run's restrictions and preferences.
fn context<'a>(
    workers: &'a [WorkerInfo],
    graph: &TaskGraph,
    task_keys: impl IntoIterator<Item = KernelKey>,
    tile_bytes: &dyn Fn(TileRef) -> usize,
    stats: impl Fn(&KernelKey, &ResourceClass) -> Stats,
    (options, priorities): (&'a RunOptions, Vec<f64>),
) -> Result<Context<'a>, TaskId> {
    let kinds: Vec<ResourceKind> = workers.iter().map(|w| w.kind).collect();
    let mut keys: Vec<KernelKey> = Vec::new();
    let mut key_index: HashMap<KernelKey, usize> = HashMap::new();
    let key_of_task: Vec<usize> = task_keys
        .into_iter()
        .map(|key| match key_index.get(&key) {
            Some(&i) => i,
            None => {
                key_index.insert(key.clone(), keys.len());
                keys.push(key);
                keys.len() - 1
            }
        })
        .collect();
    let mut classes: Vec<ResourceClass> = Vec::new();
    let class_of_worker: Vec<usize> = workers
        .iter()
        .map(|w| match classes.iter().position(|c| *c == w.class) {
            Some(i) => i,
            None => {
                classes.push(w.class.clone());
                classes.len() - 1
            }
        })
        .collect();
    let table = ModelTable {
        stats: keys
            .iter()
            .flat_map(|k| classes.iter().map(|c| stats(k, c)))
            .collect(),
        class_of_worker,
        classes: classes.len(),
    };
    let tasks: Vec<TaskInfo<'a>> = graph
        .tasks()
        .iter()
        .zip(priorities)
        .zip(key_of_task)
        .map(|((task, priority), key)| TaskInfo {
            priority,
            flops: task.flops,
            allowed: options.allowed_kinds(task.op, &kinds),
            key,
        })
        .collect();
    let ctx = SchedContext::new(workers, &tasks, table);
    if let Some(t) = graph
        .ids()
        .find(|&t| !ctx.worker_ids().any(|w| ctx.can_run(t, w)))
    {
        return Err(t);
    }
    let mut handle_of: HashMap<TileRef, Handle> = HashMap::new();
    let mut tiles = Vec::new();
    let mut written = Vec::new();
    let handles = graph
        .tasks()
        .iter()
        .map(|task| {
            task.accesses
                .iter()
                .map(|a| {
                    let h = *handle_of.entry(a.tile).or_insert_with(|| {
                        tiles.push((a.tile, tile_bytes(a.tile)));
                        written.push(false);
                        Handle(tiles.len() - 1)
                    });
                    written[h] |= a.mode.writes();
                    (h, a.mode)
                })
                .collect()
        })
        .collect();
    Ok(Context {
        keys,
        classes,
        ctx,
        handles,
        tiles,
        written,
    })
}

/// What a run prepared before its first step, owned by the driver for the run's length: the data
/// handles of each task, what a static plan releases, the registry.
pub(crate) struct Tables {
    /// Distinct model keys (the rows of the scheduler's table).
    pub keys: Vec<KernelKey>,
    /// Distinct worker classes (its columns).
    pub classes: Vec<ResourceClass>,
    /// Data handles of each task with their access modes.
    pub handles: Vec<Vec<(Handle, Mode)>>,
    /// Whether some task writes each handle.
    pub written: Vec<bool>,
    /// Handles dropped from the worker's node after each task.
    pub releases: Vec<Vec<Handle>>,
    /// Handles written back to host memory after each task ([`write_backs`]).
    pub write_backs: Vec<Vec<Handle>>,
    /// Tiles placed on a node before the run.
    pub placement: Vec<(Handle, MemoryNode, Mode)>,
    /// The run's data registry (logging its steps when there are devices).
    pub data: Mutex<DataRegistry>,
    /// Whether the platform has memory nodes besides the host (else nothing is copied).
    pub several_nodes: bool,
}

impl Tables {
    /// The transfer estimates MCT and dmda use: the copies a task would need on a worker's node,
    /// each at `copy_seconds` on idle links.
    pub fn estimate<'a>(
        &'a self,
        workers: &'a [WorkerInfo],
        copy_seconds: &'a (dyn Fn(MemoryNode, MemoryNode, usize) -> f64 + Sync),
    ) -> LinkEstimate<'a> {
        LinkEstimate {
            workers,
            data: &self.data,
            handles: &self.handles,
            copy_seconds,
        }
    }
}

/// Prepares a run of `graph` on `workers` with memory nodes of `capacities` (node 0 the host): the
/// scheduler's context and the run's tables. Fails with the first task no worker may run.
pub(crate) fn prepare<'a>(
    workers: &'a [WorkerInfo],
    graph: &TaskGraph,
    task_keys: impl IntoIterator<Item = KernelKey>,
    tile_bytes: &dyn Fn(TileRef) -> usize,
    options: &'a RunOptions,
    stats: impl Fn(&KernelKey, &ResourceClass) -> Stats,
    capacities: Vec<Option<usize>>,
) -> Result<(SchedContext<'a>, Tables), (RunStep, TaskFailure)> {
    let priorities = match &options.priorities {
        Some(p) if p.len() != graph.len() => {
            return Err((
                RunStep::Setup,
                TaskFailure::Plan(format!(
                    "{} priorities were given for {} tasks",
                    p.len(),
                    graph.len()
                )),
            ));
        }
        Some(p) => p.to_vec(),
        None => graph.bottom_levels(),
    };
    let plan = context(
        workers,
        graph,
        task_keys,
        tile_bytes,
        stats,
        (options, priorities),
    )
    .map_err(|t| (RunStep::Task(t), TaskFailure::NoWorker))?;
    if options.write_back == WriteBack::Resident {
        resident_check(options, &plan.tiles, &plan.written)?;
    }
    budget_check(&plan, workers, &capacities)?;
    let several_nodes = capacities.len() > 1;
    // A node whose budget is below the run's tiles may evict: by next use, on the order its
    // queues pop (by priority, then submission). A run that fits keeps no order (nothing to
    // track on its tasks' starts).
    let bytes = (plan.tiles.iter()).fold(0, |sum: usize, &(_, b)| sum.saturating_add(b));
    let may_evict = capacities
        .iter()
        .flatten()
        .any(|&capacity| capacity < bytes);
    let mut registry = DataRegistry::with_capacities(plan.tiles.clone(), capacities);
    if may_evict {
        let mut order: Vec<TaskId> = (0..plan.handles.len()).map(TaskId).collect();
        let ctx = &plan.ctx;
        order.sort_by(|&a, &b| ctx.priority(b).total_cmp(&ctx.priority(a)).then(a.cmp(&b)));
        let tasks = order.iter().map(|&t| (t, &plan.handles[t][..]));
        registry = registry.expect_order(plan.handles.len(), tasks);
    }
    // Only copies between nodes need carrying out.
    let registry = if several_nodes {
        registry.log_steps()
    } else {
        registry
    };
    let tables = Tables {
        releases: releases(options, &plan.handles),
        write_backs: match options.write_back {
            WriteBack::Final => write_backs(&plan.handles),
            WriteBack::AtEnd | WriteBack::Resident => vec![Vec::new(); plan.handles.len()],
        },
        placement: placements(options, &plan.tiles),
        keys: plan.keys,
        classes: plan.classes,
        handles: plan.handles,
        written: plan.written,
        data: Mutex::new(registry),
        several_nodes,
    };
    Ok((plan.ctx, tables))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_kernels::Op;

    #[test]
    fn a_tile_is_written_back_after_its_last_write_only_when_a_later_task_reads_it() {
        let (r, rw, w) = (Mode::Read, Mode::ReadWrite, Mode::Write);
        let handles = vec![
            vec![(Handle(0), rw)],                 // 0: writes 0, read later by 1 and 2
            vec![(Handle(0), r), (Handle(1), w)],  // 1: writes 1, rewritten by 2
            vec![(Handle(0), r), (Handle(1), rw)], // 2: last access of 0 and 1
            vec![(Handle(2), w)],                  // 3: writes 2, never read after
        ];
        let after = write_backs(&handles);
        assert_eq!(after, vec![vec![Handle(0)], vec![], vec![], vec![]]);
        // Those whose last access writes them are released instead.
        let released = releases(&RunOptions::default(), &handles);
        assert_eq!(released[2], vec![Handle(1)]);
        assert_eq!(released[3], vec![Handle(2)]);
    }

    /// A preference holds where the platform has a worker of its kinds and lapses where it has
    /// none; a restriction of the same operation comes first.
    #[test]
    fn a_preference_holds_only_where_the_platform_has_its_kinds_and_yields_to_a_restriction() {
        use ResourceKind::{Cpu, Gpu};
        let options = RunOptions {
            restrictions: vec![(Op::Syrk, vec![Gpu])],
            preferences: vec![(Op::Syrk, vec![Cpu]), (Op::LuPanel, vec![Cpu])],
            ..RunOptions::default()
        };
        assert_eq!(
            options.allowed_kinds(Op::LuPanel, &[Cpu, Gpu]),
            Some(&[Cpu][..])
        );
        assert_eq!(options.allowed_kinds(Op::LuPanel, &[Gpu, Gpu]), None);
        assert_eq!(
            options.allowed_kinds(Op::Syrk, &[Cpu, Gpu]),
            Some(&[Gpu][..])
        );
        assert_eq!(options.allowed_kinds(Op::Trsm, &[Cpu, Gpu]), None);
    }
}
