//! The vocabulary of a run, shared by the engine, both executors and their callers: the work
//! ([`Workload`]), its options ([`RunOptions`], [`WriteBack`]) and how it fails ([`RunStep`],
//! [`TaskFailure`], [`RunError`]).

use std::sync::Arc;

use hetla_factorizations::{Mode, TaskGraph, TaskId, TileRef};
use hetla_kernels::{
    AnyMut, AnyRef, DeviceSpan, HostRange, KernelArgs, KernelError, Op, Par, TensorMath,
};

use crate::data::{MemoryNode, NoRoom};
use crate::perfmodel::KernelKey;
use crate::schedulers::{DMDA_BETA, Planned, Scheduler, SchedulerKind, StaticPlan};
use crate::trace::Trace;
use crate::workers::ResourceKind;

/// Work for the runtime: a task graph and how to run each task.
pub trait Workload: Sync {
    /// The tasks and their dependencies.
    fn graph(&self) -> &TaskGraph;
    /// The performance-model key of a task (its operation and operand shapes).
    fn key(&self, task: TaskId) -> KernelKey;
    /// Bytes of a tile (for data transfers).
    fn tile_bytes(&self, tile: TileRef) -> usize;
    /// Runs a task with the given parallelism, on the calling thread's pool.
    fn run(&self, task: TaskId, par: Par) -> Result<(), KernelError>;
    /// The host storage of a tile, in its precision, for copies to devices (`None`: the workload
    /// has none, and cannot run on a platform with devices).
    fn host_tile(&self, tile: TileRef) -> Option<AnyRef<'_>> {
        let _ = tile;
        None
    }
    /// The host storage of a tile, writable, for copies back from devices (`None` for a tile that
    /// may not be written).
    ///
    /// # Safety
    /// No other view of the tile may be used while the returned one lives.
    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<AnyMut<'_>> {
        let _ = tile;
        None
    }
    /// The host memory its tiles lie in, which [`HostMemory::PageLocked`] page-locks for the run
    /// (none: its copies are staged).
    fn host_ranges(&self) -> Vec<HostRange> {
        Vec::new()
    }
    /// The home of a tile that lives in a device's own memory (a caller's matrix on a GPU) instead
    /// of host memory: the run's copies of it to and from the host's memory node are then copies
    /// within that device ([`Device::import`](crate::Device::import) and
    /// [`Device::export`](crate::Device::export)), and it has no host storage, so no CPU cluster
    /// can run a task on it. `None` (by default): the tile lives in host memory.
    fn device_home(&self, tile: TileRef) -> Option<DeviceHome> {
        let _ = tile;
        None
    }
    /// What `task`'s kernel takes besides its tiles, for a device to run it (LU's interchanges: the
    /// work holds them, a device's kernel has no other way to them). Nothing by default.
    fn kernel_args(&self, task: TaskId) -> KernelArgs {
        let _ = task;
        KernelArgs::None
    }
    /// How many inputs of `task` come from outside the run (tiles another process sends): the task
    /// is ready once its predecessors have ended and [`Inbox::arrived`](crate::Inbox::arrived) was
    /// called that many times for it. Only [`execute_beside`](crate::execute_beside) can deliver
    /// them.
    fn outside_inputs(&self, task: TaskId) -> usize {
        let _ = task;
        0
    }
}

/// Where a tile lives when a device's memory is its home ([`Workload::device_home`]): the memory
/// node of the device and the block of its memory. The host's memory node (`HOST`) stands for this
/// home in the data registry: a tile valid "on the host" is valid in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceHome {
    node: MemoryNode,
    span: DeviceSpan,
}

impl DeviceHome {
    /// The tile lives in `span` of the memory of the device of memory node `node`.
    ///
    /// # Safety
    /// `span` must be memory of that device (see [`Device::check_span`](crate::Device::check_span))
    /// holding the tile's elements, which no one but the run reads or writes while it goes on, and
    /// which overlaps no other tile's home.
    pub unsafe fn new(node: MemoryNode, span: DeviceSpan) -> Self {
        Self { node, span }
    }

