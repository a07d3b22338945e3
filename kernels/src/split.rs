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
//! The pieces: GEMM-like products split C into column bands (row bands when C has fewer columns
//! than threads); TRSM (B <- B L^-T) splits B into row bands, which are independent; SYRK splits
//! the lower triangle of C into row bands of equal area, each a rectangle (a GEMM) left of a
//! diagonal block (a smaller SYRK); the left triangular solves split the right-hand sides by
//! columns. POTRF is blocked: the diagonal blocks are factored sequentially and the panel solve and
//! trailing update below each run as split TRSM and SYRK.

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
    let errors: Vec<Mutex<Option<KernelError>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let body = |i: usize| {
        let piece = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(Err(e)) = piece.map(&f) {
            *errors[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    };
    if !hetla_clusters::run_pieces(n, &body) {
        (0..n).into_par_iter().with_max_len(1).for_each(body);
    }
    errors
        .into_iter()
        .find_map(|e| e.into_inner().unwrap_or_else(|e| e.into_inner()))
        .map_or(Ok(()), Err)
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
            let sizes = bands(n, pieces(par, flops, n));
            let work: Vec<_> = col_bands(c, &sizes)
                .into_iter()
                .zip(starts(&sizes))
                .map(|(c, start)| ((b.0.subcols(start, c.ncols()), b.1), c))
                .collect();
            run_pieces(work, |(b, c)| self.matmul_seq(Product { b, ..p }, c))
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
    fn a_failing_piece_fails_the_kernel_with_its_error_and_the_team_goes_on() {
        let cpus = hetla_clusters::available_cpus();
        let cpus: Vec<usize> = (0..4).map(|i| cpus[i % cpus.len()]).collect();
        let team = hetla_clusters::Team::new(&cpus, "test-split").unwrap();
        let fails = |bad: usize| {
            move |i: usize| {
                if i == bad {
                    Err(KernelError::NotPositiveDefinite { index: i })
                } else {
                    Ok(())
                }
            }
        };
        team.lead(true, || {
            for bad in [0, 3] {
                let got = run_pieces((0..4).collect(), fails(bad));
                assert_eq!(got, Err(KernelError::NotPositiveDefinite { index: bad }));
                // Every piece ran, on its own thread.
                let mut threads: Vec<usize> = hetla_clusters::take_pieces()
                    .iter()
                    .map(|p| p.thread)
                    .collect();
                threads.sort_unstable();
                assert_eq!(threads, vec![0, 1, 2, 3]);
            }
            assert_eq!(run_pieces((0..4).collect(), fails(9)), Ok(()));
        });
        // Outside a team the pieces run on rayon, with the same error.
        let got = run_pieces((0..4).collect(), fails(2));
        assert_eq!(got, Err(KernelError::NotPositiveDefinite { index: 2 }));
    }
}
