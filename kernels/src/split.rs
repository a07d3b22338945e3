//! Parallel tile kernels as sequential pieces, one per thread of the caller's pool.
//!
//! A kernel called with `Par::Rayon(p)` cuts its output into `p` disjoint pieces of about equal
//! work and runs the backend's *sequential* kernel on each, in parallel: on the cluster's team when
//! the caller leads one (hetla's runtime: piece i on the thread pinned to core i, see
//! `hetla_clusters::Team`), else on the rayon pool the call is made from. Why not let the library
//! parallelise:
//! - a cluster owns its threads. OpenBLAS's thread count is process-wide, so two clusters that call
//!   it at once could not each get their own; run sequentially, one OpenBLAS call per pool thread,
//!   every cluster uses exactly its pinned cores;
//! - faer's parallel TRSM and SYRK reach about half the rate of its parallel GEMM on two threads
//!   (tile 512: 56 and 78 against 105 Gflop/s); independent sequential pieces reach the sequential
//!   rate on every thread;
//! - a sequential faer `matmul` is not subject to faer-rs issue #273 (the parallel f64 product can
//!   return wrong values on inputs with exact-zero blocks).
//!
//! The pieces: GEMM-like products split C into a grid of blocks, column bands unless there are four
//! pieces or more and C has rows enough (`gemm_grid`: each piece then reads part of A and part of
//! B), row bands when C has fewer columns than threads; TRSM (B <- B L^-T) splits B into row bands,
//! which are independent; SYRK splits the lower triangle of C into row bands of equal area, each a
//! rectangle (a GEMM) left of a diagonal block (a smaller SYRK); the left triangular solves split
//! the right-hand sides by columns. POTRF is blocked: the diagonal blocks are factored sequentially
//! and the panel solve and trailing update below each run as split TRSM and SYRK.

use std::sync::Mutex;

use faer::{Conj, MatMut, MatRef, Par};
use rayon::prelude::*;

use crate::backend::Backend;
use crate::error::KernelError;
use crate::par::threads;
use crate::product::Product;
use crate::scalar::{Scalar, adjoint_conj};

/// Below this many flops per piece a kernel runs on one thread: splitting would cost more than it
/// gains.
const MIN_PIECE_FLOPS: f64 = 2.0e6;

/// Column block of the blocked POTRF.
pub(crate) const POTRF_BLOCK: usize = 128;

/// Below this order POTRF runs on one thread whatever the cluster: its split steps (a panel solve
/// and a trailing update per block of 128 columns, each a synchronisation of the team) cost more
/// than they give. Measured with `hetla calibrate --scaling` on the 2-core Zen 4 machine (faer,
/// f64, 15 samples, a 2-core cluster over one core): 0.90x at 256, 0.84x at 384, 0.91x at 512,
/// 1.17x at 768, 1.39x at 1024.
pub(crate) const POTRF_SPLIT_FROM: usize = 768;

/// Fewest rows of C a GEMM piece gets when C is cut in both directions: faer's product on one core
/// runs at 75-80% of its rate on a row band of 256 rows of a 512 tile where a column band of the
/// same size keeps 100% (2-core Zen 4 machine), so rows are cut only where pieces stay tall.
const MIN_PIECE_ROWS: usize = 512;

/// The grid (row blocks, column blocks) a GEMM of an `m x n` C splits into for `p` pieces: the
/// squarest factorisation `p = r c` with `r <= c` whose row blocks keep [`MIN_PIECE_ROWS`] rows, so
/// that each piece reads 1/r of A and 1/c of B rather than all of A (column bands: r = 1).
pub(crate) fn gemm_grid(m: usize, p: usize) -> (usize, usize) {
    (1..=p)
        .filter(|r| p.is_multiple_of(*r) && r * r <= p && (*r == 1 || m / r >= MIN_PIECE_ROWS))
        .max()
        .map_or((1, p), |r| (r, p / r))
}

/// How many pieces a kernel of `flops` over at most `len` independent rows or columns should use on
/// `par`.
pub(crate) fn pieces(par: Par, flops: f64, len: usize) -> usize {
    let by_work = (flops / MIN_PIECE_FLOPS).floor().max(1.0) as usize;
    threads(par).min(by_work).min(len).max(1)
}

