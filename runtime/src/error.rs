//! The runtime's errors: what went wrong, with what was wrong and what would be right.

use hetla_clusters::ClusterError;
use hetla_kernels::KernelError;

use crate::data::NoRoom;

/// An error of the runtime layer (platforms, devices, models, runs, traces).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option of a run or a platform is out of range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// An error from a tile kernel or a device.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The topology or the cluster spec is unusable.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A performance-model file could not be read or written.
    #[error("performance models in {path}: {reason}")]
    PerfModel {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// An output file (trace, chart) could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A memory node (a GPU's budget) is too small for the tiles a task needs there.
    #[error(transparent)]
    Memory(#[from] NoRoom),
    /// No worker may run a task's operation under the run's restrictions.
    #[error(
        "no worker may run task {task} ({op}) under the run's restrictions; allow {op} on a kind of resource the platform has"
    )]
    NoWorker {
        /// The task.
        task: usize,
        /// Its operation.
        op: String,
    },
    /// A static plan, or a workload's description, that does not fit the run.
    #[error("the run's plan does not fit it: {reason}")]
    Plan {
        /// What does not fit.
        reason: String,
    },
    /// A scheduler left tasks unrun: a bug of the policy, reported instead of a hang.
    #[error("the {policy} scheduler left {left} of {tasks} tasks unrun")]
    Stalled {
        /// The policy's name.
        policy: &'static str,
        /// Tasks never run.
        left: usize,
        /// Tasks of the run.
        tasks: usize,
    },
}

impl Error {
    /// A short name of the kind of error ("no_worker", "stalled"), for scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidOption { .. } => "invalid_option",
            Error::Kernel(_) => "kernel",
            Error::Cluster(_) => "cluster",
            Error::PerfModel { .. } => "perf_model",
            Error::Output { .. } => "output",
            Error::Memory(_) => "memory",
            Error::NoWorker { .. } => "no_worker",
            Error::Plan { .. } => "plan",
            Error::Stalled { .. } => "stalled",
        }
    }

    /// An [`Error::Output`] for `path`.
    pub fn output(path: &std::path::Path, reason: impl std::fmt::Display) -> Self {
        Self::Output {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Result with the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
