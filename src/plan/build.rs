//! The plan itself: what it computes, its graph, kernels, layouts and flops, built once by one
//! constructor per factorisation (see the [module](super) documentation).

use std::sync::Arc;

use faer::MatRef;
use hetla_factorizations::{
    FACTOR, GridSplit, MATMUL_A, MATMUL_B, MATMUL_C, MatMulTiling, MatrixId, Mode, ProcessGrid,
    QrTree, RHS, SUMS, Substitution, Tail, TaskGraph, TileRef, Tiling, distributed_substitution,
    matmul, sum_shape,
};
use hetla_kernels::{Op, Par, Precision, Scalar};
use hetla_runtime::{KernelKey, MemoryNode, ResourceKind, RunOptions, SchedulerKind, StaticPlan};

use crate::{Error, Result};
use serde::Serialize;

/// What a plan computed, for [`Plan::residual`] to check against its input.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a, T> {
    /// One matrix: a Cholesky factor, an inverse.
    Matrix(MatRef<'a, T>),
    /// An LU factor (L unit lower below the diagonal, U on and above) with its 0-based interchanges
    /// (row i swapped with row `ipiv[i]`, in order; LAPACK's ipiv less one).
    Pivoted {
        /// L\U in one matrix.
        lu: MatRef<'a, T>,
        /// The interchanges.
        ipiv: &'a [usize],
    },
    /// A QR factorisation's thin Q (m x min(m, n)) and its R (min(m, n) x n).
    Orthogonal {
        /// The orthonormal columns.
        q: MatRef<'a, T>,
        /// The triangle.
        r: MatRef<'a, T>,
    },
}

impl<'a, T> From<MatRef<'a, T>> for Outcome<'a, T> {
    fn from(m: MatRef<'a, T>) -> Self {
        Outcome::Matrix(m)
    }
}

impl<T> Outcome<'_, T> {
    /// What the outcome is, for an error.
    fn describe(&self) -> &'static str {
        match self {
            Outcome::Matrix(_) => "one matrix",
            Outcome::Pivoted { .. } => "a factor with interchanges",
            Outcome::Orthogonal { .. } => "a Q and an R",
        }
    }
}

/// A Cholesky tile size chosen for an order on a platform, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TileChoice {
    /// The tile size.
    pub tile: usize,
    /// The candidate predicted fastest (`None` when there was no candidate to predict).
    pub fastest: Option<usize>,
    /// The relative gap between predictions the choice trusts: the tile is the largest candidate
    /// predicted within `1 + tolerance` of the fastest.
    pub tolerance: f64,
    /// Predicted makespan of each candidate considered (simulated, or the mixed bound on a platform
    /// with devices), in milliseconds.
    pub predictions: Vec<(usize, f64)>,
    /// Candidates that were measured for this choice (not yet in the models).
    pub calibrated: Vec<usize>,
    /// The tail of smaller tiles chosen after the tile ([`Plan::with_tail`]): on a platform with
    /// devices, the tile's run simulated with the last half or quarter of the matrix in tiles of
    /// half its side, taken where that is predicted faster than the tile alone by more than the
    /// tolerance; `None` when the tile alone is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<Tail>,
    /// Predicted makespan of each tail considered after the tile, in milliseconds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tail_predictions: Vec<(Tail, f64)>,
}

impl TileChoice {
    /// A tile that needed no prediction (a matrix of one tile).
    pub(crate) fn given(tile: usize) -> Self {
        Self {
            tile,
            fastest: None,
            tolerance: 0.0,
            predictions: Vec::new(),
            calibrated: Vec::new(),
            tail: None,
            tail_predictions: Vec::new(),
        }
    }

    /// Why the tile (and its tail) was chosen, in a sentence.
    pub fn reason(&self) -> String {
        let tile = self.tile_reason();
        match self.tail {
            Some(tail) => {
                let ms =
                    (self.tail_predictions.iter().find(|p| p.0 == tail)).map_or(f64::NAN, |p| p.1);
                format!(
                    "{tile}; then {tail}, predicted {ms:.1} ms, faster by more than {:.0}%",
                    self.tolerance * 100.0
                )
            }
            None => tile,
        }
    }

    /// Why the tile was chosen, in a sentence.
    fn tile_reason(&self) -> String {
        let predicted = |b: usize| {
            self.predictions
                .iter()
                .find(|p| p.0 == b)
                .map_or(f64::NAN, |p| p.1)
        };
        match self.fastest {
            None => format!(
                "{} is the default tile: the matrix is one tile, or no candidate cuts it into 4 to 32 tiles per side",
                self.tile
            ),
            Some(f) if f == self.tile => format!(
                "{} is predicted fastest ({:.1} ms), and no larger tile within {:.0}% of it",
                self.tile,
                predicted(f),
                self.tolerance * 100.0
            ),
            Some(f) => format!(
                "{} is the largest tile predicted within {:.0}% of the fastest ({}: {:.1} ms; {}: {:.1} ms), closer than the models' noise",
                self.tile,
                self.tolerance * 100.0,
                f,
                predicted(f),
                self.tile,
                predicted(self.tile)
            ),
        }
    }
}

