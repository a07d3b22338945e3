//! Copies between matrices of any strides, for the tile copies and the column-major copies of
//! row-major views (ndarray's C order, Python's transposed views).
//!
//! Where both sides are column-major a column is one contiguous run each way, and faer's copy
//! streams it. Where a side is row-major, faer's copy walks the destination's order and reads (or
//! writes) the other side one scalar per cache line: at n = 4096 in f64 every scalar of a column is
//! 32 KiB from the next. Here such a copy goes by blocks of [`BLOCK`] x [`BLOCK`]: within a block
//! the rows of the row-major side and the columns of the column-major side are a few lines each,
//! all of them in L1 while the block is copied, so each line is fetched once.

use faer::reborrow::ReborrowMut;
use faer::{MatMut, MatRef};
use hetla_kernels::Scalar;
use rayon::prelude::*;

/// The side of a transposing copy's block: 32 x 32 scalars, 8-32 KiB, so that a block's rows and
/// columns stay in L1 together (single-threaded, the lower triangle of an f64 matrix of order 4096
/// into tiles of 512: 34 ms by faer's copy, 21 ms by blocks of 16, 17 ms by blocks of 32, 19 ms by
/// 64; 11 ms from column-major; Intel Xeon, Emerald Rapids, AVX-512).
const BLOCK: usize = 32;

/// Copies `src` into `dst` (same shape), in each column `j` only the rows from `first_row(j)` on
/// (`|_| 0` for all of them): column by column where both are column-major (or one column), by
/// blocks otherwise (see the module documentation).
pub(crate) fn copy_below<T: Scalar>(
    src: MatRef<'_, T>,
    mut dst: MatMut<'_, T>,
    first_row: impl Fn(usize) -> usize,
) {
    assert_eq!(
        (src.nrows(), src.ncols()),
        (dst.nrows(), dst.ncols()),
        "a copy between matrices of different shapes"
    );
    let rows = src.nrows();
    if (src.row_stride() == 1 && dst.row_stride() == 1) || src.ncols() <= 1 || rows <= 1 {
        for j in 0..src.ncols() {
            let from = first_row(j).min(rows);
            dst.rb_mut()
                .col_mut(j)
                .subrows_mut(from, rows - from)
                .copy_from(src.col(j).subrows(from, rows - from));
        }
        return;
    }
    let (src_rs, src_cs) = (src.row_stride(), src.col_stride());
    let (dst_rs, dst_cs) = (dst.row_stride(), dst.col_stride());
    let (from, to) = (src.as_ptr(), dst.as_ptr_mut());
    // The inner loop runs along the destination's contiguous side: strided writes cost twice
    // strided reads (measured, f64 tiles of 512 from and to a matrix of order 4096).
    let down_columns = dst_rs == 1;
    let mut first = [0usize; BLOCK];
    for j0 in (0..src.ncols()).step_by(BLOCK) {
        let j1 = (j0 + BLOCK).min(src.ncols());
        for (j, first) in (j0..j1).zip(&mut first) {
            *first = first_row(j).min(rows);
        }
        let first = &first[..j1 - j0];
        let top = first.iter().copied().min().unwrap_or(rows);
        for i0 in (top..rows).step_by(BLOCK) {
            let i1 = (i0 + BLOCK).min(rows);
            // SAFETY (both arms): i < rows and j < ncols of both views (same shape, asserted),
            // so both offsets are of scalars inside them; `dst` is borrowed mutably, so no other
            // view reads or writes its scalars meanwhile.
            let one = |i: usize, j: usize| unsafe {
                let (i, j) = (i as isize, j as isize);
                *to.offset(i * dst_rs + j * dst_cs) = *from.offset(i * src_rs + j * src_cs);
            };
            if down_columns {
                for (j, &first) in (j0..j1).zip(first) {
                    (first.max(i0)..i1).for_each(|i| one(i, j));
                }
            } else {
                for i in i0..i1 {
                    for (j, &first) in (j0..j1).zip(first) {
                        if i >= first {
                            one(i, j);
                        }
                    }
                }
            }
        }
    }
}

/// [`copy_below`] over rayon's threads, by chunks of [`PAR_COLUMNS`] columns.
pub(crate) fn copy_par<T: Scalar>(
    src: MatRef<'_, T>,
    dst: MatMut<'_, T>,
    first_row: impl Fn(usize) -> usize + Sync,
) {
    let mut chunks = Vec::with_capacity(src.ncols().div_ceil(PAR_COLUMNS));
    let mut rest = dst;
    for j0 in (0..src.ncols()).step_by(PAR_COLUMNS) {
        let width = PAR_COLUMNS.min(rest.ncols());
        let (chunk, right) = rest.split_at_col_mut(width);
        rest = right;
        chunks.push((j0, chunk));
    }
    chunks.into_par_iter().for_each(|(j0, chunk)| {
        let width = chunk.ncols();
        copy_below(src.subcols(j0, width), chunk, |j| first_row(j0 + j));
    });
}

