//! The tile operations of every factorisation, of the triangular solves and of the general matrix
//! product: their operand conventions, exact flop counts and codelets.
//!
//! Every operation reads zero to two tiles and overwrites one ([`Op::writes`]: two for QR's stacked
//! kernels, which update a pair of tiles). Operands are always listed reads first, the written
//! tiles last; task graphs list their tile accesses in the same order, so a runtime can hand a
//! task's tiles to [`crate::Backend::run`] unchanged.
//!
//! What the project knows of an operation is declared once, in its [`Codelet`] (StarPU's word): its
//! name, its accesses, the call its CPU kernel makes, the call its GPU kernel makes or why it has
//! none, where a platform model without a measured rate for it takes one, its shape check, its
//! exact flop count and the count modelled rates are quoted in. The CPU kernels (`run.rs`), the GPU
//! kernels (`cuda.rs`), the runtime's models and the laboratory's presets read these, not the
//! operations, so a new operation is its variant in the list below ([`Op::ALL`] is made from it)
//! and one entry in [`Op::codelet`] (and its kernels where they are new calls); the compiler points
//! at every place a new call needs a kernel. A missing GPU version is the declared
//! [`GpuCall::Absent`], which a GPU refuses with its reason.

use std::fmt;
use std::ops::Range;

/// Declares [`Op`] with its unit variants listed once, and [`Op::ALL`] from the same list.
macro_rules! tile_ops {
    ($($(#[$doc:meta])* $op:ident,)*) => {
        /// One tile operation. The doc of each variant gives its operands in order, with their
        /// shapes (rows x cols), and what it computes. `L` is a lower triangular tile whose strict
        /// upper part is never read.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Op {
            $($(#[$doc])* $op,)*
            /// `[A, B, C (m x n)]`: C <- alpha op(A) op(B) + beta C, where op(A) is m x k (A is m x
            /// k, or k x m when transposed) and op(B) is k x n: one tile of a general matrix
            /// product. With beta = 0, C is overwritten and never read (BLAS semantics).
            MatMul(MatMul),
        }

        impl Op {
            /// Every operation but the general product (whose parameters make it many), in
            /// declaration order (useful for benchmarks and reports).
            pub const ALL: [Op; [$(stringify!($op)),*].len()] = [$(Op::$op),*];
        }
    };
}

tile_ops! {
    /// `[A (n x n)]`: A <- L with L L^T = A, lower triangle only (LAPACK dpotrf, 'L').
    Potrf,
    /// `[L (n x n), B (m x n)]`: B <- B L^-T (the panel solve of Cholesky).
    Trsm,
    /// `[A (n x k), C (n x n)]`: C <- C - A A^T, lower triangle of C only.
    Syrk,
    /// `[A (m x k), B (n x k), C (m x n)]`: C <- C - A B^T, the trailing update of Cholesky (B
    /// transposed, alpha = -1, beta = 1). Its name in traces, performance models and platform files
    /// is "gemm", as in the papers; [`Op::MatMul`] is the general product.
    GemmNt,
    /// `[L (m x m), X (m x r)]`: X <- L^-1 X (forward substitution on a diagonal tile).
    SolveLower,
    /// `[L (m x m), X (m x r)]`: X <- L^-T X (backward substitution on a diagonal tile).
    SolveLowerTrans,
    /// `[L (m x k), X (k x r), Y (m x r)]`: Y <- Y - L X (forward substitution update).
    Update,
    /// `[L (k x m), X (k x r), Y (m x r)]`: Y <- Y - L^T X (backward substitution update).
    UpdateTrans,
    /// `[X (m x r), Y (m x r)]`: Y <- Y + X (a partial result added where its tile lives, as in a
    /// distributed substitution).
    Add,
    /// `[L (n x n)]`: L <- L^-1, lower triangle only (LAPACK ?trtri, 'L', non-unit): the diagonal
    /// step of inverting a triangular factor.
    Trtri,
    /// `[L (n x n)]`: L <- L^H L, lower triangle only (LAPACK ?lauum, 'L'): the diagonal step of
    /// forming A^-1 = L^-H L^-1 from the inverted factor.
    Lauum,
    /// `[L (n x n), B (m x n)]`: B <- -B L^-1 (the panel step of a tiled TRTRI).
    SolveRight,
    /// `[A (k x n), C (n x n)]`: C <- C + A^H A, lower triangle of C only (HERK with the adjoint, a
    /// step of a tiled LAUUM).
    SyrkAdjoint,
    /// `[L (m x m), B (m x n)]`: B <- L^H B (TRMM on the left with the adjoint, a step of a tiled
    /// LAUUM).
    TrmmAdjoint,
    /// `[A (m x b)]`, m >= b: A <- its LU factorisation with partial pivoting, P A = L U (L unit
    /// lower trapezoidal below the diagonal, U upper triangular; LAPACK ?getrf on a panel). Its row
    /// interchanges come out beside the tile ([`crate::Backend::lu_panel`]): the panel of the tiled
    /// LU.
    LuPanel,
    /// `[P (m x b), C (m x c)]`, m >= b: C <- the update of C by the factored panel P: C's rows
    /// interchanged as P's were, C_1 <- L_11^-1 C_1 (its first b rows), C_2 <- C_2 - L_21 C_1
    /// ([`crate::Backend::lu_update`]).
    LuUpdate,
    /// `[P (m x b), C (m x c)]`: C's rows interchanged as the factored panel P's were (LAPACK
    /// ?laswp): the interchanges of a later panel applied to the columns of L left of it.
    LuSwap,
    /// `[A (m x n)]`: A <- its QR factorisation, R on and above the diagonal, the reflectors below
    /// (LAPACK ?geqrt; PLASMA's GEQRT). The block reflectors' T's come out beside the tile
    /// ([`crate::Backend::qr_tile`]).
    Geqrt,
    /// `[V (m x k), C (m x c)]`: C <- Q^H C, Q the orthogonal factor of the tile V factored by
    /// [`Op::Geqrt`] (LAPACK ?gemqrt; PLASMA's UNMQR), with V's T's ([`crate::Backend::qr_apply`]).
    Unmqr,
    /// `[R (n x n), B (m x n)]`: the QR of R's upper triangle stacked on B: the new R in R's upper
    /// triangle, the reflectors in B (LAPACK ?tpqrt, l = 0; PLASMA's TSQRT), T's beside
    /// ([`crate::Backend::qr_stacked`]).
    Tsqrt,
    /// `[V (m x k), A1 (k x c), A2 (m x c)]`: [A1; A2] <- Q^H [A1; A2], Q from [`Op::Tsqrt`]
    /// (LAPACK ?tpmqrt, l = 0; PLASMA's TSMQR).
    Tsmqr,
    /// `[R (n x n), B (m x n)]`: as [`Op::Tsqrt`] with B's upper triangle only (LAPACK ?tpqrt, l =
    /// n; PLASMA's TTQRT: the reduction tree's step between two triangles).
    Ttqrt,
    /// `[V (m x k), A1 (k x c), A2 (m x c)]`: [A1; A2] <- Q^H [A1; A2], Q from [`Op::Ttqrt`]
    /// (LAPACK ?tpmqrt, l = k; PLASMA's TTMQR).
    Ttmqr,
    /// `[A (n x n)]`, A's lower triangle a Cholesky factor L = L1 D: its strict upper triangle <- U
    /// = L1^-H when cond_1(L1) is at most [`crate::INVERSE_MAX_CONDITION`], else untouched
    /// ([`crate::Backend::invert_unit_factor`]; L is read, never changed). The TRTRI of a panel
    /// (MAGMA's shape): the panel's solves then run as products with U
    /// ([`crate::Backend::trsm_by_inverse`]).
    PanelInverse,
    /// `[T (m x w), L (k x w), H (m x k)]`: H <- T L^H, one block of Aasen's H = T L^H (block upper
    /// Hessenberg): T a block row of the block tridiagonal T (up to three blocks side by side), L
    /// the matching blocks of one block row of L. Its tiles are the symmetric indefinite family's
    /// (`hetla`'s Aasen), which this shape describes to models.
    LdltHessenberg,
    /// `[L (b x r), H (r x b), T (b x b)]`: T <- the diagonal block of Aasen's T, L(k,k)^-1 (A(k,k)
    /// - L H - ...) L(k,k)^-H, A's block read through the permutation, L H the sum over the block
    ///   columns left of it; then the diagonal block of H.
    LdltDiagonal,
    /// `[L (m x r), H (r x b), W (m x b)]`: W <- A(Q rows, Q cols) - L H: the block of Aasen's next
    /// panel, A read through the permutation Q.
    LdltUpdate,
    /// `[L (b x b), W (m x b)]`, m >= 1: W <- its LU with partial pivoting (the next block column
    /// of L), and the subdiagonal block of T from U and L(k,k); the interchanges go to the
    /// permutation beside the tiles.
    LdltPanel,
    /// `[P (m x b), C (m x c)]`: C's rows interchanged as Aasen's panel P's were (the rows of the
    /// block columns of L left of it).
    LdltSwap,
    /// `[P (m x b), U (b x c)]`, m >= b: one block step of the LU with partial pivoting of Aasen's
    /// block tridiagonal T (its second stage, ?gbtrf on the band): P, block rows k and k+1 of block
    /// column k, factored; U, block row k right of the diagonal block (c = b_{k+1} + b_{k+2}, the
    /// fill of the interchanges), solved; the rows below updated for the next step.
    LdltBand,
    /// `[W (m x b)]`: W <- A(Q rows, Q cols), the block column's rows from its diagonal block read
    /// through the permutation Q, the rows above zero but for the term of H's block that the last
    /// panel gives (the block-column graph's first task of a step; memory traffic).
    LdltGather,
    /// `[L (m x b), C (m x c)]`: C <- C - L X, X the b x c block of C above the m rows
    /// ([`KernelArgs::AasenUpdate`]): a term of Aasen's update of a block column, W(:, k) -= L(:,
    /// j) H(j, k), in the block-column graph that runs beside GPUs (operands whole block columns
    /// there, the rows worked on in keys).
    LdltColumnUpdate,
    /// `[L (c x b), H (r x c)]`: H <- H + T L^H, T (r x b) the argument
    /// ([`KernelArgs::AasenHessenberg`]): the terms of Aasen's H = T L^H that a block column of T
    /// and one block of L give, in the block-column graph that runs beside GPUs (operands whole
    /// block columns there, the blocks in keys).
    LdltColumnHessenberg,
    /// `[L (m x m), X (m x r)]`: X <- L^-1 X, L unit lower triangular (forward substitution with an
    /// LU's diagonal tile: its diagonal and upper triangle are not read).
    SolveUnitLower,
    /// `[U (m x m), X (m x r)]`: X <- U^-1 X, U upper triangular (backward substitution with an
    /// LU's diagonal tile: its strict lower triangle is not read).
    SolveUpper,
}

/// The parameters of an [`Op::MatMul`]: transposes and scalars. The scalars are kept as bit
/// patterns so that an operation stays `Eq + Hash + Ord` (it keys maps and models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatMul {
    /// Whether A is stored transposed (op(A) = A^T).
    pub trans_a: bool,
    /// Whether B is stored transposed (op(B) = B^T).
    pub trans_b: bool,
    alpha: u64,
    beta: u64,
}

impl MatMul {
    /// C <- C + A B: no transposes, alpha = beta = 1.
    pub const ACCUMULATE: MatMul = MatMul {
        trans_a: false,
        trans_b: false,
        alpha: 0x3ff0_0000_0000_0000,
        beta: 0x3ff0_0000_0000_0000,
    };

    /// C <- C - A B^H: the trailing update of Cholesky ([`Op::GemmNt`]).
    pub const SUBTRACT_NT: MatMul = MatMul::new(false, true, -1.0, 1.0);

    /// C <- alpha op(A) op(B) + beta C.
    pub const fn new(trans_a: bool, trans_b: bool, alpha: f64, beta: f64) -> Self {
        Self {
            trans_a,
            trans_b,
            alpha: alpha.to_bits(),
            beta: beta.to_bits(),
        }
    }

    /// The factor of the product.
    pub fn alpha(self) -> f64 {
        f64::from_bits(self.alpha)
    }

    /// The factor of the old C.
    pub fn beta(self) -> f64 {
        f64::from_bits(self.beta)
    }

    /// The same product with another beta (the later steps of a tiled product add to C).
    pub fn with_beta(self, beta: f64) -> Self {
        Self {
            beta: beta.to_bits(),
            ..self
        }
    }

    /// (m, k) of op(A) for a stored A of shape `a`.
    pub fn op_a(self, a: Shape) -> Shape {
        if self.trans_a { (a.1, a.0) } else { a }
    }

    /// (k, n) of op(B) for a stored B of shape `b`.
    pub fn op_b(self, b: Shape) -> Shape {
        if self.trans_b { (b.1, b.0) } else { b }
    }
}

/// The shape of one operand: (rows, columns).
pub type Shape = (usize, usize);

/// Everything declared about one tile operation ([`Op::codelet`]; the module documentation says who
/// reads it).
#[derive(Debug, Clone, Copy)]
pub struct Codelet {
    /// Short lower-case name, as used in traces, performance models and platform files.
    pub name: &'static str,
    /// Number of tiles the operation only reads (listed first).
    pub reads: usize,
    /// Number of tiles it overwrites (listed last).
    pub writes: usize,
    /// What its CPU kernel calls.
    pub cpu: CpuCall,
    /// What its GPU kernel calls, or why there is none.
    pub gpu: GpuCall,
    /// Where a platform model takes its rate from.
    pub rate: RateSource,
    /// Checks the operands' shapes ([`Op::check_shapes`]).
    pub check: CheckShapes,
    /// The exact floating-point operation count (additions plus multiplications, LAPACK Working
    /// Note 41's conventions; [`Op::flops`]).
    pub flops: CountFlops,
    /// Whether the operation is a step's panel work, on its graph's critical path: a GPU with
    /// several streams queues it on its priority stream ([`Op::on_critical_path`]).
    pub panel: bool,
    /// The count modelled rates (Gflop/s per kernel) are quoted in ([`Op::leading_flops`]): the
    /// leading terms Cojean et al. (2016) count POTRF and SYRK with, the entries moved for the row
    /// interchanges (which have no flops: a rate of zero flops would model them free), else the
    /// exact count.
    pub leading: CountFlops,
}

/// The BLAS calls of the tile operations, on either kind of processor (L is lower triangular; `^H`
/// is the transpose for a real type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blas {
    /// A triangular solve with L, on the side and with the form [`Solve`] says (?trsm).
    Solve(Solve),
    /// C <- C - A A^H on the lower triangle of C (?syrk, ?herk).
    RankK,
    /// C <- alpha op(A) op(B) + beta C, op the adjoint where the product says (?gemm).
    Product(MatMul),
    /// Y <- Y + X (?geam on a GPU, a loop on a CPU).
    Add,
}

/// The side and form of a [`Blas::Solve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solve {
    /// B <- B L^-H (the panel solve of Cholesky).
    RightAdjoint,
    /// X <- L^-1 X.
    Left,
    /// X <- L^-H X.
    LeftAdjoint,
    /// X <- L^-1 X, L unit lower triangular (its diagonal and upper triangle not read: an LU's L).
    LeftUnitLower,
    /// X <- U^-1 X, U upper triangular (its strict lower triangle not read: an LU's U).
    LeftUpper,
}

