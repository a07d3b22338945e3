//! The input checks every family runs before any work: shapes ([`check_square`]) and entries
//! ([`check_finite`], a triangle's [`check_finite_triangle`], a Hermitian lower triangle's
//! [`check_hermitian_lower`] with its norm in the same pass), each error naming the input, the
//! entry and what was wrong; and the one pass over a Hermitian lower triangle that gives its norm
//! ([`hermitian_column_sums`]), which the checks of results use too.

use faer::MatRef;
use hetla_kernels::Scalar;

use crate::{Error, Result};

/// [`Error::NotSquare`] unless `rows == cols`.
pub(crate) fn check_square(what: &'static str, rows: usize, cols: usize) -> Result<()> {
    if rows == cols {
        Ok(())
    } else {
        Err(Error::NotSquare { what, rows, cols })
    }
}

/// An output (`what`: "the output", "output 3") of its matrix's shape, `a`: an error naming both
/// shapes otherwise.
pub(crate) fn check_output_shape(what: &str, out: (usize, usize), a: (usize, usize)) -> Result<()> {
    if out == a {
        return Ok(());
    }
    Err(Error::InvalidOption {
        option: "out",
        reason: format!(
            "{what} is {}x{}, its matrix {}x{}: give an output of the matrix's shape",
            out.0, out.1, a.0, a.1
        ),
    })
}

fn non_finite<T: Scalar>(
    what: &'static str,
    m: MatRef<'_, T>,
    rows: impl Fn(usize) -> std::ops::Range<usize>,
) -> Result<()> {
    // Contiguous columns first, branch-free; the entry-by-entry scan below finds which entry is
    // not finite, and reads matrices whose columns are not contiguous.
    let contiguous = |j: usize| {
        let range = rows(j);
        let column = m.col(j).subrows(range.start, range.len());
        column.try_as_col_major().map(|c| all_finite(c.as_slice()))
    };
    if (0..m.ncols()).all(|j| contiguous(j) == Some(true)) {
        return Ok(());
    }
    for j in 0..m.ncols() {
        for i in rows(j) {
            let value = m[(i, j)];
            if !value.finite() {
                let z = value.to_c64();
                return Err(Error::NonFinite {
                    what,
                    row: i,
                    col: j,
                    value: if z.re.is_finite() { z.im } else { z.re },
                });
            }
        }
    }
    Ok(())
}

/// The input check of every factorisation of a Hermitian matrix given by its lower triangle: the
/// first non-finite entry is [`Error::NonFinite`]. The imaginary parts of a complex diagonal are
/// not read, as LAPACK's ?potrf reads only the real part (a Hermitian matrix's diagonal is real;
/// one computed in single precision and widened carries round-off there). Returns ||A||_1, computed
/// in the same pass.
pub(crate) fn check_hermitian_lower<T: Scalar>(
    what: &'static str,
    m: MatRef<'_, T>,
) -> Result<f64> {
    let sums = hermitian_column_sums(m);
    let norm = sums.iter().copied().fold(0.0_f64, f64::max);
    if !norm.is_finite() || sums.iter().any(|s| s.is_nan()) {
        non_finite(what, m, |j| j..m.nrows())?;
    }
    Ok(norm)
}

/// [`check_hermitian_lower`] without the norm, for callers that have no use for it (a batch of
/// small solves, where the norm's pass costs several percent): a plain sum of the lower triangle is
/// finite unless an entry is not (or the sum overflows, and then the exact scan finds nothing).
pub(crate) fn check_hermitian_lower_entries<T: Scalar>(
    what: &'static str,
    m: MatRef<'_, T>,
) -> Result<()> {
    let n = m.nrows().min(m.ncols());
    let mut total = 0.0_f64;
    for k in 0..n {
        let column = m.col(k).subrows(k, n - k);
        let sum = |line: &mut dyn Iterator<Item = &T>| {
            line.fold(0.0, |acc, x| {
                let z = x.to_c64();
                acc + z.re + z.im
            })
        };
        total += match column.try_as_col_major() {
            Some(column) => sum(&mut column.as_slice().iter()),
            None => sum(&mut column.iter()),
        };
    }
    if !total.is_finite() {
        non_finite(what, m, |j| j..m.nrows())?;
    }
    Ok(())
}

/// [`Error::DimensionMismatch`] unless the right-hand sides have the `n` rows of the system.
pub(crate) fn check_rows(n: usize, rows: usize) -> Result<()> {
    if rows == n {
        Ok(())
    } else {
        Err(Error::DimensionMismatch { n, rows })
    }
}

/// The shapes of a system A X = B: A (`what`) square, B with as many rows.
pub(crate) fn check_system(what: &'static str, a: (usize, usize), b_rows: usize) -> Result<()> {
    check_square(what, a.0, a.1)?;
    check_rows(a.0, b_rows)
}

/// The first non-finite entry of `m` (every entry read) as [`Error::NonFinite`], naming `what`.
pub(crate) fn check_finite<T: Scalar>(what: &'static str, m: MatRef<'_, T>) -> Result<()> {
    non_finite(what, m, |_| 0..m.nrows())
}