/// What a plan computes, with its dimensions.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Algorithm {
    /// The Cholesky factorisation A = L L^H of the lower triangle of an n x n matrix, in place
    /// (matrix [`FACTOR`]).
    Cholesky {
        /// The order.
        n: usize,
    },
    /// The inverse A^-1 = L^-H L^-1 from a Cholesky factor of an n x n matrix, in place (matrix
    /// [`FACTOR`]: L's lower triangle in, A^-1's out; LAPACK's ?potri).
    CholeskyInverse {
        /// The order.
        n: usize,
    },
    /// The inverse of a lower triangular n x n matrix L, in place (matrix [`FACTOR`]: L's lower
    /// triangle in, L^-1's out; LAPACK's ?trtri with uplo = 'L', diag = 'N').
    TriangularInverse {
        /// The order.
        n: usize,
    },
    /// The forward and backward substitutions with a Cholesky factor (matrix [`FACTOR`], read) of
    /// `rhs` right-hand sides (matrix [`RHS`], overwritten by the solution).
    CholeskySolve {
        /// The order of the factor.
        n: usize,
        /// The right-hand sides.
        rhs: usize,
    },
    /// One substitution of a distributed solve, its updates run where the factor's tiles are and
    /// summed into partial sums ([`SUMS`]) where B's are not: with a Cholesky factor's L or L^H, or
    /// an LU's L or U.
    DistributedSubstitution {
        /// The order of the factor.
        n: usize,
        /// The right-hand sides.
        rhs: usize,
        /// The process grid.
        grid: ProcessGrid,
        /// Which one.
        substitution: Substitution,
    },
    /// The LU factorisation with partial pivoting P A = L U of an n x n matrix, in place (matrix
    /// [`FACTOR`] cut into block columns; the row interchanges beside it).
    Lu {
        /// The order.
        n: usize,
    },
    /// The LU factorisation with partial pivoting P A = L U of an n x n matrix on b x b tiles whose
    /// tile rows are spread over `process_rows` process rows, in place (matrix [`FACTOR`]; each
    /// step's interchanges in a tile of [`PIVOTS`](hetla_factorizations::PIVOTS), the rows they
    /// move between process rows in tiles of [`EXCHANGE`](hetla_factorizations::EXCHANGE); see
    /// [`lu_tiles`](hetla_factorizations::lu_tiles)): what a distributed LU runs on a P x Q grid,
    /// P > 1.
    LuTiles {
        /// The order.
        n: usize,
        /// The process rows its tile rows are spread over.
        process_rows: usize,
    },
    /// Aasen's symmetric indefinite factorisation Q A Q^T = L T L^H of an n x n Hermitian matrix
    /// (matrix [`FACTOR`] holds L, T and the workspace H; A is read through the permutation beside
    /// it, see [`ldlt`](hetla_factorizations::ldlt)).
    Ldlt {
        /// The order.
        n: usize,
    },
    /// [`Algorithm::Ldlt`] in whole block columns (LU's layout,
    /// [`ldlt_columns`](hetla_factorizations::ldlt_columns)): its products and interchanges are
    /// tasks of two block columns, which GPUs run; what a run beside GPUs executes.
    LdltColumns {
        /// The order.
        n: usize,
    },
    /// The Householder QR factorisation A = Q R of an m x n matrix, in place (matrix [`FACTOR`]: R
    /// on and above the diagonal, the reflectors below; their T's beside it), its tiles' columns
    /// eliminated by `tree` (flat or binary, resolved).
    Qr {
        /// Rows.
        m: usize,
        /// Columns.
        n: usize,
        /// Columns of right-hand sides (matrix [`RHS`], m rows) overwritten by Q^H B in the same
        /// graph (least squares); 0 for the factorisation alone.
        rhs: usize,
        /// The reduction tree.
        tree: QrTree,
    },
    /// Q^H B for an m x n matrix already factored by [`Algorithm::Qr`] with `tree` (matrix
    /// [`FACTOR`], read) and `rhs` columns of B (matrix [`RHS`], overwritten).
    QrApply {
        /// Rows.
        m: usize,
        /// Columns of A.
        n: usize,
        /// Columns of B.
        rhs: usize,
        /// The reduction tree A was factored with.
        tree: QrTree,
    },
    /// LAPACK's blocked Householder QR A = Q R of an m x n matrix (m >= n) in block columns
    /// ([`qr_columns`](hetla_factorizations::qr_columns); matrix [`FACTOR`]: R on and above the
    /// diagonal, the reflectors below, each panel's T beside it): what a distributed QR on a grid
    /// of one process row runs.
    QrColumns {
        /// Rows.
        m: usize,
        /// Columns.
        n: usize,
        /// Columns of right-hand sides (matrix [`RHS`], m rows, in block columns) overwritten by
        /// Q^H B in the same graph (least squares); 0 for the factorisation alone.
        rhs: usize,
        /// The inner block: the rows of each panel's T (at most the panel's width).
        inner: usize,
    },
    /// C <- alpha op(A) op(B) + beta C (matrices [`MATMUL_A`], [`MATMUL_B`], [`MATMUL_C`]).
    Gemm {
        /// Rows of C.
        m: usize,
        /// Columns of C.
        n: usize,
        /// The inner dimension.
        k: usize,
    },
}