/// What an operation's CPU kernel calls ([`crate::Backend::run`] and the calls that take side
/// data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuCall {
    /// LAPACK's ?potrf on the lower triangle, split over the cluster above a size.
    Potrf,
    /// One of the BLAS calls.
    Blas(Blas),
    /// A step of the inverse of a Cholesky factor (TRTRI, LAUUM and their panel steps).
    Inverse,
    /// The inverse of a diagonal tile's unit factor for its panel's solves
    /// ([`crate::Backend::invert_unit_factor`]).
    UnitInverse,
    /// One of LU's, which read or write the panel's row interchanges beside the tiles
    /// ([`crate::Backend::lu_panel`], `lu_update`, `lu_swap`).
    Pivoted,
    /// One of QR's, which read or write the block reflectors' T's beside the tiles
    /// ([`crate::Backend::qr_tile`], `qr_apply`, `qr_stacked`, `qr_stacked_apply`).
    Reflectors,
    /// One of the symmetric indefinite family's (Aasen's), which read the matrix through a
    /// permutation beside the tiles and views spanning several tiles: the work that holds them runs
    /// them, on the backend's products and LU panel.
    Aasen,
}

/// What an operation's GPU kernel calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCall {
    /// cuSOLVER's ?potrf.
    Potrf,
    /// One of the BLAS calls, by cuBLAS.
    Blas(Blas),
    /// A step of the inverse of a Cholesky factor: cuSOLVER's ?trtri on a diagonal tile, LAUUM as
    /// cuBLAS's triangular product on a copy of the tile's lower triangle, the panel steps as
    /// cuBLAS's ?trsm, ?syrk/?herk and ?trmm.
    Inverse,
    /// LU's update and interchanges on the rows from the step's first ([`KernelArgs::Pivots`]):
    /// cuSOLVER's ?laswp, then for the update cuBLAS's unit lower ?trsm on the step's rows and
    /// ?gemm below them.
    Pivoted,
    /// LU's panel on the rows from the step's first ([`KernelArgs::Panel`]): cuSOLVER's ?getrf, its
    /// interchanges and first zero pivot copied back to the host for the work that gave the slot.
    Panel,
    /// QR's application of a panel's block reflectors to a block column's rows from the step's
    /// first ([`KernelArgs::Reflectors`]): LAPACK's ?larfb for each inner block, as cuBLAS's ?trmm,
    /// ?gemm and ?geam calls.
    Reflected,
    /// QR's panel on the rows from the step's first ([`KernelArgs::QrPanel`]): cuSOLVER's ?geqrf,
    /// then what the block reflectors' T's are made of copied back (the scalars tau, each inner
    /// block's Gram matrix V^H V below its diagonal block by cuBLAS's ?gemm, the diagonal blocks);
    /// the host makes the T's ([`crate::reflector_ts`]) into the slot when the kernel is waited
    /// for.
    QrPanel,
    /// Aasen's kernels on block columns: the interchanges of a panel on a block column's rows from
    /// the step's first ([`KernelArgs::Pivots`]: cuSOLVER's ?laswp), a term of the update
    /// ([`KernelArgs::AasenUpdate`]: cuBLAS's ?gemm), H's terms ([`KernelArgs::AasenHessenberg`]: T
    /// uploaded, cuBLAS's ?gemm with L's block as its adjoint).
    Aasen,
    /// No GPU kernel, for the reason given: runs keep the operation on CPU clusters.
    Absent(&'static str),
}

