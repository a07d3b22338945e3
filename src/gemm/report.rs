//! What a product reports: time, rate, bytes moved and their lower bounds.

use hetla_bounds::communication::{
    device_transfers_lower_bound, equal_finish_split, half_perimeter_lower_bound,
};
use hetla_runtime::{HOST, LinkBytes, MemoryNode, PageLocked, Trace, WorkerInfo};
use serde::Serialize;

use super::cost::Machine;
use super::options::{Gemm, Placement};
use super::plan::GemmPlan;

/// What one product did and how it compares with the bounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmReport {
    /// The precision of the product (complex rates count 4 real flops per complex one).
    pub precision: hetla_kernels::Precision,
    /// m, n, k.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// Wall-clock (or simulated) seconds of the run: the runtime's makespan, which leaves out the
    /// page-locking of the matrices before it (`page_locked`).
    pub seconds: f64,
    /// 2 m n k / seconds, in Gflop/s.
    pub gflops: f64,
    /// Tile side used.
    pub tile: usize,
    /// The strategy that ran (never `auto`).
    pub strategy: String,
    /// Why: "given", or the model's reason for `auto`.
    pub strategy_reason: String,
    /// The tile model's predicted seconds at the chosen tile.
    pub predicted_seconds: f64,
    /// Bytes moved in total and per device.
    pub bytes_moved: BytesMoved,
    /// Lower bound on the bytes this run had to move, from the updates each device performed (see
    /// the module documentation).
    pub comm_lower_bound_bytes: f64,
    /// bytes moved / that bound (>= 1; `null` when the bound is 0).
    pub comm_ratio: Option<f64>,
    /// Bound for the work split that equalises the workers' finish times.
    pub split_lower_bound_bytes: f64,
    /// For static partitions, the PERI-SUM bound of the planned shares (A and B strips of zones of
    /// those areas, and their C tiles).
    pub partition_lower_bound_bytes: Option<f64>,
    /// Tile updates (tasks) per worker name.
    pub updates: Vec<(String, usize)>,
    /// What a run with [`crate::HostMemory::PageLocked`] locked before its clock started, and what
    /// that took (a caller whose matrices are not locked already pays it on every call); absent
    /// when the run locked nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_locked: Option<PageLocked>,
}

/// Bytes moved by a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BytesMoved {
    /// All links together.
    pub total: usize,
    /// Per device ("gpu0"): bytes into and out of its memory.
    pub per_device: Vec<(String, usize)>,
    /// Per link and direction ("host->gpu0", "gpu0->host"): with C placed on a device, what it
    /// moved is C written back into the caller's matrix (`gpu0->host`, inside the timed run).
    pub per_link: Vec<LinkBytes>,
}

impl Gemm {
    pub(super) fn empty_report(
        &self,
        precision: hetla_kernels::Precision,
        (m, n, k): (usize, usize, usize),
    ) -> GemmReport {
        GemmReport {
            precision,
            m,
            n,
            k,
            seconds: 0.0,
            gflops: 0.0,
            tile: 0,
            strategy: "none".into(),
            strategy_reason: "nothing to multiply".into(),
            predicted_seconds: 0.0,
            bytes_moved: BytesMoved {
                total: 0,
                per_device: Vec::new(),
                per_link: Vec::new(),
            },
            comm_lower_bound_bytes: 0.0,
            comm_ratio: None,
            split_lower_bound_bytes: 0.0,
            partition_lower_bound_bytes: None,
            updates: Vec::new(),
            page_locked: None,
        }
    }