impl Algorithm {
    /// The name reports use ("cholesky", "gemm").
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::Cholesky { .. } => "cholesky",
            Algorithm::CholeskyInverse { .. } => "cholesky-inverse",
            Algorithm::CholeskySolve { .. } => "cholesky-solve",
            Algorithm::TriangularInverse { .. } => "triangular-inverse",
            Algorithm::DistributedSubstitution { .. } => "distributed-substitution",
            Algorithm::Lu { .. } => "lu",
            Algorithm::LuTiles { .. } => "lu-tiles",
            Algorithm::Ldlt { .. } => "ldlt",
            Algorithm::LdltColumns { .. } => "ldlt-columns",
            Algorithm::Qr { .. } => "qr",
            Algorithm::QrApply { .. } => "qr-apply",
            Algorithm::QrColumns { .. } => "qr-columns",
            Algorithm::Gemm { .. } => "gemm",
        }
    }

    /// The order a report gives: n for a factorisation or a solve, the rows m for QR and a product.
    pub fn order(&self) -> usize {
        match *self {
            Algorithm::Cholesky { n }
            | Algorithm::CholeskyInverse { n }
            | Algorithm::TriangularInverse { n }
            | Algorithm::CholeskySolve { n, .. }
            | Algorithm::DistributedSubstitution { n, .. }
            | Algorithm::Lu { n }
            | Algorithm::LuTiles { n, .. }
            | Algorithm::Ldlt { n }
            | Algorithm::LdltColumns { n } => n,
            Algorithm::Gemm { m, .. }
            | Algorithm::Qr { m, .. }
            | Algorithm::QrApply { m, .. }
            | Algorithm::QrColumns { m, .. } => m,
        }
    }

    /// The family whose run builds this plan (none for a product or a distributed solve's step).
    pub fn family(&self) -> Option<crate::Family> {
        use crate::Family;
        match self {
            Algorithm::Cholesky { .. } | Algorithm::CholeskySolve { .. } => Some(Family::Cholesky),
            Algorithm::CholeskyInverse { .. } => Some(Family::Inverse),
            Algorithm::Lu { .. } | Algorithm::LuTiles { .. } => Some(Family::Lu),
            Algorithm::Ldlt { .. } | Algorithm::LdltColumns { .. } => Some(Family::Ldlt),
            Algorithm::TriangularInverse { .. } => Some(Family::Trtri),
            Algorithm::Qr { .. } | Algorithm::QrApply { .. } | Algorithm::QrColumns { .. } => {
                Some(Family::Qr)
            }
            Algorithm::DistributedSubstitution { .. } | Algorithm::Gemm { .. } => None,
        }
    }

    /// Its name in a report's title and the formula of the flops it is reported against: its
    /// family's, but the inverse's graph alone (which follows Cholesky's) is "Inverse", 2 n^3/3.
    pub fn title_and_flops(&self) -> (&'static str, &'static str) {
        match (self, self.family()) {
            (Algorithm::CholeskyInverse { .. }, _) => ("Inverse", "2 n^3/3"),
            (Algorithm::CholeskySolve { .. }, _) => ("Cholesky solve", "2 n^2 rhs"),
            (Algorithm::QrApply { .. }, _) => ("Q^H B", "(4 m n - 2 n^2) rhs"),
            (_, Some(family)) => (family.title(), family.flops_formula()),
            (Algorithm::Gemm { .. }, None) => ("GEMM", "2 m n k"),
            (_, None) => ("Substitution", "n^2 rhs"),
        }
    }
}

impl serde::Serialize for Algorithm {
    /// By its name ([`Algorithm::name`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// How a matrix of a plan is cut into tiles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Layout {
    /// By a tiling.
    Tiled(Tiling),
    /// In whole block columns of a tiling's width: tile (0, j) is block column j, every row (LU's).
    Columns(Tiling),
    /// One column per diagonal tile of a tiling: tile (k, k) has as many rows as block column k has
    /// columns ([`PIVOTS`](hetla_factorizations::PIVOTS)).
    Pivots(Tiling),
    /// The partial sums of a distributed substitution of the right-hand sides tiled by `b` with the
    /// factor tiled by `l` ([`sum_shape`]).
    Sums {
        l: Tiling,
        b: Tiling,
        grid: ProcessGrid,
        substitution: Substitution,
    },
}

