//! How idle workers of the real executor sleep, and wake when tasks become ready or the run ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use crate::sync::lock;

/// Wakes idle workers when tasks become ready or the run ends.
pub(super) struct Signal {
    epoch: AtomicU64,
    waiters: Mutex<usize>,
    cv: Condvar,
}

impl Signal {
    pub(super) fn new() -> Self {
        Self {
            epoch: AtomicU64::new(0),
            waiters: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    pub(super) fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // Taking the lock orders this bump after any waiter's check of the epoch.
        let waiters = lock(&self.waiters);
        if *waiters > 0 {
            self.cv.notify_all();
        }
    }

    /// Sleeps until the epoch moves past `seen` or `stop` is set.
    pub(super) fn wait(&self, seen: u64, stop: &AtomicBool) {
        let mut waiters = lock(&self.waiters);
        *waiters += 1;
        while self.epoch() == seen && !stop.load(Ordering::SeqCst) {
            waiters = self.cv.wait(waiters).unwrap_or_else(|e| e.into_inner());
        }
        *waiters -= 1;
    }
}
