//! # hetla-clusters
//!
//! What hetla knows about the CPUs of the machine and how it groups them:
//! - [`Topology`]: packages, NUMA nodes, L3 and L2 caches, cores and logical CPUs, from
//!   hwloc (feature `hwloc`) or Linux sysfs, or built by hand for tests;
//! - [`ClusterSpec`]: "2x10", "numa", "0-3/4-7", "auto"..., resolved against a topology
//!   into compact groups of cores;
//! - [`CpuCluster`]: a rayon pool whose threads are pinned to a cluster's cores;
//! - [`gpus`]: the CUDA devices of the machine (names, memory), empty without a driver;
//! - the logical CPUs this process may use and the Linux "cpulist" syntax ("0-3,8").
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cluster;
mod cpulist;
mod error;
mod gpus;
#[cfg(feature = "hwloc")]
mod hwloc;
mod spec;
mod topology;

pub use cluster::{CpuCluster, pin_current_thread};
pub use cpulist::{CpuListError, format_cpu_list, parse_cpu_list};
pub use error::ClusterError;
pub use gpus::{GpuInfo, driver_present, gpus};
pub use spec::ClusterSpec;
pub use topology::{CpuSet, Level, Topology, TopologySource};

/// The logical CPUs this process may run on (its affinity mask), sorted. Falls back to
/// `0..available_parallelism` where the platform does not expose a mask.
pub fn available_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus = (0..n).collect();
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The logical CPUs the kernel has online (Linux sysfs), or `None` where that file does
/// not exist or cannot be parsed.
pub fn online_cpus() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(text.trim()).ok()
}
