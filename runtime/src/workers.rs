//! The workers of a run as schedulers, traces and reports see them: an index, a kind, the class its
//! performance models are kept under, and the memory node its kernels work in.

use crate::data::{HOST, MemoryNode};
use crate::perfmodel::ResourceClass;

/// The kind of a worker, for restricting tasks to kinds of resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A CPU cluster.
    Cpu,
    /// A GPU.
    Gpu,
}

/// A worker of a run: its index in the platform's workers (CPU clusters first, then the devices).
/// Tables of a run index by it directly (`Vec<T>` and `[T]` implement `Index<WorkerId>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct WorkerId(pub usize);

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

hetla_factorizations::index_by!(WorkerId);

/// What the scheduler and the reports know about a worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerInfo {
    /// A short name ("cpu0").
    pub name: String,
    /// The resource kind.
    pub kind: ResourceKind,
    /// The class its performance models are kept under.
    pub class: ResourceClass,
    /// The memory node its kernels work in.
    pub node: MemoryNode,
    /// Logical CPUs it uses (for a GPU, its host thread's core).
    pub cpus: Vec<usize>,
}

impl WorkerInfo {
    /// The worker of CPU cluster number `index`, on the host node, using `cpus`.
    pub fn cpu_cluster(index: usize, cpus: Vec<usize>) -> Self {
        Self {
            name: format!("cpu{index}"),
            kind: ResourceKind::Cpu,
            class: ResourceClass::CpuCluster { cores: cpus.len() },
            node: HOST,
            cpus,
        }
    }

    /// The worker of device number `index` (memory node `index + 1`), whose host thread runs on
    /// `core`.
    pub fn device(index: usize, model: &str, core: usize) -> Self {
        Self {
            name: format!("gpu{index}"),
            kind: ResourceKind::Gpu,
            class: ResourceClass::Gpu {
                name: model.to_owned(),
            },
            node: MemoryNode(index + 1),
            cpus: vec![core],
        }
    }

    /// Cores of the worker's CPU cluster (1 for a GPU's host thread).
    pub fn cores(&self) -> usize {
        self.cpus.len().max(1)
    }
}