/// Columns per chunk of [`copy_par`]: 1 MiB of f64 per chunk at order 1024, many chunks per thread
/// at the orders worth a parallel copy.
const PAR_COLUMNS: usize = 128;

/// Copies all of `src` into `dst` (same shape); see [`copy_below`].
pub(crate) fn copy<T: Scalar>(src: MatRef<'_, T>, dst: MatMut<'_, T>) {
    copy_below(src, dst, |_| 0);
}

/// Writes the conjugate transpose of `src` into `dst` (of `src`'s transposed shape): by halves of
/// the longer side in parallel, down to blocks of [`BLOCK`] x [`BLOCK`] copied in cache.
pub(crate) fn copy_adjoint<T: Scalar>(src: MatRef<'_, T>, mut dst: MatMut<'_, T>) {
    let (rows, cols) = (dst.nrows(), dst.ncols());
    if rows <= BLOCK && cols <= BLOCK {
        for j in 0..cols {
            for i in 0..rows {
                dst[(i, j)] = T::conj_impl(&src[(j, i)]);
            }
        }
    } else if rows >= cols {
        let (top, bottom) = dst.split_at_row_mut(rows / 2);
        let (left, right) = src.split_at_col(rows / 2);
        rayon::join(|| copy_adjoint(left, top), || copy_adjoint(right, bottom));
    } else {
        let (left, right) = dst.split_at_col_mut(cols / 2);
        let (top, bottom) = src.split_at_row(cols / 2);
        rayon::join(|| copy_adjoint(top, left), || copy_adjoint(bottom, right));
    }
}

/// Writes the strictly upper triangle of the square `a` as the conjugate transpose of its lower
/// one: the top right quadrant from the bottom left one, and the two diagonal quadrants the same
/// way, in parallel (entry by entry, each row of a large matrix would be a cache and TLB miss per
/// entry).
pub(crate) fn mirror_lower<T: Scalar>(a: MatMut<'_, T>) {
    let n = a.nrows();
    if n <= 2 * BLOCK {
        let mut a = a;
        for j in 0..n {
            for i in 0..j {
                a[(i, j)] = T::conj_impl(&a[(j, i)]);
            }
        }
        return;
    }
    let half = n / 2;
    let (top_left, top_right, bottom_left, bottom_right) = a.split_at_mut(half, half);
    rayon::join(
        || copy_adjoint(bottom_left.as_ref(), top_right),
        || rayon::join(|| mirror_lower(top_left), || mirror_lower(bottom_right)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    /// Every layout pair, ragged shapes, and a lower-triangle copy: the result is the copy element
    /// by element, and nothing outside what was asked is written.
    #[test]
    fn every_layout_and_a_triangle_are_copied_exactly() {
        for (m, n) in [(1, 1), (1, 7), (7, 1), (15, 17), (33, 40), (64, 64)] {
            let a = Mat::from_fn(m, n, |i, j| (i * 1000 + j) as f64);
            let a_rows = Mat::from_fn(n, m, |i, j| a[(j, i)]);
            for src in [a.as_ref(), a_rows.as_ref().transpose()] {
                for transposed_dst in [false, true] {
                    let mut store = Mat::from_fn(m.max(n), m.max(n), |_, _| -1.0);
                    let dst = if transposed_dst {
                        store.as_mut().transpose_mut().submatrix_mut(0, 0, m, n)
                    } else {
                        store.as_mut().submatrix_mut(0, 0, m, n)
                    };
                    copy_below(src, dst, |j| j);
                    let read = |i: usize, j: usize| {
                        if transposed_dst {
                            store[(j, i)]
                        } else {
                            store[(i, j)]
                        }
                    };
                    for j in 0..n {
                        for i in 0..m {
                            let want = if i >= j { a[(i, j)] } else { -1.0 };
                            assert_eq!(read(i, j), want, "({i}, {j}) of {m} x {n}");
                        }
                    }
                }
            }
        }
    }

    /// The adjoint copy conjugates complex scalars and transposes; the mirror fills the upper
    /// triangle from the lower one.
    #[test]
    fn the_adjoint_is_conjugated_and_transposed() {
        use hetla_kernels::c64;
        let a = Mat::from_fn(33, 40, |i, j| c64::new(i as f64, j as f64 + 0.5));
        let mut b = Mat::<c64>::zeros(40, 33);
        copy_adjoint(a.as_ref(), b.as_mut());
        for j in 0..33 {
            for i in 0..40 {
                assert_eq!(b[(i, j)], c64::new(j as f64, -(i as f64 + 0.5)));
            }
        }
        for n in [5, 64, 65, 200] {
            let mut m = Mat::from_fn(n, n, |i, j| c64::new((i * n + j) as f64, i as f64));
            mirror_lower(m.as_mut());
            for j in 0..n {
                for i in 0..j {
                    assert_eq!(m[(i, j)], c64::new((j * n + i) as f64, -(j as f64)));
                }
            }
        }
    }
}
