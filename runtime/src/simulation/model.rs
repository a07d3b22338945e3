//! What a simulated run is given and gives: the modelled machine of a node, the work, the options,
//! and the distributed run's nodes, messages and trace.

use std::sync::Arc;

use hetla_factorizations::{TaskGraph, TaskId, TileRef};

use crate::data::{HOST, MemoryNode};
use crate::link::{Hop, LinkModel};
use crate::perfmodel::{KernelKey, ResourceClass};
use crate::run::RunOptions;
use crate::trace::Trace;
use crate::workers::WorkerInfo;
use crate::{Error, Result};

/// A modelled machine's workers, memory nodes and links, as a simulated run sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPlatform {
    /// The workers: CPU clusters on the host node, then one per GPU on its own node.
    pub workers: Vec<WorkerInfo>,
    /// Capacity of each memory node in bytes (`None`: unlimited; node 0 is the host).
    pub capacities: Vec<Option<usize>>,
    /// The host-GPU links (`None` without GPUs).
    pub link: Option<LinkModel>,
    /// Seconds a CPU worker spends between two tasks (the runtime's own work).
    pub cpu_task_overhead: f64,
    /// Seconds from a GPU worker taking a task to its kernel's start at the earliest: the host's
    /// launch of it and its wait on the previous one (`GpuModel::launch_us`, measured by
    /// `hetla calibrate --gpus all --output`; 0: none).
    pub gpu_launch: f64,
    /// How host tiles meet the GPUs' links: packed by CPU cores into page-locked staging buffers
    /// (`Some`), or copied by the GPU's DMA engines straight from page-locked host tiles (`None`).
    pub staging: Option<Staging>,
    /// The compute streams of each GPU: the kernels it runs at once at most, sharing its rate
    /// ([`GpuSharing`](super::GpuSharing)); 1 runs one kernel at a time.
    pub compute_streams: usize,
    /// Host memory page-locked beside the run, piece by piece (a real run's
    /// `HostMemory::PageLocked`): a copy of a tile whose piece is not locked yet when it is asked
    /// for goes through [`SimPlatform::staging`] as on a staged run, the others straight. `None`:
    /// every tile is as `staging` says from the start.
    pub locking: Option<Locking>,
}

/// When each tile column of a run's host memory is page-locked, on a run that locks it beside the
/// workers ([`SimPlatform::locking`]): the first piece before the run's clock starts, the others
/// one after another at the rate locking runs at (about 20 GB/s, lease 3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Locking {
    /// `locked_at[m][j]`: seconds from the run's start at which tile column `j` of matrix `m` is
    /// locked; a matrix or column not listed is locked from the start.
    pub locked_at: Vec<Vec<f64>>,
}

impl Locking {
    /// Locking pieces of `bytes[m][j]` (tile column `j` of matrix `m`), matrix by matrix and column
    /// by column, at `gb_per_s`: the first piece before the clock, each other when those before it
    /// and itself are done.
    pub fn in_order(bytes: &[Vec<usize>], gb_per_s: f64) -> Self {
        let mut done = 0.0;
        let mut first = true;
        let locked_at = bytes
            .iter()
            .map(|columns| {
                columns
                    .iter()
                    .map(|&b| {
                        if !std::mem::take(&mut first) {
                            done += b as f64 / (gb_per_s * 1e9);
                        }
                        done
                    })
                    .collect()
            })
            .collect();
        Self { locked_at }
    }

    /// Whether `tile`'s column is locked at `at`.
    pub fn locked(&self, tile: TileRef, at: f64) -> bool {
        (self.locked_at.get(tile.matrix.0 as usize))
            .and_then(|columns| columns.get(tile.col))
            .is_none_or(|&t| t <= at)
    }
}

/// The staged data path of a GPU: an upload is first packed by CPU cores into a page-locked staging
/// buffer, then copied over the link; a download is copied into a staging buffer, then unpacked
/// into the host tile by the same cores, on one thread per GPU that carries the write-backs one at
/// a time (the real executor's `CudaDevice` until tiles live in page-locked memory). Packing and
/// unpacking share the GPU's copy cores, one copy at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct Staging {
    /// Per GPU in order, the GB/s (10^9 bytes per second) its copy cores pack or unpack at
    /// together.
    pub gb_per_s: Vec<f64>,
}

impl Staging {
    /// Seconds the copy cores of GPU `gpu` (0-based) take to pack or unpack `bytes`.
    pub fn seconds(&self, gpu: usize, bytes: usize) -> f64 {
        match self.gb_per_s.get(gpu) {
            Some(&rate) if rate > 0.0 => bytes as f64 / (rate * 1e9),
            _ => 0.0,
        }
    }
}

impl SimPlatform {
    /// A node of CPU `workers` alone, with no runtime overhead: host memory only, no link.
    pub fn cpus(workers: Vec<WorkerInfo>) -> Self {
        Self {
            workers,
            capacities: vec![None],
            link: None,
            cpu_task_overhead: 0.0,
            gpu_launch: 0.0,
            staging: None,
            compute_streams: 1,
            locking: None,
        }
    }

    /// A real platform as the simulator models it: its workers, its devices' memory budgets and
    /// compute streams, the link model of its first device (the platform's calibrated one, or the
    /// default), copies straight over the link (no staging: its packing rate is not in the
    /// platform's models) and no runtime overhead. What a choice made before a run simulates (the
    /// tile of a factorisation, `hetla::Plan`).
    pub fn of(platform: &crate::Platform) -> Self {
        let devices = platform.devices();
        Self {
            workers: platform.workers().to_vec(),
            capacities: std::iter::once(None)
                .chain(devices.iter().map(|d| Some(d.device.budget())))
                .collect(),
            link: platform.links().first().copied(),
            cpu_task_overhead: 0.0,
            gpu_launch: 0.0,
            staging: None,
            compute_streams: platform.compute_streams(),
            locking: None,
        }
    }

