//! Traces of runs: what ran where and when, and the views of it users read.
//!
//! - [`Trace::to_chrome_json`]: Chrome trace-event JSON (complete events, one thread per worker),
//!   which Perfetto (ui.perfetto.dev) and chrome://tracing open;
//! - [`Trace::summary`]: busy fraction per worker, and count, mean time and Gflop/s per kernel.

use std::collections::BTreeSet;
use std::path::Path;

use hetla_kernels::Op;
use serde::Serialize;

use hetla_factorizations::{TaskId, TileRef};

use crate::data::{MemoryNode, Transfer};
use crate::workers::{ResourceKind, WorkerId, WorkerInfo};
use crate::{Error, Result};

/// One task's execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEvent {
    /// Index of the task in its graph.
    pub task: TaskId,
    /// The operation.
    #[serde(serialize_with = "op_name")]
    pub op: Op,
    /// The worker that ran it.
    pub worker: WorkerId,
    /// Start, seconds since the run began.
    pub start: f64,
    /// End, seconds since the run began.
    pub end: f64,
    /// Flops of the task.
    pub flops: f64,
}

fn op_name<S: serde::Serializer>(op: &Op, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(op.name())
}

/// One data transfer between memory nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferEvent {
    /// What was copied.
    pub transfer: Transfer,
    /// Start, seconds since the run began.
    pub start: f64,
    /// End, seconds since the run began.
    pub end: f64,
}

/// One piece of a cluster kernel: the share of a task one thread of the cluster's team ran (see
/// `hetla_clusters::Team`). Real runs on clusters of several cores record them; simulations do not.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PieceEvent {
    /// The task the piece belongs to.
    pub task: TaskId,
    /// The cluster's worker.
    pub worker: WorkerId,
    /// Which split call of the task's kernel it belongs to (a blocked POTRF splits several times),
    /// counted per worker.
    pub call: u64,
    /// The piece's index in its call.
    pub index: usize,
    /// The team thread that ran it (0: the worker itself; i: the thread pinned to the cluster's CPU
    /// i).
    pub thread: usize,
    /// The logical CPU the OS says it ended on.
    pub cpu: Option<usize>,
    /// Start, seconds since the run began.
    pub start: f64,
    /// End, seconds since the run began.
    pub end: f64,
}

/// Everything that happened in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The workers (event `worker` fields index this).
    pub workers: Vec<WorkerInfo>,
    /// Task executions, by start time.
    pub tasks: Vec<TaskEvent>,
    /// Transfers, by start time (none on a CPU-only platform).
    pub transfers: Vec<TransferEvent>,
    /// Seconds from the start of the run to its end.
    pub makespan: f64,
    /// The host memory page-locked for the run's copies (nothing for a staged run).
    pub host_memory: PageLocked,
    /// The pieces of the kernels of clusters of several cores, by start time (none in a
    /// simulation).
    pub pieces: Vec<PieceEvent>,
    /// Seconds from the start of the run to the end of the input check beside it
    /// ([`crate::execute_checked`]; `None` without one): until then no host memory was written.
    pub input_checked: Option<f64>,
}

/// The host memory a run page-locked for its copies ([`crate::HostMemory::PageLocked`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PageLocked {
    /// Bytes locked for the run.
    pub bytes: usize,
    /// Bytes of the run's host memory that were page-locked already (a tile-major buffer kept
    /// locked from an earlier run): copied straight at no locking cost.
    pub already: usize,
    /// Seconds locking took: the first piece before the run's clock started, the others beside the
    /// run (see `execution/locking.rs`).
    pub seconds: f64,
    /// Why locking failed (the copies of the tiles not locked by then were staged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl PageLocked {
    /// Whether the run asked for page-locked memory and had any: locked by it, locked already, or
    /// failed.
    pub fn locked_any(&self) -> bool {
        self.bytes + self.already > 0 || self.failed.is_some()
    }
}

/// One line for a report: "536.9 MB page-locked in 0.0251 s, copied straight by DMA", with the
/// bytes locked already, or why the copies were staged.
impl std::fmt::Display for PageLocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(why) = &self.failed {
            return write!(f, "staged: page-locking failed: {why}");
        }
        write!(
            f,
            "{:.1} MB page-locked in {:.4} s",
            self.bytes as f64 / 1e6,
            self.seconds
        )?;
        if self.already > 0 {
            write!(f, " ({:.1} MB locked already)", self.already as f64 / 1e6)?;
        }
        write!(f, ", copied straight by DMA")
    }
}

