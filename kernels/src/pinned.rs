//! Which host memory is page-locked, process-wide.
//!
//! A GPU's DMA engines copy straight from and into page-locked (pinned) host memory; pageable
//! memory has to go through a staging buffer that CPU cores pack first. Page-locking is a property
//! of the process's memory, not of one device (CUDA's `cuMemHostRegister` with its portable flag
//! makes a range usable by every context), so the ranges live in one register that every device's
//! copy consults: a copy whose host tile lies wholly inside a registered range goes direct, any
//! other through staging.
//!
//! A range is entered by [`PinnedRanges::insert`] once the memory is page-locked (by the device
//! layer, which owns the CUDA calls, or by an emulated device, which only records it) and taken out
//! before it is unlocked. Ranges are byte addresses; a range is never entered twice.

use std::sync::{Mutex, OnceLock};

/// A span of host memory: its first byte's address and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostRange {
    /// Address of the first byte.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
}

impl HostRange {
    /// The bytes a column-major matrix of `rows x cols` elements of `elem` bytes with columns
    /// `col_stride` elements apart spans from `ptr` (empty for an empty matrix).
    pub fn of_matrix<T>(ptr: *const T, rows: usize, cols: usize, col_stride: isize) -> Self {
        let elem = size_of::<T>();
        let len = if rows == 0 || cols == 0 {
            0
        } else {
            ((cols - 1) * col_stride.unsigned_abs() + rows) * elem
        };
        Self {
            start: ptr as usize,
            len,
        }
    }

    /// One past the last byte.
    pub fn end(&self) -> usize {
        self.start + self.len
    }

    /// Whether `other` lies wholly inside this range.
    pub fn contains(&self, other: &HostRange) -> bool {
        other.start >= self.start && other.end() <= self.end()
    }
}

/// The register of page-locked host ranges, process-wide: a GPU copy whose host tile lies wholly
/// inside a registered range goes direct, any other through staging.
#[derive(Debug, Default)]
pub struct PinnedRanges(Mutex<Vec<HostRange>>);

impl PinnedRanges {
    /// The process's register.
    pub fn global() -> &'static PinnedRanges {
        static GLOBAL: OnceLock<PinnedRanges> = OnceLock::new();
        GLOBAL.get_or_init(PinnedRanges::default)
    }

    /// Enters `range` (page-locked now); false when it overlaps a range already entered (it is not
    /// entered then).
    pub fn insert(&self, range: HostRange) -> bool {
        let mut ranges = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if ranges
            .iter()
            .any(|r| r.start < range.end() && range.start < r.end())
        {
            return false;
        }
        ranges.push(range);
        true
    }

    /// Takes `range` out (about to be unlocked); false when it was not entered.
    pub fn remove(&self, range: HostRange) -> bool {
        let mut ranges = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let before = ranges.len();
        ranges.retain(|r| *r != range);
        ranges.len() < before
    }

    /// Whether `range` lies wholly inside one page-locked range (an empty range never does).
    pub fn covers(&self, range: &HostRange) -> bool {
        range.len > 0
            && self
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|r| r.contains(range))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tile_is_covered_only_inside_one_registered_range() {
        let ranges = PinnedRanges::default();
        let whole = HostRange {
            start: 1000,
            len: 800,
        };
        assert!(ranges.insert(whole));
        // Overlapping ranges are refused; a disjoint one is entered.
        assert!(!ranges.insert(HostRange {
            start: 1700,
            len: 200
        }));
        assert!(ranges.insert(HostRange {
            start: 1800,
            len: 100
        }));
        // A 4 x 3 tile of f64 with columns 10 elements apart, at byte 1000 + 8: spans 8 * (2 * 10
        // + 4) = 192 bytes.
        let tile = HostRange::of_matrix((1008usize) as *const f64, 4, 3, 10);
        assert_eq!(tile.len, 192);
        assert!(ranges.covers(&tile));
        // Straddling the end of the first range and the start of the second: not one range.
        let straddling = HostRange {
            start: 1790,
            len: 20,
        };
        assert!(!ranges.covers(&straddling));
        assert!(!ranges.covers(&HostRange::of_matrix(1008 as *const f64, 0, 3, 10)));
        assert!(ranges.remove(whole));
        assert!(!ranges.remove(whole));
        assert!(!ranges.covers(&tile));
    }
}
