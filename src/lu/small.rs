//! The LU of a small matrix on the calling core (a matrix of a batch, or one alone whose min(m, n)
//! is at most [`SMALL_LU`]): faer's recursive LU with LAPACK's interchanges and zero-pivot rule.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting;
use faer::{Conj, MatMut, MatRef, Par};
use hetla_kernels::{Backend, KernelError, Scalar};

/// The largest min(m, n) [`crate::Lu::factor_in_place`] factors on the calling core by
/// [`small_lu`], as a batch factors each matrix (above it, the panel kernel on every core).
pub(crate) const SMALL_LU: usize = 64;

/// LU with partial pivoting of the m x k `a` (k <= m; column-major is fastest) on the calling core:
/// its interchanges in `ipiv` (LAPACK's) and the first column with an exactly zero pivot. With the
/// faer backend, faer's recursive LU (blocks of 16 columns, 2.2x the panel kernel's rate on 64 x
/// 64: 31 against 70 us) chooses LAPACK's pivots (the first largest |re| + |im| of the column); it
/// divides by a zero pivot where LAPACK leaves the column as it is, so a matrix with one is
/// factored again by the backend's panel kernel, which follows LAPACK there, from `original` (A's
/// entries where the caller still has them: the source of a copy `a` is) or else from a copy of `a`
/// made first. Another backend keeps the panel kernel (its products on that backend's GEMM).
pub(crate) fn small_lu<T: Scalar>(
    backend: Backend,
    mut a: MatMut<'_, T>,
    original: Option<MatRef<'_, T>>,
    ipiv: &mut [usize],
) -> Result<Option<usize>, KernelError> {
    if backend != Backend::Faer {
        return backend.lu_panel(a, ipiv, Par::Seq);
    }
    let (m, k) = (a.nrows(), a.ncols());
    let copy;
    let original = match original {
        Some(original) => original,
        None => {
            copy = a.to_owned();
            copy.as_ref()
        }
    };
    let (mut perm, mut perm_inv) = (vec![0usize; m], vec![0usize; m]);
    let mut buffer = MemBuffer::new(partial_pivoting::factor::lu_in_place_scratch::<usize, T>(
        m,
        k,
        Par::Seq,
        Default::default(),
    ));
    partial_pivoting::factor::lu_in_place(
        a.as_mut(),
        &mut perm,
        &mut perm_inv,
        Par::Seq,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    let zero = T::from_f64(0.0);
    if (0..k).any(|j| a[(j, j)] == zero) {
        a.copy_from(original);
        return backend.lu_panel(a, ipiv, Par::Seq);
    }
    // The interchanges that make faer's permutation (row i of P A is row perm[i] of A): step j
    // brings row perm[j] from where the earlier steps left it.
    let (mut at, mut row_at): (Vec<usize>, Vec<usize>) = ((0..m).collect(), (0..m).collect());
    for (j, pivot) in ipiv.iter_mut().enumerate().take(k) {
        let p = at[perm[j]];
        *pivot = p;
        row_at.swap(j, p);
        at[row_at[j]] = j;
        at[row_at[p]] = p;
    }
    Ok(None)
}

/// The largest order whose one-column solves [`small_getrs`] substitutes in plain loops: faer's
/// blocked triangular solve of one vector costs more in its splitting than in its flops at these
/// orders (on a Zen 4 core, one unit lower solve: 0.95 us at 64 where a column-by-column loop took
/// 0.57 us, 2.4 against 1.9 us at 128, even at 192, faer ahead from 256); a stacked solve of 200
/// systems of order 64 spent 30% of its time in ?gecon's estimate, a dozen such solves each. With
/// [`small_getrs`]'s blocks and AVX2, L and U of order 64 take 1.0-1.15 us together, their adjoints
/// 1.3 us (faer: 1.85 us either way).
pub(crate) const SMALL_SOLVE: usize = 128;

/// ?getrs for one right-hand side `x` (n entries) and a column-major `lu` of order n <=
/// [`SMALL_SOLVE`]: x <- op(A)^-1 x for P A = L U (`ipiv`: the interchanges, None for U^-1 L^-1
/// alone), op(A) = A, or with `transposed` A^T (`Conj::No`) or A^H (`Conj::Yes`). Columns of L and
/// U are read contiguously: axpys for A, dot products (four partial sums) for A^T and A^H, blocks
/// of [`B`] columns or rows at a time.
pub(crate) fn small_getrs<T: Scalar>(
    lu: MatRef<'_, T>,
    ipiv: Option<&[usize]>,
    x: &mut [T],
    transposed: Option<Conj>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), what `getrs_avx2` requires.
        return unsafe { getrs_avx2(lu, ipiv, x, transposed) };
    }
    getrs_loops(lu, ipiv, x, transposed);
}

