//! Errors of topology discovery and cluster building.

use crate::{CpuListError, Level};

/// What went wrong while reading the topology or building clusters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The spec is not one of the accepted forms.
    #[error("cluster spec {spec:?}: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What was wrong.
        reason: String,
    },
    /// A cluster with no core.
    #[error("cluster spec {spec:?}: a cluster must have at least one core")]
    ZeroSized {
        /// The spec as given.
        spec: String,
    },
    /// More cores asked than the machine lets this process use.
    #[error(
        "cluster spec {spec}: asks for {asked} cores but only {available} are available; use at most {available} (for example 1x{available})"
    )]
    TooManyCores {
        /// The spec.
        spec: String,
        /// Cores asked (count x size, saturated at `usize::MAX`).
        asked: usize,
        /// Cores available.
        available: usize,
    },
    /// A listed CPU that this process may not use or that does not exist.
    #[error("CPU {cpu} is not available to this process (available: {available})")]
    UnavailableCpu {
        /// The CPU.
        cpu: usize,
        /// The CPUs that are available, as a cpulist.
        available: String,
    },
    /// A CPU listed in two clusters.
    #[error("CPU {cpu} appears in more than one cluster; clusters must not overlap")]
    Overlap {
        /// The CPU.
        cpu: usize,
    },
    /// The topology has no objects of the level the spec names.
    #[error(
        "the topology has no {level} information; use another level, NxM or explicit CPU lists"
    )]
    MissingLevel {
        /// The level.
        level: Level,
    },
    /// A malformed CPU list.
    #[error(transparent)]
    CpuList(#[from] CpuListError),
    /// The topology could not be read.
    #[error("topology: {reason}")]
    Topology {
        /// What failed.
        reason: String,
    },
    /// A thread pool could not be started.
    #[error("cannot start a cluster's thread pool: {reason}")]
    Pool {
        /// The pool builder's error.
        reason: String,
    },
    /// The OS refused to pin a cluster's thread to its CPU.
    #[error(
        "the OS refused to pin thread {thread} to CPU {cpu} (sched_setaffinity); give this process that CPU (its cpuset, taskset), choose clusters on the CPUs it has, or pass --allow-unpinned (HETLA_ALLOW_UNPINNED=1) to run unpinned with a warning"
    )]
    Pin {
        /// The CPU.
        cpu: usize,
        /// The thread's name.
        thread: String,
    },
}