/// What a kernel takes besides its tiles, given by the work that holds it (the runtime's
/// `Workload::kernel_args`) to a device's kernel, which has no other way to reach it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum KernelArgs {
    /// Nothing: the tiles are the whole of the kernel's input.
    #[default]
    None,
    /// LU's update or interchanges of step k ([`Op::LuUpdate`], [`Op::LuSwap`]).
    Pivots {
        /// The step's first row in the block columns: the kernel works on the rows from it down.
        first: usize,
        /// The panel's interchanges, local to those rows: row i swapped with `ipiv[i] >= i`, in
        /// order.
        ipiv: Vec<usize>,
    },
    /// LU's panel of step k ([`Op::LuPanel`]): the kernel factors the block column's rows from
    /// `first` and leaves its interchanges and first zero pivot in `found` before its wait returns.
    Panel {
        /// The step's first row in the block column.
        first: usize,
        /// Where the kernel leaves what the panel found, for the work that gave it.
        found: PanelSlot,
    },
    /// QR's application of step k's block reflectors to a block column ([`Op::Unmqr`] on block
    /// columns): C <- Q^H C on the block column's rows from `first`, the reflectors those of the
    /// panel's rows from `first` (all of a panel that holds only those rows).
    Reflectors {
        /// The step's first row in the block columns.
        first: usize,
        /// The T's of the panel's block reflectors (inner block x the panel's columns), in the
        /// tiles' precision.
        t: std::sync::Arc<crate::AnyMat>,
    },
    /// QR's panel of step k ([`Op::Geqrt`] on block columns): the kernel factors the block column's
    /// rows from `first` in block reflectors of `inner` columns and leaves their T's (`inner` x the
    /// panel's columns, the tile's precision) in `found` before its wait returns.
    QrPanel {
        /// The step's first row in the block column.
        first: usize,
        /// The inner block: the rows of the T's (the panel's width if less).
        inner: usize,
        /// Where the kernel leaves the T's, for the work that gave it.
        found: ReflectorSlot,
    },
    /// Aasen's update of a block column C by an earlier one L ([`Op::LdltColumnUpdate`]): C's rows
    /// from `first` less L's rows from `first` times C's rows from `block` (as many as L has
    /// columns, above `first`).
    AasenUpdate {
        /// The first row updated, in both block columns.
        first: usize,
        /// The first row of C's block that multiplies L.
        block: usize,
    },
    /// Aasen's terms of H's block column ([`Op::LdltColumnHessenberg`]): C's rows from `top` (as
    /// many as T has) plus T times the adjoint of L's rows from `source` (as many as C has
    /// columns).
    AasenHessenberg {
        /// A block column of T (its rows those of the H's it adds to, as many columns as L has), in
        /// the tiles' precision.
        t: std::sync::Arc<crate::AnyMat>,
        /// The first row of C written.
        top: usize,
        /// The first row of L's block.
        source: usize,
    },
}

/// What a factored LU panel found besides its block column: the interchanges, local to the rows
/// from the step's first (row i swapped with `ipiv[i] >= i`, in order), and the first column whose
/// pivot was exactly zero, local to the panel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PanelFound {
    /// The interchanges, one per column of the panel.
    pub ipiv: Vec<usize>,
    /// The first column with an exactly zero pivot, if any.
    pub zero: Option<usize>,
}

/// Where a device's panel kernel leaves what the work needs from it besides its tiles (LU's
/// interchanges, [`PanelSlot`]; QR's T's, [`ReflectorSlot`]): shared between the work that made it
/// and the kernel, filled once by the kernel before the kernel's wait returns, so that the tasks
/// the graph orders after the panel read it. Two slots are equal when they are the same slot.
pub struct Slot<X>(std::sync::Arc<std::sync::Mutex<Option<X>>>);

/// Where a device's LU panel kernel leaves what it found ([`KernelArgs::Panel`]).
pub type PanelSlot = Slot<PanelFound>;

/// Where a device's QR panel kernel leaves its block reflectors' T's ([`KernelArgs::QrPanel`]), in
/// the tile's precision.
pub type ReflectorSlot = Slot<std::sync::Arc<crate::AnyMat>>;

impl<X: Clone> Slot<X> {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves what the panel found (a second call replaces it).
    pub fn fill(&self, found: X) {
        *self.lock() = Some(found);
    }

    /// What the panel found, once its kernel has ended; `None` before (or when it ran elsewhere).
    pub fn found(&self) -> Option<X> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<X>> {
        // A panicked filler leaves either nothing or a whole value: the data stays usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<X> Default for Slot<X> {
    fn default() -> Self {
        Self(Default::default())
    }
}

impl<X> Clone for Slot<X> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<X> PartialEq for Slot<X> {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<X> Eq for Slot<X> {}

impl<X> std::fmt::Debug for Slot<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let filled = self.0.lock().map_or(true, |x| x.is_some());
        f.debug_struct("Slot").field("filled", &filled).finish()
    }
}

/// Where a platform model takes an operation's rate from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateSource {
    /// Its own measurement (calibration, or a paper's table).
    Measured,
    /// The rate of another operation of the same shape of work, when the model has no measurement
    /// of its own (the presets' assumption for the kernels of LU, QR, LDL^T and the inverse, said
    /// in their descriptions).
    Like(Op),
}

