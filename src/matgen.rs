//! Test matrices.

use faer::reborrow::*;
use faer::{Mat, MatMut};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random symmetric positive definite `n x n` matrix, reproducible from `seed` on every platform
/// (ChaCha8 stream).
///
/// Entries below the diagonal are uniform in [-0.5, 0.5) and mirrored above it; diagonal entries
/// are uniform in [-0.5, 0.5) plus `n`. Every row's off-diagonal entries then sum in absolute value
/// to less than (n - 1) / 2 < n - 1/2 <= its diagonal entry, so the matrix is strictly diagonally
/// dominant with a positive diagonal, hence SPD (Gershgorin), and well conditioned (the convention
/// of PLASMA's and Chameleon's `plgsy` generator).
pub fn random_spd(n: usize, seed: u64) -> Mat<f64> {
    random_hpd(n, seed)
}

/// The block `rows x cols` of a random Hermitian (symmetric, for a real type) positive definite
/// matrix of order `n`, computed without the rest of the matrix: what each process of a distributed
/// run generates for the tiles it owns. Reproducible from `seed`; not the same matrix as
/// [`random_spd`]'s, but of the same kind (entries uniform in [-0.5, 0.5), `n` added to the
/// diagonal: strictly diagonally dominant, hence positive definite and well conditioned).
///
/// Entry (i, j), i >= j, is draw i of ChaCha8 stream j, so a column of a tile below the diagonal is
/// one seek and a run of draws; entries above the diagonal mirror theirs (conjugated). The real
/// types hold the same entries (rounded in `f32`); a complex entry (i, j), i > j, takes draws 2i
/// and 2i + 1 of stream j as its real and imaginary parts (each below 1/sqrt(2) in modulus, so the
/// matrix stays strictly diagonally dominant), and the diagonal is real.
pub fn random_hpd_block<T: hetla_kernels::Scalar>(
    n: usize,
    seed: u64,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) -> Mat<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let parts = if T::PRECISION.is_complex() { 2 } else { 1 };
    // One f64 is two 32-bit words of the stream.
    let seek = |rng: &mut ChaCha8Rng, stream: usize, draw: usize| {
        rng.set_stream(stream as u64);
        rng.set_word_pos(2 * (parts * draw) as u128);
    };
    // Entry (i, j), i >= j, from the stream's current position.
    let entry = |rng: &mut ChaCha8Rng, i: usize, j: usize| {
        let re = rng.random::<f64>() - 0.5;
        let im = if parts == 2 {
            rng.random::<f64>() - 0.5
        } else {
            0.0
        };
        if i == j {
            (re + n as f64, 0.0)
        } else {
            (re, im)
        }
    };
    let mut block = Mat::<T>::zeros(rows.len(), cols.len());
    for (c, j) in cols.clone().enumerate() {
        // Below (or on) the diagonal: consecutive draws of stream j.
        let first = rows.start.max(j);
        if first < rows.end {
            seek(&mut rng, j, first);
            for i in first..rows.end {
                let (re, im) = entry(&mut rng, i, j);
                block[(i - rows.start, c)] = T::from_parts(re, im);
            }
        }
        // Above it: the conjugate of entry (j, i), of stream i.
        for i in rows.start..rows.end.min(j) {
            seek(&mut rng, i, j);
            let (re, im) = entry(&mut rng, j, i);
            block[(i - rows.start, c)] = T::from_parts(re, -im);
        }
    }
    block
}

/// A random `rows x cols` matrix with entries uniform in [-1, 1), reproducible from `seed` (ChaCha8
/// stream, column by column), in any precision: the same entries in a real one (rounded in `f32`);
/// in a complex one, entry (i, j) takes draws 2 (j rows + i) and 2 (j rows + i) + 1 as its real and
/// imaginary parts.
pub fn random_in<T: hetla_kernels::Scalar>(rows: usize, cols: usize, seed: u64) -> Mat<T> {
    random_block_in(rows, seed, 0..rows, 0..cols)
}

