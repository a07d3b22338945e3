//! Buffers that hetla allocates for large matrices, in transparent huge pages where the kernel
//! offers them.
//!
//! A factorisation's kernels stream through megabytes of tiles; with 4 KiB pages every 4 KiB of a
//! matrix costs a TLB entry, and a 512 x 512 f64 tile spans 512 of them. (On a matrix with a long
//! power-of-two column stride huge pages can cost more in cache-set conflicts than they save: see
//! [`huge_page_matrix`]. The tile-major copy, whose strides are a tile's rows, is where hetla uses
//! them.) On Linux a buffer of 2 MiB or more is mapped anonymously, aligned to 2 MiB and advised
//! with `madvise(MADV_HUGEPAGE)` before its first touch, so that the kernel backs it with 2 MiB
//! pages where transparent huge pages are enabled in `always` or `madvise` mode
//! (`/sys/kernel/mm/transparent_hugepage/enabled`). Elsewhere, and for smaller buffers, it is an
//! ordinary zeroed allocation. Either way the buffer starts zeroed (all-zero bits are a zero of
//! each of hetla's four scalar types).

use std::ptr::NonNull;

use faer::{MatMut, MatRef};
use hetla_kernels::Scalar;

use crate::{Error, Result};

/// The size of a transparent huge page on x86-64 and aarch64 (with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// Bytes held in mappings made here (outside the heap, so a counting global allocator does not see
/// them).
static MAPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The bytes hetla holds now in its huge-page mappings (the tile-major copies platforms keep and
/// the matrices of [`huge_page_matrix`]): memory a heap-counting allocator does not see.
pub fn mapped_bytes() -> usize {
    MAPPED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A zeroed buffer of `len` scalars (see the module documentation).
pub(crate) struct PageBuffer<T: Scalar> {
    ptr: NonNull<T>,
    len: usize,
    backing: Backing,
}

/// How a [`PageBuffer`] was allocated, to free it the same way.
enum Backing {
    /// Nothing allocated (an empty buffer).
    Empty,
    /// `std::alloc` with this layout.
    Heap(std::alloc::Layout),
    /// An anonymous mapping: its start and length.
    #[cfg(target_os = "linux")]
    Mapped(*mut libc::c_void, usize),
}

// SAFETY: the buffer owns its scalars (Send + Sync data) exclusively; the raw pointers are
// only its allocation's address.
unsafe impl<T: Scalar> Send for PageBuffer<T> {}
// SAFETY: see the Send impl; shared access only reads.
unsafe impl<T: Scalar> Sync for PageBuffer<T> {}

impl<T: Scalar> PageBuffer<T> {
    /// A zeroed buffer of `len` scalars, in huge pages where possible; `what` names it in the error
    /// when the memory cannot be had.
    pub fn zeroed(len: usize, what: &str) -> Result<Self> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| too_large(what, len))?;
        if bytes == 0 {
            return Ok(Self::empty());
        }
        #[cfg(target_os = "linux")]
        if bytes >= HUGE_PAGE
            && let Some((ptr, backing)) = map_huge(bytes)
        {
            return Ok(Self {
                ptr: ptr.cast(),
                len,
                backing,
            });
        }
        let layout = std::alloc::Layout::array::<T>(len).map_err(|_| too_large(what, len))?;
        // SAFETY: the layout has a non-zero size (bytes > 0).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr.cast::<T>()).ok_or_else(|| too_large(what, len))?;
        Ok(Self {
            ptr,
            len,
            backing: Backing::Heap(layout),
        })
    }

    /// `spare` when it holds at least `len` scalars and at most twice as many (its contents are
    /// whatever was written to it), else a fresh zeroed buffer of `len`: a buffer kept from an
    /// earlier run costs no mapping and no page faults.
    pub fn reuse(spare: Option<Self>, len: usize, what: &str) -> Result<Self> {
        match spare {
            Some(b) if b.fits(len) => Ok(b),
            spare => {
                // Free the unfit buffer before mapping its replacement.
                drop(spare);
                Self::zeroed(len, what)
            }
        }
    }

    /// A buffer of no scalars (nothing allocated).
    fn empty() -> Self {
        Self {
            ptr: NonNull::dangling(),
            len: 0,
            backing: Backing::Empty,
        }
    }

    /// The buffer, leaving an empty one in its place.
    pub fn take(&mut self) -> Self {
        std::mem::replace(self, Self::empty())
    }

    /// Whether the buffer was advised for huge pages (the kernel may still back it with small ones,
    /// when none are free).
    pub fn huge(&self) -> bool {
        #[cfg(target_os = "linux")]
        if matches!(self.backing, Backing::Mapped(..)) {
            return true;
        }
        false
    }

    /// Whether [`PageBuffer::reuse`] keeps this buffer for `len` scalars: it holds at least `len`
    /// and at most twice as many.
    pub fn fits(&self, len: usize) -> bool {
        self.len >= len && self.len <= len.saturating_mul(2)
    }

    /// How many scalars it holds.
    pub fn scalars(&self) -> usize {
        self.len
    }

    /// The scalars.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised scalars (zeroed at allocation, all-zero
        // bits being a valid scalar) owned by self, or is dangling with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The scalars, writable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, and &mut self makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Scalar> Clone for PageBuffer<T> {
    /// A copy in memory of its own, allocated as [`PageBuffer::zeroed`] does; panics (as a `Vec`'s
    /// clone aborts) when the memory cannot be had.
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed(self.len, "a copy").expect("memory for a copy of a buffer");
        copy.as_mut_slice().copy_from_slice(self.as_slice());
        copy
    }
}

