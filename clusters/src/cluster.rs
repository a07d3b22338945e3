//! A CPU cluster: a group of cores with its own rayon pool, one thread pinned per core.
//!
//! A cluster runs one kernel at a time with all its cores (Cojean et al. (2016), Fig. 2b): the
//! runtime's worker for the cluster runs inside the pool, and a kernel called with
//! `Par::rayon(size)` spreads over the pool's threads, which never leave their cores.

use crate::{ClusterError, format_cpu_list};

/// Pins the calling thread to logical CPU `cpu` (best effort, as for cluster threads); returns
/// whether the OS accepted.
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// A group of cores and its pinned thread pool.
pub struct CpuCluster {
    cpus: Vec<usize>,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for CpuCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCluster")
            .field("cpus", &format_cpu_list(&self.cpus))
            .finish()
    }
}

impl CpuCluster {
    /// Starts a pool with one thread per CPU of `cpus`, thread i pinned to `cpus[i]`. `name`
    /// prefixes the thread names ("hetla-c0-1" is thread 1 of cluster 0).
    pub fn new(cpus: Vec<usize>, name: &str) -> Result<Self, ClusterError> {
        if cpus.is_empty() {
            return Err(ClusterError::ZeroSized {
                spec: name.to_owned(),
            });
        }
        let pinned = cpus.clone();
        let prefix = name.to_owned();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cpus.len())
            .thread_name(move |i| format!("{prefix}-{i}"))
            .start_handler(move |i| {
                // Pinning is best effort: where the OS refuses, the thread still runs
                // (unpinned), which only costs locality.
                core_affinity::set_for_current(core_affinity::CoreId { id: pinned[i] });
            })
            .build()
            .map_err(|e| ClusterError::Pool {
                reason: e.to_string(),
            })?;
        Ok(Self { cpus, pool })
    }

    /// The logical CPUs of the cluster, one per thread.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Number of cores (threads) of the cluster.
    pub fn size(&self) -> usize {
        self.cpus.len()
    }

    /// The cluster's pool; run work inside it with `install`.
    pub fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }
}
