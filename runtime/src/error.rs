//! The runtime's errors: what went wrong, with what was wrong and what would be right.

use std::sync::Arc;

use hetla_clusters::ClusterError;
use hetla_kernels::KernelError;

use hetla_factorizations::TaskId;

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
    /// A file could not be read, written or locked: the system's error, kept whole.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "lock").
        action: &'static str,
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: IoError,
    },
    /// An output file (trace, chart) is unusable before anything is written (a directory, a missing
    /// folder, two outputs naming one file), or its contents could not be made.
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
        task: TaskId,
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
    /// One node (rank) of a simulated distributed run failed.
    #[error("node {rank} of the distributed run: {source}")]
    Rank {
        /// The node's rank.
        rank: usize,
        /// Its failure.
        #[source]
        source: Box<Error>,
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
            Error::Io { .. } => "io",
            Error::Output { .. } => "output",
            Error::Memory(_) => "memory",
            Error::NoWorker { .. } => "no_worker",
            Error::Plan { .. } => "plan",
            Error::Stalled { .. } => "stalled",
            Error::Rank { source, .. } => source.kind(),
        }
    }

    /// An [`Error::Io`]: `action` ("read", "write") on `path` failed with `source`.
    pub fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.display().to_string(),
            source: IoError(Arc::new(source)),
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

/// A system I/O error, shared so that errors stay `Clone`; two are equal when their kinds and
/// messages are.
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl IoError {
    /// The system's error.
    pub fn get(&self) -> &std::io::Error {
        &self.0
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Result with the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
