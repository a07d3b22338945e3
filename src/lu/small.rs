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
/// orders (on a Zen 4 core, one unit lower solve: 0.95 us at 64 where a column-by-column loop takes
/// 0.57 us, 2.4 against 1.9 us at 128, even at 192, faer ahead from 256); a stacked solve of 200
/// systems of order 64 spent 30% of its time in ?gecon's estimate, a dozen such solves each.
pub(crate) const SMALL_SOLVE: usize = 128;

/// ?getrs for one right-hand side `x` (n entries) and a column-major `lu` of order n <=
/// [`SMALL_SOLVE`]: x <- op(A)^-1 x for P A = L U (`ipiv`: the interchanges, None for U^-1 L^-1
/// alone), op(A) = A, or with `transposed` A^T (`Conj::No`) or A^H (`Conj::Yes`). Columns of L and
/// U are read contiguously: axpys for A, dot products (four partial sums) for A^T and A^H.
pub(crate) fn small_getrs<T: Scalar>(
    lu: MatRef<'_, T>,
    ipiv: Option<&[usize]>,
    x: &mut [T],
    transposed: Option<Conj>,
) {
    let n = x.len();
    let conj = transposed == Some(Conj::Yes);
    let col = |j: usize| -> &[T] {
        lu.col(j)
            .try_as_col_major()
            .expect("a column-major factor")
            .as_slice()
    };
    let c = |v: T| {
        if conj {
            faer::traits::ComplexField::conj_impl(&v)
        } else {
            v
        }
    };
    let recip = |v: T| faer::traits::ComplexField::recip_impl(&c(v));
    if transposed.is_none() {
        if let Some(ipiv) = ipiv {
            for (i, &p) in ipiv.iter().enumerate() {
                x.swap(i, p);
            }
        }
        // L y = P x, column by column.
        for j in 0..n {
            let (done, rest) = x.split_at_mut(j + 1);
            let xj = done[j];
            for (xi, &l) in rest.iter_mut().zip(&col(j)[j + 1..]) {
                *xi -= l * xj;
            }
        }
        // U x = y, from the last column.
        for j in (0..n).rev() {
            let (rest, done) = x.split_at_mut(j);
            let u = col(j);
            done[0] *= recip(u[j]);
            let xj = done[0];
            for (xi, &u) in rest.iter_mut().zip(&u[..j]) {
                *xi -= u * xj;
            }
        }
        return;
    }
    // op(U) y = x: y_j = (x_j - U(0..j, j) . y(0..j)) / U(j, j).
    for j in 0..n {
        let u = col(j);
        let s = dot(&u[..j], &x[..j], c);
        x[j] = (x[j] - s) * recip(u[j]);
    }
    // op(L) z = y: z_j = y_j - L(j+1.., j) . z(j+1..).
    for j in (0..n).rev() {
        let s = dot(&col(j)[j + 1..], &x[j + 1..], c);
        x[j] -= s;
    }
    if let Some(ipiv) = ipiv {
        for (i, &p) in ipiv.iter().enumerate().rev() {
            x.swap(i, p);
        }
    }
}

/// sum_i c(a_i) b_i in four partial sums (a dependent chain of additions would take their latency
/// at every entry).
fn dot<T: Scalar>(a: &[T], b: &[T], c: impl Fn(T) -> T) -> T {
    let zero = T::from_f64(0.0);
    let mut s = [zero; 4];
    let (a4, b4) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ar, br) = (a4.remainder(), b4.remainder());
    for (a, b) in a4.zip(b4) {
        for ((s, &a), &b) in s.iter_mut().zip(a).zip(b) {
            *s += c(a) * b;
        }
    }
    for ((s, &a), &b) in s.iter_mut().zip(ar).zip(br) {
        *s += c(a) * b;
    }
    (s[0] + s[1]) + (s[2] + s[3])
}
