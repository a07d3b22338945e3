//! ScaLAPACK's `p?potrf` on a [`DistributedMatrix`] and `p?potrs` on a [`DistributedRhs`], its LU
//! with partial pivoting, `p?getrf` on a general [`DistributedMatrix`] and `p?getrs`, and its QR
//! and least squares, `p?geqrf` and `p?gels` on a tall one, in the matrices' precision (s, d, c,
//! z): the peers a distributed factorisation and solve are measured against (feature `scalapack`;
//! apt `libscalapack-openmpi-dev`).
//!
//! The tiles already sit where ScaLAPACK wants them: with block size = tile size, source process
//! (0, 0) and a BLACS grid in row-major order, global tile (I, J) is on process (I mod P, J mod Q),
//! at local block (I / P, J / Q) of its column-major local array. The tiles are copied into that
//! array (not timed), the routine runs between two barriers, and the result's tiles are copied
//! back. A complex local array is faer's `c32`/`c64` entries, laid out as Fortran's COMPLEX (real
//! part, then imaginary).

use std::ffi::c_char;

use faer::Mat;
use hetla_kernels::{c32, c64};
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::matrix::{DistributedMatrix, DistributedRhs};
use super::wire::Wire;
use crate::{Error, Result};

#[link(name = "scalapack-openmpi")]
unsafe extern "C" {
    fn Cblacs_get(icontxt: i32, what: i32, val: *mut i32);
    fn Cblacs_gridinit(icontxt: *mut i32, order: *const c_char, nprow: i32, npcol: i32);
    fn Cblacs_gridexit(icontxt: i32);
    fn numroc_(
        n: *const i32,
        nb: *const i32,
        iproc: *const i32,
        isrc: *const i32,
        nprocs: *const i32,
    ) -> i32;
}

/// Declares ScaLAPACK's `p?potrf_`, `p?potrs_`, `p?getrf_`, `p?getrs_`, `p?geqrf_` and `p?gels_` of
/// one precision.
macro_rules! declare {
    ($potrf:ident, $potrs:ident, $getrf:ident, $getrs:ident, $geqrf:ident, $gels:ident, $t:ty) => {
        #[link(name = "scalapack-openmpi")]
        unsafe extern "C" {
            fn $potrf(
                uplo: *const c_char,
                n: *const i32,
                a: *mut $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                info: *mut i32,
            );
            fn $potrs(
                uplo: *const c_char,
                n: *const i32,
                nrhs: *const i32,
                a: *const $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                b: *mut $t,
                ib: *const i32,
                jb: *const i32,
                descb: *const i32,
                info: *mut i32,
            );
            fn $getrf(
                m: *const i32,
                n: *const i32,
                a: *mut $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                ipiv: *mut i32,
                info: *mut i32,
            );
            fn $getrs(
                trans: *const c_char,
                n: *const i32,
                nrhs: *const i32,
                a: *const $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                ipiv: *const i32,
                b: *mut $t,
                ib: *const i32,
                jb: *const i32,
                descb: *const i32,
                info: *mut i32,
            );
            fn $geqrf(
                m: *const i32,
                n: *const i32,
                a: *mut $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                tau: *mut $t,
                work: *mut $t,
                lwork: *const i32,
                info: *mut i32,
            );
            fn $gels(
                trans: *const c_char,
                m: *const i32,
                n: *const i32,
                nrhs: *const i32,
                a: *mut $t,
                ia: *const i32,
                ja: *const i32,
                desca: *const i32,
                b: *mut $t,
                ib: *const i32,
                jb: *const i32,
                descb: *const i32,
                work: *mut $t,
                lwork: *const i32,
                info: *mut i32,
            );
        }
    };
}

declare!(
    pspotrf_, pspotrs_, psgetrf_, psgetrs_, psgeqrf_, psgels_, f32
);
declare!(
    pdpotrf_, pdpotrs_, pdgetrf_, pdgetrs_, pdgeqrf_, pdgels_, f64
);
declare!(
    pcpotrf_, pcpotrs_, pcgetrf_, pcgetrs_, pcgeqrf_, pcgels_, c32
);
declare!(
    pzpotrf_, pzpotrs_, pzgetrf_, pzgetrs_, pzgeqrf_, pzgels_, c64
);

