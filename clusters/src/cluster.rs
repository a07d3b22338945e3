//! A CPU cluster: a group of cores with its team and its rayon pool, one thread of each pinned per
//! core.
//!
//! A cluster runs one kernel at a time with all its cores (Cojean et al. (2016), Fig. 2b). The
//! runtime's worker for the cluster calls [`CpuCluster::run`]: it leads the cluster's [`Team`], so
//! a kernel called with `Par::rayon(size)` runs piece i on the thread pinned to core i (see the
//! `team` module), never on whichever thread came first. The rayon pool serves what is not a tile
//! kernel (a batch of small independent solves, one per thread) and kernels called outside a team.
//! Its [`Lender`] says whether its cores may pack a GPU's copies now (the `copies` module). A pin
//! the OS refuses is an error (see the `affinity` module).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::affinity::refused;
use crate::{ClusterError, Team, format_cpu_list};

/// A group of cores, its team and its pinned thread pool.
pub struct CpuCluster {
    cpus: Vec<usize>,
    pool: rayon::ThreadPool,
    team: Team,
    lender: Lender,
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
        let pool = pinned_pool(&cpus, name)?;
        let team = Team::new(&cpus, name)?;
        Ok(Self {
            cpus,
            pool,
            team,
            lender: Lender::default(),
        })
    }

    /// The cluster's [`Lender`]: whether its cores may pack copies now (its worker says).
    pub fn lender(&self) -> Lender {
        self.lender.clone()
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

/// Whether a cluster's cores may pack copies now: a flag its worker sets (the runtime's: busy from
/// the moment it takes a task until it finds none, idle between runs; see [`crate::CopyThreads`]).
/// Clones share the flag.
#[derive(Debug, Clone)]
pub struct Lender(Arc<AtomicBool>);

impl Default for Lender {
    /// An idle cluster's.
    fn default() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }
}

impl Lender {
    /// Whether the cluster has no kernel to run (its cores may be lent).
    pub fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Marks the cluster idle (no kernel to run) or busy (a kernel taken or running).
    pub fn set_idle(&self, idle: bool) {
        self.0.store(idle, Ordering::Release);
    }
}

/// A rayon pool of one thread per CPU of `cpus`, thread i pinned to `cpus[i]` and named
/// "{name}-{i}". A pin the OS refuses is [`ClusterError::Pin`] unless unpinned threads are allowed.
pub(crate) fn pinned_pool(cpus: &[usize], name: &str) -> Result<rayon::ThreadPool, ClusterError> {
    let pinned = cpus.to_vec();
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
    Ok(pool)
}