impl Op {
    /// One operation of each kind: [`Op::ALL`] and a plain [`Op::MatMul`] (traces and reports group
    /// tasks by kind, see [`Op::same_kind`]).
    pub const KINDS: [Op; Op::ALL.len() + 1] = {
        let mut kinds = [Op::MatMul(MatMul::ACCUMULATE); Op::ALL.len() + 1];
        let mut i = 0;
        while i < Op::ALL.len() {
            kinds[i] = Op::ALL[i];
            i += 1;
        }
        kinds
    };

    /// Whether two operations are of the same kind (equal, or both matrix products whatever their
    /// parameters).
    pub fn same_kind(self, other: Op) -> bool {
        self.name() == other.name()
    }

    /// Everything declared about the operation, in one entry per operation: its name, accesses,
    /// calls, rate source, shape check and flop counts.
    pub fn codelet(self) -> Codelet {
        use Blas::{Add, Product, RankK, Solve as Trsm};
        if let Some(codelet) = self
            .family_work_codelet()
            .or_else(|| self.aasen_codelet())
            .or_else(|| self.inverse_codelet())
        {
            return codelet;
        }
        let entry = Declared;
        let blas = |name, reads, call, rate| {
            entry(
                name,
                reads,
                1,
                CpuCall::Blas(call),
                GpuCall::Blas(call),
                rate,
            )
        };
        // Solves at TRSM's rate and products at GEMM's where a model has none of their own (the
        // presets'). A general product's tasks are keyed as GEMM's (`KernelKey::of_task`).
        let measured = RateSource::Measured;
        let (like_trsm, like_gemm) = (RateSource::Like(Op::Trsm), RateSource::Like(Op::GemmNt));
        let (update, update_trans) = (
            Product(MatMul::new(false, false, -1.0, 1.0)),
            Product(MatMul::new(true, false, -1.0, 1.0)),
        );
        // The counts are LAPACK Working Note 41's (additions plus multiplications) unless said
        // otherwise, (m, n) the last operand's shape; a count with a division is written over one
        // so that it is exact in f64.
        match self {
            // n^3/6 + n^2/2 + n/3 multiplications, n^3/6 - n/6 additions; modelled rates quote
            // Cojean et al.'s m^3/3.
            Op::Potrf => entry("potrf", 0, 1, CpuCall::Potrf, GpuCall::Potrf, measured)
                .work(|s| square("A", s.written()), |s| potrf_flops(s.mn().0))
                .modelled_as(|s| s.mn().0 * s.mn().0 * s.mn().0 / 3.0)
                .on_critical_path(),
            // m n (n+1)/2 multiplications and m n (n-1)/2 additions.
            Op::Trsm => blas("trsm", 1, Trsm(Solve::RightAdjoint), measured)
                .work(
                    |s| expect("L", s.get(0), (s.written().1, s.written().1)),
                    |s| s.mn().0 * s.mn().1 * s.mn().1,
                )
                .on_critical_path(),
            // k n (n+1)/2 multiplications and as many additions; modelled rates quote k m^2.
            Op::Syrk => blas("syrk", 1, RankK, measured)
                .work(
                    |s| {
                        let w = s.written();
                        square("C", w)?;
                        expect("A", s.get(0), (w.0, s.get(0).1))
                    },
                    |s| s.cols(0) * s.mn().0 * (s.mn().0 + 1.0),
                )
                .modelled_as(|s| s.cols(0) * s.mn().0 * s.mn().0),
            Op::GemmNt => blas("gemm", 2, Product(MatMul::SUBTRACT_NT), measured).work(
                |s| {
                    let (w, k) = (s.written(), s.get(0).1);
                    expect("A", s.get(0), (w.0, k))?;
                    expect("B", s.get(1), (w.1, k))
                },
                |s| 2.0 * s.mn().0 * s.mn().1 * s.cols(0),
            ),
            Op::SolveLower => blas("solve_lower", 1, Trsm(Solve::Left), like_trsm)
                .work(left_triangle, |s| s.mn().1 * s.mn().0 * s.mn().0),
            Op::SolveLowerTrans => {
                blas("solve_lower_trans", 1, Trsm(Solve::LeftAdjoint), like_trsm)
                    .work(left_triangle, |s| s.mn().1 * s.mn().0 * s.mn().0)
            }
            Op::Update => blas("update", 2, update, like_gemm).work(
                |s| {
                    let (w, k) = (s.written(), s.get(0).1);
                    expect("L", s.get(0), (w.0, k))?;
                    expect("X", s.get(1), (k, w.1))
                },
                |s| 2.0 * s.mn().0 * s.mn().1 * s.cols(0),
            ),
            Op::UpdateTrans => blas("update_trans", 2, update_trans, like_gemm).work(
                |s| {
                    let (w, k) = (s.written(), s.get(0).0);
                    expect("L", s.get(0), (k, w.0))?;
                    expect("X", s.get(1), (k, w.1))
                },
                |s| 2.0 * s.mn().0 * s.mn().1 * s.rows(0),
            ),
            Op::Add => blas("add", 1, Add, like_gemm).work(
                |s| expect("X", s.get(0), s.written()),
                |s| s.mn().0 * s.mn().1,
            ),
            // No division by the unit diagonal: m (m - 1) / 2 multiply-adds a column.
            Op::SolveUnitLower => {
                blas("solve_unit_lower", 1, Trsm(Solve::LeftUnitLower), like_trsm)
                    .work(left_triangle, |s| s.mn().1 * s.mn().0 * (s.mn().0 - 1.0))
            }
            Op::SolveUpper => blas("solve_upper", 1, Trsm(Solve::LeftUpper), like_trsm)
                .work(left_triangle, |s| s.mn().1 * s.mn().0 * s.mn().0),
            Op::MatMul(p) => blas("matmul", 2, Product(p), measured).work(
                |s| {
                    let (p, w) = (s.product(), s.written());
                    let k = p.op_a(s.get(0)).1;
                    expect("op(A)", p.op_a(s.get(0)), (w.0, k))?;
                    expect("op(B)", p.op_b(s.get(1)), (k, w.1))
                },
                |s| 2.0 * s.mn().0 * s.mn().1 * s.product().op_a(s.get(0)).1 as f64,
            ),

            _ => unreachable!(
                "{self:?} is declared by Op::family_work_codelet or Op::inverse_codelet"
            ),
        }
    }

    /// The codelets of the inverse's kernels (TRTRI, LAUUM and their panel steps, and the inverse
    /// of a diagonal tile's unit factor that Cholesky's panel solves may use), each rated as the
    /// Cholesky kernel of the same shape of work where a model has no measurement of its own (a
    /// triangular product as a triangular solve); `None` for any other operation.
    fn inverse_codelet(self) -> Option<Codelet> {
        let inverse = |name, reads, like| {
            Declared(
                name,
                reads,
                1,
                CpuCall::Inverse,
                GpuCall::Inverse,
                RateSource::Like(like),
            )
        };
        let codelet = match self {
            // n^3/6 + n^2/2 + n/3 multiplications and n^3/6 - n^2/2 + n/3 additions.
            Op::Trtri => inverse("trtri", 0, Op::Potrf)
                .work(|s| square("A", s.written()), |s| trtri_flops(s.mn().0))
                .on_critical_path(),
            // As POTRF's.
            Op::Lauum => inverse("lauum", 0, Op::Potrf)
                .work(|s| square("A", s.written()), |s| potrf_flops(s.mn().0)),
            Op::SolveRight => inverse("solve_right", 1, Op::Trsm)
                .work(
                    |s| expect("L", s.get(0), (s.written().1, s.written().1)),
                    |s| s.mn().0 * s.mn().1 * s.mn().1,
                )
                .on_critical_path(),
            Op::SyrkAdjoint => inverse("syrk_adjoint", 1, Op::Syrk).work(
                |s| {
                    let w = s.written();
                    square("C", w)?;
                    expect("A", s.get(0), (s.get(0).0, w.0))
                },
                |s| s.rows(0) * s.mn().0 * (s.mn().0 + 1.0),
            ),
            Op::TrmmAdjoint => inverse("trmm_adjoint", 1, Op::Trsm)
                .work(left_triangle, |s| s.mn().1 * s.mn().0 * s.mn().0),
            Op::PanelInverse => Declared(
                "panel_inverse",
                0,
                1,
                CpuCall::UnitInverse,
                GpuCall::Absent("a GPU's panel solves are cuBLAS's TRSM, fast as they are"),
                RateSource::Like(Op::Potrf),
            )
            .work(|s| square("A", s.written()), |s| trtri_flops(s.mn().0))
            .on_critical_path(),
            _ => return None,
        };
        Some(codelet)
    }