/// `n` split into `p` contiguous bands of sizes as equal as possible (the first ones one longer).
pub(crate) fn bands(n: usize, p: usize) -> Vec<usize> {
    let p = p.clamp(1, n.max(1));
    (0..p).map(|i| n / p + usize::from(i < n % p)).collect()
}

/// Row bands of a lower triangle of order `n` whose trapezoids have about equal areas: band i ends
/// at n sqrt((i + 1) / p).
pub(crate) fn triangle_bands(n: usize, p: usize) -> Vec<usize> {
    let p = p.clamp(1, n.max(1));
    let mut ends: Vec<usize> = (1..=p)
        .map(|i| ((n as f64) * ((i as f64) / (p as f64)).sqrt()).round() as usize)
        .collect();
    ends[p - 1] = n;
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let end = end.max(start);
            let size = end - start;
            start = end;
            size
        })
        .filter(|&s| s > 0)
        .collect()
}

/// Runs `f` on every piece in parallel: on the team the calling thread leads (a cluster's worker
/// inside [`hetla_clusters::CpuCluster::run`]: piece i on the thread pinned to the cluster's core
/// i), else on the current rayon pool. Every piece runs; the error of the lowest-numbered failing
/// piece is returned.
pub(crate) fn run_pieces<T: Send>(
    pieces: Vec<T>,
    f: impl Fn(T) -> Result<(), KernelError> + Sync + Send,
) -> Result<(), KernelError> {
    if pieces.len() == 1 {
        return pieces.into_iter().try_for_each(f);
    }
    let n = pieces.len();
    let slots: Vec<Mutex<Option<T>>> = pieces.into_iter().map(|p| Mutex::new(Some(p))).collect();
    // The lowest-numbered failing piece and its error.
    let failed: Mutex<Option<(usize, KernelError)>> = Mutex::new(None);
    let body = |i: usize| {
        let piece = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(Err(e)) = piece.map(&f) {
            let mut failed = failed.lock().unwrap_or_else(|e| e.into_inner());
            if failed.as_ref().is_none_or(|(j, _)| i < *j) {
                *failed = Some((i, e));
            }
        }
    };
    if !hetla_clusters::run_pieces(n, &body) {
        (0..n).into_par_iter().with_max_len(1).for_each(body);
    }
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Where each band of the given sizes starts.
fn starts(sizes: &[usize]) -> Vec<usize> {
    sizes
        .iter()
        .scan(0, |start, &s| {
            let here = *start;
            *start += s;
            Some(here)
        })
        .collect()
}

/// Cuts `m` into row bands of the given sizes.
pub(crate) fn row_bands<'a, T: Scalar>(
    mut m: MatMut<'a, T>,
    sizes: &[usize],
) -> Vec<MatMut<'a, T>> {
    let mut out = Vec::with_capacity(sizes.len());
    for &s in sizes {
        let (top, rest) = m.split_at_row_mut(s);
        out.push(top);
        m = rest;
    }
    out
}

/// Cuts `m` into column bands of the given sizes (the row bands of its transpose).
pub(crate) fn col_bands<'a, T: Scalar>(m: MatMut<'a, T>, sizes: &[usize]) -> Vec<MatMut<'a, T>> {
    row_bands(m.transpose_mut(), sizes)
        .into_iter()
        .map(MatMut::transpose_mut)
        .collect()
}