/// A local array and its descriptor.
type Local<'a, T> = (&'a mut Mat<T>, &'a [i32; 9]);

/// The scalars ScaLAPACK factors and solves in (sealed through [`Wire`]).
pub trait Scalapack: Wire {
    /// LAPACK's letter of the precision ('d' in "pdpotrf").
    const LETTER: char;

    /// `p?potrf('L')` on the whole local array `a`; ScaLAPACK's `info`.
    ///
    /// # Safety
    /// `a`'s descriptor must describe `a` (its leading dimension `a`'s column stride) on an
    /// initialised BLACS grid.
    unsafe fn potrf(n: i32, a: Local<'_, Self>) -> i32;

    /// `p?potrs('L')` with the factor `l` on the right-hand sides `b`; ScaLAPACK's `info`.
    ///
    /// # Safety
    /// As [`Scalapack::potrf`], for both arrays.
    unsafe fn potrs(n: i32, nrhs: i32, l: (&Mat<Self>, &[i32; 9]), b: Local<'_, Self>) -> i32;

    /// `p?getrf` on the whole `m x n` local array `a`, its interchanges into `ipiv` (at least the
    /// local rows plus one block); ScaLAPACK's `info`.
    ///
    /// # Safety
    /// As [`Scalapack::potrf`].
    unsafe fn getrf(m: i32, n: i32, a: Local<'_, Self>, ipiv: &mut [i32]) -> i32;

    /// `p?getrs('N')` with the LU factors `lu` and their interchanges `ipiv` on the right-hand
    /// sides `b`; ScaLAPACK's `info`.
    ///
    /// # Safety
    /// As [`Scalapack::potrf`], for both arrays; `ipiv` as [`Scalapack::getrf`] left it.
    unsafe fn getrs(
        n: i32,
        nrhs: i32,
        lu: (&Mat<Self>, &[i32; 9]),
        ipiv: &[i32],
        b: Local<'_, Self>,
    ) -> i32;

    /// `p?geqrf` on the whole `m x n` local array `a`, its scalar factors into `tau` (at least the
    /// local columns), with the workspace `work` of `lwork` entries (`lwork` = -1: the size
    /// ScaLAPACK wants is written to `work[0]`, nothing else); ScaLAPACK's `info`.
    ///
    /// # Safety
    /// As [`Scalapack::potrf`]; `work` holds at least `max(lwork, 1)` entries.
    unsafe fn geqrf(
        shape: (i32, i32),
        a: Local<'_, Self>,
        tau: &mut [Self],
        work: (&mut [Self], i32),
    ) -> i32;

    /// `p?gels('N')`: the least-squares solutions of the `m x n` `a` (m >= n, full rank) for the
    /// `nrhs` right-hand sides `b`, into `b`'s first n rows, with the workspace `work` of `lwork`
    /// entries (-1: a query, as [`Scalapack::geqrf`]); `a` is overwritten by its QR factors.
    /// ScaLAPACK's `info`.
    ///
    /// # Safety
    /// As [`Scalapack::geqrf`], for both arrays.
    unsafe fn gels(
        shape: (i32, i32, i32),
        a: Local<'_, Self>,
        b: Local<'_, Self>,
        work: (&mut [Self], i32),
    ) -> i32;
}

macro_rules! scalapack {
    (
        $t:ty,
        $letter:literal,
        $potrf:ident,
        $potrs:ident,
        $getrf:ident,
        $getrs:ident,
        $geqrf:ident,
        $gels:ident
    ) => {
        impl Scalapack for $t {
            const LETTER: char = $letter;

            unsafe fn geqrf(
                (m, n): (i32, i32),
                (a, desc): Local<'_, Self>,
                tau: &mut [Self],
                (work, lwork): (&mut [Self], i32),
            ) -> i32 {
                let (one, mut info) = (1i32, 0i32);
                // SAFETY: the caller's contract; tau and work have the room p?geqrf writes.
                unsafe {
                    $geqrf(
                        &m,
                        &n,
                        a.as_ptr_mut(),
                        &one,
                        &one,
                        desc.as_ptr(),
                        tau.as_mut_ptr(),
                        work.as_mut_ptr(),
                        &lwork,
                        &mut info,
                    )
                };
                info
            }

            unsafe fn gels(
                (m, n, nrhs): (i32, i32, i32),
                (a, a_desc): Local<'_, Self>,
                (b, b_desc): Local<'_, Self>,
                (work, lwork): (&mut [Self], i32),
            ) -> i32 {
                let (one, trans, mut info) = (1i32, b'N' as c_char, 0i32);
                // SAFETY: the caller's contract; work has the room p?gels writes.
                unsafe {
                    $gels(
                        &trans,
                        &m,
                        &n,
                        &nrhs,
                        a.as_ptr_mut(),
                        &one,
                        &one,
                        a_desc.as_ptr(),
                        b.as_ptr_mut(),
                        &one,
                        &one,
                        b_desc.as_ptr(),
                        work.as_mut_ptr(),
                        &lwork,
                        &mut info,
                    )
                };
                info
            }

            unsafe fn getrf(m: i32, n: i32, (a, desc): Local<'_, Self>, ipiv: &mut [i32]) -> i32 {
                let (one, mut info) = (1i32, 0i32);
                // SAFETY: the caller's contract; ipiv has the room p?getrf writes.
                unsafe {
                    $getrf(
                        &m,
                        &n,
                        a.as_ptr_mut(),
                        &one,
                        &one,
                        desc.as_ptr(),
                        ipiv.as_mut_ptr(),
                        &mut info,
                    )
                };
                info
            }

            unsafe fn getrs(
                n: i32,
                nrhs: i32,
                (lu, lu_desc): (&Mat<Self>, &[i32; 9]),
                ipiv: &[i32],
                (b, b_desc): Local<'_, Self>,
            ) -> i32 {
                let (one, trans, mut info) = (1i32, b'N' as c_char, 0i32);
                // SAFETY: the caller's contract; the scalars are read, info written.
                unsafe {
                    $getrs(
                        &trans,
                        &n,
                        &nrhs,
                        lu.as_ptr(),
                        &one,
                        &one,
                        lu_desc.as_ptr(),
                        ipiv.as_ptr(),
                        b.as_ptr_mut(),
                        &one,
                        &one,
                        b_desc.as_ptr(),
                        &mut info,
                    )
                };
                info
            }

            unsafe fn potrf(n: i32, (a, desc): Local<'_, Self>) -> i32 {
                let (one, uplo, mut info) = (1i32, b'L' as c_char, 0i32);
                // SAFETY: the caller's contract; the scalars are read, info written.
                unsafe {
                    $potrf(
                        &uplo,
                        &n,
                        a.as_ptr_mut(),
                        &one,
                        &one,
                        desc.as_ptr(),
                        &mut info,
                    )
                };
                info
            }

            unsafe fn potrs(
                n: i32,
                nrhs: i32,
                (l, l_desc): (&Mat<Self>, &[i32; 9]),
                (b, b_desc): Local<'_, Self>,
            ) -> i32 {
                let (one, uplo, mut info) = (1i32, b'L' as c_char, 0i32);
                // SAFETY: the caller's contract; the scalars are read, info written.
                unsafe {
                    $potrs(
                        &uplo,
                        &n,
                        &nrhs,
                        l.as_ptr(),
                        &one,
                        &one,
                        l_desc.as_ptr(),
                        b.as_ptr_mut(),
                        &one,
                        &one,
                        b_desc.as_ptr(),
                        &mut info,
                    )
                };
                info
            }
        }
    };
}

scalapack!(
    f32, 's', pspotrf_, pspotrs_, psgetrf_, psgetrs_, psgeqrf_, psgels_
);
scalapack!(
    f64, 'd', pdpotrf_, pdpotrs_, pdgetrf_, pdgetrs_, pdgeqrf_, pdgels_
);
scalapack!(
    c32, 'c', pcpotrf_, pcpotrs_, pcgetrf_, pcgetrs_, pcgeqrf_, pcgels_
);
scalapack!(
    c64, 'z', pzpotrf_, pzpotrs_, pzgetrf_, pzgetrs_, pzgeqrf_, pzgels_
);

/// What [`potrf`] or [`getrf`] measured: the seconds of each run (the slowest rank's), and the
/// factor of the last run, in tiles (with p?getrf's interchanges, as ScaLAPACK holds them, for
/// [`getrs`]).
#[derive(Debug, Clone)]
pub struct PeerRuns<T: Scalapack = f64> {
    /// Seconds of each run, in order.
    pub seconds: Vec<f64>,
    /// The factor as `a` is distributed: p?potrf's L (the tiles on and below the diagonal), or
    /// p?getrf's L (unit, below the diagonal) and U in every tile.
    pub factor: DistributedMatrix<T>,
    /// After p?getrf, this rank's `ipiv`: the global row (1-based) each of its local rows was
    /// interchanged with; empty after p?potrf.
    pivots: Vec<i32>,
}

/// Factors `a` with ScaLAPACK's `p?potrf` of its precision `runs` times (each from `a`), on the
/// ranks of `MPI_COMM_WORLD` (BLACS's default context: `comm` must span the whole job). Collective.
pub fn potrf<T: Scalapack, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    runs: usize,
) -> Result<PeerRuns<T>> {
    let n = to_i32(a.tiling().rows(), "n")?;
    let (seconds, local, at) = factor_runs(comm, a, runs, |local| {
        // SAFETY: `local` is the column-major local array its descriptor describes (its
        // leading dimension `lld` is its column stride).
        unsafe { T::potrf(n, local) }
    })
    .map_err(|failed| match failed {
        Failed::Pivot(column) => Error::NotPositiveDefinite { column },
        Failed::Other(e) => e,
    })?;
    let tiling = a.tiling();
    let factor = a
        .tiles()
        .iter()
        .map(|(&(i, j), t)| {
            let (r, c) = at.of(i, j);
            let mut f = local
                .as_ref()
                .submatrix(r, c, t.nrows(), t.ncols())
                .to_owned();
            if i == j {
                // p?potrf leaves the strict upper part of diagonal blocks as it was.
                for col in 0..f.ncols() {
                    for row in 0..col.min(f.nrows()) {
                        f[(row, col)] = T::from_f64(0.0);
                    }
                }
            }
            ((i, j), f)
        })
        .collect();
    Ok(PeerRuns {
        seconds,
        pivots: Vec::new(),
        factor: DistributedMatrix {
            tiling: *tiling,
            grid: a.grid(),
            rank: a.rank(),
            lower: true,
            tiles: factor,
        },
    })
}

/// Why [`factor_runs`] failed: ScaLAPACK's info > 0 (a pivot at this global column, 0-based: the
/// caller says what kind), or anything else.
enum Failed {
    Pivot(usize),
    Other(Error),
}

/// Runs the ScaLAPACK factorisation `call` (on the local array and its descriptor; it returns
/// ScaLAPACK's info) `runs` times, each on a fresh copy of `a`'s tiles between two barriers, and
/// returns the seconds (the slowest rank's), the last run's local array and where tiles lie in it.
/// ScaLAPACK's info is global, so every rank fails alike. Collective.
fn factor_runs<T: Scalapack, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    runs: usize,
    mut call: impl FnMut(Local<'_, T>) -> i32,
) -> std::result::Result<(Vec<f64>, Mat<T>, LocalAt), Failed> {
    let blacs = Blacs::new(a).map_err(Failed::Other)?;
    let (mut local, desc, mut info) = blacs.local_array(a).map_err(Failed::Other)?;
    let mut seconds = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        blacs.copy_in(&mut local, a);
        comm.barrier();
        let start = mpi::time();
        if info == 0 {
            info = call((&mut local, &desc));
        }
        seconds.push(slowest_since(comm, start));
    }
    let at = blacs.at;
    drop(blacs);
    match info {
        0 => Ok((seconds, local, at)),
        i if i > 0 => Err(Failed::Pivot(i as usize - 1)),
        i => Err(Failed::Other(Error::Distributed {
            rank: a.rank().0,
            reason: format!("ScaLAPACK refused argument {} (info {i})", -i),
        })),
    }
}

/// What [`potrs`] measured: the seconds of each run (the slowest rank's), and the solution of the
/// last run.
#[derive(Debug, Clone)]
pub struct PeerSolves<T: Scalapack = f64> {
    /// Seconds of each run, in order.
    pub seconds: Vec<f64>,
    /// The solution X, as `b` is distributed.
    pub x: DistributedRhs<T>,
}

/// Solves A X = B with ScaLAPACK's `p?potrs` of the precision and the factor `l` (its lower
/// triangle, as [`potrf`] or [`crate::Cholesky::factor_distributed`] leaves it) `runs` times, each
/// from `b`, on the ranks of `MPI_COMM_WORLD`. Collective.
pub fn potrs<T: Scalapack, C: Communicator>(
    comm: &C,
    l: &DistributedMatrix<T>,
    b: &DistributedRhs<T>,
    runs: usize,
) -> Result<PeerSolves<T>> {
    solve_runs(
        comm,
        (l, false),
        b,
        (runs, "potrs"),
        |n, nrhs, (l, d), b| {
            // SAFETY: the local arrays are those their descriptors describe (`solve_runs`).
            unsafe { T::potrs(n, nrhs, (l, d), b) }
        },
    )
}

/// Runs the ScaLAPACK solve `call` (n, nrhs, the factors' local array, B's) `runs` times, each from
/// `b`, with the factors `a` (`what` names the routine in errors; each run from a fresh copy of `a`
/// when the call `overwritten` it), and returns the seconds (the slowest rank's) and the last
/// solution, as B is distributed. Collective.
fn solve_runs<T: Scalapack, C: Communicator>(
    comm: &C,
    (a, overwritten): (&DistributedMatrix<T>, bool),
    b: &DistributedRhs<T>,
    (runs, what): (usize, &'static str),
    mut call: impl FnMut(i32, i32, Local<'_, T>, Local<'_, T>) -> i32,
) -> Result<PeerSolves<T>> {
    let (at_, bt) = (a.tiling(), b.tiling());
    if b.0.grid != a.grid() || (bt.rows(), bt.tile()) != (at_.rows(), at_.tile()) {
        return Err(Error::InvalidOption {
            option: what,
            reason: "the right-hand sides are not on the factor's grid with its rows and tile"
                .into(),
        });
    }
    let blacs = Blacs::new(a)?;
    let (mut a_local, a_desc, mut info) = blacs.local_array(a)?;
    let (mut b_local, b_desc, b_info) = blacs.local_array(&b.0)?;
    info = info.min(b_info);
    let (n, nrhs) = (to_i32(bt.rows(), "n")?, to_i32(bt.cols(), "nrhs")?);
    let at = blacs.at;
    blacs.copy_in(&mut a_local, a);
    let mut seconds = Vec::with_capacity(runs);
    for run in 0..runs.max(1) {
        if overwritten && run > 0 {
            blacs.copy_in(&mut a_local, a);
        }
        blacs.copy_in(&mut b_local, &b.0);
        comm.barrier();
        let start = mpi::time();
        if info == 0 {
            info = call(n, nrhs, (&mut a_local, &a_desc), (&mut b_local, &b_desc));
        }
        seconds.push(slowest_since(comm, start));
    }
    drop(blacs);
    if info != 0 {
        return Err(Error::Distributed {
            rank: a.rank().0,
            reason: format!("ScaLAPACK refused argument {} (info {info})", -info),
        });
    }
    let mut x = b.clone();
    for (&(i, j), t) in x.0.tiles.iter_mut() {
        let (r, c) = at.of(i, j);
        t.copy_from(b_local.as_ref().submatrix(r, c, t.nrows(), t.ncols()));
    }
    Ok(PeerSolves { seconds, x })
}

/// Factors the general square `a` (every tile held: [`DistributedMatrix::random`]) with ScaLAPACK's
/// `p?getrf` of its precision `runs` times (each from `a`), on the ranks of `MPI_COMM_WORLD`
/// (BLACS's default context: `comm` must span the whole job). A zero pivot is [`Error::Singular`]
/// with its global column on every rank. Collective.
pub fn getrf<T: Scalapack, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    runs: usize,
) -> Result<PeerRuns<T>> {
    let tiling = a.tiling();
    if a.lower || tiling.rows() != tiling.cols() {
        return Err(Error::InvalidOption {
            option: "getrf",
            reason: format!(
                "p?getrf here factors a square matrix with every tile held; this one is {}x{}{}",
                tiling.rows(),
                tiling.cols(),
                if a.lower {
                    ", its lower triangle only (DistributedMatrix::random makes a general one)"
                } else {
                    ""
                }
            ),
        });
    }
    let n = to_i32(tiling.rows(), "n")?;
    let mut pivots = Vec::new();
    let (seconds, local, at) = factor_runs(comm, a, runs, |(local, desc)| {
        pivots.resize(local.nrows() + tiling.tile(), 0);
        // SAFETY: `local` is the column-major local array `desc` describes; `pivots` has
        // its local rows plus a block.
        unsafe { T::getrf(n, n, (local, desc), &mut pivots) }
    })
    .map_err(|failed| match failed {
        Failed::Pivot(column) => Error::Singular { column },
        Failed::Other(e) => e,
    })?;
    let mut factors = a.clone();
    for (&(i, j), t) in factors.tiles.iter_mut() {
        let (r, c) = at.of(i, j);
        t.copy_from(local.as_ref().submatrix(r, c, t.nrows(), t.ncols()));
    }
    Ok(PeerRuns {
        seconds,
        factor: factors,
        pivots,
    })
}

/// Solves A X = B with ScaLAPACK's `p?getrs('N')` of the precision and the factor [`getrf`] left,
/// `runs` times, each from `b`, on the ranks of `MPI_COMM_WORLD`. Collective.
pub fn getrs<T: Scalapack, C: Communicator>(
    comm: &C,
    lu: &PeerRuns<T>,
    b: &DistributedRhs<T>,
    runs: usize,
) -> Result<PeerSolves<T>> {
    if lu.pivots.is_empty() && lu.factor.tiling().rows() > 0 {
        return Err(Error::InvalidOption {
            option: "getrs",
            reason:
                "p?getrs solves with p?getrf's factor and interchanges, not p?potrf's or p?geqrf's"
                    .into(),
        });
    }
    let factor = (&lu.factor, false);
    solve_runs(comm, factor, b, (runs, "getrs"), |n, nrhs, (a, d), b| {
        // SAFETY: the local arrays are those their descriptors describe (`solve_runs`), the
        // pivots p?getrf's on this grid.
        unsafe { T::getrs(n, nrhs, (a, d), &lu.pivots, b) }
    })
}

/// Refuses a matrix p?geqrf and p?gels do not take here: a lower-only one, or a wide one.
fn check_tall<T: Scalapack>(a: &DistributedMatrix<T>, what: &'static str) -> Result<()> {
    let (m, n) = (a.tiling().rows(), a.tiling().cols());
    if a.lower || m < n {
        return Err(Error::InvalidOption {
            option: what,
            reason: format!(
                "p?{what} here takes an m x n matrix with m >= n and every tile held; this one is {m}x{n}{}",
                if a.lower {
                    ", its lower triangle only (DistributedMatrix::random makes a general one)"
                } else {
                    ""
                }
            ),
        });
    }
    Ok(())
}

/// The workspace ScaLAPACK asks for (its query with `lwork` = -1, `query`, writes the size to its
/// one entry), or the query's info.
fn workspace<T: Scalapack>(
    query: impl FnOnce(&mut [T]) -> i32,
) -> std::result::Result<Vec<T>, i32> {
    let mut size = [T::from_f64(0.0)];
    match query(&mut size) {
        0 => Ok(vec![
            T::from_f64(0.0);
            (size[0].to_c64().re.ceil() as usize).max(1)
        ]),
        info => Err(info),
    }
}

/// Factors the tall `m x n` `a` (m >= n, every tile held: [`DistributedMatrix::random`]) as Q R
/// with ScaLAPACK's `p?geqrf` of its precision `runs` times (each from `a`), on the ranks of
/// `MPI_COMM_WORLD`. The factor is p?geqrf's array: R on and above the diagonal, the Householder
/// vectors below (their scalar factors stay with the run). The workspace query and its allocation
/// ride on the first run. Collective.
pub fn geqrf<T: Scalapack, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    runs: usize,
) -> Result<PeerRuns<T>> {
    check_tall(a, "geqrf")?;
    let tiling = a.tiling();
    let (m, n) = (to_i32(tiling.rows(), "m")?, to_i32(tiling.cols(), "n")?);
    let (mut tau, mut work) = (Vec::new(), Vec::new());
    let (seconds, local, at) = factor_runs(comm, a, runs, |(local, desc)| {
        if work.is_empty() {
            tau = vec![T::from_f64(0.0); local.ncols().max(1)];
            // SAFETY: as below; a query writes only its one entry.
            let query =
                |size: &mut [T]| unsafe { T::geqrf((m, n), (local, desc), &mut tau, (size, -1)) };
            match workspace(query) {
                Ok(w) => work = w,
                Err(info) => return info,
            }
        }
        let lwork = i32::try_from(work.len()).unwrap_or(i32::MAX);
        // SAFETY: `local` is the column-major local array `desc` describes; `tau` has its
        // local columns and `work` the room p?geqrf asked for.
        unsafe { T::geqrf((m, n), (local, desc), &mut tau, (&mut work, lwork)) }
    })
    .map_err(|failed| match failed {
        Failed::Pivot(_) => unreachable_info("geqrf", a),
        Failed::Other(e) => e,
    })?;
    let mut factor = a.clone();
    for (&(i, j), t) in factor.tiles.iter_mut() {
        let (r, c) = at.of(i, j);
        t.copy_from(local.as_ref().submatrix(r, c, t.nrows(), t.ncols()));
    }
    Ok(PeerRuns {
        seconds,
        factor,
        pivots: Vec::new(),
    })
}