    /// The codelets of the kernels that run through their family's own work (LU's interchanges,
    /// QR's T's beside the tiles), each rated as the Cholesky kernel of the same shape of work
    /// where a model has no measurement of its own: LU's on GPUs too, with what they take or give
    /// besides their tiles as their kernels' arguments ([`KernelArgs`]), QR's on CPU clusters only;
    /// `None` for any other operation.
    fn family_work_codelet(self) -> Option<Codelet> {
        const NO_QR_GPU: &str = "QR's factorisations run on CPU clusters only";
        // On GPUs too: the panel with a slot for what it finds, the update and the interchanges
        // with the panel's interchanges as their arguments.
        let lu_gpu = |gpu, (name, reads, writes), like| {
            Declared(
                name,
                reads,
                writes,
                CpuCall::Pivoted,
                gpu,
                RateSource::Like(like),
            )
        };
        let qr = |name, reads, writes, like| {
            cpu_only(CpuCall::Reflectors, NO_QR_GPU, (name, reads, writes), like)
        };
        let codelet = match self {
            // ?getrf of an m x n matrix, m >= n.
            Op::LuPanel => lu_gpu(GpuCall::Panel, ("lu_panel", 0, 1), Op::Potrf)
                .work(
                    |s| tall("A", s.written(), "a panel"),
                    |s| getrf_flops(s.mn()),
                )
                .on_critical_path(),
            // The unit triangular solve of the first b rows (c b (b - 1)) and the product below.
            Op::LuUpdate => {
                lu_gpu(GpuCall::Pivoted, ("lu_update", 1, 1), Op::GemmNt).work(panel_rows, |s| {
                    let ((m, n), b) = (s.mn(), s.cols(0));
                    n * b * (b - 1.0) + 2.0 * (m - b) * b * n
                })
            }
            // Memory traffic alone: modelled by the entries it moves (a rate of zero flops would
            // model it free).
            Op::LuSwap => lu_gpu(GpuCall::Pivoted, ("lu_swap", 1, 1), Op::GemmNt)
                .work(panel_rows, |_| 0.0)
                .modelled_as(|s| s.mn().0 * s.mn().1),
            // ?geqrf of an m x n matrix, k = min(m, n) reflectors; on GPUs too as a block
            // column's panel, with a slot for its T's.
            Op::Geqrt => Declared(
                "geqrt",
                0,
                1,
                CpuCall::Reflectors,
                GpuCall::QrPanel,
                RateSource::Like(Op::Potrf),
            )
            .work(|_| Ok(()), |s| geqrf_flops(s.mn()))
            .on_critical_path(),
            // ?ormqr from the left: k reflectors of m rows on n columns, 4 n m k - 2 n k^2 + 3 n k.
            Op::Unmqr => Declared(
                "unmqr",
                1,
                1,
                CpuCall::Reflectors,
                GpuCall::Reflected,
                RateSource::Like(Op::GemmNt),
            )
            .work(
                |s| expect("V", s.get(0), (s.written().0, s.get(0).1)),
                |s| {
                    let ((m, n), k) = (s.mn(), s.cols(0));
                    4.0 * n * m * k - 2.0 * n * k * k + 3.0 * n * k
                },
            ),
            // The leading terms PLASMA counts: a triangle of order n on m x n rows, 2 m n^2; on a
            // triangle, 2 n^3 / 3; their applications to c columns, 4 m k c and 2 k^2 c.
            Op::Tsqrt => qr("tsqrt", 0, 2, Op::Potrf)
                .work(stacked, |s| 2.0 * s.rows(1) * s.mn().1 * s.mn().1)
                .on_critical_path(),
            Op::Tsmqr => qr("tsmqr", 1, 2, Op::GemmNt)
                .work(stacked_apply, |s| 4.0 * s.rows(0) * s.cols(0) * s.mn().1),
            Op::Ttqrt => qr("ttqrt", 0, 2, Op::Potrf)
                .work(stacked, |s| 2.0 * s.mn().1 * s.mn().1 * s.mn().1 / 3.0)
                .on_critical_path(),
            Op::Ttmqr => qr("ttmqr", 1, 2, Op::GemmNt)
                .work(stacked_apply, |s| 2.0 * (s.cols(0) * s.cols(0)) * s.mn().1),
            _ => return None,
        };
        Some(codelet)
    }

    /// The codelets of the symmetric indefinite family's kernels (Aasen's), which read the matrix
    /// through the permutation beside the tiles: on CPU clusters only, rated as the Cholesky kernel
    /// of the same shape of work, but for the block-column graph's interchanges and products, which
    /// run on GPUs too ([`GpuCall::Aasen`]); `None` for any other operation.
    fn aasen_codelet(self) -> Option<Codelet> {
        const NO_LDLT_GPU: &str =
            "the symmetric indefinite family's kernels run on CPU clusters only";
        let aasen = |name, reads, writes, like| {
            cpu_only(CpuCall::Aasen, NO_LDLT_GPU, (name, reads, writes), like)
        };
        // The block-column graph's kernels that run on GPUs too, rated as products.
        let aasen_gpu = |name| {
            let like = RateSource::Like(Op::GemmNt);
            Declared(name, 1, 1, CpuCall::Aasen, GpuCall::Aasen, like)
        };
        let codelet = match self {
            // H's block as dense products of T's block row and L's, by groups of H's rows that
            // skip most of the zeros of T's triangular blocks (`hessenberg_groups`).
            Op::LdltHessenberg => aasen("ldlt_hessenberg", 2, 1, Op::GemmNt).work(
                |s| aasen_product(s, s.get(1).1, (s.written().1, s.get(1).1)),
                |s| {
                    let (m, w) = (s.written().0, s.get(0).1);
                    hessenberg_groups(m, w)
                        .map(|(rows, cols)| 2.0 * s.mn().1 * rows.len() as f64 * cols.len() as f64)
                        .sum()
                },
            ),
            // The product, its five b x b x b products and two unit triangular solves (b^2 (b - 1)
            // each).
            Op::LdltDiagonal => aasen("ldlt_diagonal", 2, 1, Op::GemmNt).work(
                |s| {
                    square("T", s.written())?;
                    aasen_product(s, s.get(1).0, (s.get(1).0, s.written().1))
                },
                |s| {
                    let m = s.mn().0;
                    2.0 * m * m * s.cols(0) + 12.0 * m * m * m - 2.0 * m * m
                },
            ),
            Op::LdltUpdate => aasen("ldlt_update", 2, 1, Op::GemmNt).work(
                |s| aasen_product(s, s.get(1).0, (s.get(1).0, s.written().1)),
                |s| 2.0 * s.mn().0 * s.mn().1 * s.cols(0),
            ),
            // The panel's LU and a unit triangular solve for T's subdiagonal block.
            Op::LdltPanel => aasen("ldlt_panel", 1, 1, Op::Potrf)
                .work(
                    |s| expect("L", s.get(0), (s.written().1, s.written().1)),
                    |s| {
                        let (m, n) = s.mn();
                        let lu = if m >= n {
                            getrf_flops((m, n))
                        } else {
                            getrf_flops((m, m)) + m * m * (n - m)
                        };
                        lu + n * n * (n - 1.0)
                    },
                )
                .on_critical_path(),
            // Memory traffic alone, as LU's; on GPUs too with the panel's interchanges as its
            // arguments (the block-column graph's; the tile graph's writes several tiles and stays
            // on CPU clusters).
            Op::LdltSwap => aasen_gpu("ldlt_swap")
                .work(
                    |s| expect("P", s.get(0), (s.written().0, s.get(0).1)),
                    |_| 0.0,
                )
                .modelled_as(|s| s.mn().0 * s.mn().1),
            Op::LdltGather => aasen("ldlt_gather", 0, 1, Op::GemmNt)
                .work(|_| Ok(()), |_| 0.0)
                .modelled_as(|s| s.mn().0 * s.mn().1),
            Op::LdltColumnUpdate => aasen_gpu("ldlt_column_update").work(
                |s| expect("L", s.get(0), (s.written().0, s.get(0).1)),
                |s| 2.0 * s.mn().0 * s.cols(0) * s.mn().1,
            ),
            // Whole block columns on a device, the blocks in keys: the kernel checks the rows its
            // arguments name against its operands.
            Op::LdltColumnHessenberg => aasen_gpu("ldlt_column_hessenberg")
                .work(|_| Ok(()), |s| 2.0 * s.rows(1) * s.cols(0) * s.cols(1)),
            // The panel's LU, the unit triangular solve of U's block row, the rows below updated.
            Op::LdltBand => aasen("ldlt_band", 1, 1, Op::Potrf)
                .work(
                    |s| {
                        tall("P", s.get(0), "a panel")?;
                        expect("P", s.get(0), (s.get(0).0, s.written().0))
                    },
                    |s| {
                        let (rows, b, n) = (s.rows(0), s.cols(0), s.mn().1);
                        getrf_flops((rows, b)) + b * (b - 1.0) * n + 2.0 * (rows - b) * b * n
                    },
                )
                .on_critical_path(),
            _ => return None,
        };
        Some(codelet)
    }