/// What an algorithm imposes on the runs of its plan (the product's strategies).
#[derive(Debug, Clone, Default)]
pub(crate) struct Schedule {
    /// The policy it needs (dmda for the product's dynamic strategy).
    pub scheduler: Option<SchedulerKind>,
    /// A static allocation.
    pub plan: Option<Arc<StaticPlan>>,
    /// Tiles on a memory node before the run.
    pub placement: Vec<(TileRef, MemoryNode, Mode)>,
    /// Operations only some kinds of worker may run (those without a GPU kernel).
    pub restrictions: Vec<(Op, Vec<ResourceKind>)>,
    /// Operations that run on some kinds of worker where the platform has them
    /// ([`RunOptions::preferences`]).
    pub preferences: Vec<(Op, Vec<ResourceKind>)>,
}

/// A factorisation (or a product) built once, then run, simulated, bounded and split over a process
/// grid by the same code: what every command needs to know of one call, decided in one place:
///
/// - the [`Algorithm`] and its shape, the precision, the tile size and, when the platform's models
///   chose it, why ([`TileChoice`]);
/// - the task graph (built by `hetla-factorizations` in sequential order, its flops in the
///   precision's real flops), each task's kernel key, each matrix's layout and so each tile's
///   bytes, and the flops the rates are reported against (n^3/3 for Cholesky);
/// - what the algorithm imposes on a run (a static plan and the operands' placement, for the
///   product's strategies);
/// - its correctness check ([`Plan::residual`]).
///
/// The same plan is then run on a [`Platform`](crate::Platform) (over the tiles where the caller's
/// matrices are), bounded ([`Plan::bounds`] and the bounds of a run it made, [`Plan::run_bounds`]),
/// simulated on a modelled machine (`hetla-lab`) and split over a process grid ([`Plan::split`])
/// for a distributed run or its simulation. Adding a factorisation is a graph builder in
/// `hetla-factorizations`, its kernels in `hetla-kernels`, a constructor and a check here, and a
/// driver (see docs/architecture.md); every command then serves it.
#[derive(Debug, Clone)]
pub struct Plan {
    algorithm: Algorithm,
    precision: Precision,
    tile: usize,
    /// How the platform's models chose the tile.
    pub(crate) choice: Option<TileChoice>,
    layouts: Vec<(MatrixId, Layout)>,
    pub(super) graph: TaskGraph,
    pub(super) keys: Vec<KernelKey>,
    pub(super) flops: f64,
    /// What the algorithm imposes on runs.
    pub(crate) schedule: Schedule,
}

impl Plan {
    /// The plan of `algorithm` in `precision` over the matrices `layouts`, whose graph is `graph`
    /// (its flops in real flops of `precision` once scaled here), reported against `flops` real
    /// flops of f64 (scaled too): what a family's constructor assembles.
    pub(crate) fn assemble(
        algorithm: Algorithm,
        precision: Precision,
        tile: usize,
        layouts: Vec<(MatrixId, Layout)>,
        mut graph: TaskGraph,
        flops: f64,
    ) -> Self {
        graph.scale_flops(precision.flop_factor());
        let mut plan = Self {
            algorithm,
            precision,
            tile,
            choice: None,
            layouts,
            graph,
            keys: Vec::new(),
            flops: flops * precision.flop_factor(),
            schedule: Schedule::default(),
        };
        plan.keys = plan
            .graph
            .tasks()
            .iter()
            .map(|t| KernelKey::of_task(t, |tile| plan.shape(tile)).in_precision(precision))
            .collect();
        plan
    }

    /// Each task's kernel key from the shapes its kernel works on (`shapes`), where they are not
    /// its tiles' (a task of LU's block columns works on the rows below its panel, one of Aasen's
    /// on views that span tiles).
    pub(crate) fn set_keys(
        &mut self,
        shapes: impl Fn(&hetla_factorizations::Task) -> Vec<(usize, usize)>,
    ) {
        let precision = self.precision;
        self.keys = (self.graph.tasks().iter())
            .map(|task| KernelKey {
                op: task.op,
                shapes: shapes(task),
                precision,
            })
            .collect();
    }

    /// What it computes.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Its precision.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Its tile size.
    pub fn tile(&self) -> usize {
        self.tile
    }

    /// How the platform's models chose the tile (`None`: given, or the default of
    /// [`Cholesky::tile_size_for`](crate::Cholesky::tile_size_for)).
    pub fn tile_choice(&self) -> Option<&TileChoice> {
        self.choice.as_ref()
    }

    /// The task graph (flops in real flops of the precision).
    pub fn graph(&self) -> &TaskGraph {
        &self.graph
    }

