//! What the kernels' unit tests share: reproducible matrices and the 1-norm their residual ratios
//! divide by.

use faer::{Mat, MatRef};

use crate::Scalar;

/// A reproducible m x n matrix of entries in [-1, 1) (both parts for a complex type).
pub(crate) fn random<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let step = |s: u64| {
        s.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut state = step(seed);
    let mut next = move || {
        state = step(state);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    Mat::from_fn(m, n, |_, _| T::from_parts(next(), next()))
}

/// ||A||_1, the largest column sum of moduli.
pub(crate) fn norm1<T: Scalar>(a: MatRef<'_, T>) -> f64 {
    (0..a.ncols())
        .map(|j| (0..a.nrows()).map(|i| a[(i, j)].abs_f64()).sum::<f64>())
        .fold(0.0, f64::max)
}