    /// Seconds one copy of `bytes` from `from` to `to` takes on an idle link (a staged GPU-to-GPU
    /// copy counts both hops).
    pub fn copy_seconds(&self, from: MemoryNode, to: MemoryNode, bytes: usize) -> f64 {
        match self.link {
            Some(link) => crate::link::copy_seconds(|_| link, from, to, bytes),
            None => 0.0,
        }
    }

    /// Whether a copy of `tile` asked for at `at` is staged: on a staged data path unless the
    /// tile's host memory is locked by then ([`SimPlatform::locking`]).
    pub(super) fn staged(&self, tile: TileRef, at: f64) -> bool {
        self.staging.is_some() && self.locking.as_ref().is_none_or(|l| !l.locked(tile, at))
    }

    /// Whether GPUs copy to each other directly (through a switch).
    pub(super) fn peer_links(&self) -> bool {
        self.link.is_some_and(|l| l.p2p.is_some())
    }

    /// The GPUs' memory nodes.
    pub(super) fn gpu_nodes(&self) -> impl Iterator<Item = MemoryNode> {
        (1..self.capacities.len()).map(MemoryNode)
    }

    /// The node whose host link `node` uses: the first GPU of its group when GPUs share host links
    /// ([`LinkModel::host_shared_by`]), itself otherwise.
    pub(super) fn host_link_of(&self, node: MemoryNode) -> MemoryNode {
        if node == HOST {
            return HOST;
        }
        let shared = self.link.map_or(1, |l| l.host_shared_by.max(1));
        MemoryNode(1 + (node.0 - 1) / shared * shared)
    }

    /// The link directions a copy uses (at most two), each with its rate.
    pub(super) fn hops(&self, from: MemoryNode, to: MemoryNode) -> [Option<Hop>; 2] {
        match self.link {
            Some(link) => crate::link::hops(|_| link, from, to),
            None => [None, None],
        }
    }
}

/// What a simulated run executes: a task graph, each task's kernel, tile sizes in bytes, and the
/// duration of a kernel on a class (`None`: the class has no rate for it).
#[derive(Clone, Copy)]
pub struct SimWork<'a> {
    /// The tasks and their dependencies.
    pub graph: &'a TaskGraph,
    /// Kernel of each task.
    pub keys: &'a [KernelKey],
    /// Bytes of a tile.
    pub tile_bytes: &'a dyn Fn(TileRef) -> usize,
    /// Seconds a kernel takes on a class.
    pub duration: &'a dyn Fn(&KernelKey, &ResourceClass) -> Option<f64>,
}

/// Options of a simulated run.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Scheduler and restrictions, as for a real run.
    pub run: RunOptions,
    /// Seed of the duration noise.
    pub seed: u64,
    /// Relative amplitude of the duration noise (0: every task lasts its model duration).
    pub noise: f64,
}

impl SimOptions {
    /// Checks the noise amplitude: in [0, 1), so that durations stay positive.
    pub fn check(&self) -> Result<()> {
        if (0.0..1.0).contains(&self.noise) {
            Ok(())
        } else {
            Err(Error::InvalidOption {
                option: "noise",
                reason: format!(
                    "{} is not in [0, 1): durations must stay positive",
                    self.noise
                ),
            })
        }
    }
}

/// One node of a simulated distributed run (one MPI rank): its platform, its tasks, and their
/// priorities.
#[derive(Clone, Copy)]
pub struct SimRank<'a> {
    /// The node's modelled machine.
    pub platform: &'a SimPlatform,
    /// The tasks it runs.
    pub work: SimWork<'a>,
    /// Their priorities (`None`: the run options', else their bottom levels in `work`'s graph). A
    /// rank's own graph misses its tasks' remote successors: a distributed run gives the whole
    /// graph's.
    pub priorities: Option<&'a Arc<[f64]>>,
}

/// A tile one node sends another once its writer has ended (or as the run starts, for a tile as the
/// run found it): one message on the network.
#[derive(Debug, Clone, PartialEq)]
pub struct SimMessage {
    /// The tile.
    pub tile: TileRef,
    /// The sending rank.
    pub from: usize,
    /// The sender's task after which the tile is sent (it writes the tile); `None`: the tile as the
    /// run found it, sent as the run starts (a task of the sender accesses it).
    pub writer: Option<TaskId>,
    /// The receiving rank.
    pub to: usize,
    /// The receiver's tasks that read it, once per access: each waits for it as an input from
    /// outside its rank's run.
    pub readers: Vec<TaskId>,
}

/// One message's trip over the network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageEvent {
    /// The tile.
    pub tile: TileRef,
    /// Sending rank.
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Bytes sent.
    pub bytes: usize,
    /// Start, seconds since the run began.
    pub start: f64,
    /// End (arrival), seconds since the run began.
    pub end: f64,
}

/// A simulated distributed run: each node's trace and the messages between them.
#[derive(Debug, Clone, PartialEq)]
pub struct GridTrace {
    /// Each rank's run on its own workers; every trace's makespan is the whole run's.
    pub ranks: Vec<Trace>,
    /// The messages, by start time.
    pub messages: Vec<MessageEvent>,
    /// The end of the last task, copy or message on any node.
    pub makespan: f64,
}