    /// Each task's kernel: operation, operand shapes, precision.
    pub fn keys(&self) -> &[KernelKey] {
        &self.keys
    }

    /// The flops rates are reported against: n^3/3 for a Cholesky factorisation, 2 m n k for a
    /// product, times 4 in a complex precision.
    pub fn flops(&self) -> f64 {
        self.flops
    }

    /// The distinct operations of its tasks' kernel keys, in the order they first appear: what a
    /// calibration for this plan times and a model needs rates of to time it (a general product's
    /// tasks are keyed as GEMM's, [`KernelKey::of_task`]).
    pub fn ops(&self) -> Vec<Op> {
        let mut ops: Vec<Op> = Vec::new();
        for key in &self.keys {
            if !ops.contains(&key.op) {
                ops.push(key.op);
            }
        }
        ops
    }

    /// What each GPU of a run of this plan moved ([`Trace::device_traffic`]) against the fewest
    /// tile copies its tile updates needed in its budget (`budgets[i]`: device i's bytes), from a
    /// matrix in host memory: for Cholesky, the symmetric updates of its SYRK and GEMM tasks and
    /// the tiles its tasks overwrote, each copied in and out
    /// (`hetla_bounds::communication::symmetric_device_transfers_lower_bound`); nothing for the
    /// other plans, whose bounds of this kind are not built.
    ///
    /// [`Trace::device_traffic`]: hetla_runtime::Trace::device_traffic
    pub fn device_traffic(
        &self,
        trace: &hetla_runtime::Trace,
        budgets: &[usize],
    ) -> Vec<hetla_runtime::DeviceTraffic> {
        use hetla_bounds::communication as bounds;
        // The first tile, the largest: a tile wider than the matrix is the whole matrix.
        let (rows, cols) = (self.blocks(FACTOR)).map_or((0, 0), |t| t.tile_shape(0, 0));
        let tile_bytes = rows
            .saturating_mul(cols)
            .saturating_mul(self.precision.bytes());
        let on = (budgets, tile_bytes);
        match self.algorithm {
            Algorithm::Cholesky { .. } => trace.device_traffic(
                on,
                (
                    |op| matches!(op, Op::Syrk | Op::GemmNt),
                    |task| {
                        let last = self.graph.tasks().get(task.0)?.accesses.last()?;
                        last.mode.writes().then_some(last.tile)
                    },
                ),
                |updates, written, buffers| {
                    bounds::symmetric_device_transfers_lower_bound(updates, buffers.max(2), written)
                        .unwrap_or(0.0)
                },
            ),
            _ => Vec::new(),
        }
    }

    /// The tail of smaller tiles its factor's tiling has, if any ([`Plan::with_tail`]).
    pub fn tail(&self) -> Option<Tail> {
        self.tiling(FACTOR).and_then(Tiling::tail)
    }

    /// The tile size whose kernel rates time a task of kernel `key` (a modelled platform's rates
    /// are per tile size): the tail's, for a task that writes a tile of the tail ([`Plan::tail`]:
    /// its written operand no larger than the tail's tiles either way), else the plan's tile (a
    /// ragged edge tile is timed at its tiling's rate, its flops fewer).
    pub fn rate_tile(&self, key: &KernelKey) -> usize {
        let written = key.shapes.last().copied().unwrap_or_default();
        match self.tail() {
            Some(tail) if written.0.max(written.1) <= tail.tile => tail.tile,
            _ => self.tile,
        }
    }

    /// Its operations a GPU may run: those with a GPU kernel that the plan does not keep on CPU
    /// clusters (the tiled QR's applications, say, whose work gives a device no T's).
    pub fn gpu_ops(&self) -> Vec<Op> {
        let kinds = [ResourceKind::Cpu, ResourceKind::Gpu];
        let options = self.run_options(&RunOptions::default());
        (self.ops().into_iter())
            .filter(|&op| {
                op.runs_on_gpus()
                    && (options.allowed_kinds(op, &kinds))
                        .is_none_or(|k| k.contains(&ResourceKind::Gpu))
            })
            .collect()
    }

    /// The tiling of `matrix`, if the plan cuts it by one.
    pub fn tiling(&self, matrix: MatrixId) -> Option<&Tiling> {
        self.layouts.iter().find_map(|(m, layout)| match layout {
            Layout::Tiled(t) if *m == matrix => Some(t),
            _ => None,
        })
    }

    /// The tiling of `matrix` whether it is in tiles or in block columns (whose tile (0, j) is
    /// block column j of this tiling).
    pub(crate) fn blocks(&self, matrix: MatrixId) -> Option<&Tiling> {
        self.layouts.iter().find_map(|(m, layout)| match layout {
            Layout::Tiled(t) | Layout::Columns(t) if *m == matrix => Some(t),
            _ => None,
        })
    }

