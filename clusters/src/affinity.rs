//! Threads and the cores they run on: pinning, what the OS says a thread runs on, and what a
//! refused pin means.
//!
//! A pin the OS refuses (a CPU outside the process's cpuset, a container that forbids
//! `sched_setaffinity`) is an error: a cluster whose threads float measures nothing it claims to.
//! [`allow_unpinned`] (the CLI's `--allow-unpinned`, or `HETLA_ALLOW_UNPINNED=1`) turns it into a
//! warning on stderr, and the thread runs where the OS puts it.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::ClusterError;

/// Pins the calling thread to logical CPU `cpu`; returns whether the OS accepted.
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// The logical CPU the calling thread runs on, as the OS says (None where it cannot).
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// 0: not decided yet (read `HETLA_ALLOW_UNPINNED` on first use), 1: refused pins are errors, 2:
/// warnings.
static UNPINNED: AtomicU8 = AtomicU8::new(0);

/// Whether a pin the OS refuses is only a warning (true) or an error (false, the default unless
/// `HETLA_ALLOW_UNPINNED` is set to 1, true or yes).
pub fn unpinned_allowed() -> bool {
    match UNPINNED.load(Ordering::Relaxed) {
        0 => {
            let env = std::env::var("HETLA_ALLOW_UNPINNED")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"));
            UNPINNED.store(if env { 2 } else { 1 }, Ordering::Relaxed);
            env
        }
        v => v == 2,
    }
}

/// Makes a pin the OS refuses a warning (`true`) or an error (`false`) for the clusters built from
/// now on.
pub fn allow_unpinned(allow: bool) {
    UNPINNED.store(if allow { 2 } else { 1 }, Ordering::Relaxed);
}

/// What a refused pin of `thread` to `cpu` means: the error, or (unpinned threads allowed) a
/// warning and Ok.
pub(crate) fn refused(cpu: usize, thread: &str) -> Result<(), ClusterError> {
    if unpinned_allowed() {
        eprintln!(
            "warning: the OS refused to pin thread {thread} to CPU {cpu}; it runs unpinned (--allow-unpinned), so its cluster's rates are not its cores'"
        );
        Ok(())
    } else {
        Err(ClusterError::Pin {
            cpu,
            thread: thread.to_owned(),
        })
    }
}

/// A thread's CPU affinity, kept to be restored.
pub(crate) struct Affinity {
    #[cfg(target_os = "linux")]
    set: libc::cpu_set_t,
}

impl Affinity {
    /// The calling thread's affinity (None where it cannot be read).
    pub(crate) fn of_current_thread() -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: cpu_set_t is plain data (zero is the empty set); sched_getaffinity writes at
            // most the size given into it.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let got = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
            (got == 0).then_some(Self { set })
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Gives the calling thread this affinity again (best effort: it was the thread's own).
    pub(crate) fn restore(&self) {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the set was filled by sched_getaffinity; sched_setaffinity only reads it.
            let _ = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &self.set) };
        }
    }
}
