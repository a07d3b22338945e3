//! The one public constructor of a plan, [`Plan::new`]: each family's folder builds its own
//! (`src/cholesky/plan.rs`...), above the plan itself in the module layers.

use hetla_factorizations::{MatMulTiling, Tail, Tiling};
use hetla_kernels::{MatMul, Op, Precision};

use super::build::{Algorithm, Plan, Schedule, product_plan, substitution_plan};
use crate::{Error, Result, cholesky, ldlt, lu, qr, trtri};

impl Plan {
    /// This Cholesky factorisation's plan with the tiles from `tail.from` on of side `tail.tile` (a
    /// smaller tile on the critical path of the factorisation's end, [`Tail`]), its panels inverted
    /// as they were; its tile choice is kept. Refused for another algorithm, or a tail that does
    /// not fit the tiling ([`Tiling::with_tail`]).
    pub fn with_tail(&self, tail: Tail) -> Result<Plan> {
        let Algorithm::Cholesky { n } = self.algorithm() else {
            return Err(Error::InvalidOption {
                option: "tail",
                reason: format!(
                    "a tail of smaller tiles applies to a Cholesky factorisation, not to {}",
                    self.algorithm().name()
                ),
            });
        };
        let min_solves = match self.ops().contains(&Op::PanelInverse) {
            true => cholesky::work::MIN_PANEL_SOLVES,
            false => usize::MAX,
        };
        let precision = self.precision();
        let mut plan = cholesky::plan::tailed(n, self.tile(), Some(tail), precision, min_solves)?;
        plan.choice = self.choice.clone();
        Ok(plan)
    }

    /// The plan of `algorithm` (with its dimensions) in tiles of `tile`, in `precision`: its graph,
    /// built by its family (`src/cholesky/plan.rs`...), its kernels, layouts and flops. Refuses,
    /// before building it, a graph that this machine cannot hold (see [`crate::limits`]) and a tile
    /// of 0.
    ///
    /// - [`Algorithm::Cholesky`]: the tiled factorisation (the last row and column of tiles ragged;
    ///   a tile larger than the matrix is the whole matrix), n^3/3 flops;
    /// - [`Algorithm::CholeskyInverse`]: a tiled TRTRI then a tiled LAUUM from a factor, 2 n^3/3;
    /// - [`Algorithm::CholeskySolve`]: forward then backward substitution, the right-hand sides
    ///   tiled alike;
    /// - [`Algorithm::TriangularInverse`]: a tiled TRTRI of a lower triangle, n^3/3;
    /// - [`Algorithm::Lu`] in block columns of `tile` columns; [`Algorithm::LuTiles`] on tiles
    ///   whose tile rows are spread over process rows; 2 n^3/3 flops;
    /// - [`Algorithm::Qr`] (and its Q^H B, [`Algorithm::QrApply`]) with its reduction tree
    ///   ([`QrTree::Auto`](crate::QrTree::Auto) resolved for two workers: binary only for a tall
    ///   matrix of one tile column; [`crate::Qr::plan`] resolves it for its platform's workers);
    ///   [`Algorithm::QrColumns`]: LAPACK's blocked QR in block columns of `tile`;
    /// - [`Algorithm::Ldlt`]: Aasen's factorisation in blocks of `tile`, reported against n^3/3;
    ///   [`Algorithm::LdltColumns`]: the same in block columns of `tile` (beside GPUs);
    /// - [`Algorithm::DistributedSubstitution`]: the factor and the right-hand sides in tiles of
    ///   `tile`;
    /// - [`Algorithm::Gemm`]: C <- A B (no transposes) in square tiles of `tile`.
    ///
    /// The factorisations' kernels but Cholesky's have no GPU version yet: their runs keep them on
    /// CPU clusters.
    pub fn new(algorithm: Algorithm, tile: usize, precision: Precision) -> Result<Self> {
        // Once for every family's builder, which may divide by it.
        if tile == 0 {
            return Err(Error::ZeroTileSize);
        }
        match algorithm {
            Algorithm::Cholesky { n } => cholesky::plan::factor(n, tile, precision),
            Algorithm::CholeskyInverse { n } => cholesky::plan::inverse(n, tile, precision),
            Algorithm::CholeskySolve { n, rhs } => cholesky::plan::solve(n, rhs, tile, precision),
            Algorithm::TriangularInverse { n } => trtri::plan::inverse(n, tile, precision),
            Algorithm::Lu { n } => lu::plan::factor(n, tile, precision),
            Algorithm::LuTiles { n, process_rows } => {
                lu::plan::tiles(n, tile, process_rows, precision)
            }
            Algorithm::Ldlt { n } => ldlt::plan::factor(n, tile, precision),
            Algorithm::LdltColumns { n } => ldlt::plan::columns(n, tile, precision),
            Algorithm::Qr { m, n, rhs, tree } => {
                qr::plan::tiled(m, n, rhs, tile, tree, precision, true)
            }
            Algorithm::QrApply { m, n, rhs, tree } => {
                qr::plan::tiled(m, n, rhs, tile, tree, precision, false)
            }
            Algorithm::QrColumns { m, n, rhs, inner } => {
                qr::plan::columns((m, n, rhs), (tile, inner), precision)
            }
            Algorithm::DistributedSubstitution {
                n,
                rhs,
                grid,
                substitution,
            } => {
                let (l, b) = (Tiling::square(n, tile)?, Tiling::new(n, rhs, tile)?);
                substitution_plan(l, b, grid, substitution, precision)
            }
            Algorithm::Gemm { m, n, k } => {
                let tiling = MatMulTiling::new(m, n, k, tile, MatMul::new(false, false, 1.0, 0.0))?;
                Ok(product_plan(&tiling, precision, Schedule::default()))
            }
        }
    }
}