    /// (rows, columns) of a tile; (0, 0) for a matrix the plan does not use.
    pub fn shape(&self, tile: TileRef) -> (usize, usize) {
        let layout = self.layouts.iter().find(|(m, _)| *m == tile.matrix);
        layout.map_or((0, 0), |(_, layout)| match layout {
            Layout::Tiled(t) => t.tile_shape(tile.row, tile.col),
            Layout::Columns(t) => (t.rows(), t.tile_cols(tile.col)),
            Layout::Pivots(t) if tile.row == tile.col => (t.tile_cols(tile.col), 1),
            Layout::Pivots(_) => (0, 0),
            Layout::Sums {
                l,
                b,
                grid,
                substitution,
            } => sum_shape(tile, l, b, grid, *substitution),
        })
    }

    /// Bytes of a tile in the plan's precision.
    pub fn tile_bytes(&self, tile: TileRef) -> usize {
        let (rows, cols) = self.shape(tile);
        rows * cols * self.precision.bytes()
    }

    /// Bytes of the message that carries `tile` to another rank in a distributed run of the plan:
    /// the tile; for LU, whose tiles are block columns and of which only the panels travel, the
    /// panel's rows from its diagonal down and its interchanges (one whole number a column, in a
    /// part of the precision: half an entry in a complex one); for QR in block columns, the panel's
    /// rows from its diagonal down and its T.
    pub fn message_bytes(&self, tile: TileRef) -> usize {
        match self.algorithm {
            Algorithm::Lu { n } => {
                let (first, width) = (tile.col * self.tile, self.shape(tile).1);
                let bytes = self.precision.bytes();
                let part = if self.precision.is_complex() {
                    bytes / 2
                } else {
                    bytes
                };
                (n.saturating_sub(first) * bytes + part) * width
            }
            // A QR panel: its rows from the diagonal down, then its T (inner x width).
            Algorithm::QrColumns { m, inner, .. } => {
                let (first, width) = (tile.col * self.tile, self.shape(tile).1);
                let t_rows = inner.min(width).max(1);
                (m.saturating_sub(first) + t_rows) * width * self.precision.bytes()
            }
            _ => self.tile_bytes(tile),
        }
    }

    /// Every tile the plan's tasks touch, placed read-write on memory `node` (each in the order its
    /// first task names it): the placement of a run whose matrices live on a device
    /// ([`hetla_runtime::WriteBack::Resident`], [`crate::Cholesky::resident`]).
    pub fn placed_on(&self, node: MemoryNode) -> Vec<(TileRef, MemoryNode, Mode)> {
        let mut seen = std::collections::HashSet::new();
        self.graph()
            .tasks()
            .iter()
            .flat_map(|task| &task.accesses)
            .filter(|access| seen.insert(access.tile))
            .map(|access| (access.tile, node, Mode::ReadWrite))
            .collect()
    }

    /// `base` with what the plan imposes on its runs: its policy, static allocation and placement,
    /// where it has them.
    pub fn run_options(&self, base: &RunOptions) -> RunOptions {
        let s = &self.schedule;
        RunOptions {
            scheduler: s.scheduler.unwrap_or(base.scheduler),
            plan: s.plan.clone().or_else(|| base.plan.clone()),
            placement: if s.placement.is_empty() {
                base.placement.clone()
            } else {
                s.placement.clone()
            },
            restrictions: base
                .restrictions
                .iter()
                .chain(&s.restrictions)
                .cloned()
                .collect(),
            preferences: (base.preferences.iter())
                .chain(&s.preferences)
                .cloned()
                .collect(),
            ..base.clone()
        }
    }

    /// The plan split over the ranks of `grid` (owner computes; see
    /// [`GridSplit`](hetla_factorizations::GridSplit)); refuses, before anything is allocated, a
    /// grid whose ranks this machine cannot hold (16 KiB a rank beside its tasks,
    /// [`crate::limits`]).
    pub fn split(&self, grid: &ProcessGrid) -> Result<GridSplit> {
        crate::limits::check_split(grid.size(), self.graph.len())?;
        GridSplit::new(&self.graph, grid).map_err(|e| Error::InvalidOption {
            option: "grid",
            reason: e.to_string(),
        })
    }