/// The error of a positive info from a routine that never returns one.
fn unreachable_info<T: Scalapack>(what: &str, a: &DistributedMatrix<T>) -> Error {
    Error::Distributed {
        rank: a.rank().0,
        reason: format!("p?{what} returned a positive info, which it documents never to do"),
    }
}

/// The least-squares solutions X (n x nrhs) of the tall, full-rank `m x n` `a` for the right-hand
/// sides `b` (m x nrhs, on `a`'s grid with its tile), by ScaLAPACK's `p?gels('N')` of the
/// precision, `runs` times (each from `a` and `b`), on the ranks of `MPI_COMM_WORLD`. X is
/// distributed as B's first n rows. The workspace query and its allocation ride on the first run.
/// Collective.
pub fn gels<T: Scalapack, C: Communicator>(
    comm: &C,
    a: &DistributedMatrix<T>,
    b: &DistributedRhs<T>,
    runs: usize,
) -> Result<PeerSolves<T>> {
    check_tall(a, "gels")?;
    let (m, n) = (
        to_i32(a.tiling().rows(), "m")?,
        to_i32(a.tiling().cols(), "n")?,
    );
    let mut work = Vec::new();
    let solved = solve_runs(
        comm,
        (a, true),
        b,
        (runs, "gels"),
        |_, nrhs, (a, da), (b, db)| {
            if work.is_empty() {
                // SAFETY: as below; a query writes only its one entry.
                let query =
                    |size: &mut [T]| unsafe { T::gels((m, n, nrhs), (a, da), (b, db), (size, -1)) };
                match workspace(query) {
                    Ok(w) => work = w,
                    Err(info) => return info,
                }
            }
            let lwork = i32::try_from(work.len()).unwrap_or(i32::MAX);
            // SAFETY: the local arrays are those their descriptors describe (`solve_runs`), `work`
            // has the room p?gels asked for.
            unsafe { T::gels((m, n, nrhs), (a, da), (b, db), (&mut work, lwork)) }
        },
    )?;
    // X is B's first n rows.
    Ok(PeerSolves {
        x: DistributedRhs(solved.x.0.top_rows(n as usize)?),
        seconds: solved.seconds,
    })
}