/// Per-worker figures of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerSummary {
    /// Worker name.
    pub name: String,
    /// Tasks run.
    pub tasks: usize,
    /// Seconds spent in kernels.
    pub busy_seconds: f64,
    /// Busy seconds over the makespan.
    pub busy_fraction: f64,
}

/// How a cluster of several cores ran the pieces of its kernels in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PieceSummary {
    /// Worker name.
    pub name: String,
    /// Threads of the cluster's team.
    pub threads: usize,
    /// Pieces each team thread ran (thread 0: the worker).
    pub pieces_per_thread: Vec<usize>,
    /// Pieces that ended on another CPU than their thread's (a pin that did not hold).
    pub off_core: usize,
    /// The threads' piece seconds over `threads` times the seconds of the tasks that split: how
    /// busy the cluster's cores were inside its split kernels (1: all of them all the time).
    pub busy_fraction: f64,
    /// Over every split call, the time from its first piece's end to its last's, over the calls'
    /// time: the share of a split kernel in which a thread waits for a straggler.
    pub straggler_share: f64,
}

/// The piece summary of worker `w` (None when it recorded no pieces).
fn piece_summary(trace: &Trace, w: usize, info: &WorkerInfo) -> Option<PieceSummary> {
    let mine: Vec<&PieceEvent> = trace
        .pieces
        .iter()
        .filter(|p| p.worker == WorkerId(w))
        .collect();
    if mine.is_empty() {
        return None;
    }
    let threads = info
        .cpus
        .len()
        .max(mine.iter().map(|p| p.thread + 1).max().unwrap_or(1));
    let mut pieces_per_thread = vec![0; threads];
    let mut off_core = 0;
    let mut calls: std::collections::BTreeMap<u64, (f64, f64, f64)> = Default::default();
    let mut tasks: Vec<TaskId> = Vec::new();
    let mut piece_seconds = 0.0;
    for p in &mine {
        pieces_per_thread[p.thread] += 1;
        if p.cpu
            .is_some_and(|c| info.cpus.get(p.thread).is_some_and(|&own| own != c))
        {
            off_core += 1;
        }
        piece_seconds += p.end - p.start;
        let call = calls.entry(p.call).or_insert((p.start, p.end, p.end));
        *call = (call.0.min(p.start), call.1.min(p.end), call.2.max(p.end));
        tasks.push(p.task);
    }
    tasks.sort_unstable();
    tasks.dedup();
    let task_seconds: f64 = trace
        .tasks
        .iter()
        .filter(|e| e.worker == WorkerId(w) && tasks.binary_search(&e.task).is_ok())
        .fold(0.0, |s, e| s + (e.end - e.start));
    let (waiting, spanned) = calls
        .values()
        .fold((0.0, 0.0), |(w, s), &(start, first, last)| {
            (w + (last - first), s + (last - start))
        });
    Some(PieceSummary {
        name: info.name.clone(),
        threads,
        pieces_per_thread,
        off_core,
        busy_fraction: piece_seconds / (threads as f64 * task_seconds).max(f64::MIN_POSITIVE),
        straggler_share: waiting / spanned.max(f64::MIN_POSITIVE),
    })
}

/// Per-kernel figures of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSummary {
    /// Operation name.
    pub op: String,
    /// Executions.
    pub count: usize,
    /// Mean seconds per execution.
    pub mean_seconds: f64,
    /// Total flops over total seconds, in Gflop/s.
    pub gflops: f64,
}

/// Bytes moved on one link direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkSummary {
    /// Source node.
    pub from: MemoryNode,
    /// Destination node.
    pub to: MemoryNode,
    /// Bytes moved.
    pub bytes: usize,
}

/// Bytes moved on one link direction, named for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkBytes {
    /// "host->gpu0", "gpu2->host", "gpu0->gpu1".
    pub link: String,
    /// Bytes copied.
    pub bytes: usize,
}

/// What a GPU moved in a run against the fewest tile copies its updates needed in its memory
/// ([`Trace::device_traffic`]): the measure of a run out of core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceTraffic {
    /// Its worker's name ("gpu0").
    pub gpu: String,
    /// Tile copies to and from its memory.
    pub copies: usize,
    /// Its tile updates (the tasks the bound counts).
    pub updates: usize,
    /// Distinct tiles its tasks overwrote.
    pub written: usize,
    /// Tiles of the run's size its memory budget holds.
    pub buffers: usize,
    /// The fewest tile copies those updates need in that budget.
    pub lower_bound: f64,
}