/// [`getrs_loops`] compiled for AVX2: the crate is built for x86-64's baseline, whose two-lane SSE2
/// halves the loops' rate (a stacked solve of 200 systems of order 64 spent 23% of its time in
/// them).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn getrs_avx2<T: Scalar>(
    lu: MatRef<'_, T>,
    ipiv: Option<&[usize]>,
    x: &mut [T],
    transposed: Option<Conj>,
) {
    getrs_loops(lu, ipiv, x, transposed);
}

/// The body of [`small_getrs`], inlined into each of its instruction sets.
#[inline(always)]
fn getrs_loops<T: Scalar>(
    lu: MatRef<'_, T>,
    ipiv: Option<&[usize]>,
    x: &mut [T],
    transposed: Option<Conj>,
) {
    let Some(conj) = transposed else {
        if let Some(ipiv) = ipiv {
            for (i, &p) in ipiv.iter().enumerate() {
                x.swap(i, p);
            }
        }
        return solve_lu(lu, x);
    };
    solve_lu_transposed(lu, x, conj == Conj::Yes);
    if let Some(ipiv) = ipiv {
        for (i, &p) in ipiv.iter().enumerate().rev() {
            x.swap(i, p);
        }
    }
}

/// Column j of the column-major `lu`.
#[inline(always)]
fn column<'a, T: Scalar>(lu: MatRef<'a, T>, j: usize) -> &'a [T] {
    lu.col(j)
        .try_as_col_major()
        .expect("a column-major factor")
        .as_slice()
}

/// x <- U^-1 L^-1 x.
#[inline(always)]
fn solve_lu<T: Scalar>(lu: MatRef<'_, T>, x: &mut [T]) {
    let n = x.len();
    let col = |j: usize| column(lu, j);
    let recip = |v: T| faer::traits::ComplexField::recip_impl(&v);
    // L y = x, by blocks of B columns: the block's triangle, then the rows below it (only
    // the last block, with nothing below, is narrower).
    for j in (0..n).step_by(B) {
        let end = (j + B).min(n);
        for k in j..end {
            let (xk, l) = (x[k], col(k));
            for i in k + 1..end {
                x[i] -= l[i] * xk;
            }
        }
        if end - j == B {
            let l: [&[T]; B] = std::array::from_fn(|k| &col(j + k)[end..]);
            let y: [T; B] = std::array::from_fn(|k| x[j + k]);
            for (i, xi) in x[end..].iter_mut().enumerate() {
                *xi = *xi - l[0][i] * y[0] - l[1][i] * y[1] - l[2][i] * y[2] - l[3][i] * y[3];
            }
        }
    }
    // U x = y, by blocks of B columns from the last: the block's triangle, then the rows
    // above it (only the first block, with nothing above, is narrower).
    for end in (1..=n).rev().step_by(B) {
        let j = end.saturating_sub(B);
        for k in (j..end).rev() {
            let u = col(k);
            x[k] *= recip(u[k]);
            let xk = x[k];
            for i in j..k {
                x[i] -= u[i] * xk;
            }
        }
        if end - j == B {
            let u: [&[T]; B] = std::array::from_fn(|k| &col(j + k)[..j]);
            let y: [T; B] = std::array::from_fn(|k| x[j + k]);
            for (i, xi) in x[..j].iter_mut().enumerate() {
                *xi = *xi - u[3][i] * y[3] - u[2][i] * y[2] - u[1][i] * y[1] - u[0][i] * y[0];
            }
        }
    }
}

/// x <- L^-T U^-T x, or with `conj` L^-H U^-H x.
#[inline(always)]
fn solve_lu_transposed<T: Scalar>(lu: MatRef<'_, T>, x: &mut [T], conj: bool) {
    let n = x.len();
    let col = |j: usize| column(lu, j);
    let c = |v: T| {
        if conj {
            faer::traits::ComplexField::conj_impl(&v)
        } else {
            v
        }
    };
    let recip = |v: T| faer::traits::ComplexField::recip_impl(&c(v));
    // op(U) y = x, y_k = (x_k - U(0..k, k) . y(0..k)) / U(k, k), by blocks of B rows: the block's
    // B dot products with the rows above it at once, then its triangle (only the last block is
    // narrower).
    for j in (0..n).step_by(B) {
        let end = (j + B).min(n);
        if end - j == B {
            let d = dots::<T, B>(std::array::from_fn(|k| &col(j + k)[..j]), &x[..j], c);
            for (xk, d) in x[j..end].iter_mut().zip(d) {
                *xk -= d;
            }
        } else {
            for k in j..end {
                x[k] -= dots([&col(k)[..j]], &x[..j], c)[0];
            }
        }
        for k in j..end {
            let u = col(k);
            let mut s = x[k];
            for i in j..k {
                s -= c(u[i]) * x[i];
            }
            x[k] = s * recip(u[k]);
        }
    }
    // op(L) z = y, z_k = y_k - L(k+1.., k) . z(k+1..), by blocks of B rows from the last (only the
    // first block is narrower).
    for end in (1..=n).rev().step_by(B) {
        let j = end.saturating_sub(B);
        if end - j == B {
            let d = dots::<T, B>(std::array::from_fn(|k| &col(j + k)[end..]), &x[end..], c);
            for (xk, d) in x[j..end].iter_mut().zip(d) {
                *xk -= d;
            }
        } else {
            for k in j..end {
                x[k] -= dots([&col(k)[end..]], &x[end..], c)[0];
            }
        }
        for k in (j..end).rev() {
            let l = col(k);
            let mut s = x[k];
            for i in k + 1..end {
                s -= c(l[i]) * x[i];
            }
            x[k] = s;
        }
    }
}

