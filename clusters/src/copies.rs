//! The threads that pack a device's copies, and the cores the clusters lend them.
//!
//! A GPU's host tiles are packed into page-locked staging buffers (and unpacked from them) by CPU
//! threads: one core copies a few GB/s, slower than a PCIe link, so the device's copy threads take
//! its host thread's core, the cores no cluster uses, and, where those are too few, cores borrowed
//! from the clusters (the runtime's `copy_cores` rule). A cluster's k-core kernel runs one piece
//! per core on its team and waits for the slowest, so a packing thread that takes one of its cores
//! while a kernel runs stalls all k: a cluster lends its cores only while its worker has no kernel
//! to run.
//!
//! - [`Lender`]: a cluster's flag, idle or busy, set by the runtime's worker for the cluster (busy
//!   from the moment it takes a task until it finds no more; idle between runs).
//! - [`CopyThreads`]: two pinned pools, one on the device's own cores, one on those and the
//!   borrowed ones. A copy runs on the second only when every cluster lending to it is idle as the
//!   copy starts, else on the first (or on the calling thread when it has no own pool), so no
//!   thread is ever woken on a busy cluster's core. The copy is cut into chunks taken in turn from
//!   a shared counter; a borrowed thread takes its next chunk only while its cluster is still idle,
//!   so a kernel that starts during a copy waits at most for the chunk in hand. The device's own
//!   threads never stop early: they finish whatever the borrowed ones left.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cluster::pinned_pool;
use crate::{ClusterError, Lender};

/// How a device's copies ran so far ([`CopyThreads::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounts {
    /// Copies run on the device's own threads only (or its calling thread).
    pub own: usize,
    /// Copies run with the borrowed cores as well (every lending cluster idle as they started).
    pub lent: usize,
    /// Chunks borrowed threads left to others because their cluster turned busy during the copy.
    pub given_back: usize,
}

/// The threads that pack and unpack a device's copies (see the module documentation).
pub struct CopyThreads {
    /// The pool on the device's own cores (none with one core: the calling thread copies).
    own: Option<rayon::ThreadPool>,
    /// The pool on its own cores and the borrowed ones, and for each of its threads the lender
    /// whose idleness it needs (none for an own core's thread).
    with_lent: Option<(rayon::ThreadPool, Vec<Option<Lender>>)>,
    own_copies: AtomicUsize,
    lent_copies: AtomicUsize,
    given_back: AtomicUsize,
}

impl std::fmt::Debug for CopyThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyThreads")
            .field("own", &self.own.as_ref().map(|p| p.current_num_threads()))
            .field(
                "with_lent",
                &self
                    .with_lent
                    .as_ref()
                    .map(|(p, _)| p.current_num_threads()),
            )
            .finish()
    }
}

impl CopyThreads {
    /// Pinned threads on `own` (the device's host core first, then cores no cluster uses) and on
    /// the `lent` cores, each with the lender of the cluster it belongs to; the threads are named
    /// "{name}-copy-i" and, on own and lent cores together, "{name}-lend-i". `own` must not be
    /// empty. A pin the OS refuses is an error unless unpinned threads are allowed
    /// ([`crate::allow_unpinned`]).
    pub fn new(own: &[usize], lent: &[(usize, Lender)], name: &str) -> Result<Self, ClusterError> {
        if own.is_empty() {
            return Err(ClusterError::ZeroSized {
                spec: name.to_owned(),
            });
        }
        let own_pool = match own.len() {
            1 => None,
            _ => Some(pinned_pool(own, &format!("{name}-copy"))?),
        };
        let with_lent = match lent.is_empty() {
            true => None,
            false => {
                let cpus: Vec<usize> = own
                    .iter()
                    .copied()
                    .chain(lent.iter().map(|l| l.0))
                    .collect();
                let gates = std::iter::repeat_n(None, own.len())
                    .chain(lent.iter().map(|l| Some(l.1.clone())))
                    .collect();
                Some((pinned_pool(&cpus, &format!("{name}-lend"))?, gates))
            }
        };
        Ok(Self {
            own: own_pool,
            with_lent,
            own_copies: AtomicUsize::new(0),
            lent_copies: AtomicUsize::new(0),
            given_back: AtomicUsize::new(0),
        })
    }

    /// The pool a copy starting now runs on and, for each of its threads, the lender whose idleness
    /// it needs: the pool with the borrowed cores when every lending cluster is idle, else the
    /// device's own (none: the calling thread).
    fn pool_now(&self) -> Option<(&rayon::ThreadPool, &[Option<Lender>])> {
        match (&self.with_lent, &self.own) {
            (Some((pool, gates)), _) if all_idle(gates) => Some((pool, gates)),
            (_, own) => own.as_ref().map(|pool| (pool, &[][..])),
        }
    }

    /// The threads a copy starting now would run on: all of them when every lending cluster is
    /// idle, else the device's own.
    pub fn threads_now(&self) -> usize {
        self.pool_now()
            .map_or(1, |(pool, _)| pool.current_num_threads())
    }