/// A memory node's name in reports: "host" or "gpu`i`".
pub fn node_name(node: MemoryNode) -> String {
    match node.0 {
        0 => "host".to_owned(),
        g => format!("gpu{}", g - 1),
    }
}

/// Summary statistics of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    /// Seconds.
    pub makespan: f64,
    /// One entry per worker.
    pub workers: Vec<WorkerSummary>,
    /// One entry per operation that ran.
    pub kernels: Vec<KernelSummary>,
    /// Bytes per link direction that carried any.
    pub links: Vec<LinkSummary>,
    /// Per cluster of several cores, how its kernels' pieces ran (real runs only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pieces: Vec<PieceSummary>,
}

impl TraceSummary {
    /// Bytes per link direction, named ("host->gpu0").
    pub fn link_bytes(&self) -> Vec<LinkBytes> {
        self.links
            .iter()
            .map(|l| LinkBytes {
                link: format!("{}->{}", node_name(l.from), node_name(l.to)),
                bytes: l.bytes,
            })
            .collect()
    }
}

impl Trace {
    /// A trace from events in any order.
    pub fn new(workers: Vec<WorkerInfo>, mut tasks: Vec<TaskEvent>, makespan: f64) -> Self {
        tasks.sort_by(|a, b| a.start.total_cmp(&b.start));
        Self {
            workers,
            tasks,
            transfers: Vec::new(),
            makespan,
            host_memory: PageLocked::default(),
            pieces: Vec::new(),
            input_checked: None,
        }
    }

    /// Each GPU worker's [`DeviceTraffic`]: the copies to and from its memory node, its tasks whose
    /// operation `is_update`, the distinct tiles its tasks wrote (`written(task)`: the tile a task
    /// writes, if any), and its budget in tiles of `tile_bytes` (`budgets[i]`: device i's, the
    /// device of memory node i + 1), with `bound(updates, written, buffers)` as the fewest copies.
    pub fn device_traffic(
        &self,
        (budgets, tile_bytes): (&[usize], usize),
        (is_update, written): (impl Fn(Op) -> bool, impl Fn(TaskId) -> Option<TileRef>),
        bound: impl Fn(f64, usize, usize) -> f64,
    ) -> Vec<DeviceTraffic> {
        let gpus = (self.workers.iter().enumerate()).filter(|(_, w)| w.kind == ResourceKind::Gpu);
        gpus.filter_map(|(index, worker)| {
            let node = worker.node;
            let budget = *budgets.get(node.0.checked_sub(1)?)?;
            let copies = (self.transfers.iter())
                .filter(|t| t.transfer.to == node || t.transfer.from == node)
                .count();
            let mine = || self.tasks.iter().filter(|t| t.worker.0 == index);
            let updates = mine().filter(|t| is_update(t.op)).count();
            let tiles: BTreeSet<TileRef> = mine().filter_map(|t| written(t.task)).collect();
            let buffers = budget / tile_bytes.max(1);
            Some(DeviceTraffic {
                gpu: worker.name.clone(),
                copies,
                updates,
                written: tiles.len(),
                buffers,
                lower_bound: bound(updates as f64, tiles.len(), buffers),
            })
        })
        .collect()
    }