    /// Short lower-case name, as used in traces and reports.
    pub fn name(self) -> &'static str {
        self.codelet().name
    }

    /// The operation whose [`Op::name`] is `name`, if any.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether the operation is a step's panel work, on its graph's critical path
    /// ([`Codelet::panel`]: POTRF, TRSM, the inverse's TRTRI and panel solve, the panels of LU, QR
    /// and Aasen).
    pub fn on_critical_path(self) -> bool {
        self.codelet().panel
    }

    /// Whether GPUs have a kernel for the operation (its codelet's [`GpuCall`] is not
    /// [`GpuCall::Absent`]); runs restrict the others to CPU clusters.
    pub fn runs_on_gpus(self) -> bool {
        !matches!(self.codelet().gpu, GpuCall::Absent(_))
    }

    /// Whether the operation reads or writes row interchanges beside its tiles (LU's): the runtime
    /// runs it through the work that holds them, not [`crate::Backend::run`] alone.
    pub fn pivots(self) -> bool {
        matches!(self.codelet().cpu, CpuCall::Pivoted)
    }

    /// Whether the operation is one of QR's, which write or read the block reflectors' T's beside
    /// their tiles: the runtime runs them through the work that holds the T's.
    pub fn is_qr(self) -> bool {
        matches!(self.codelet().cpu, CpuCall::Reflectors)
    }

    /// Number of tiles the operation overwrites (they come after the ones it only reads).
    pub fn writes(self) -> usize {
        self.codelet().writes
    }

    /// Number of operands: [`Op::reads`] + [`Op::writes`].
    pub fn operands(self) -> usize {
        self.reads() + self.writes()
    }

    /// Number of tiles the operation only reads (the written ones come after them).
    pub fn reads(self) -> usize {
        self.codelet().reads
    }

    /// Checks that `shapes` (reads first, the written tiles last) fit the operation, and says which
    /// operand is wrong otherwise.
    pub fn check_shapes(self, shapes: &[Shape]) -> Result<(), String> {
        let codelet = self.codelet();
        let operands = codelet.reads + codelet.writes;
        if shapes.len() != operands {
            return Err(format!(
                "expected {operands} operands, got {}",
                shapes.len()
            ));
        }
        (codelet.check)(Shapes::of(self, &codelet, shapes))
    }

    /// Exact floating-point operation count (additions plus multiplications, LAPACK Working Note 41
    /// conventions) for operands of these shapes, reads first. Shapes are assumed valid (see
    /// [`Op::check_shapes`]).
    pub fn flops(self, shapes: &[Shape]) -> f64 {
        let codelet = self.codelet();
        (codelet.flops)(Shapes::of(self, &codelet, shapes))
    }

    /// The count modelled rates are quoted in for operands of these shapes ([`Codelet`]'s
    /// `leading`), in a real precision. Shapes are assumed valid.
    pub fn leading_flops(self, shapes: &[Shape]) -> f64 {
        let codelet = self.codelet();
        (codelet.leading)(Shapes::of(self, &codelet, shapes))
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An operation's name, reads, writes, calls and rate source (as [`Codelet`]'s fields), before its
/// shape check and flop counts complete it into a [`Codelet`] ([`Declared::work`]: no entry can
/// leave them out).
struct Declared(&'static str, usize, usize, CpuCall, GpuCall, RateSource);

impl Declared {
    /// The codelet, with its shape check and exact flop count (modelled rates quote the same count
    /// unless [`Codelet::modelled_as`] sets another).
    fn work(self, check: CheckShapes, flops: CountFlops) -> Codelet {
        let Declared(name, reads, writes, cpu, gpu, rate) = self;
        Codelet {
            name,
            reads,
            writes,
            cpu,
            gpu,
            rate,
            check,
            flops,
            leading: flops,
            panel: false,
        }
    }
}

impl Codelet {
    /// The same codelet with modelled rates quoted in `leading`'s count.
    fn modelled_as(self, leading: CountFlops) -> Self {
        Self { leading, ..self }
    }

    /// The same codelet marked as a step's panel work ([`Codelet::panel`]).
    fn on_critical_path(self) -> Self {
        Self {
            panel: true,
            ..self
        }
    }
}

/// A codelet's shape check: ok, or which operand is wrong.
pub type CheckShapes = fn(Shapes<'_>) -> Result<(), String>;

/// A codelet's flop count.
pub type CountFlops = fn(Shapes<'_>) -> f64;

/// The shapes of one task's operands (reads first, the written tiles last) with its operation: what
/// a codelet's shape check and flop counts read. Made by [`Op::check_shapes`], [`Op::flops`] and
/// [`Op::leading_flops`], which check the operand count first.
#[derive(Debug, Clone, Copy)]
pub struct Shapes<'a> {
    op: Op,
    shapes: &'a [Shape],
    /// The operands `op` only reads (the first written one follows them).
    reads: usize,
}

impl<'a> Shapes<'a> {
    /// The operands `shapes` of `op`, whose codelet is `codelet` (read once by the caller).
    fn of(op: Op, codelet: &Codelet, shapes: &'a [Shape]) -> Self {
        Self {
            op,
            shapes,
            reads: codelet.reads,
        }
    }
}

impl Shapes<'_> {
    /// Operand `i`'s shape.
    pub fn get(&self, i: usize) -> Shape {
        self.shapes[i]
    }

    /// The first written tile's shape.
    pub fn written(&self) -> Shape {
        self.shapes[self.reads]
    }

    /// The last operand's rows and columns: the (m, n) the counts are written in.
    pub fn mn(&self) -> (f64, f64) {
        let w = self.shapes[self.shapes.len() - 1];
        (w.0 as f64, w.1 as f64)
    }

    /// Operand `i`'s rows.
    pub fn rows(&self, i: usize) -> f64 {
        self.shapes[i].0 as f64
    }

    /// Operand `i`'s columns.
    pub fn cols(&self, i: usize) -> f64 {
        self.shapes[i].1 as f64
    }

    /// The parameters of a general product (a plain accumulation for any other operation).
    pub fn product(&self) -> MatMul {
        match self.op {
            Op::MatMul(p) => p,
            _ => MatMul::ACCUMULATE,
        }
    }
}

/// The declaration of a family's kernel that runs through the family's own work: `cpu`'s call on
/// CPU clusters only (`why` there is no GPU kernel), rated as `like` where a model has no
/// measurement of its own.
fn cpu_only(
    cpu: CpuCall,
    why: &'static str,
    (name, reads, writes): (&'static str, usize, usize),
    like: Op,
) -> Declared {
    Declared(
        name,
        reads,
        writes,
        cpu,
        GpuCall::Absent(why),
        RateSource::Like(like),
    )
}

/// Ok when the operand `what` is `want`, else the error that says what it is.
fn expect(what: &str, got: Shape, want: Shape) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{what} is {}x{}, expected {}x{}",
            got.0, got.1, want.0, want.1
        ))
    }
}