/// The rows or columns [`getrs_loops`] takes at once: a vector's substitution is a chain of n
/// dependent steps, n / B of them in blocks (the B columns' updates of the rest, or the B rows' dot
/// products, being independent).
const B: usize = 4;

/// The K dot products sum_i c(a_k[i]) y_i of `y` with the first y.len() entries of each a_k, each
/// in four partial sums (a chain of additions would wait for each one's latency), the K at once (y
/// read once).
#[inline(always)]
fn dots<T: Scalar, const K: usize>(a: [&[T]; K], y: &[T], c: impl Fn(T) -> T) -> [T; K] {
    let zero = T::from_f64(0.0);
    let n = y.len();
    let a = a.map(|a| &a[..n]);
    let mut s = [[zero; 4]; K];
    let whole = n / 4 * 4;
    for base in (0..whole).step_by(4) {
        let y: [T; 4] = std::array::from_fn(|l| y[base + l]);
        for (s, a) in s.iter_mut().zip(a) {
            for (l, s) in s.iter_mut().enumerate() {
                *s += c(a[base + l]) * y[l];
            }
        }
    }
    std::array::from_fn(|k| {
        let mut t = (s[k][0] + s[k][1]) + (s[k][2] + s[k][3]);
        for i in whole..n {
            t += c(a[k][i]) * y[i];
        }
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    fn largest<T: Scalar>(m: &Mat<T>) -> f64 {
        m.col_iter()
            .flat_map(|c| c.iter().map(|v| v.abs_f64()).collect::<Vec<_>>())
            .fold(0.0, f64::max)
    }

    /// op(M) x = b solved by `small_getrs` on every order around the blocks' edges, for M = A (with
    /// the interchanges) and M = L U (without: the condition estimate's products), every op:
    /// LAPACK's residual ratio ||op(M) x - b|| / (n eps ||M|| ||x||), max norms.
    fn case<T: Scalar>() {
        for n in [1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 65, 127, 128] {
            let a = crate::matgen::random_in::<T>(n, n, n as u64);
            let mut lu = a.clone();
            let mut ipiv = vec![0; n];
            small_lu(Backend::Faer, lu.as_mut(), None, &mut ipiv).unwrap();
            let l = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
                std::cmp::Ordering::Greater => lu[(i, j)],
                std::cmp::Ordering::Equal => T::from_f64(1.0),
                std::cmp::Ordering::Less => T::from_f64(0.0),
            });
            let u = Mat::from_fn(
                n,
                n,
                |i, j| if i <= j { lu[(i, j)] } else { T::from_f64(0.0) },
            );
            let product = &l * &u;
            let b = crate::matgen::random_in::<T>(n, 1, 7);
            for (m, pivots) in [(&a, Some(ipiv.as_slice())), (&product, None)] {
                for transposed in [None, Some(Conj::No), Some(Conj::Yes)] {
                    let mut x = b.clone();
                    let column = x.col_mut(0).try_as_col_major_mut().unwrap();
                    small_getrs(lu.as_ref(), pivots, column.as_slice_mut(), transposed);
                    let op = match transposed {
                        None => m.clone(),
                        Some(Conj::No) => m.transpose().to_owned(),
                        Some(Conj::Yes) => m.adjoint().to_owned(),
                    };
                    let residual = largest(&(&op * &x - &b));
                    let eps = T::PRECISION.epsilon();
                    let ratio = residual / (n as f64 * eps * largest(m) * largest(&x));
                    assert!(
                        ratio < 30.0,
                        "{} n {n} {transposed:?} pivots {}: {ratio}",
                        T::PRECISION,
                        pivots.is_some()
                    );
                }
            }
        }
    }

    #[test]
    fn small_solves_of_one_vector_meet_lapacks_ratio_in_every_precision_and_op() {
        case::<f32>();
        case::<f64>();
        case::<faer::c32>();
        case::<faer::c64>();
    }
}