    /// Busy fraction per worker and rate per kernel.
    pub fn summary(&self) -> TraceSummary {
        let span = self.makespan.max(f64::MIN_POSITIVE);
        let workers = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, info)| {
                let mine = self.tasks.iter().filter(|e| e.worker == WorkerId(w));
                // A fold from +0.0: `sum` of no f64 is -0.0, which reports printed as "-0.0".
                let busy = mine.clone().fold(0.0, |busy, e| busy + (e.end - e.start));
                WorkerSummary {
                    name: info.name.clone(),
                    tasks: mine.count(),
                    busy_seconds: busy,
                    busy_fraction: busy / span,
                }
            })
            .collect();
        let kernels = Op::KINDS
            .into_iter()
            .filter_map(|op| {
                let events: Vec<&TaskEvent> =
                    self.tasks.iter().filter(|e| e.op.same_kind(op)).collect();
                if events.is_empty() {
                    return None;
                }
                let seconds: f64 = events.iter().map(|e| e.end - e.start).sum();
                let flops: f64 = events.iter().map(|e| e.flops).sum();
                Some(KernelSummary {
                    op: op.name().to_owned(),
                    count: events.len(),
                    mean_seconds: seconds / events.len() as f64,
                    gflops: flops / seconds.max(f64::MIN_POSITIVE) / 1e9,
                })
            })
            .collect();
        let mut links: Vec<LinkSummary> = Vec::new();
        for t in &self.transfers {
            let (from, to) = (t.transfer.from, t.transfer.to);
            match links.iter_mut().find(|l| l.from == from && l.to == to) {
                Some(l) => l.bytes += t.transfer.bytes,
                None => links.push(LinkSummary {
                    from,
                    to,
                    bytes: t.transfer.bytes,
                }),
            }
        }
        let pieces = self
            .workers
            .iter()
            .enumerate()
            .filter_map(|(w, info)| piece_summary(self, w, info))
            .collect();
        TraceSummary {
            makespan: self.makespan,
            workers,
            kernels,
            links,
            pieces,
        }
    }

    /// The trace as Chrome trace-event JSON: a complete event ("ph": "X") per task, in
    /// microseconds, on one thread per worker named after it.
    pub fn to_chrome_json(&self) -> serde_json::Value {
        let names = self.workers.iter().enumerate().map(|(w, info)| {
            serde_json::json!({
                "ph": "M", "pid": 0, "tid": w, "name": "thread_name",
                "args": { "name": format!("{} ({:?})", info.name, info.cpus) },
            })
        });
        let tasks = self.tasks.iter().map(|e| {
            serde_json::json!({
                "ph": "X", "pid": 0, "tid": e.worker, "name": e.op.name(), "cat": "task",
                "ts": e.start * 1e6, "dur": (e.end - e.start) * 1e6,
                "args": { "task": e.task, "flops": e.flops },
            })
        });
        let transfers = self.transfers.iter().map(|t| {
            serde_json::json!({
                "ph": "X", "pid": 1, "tid": t.transfer.to.0, "name": "transfer", "cat": "transfer",
                "ts": t.start * 1e6, "dur": (t.end - t.start) * 1e6,
                "args": { "bytes": t.transfer.bytes, "from": t.transfer.from.0, "to": t.transfer.to.0 },
            })
        });
        // A cluster's pieces on threads of their own: "pid" 2, "tid" the worker's x 1000 plus the
        // team thread's.
        let piece_names = self.workers.iter().enumerate().flat_map(|(w, info)| {
            let threads = if self.pieces.iter().any(|p| p.worker == WorkerId(w)) {
                info.cpus.len()
            } else {
                0
            };
            (0..threads).map(move |t| {
                serde_json::json!({
                    "ph": "M", "pid": 2, "tid": w * 1000 + t, "name": "thread_name",
                    "args": { "name": format!("{} thread {t} (CPU {})", info.name, info.cpus[t]) },
                })
            })
        });
        let pieces = self.pieces.iter().map(|p| {
            serde_json::json!({
                "ph": "X", "pid": 2, "tid": p.worker.0 * 1000 + p.thread, "name": "piece",
                "cat": "piece", "ts": p.start * 1e6, "dur": (p.end - p.start) * 1e6,
                "args": { "task": p.task, "call": p.call, "index": p.index, "cpu": p.cpu },
            })
        });
        serde_json::json!({
            "traceEvents": names
                .chain(tasks)
                .chain(transfers)
                .chain(piece_names)
                .chain(pieces)
                .collect::<Vec<_>>(),
            "displayTimeUnit": "ms",
        })
    }

    /// Writes [`Trace::to_chrome_json`] to `path`.
    pub fn write_chrome_json(&self, path: &Path) -> Result<()> {
        let text =
            serde_json::to_string(&self.to_chrome_json()).map_err(|e| Error::output(path, e))?;
        crate::files::write_atomic(path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_with_no_task_is_busy_for_plus_zero_seconds() {
        let trace = Trace::new(vec![WorkerInfo::cpu_cluster(0, vec![0])], Vec::new(), 1.0);
        let summary = trace.summary();
        let worker = &summary.workers[0];
        assert_eq!(worker.tasks, 0);
        assert!(worker.busy_seconds == 0.0 && worker.busy_seconds.is_sign_positive());
        assert!(worker.busy_fraction.is_sign_positive());
        assert_eq!(serde_json::to_string(&worker.busy_fraction).unwrap(), "0.0");
    }
}
