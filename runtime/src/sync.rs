//! Locks that outlive a panic.

/// Locks `m`, also after a panic on another thread: every guarded value in the runtime is updated
/// whole under its lock, so a poisoned one is still consistent.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
