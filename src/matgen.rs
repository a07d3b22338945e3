//! Test matrices.

use faer::Mat;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random symmetric positive definite `n x n` matrix, reproducible from `seed` on every
/// platform (ChaCha8 stream).
///
/// Entries below the diagonal are uniform in [-0.5, 0.5) and mirrored above it; diagonal
/// entries are uniform in [-0.5, 0.5) plus `n`. Every row's off-diagonal entries then sum
/// in absolute value to less than (n - 1) / 2 < n - 1/2 <= its diagonal entry, so the
/// matrix is strictly diagonally dominant with a positive diagonal, hence SPD (Gershgorin),
/// and well conditioned (the convention of PLASMA's and Chameleon's `plgsy` generator).
pub fn random_spd(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut a = Mat::<f64>::zeros(n, n);
    for j in 0..n {
        for i in j..n {
            a[(i, j)] = rng.random::<f64>() - 0.5;
        }
        a[(j, j)] += n as f64;
    }
    // Mirror the lower triangle in square blocks, so both reads and writes stay in cache.
    const B: usize = 64;
    for jb in (0..n).step_by(B) {
        for ib in (jb..n).step_by(B) {
            for j in jb..(jb + B).min(n) {
                for i in ib.max(j + 1)..(ib + B).min(n) {
                    a[(j, i)] = a[(i, j)];
                }
            }
        }
    }
    a
}

/// A random `rows x cols` matrix with entries uniform in [-1, 1), reproducible from `seed`
/// (ChaCha8 stream, column by column).
pub fn random(rows: usize, cols: usize, seed: u64) -> Mat<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = Mat::<f64>::zeros(rows, cols);
    for j in 0..cols {
        for i in 0..rows {
            m[(i, j)] = 2.0 * rng.random::<f64>() - 1.0;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_reproducible_and_diagonally_dominant() {
        let a = random_spd(70, 7);
        assert_eq!(a, random_spd(70, 7));
        assert_ne!(a, random_spd(70, 8));
        for i in 0..70 {
            let off: f64 = (0..70).filter(|&j| j != i).map(|j| a[(i, j)].abs()).sum();
            assert!(a[(i, i)] > off);
            for j in 0..70 {
                assert_eq!(a[(i, j)], a[(j, i)]);
            }
        }
    }
}
