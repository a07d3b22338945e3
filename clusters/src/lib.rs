//! # hetla-clusters
//!
//! What hetla knows about the CPUs of the machine and how it groups them. For now: the
//! logical CPUs this process may run on (its affinity mask) and the CPUs the kernel has
//! online, with the Linux "cpulist" syntax ("0-3,8,10-11") used by sysfs and by explicit
//! cluster specifications. Topology discovery (hwloc or sysfs), cluster specifications
//! and pinned thread pools build on these.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cpulist;

pub use cpulist::{CpuListError, format_cpu_list, parse_cpu_list};

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
