//! QR factorisations and least squares: tiled Householder QR on the runtime ([`Qr`], [`QrFactor`],
//! [`lstsq`]; module `householder`) and CholeskyQR2 for tall-skinny matrices ([`CholeskyQr`];
//! module `cholesky_qr`, which falls back to the former); stacks of small QR and least-squares
//! problems one per core (module `batch`).

mod batch;
mod cholesky_qr;
mod device;
#[cfg(feature = "mpi")]
pub(crate) mod distributed;
mod householder;
mod pivoted;
pub(crate) mod plan;
pub(crate) mod room;
pub(crate) mod work;

pub use cholesky_qr::{CholeskyQr, CholeskyQrFactor, CholeskyQrPath};
pub use hetla_factorizations::QrTree;
pub use householder::{Qr, QrFactor, lstsq};
pub use pivoted::{PivotedQr, RankedSolution, SvdSolution, lstsq_rank, lstsq_svd};
