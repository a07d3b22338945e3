//! The replicas a device holds, by data handle, each behind its own lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use hetla_kernels::KernelError;

use crate::data::Handle;
use crate::sync::lock;

/// The replicas a device holds, by handle: each behind its own lock, so a kernel and a copy of
/// different tiles never wait for each other.
pub(super) struct Replicas<T> {
    map: Mutex<HashMap<Handle, Arc<RwLock<T>>>>,
}

impl<T> Replicas<T> {
    pub(super) fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Handle, Arc<RwLock<T>>>> {
        // Map updates are single inserts and removals: a panic cannot leave it torn.
        lock(&self.map)
    }

    pub(super) fn get(&self, handle: Handle) -> Result<Arc<RwLock<T>>, KernelError> {
        self.lock()
            .get(&handle)
            .cloned()
            .ok_or_else(|| KernelError::Gpu {
                message: format!("data handle {handle} has no replica on the device"),
            })
    }

    /// Replaces (or creates) the replica of `handle` with what `make` returns, given the current
    /// one to reuse.
    pub(super) fn put(
        &self,
        handle: Handle,
        make: impl FnOnce(Option<&mut T>) -> Result<Option<T>, KernelError>,
    ) -> Result<(), KernelError> {
        let existing = self.lock().get(&handle).cloned();
        match existing {
            Some(replica) => {
                let mut guard = replica.write().unwrap_or_else(|e| e.into_inner());
                if let Some(new) = make(Some(&mut guard))? {
                    *guard = new;
                }
            }
            None => {
                if let Some(new) = make(None)? {
                    self.lock().insert(handle, Arc::new(RwLock::new(new)));
                }
            }
        }
        Ok(())
    }

    pub(super) fn remove(&self, handle: Handle) -> Option<Arc<RwLock<T>>> {
        self.lock().remove(&handle)
    }

    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    /// Runs `f` with the read replicas and the written one locked. The written handle must differ
    /// from the read ones (the executor checks task accesses before).
    pub(super) fn with_operands<R>(
        &self,
        reads: &[Handle],
        write: Handle,
        f: impl FnOnce(&[&T], &mut T) -> R,
    ) -> Result<R, KernelError> {
        if reads.contains(&write) {
            return Err(KernelError::Gpu {
                message: format!("data handle {write} is both read and written by one task"),
            });
        }
        let reads = reads
            .iter()
            .map(|&h| self.get(h))
            .collect::<Result<Vec<_>, _>>()?;
        let write = self.get(write)?;
        let guards: Vec<_> = reads
            .iter()
            .map(|r| r.read().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let views: Vec<&T> = guards.iter().map(|g| &**g).collect();
        let mut out = write.write().unwrap_or_else(|e| e.into_inner());
        Ok(f(&views, &mut out))
    }
}