/// A random Hermitian (symmetric when real) indefinite matrix of order `n`: [`random_in`]'s entries
/// below the diagonal (both parts uniform in [-1, 1)), their conjugates above, the real parts of
/// its diagonal on the diagonal.
pub fn random_hermitian<T: hetla_kernels::Scalar>(n: usize, seed: u64) -> Mat<T> {
    let r: Mat<T> = random_in(n, n, seed);
    Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => r[(i, j)],
        std::cmp::Ordering::Equal => T::from_f64(r[(i, i)].to_c64().re),
        std::cmp::Ordering::Less => {
            let z = r[(j, i)].to_c64();
            T::from_parts(z.re, -z.im)
        }
    })
}

/// The block `rows x cols` of [`random_in`]`(n, _, seed)` (a matrix of `n` rows), computed without
/// the rest: entry (i, j) is draw `j * n + i` of the stream (two draws for a complex entry). Chunks
/// of columns are drawn in parallel, each column from its own place in the stream.
pub fn random_block_in<T: hetla_kernels::Scalar>(
    n: usize,
    seed: u64,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) -> Mat<T> {
    use rayon::prelude::*;
    let parts = if T::PRECISION.is_complex() { 2 } else { 1 };
    let mut block = Mat::<T>::zeros(rows.len(), cols.len());
    block
        .as_mut()
        .par_col_chunks_mut(GENERATE_COLUMNS)
        .enumerate()
        .for_each(|(chunk, mut columns)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for c in 0..columns.ncols() {
                let j = cols.start + chunk * GENERATE_COLUMNS + c;
                // One f64 is two 32-bit words of the stream.
                rng.set_word_pos(2 * (parts * (j as u128 * n as u128 + rows.start as u128)));
                for x in column_slice(columns.rb_mut(), c) {
                    let re = 2.0 * rng.random::<f64>() - 1.0;
                    let im = if parts == 2 {
                        2.0 * rng.random::<f64>() - 1.0
                    } else {
                        0.0
                    };
                    *x = T::from_parts(re, im);
                }
            }
        });
    block
}

/// A random Hermitian positive definite `n x n` matrix in any precision, reproducible from `seed`:
/// as [`random_spd`] (entries below the diagonal uniform in [-0.5, 0.5), `n` added to the
/// diagonal), and for a complex type an imaginary part uniform in [-0.5, 0.5) below the diagonal,
/// mirrored conjugated above it. Each off-diagonal entry is below 1/sqrt(2) in modulus, so the
/// matrix stays strictly diagonally dominant with a positive real diagonal: Hermitian positive
/// definite and well conditioned.
pub fn random_hpd<T: hetla_kernels::Scalar>(n: usize, seed: u64) -> Mat<T> {
    use rayon::prelude::*;
    let complex = T::PRECISION.is_complex();
    let mut a = Mat::<T>::zeros(n, n);
    // The draws run down the lower triangle column by column: column c takes n - c of them in a
    // real type, 2 (n - c) - 1 in a complex one (its diagonal entry is real). Each chunk of columns
    // seeks to its first draw (a u64, two words of the stream), so the chunks fill in parallel the
    // same entries one pass would.
    let draws_before = |j: usize| -> u128 {
        let (j, n) = (j as u128, n as u128);
        let real = j * n - j * j.saturating_sub(1) / 2;
        if complex { 2 * real - j } else { real }
    };
    a.as_mut()
        .par_col_chunks_mut(GENERATE_COLUMNS)
        .enumerate()
        .for_each(|(chunk, mut columns)| {
            let first = chunk * GENERATE_COLUMNS;
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_word_pos(2 * draws_before(first));
            for c in 0..columns.ncols() {
                let j = first + c;
                for (i, x) in column_slice(columns.rb_mut(), c)
                    .iter_mut()
                    .enumerate()
                    .skip(j)
                {
                    *x = hpd_entry(&mut rng, n, i, j);
                }
            }
        });
    crate::copy::mirror_lower(a.as_mut());
    a
}