impl Backend {
    /// C <- alpha op(A) op(B) + beta C on `par` (op conjugates where the operand's `Conj` says so),
    /// as sequential pieces (C's column bands, or row bands when C is taller than wide and has few
    /// columns). The caller handles k = 0.
    pub(crate) fn split_matmul<T: Scalar>(
        self,
        p: Product<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let (a, b) = (p.a, p.b);
        let (m, n, k) = (c.nrows(), c.ncols(), a.0.ncols());
        let flops = 2.0 * (m * n * k) as f64;
        if n >= m || n >= threads(par) {
            let pieces = pieces(par, flops, n.max(m));
            let (r, cols) = gemm_grid(m, pieces);
            let (r, cols) = if cols > n {
                (1, n.min(pieces))
            } else {
                (r, cols)
            };
            let col_sizes = bands(n, cols);
            let row_sizes = bands(m, r);
            let work: Vec<_> = col_bands(c, &col_sizes)
                .into_iter()
                .zip(starts(&col_sizes))
                .flat_map(|(c, col)| {
                    let b = (b.0.subcols(col, c.ncols()), b.1);
                    row_bands(c, &row_sizes)
                        .into_iter()
                        .zip(starts(&row_sizes))
                        .map(move |(c, row)| ((a.0.subrows(row, c.nrows()), a.1), b, c))
                })
                .collect();
            run_pieces(work, |(a, b, c)| self.matmul_seq(Product { a, b, ..p }, c))
        } else {
            let sizes = bands(m, pieces(par, flops, m));
            let work: Vec<_> = row_bands(c, &sizes)
                .into_iter()
                .zip(starts(&sizes))
                .map(|(c, start)| ((a.0.subrows(start, c.nrows()), a.1), c))
                .collect();
            run_pieces(work, |(a, c)| self.matmul_seq(Product { a, ..p }, c))
        }
    }

