//! ScaLAPACK's `pdpotrf` on a [`DistributedMatrix`]: the peer a distributed factorisation
//! is measured against (feature `scalapack`; apt `libscalapack-openmpi-dev`).
//!
//! The tiles already sit where ScaLAPACK wants them: with block size = tile size, source
//! process (0, 0) and a BLACS grid in row-major order, global tile (I, J) is on process
//! (I mod P, J mod Q), at local block (I / P, J / Q) of its column-major local array. The
//! tiles are copied into that array (not timed), `pdpotrf('L')` runs between two barriers,
//! and the factor's tiles are copied back.

use std::ffi::c_char;

use faer::Mat;
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::DistributedMatrix;
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
    #[allow(clippy::too_many_arguments)]
    fn descinit_(
        desc: *mut i32,
        m: *const i32,
        n: *const i32,
        mb: *const i32,
        nb: *const i32,
        irsrc: *const i32,
        icsrc: *const i32,
        ictxt: *const i32,
        lld: *const i32,
        info: *mut i32,
    );
    fn pdpotrf_(
        uplo: *const c_char,
        n: *const i32,
        a: *mut f64,
        ia: *const i32,
        ja: *const i32,
        desca: *const i32,
        info: *mut i32,
    );
}

/// What [`pdpotrf`] measured: the seconds of each run (the slowest rank's), and the factor
/// of the last run, in tiles.
#[derive(Debug, Clone)]
pub struct PeerRuns {
    /// Seconds of each run, in order.
    pub seconds: Vec<f64>,
    /// The factor L (the tiles on and below the diagonal), as `a` is distributed.
    pub factor: DistributedMatrix,
}

/// Factors `a` with ScaLAPACK's `pdpotrf` `runs` times (each from `a`), on the ranks of
/// `MPI_COMM_WORLD` (BLACS's default context: `comm` must span the whole job). Collective.
pub fn pdpotrf<C: Communicator>(comm: &C, a: &DistributedMatrix, runs: usize) -> Result<PeerRuns> {
    let to_i32 = |v: usize, what: &str| {
        i32::try_from(v).map_err(|_| Error::InvalidOption {
            option: "pdpotrf",
            reason: format!("{what} {v} does not fit ScaLAPACK's 32-bit integers"),
        })
    };
    let tiling = a.tiling();
    let grid = a.grid();
    let (n, nb) = (
        to_i32(tiling.rows(), "n")?,
        to_i32(tiling.tile(), "the tile size")?,
    );
    let (p, q) = (to_i32(grid.rows(), "P")?, to_i32(grid.cols(), "Q")?);
    let (myrow, mycol) = grid.coords(a.rank());
    let (myrow, mycol) = (myrow as i32, mycol as i32);
    let zero = 0i32;
    let mut ctx = 0i32;
    // SAFETY: BLACS's C interface with valid pointers; the default context (-1, 0) is
    // MPI_COMM_WORLD, which MPI has initialised (the communicator proves it).
    unsafe {
        Cblacs_get(-1, 0, &mut ctx);
        Cblacs_gridinit(&mut ctx, c"Row".as_ptr(), p, q);
    }
    // SAFETY: numroc_ reads its five integers.
    let (local_rows, local_cols) = unsafe {
        (
            numroc_(&n, &nb, &myrow, &zero, &p),
            numroc_(&n, &nb, &mycol, &zero, &q),
        )
    };
    let mut local = Mat::<f64>::zeros(local_rows as usize, local_cols as usize);
    // faer pads columns: the leading dimension is the column stride.
    let lld = to_i32(
        local.col_stride().unsigned_abs(),
        "the local leading dimension",
    )?
    .max(1);
    let mut desc = [0i32; 9];
    let mut info = 0i32;
    // SAFETY: desc has the 9 entries ScaLAPACK descriptors have; the rest are read.
    unsafe {
        descinit_(
            desc.as_mut_ptr(),
            &n,
            &n,
            &nb,
            &nb,
            &zero,
            &zero,
            &ctx,
            &lld,
            &mut info,
        )
    };
    let (b, pr, qc) = (tiling.tile(), grid.rows(), grid.cols());
    // Tile (i, j) starts at local row (i / P) * b and local column (j / Q) * b.
    let at = |i: usize, j: usize| ((i / pr) * b, (j / qc) * b);
    let mut seconds = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        for (&(i, j), t) in a.tiles() {
            let (r, c) = at(i, j);
            local
                .as_mut()
                .submatrix_mut(r, c, t.nrows(), t.ncols())
                .copy_from(t);
        }
        comm.barrier();
        let start = mpi::time();
        if info == 0 {
            let (one, uplo) = (1i32, b'L' as c_char);
            // SAFETY: `local` is the column-major local array `desc` describes (its
            // leading dimension `lld` is its column stride).
            unsafe {
                pdpotrf_(
                    &uplo,
                    &n,
                    local.as_ptr_mut(),
                    &one,
                    &one,
                    desc.as_ptr(),
                    &mut info,
                )
            };
        }
        let mine = mpi::time() - start;
        let mut slowest = 0.0;
        comm.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
        seconds.push(slowest);
    }
    // SAFETY: the context was made above and is used no more.
    unsafe { Cblacs_gridexit(ctx) };
    // pdpotrf's info is global: every rank has the same.
    if info != 0 {
        return Err(if info > 0 {
            Error::NotPositiveDefinite {
                column: info as usize - 1,
            }
        } else {
            Error::Distributed {
                rank: a.rank().0,
                reason: format!("ScaLAPACK refused argument {} (info {info})", -info),
            }
        });
    }
    let factor = a
        .tiles()
        .iter()
        .map(|(&(i, j), t)| {
            let (r, c) = at(i, j);
            let mut f = local
                .as_ref()
                .submatrix(r, c, t.nrows(), t.ncols())
                .to_owned();
            if i == j {
                // pdpotrf leaves the strict upper part of diagonal blocks as it was.
                for col in 0..f.ncols() {
                    for row in 0..col.min(f.nrows()) {
                        f[(row, col)] = 0.0;
                    }
                }
            }
            ((i, j), f)
        })
        .collect();
    Ok(PeerRuns {
        seconds,
        factor: DistributedMatrix {
            tiling: *tiling,
            grid,
            rank: a.rank(),
            lower: true,
            tiles: factor,
        },
    })
}