/// Seconds since `start` (`mpi::time`) on the slowest rank. Collective.
fn slowest_since<C: Communicator>(comm: &C, start: f64) -> f64 {
    let mine = mpi::time() - start;
    let mut slowest = 0.0;
    comm.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
    slowest
}

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::InvalidOption {
        option: "scalapack",
        reason: format!("{what} {v} does not fit ScaLAPACK's 32-bit integers"),
    })
}

/// A BLACS grid for a distributed matrix's grid (freed on drop), and where its tiles go in the
/// local arrays.
struct Blacs {
    ctx: i32,
    p: i32,
    q: i32,
    myrow: i32,
    mycol: i32,
    /// Where tiles start in a local array.
    at: LocalAt,
}

/// Where tile (i, j) starts in a local array: at local row (i / P) * b and local column (j / Q) *
/// b, for tiles of side b on P x Q processes.
#[derive(Clone, Copy)]
struct LocalAt {
    tile: usize,
    p: usize,
    q: usize,
}

impl LocalAt {
    fn of(self, i: usize, j: usize) -> (usize, usize) {
        ((i / self.p) * self.tile, (j / self.q) * self.tile)
    }
}

impl Blacs {
    fn new<T: Scalapack>(a: &DistributedMatrix<T>) -> Result<Self> {
        let grid = a.grid();
        let (p, q) = (to_i32(grid.rows(), "P")?, to_i32(grid.cols(), "Q")?);
        let (myrow, mycol) = grid.coords(a.rank());
        let mut ctx = 0i32;
        // SAFETY: BLACS's C interface with valid pointers; the default context (-1, 0) is
        // MPI_COMM_WORLD, which MPI has initialised (a distributed matrix proves it).
        unsafe {
            Cblacs_get(-1, 0, &mut ctx);
            Cblacs_gridinit(&mut ctx, c"Row".as_ptr(), p, q);
        }
        Ok(Self {
            ctx,
            p,
            q,
            myrow: myrow as i32,
            mycol: mycol as i32,
            at: LocalAt {
                tile: a.tiling().tile(),
                p: grid.rows(),
                q: grid.cols(),
            },
        })
    }

