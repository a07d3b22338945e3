//! A CPU cluster: a group of cores with its team and its rayon pool, one thread of each pinned per
//! core.
//!
//! A cluster runs one kernel at a time with all its cores (Cojean et al. (2016), Fig. 2b). The
//! runtime's worker for the cluster calls [`CpuCluster::run`]: it leads the cluster's [`Team`], so
//! a kernel called with `Par::rayon(size)` runs piece i on the thread pinned to core i (see the
//! `team` module), never on whichever thread came first. The rayon pool serves what is not a tile
//! kernel (a batch of small independent solves, one per thread; packing for the GPUs' copies) and
//! kernels called outside a team. A pin the OS refuses is an error (see the `affinity` module).

use std::sync::{Arc, Mutex};

use crate::affinity::refused;
use crate::{ClusterError, Team, format_cpu_list};

/// A group of cores, its team and its pinned thread pool.
pub struct CpuCluster {
    cpus: Vec<usize>,
    pool: rayon::ThreadPool,
    team: Team,
}

impl std::fmt::Debug for CpuCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCluster")
            .field("cpus", &format_cpu_list(&self.cpus))
            .finish()
    }
}

impl CpuCluster {
    /// Starts a pool with one thread per CPU of `cpus`, thread i pinned to `cpus[i]`, and a team on
    /// the same CPUs. `name` prefixes the thread names ("hetla-c0-1" is pool thread 1 of cluster 0,
    /// "hetla-c0-t1" its team's helper 1). A pin the OS refuses is [`ClusterError::Pin`] unless
    /// unpinned threads are allowed ([`crate::allow_unpinned`]).
    pub fn new(cpus: Vec<usize>, name: &str) -> Result<Self, ClusterError> {
        if cpus.is_empty() {
            return Err(ClusterError::ZeroSized {
                spec: name.to_owned(),
            });
        }
        let pinned = cpus.clone();
        let prefix = name.to_owned();
        let refusals: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
        let refusals_seen = Arc::clone(&refusals);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cpus.len())
            .thread_name(move |i| format!("{prefix}-{i}"))
            .start_handler(move |i| {
                if !crate::pin_current_thread(pinned[i]) {
                    let name = std::thread::current().name().unwrap_or("?").to_owned();
                    refusals_seen
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((pinned[i], name));
                }
            })
            .build()
            .map_err(|e| ClusterError::Pool {
                reason: e.to_string(),
            })?;
        // Every thread has run its start handler once it has run a broadcast.
        pool.broadcast(|_| ());
        for (cpu, thread) in refusals.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            refused(*cpu, thread)?;
        }
        let team = Team::new(&cpus, name)?;
        Ok(Self { cpus, pool, team })
    }

    /// The logical CPUs of the cluster, one per thread.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Number of cores (threads) of the cluster.
    pub fn size(&self) -> usize {
        self.cpus.len()
    }

    /// The cluster's pool; run work that is not a tile kernel inside it with `install`.
    pub fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    /// The cluster's team.
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// Runs `f` as the cluster's worker: on the pool's thread 0 (pinned to the cluster's first
    /// core, so rayon work inside `f` still has one pool thread per core), leading the cluster's
    /// team, so that the tile kernels `f` calls with `Par::rayon(size)` run their pieces on the
    /// team. With `record`, the pieces are kept for [`crate::take_pieces`]. The caller waits; a
    /// panic of `f` is resumed on it.
    pub fn run<R: Send>(&self, record: bool, f: impl FnOnce() -> R + Send) -> R {
        let f = Mutex::new(Some(f));
        let out = Mutex::new(None);
        self.pool.broadcast(|ctx| {
            if ctx.index() != 0 {
                return;
            }
            let f = f.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = f {
                let r = self.team.lead(record, f);
                *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            }
        });
        out.into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .expect("the pool's thread 0 ran the cluster's work")
    }
}
