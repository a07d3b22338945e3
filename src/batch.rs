//! Many small problems at once (the families' `*_batch` calls): each problem is one task run by one
//! core with the sequential kernels, the platform's CPU clusters sharing the batch, every core of
//! each taking the next problem as it finishes one (dynamic, so mixed sizes balance). GPUs take no
//! part: a small problem is not worth a transfer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use faer::{MatMut, MatRef};
use hetla_kernels::Scalar;

use hetla_clusters::CpuCluster;
use hetla_runtime::Platform;

use crate::Error;

/// `work(i)` for i in 0..count, on every core of every CPU cluster of `platform` (holding its run
/// lock), each core taking the next i when it is done; the results in the order of i. On the
/// calling thread when the platform has no CPU cluster.
pub(crate) fn on_every_core<R: Send>(
    platform: &Platform,
    count: usize,
    work: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let Some((first, others)) = platform.clusters().split_first() else {
        return (0..count).map(work).collect();
    };
    let _busy = platform.lock_run();
    let next = AtomicUsize::new(0);
    let (next, work) = (&next, &work);
    let take = move || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                return done;
            }
            done.push((i, work(i)));
        }
    };
    // No thread is started per call (one cost tens of microseconds, zeroed stack pages included:
    // a stack of 200 LU solves of order 64 takes about half a millisecond): the other clusters'
    // shares are spawned into their pools from scopes on the calling thread, which waits in the
    // first cluster's broadcast.
    let done = Mutex::new(Vec::with_capacity(count));
    spread(first, others, &take, &done);
    let mut results = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    results.sort_unstable_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Runs `take` on every core of `first` and of each of `others` (one scope per other cluster,
/// nested on the calling thread), each core's results into `done`.
fn spread<R: Send>(
    first: &CpuCluster,
    others: &[CpuCluster],
    take: &(impl Fn() -> Vec<(usize, R)> + Sync),
    done: &Mutex<Vec<(usize, R)>>,
) {
    let keep = |got: Vec<(usize, R)>| {
        done.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(got)
    };
    match others.split_first() {
        None => first
            .pool()
            .broadcast(|_| take())
            .into_iter()
            .for_each(keep),
        // A kernel that panics on a core: the scope hands the panic to the caller, as if it ran it.
        Some((cluster, rest)) => cluster.pool().in_place_scope(|scope| {
            scope.spawn_broadcast(|_, _| keep(take()));
            spread(first, rest, take, done);
        }),
    }
}

/// `work(i, item)` for each of the caller's `items` (a unique borrow of `items[i]`: a matrix, or
/// the outputs of one problem together), on every core as [`on_every_core`]; the results in the
/// order of i.
pub(crate) fn on_every_core_each<I: Send, R: Send>(
    platform: &Platform,
    items: &mut [I],
    work: impl Fn(usize, &mut I) -> R + Sync,
) -> Vec<R> {
    // Each item is taken by exactly one core (the index is handed out once); the lock is there to
    // give that core a unique borrow, never contended.
    let cells: Vec<Mutex<&mut I>> = items.iter_mut().map(Mutex::new).collect();
    on_every_core(platform, cells.len(), |i| {
        let mut item = cells[i].lock().unwrap_or_else(PoisonError::into_inner);
        work(i, &mut item)
    })
}

/// [`on_every_core_each`] over the caller's matrices, each handed to `work` as a writable view.
pub(crate) fn on_every_core_mut<T: Scalar, R: Send>(
    platform: &Platform,
    items: &mut [MatMut<'_, T>],
    work: impl Fn(usize, MatMut<'_, T>) -> R + Sync,
) -> Vec<R> {
    on_every_core_each(platform, items, |i, item| work(i, item.as_mut()))
}

/// `work(i, a[i], out[i])` for every i, on every core as [`on_every_core`], once `out` (the call's
/// `option`, holding `what`) has one matrix per A; else the call's error, before any work.
pub(crate) fn on_every_core_beside<T: Scalar, R: Send>(
    platform: &Platform,
    a: &[MatRef<'_, T>],
    (option, what, out): (&'static str, &str, &mut [MatMut<'_, T>]),
    work: impl Fn(usize, MatRef<'_, T>, MatMut<'_, T>) -> R + Sync,
) -> Result<Vec<R>, Error> {
    if out.len() != a.len() {
        return Err(one_per_matrix(option, what, out.len(), a.len()));
    }
    Ok(on_every_core_mut(platform, out, |i, out| {
        work(i, a[i], out)
    }))
}

/// The call's error when its `option` gives `got` entries (`what`) for `count` matrices.
pub(crate) fn one_per_matrix(option: &'static str, what: &str, got: usize, count: usize) -> Error {
    Error::InvalidOption {
        option,
        reason: format!("{got} {what} for {count} matrices: give one per matrix"),
    }
}