    /// The memory node of the device whose memory holds the tile.
    pub fn node(&self) -> MemoryNode {
        self.node
    }

    /// The block of the device's memory that holds the tile.
    pub fn span(&self) -> &DeviceSpan {
        &self.span
    }
}

/// Where a run failed, in the order failures are reported (the earliest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RunStep {
    /// The input check beside the run ([`execute_checked`](crate::execute_checked)) refused its
    /// input.
    Input,
    /// Before any task: the plan, the scheduler, placing the operands.
    Setup,
    /// A task, by its index in the graph.
    Task(TaskId),
    /// The final write-back of device-resident tiles to host memory.
    WriteBack,
    /// The inputs from outside the run ([`execute_beside`](crate::execute_beside)): they failed or
    /// never came.
    Outside,
}

/// Options of one run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The scheduling policy.
    pub scheduler: SchedulerKind,
    /// Operations restricted to some resource kinds (others run anywhere).
    pub restrictions: Vec<(Op, Vec<ResourceKind>)>,
    /// Operations that run on some resource kinds where the platform has a worker of one of them,
    /// and on any worker the restrictions allow otherwise (LU's panel: on the CPU clusters beside
    /// GPUs, on the GPUs where no cluster is beside them).
    pub preferences: Vec<(Op, Vec<ResourceKind>)>,
    /// A static allocation to follow instead of `scheduler` (see
    /// [`StaticPlan`](crate::StaticPlan)).
    pub plan: Option<Arc<StaticPlan>>,
    /// Tiles put on a memory node before the clock starts: `Mode::Read` adds a copy there (the host
    /// keeps its own), `Mode::ReadWrite` leaves that copy the only valid one. Data "already on the
    /// device"; the copies are neither timed nor traced.
    pub placement: Vec<(TileRef, MemoryNode, Mode)>,
    /// dmda's beta, the weight of transfer time in its scores (`None`: [`DMDA_BETA`]); other
    /// policies ignore it.
    pub dmda_beta: Option<f64>,
    /// When a device's copy of a tile goes back to host memory.
    pub write_back: WriteBack,
    /// How the host tiles meet the devices' copies (ignored without a device).
    pub host_memory: HostMemory,
    /// Each task's priority, to use instead of its bottom level in the graph (one per task): a
    /// distributed run's part of a graph ranks its tasks by their bottom levels in the whole graph,
    /// remote successors included.
    pub priorities: Option<Arc<[f64]>>,
    /// How the devices compute the products of single-precision tiles (tensor cores: TF32 or BF16
    /// operands, f32 accumulation; [`TensorMath::applies`]); CPU workers always compute in f32.
    pub tensor_math: TensorMath,
}

/// How the host tiles of a run on a platform with devices meet their copies (serialised by its
/// name: "staged", "page-locked").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HostMemory {
    /// The host tiles stay in pageable memory: each copy is packed by CPU cores into a page-locked
    /// staging buffer (or unpacked from one) beside the DMA.
    #[default]
    Staged,
    /// The workload's host memory ([`Workload::host_ranges`]) is page-locked for the run, by tile
    /// columns: the first before the run, the others beside it, in address order (locking runs at
    /// about 20 GB/s). The DMA engines copy straight from and into the tiles whose column is
    /// locked, with no packing; the others are staged. Locking costs time (reported in
    /// [`crate::Trace::host_memory`]); a lock that fails leaves the rest of the run staged.
    PageLocked,
}

impl HostMemory {
    /// The name the CLI and reports use.
    pub fn name(self) -> &'static str {
        match self {
            HostMemory::Staged => "staged",
            HostMemory::PageLocked => "page-locked",
        }
    }
}

impl std::str::FromStr for HostMemory {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "staged" => Ok(Self::Staged),
            "page-locked" | "pinned" => Ok(Self::PageLocked),
            _ => Err(format!(
                "{s:?}: expected staged (copies packed into page-locked buffers) or page-locked (the matrix page-locked for the run, copied straight by DMA)"
            )),
        }
    }
}

