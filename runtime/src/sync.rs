//! Locks that outlive a panic.

/// Locks `m`, also after a panic on another thread: every guarded value in the runtime is updated
/// whole under its lock, so a poisoned one is still consistent.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes `l` to read, also after a panic on another thread (as [`lock`]).
pub(crate) fn read<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Takes `l` to write, also after a panic on another thread (as [`lock`]).
pub(crate) fn write<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