/// Ok when the operand `what` is square.
fn square(what: &str, shape: Shape) -> Result<(), String> {
    expect(what, shape, (shape.0, shape.0))
}

/// The check of a solve or product from the left by a triangle: L (m x m) on the written m x r.
fn left_triangle(s: Shapes<'_>) -> Result<(), String> {
    expect("L", s.get(0), (s.written().0, s.written().0))
}

/// The check of LU's panel applied to a block column: P at least as tall as wide, as tall as it.
fn panel_rows(s: Shapes<'_>) -> Result<(), String> {
    tall("P", s.get(0), "a panel")?;
    expect("P", s.get(0), (s.written().0, s.get(0).1))
}

/// The check of QR's stacked factorisations: R a triangle at the top of its tile (a ragged last
/// tile column leaves rows below it), B as wide as R.
fn stacked(s: Shapes<'_>) -> Result<(), String> {
    let (r, b) = (s.get(0), s.get(1));
    tall("R", r, "a triangle")?;
    expect("B", b, (b.0, r.1))
}

/// The check of the stacked factorisations' applications: A1 has a row for each reflector of V, A2
/// V's rows and A1's columns.
fn stacked_apply(s: Shapes<'_>) -> Result<(), String> {
    let (v, a1, a2) = (s.get(0), s.get(1), s.get(2));
    if a1.0 < v.1 {
        return Err(format!(
            "A1 is {}x{}, it needs a row for each of the {} reflectors",
            a1.0, a1.1, v.1
        ));
    }
    expect("A2", a2, (v.0, a1.1))
}

/// The groups of rows of H(m, k) = T L^H ([`Op::LdltHessenberg`], H m x k, T's block row m x w) and
/// the columns of T's block row each group reads: T's block row is [T(m, m-1) T(m, m) T(m, m+1)],
/// where T(m, m-1) (m x m, upper triangular: row j is zero left of column j) is absent for the
/// second block row (w <= 2m) and T(m, m+1) = T(m+1, m)^H (m x r, r = w - 2m or w - m, lower
/// trapezoidal: row j is zero right of column j). Rows c0..c1 read T's columns from c0 of the first
/// block to c1 of the last, so that each group is one dense product and skips only exact zeros
/// (rounding as the whole product's: the same terms in the same order); four groups do 3/4 of the
/// whole product's flops (2 m k (2m + m/4) of 2 m k 3m), where a triangular product that does 2/3
/// made Aasen's factor ratio on KKT matrices 35-45% worse (2026-12-02).
pub fn hessenberg_groups(m: usize, w: usize) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
    let (first, last) = if w > 2 * m {
        (m, w - 2 * m)
    } else {
        (0, w.saturating_sub(m))
    };
    let size = (m / 4).max(16);
    (0..m).step_by(size).map(move |c0| {
        let c1 = (c0 + size).min(m);
        let from = if first > 0 { c0 } else { 0 };
        (c0..c1, from..first + m + last.min(c1))
    })
}

/// The check of Aasen's products: the left operand as tall as the written block and `inner` wide,
/// the right one `right`.
fn aasen_product(s: Shapes<'_>, inner: usize, right: Shape) -> Result<(), String> {
    expect("the left operand", s.get(0), (s.written().0, inner))?;
    expect("the right operand", s.get(1), right)
}

/// Ok when the operand `what` (`shape`) has at least as many rows as columns, as `needs` (a panel,
/// a triangle) must; else the error that says so.
fn tall(what: &str, shape: Shape, needs: &str) -> Result<(), String> {
    if shape.0 < shape.1 {
        Err(format!(
            "{what} is {}x{}, {needs} needs at least as many rows as columns",
            shape.0, shape.1
        ))
    } else {
        Ok(())
    }
}

/// ?potrf of order n: n^3/3 + n^2/2 + n/6 (also ?lauum's).
fn potrf_flops(n: f64) -> f64 {
    (2.0 * n * n * n + 3.0 * n * n + n) / 6.0
}

/// ?trtri of order n: n^3/3 + 2n/3.
fn trtri_flops(n: f64) -> f64 {
    (n * n * n + 2.0 * n) / 3.0
}

/// ?getrf of an m x n matrix, m >= n: m n^2 - n^3/3 - n^2/2 + 5n/6.
fn getrf_flops((m, n): (f64, f64)) -> f64 {
    (6.0 * m * n * n - 2.0 * n * n * n - 3.0 * n * n + 5.0 * n) / 6.0
}

