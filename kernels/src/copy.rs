//! Copies between a tile of a column-major matrix and a contiguous buffer (packing for transfers to
//! and from devices), by columns, on a pool's threads when one is given: one core copies a few
//! GB/s, slower than a PCIe link, so a device fed by one thread waits for its packing.

use faer::{MatMut, MatRef};
use rayon::prelude::*;

/// Copies `src` into `dst` (same shape), columns spread over `pool`'s threads when given.
pub fn copy_by_columns<T: crate::Scalar>(
    mut dst: MatMut<'_, T>,
    src: MatRef<'_, T>,
    pool: Option<&rayon::ThreadPool>,
) {
    assert_eq!(
        (dst.nrows(), dst.ncols()),
        (src.nrows(), src.ncols()),
        "copy between tiles of different shapes"
    );
    let threads = pool.map_or(1, rayon::ThreadPool::current_num_threads);
    let (cols, bytes) = (src.ncols(), src.nrows() * src.ncols() * size_of::<T>());
    // Below ~1 MB a parallel copy costs more in wake-ups than it saves.
    match pool {
        Some(pool) if threads > 1 && cols > 1 && bytes >= 1 << 20 => {
            let chunk = cols.div_ceil(4 * threads).max(1);
            pool.install(|| {
                dst.par_col_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(i, mut part)| {
                        part.copy_from(src.subcols(i * chunk, part.ncols()));
                    });
            });
        }
        _ => dst.copy_from(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    #[test]
    fn a_parallel_copy_of_a_strided_tile_is_exact_whatever_the_shape() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let big = Mat::from_fn(700, 650, |i, j| (i * 1000 + j) as f64);
        for (rows, cols) in [(513, 517), (697, 1), (1, 643), (0, 5), (300, 400)] {
            let src = big.as_ref().submatrix(3, 7, rows, cols);
            let mut dst = Mat::<f64>::zeros(src.nrows(), src.ncols());
            copy_by_columns(dst.as_mut(), src, Some(&pool));
            assert!(dst.as_ref() == src, "{rows} x {cols}");
        }
    }
}