    /// A zero local array for `m` (every rank's share of its rows and columns), its descriptor, and
    /// descinit's info (0, or negative for an argument it would refuse).
    fn local_array<T: Scalapack>(
        &self,
        m: &DistributedMatrix<T>,
    ) -> Result<(Mat<T>, [i32; 9], i32)> {
        let tiling = m.tiling();
        let (rows, cols, nb) = (
            to_i32(tiling.rows(), "the rows")?,
            to_i32(tiling.cols(), "the columns")?,
            to_i32(tiling.tile(), "the tile size")?,
        );
        let zero = 0i32;
        // SAFETY: numroc_ reads its five integers.
        let (local_rows, local_cols) = unsafe {
            (
                numroc_(&rows, &nb, &self.myrow, &zero, &self.p),
                numroc_(&cols, &nb, &self.mycol, &zero, &self.q),
            )
        };
        let local = Mat::<T>::zeros(local_rows as usize, local_cols as usize);
        // faer pads columns: the leading dimension is the column stride.
        let lld = to_i32(
            local.col_stride().unsigned_abs(),
            "the local leading dimension",
        )?
        .max(1);
        // The descriptor descinit_ would make (DTYPE 1, a dense matrix: context, rows,
        // columns, row and column block, source row and column, local leading dimension);
        // its checks hold by construction: sizes >= 0, blocks >= 1, sources (0, 0) on the
        // grid, lld >= max(1, local rows).
        let desc = [1, self.ctx, rows, cols, nb, nb, 0, 0, lld];
        let info = if rows < 0 || cols < 0 || nb < 1 || lld < local_rows.max(1) {
            -1
        } else {
            0
        };
        Ok((local, desc, info))
    }

    /// Copies `m`'s tiles into its local array.
    fn copy_in<T: Scalapack>(&self, local: &mut Mat<T>, m: &DistributedMatrix<T>) {
        for (&(i, j), t) in m.tiles() {
            let (r, c) = self.at.of(i, j);
            local
                .as_mut()
                .submatrix_mut(r, c, t.nrows(), t.ncols())
                .copy_from(t);
        }
    }
}

impl Drop for Blacs {
    fn drop(&mut self) {
        // SAFETY: the context was made in `new` and is used no more.
        unsafe { Cblacs_gridexit(self.ctx) };
    }
}
