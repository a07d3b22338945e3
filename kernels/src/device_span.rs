//! A column-major matrix in a device's own memory: what a caller hands hetla to factor where it
//! lies, with no copy through host memory.
//!
//! The span is an address, a shape, a leading dimension and a precision; it does not own or borrow
//! the memory (the public `hetla::DeviceMatrix` does). A GPU reads it as a device pointer (CUDA's
//! 2D device-to-device copies take a tile out of it and put one back); an emulated device's memory
//! is host memory, so there the address is a host pointer and [`DeviceSpan::host_view`] reads it.

use faer::{MatMut, MatRef};

use crate::with_scalar;
use crate::{AnyMut, AnyRef, Precision, Scalar};

/// A column-major matrix in a device's memory: its first element's address, its shape, the elements
/// between the starts of two columns (`ld >= rows`) and the precision of its elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSpan {
    /// Address of the first element (a device pointer on a GPU, a host one on an emulated device).
    pub addr: u64,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Elements from the start of one column to the next (at least `rows`).
    pub ld: usize,
    /// The precision of its elements.
    pub precision: Precision,
}

impl DeviceSpan {
    /// Bytes from the first element to one past the last (0 for an empty matrix).
    pub fn extent(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            ((self.cols - 1) * self.ld + self.rows) * self.precision.bytes()
        }
    }

    /// The `rows x cols` block whose first element is (`row`, `col`); `None` when it does not lie
    /// inside the span.
    pub fn block(&self, row: usize, col: usize, rows: usize, cols: usize) -> Option<Self> {
        if row.checked_add(rows)? > self.rows || col.checked_add(cols)? > self.cols {
            return None;
        }
        let offset = (col * self.ld + row) * self.precision.bytes();
        Some(Self {
            addr: self.addr + offset as u64,
            rows,
            cols,
            ld: self.ld,
            precision: self.precision,
        })
    }

    /// The span read as host memory (an emulated device's memory is host memory).
    ///
    /// # Safety
    /// `addr` must be a host address of `extent()` readable bytes holding elements of `precision`,
    /// not written while the view lives.
    pub unsafe fn host_view(&self) -> AnyRef<'_> {
        let (rows, cols, ld) = (self.rows, self.cols, self.ld as isize);
        with_scalar!(self.precision, T => {
            // SAFETY: the caller's contract.
            let m = unsafe { MatRef::from_raw_parts(self.addr as *const T, rows, cols, 1, ld) };
            T::any_ref(m)
        })
    }

    /// The span written as host memory.
    ///
    /// # Safety
    /// As [`DeviceSpan::host_view`], writable, and with no other view of it used while this one
    /// lives.
    pub unsafe fn host_view_mut(&self) -> AnyMut<'_> {
        let (rows, cols, ld) = (self.rows, self.cols, self.ld as isize);
        with_scalar!(self.precision, T => {
            // SAFETY: the caller's contract.
            let m = unsafe { MatMut::from_raw_parts_mut(self.addr as *mut T, rows, cols, 1, ld) };
            T::any_mut(m)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_starts_at_its_element_and_refuses_to_leave_the_span() {
        let span = DeviceSpan {
            addr: 1000,
            rows: 10,
            cols: 6,
            ld: 12,
            precision: Precision::Z,
        };
        assert_eq!(span.extent(), (5 * 12 + 10) * 16);
        let block = span.block(4, 2, 6, 3).unwrap();
        assert_eq!(block.addr, 1000 + (2 * 12 + 4) * 16);
        assert_eq!((block.rows, block.cols, block.ld), (6, 3, 12));
        assert!(span.block(5, 0, 6, 1).is_none());
        assert!(span.block(0, 4, 1, 3).is_none());
        assert!(span.block(usize::MAX, 0, 2, 1).is_none());
        assert_eq!(span.block(0, 0, 0, 0).unwrap().extent(), 0);
    }

    #[test]
    fn the_host_view_of_a_span_reads_and_writes_its_elements() {
        let mut data: Vec<f64> = (0..20).map(f64::from).collect();
        let span = DeviceSpan {
            addr: data.as_mut_ptr() as u64,
            rows: 3,
            cols: 4,
            ld: 5,
            precision: Precision::D,
        }
        .block(1, 1, 2, 2)
        .unwrap();
        // SAFETY: `data` holds the span's elements and outlives the views.
        let AnyRef::D(view) = (unsafe { span.host_view() }) else {
            panic!("not f64")
        };
        assert_eq!((view[(0, 0)], view[(1, 1)]), (6.0, 12.0));
        // SAFETY: as above, and no other view is used meanwhile.
        if let AnyMut::D(mut view) = unsafe { span.host_view_mut() } {
            view[(1, 0)] = -1.0;
        }
        assert_eq!(data[7], -1.0);
    }
}