/// Entry (i, j), i >= j, of [`random_hpd`]'s matrix of order `n` from the next draws of `rng`: a
/// real part uniform in [-0.5, 0.5) (plus `n` on the diagonal), and below the diagonal of a complex
/// type an imaginary part drawn next.
fn hpd_entry<T: hetla_kernels::Scalar>(rng: &mut ChaCha8Rng, n: usize, i: usize, j: usize) -> T {
    let re = rng.random::<f64>() - 0.5;
    let im = if T::PRECISION.is_complex() && i != j {
        rng.random::<f64>() - 0.5
    } else {
        0.0
    };
    T::from_parts(if i == j { re + n as f64 } else { re }, im)
}

/// Column `c` of a matrix this module allocated (contiguous columns), as a slice: the fills write
/// through it, faer's checked `m[(i, j)]` costing tens of instructions an entry in debug builds.
fn column_slice<T: hetla_kernels::Scalar>(m: MatMut<'_, T>, c: usize) -> &'_ mut [T] {
    m.col_mut(c)
        .try_as_col_major_mut()
        .expect("a column of a matrix allocated here")
        .as_slice_mut()
}

/// Columns per chunk of [`random_hpd`]'s parallel draws.
const GENERATE_COLUMNS: usize = 64;

/// A random Hermitian positive definite `n x n` matrix whose 2-norm condition number is `cond` (>=
/// 1), reproducible from `seed`: eigenvalues spread geometrically from 1 down to 1 / `cond`, turned
/// by two random Householder reflections H = I - 2 v v^H / (v^H v) (A = H2 H1 D H1 H2: unitary
/// similarity, so the eigenvalues stay exact), O(n^2) work in all, as LAPACK's test generator
/// dlatms does with more reflections. A real type gets real reflections.
pub fn random_hpd_conditioned<T: hetla_kernels::Scalar>(n: usize, cond: f64, seed: u64) -> Mat<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let complex = T::PRECISION.is_complex();
    let last = (n.max(2) - 1) as f64;
    let mut a = Mat::<faer::c64>::zeros(n, n);
    for i in 0..n {
        a[(i, i)] = faer::c64::new(cond.powf(-(i as f64) / last), 0.0);
    }
    for _ in 0..2 {
        let v = reflector(&mut rng, n, complex);
        let vv: f64 = v.iter().map(|x| x.norm_sqr()).sum();
        // w = A v, s = v^H w; A <- A - (2/vv)(v w^H + w v^H) + (4 s / vv^2) v v^H.
        let w: Vec<faer::c64> = (0..n)
            .map(|i| (0..n).map(|j| a[(i, j)] * v[j]).sum())
            .collect();
        let s: faer::c64 = v.iter().zip(&w).map(|(x, y)| x.conj() * y).sum();
        let (c1, c2) = (2.0 / vv, 4.0 / (vv * vv));
        for j in 0..n {
            for i in 0..n {
                let update =
                    (v[i] * w[j].conj() + w[i] * v[j].conj()) * c1 - v[i] * v[j].conj() * s * c2;
                a[(i, j)] -= update;
            }
        }
    }
    Mat::from_fn(n, n, |i, j| {
        // Exactly Hermitian: the mean of the two mirrored entries.
        let x = (a[(i, j)] + a[(j, i)].conj()) * 0.5;
        T::from_parts(x.re, x.im)
    })
}

/// The vector v of a random Householder reflection I - 2 v v^H / (v^H v): entries uniform in [-0.5,
/// 0.5) (both parts when `complex`), drawn from `rng` in order.
fn reflector(rng: &mut ChaCha8Rng, n: usize, complex: bool) -> Vec<faer::c64> {
    (0..n)
        .map(|_| {
            let re = rng.random::<f64>() - 0.5;
            let im = if complex {
                rng.random::<f64>() - 0.5
            } else {
                0.0
            };
            faer::c64::new(re, im)
        })
        .collect()
}