/// When a tile modified on a device is written back to host memory (besides an eviction, which
/// writes back a last copy at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WriteBack {
    /// As soon as it is final (its last writer ended), while the run goes on; the device keeps a
    /// shared copy for the tasks that still read it. The flush at the end of the run then has
    /// little or nothing left to copy.
    #[default]
    Final,
    /// In the flush at the end of the run, as StarPU does when the data is unregistered (the policy
    /// of the runs the papers measured).
    AtEnd,
    /// Never while the run goes on: the matrix lives on the devices, as a device-resident call's
    /// does. With its tiles placed on a device before the clock starts ([`RunOptions::placement`]),
    /// the run is timed as a library call on a matrix already in GPU memory is (cuSOLVER's resident
    /// peer): the clock stops after the last task, and the flush to host memory that follows (so
    /// that the caller's matrix holds the result) is neither timed nor traced, as the placement's
    /// copies are not.
    Resident,
}

impl std::str::FromStr for WriteBack {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "final" => Ok(Self::Final),
            "end" => Ok(Self::AtEnd),
            "resident" => Ok(Self::Resident),
            _ => Err(format!(
                "{s:?}: expected final (when a tile is final), end (at the end of the run) or \
                 resident (after the run's clock stops)"
            )),
        }
    }
}

impl RunOptions {
    /// The scheduler of a run on `workers` workers with `tasks` tasks: the static plan's when there
    /// is one (checked against the run), else a fresh one of `scheduler`'s kind.
    pub(crate) fn build_scheduler(
        &self,
        workers: usize,
        tasks: usize,
    ) -> Result<Box<dyn Scheduler>, String> {
        match &self.plan {
            Some(plan) => {
                plan.check(tasks, workers)?;
                Ok(Box::new(Planned::new(plan.clone(), workers, tasks)))
            }
            None => Ok(self
                .scheduler
                .build_with_beta(workers, self.dmda_beta.unwrap_or(DMDA_BETA))),
        }
    }

    /// The kinds of worker that may run `op` on a platform whose workers are of `kinds`: its
    /// restriction, else its preference where the platform has a worker of one of its kinds;
    /// `None`: any worker.
    pub fn allowed_kinds(&self, op: Op, kinds: &[ResourceKind]) -> Option<&[ResourceKind]> {
        fn find(list: &[(Op, Vec<ResourceKind>)], op: Op) -> Option<&[ResourceKind]> {
            (list.iter())
                .find(|(o, _)| *o == op)
                .map(|(_, k)| k.as_slice())
        }
        find(&self.restrictions, op).or_else(|| {
            find(&self.preferences, op)
                .filter(|preferred| preferred.iter().any(|k| kinds.contains(k)))
        })
    }

    /// The name of the policy the run follows ("static" with a plan).
    pub fn policy_name(&self) -> &'static str {
        if self.plan.is_some() {
            "static"
        } else {
            self.scheduler.name()
        }
    }
}

/// Why a run failed at its [`RunStep`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TaskFailure {
    /// The kernel (or a copy to or from a device) returned an error.
    Kernel(KernelError),
    /// The task panicked; the panic message.
    Panic(String),
    /// Its worker's memory node cannot hold the tiles it needs.
    Memory(NoRoom),
    /// No worker of the platform may run the task's operation (the run's restrictions).
    NoWorker,
    /// The run's static plan does not fit its graph or its workers.
    Plan(String),
    /// The inputs from outside the run failed (another process's failure, a lost message); why.
    Outside(String),
}

/// A failed run: the first failing task (lowest index), its failure, and the trace of what did run.
#[derive(Debug)]
pub struct RunError {
    /// Where it failed.
    pub step: RunStep,
    /// What happened.
    pub failure: TaskFailure,
    /// The tasks that ran before the run stopped (boxed: errors stay small).
    pub trace: Box<Trace>,
}
