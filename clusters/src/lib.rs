//! # hetla-clusters
//!
//! What hetla knows about the CPUs of the machine and how it groups them:
//! - [`Topology`]: packages, NUMA nodes, L3 and L2 caches, cores and logical CPUs, from hwloc
//!   (feature `hwloc`) or Linux sysfs, or built by hand for tests;
//! - [`ClusterSpec`]: "2x10", "numa", "0-3/4-7", "auto"..., resolved against a topology into
//!   compact groups of cores;
//! - [`CpuCluster`]: a cluster's [`Team`] (one thread pinned per core, piece i of a kernel on
//!   thread i) and a rayon pool pinned likewise; a pin the OS refuses is an error unless
//!   [`allow_unpinned`];
//! - [`gpus`]: the CUDA devices of the machine (names, memory), empty without a driver;
//! - the logical CPUs this process may use and the Linux "cpulist" syntax ("0-3,8").
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod affinity;
mod cluster;
mod copies;
mod cpulist;
mod detect;
mod error;
mod gpus;
#[cfg(feature = "hwloc")]
mod hwloc;
mod level;
mod spec;
mod team;
mod topology;

pub use affinity::{allow_unpinned, current_cpu, pin_current_thread, unpinned_allowed};
pub use cluster::{CpuCluster, Lender};
pub use copies::{CopyCounts, CopyThreads};
pub use cpulist::{CpuListError, available_cpus, format_cpu_list, online_cpus, parse_cpu_list};
pub use error::ClusterError;
pub use gpus::{GpuInfo, driver_present, gpus};
pub use level::Level;
pub use spec::ClusterSpec;
pub use team::{DEFAULT_SPIN, Piece, Team, run_pieces, take_pieces};
pub use topology::{CpuSet, Topology, TopologySource};