impl<T: Scalar> std::fmt::Debug for PageBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBuffer")
            .field("scalars", &self.len)
            .field("huge", &self.huge())
            .finish()
    }
}

impl<T: Scalar> Drop for PageBuffer<T> {
    fn drop(&mut self) {
        match self.backing {
            Backing::Empty => {}
            // SAFETY: allocated by alloc_zeroed with this layout, freed once.
            Backing::Heap(layout) => unsafe {
                std::alloc::dealloc(self.ptr.as_ptr().cast(), layout)
            },
            #[cfg(target_os = "linux")]
            Backing::Mapped(start, length) => {
                // SAFETY: the mapping made by map_huge, unmapped once.
                unsafe { libc::munmap(start, length) };
                MAPPED.fetch_sub(length, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

fn too_large(what: &str, len: usize) -> Error {
    Error::Layout {
        what: "buffer",
        reason: format!("cannot allocate {len} scalars for {what}"),
    }
}

/// An anonymous mapping of at least `bytes`, its usable part aligned to a huge page and advised for
/// huge pages; `None` when the system refuses the mapping.
#[cfg(target_os = "linux")]
fn map_huge(bytes: usize) -> Option<(NonNull<u8>, Backing)> {
    let length = bytes.checked_add(HUGE_PAGE)?;
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory; the result is checked against MAP_FAILED.
    let start = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if start == libc::MAP_FAILED {
        return None;
    }
    MAPPED.fetch_add(length, std::sync::atomic::Ordering::Relaxed);
    let aligned = (start as usize).next_multiple_of(HUGE_PAGE);
    let usable = (bytes.next_multiple_of(HUGE_PAGE)).min(start as usize + length - aligned);
    // SAFETY: [aligned, aligned + usable) lies inside the mapping just made. The advice is a
    // hint: where transparent huge pages are off it fails (EINVAL) and the pages stay small.
    unsafe { libc::madvise(aligned as *mut libc::c_void, usable, libc::MADV_HUGEPAGE) };
    Some((
        NonNull::new(aligned as *mut u8)?,
        Backing::Mapped(start, length),
    ))
}

/// A column stride (in scalars) for a column-major matrix of `rows` rows in a [`PageBuffer`]: whole
/// 64-byte lines, and a line more when the stride would be a multiple of 512 bytes, so that the
/// columns of a physically contiguous buffer do not all map onto the same cache sets (at order 2048
/// in f64, the H blocks of the symmetric indefinite family took 12% longer at the power-of-two
/// stride).
pub(crate) fn padded_stride<T: Scalar>(rows: usize) -> usize {
    let line = (64 / size_of::<T>()).max(1);
    let stride = rows.next_multiple_of(line);
    if (stride * size_of::<T>()).is_multiple_of(512) {
        stride + line
    } else {
        stride
    }
}

/// A column-major matrix in memory hetla allocated for it, in transparent huge pages where the
/// system offers them (see [`huge_page_matrix`]).
pub struct PagedMat<T: Scalar = f64> {
    buffer: PageBuffer<T>,
    rows: usize,
    cols: usize,
}

impl<T: Scalar> std::fmt::Debug for PagedMat<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedMat")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("huge_pages", &self.buffer.huge())
            .finish()
    }
}

/// A zeroed `rows x cols` column-major matrix in transparent huge pages where the system offers
/// them (a TLB entry per 2 MiB rather than per 4 KiB). Measure before using it for a matrix whose
/// leading dimension is a power of two: physically contiguous pages then map its columns onto the
/// same cache sets, and faer's kernels ran 40-45% slower on such a matrix at n = 4096 (OpenBLAS,
/// which packs its operands, did not change; docs/cpu-performance.md). Errors when the size
/// overflows or the memory cannot be had.
pub fn huge_page_matrix<T: Scalar>(rows: usize, cols: usize) -> Result<PagedMat<T>> {
    let len = rows.checked_mul(cols).ok_or_else(|| Error::Layout {
        what: "matrix",
        reason: format!("{rows} x {cols} entries overflow the address space"),
    })?;
    Ok(PagedMat {
        buffer: PageBuffer::zeroed(len, "the matrix")?,
        rows,
        cols,
    })
}

impl<T: Scalar> PagedMat<T> {
    /// A read-only view.
    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef::from_column_major_slice(self.buffer.as_slice(), self.rows, self.cols)
    }

    /// A writable view.
    pub fn as_mut(&mut self) -> MatMut<'_, T> {
        let (rows, cols) = (self.rows, self.cols);
        MatMut::from_column_major_slice_mut(self.buffer.as_mut_slice(), rows, cols)
    }

    /// Whether the matrix was advised for huge pages.
    pub fn huge_pages(&self) -> bool {
        self.buffer.huge()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_kernels::c64;

    #[test]
    fn padded_strides_are_whole_lines_and_no_multiple_of_512_bytes() {
        assert_eq!(padded_stride::<f64>(2048), 2056);
        assert_eq!(padded_stride::<f64>(1000), 1000);
        assert_eq!(padded_stride::<f64>(1001), 1008);
        assert_eq!(padded_stride::<f32>(128), 144);
        assert_eq!(padded_stride::<c64>(64), 68);
        for rows in 0..3000 {
            let s = padded_stride::<f64>(rows);
            assert!(
                s >= rows && s.is_multiple_of(8) && !(s * 8).is_multiple_of(512)
                    || rows == 0 && s == 8
            );
        }
    }

    #[test]
    fn a_clone_is_a_copy_of_its_own() {
        let mut b = PageBuffer::<f64>::zeroed(HUGE_PAGE / 8 + 5, "a test").unwrap();
        b.as_mut_slice()[7] = 3.0;
        let c = b.clone();
        b.as_mut_slice()[7] = 4.0;
        assert_eq!(
            (c.as_slice()[7], c.scalars(), c.huge()),
            (3.0, b.scalars(), b.huge())
        );
    }

    #[test]
    fn buffers_start_zeroed_and_keep_what_is_written() {
        for len in [0, 1, 1000, (HUGE_PAGE / 8) + 3] {
            let mut b = PageBuffer::<f64>::zeroed(len, "a test").unwrap();
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0.0));
            for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
                *x = i as f64;
            }
            assert!(b.as_slice().iter().enumerate().all(|(i, &x)| x == i as f64));
            if cfg!(target_os = "linux") {
                assert_eq!(b.huge(), len * 8 >= HUGE_PAGE);
            }
            if len > 0 {
                assert_eq!(b.as_slice().as_ptr() as usize % align_of::<f64>(), 0);
            }
        }
    }

    #[test]
    fn a_spare_buffer_is_reused_only_when_it_fits() {
        let mut spare = PageBuffer::<f32>::zeroed(100, "a test").unwrap();
        spare.as_mut_slice()[0] = 7.0;
        let reused = PageBuffer::reuse(Some(spare), 60, "a test").unwrap();
        assert_eq!((reused.as_slice().len(), reused.as_slice()[0]), (100, 7.0));
        let fresh = PageBuffer::reuse(Some(reused), 40, "a test").unwrap();
        assert_eq!((fresh.as_slice().len(), fresh.as_slice()[0]), (40, 0.0));
        let grown = PageBuffer::reuse(Some(fresh), 41, "a test").unwrap();
        assert_eq!(grown.as_slice().len(), 41);
    }

    #[test]
    fn a_paged_matrix_is_a_column_major_matrix() {
        let mut m = huge_page_matrix::<faer::c64>(600, 700).unwrap();
        m.as_mut()[(599, 699)] = faer::c64::new(1.0, 2.0);
        assert_eq!(m.as_ref().col_stride(), 600);
        assert_eq!(m.as_ref()[(599, 699)], faer::c64::new(1.0, 2.0));
        assert_eq!(m.as_ref()[(0, 0)], faer::c64::new(0.0, 0.0));
        assert!(huge_page_matrix::<f64>(usize::MAX, 2).is_err());
    }
}