/// [`check_finite`] of the triangle of a square `m` that is read: on and below the diagonal when
/// `lower`, else on and above it.
pub(crate) fn check_finite_triangle<T: Scalar>(
    what: &'static str,
    m: MatRef<'_, T>,
    lower: bool,
) -> Result<()> {
    match lower {
        true => non_finite(what, m, |j| j..m.nrows()),
        false => non_finite(what, m, |j| 0..(j + 1).min(m.nrows())),
    }
}

/// Whether every entry of `x` is finite: x * 0 is 0 for a finite x and NaN for an infinite or NaN
/// one, summed in 8 lanes without a branch (an entry-by-entry test took 17% of a 64 x 64 LU's time
/// in a batch).
fn all_finite<T: Scalar>(x: &[T]) -> bool {
    let mut lanes = [0.0_f64; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            let z = v.to_c64();
            *lane += z.re * 0.0 + z.im * 0.0;
        }
    }
    for (lane, v) in lanes.iter_mut().zip(rest) {
        let z = v.to_c64();
        *lane += z.re * 0.0 + z.im * 0.0;
    }
    lanes.iter().sum::<f64>() == 0.0
}

/// Lower triangles of at least this many entries are summed in [`SUM_PARTS`] parts at once.
const PARALLEL_SUM_ENTRIES: usize = 1 << 21;

/// Parts of the lower triangle [`hermitian_column_sums`] sums in parallel: a fixed count, so that
/// the sums (added part by part in order) do not depend on the machine's threads.
const SUM_PARTS: usize = 16;

/// The column sums of |A| for the Hermitian matrix whose lower triangle is `m` (the diagonal
/// counted by its real part): one pass over the lower triangle. A sum is not finite exactly when
/// its column or row holds a non-finite entry.
///
/// A large triangle is cut into [`SUM_PARTS`] bands of lines of equal entry counts, each summed on
/// its own thread into its own vector, the vectors then added in order: the same sums on every
/// machine, and the input check of a factorisation no longer a single-threaded pass beside a
/// parallel run (at n = 16384, 0.14 s on one core, half of a GPU factorisation's 0.29 s).
pub(crate) fn hermitian_column_sums<T: Scalar>(m: MatRef<'_, T>) -> Vec<f64> {
    use rayon::prelude::*;
    let n = m.nrows().min(m.ncols());
    let rows_contiguous = m.col_stride() == 1 && m.row_stride() != 1;
    // Entries of line k read: row k left of the diagonal when rows are contiguous (a C-ordered
    // matrix), else column k below it.
    let entries = |k: usize| if rows_contiguous { k } else { n - k - 1 };
    let parts = if n * n / 2 >= PARALLEL_SUM_ENTRIES {
        SUM_PARTS
    } else {
        1
    };
    // Lines [bounds[p], bounds[p + 1]) of part p hold about 1/parts of the entries each.
    let total: usize = n * n.saturating_sub(1) / 2;
    let mut bounds = vec![0];
    let mut seen = 0;
    for k in 0..n {
        if seen * parts >= total * bounds.len() && bounds.len() < parts {
            bounds.push(k);
        }
        seen += entries(k);
    }
    bounds.push(n);
    let part = |p: usize| {
        let mut sums = vec![0.0_f64; n];
        for k in bounds[p]..bounds[p + 1] {
            let diagonal = m[(k, k)].re_f64().abs();
            let own = if rows_contiguous {
                let row = m.row(k).subcols(0, k);
                match row.try_as_row_major() {
                    Some(row) => add_moduli::<T>(row.as_slice().iter(), &mut sums[..k]),
                    None => add_moduli::<T>(row.iter(), &mut sums[..k]),
                }
            } else {
                let column = m.col(k).subrows(k + 1, n - k - 1);
                match column.try_as_col_major() {
                    Some(column) => add_moduli::<T>(column.as_slice().iter(), &mut sums[k + 1..]),
                    None => add_moduli::<T>(column.iter(), &mut sums[k + 1..]),
                }
            };
            sums[k] += diagonal + own;
        }
        sums
    };
    if bounds.len() == 2 {
        return part(0);
    }
    let partial: Vec<Vec<f64>> = (0..bounds.len() - 1).into_par_iter().map(part).collect();
    let mut sums = vec![0.0_f64; n];
    for p in &partial {
        for (sum, x) in sums.iter_mut().zip(p) {
            *sum += x;
        }
    }
    sums
}

/// Adds |x| of each off-diagonal entry of `line` to its column's sum (`sums`, aligned with `line`)
/// and returns their total, the sum of the other triangle's line by symmetry. |x| is sqrt(re^2 +
/// im^2): hypot is several times slower, and the entries of a matrix that factors are far from
/// overflowing their squares.
fn add_moduli<'a, T: Scalar>(line: impl Iterator<Item = &'a T>, sums: &mut [f64]) -> f64 {
    let mut total = 0.0;
    for (x, sum) in line.zip(sums) {
        let z = x.to_c64();
        let v = if T::PRECISION.is_complex() {
            (z.re * z.re + z.im * z.im).sqrt()
        } else {
            z.re.abs()
        };
        total += v;
        *sum += v;
    }
    total
}