/// A random general `n x n` matrix whose 2-norm condition number is `cond` (>= 1), reproducible
/// from `seed`: singular values spread geometrically from 1 down to 1 / `cond`, multiplied on the
/// left and on the right by two random Householder reflections each (A = H2 H1 D H3 H4: unitary
/// factors leave the singular values exact), O(n^2) work in all, as LAPACK's dlatms builds the
/// matrices of dchkge. A real type gets real reflections.
pub fn random_conditioned<T: hetla_kernels::Scalar>(n: usize, cond: f64, seed: u64) -> Mat<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let complex = T::PRECISION.is_complex();
    let last = (n.max(2) - 1) as f64;
    let mut a = Mat::<T>::zeros(n, n);
    for i in 0..n {
        a[(i, i)] = T::from_f64(cond.powf(-(i as f64) / last));
    }
    let conj = |x: T| {
        let z = x.to_c64();
        T::from_parts(z.re, -z.im)
    };
    for side in [true, true, false, false] {
        let v: Vec<T> = reflector(&mut rng, n, complex)
            .into_iter()
            .map(|z| T::from_parts(z.re, z.im))
            .collect();
        let vv: f64 = v.iter().map(|x| x.abs_f64().powi(2)).sum();
        let scale = T::from_f64(2.0 / vv);
        if side {
            // A <- (I - 2 v v^H / vv) A: w_j = v^H A_j, a_ij -= (2 / vv) v_i w_j.
            for j in 0..n {
                let mut w = T::from_f64(0.0);
                for i in 0..n {
                    w += conj(v[i]) * a[(i, j)];
                }
                let w = w * scale;
                for i in 0..n {
                    a[(i, j)] -= v[i] * w;
                }
            }
        } else {
            // A <- A (I - 2 v v^H / vv): w = A v, a_ij -= (2 / vv) w_i conj(v_j).
            let mut w = vec![T::from_f64(0.0); n];
            for j in 0..n {
                for i in 0..n {
                    w[i] += a[(i, j)] * v[j];
                }
            }
            for j in 0..n {
                let c = conj(v[j]) * scale;
                for i in 0..n {
                    a[(i, j)] -= w[i] * c;
                }
            }
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::c64;

    /// The draws of [`random_hpd`] in one sequential pass, entry by entry: what its parallel chunks
    /// and its mirror must reproduce exactly.
    fn one_pass<T: hetla_kernels::Scalar>(n: usize, seed: u64) -> Mat<T> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut a = Mat::<T>::zeros(n, n);
        for j in 0..n {
            for i in j..n {
                let x: T = hpd_entry(&mut rng, n, i, j);
                a[(i, j)] = x;
                a[(j, i)] = faer::traits::ComplexField::conj_impl(&x);
            }
        }
        a
    }

    #[test]
    fn random_matrices_are_one_pass_of_the_stream_column_by_column() {
        for (rows, cols) in [(0, 3), (3, 0), (1, 1), (29, 5), (7, 200), (130, 129)] {
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            let mut reference = Mat::<f64>::zeros(rows, cols);
            let mut complex = Mat::<c64>::zeros(rows, cols);
            let mut twin = ChaCha8Rng::seed_from_u64(9);
            for j in 0..cols {
                for i in 0..rows {
                    reference[(i, j)] = 2.0 * rng.random::<f64>() - 1.0;
                    let re = 2.0 * twin.random::<f64>() - 1.0;
                    complex[(i, j)] = c64::new(re, 2.0 * twin.random::<f64>() - 1.0);
                }
            }
            assert_eq!(
                random_in::<f64>(rows, cols, 9),
                reference,
                "{rows} x {cols}"
            );
            assert_eq!(random_in::<c64>(rows, cols, 9), complex, "{rows} x {cols}");
        }
    }

    #[test]
    fn the_parallel_generator_draws_what_one_pass_draws() {
        // Sizes around the chunk (64 columns) and the mirror's blocks (64, split above 128).
        for n in [0, 1, 2, 63, 64, 65, 129, 300] {
            assert_eq!(
                random_hpd::<f64>(n, 11),
                one_pass::<f64>(n, 11),
                "f64, n = {n}"
            );
            assert_eq!(
                random_hpd::<f32>(n, 11),
                one_pass::<f32>(n, 11),
                "f32, n = {n}"
            );
            assert_eq!(
                random_hpd::<c64>(n, 12),
                one_pass::<c64>(n, 12),
                "c64, n = {n}"
            );
            assert_eq!(
                random_spd(n, 11),
                one_pass::<f64>(n, 11),
                "random_spd, n = {n}"
            );
        }
        let a = random_hpd::<c64>(300, 12);
        assert!((0..300).all(|i| a[(i, i)].im == 0.0 && a[(i, i)].re > 299.0));
    }

    #[test]
    fn blocks_of_a_random_matrix_are_its_blocks() {
        let whole = random_in::<f64>(29, 5, 7);
        let block = random_block_in::<f64>(29, 7, 10..23, 2..5);
        assert_eq!(block, whole.as_ref().submatrix(10, 2, 13, 3).to_owned());
    }

    #[test]
    fn blocks_of_the_distributed_generator_agree_with_the_whole_matrix() {
        let n = 37;
        let whole = random_hpd_block::<f64>(n, 3, 0..n, 0..n);
        for i in 0..n {
            let off: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| whole[(i, j)].abs())
                .sum();
            assert!(whole[(i, i)] > off, "row {i} is not diagonally dominant");
            for j in 0..n {
                assert_eq!(whole[(i, j)], whole[(j, i)]);
            }
        }
        for (rows, cols) in [
            (5..17, 0..9),
            (0..9, 5..17),
            (30..37, 30..37),
            (3..4, 20..37),
        ] {
            let block = random_hpd_block::<f64>(n, 3, rows.clone(), cols.clone());
            assert_eq!(
                block,
                whole
                    .subrows(rows.start, rows.len())
                    .subcols(cols.start, cols.len())
                    .to_owned()
            );
        }
        assert_ne!(whole, random_hpd_block::<f64>(n, 4, 0..n, 0..n));
    }

    #[test]
    fn blocks_in_other_precisions_are_hermitian_and_agree_with_the_whole_matrix() {
        use hetla_kernels::c64;
        let n = 23;
        let whole = random_hpd_block::<c64>(n, 5, 0..n, 0..n);
        for i in 0..n {
            assert_eq!(whole[(i, i)].im, 0.0);
            let off: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| whole[(i, j)].norm())
                .sum();
            assert!(whole[(i, i)].re > off, "row {i} is not diagonally dominant");
            for j in 0..n {
                assert_eq!(whole[(i, j)], whole[(j, i)].conj());
            }
        }
        let block = random_hpd_block::<c64>(n, 5, 4..19, 2..11);
        assert_eq!(block, whole.as_ref().submatrix(4, 2, 15, 9).to_owned());
        let single = random_hpd_block::<f32>(n, 5, 0..n, 0..n);
        let double = random_hpd_block::<f64>(n, 5, 0..n, 0..n);
        assert_eq!(single, Mat::from_fn(n, n, |i, j| double[(i, j)] as f32));
        let b = random_block_in::<c64>(n, 2, 0..n, 0..3);
        assert_eq!(
            random_block_in::<c64>(n, 2, 5..9, 1..3),
            b.as_ref().submatrix(5, 1, 4, 2).to_owned()
        );
    }

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

    #[test]
    fn a_conditioned_general_matrix_has_the_asked_singular_values() {
        let a = random_conditioned::<f64>(40, 1e6, 3);
        let s = a.singular_values().unwrap();
        let (max, min) = (s[0], s[s.len() - 1]);
        assert!((max - 1.0).abs() < 1e-12 && (max / min / 1e6 - 1.0).abs() < 1e-8);
        // Not symmetric, and dense.
        assert!((a[(3, 7)] - a[(7, 3)]).abs() > 1e-6 && a[(0, 39)] != 0.0);
        let z = random_conditioned::<faer::c64>(30, 100.0, 4);
        let s = z.singular_values().unwrap();
        assert!((s[0] / s[s.len() - 1] / 100.0 - 1.0).abs() < 1e-10);
    }
}