    /// The report of a run: time, bytes and bounds. What the run of `plan` on `machine` that
    /// `trace` recorded did, against the bounds of the bytes it had to move.
    pub fn report(&self, machine: &Machine<'_>, plan: &GemmPlan, trace: &Trace) -> GemmReport {
        let (tiling, planned) = (&plan.tiling, &plan.planned);
        let (m, n) = (tiling.c.rows(), tiling.c.cols());
        let k = if tiling.params.trans_a {
            tiling.a.rows()
        } else {
            tiling.a.cols()
        };
        let tile = tiling.c.tile();
        let tile_bytes = (tile * tile * machine.precision.bytes()) as f64;
        let seconds = trace.makespan;
        let summary = trace.summary();
        let workers = machine.workers;
        let devices = device_nodes(workers);
        let per_device = bytes_per_device(trace, &devices);
        let total = trace.transfers.iter().map(|t| t.transfer.bytes).sum();
        let updates_on = |node: usize| {
            trace
                .tasks
                .iter()
                .filter(|e| workers[e.worker].node.0 == node)
                .count() as f64
        };
        let placed = self.placement.iter().any(|p| *p != Placement::Host);
        let device_bound = |node: usize, updates: f64| -> f64 {
            if placed || updates == 0.0 {
                return 0.0;
            }
            let buffers = machine.capacities[node]
                .map_or(usize::MAX / 4, |c| (c as f64 / tile_bytes) as usize);
            let lw = device_transfers_lower_bound(updates, buffers.max(3)).unwrap_or(0.0);
            lw.max(3.0 * updates.powf(2.0 / 3.0))
        };
        let bound_tiles: f64 = devices
            .iter()
            .map(|&d| device_bound(d, updates_on(d)))
            .sum();
        let comm_lower_bound_bytes = bound_tiles * tile_bytes;
        // The split that equalises finish times, by worker speed.
        let costs: Vec<f64> = (0..workers.len())
            .map(|w| 1.0 / machine.rate(w, tile))
            .collect();
        let total_updates = (tiling.r * tiling.s * tiling.t) as f64;
        let split_lower_bound_bytes = equal_finish_split(&costs, total_updates)
            .map(|split| {
                devices
                    .iter()
                    .map(|&d| {
                        let g: f64 = (0..workers.len())
                            .filter(|&w| workers[w].node.0 == d)
                            .map(|w| split.work[w])
                            .sum();
                        device_bound(d, g)
                    })
                    .sum::<f64>()
                    * tile_bytes
            })
            .unwrap_or(0.0);
        let partition_lower_bound_bytes = planned.partition_shares.as_ref().map(|shares| {
            let (r, s, t) = (tiling.r as f64, tiling.s as f64, tiling.t as f64);
            shares
                .iter()
                .filter(|&&(node, area)| node != HOST.0 && area > 0.0 && !placed)
                .map(|&(_, area)| t * half_perimeter_lower_bound(area, r, s) + area)
                .fold(0.0, |sum, bytes| sum + bytes)
                * tile_bytes
        });
        let flops = 2.0 * m as f64 * n as f64 * k as f64 * machine.precision.flop_factor();
        GemmReport {
            precision: machine.precision,
            m,
            n,
            k,
            seconds,
            gflops: flops / seconds.max(f64::MIN_POSITIVE) / 1e9,
            tile,
            strategy: planned.strategy.to_string(),
            strategy_reason: planned.reason.clone(),
            predicted_seconds: planned.predicted,
            bytes_moved: BytesMoved {
                total,
                per_device,
                per_link: summary.link_bytes(),
            },
            comm_lower_bound_bytes,
            comm_ratio: (comm_lower_bound_bytes > 0.0)
                .then(|| total as f64 / comm_lower_bound_bytes),
            split_lower_bound_bytes,
            partition_lower_bound_bytes,
            updates: summary
                .workers
                .iter()
                .map(|w| (w.name.clone(), w.tasks))
                .collect(),
            page_locked: trace
                .host_memory
                .locked_any()
                .then(|| trace.host_memory.clone()),
        }
    }
}

/// The memory nodes of the devices among `workers` (every node but the host's), in order.
fn device_nodes(workers: &[WorkerInfo]) -> Vec<usize> {
    let mut nodes: Vec<usize> = workers
        .iter()
        .map(|w| w.node.0)
        .filter(|&n| n != 0)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// Bytes per device: every copy of `trace` into or out of its node, by the node's name.
fn bytes_per_device(trace: &Trace, devices: &[usize]) -> Vec<(String, usize)> {
    devices
        .iter()
        .map(|&node| {
            let bytes = trace
                .transfers
                .iter()
                .filter(|t| t.transfer.from.0 == node || t.transfer.to.0 == node)
                .map(|t| t.transfer.bytes)
                .sum();
            (hetla_runtime::node_name(MemoryNode(node)), bytes)
        })
        .collect()
}
