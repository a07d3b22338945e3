//! Page-locking a run's host memory beside the run ([`HostMemory::PageLocked`]), piece by piece,
//! instead of all of it before the first kernel.
//!
//! Locking runs at about 20 GB/s (`cuMemHostRegister`, lease 3): 0.43 s for the 8.6 GB of an f64
//! matrix of order 32768, longer than the factorisation on an H100. So the run locks its memory in
//! pieces of whole tile columns, the first before it starts and the others in address order on a
//! thread of their own while the workers run: a tile whose piece is locked is copied straight by
//! the DMA engines, one whose piece is not yet locked is packed through staging as on a staged run
//! (a copy never spans locked and unlocked memory: the direct path needs the whole tile inside one
//! locked range, [`hetla_kernels::PinnedRanges::covers`]). The locker stops when the run stops or a
//! piece fails to lock (what it locked stays locked for the run; the failure is in the trace).
//! Every piece is unlocked after the run, once the devices' uploads are done.
//!
//! *Pieces.* Each host range is cut at the first byte of each of its tile columns (the tiles of one
//! column of one matrix, from the first byte of the top tile to the last of the bottom one) when
//! the columns lie one after another without overlapping, as they do in a column-major matrix or a
//! tile-major store; else it is one piece. Two pieces may share a memory page: the driver registers
//! byte ranges, and adjacent ones on one page independently.

use std::collections::HashMap;

use hetla_kernels::HostRange;

use crate::engine::Engine;
use crate::platform::{PageLock, Platform};
use crate::run::Workload;

/// The pieces of `work`'s host memory to lock one after another (see the module documentation), in
/// address order within each range.
pub(super) fn pieces(work: &dyn Workload) -> Vec<HostRange> {
    let graph = work.graph();
    // Each tile column's span: (first byte, end).
    let mut columns: HashMap<(u8, usize), (usize, usize)> = HashMap::new();
    for task in graph.ids() {
        for access in &graph.task(task).accesses {
            let tile = access.tile;
            let Some(span) = work.host_tile(tile).map(|t| t.host_range()) else {
                continue;
            };
            if span.len == 0 {
                continue;
            }
            let column = columns
                .entry((tile.matrix.0, tile.col))
                .or_insert((span.start, span.end()));
            column.0 = column.0.min(span.start);
            column.1 = column.1.max(span.end());
        }
    }
    let spans: Vec<(usize, usize)> = columns.into_values().collect();
    work.host_ranges()
        .into_iter()
        .filter(|r| r.len > 0)
        .flat_map(|range| cut(range, &spans))
        .collect()
}

/// `range` cut at the start of each of `columns` inside it, when those lie one after another
/// without overlapping; else `range` whole.
fn cut(range: HostRange, columns: &[(usize, usize)]) -> Vec<HostRange> {
    let mut inside: Vec<(usize, usize)> = (columns.iter().copied())
        .filter(|&(start, end)| start >= range.start && end <= range.end())
        .collect();
    inside.sort_unstable();
    if inside.windows(2).any(|w| w[0].1 > w[1].0) {
        return vec![range];
    }
    let mut cuts: Vec<usize> = (inside.iter().map(|&(start, _)| start))
        .filter(|&start| start > range.start)
        .collect();
    cuts.push(range.end());
    let mut from = range.start;
    (cuts.into_iter())
        .map(|to| {
            let piece = HostRange {
                start: from,
                len: to - from,
            };
            from = to;
            piece
        })
        .collect()
}

/// Locks `pieces` in order on `platform`'s devices until all are locked, one fails, or `engine`'s
/// run stops; returns the locks (each unlocks its piece when dropped).
///
/// # Safety
/// The pieces must be memory of this process that stays allocated while the returned locks live.
pub(super) unsafe fn lock_pieces(
    platform: &Platform,
    pieces: &[HostRange],
    engine: Option<&Engine<'_>>,
) -> Vec<PageLock> {
    let mut locks = Vec::with_capacity(pieces.len());
    for piece in pieces {
        if engine.is_some_and(Engine::stopped) {
            break;
        }
        // SAFETY: the caller's contract.
        let lock = unsafe { platform.page_lock(std::slice::from_ref(piece)) };
        let failed = lock.failed().is_some();
        locks.push(lock);
        if failed {
            break;
        }
    }
    locks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: usize, len: usize) -> HostRange {
        HostRange { start, len }
    }

    #[test]
    fn a_range_is_cut_at_the_start_of_each_of_its_tile_columns() {
        // Three tile columns of a lower triangle: [100, 400), [450, 700), [790, 900).
        let columns = [(450, 700), (100, 400), (790, 900)];
        assert_eq!(
            cut(range(100, 800), &columns),
            vec![range(100, 350), range(450, 340), range(790, 110)]
        );
        // A column not wholly inside is ignored; the range's own start makes no empty piece.
        assert_eq!(
            cut(range(100, 600), &columns),
            vec![range(100, 350), range(450, 250)]
        );
        // Overlapping columns (interleaved storage): the range stays whole.
        let interleaved = [(100, 400), (300, 700)];
        assert_eq!(cut(range(100, 800), &interleaved), vec![range(100, 800)]);
        // No column inside: whole.
        assert_eq!(cut(range(0, 50), &columns), vec![range(0, 50)]);
    }

    #[test]
    fn pieces_lock_in_order_until_one_fails_and_unlock_when_dropped() {
        use std::sync::Arc;

        use hetla_clusters::ClusterSpec;
        use hetla_kernels::{Backend, PinnedRanges};

        use crate::devices::{Device, EmulatedDevice};
        use crate::platform::ModelStore;

        let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(1 << 20));
        let platform = Platform::with_devices(
            &ClusterSpec::None,
            Backend::Faer,
            ModelStore::None,
            vec![device],
        )
        .unwrap();
        let buffer = vec![0u8; 3000];
        let base = buffer.as_ptr() as usize;
        let pieces = [
            range(base, 1000),
            range(base + 1000, 1000),
            range(base + 2000, 1000),
        ];
        // SAFETY: `buffer` outlives the locks.
        let locks = unsafe { lock_pieces(&platform, &pieces, None) };
        assert_eq!(locks.len(), 3);
        assert_eq!(locks.iter().map(PageLock::bytes).sum::<usize>(), 3000);
        assert!(pieces.iter().all(|p| PinnedRanges::global().covers(p)));
        drop(locks);
        assert!(!pieces.iter().any(|p| PinnedRanges::global().covers(p)));
        // Someone else holds a part of the second piece: the first stays locked, the second
        // fails and says why, the third is not tried.
        let other = range(base + 1500, 100);
        assert!(PinnedRanges::global().insert(other));
        // SAFETY: as above.
        let locks = unsafe { lock_pieces(&platform, &pieces, None) };
        assert_eq!(locks.len(), 2);
        assert_eq!(locks[0].bytes(), 1000);
        let failed = locks[1].failed().unwrap_or_default();
        assert!(
            failed.contains("overlaps memory page-locked already"),
            "{failed}"
        );
        assert!(!PinnedRanges::global().covers(&pieces[2]));
        drop(locks);
        assert!(PinnedRanges::global().remove(other));
        assert!(!PinnedRanges::global().covers(&pieces[0]));
    }
}