    /// Runs `body` once for each chunk index in `0..chunks` on the threads a copy starting now has
    /// (see the module documentation) and returns when all are done. A panic of `body` is resumed
    /// on the caller.
    pub fn run(&self, chunks: usize, body: &(dyn Fn(usize) + Sync)) {
        let next = AtomicUsize::new(0);
        // A thread's share: chunks in turn, a borrowed core's only while its cluster is idle (what
        // it leaves, the device's own threads, which never stop early, take).
        let share = |gate: Option<&Lender>| loop {
            if gate.is_some_and(|l| !l.idle()) {
                if next.load(Ordering::Relaxed) < chunks {
                    self.given_back.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                break;
            }
            body(c);
        };
        match self.pool_now() {
            Some((pool, gates)) => {
                let copies = match gates.is_empty() {
                    true => &self.own_copies,
                    false => &self.lent_copies,
                };
                copies.fetch_add(1, Ordering::Relaxed);
                pool.broadcast(|ctx| share(gates.get(ctx.index()).and_then(Option::as_ref)));
            }
            None => {
                self.own_copies.fetch_add(1, Ordering::Relaxed);
                share(None);
            }
        }
    }

    /// How its copies ran so far.
    pub fn counts(&self) -> CopyCounts {
        CopyCounts {
            own: self.own_copies.load(Ordering::Relaxed),
            lent: self.lent_copies.load(Ordering::Relaxed),
            given_back: self.given_back.load(Ordering::Relaxed),
        }
    }
}

/// Whether every lender among `gates` is idle.
fn all_idle(gates: &[Option<Lender>]) -> bool {
    gates.iter().flatten().all(Lender::idle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The CPU every thread may run on here (the first available one).
    fn cpu() -> usize {
        crate::available_cpus().first().copied().unwrap_or(0)
    }

    /// Which pool thread (by name) ran each chunk of a copy of `chunks` chunks on `threads`,
    /// `during` called on the first chunk; with `until`, the chunks wait (2 s at most) for the
    /// thread of that name to have run one, so that a thread the scheduler wakes late still finds
    /// chunks left.
    fn run_recording(
        threads: &CopyThreads,
        chunks: usize,
        during: &(dyn Fn() + Sync),
        until: Option<&str>,
    ) -> Vec<String> {
        let ran = Mutex::new(vec![String::new(); chunks]);
        let start = std::time::Instant::now();
        threads.run(chunks, &|c| {
            if c == 0 {
                during();
            }
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            ran.lock().unwrap()[c] = name;
            let arrived = || until.is_none_or(|u| ran.lock().unwrap().iter().any(|n| n == u));
            while !arrived() && start.elapsed() < std::time::Duration::from_secs(2) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // Long enough that every thread gets chunks when it may.
            std::thread::sleep(std::time::Duration::from_millis(2));
        });
        ran.into_inner().unwrap()
    }

    #[test]
    fn borrowed_cores_copy_only_while_their_cluster_is_idle() {
        let lender = Lender::default();
        let c = cpu();
        let threads = CopyThreads::new(&[c, c], &[(c, lender.clone())], "test").unwrap();
        assert_eq!(threads.threads_now(), 3);
        // Idle: the borrowed thread (the lent pool's thread 2) takes chunks.
        let ran = run_recording(&threads, 24, &|| (), Some("test-lend-2"));
        assert!(ran.iter().all(|n| n.starts_with("test-lend-")), "{ran:?}");
        assert!(ran.iter().any(|n| n == "test-lend-2"), "{ran:?}");
        // Busy: the own pool alone, the borrowed thread not woken.
        lender.set_idle(false);
        assert_eq!(threads.threads_now(), 2);
        let ran = run_recording(&threads, 24, &|| (), None);
        assert!(ran.iter().all(|n| n.starts_with("test-copy-")), "{ran:?}");
        assert_eq!(
            threads.counts(),
            CopyCounts {
                own: 1,
                lent: 1,
                given_back: 0
            }
        );
        // Turning busy during a copy: the borrowed thread stops after the chunk in hand and the
        // own threads finish the copy.
        lender.set_idle(true);
        let ran = run_recording(&threads, 24, &|| lender.set_idle(false), None);
        assert!(
            ran.iter().all(|n| !n.is_empty()),
            "every chunk ran: {ran:?}"
        );
        let borrowed = ran.iter().filter(|n| *n == "test-lend-2").count();
        assert!(
            borrowed <= 2,
            "{borrowed} chunks on the borrowed thread: {ran:?}"
        );
        assert_eq!(threads.counts().lent, 2);
    }

    #[test]
    fn one_own_core_copies_on_the_calling_thread() {
        let threads = CopyThreads::new(&[cpu()], &[], "test-one").unwrap();
        assert_eq!(threads.threads_now(), 1);
        let me = std::thread::current().id();
        let ids = Mutex::new(Vec::new());
        threads.run(5, &|_| {
            ids.lock().unwrap().push(std::thread::current().id())
        });
        assert_eq!(ids.into_inner().unwrap(), vec![me; 5]);
        assert!(CopyThreads::new(&[], &[], "none").is_err());
    }
}
