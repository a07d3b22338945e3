//! Copies between a tile of a column-major matrix and a contiguous buffer (packing for transfers to
//! and from devices), by columns, on a device's copy threads when given: one core copies a few
//! GB/s, slower than a PCIe link, so a device fed by one thread waits for its packing.

use std::sync::Mutex;

use faer::{MatMut, MatRef};
use hetla_clusters::CopyThreads;

/// Copies `src` into `dst` (same shape), columns spread over `threads` when given (the threads a
/// copy starting now has: see [`CopyThreads`]).
pub fn copy_by_columns<T: crate::Scalar>(
    dst: MatMut<'_, T>,
    src: MatRef<'_, T>,
    threads: Option<&CopyThreads>,
) {
    assert_eq!(
        (dst.nrows(), dst.ncols()),
        (src.nrows(), src.ncols()),
        "copy between tiles of different shapes"
    );
    let count = threads.map_or(1, CopyThreads::threads_now);
    let (cols, bytes) = (src.ncols(), src.nrows() * src.ncols() * size_of::<T>());
    // Below ~1 MB a parallel copy costs more in wake-ups than it saves.
    match threads {
        Some(threads) if count > 1 && cols > 1 && bytes >= 1 << 20 => {
            let chunk = cols.div_ceil(4 * count).max(1);
            // Each chunk of columns taken once, by whichever thread's turn it is.
            let mut parts: Vec<Mutex<Option<MatMut<'_, T>>>> = Vec::new();
            let mut rest = dst;
            while rest.ncols() > 0 {
                let width = chunk.min(rest.ncols());
                let (part, tail) = rest.split_at_col_mut(width);
                parts.push(Mutex::new(Some(part)));
                rest = tail;
            }
            threads.run(parts.len(), &|i| {
                let part = parts[i].lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(mut part) = part {
                    part.copy_from(src.subcols(i * chunk, part.ncols()));
                }
            });
        }
        _ => {
            let mut dst = dst;
            dst.copy_from(src)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    #[test]
    fn a_parallel_copy_of_a_strided_tile_is_exact_whatever_the_shape() {
        let cpu = hetla_clusters::available_cpus()[0];
        let threads = CopyThreads::new(&[cpu, cpu, cpu], &[], "test-copy").unwrap();
        let big = Mat::from_fn(700, 650, |i, j| (i * 1000 + j) as f64);
        for (rows, cols) in [(513, 517), (697, 1), (1, 643), (0, 5), (300, 400)] {
            let src = big.as_ref().submatrix(3, 7, rows, cols);
            let mut dst = Mat::<f64>::zeros(src.nrows(), src.ncols());
            copy_by_columns(dst.as_mut(), src, Some(&threads));
            assert!(dst.as_ref() == src, "{rows} x {cols}");
        }
    }
}