    /// B <- B L^-H on `par`: B's row bands are independent solves.
    pub(crate) fn split_trsm<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        b: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        let (m, n) = (b.nrows(), b.ncols());
        let sizes = bands(m, pieces(par, (m * n * n) as f64, m));
        run_pieces(row_bands(b, &sizes), |b| self.trsm_seq(l, b))
    }

    /// X <- L^-1 X (or L^-H X) on `par`: the right-hand sides are independent.
    pub(crate) fn split_solve_lower<T: Scalar>(
        self,
        l: MatRef<'_, T>,
        adjoint: bool,
        x: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        let (m, r) = (x.nrows(), x.ncols());
        let sizes = bands(r, pieces(par, (m * m * r) as f64, r));
        run_pieces(col_bands(x, &sizes), |x| {
            self.solve_lower_seq(l, adjoint, x)
        })
    }

    /// C <- C - A A^H on the lower triangle of C, on `par`: row bands of equal area, each the
    /// product left of its diagonal block and the diagonal block's own SYRK.
    pub(crate) fn split_syrk<T: Scalar>(
        self,
        a: MatRef<'_, T>,
        c: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let (n, k) = (c.nrows(), a.ncols());
        let sizes = triangle_bands(n, pieces(par, (n * n * k) as f64, n));
        let work: Vec<_> = row_bands(c, &sizes)
            .into_iter()
            .zip(starts(&sizes))
            .map(|(band, start)| {
                let rows = band.nrows();
                let (left, rest) = band.split_at_col_mut(start);
                (start, rows, left, rest.subcols_mut(0, rows))
            })
            .collect();
        run_pieces(work, |(start, rows, left, diag)| {
            let a_band = a.subrows(start, rows);
            if start > 0 {
                let above = (a.subrows(0, start).transpose(), adjoint_conj::<T>());
                self.matmul_seq(Product::new((a_band, Conj::No), above, -1.0, 1.0), left)?;
            }
            self.syrk_seq(a_band, diag)
        })
    }

    /// A <- L on `par`: right-looking blocked Cholesky whose diagonal blocks are factored
    /// sequentially and whose panel solves and trailing updates are split.
    pub(crate) fn split_potrf<T: Scalar>(
        self,
        mut a: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        let n = a.nrows();
        let mut j = 0;
        while j < n {
            let jb = POTRF_BLOCK.min(n - j);
            let (diag_and_above, below) = a.as_mut().subcols_mut(j, jb).split_at_row_mut(j + jb);
            let mut diag = diag_and_above.subrows_mut(j, jb);
            self.potrf_seq(diag.as_mut()).map_err(|e| match e {
                KernelError::NotPositiveDefinite { index } => {
                    KernelError::NotPositiveDefinite { index: index + j }
                }
                other => other,
            })?;
            if j + jb < n {
                self.split_trsm(diag.as_ref(), below, par)?;
                let (left, trailing) = a.as_mut().split_at_col_mut(j + jb);
                let panel = left.as_ref().subcols(j, jb).subrows(j + jb, n - j - jb);
                let trailing = trailing.subrows_mut(j + jb, n - j - jb);
                self.split_syrk(panel, trailing, par)?;
            }
            j += jb;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_cover_exactly() {
        assert_eq!(bands(10, 3), vec![4, 3, 3]);
        assert_eq!(bands(2, 4), vec![1, 1]);
        assert_eq!(bands(0, 2), vec![0]);
        for (n, p) in [(512, 2), (512, 3), (7, 7), (1000, 16)] {
            let t = triangle_bands(n, p);
            assert_eq!(t.iter().sum::<usize>(), n);
            assert!(t.len() <= p);
        }
        // Equal areas: the first of two bands of a triangle of 1000 rows ends near 707.
        assert_eq!(triangle_bands(1000, 2)[0], 707);
    }

    #[test]
    fn gemm_grids_are_square_where_rows_allow() {
        assert_eq!(gemm_grid(512, 2), (1, 2));
        assert_eq!(gemm_grid(512, 4), (1, 4));
        assert_eq!(gemm_grid(1024, 4), (2, 2));
        assert_eq!(gemm_grid(2048, 8), (2, 4));
        assert_eq!(gemm_grid(2048, 16), (4, 4));
        assert_eq!(gemm_grid(1024, 16), (2, 8));
        assert_eq!(gemm_grid(2048, 7), (1, 7));
        assert_eq!(gemm_grid(2048, 1), (1, 1));
    }

    #[test]
    fn split_products_and_factors_match_the_sequential_ones() {
        use crate::test_support::random;
        use faer::Mat;
        let max_diff = |x: &Mat<f64>, y: &Mat<f64>| {
            (0..x.ncols())
                .flat_map(|j| (0..x.nrows()).map(move |i| (i, j)))
                .map(|(i, j)| (x[(i, j)] - y[(i, j)]).abs())
                .fold(0.0, f64::max)
        };
        let backend = Backend::Faer;
        // 1100 rows: cut in two row blocks for four pieces or more.
        for (m, n, k) in [(1100, 900, 300), (300, 900, 200), (1100, 3, 50)] {
            let a = random::<f64>(m, k, 1);
            let b = random::<f64>(k, n, 2);
            let c0 = random::<f64>(m, n, 3);
            let want = &c0 - &a * &b;
            for threads in [2, 4, 6] {
                let mut got = c0.clone();
                let p = Product::subtract(a.as_ref(), b.as_ref());
                backend
                    .split_matmul(p, got.as_mut(), Par::rayon(threads))
                    .unwrap();
                let diff = max_diff(&got, &want);
                assert!(diff < 1e-11, "{m}x{n}x{k} on {threads}: {diff}");
            }
        }
        // POTRF above the split order, on a team of 2 and on rayon; a failing column beyond the
        // first block is reported at its index.
        let n = POTRF_SPLIT_FROM + 33;
        let m = random::<f64>(n, n, 4);
        let spd = &m * m.transpose() + Mat::<f64>::identity(n, n) * faer::Scale(n as f64);
        let cpus = hetla_clusters::available_cpus();
        let team = hetla_clusters::Team::new(&cpus, "test-potrf").unwrap();
        for on_team in [true, false] {
            let mut f = spd.clone();
            let mut run = || backend.potrf_impl(f.as_mut(), Par::rayon(2));
            if on_team {
                team.lead(false, run)
            } else {
                run()
            }
            .unwrap();
            let l = Mat::from_fn(n, n, |i, j| if i >= j { f[(i, j)] } else { 0.0 });
            let diff = max_diff(&(&l * l.transpose()), &spd);
            assert!(diff < 1e-9 * n as f64, "{diff}");
        }
        let mut bad = spd.clone();
        bad[(300, 300)] = -1e9;
        let err = backend.potrf_impl(bad.as_mut(), Par::rayon(2)).unwrap_err();
        assert_eq!(err, KernelError::NotPositiveDefinite { index: 300 });
    }
}
