//! What a mixed solve on a GPU starts from ([`Prepared`]): A in the working precision and A rounded
//! to single precision, both in the GPU's memory, with ||A||_inf and the first entry that
//! overflowed the single precision. Made on the GPU from A there (copied within it) by hetla's
//! elementwise kernels, for a Hermitian matrix (made whole from its lower triangle first) or a
//! general one; the families make it from a host matrix their own way (`cholesky/device.rs`,
//! `lu/device.rs`).

use std::sync::Arc;

use faer::{Mat, MatRef};
use hetla_kernels::elementwise::Watched;
use hetla_runtime::Device;

use super::{Refinable, Refinement, gpu_holding, refinement_bytes};
use crate::tiles::device::{DeviceBuffer, DeviceMatrix};
use crate::{Error, Result};

/// What the matrix of a mixed solve is, as its preparation reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Structure {
    /// Hermitian (SPD), its lower triangle given: made whole first, its norm its largest column
    /// sum, an overflow sought where its factorisation reads (on and below the diagonal).
    Hermitian,
    /// General: its norm its largest row sum, an overflow sought anywhere.
    General,
}

/// A mixed solve's matrices in a GPU's memory: A whole in the working precision, A rounded to
/// single precision, ||A||_inf and the first entry (column by column, where its [`Structure`]
/// looks) that overflowed the single precision (row, column, modulus).
pub(crate) struct Prepared<T: Refinable> {
    pub whole: DeviceBuffer<T>,
    pub low: DeviceBuffer<T::Low>,
    pub norm: f64,
    pub overflow: Option<(usize, usize, f64)>,
}

impl<T: Refinable> Prepared<T> {
    /// From A in the GPU's memory (copied within it; the GPU runs the elementwise kernels).
    pub fn from_device(
        device: &Arc<dyn Device>,
        a: &DeviceMatrix<'_, T>,
        structure: Structure,
    ) -> Result<Self> {
        let n = a.nrows();
        let mut whole = DeviceBuffer::new(device, n, n)?;
        whole.copy_from(a)?;
        Self::on_device(whole, structure)
    }

    /// Made whole (a Hermitian A), summed and rounded on the GPU from `whole`, which holds A as
    /// given.
    pub fn on_device(mut whole: DeviceBuffer<T>, structure: Structure) -> Result<Self> {
        let n = whole.matrix().nrows();
        let (sums, watched) = match structure {
            Structure::Hermitian => {
                whole.mirror_lower()?;
                // A is Hermitian: its largest column sum is its largest row sum.
                (whole.column_norms()?, Watched::LowerTriangle)
            }
            Structure::General => (whole.row_norms()?, Watched::Whole),
        };
        let norm = sums.into_iter().fold(0.0, f64::max);
        let mut low = DeviceBuffer::new(whole.device(), n, n)?;
        let overflow = match whole.lower_into(&mut low, 1.0, watched)? {
            Some((i, j)) => Some((i, j, whole.read_block(i, j, 1, 1)?[(0, 0)].abs_f64())),
            None => None,
        };
        Ok(Self {
            whole,
            low,
            norm,
            overflow,
        })
    }
}

/// An error (of the builder's option `option`) unless GPU `gpu` of `platform` has a budget that
/// holds a mixed solve of order `n` with `rhs` right-hand sides ([`gpu_holding`] with `copies`).
pub(crate) fn check_budget<T: Refinable>(
    platform: &hetla_runtime::Platform,
    (gpu, option): (usize, &'static str),
    (n, rhs): (usize, usize),
    copies: usize,
) -> Result<()> {
    if gpu_holding::<T>(platform, gpu, (n, rhs), copies) == Some(gpu) {
        return Ok(());
    }
    let budget = platform.devices().get(gpu).map_or(0, |d| d.device.budget());
    Err(Error::InvalidOption {
        option,
        reason: format!(
            "GPU {gpu}'s budget of {budget} bytes does not hold A in {}, its single factor and a \
             run's copies of either ({} bytes)",
            T::PRECISION,
            refinement_bytes::<T>((n, rhs), copies)
                .map_or_else(|| "more than usize".into(), |bytes| bytes.to_string())
        ),
    })
}

/// A mixed solve of B in `device`'s memory: `solve` gets B's copy in host memory and gives X and
/// what it did; X is written over B.
pub(crate) fn over_b<T: Refinable>(
    device: &Arc<dyn Device>,
    b: &mut DeviceMatrix<'_, T>,
    solve: impl FnOnce(MatRef<'_, T>) -> Result<(Mat<T>, Refinement)>,
) -> Result<Refinement> {
    b.check_on(device.as_ref(), "B")?;
    let mut rhs = Mat::<T>::zeros(b.nrows(), b.ncols());
    // SAFETY: `b` is memory of `device` (checked above) borrowed mutably.
    unsafe { device.read_span(b.span(), T::any_mut(rhs.as_mut())) }?;
    let (x, how) = solve(rhs.as_ref())?;
    // SAFETY: as above.
    unsafe { device.write_span(b.span(), T::any_ref(x.as_ref())) }?;
    Ok(how)
}