    /// The plan's correctness check, LAPACK's test ratio of `result`, what the plan computed from
    /// `input`: below [`RESIDUAL_THRESHOLD`](crate::check::RESIDUAL_THRESHOLD) is correct.
    ///
    /// - Cholesky, a matrix (the factor L of A): ||A - L L^H||_1 / (n ||A||_1 eps), reading the
    ///   lower triangles (dpot01);
    /// - the inverse, a matrix (A^-1 from A): ||A X - I||_1 / (n ||A||_1 ||X||_1 eps), reading both
    ///   lower triangles (dpot03);
    /// - the triangular inverse, a matrix (L^-1 from L): ||L X - I||_1 / (n ||L||_1 ||X||_1 eps),
    ///   reading both lower triangles (dtrt01);
    /// - LU, [`Outcome::Pivoted`] or an [`LuFactor`](crate::LuFactor): ||P A - L U||_1 / (n ||A||_1
    ///   eps) (dget01);
    /// - QR, [`Outcome::Orthogonal`] (a thin Q and its R): ||A - Q R||_1 / (m ||A||_1 eps) (dqrt01;
    ///   [`check::orthogonality`](crate::check::orthogonality) is its other ratio).
    ///
    /// An algorithm whose result is not a function of one input (a solve, a product) says which
    /// checks of [`crate::check`] apply.
    pub fn residual<'r, T: Scalar>(
        &self,
        input: MatRef<'_, T>,
        result: impl Into<Outcome<'r, T>>,
        par: Par,
    ) -> Result<f64> {
        expect_precision(self, T::PRECISION)?;
        let refuse = |reason: String| Error::InvalidOption {
            option: "residual",
            reason,
        };
        // The input, and the result when it is one matrix, of the plan's shape.
        let shaped = |(rows, cols): (usize, usize), does: &str, result: Option<MatRef<'_, T>>| {
            for (what, m) in
                std::iter::once(("the input", input)).chain(result.map(|r| ("the result", r)))
            {
                if (m.nrows(), m.ncols()) != (rows, cols) {
                    return Err(refuse(format!(
                        "{what} is {}x{}, the plan {does} {rows}x{cols}",
                        m.nrows(),
                        m.ncols()
                    )));
                }
            }
            Ok(())
        };
        match (self.algorithm, result.into()) {
            (Algorithm::Cholesky { n }, Outcome::Matrix(l)) => {
                shaped((n, n), "factors", Some(l))?;
                Ok(crate::check::cholesky_residual(input, l, par))
            }
            (Algorithm::CholeskyInverse { n }, Outcome::Matrix(x)) => {
                shaped((n, n), "inverts", Some(x))?;
                Ok(crate::check::inverse_residual(input, x, par))
            }
            (Algorithm::TriangularInverse { n }, Outcome::Matrix(x)) => {
                shaped((n, n), "inverts", Some(x))?;
                Ok(crate::check::triangular_inverse_residual(input, x, par))
            }
            (Algorithm::Lu { n }, Outcome::Pivoted { lu, ipiv }) => {
                shaped((n, n), "factors", Some(lu))?;
                if ipiv.len() != n || ipiv.iter().enumerate().any(|(i, &p)| p < i || p >= n) {
                    return Err(refuse(format!(
                        "the interchanges are not an LU's of order {n}: {} of them, each row i swapped with a row in i..{n}",
                        ipiv.len()
                    )));
                }
                Ok(crate::check::lu_residual(input, lu, ipiv))
            }
            (
                Algorithm::Qr { m, n, .. } | Algorithm::QrColumns { m, n, .. },
                Outcome::Orthogonal { q, r },
            ) => {
                let k = m.min(n);
                let (q_shape, r_shape) = ((q.nrows(), q.ncols()), (r.nrows(), r.ncols()));
                if q_shape != (m, k) || r_shape != (k, n) {
                    return Err(refuse(format!(
                        "Q is {}x{} and R {}x{}, the plan's thin factors are {m}x{k} and {k}x{n}",
                        q_shape.0, q_shape.1, r_shape.0, r_shape.1
                    )));
                }
                shaped((m, n), "factors", None)?;
                Ok(crate::check::qr_residual(input, q, r))
            }
            (
                algorithm @ (Algorithm::Cholesky { .. }
                | Algorithm::CholeskyInverse { .. }
                | Algorithm::Lu { .. }
                | Algorithm::Qr { .. }
                | Algorithm::QrColumns { .. }),
                outcome,
            ) => Err(refuse(format!(
                "a {} plan's result is {}, not {}",
                algorithm.name(),
                match algorithm {
                    Algorithm::Lu { .. } => "the factor with its interchanges (Outcome::Pivoted)",
                    Algorithm::Qr { .. } | Algorithm::QrColumns { .. } => {
                        "a thin Q and its R (Outcome::Orthogonal)"
                    }
                    _ => "one matrix (Outcome::Matrix)",
                },
                outcome.describe()
            ))),
            (Algorithm::Ldlt { .. } | Algorithm::LdltColumns { .. }, _) => Err(refuse(
                "an LDL^T plan's result is checked by LdltFactor::residual (LAPACK's dchksy_aa ratio), which holds its T and interchanges".into(),
            )),
            (other, _) => Err(refuse(format!(
                "a {} plan is checked by check::solve_backward_error or check::relative_error, not by one input and one result",
                other.name()
            ))),
        }
    }
}