/// ?geqrf of an m x n matrix: m >= n: 2 m n^2 - 2 n^3/3 + m n + n^2 + 14 n/3; m < n: 2 n m^2 - 2
/// m^3/3 + 3 n m - m^2 + 14 m/3.
fn geqrf_flops((m, n): (f64, f64)) -> f64 {
    if m >= n {
        (6.0 * m * n * n - 2.0 * n * n * n + 3.0 * m * n + 3.0 * n * n + 14.0 * n) / 3.0
    } else {
        (6.0 * n * m * m - 2.0 * m * m * m + 9.0 * n * m - 3.0 * m * m + 14.0 * m) / 3.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_counts_match_the_paper_leading_terms() {
        let b = 960.0_f64;
        let s = (960, 960);
        // Leading terms b^3/3, b^3, b^3, 2 b^3 (Cojean et al. (2016)); lower-order terms are small.
        let close = |x: f64, y: f64| (x - y).abs() / y < 2.0 / b;
        assert!(close(Op::Potrf.flops(&[s]), b * b * b / 3.0));
        assert!(close(Op::Trsm.flops(&[s, s]), b * b * b));
        assert!(close(Op::Syrk.flops(&[s, s]), b * b * b));
        assert_eq!(Op::GemmNt.flops(&[s, s, s]), 2.0 * b * b * b);
    }

    #[test]
    fn every_operation_is_listed_once_with_a_check_and_counts() {
        assert_eq!(Op::ALL.len(), 35);
        let names: std::collections::HashSet<&str> = Op::ALL.iter().map(|op| op.name()).collect();
        assert_eq!(names.len(), Op::ALL.len());
        for op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
            let shapes = vec![(8, 8); op.operands()];
            assert!(op.check_shapes(&shapes).is_ok(), "{op}");
            assert!(op.check_shapes(&shapes[1..]).is_err(), "{op}");
            assert!(
                op.flops(&shapes) >= 0.0 && op.leading_flops(&shapes) > 0.0,
                "{op}"
            );
        }
        // Modelled rates quote Cojean et al.'s leading terms, and the entries a swap moves.
        let s = (10, 10);
        assert_eq!(Op::Potrf.leading_flops(&[s]), 1000.0 / 3.0);
        assert_eq!(Op::Potrf.flops(&[s]), 385.0);
        assert_eq!(Op::Syrk.leading_flops(&[s, s]), 1000.0);
        assert_eq!(Op::Syrk.flops(&[s, s]), 1100.0);
        assert_eq!(Op::LuSwap.leading_flops(&[(30, 10), (30, 10)]), 300.0);
        assert_eq!(Op::LuSwap.flops(&[(30, 10), (30, 10)]), 0.0);
        assert_eq!(Op::GemmNt.leading_flops(&[s, s, s]), 2000.0);
    }

    #[test]
    fn small_exact_counts() {
        // 1x1 POTRF is one square root: 1/3 + 1/2 + 1/6 = 1.
        assert_eq!(Op::Potrf.flops(&[(1, 1)]), 1.0);
        // 2x2: l11 = sqrt, l21 = a21 / l11, l22 = sqrt(a22 - l21^2): 5 flops.
        assert!((Op::Potrf.flops(&[(2, 2)]) - 5.0).abs() < 1e-12);
        // Rectangular GEMM 3x5 with k = 7.
        assert_eq!(Op::GemmNt.flops(&[(3, 7), (5, 7), (3, 5)]), 210.0);
        assert_eq!(Op::UpdateTrans.flops(&[(7, 3), (7, 2), (3, 2)]), 84.0);
    }

    #[test]
    fn matmul_shapes_follow_the_transposes() {
        let nt = Op::MatMul(MatMul::new(false, true, 2.0, 0.5));
        assert!(nt.check_shapes(&[(3, 7), (5, 7), (3, 5)]).is_ok());
        assert_eq!(nt.flops(&[(3, 7), (5, 7), (3, 5)]), 210.0);
        let tn = Op::MatMul(MatMul::new(true, false, 1.0, 1.0));
        assert!(tn.check_shapes(&[(7, 3), (7, 5), (3, 5)]).is_ok());
        let err = tn.check_shapes(&[(3, 7), (7, 5), (3, 5)]).unwrap_err();
        assert!(err.contains("op(A) is 7x3"), "{err}");
        let Op::MatMul(p) = nt else { unreachable!() };
        assert_eq!(
            (p.alpha(), p.beta(), p.with_beta(1.0).beta()),
            (2.0, 0.5, 1.0)
        );
        assert!(nt.same_kind(Op::KINDS[Op::KINDS.len() - 1]) && !nt.same_kind(Op::GemmNt));
        assert_eq!(Op::from_name("matmul"), None);
    }

    #[test]
    fn codelets_agree_with_themselves() {
        let on_gpus: Vec<&str> = Op::KINDS
            .into_iter()
            .filter(|op| op.runs_on_gpus())
            .map(Op::name)
            .collect();
        assert_eq!(
            on_gpus,
            [
                "potrf",
                "trsm",
                "syrk",
                "gemm",
                "solve_lower",
                "solve_lower_trans",
                "update",
                "update_trans",
                "add",
                "trtri",
                "lauum",
                "solve_right",
                "syrk_adjoint",
                "trmm_adjoint",
                "lu_panel",
                "lu_update",
                "lu_swap",
                "geqrt",
                "unmqr",
                "ldlt_swap",
                "ldlt_column_update",
                "ldlt_column_hessenberg",
                "solve_unit_lower",
                "solve_upper",
                "matmul"
            ]
        );
        for op in Op::KINDS {
            let c = op.codelet();
            // A GPU kernel is the CPU's call on the other processor, never another operation.
            match c.gpu {
                GpuCall::Potrf => assert_eq!(c.cpu, CpuCall::Potrf, "{op}"),
                GpuCall::Blas(call) => assert_eq!(c.cpu, CpuCall::Blas(call), "{op}"),
                GpuCall::Inverse => assert_eq!(c.cpu, CpuCall::Inverse, "{op}"),
                GpuCall::Pivoted | GpuCall::Panel => assert_eq!(c.cpu, CpuCall::Pivoted, "{op}"),
                GpuCall::Aasen => assert_eq!(c.cpu, CpuCall::Aasen, "{op}"),
                GpuCall::Reflected | GpuCall::QrPanel => {
                    assert_eq!(c.cpu, CpuCall::Reflectors, "{op}")
                }
                GpuCall::Absent(why) => assert!(!why.is_empty(), "{op}"),
            }
            // A borrowed rate comes from an operation that has its own.
            if let RateSource::Like(like) = c.rate {
                assert_eq!(like.codelet().rate, RateSource::Measured, "{op}");
            }
            assert!(c.writes >= 1 && c.reads <= 2, "{op}");
            if op != Op::MatMul(MatMul::ACCUMULATE) {
                assert_eq!(Op::from_name(c.name), Some(op));
            }
        }
        assert_eq!(
            Op::GemmNt.codelet().cpu,
            CpuCall::Blas(Blas::Product(MatMul::new(false, true, -1.0, 1.0)))
        );
        assert!(Op::LuPanel.pivots() && Op::Tsmqr.is_qr() && !Op::Trtri.is_qr());
        assert_eq!((Op::Tsmqr.reads(), Op::Tsmqr.writes()), (1, 2));
    }

    #[test]
    fn shape_checks_name_the_wrong_operand() {
        assert!(Op::GemmNt.check_shapes(&[(3, 7), (5, 7), (3, 5)]).is_ok());
        let err = Op::GemmNt
            .check_shapes(&[(3, 7), (5, 6), (3, 5)])
            .unwrap_err();
        assert!(err.contains("B is 5x6"), "{err}");
        assert!(Op::Potrf.check_shapes(&[(3, 4)]).is_err());
        assert!(Op::Trsm.check_shapes(&[(4, 4)]).is_err());
        assert!(
            Op::UpdateTrans
                .check_shapes(&[(7, 3), (7, 2), (3, 2)])
                .is_ok()
        );
        assert!(Op::Update.check_shapes(&[(7, 3), (7, 2), (3, 2)]).is_err());
        assert!(Op::Add.check_shapes(&[(7, 2), (7, 2)]).is_ok());
        let err = Op::Add.check_shapes(&[(7, 3), (7, 2)]).unwrap_err();
        assert!(err.contains("X is 7x3"), "{err}");
        assert_eq!(Op::Add.flops(&[(7, 2), (7, 2)]), 14.0);
    }

    #[test]
    fn hessenberg_groups_cover_every_row_and_every_nonzero_of_t() {
        // T's block row [T(m, m-1) T(m, m) T(m, m+1)]: entry (j, c) is structurally non-zero when
        // it lies in the upper triangle of the first block, in the second, or in the lower
        // trapezoid of the third. Every row in exactly one group, every non-zero of its row inside
        // the group's columns; the groups' flops 3/4 of the dense product's for full blocks.
        for (m, w) in [
            (192, 576),
            (192, 384),
            (192, 500),
            (192, 200),
            (64, 192),
            (16, 48),
            (5, 12),
            (1, 2),
        ] {
            let first = if w > 2 * m { m } else { 0 };
            let nonzero = |j: usize, c: usize| {
                if c < first {
                    c >= j
                } else if c < first + m {
                    true
                } else {
                    c - first - m <= j
                }
            };
            let mut seen = vec![0; m];
            let mut entries = 0;
            for (rows, cols) in hessenberg_groups(m, w) {
                entries += rows.len() * cols.len();
                for j in rows {
                    seen[j] += 1;
                    assert!(
                        (0..w).all(|c| !nonzero(j, c) || cols.contains(&c)),
                        "m {m} w {w} row {j}: {cols:?}"
                    );
                }
                assert!(cols.end <= w, "m {m} w {w}: {cols:?}");
            }
            assert!(seen.iter().all(|&s| s == 1), "m {m} w {w}: {seen:?}");
            if (m, w) == (192, 576) {
                assert_eq!(entries, 192 * (2 * 192 + 48), "m {m} w {w}");
            }
        }
    }
}

/// Which stacked QR: a triangle on a full tile (PLASMA's TSQRT, ?tpqrt with l = 0) or on another
/// triangle (TTQRT, l = the bottom's columns: only its upper triangle takes part).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stack {
    /// The bottom tile is full.
    OnTile,
    /// The bottom tile is upper triangular (upper trapezoidal when it has fewer rows than columns).
    OnTriangle,
}

impl Stack {
    /// The stack a stacked QR operation works on (`None` for the tile QR and its application).
    pub fn of(op: Op) -> Option<Stack> {
        match op {
            Op::Tsqrt | Op::Tsmqr => Some(Stack::OnTile),
            Op::Ttqrt | Op::Ttmqr => Some(Stack::OnTriangle),
            _ => None,
        }
    }

    /// The operation that factors this stack (TSQRT or TTQRT).
    pub fn factor_op(self) -> Op {
        match self {
            Stack::OnTile => Op::Tsqrt,
            Stack::OnTriangle => Op::Ttqrt,
        }
    }

    /// The operation that applies this stack's Q (TSMQR or TTMQR).
    pub fn apply_op(self) -> Op {
        match self {
            Stack::OnTile => Op::Tsmqr,
            Stack::OnTriangle => Op::Ttmqr,
        }
    }

    /// Rows of the bottom tile that column `c` of the reflectors (or of the bottom tile) covers,
    /// for a bottom tile of `rows` rows.
    pub(crate) fn rows(self, rows: usize, c: usize) -> usize {
        match self {
            Stack::OnTile => rows,
            Stack::OnTriangle => (c + 1).min(rows),
        }
    }
}