/// One substitution of a distributed solve (see [`Algorithm::DistributedSubstitution`]) with the
/// factor tiled by `l` and the right-hand sides by `b`.
pub(super) fn substitution_plan(
    l: Tiling,
    b: Tiling,
    grid: ProcessGrid,
    substitution: Substitution,
    precision: Precision,
) -> Result<Plan> {
    crate::limits::check_solve(l.rows(), b.cols(), l.tile())?;
    let mut graph = TaskGraph::new();
    distributed_substitution(&mut graph, &l, &b, &grid, substitution)?;
    let sums = Layout::Sums {
        l,
        b,
        grid,
        substitution,
    };
    let layouts = vec![
        (FACTOR, Layout::Tiled(l)),
        (RHS, Layout::Tiled(b)),
        (SUMS, sums),
    ];
    let (n, rhs) = (l.rows(), b.cols());
    let flops = (n as f64).powi(2) * rhs as f64;
    let algorithm = Algorithm::DistributedSubstitution {
        n,
        rhs,
        grid,
        substitution,
    };
    Ok(Plan::assemble(
        algorithm,
        precision,
        l.tile(),
        layouts,
        graph,
        flops,
    ))
}

/// The product of `tiling`'s shape (and parameters), in `precision`, its runs with `schedule` (the
/// policy, static allocation and placement of the product's strategy).
pub(crate) fn product_plan(
    tiling: &MatMulTiling,
    precision: Precision,
    schedule: Schedule,
) -> Plan {
    let (m, n) = (tiling.c.rows(), tiling.c.cols());
    let k = if tiling.params.trans_a {
        tiling.a.rows()
    } else {
        tiling.a.cols()
    };
    let layouts = [MATMUL_A, MATMUL_B, MATMUL_C]
        .into_iter()
        .filter_map(|id| tiling.tiling(id).map(|t| (id, Layout::Tiled(*t))))
        .collect();
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    let mut plan = Plan::assemble(
        Algorithm::Gemm { m, n, k },
        precision,
        tiling.c.tile(),
        layouts,
        matmul(tiling),
        flops,
    );
    plan.schedule = schedule;
    plan
}

/// The operations without GPU kernels, restricted to CPU clusters.
pub(crate) fn cpu_only_ops() -> Vec<(Op, Vec<ResourceKind>)> {
    Op::ALL
        .into_iter()
        .filter(|op| !op.runs_on_gpus())
        .map(|op| (op, vec![ResourceKind::Cpu]))
        .collect()
}

/// An error unless the plan computes in `precision`.
pub(crate) fn expect_precision(plan: &Plan, precision: Precision) -> Result<()> {
    if precision == plan.precision() {
        Ok(())
    } else {
        Err(Error::InvalidOption {
            option: "precision",
            reason: format!(
                "the plan computes in {}, its matrices are in {precision}",
                plan.precision()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cholesky_plan_knows_its_graph_keys_bytes_and_flops_in_its_precision() {
        let plan = Plan::new(crate::Algorithm::Cholesky { n: 1000 }, 300, Precision::Z).unwrap();
        assert_eq!(plan.graph().len(), 20);
        assert_eq!(plan.keys().len(), 20);
        assert!(plan.keys().iter().all(|k| k.precision == Precision::Z));
        // The ragged last tile: 100 x 100 complex doubles.
        assert_eq!(plan.tile_bytes(TileRef::new(FACTOR, 3, 3)), 100 * 100 * 16);
        assert_eq!(plan.tile_bytes(TileRef::new(RHS, 0, 0)), 0);
        assert_eq!(plan.flops(), 4.0 * 1e9 / 3.0);
        assert_eq!(plan.ops(), [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt]);
        // The graph counts the real flops of its precision too.
        let real = Plan::new(crate::Algorithm::Cholesky { n: 1000 }, 300, Precision::D).unwrap();
        let ratio = plan.graph().total_flops() / real.graph().total_flops();
        assert!((ratio - 4.0).abs() < 1e-12);
    }

    #[test]
    fn the_check_refuses_another_precision_or_shape() {
        let plan = Plan::new(crate::Algorithm::Cholesky { n: 4 }, 2, Precision::D).unwrap();
        let a = faer::Mat::<f64>::identity(4, 4);
        assert_eq!(
            plan.residual(a.as_ref(), a.as_ref(), Par::Seq).unwrap(),
            0.0
        );
        let small = faer::Mat::<f64>::identity(3, 3);
        let err = plan
            .residual(small.as_ref(), a.as_ref(), Par::Seq)
            .unwrap_err();
        assert!(err.to_string().contains("3x3"), "{err}");
        let single = faer::Mat::<f32>::identity(4, 4);
        let err = plan
            .residual(single.as_ref(), single.as_ref(), Par::Seq)
            .unwrap_err();
        assert!(err.to_string().contains("computes in d"), "{err}");
    }
}
