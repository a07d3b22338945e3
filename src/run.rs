//! The run options every factorisation's builder holds ([`RunConfig`]): where and how its task
//! graph runs (backend, clusters, scheduler, a shared platform), apart from what is the
//! factorisation's own (Cholesky's tile and storage, LU's block width, QR's tree). A builder keeps
//! one in its field `run` and gets the public setters from [`run_options!`], so `Cholesky`, `Lu`,
//! `Qr` and the next family say these options once, the same way.

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_kernels::Precision;
use hetla_kernels::{Backend, Par};
use hetla_runtime::{Platform, SchedulerKind, Tuned};

use crate::plan::SINGLE_TILE_UP_TO;

use crate::{Error, Family, Result};

/// Where and how a builder's runs go (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunConfig {
    pub backend: Backend,
    pub clusters: ClusterSpec,
    pub threads: Option<usize>,
    pub scheduler: SchedulerKind,
    pub platform: Option<Arc<Platform>>,
    /// Distributed runs: how long a rank waits for another before presuming it dead.
    pub progress_timeout: Option<std::time::Duration>,
    /// Whether the user chose the clusters or the scheduler (a builder's defaults are then not
    /// replaced by the tuned ones, [`RunConfig::tuned`]).
    pub clusters_set: bool,
    pub scheduler_set: bool,
    /// How GPUs compute the products of single-precision tiles (Cholesky's and LU's builders).
    pub tensor_math: hetla_kernels::TensorMath,
}

impl RunConfig {
    /// Options whose clusters are `clusters` (LU and QR default to one cluster per core).
    pub fn on(clusters: ClusterSpec) -> Self {
        Self {
            clusters,
            ..Self::default()
        }
    }

    /// The configuration `hetla tune` saved on this machine for `factorization` near order `n` in
    /// `precision` ([`Tuned::lookup`]), when the builder's user chose none of the clusters, the
    /// threads, the platform, the scheduler and the tile (`tile_set`): a user who sets nothing gets
    /// the shape measured fastest here. Matrices of one tile (order 512 and less) never look.
    pub fn tuned(
        &self,
        factorization: Family,
        n: usize,
        precision: Precision,
        tile_set: bool,
    ) -> Option<Tuned> {
        tuned_if(
            self.untouched(tile_set),
            self.backend,
            factorization,
            n,
            precision,
        )
    }

    /// Whether the builder's user chose none of the clusters, the threads, the platform, the
    /// scheduler and the tile (`tile_set`): then its runs take the tuned configurations.
    pub fn untouched(&self, tile_set: bool) -> bool {
        !(self.clusters_set || self.scheduler_set || tile_set)
            && self.threads.is_none()
            && self.platform.is_none()
    }

    /// Whether the platform a run uses has devices (QR and LDL^T then run in block columns).
    pub fn on_devices(&self) -> bool {
        self.resolve_platform()
            .is_ok_and(|p| !p.devices().is_empty())
    }

    /// The platform a run uses: the one given, or the process-wide one of the cluster spec and
    /// backend ([`Platform::shared`], built on first use).
    pub fn resolve_platform(&self) -> Result<Arc<Platform>> {
        if let Some(p) = &self.platform {
            return Ok(p.clone());
        }
        let spec = match self.threads {
            Some(0) => {
                return Err(Error::InvalidOption {
                    option: "threads",
                    reason: "must be at least 1".into(),
                });
            }
            Some(t) => ClusterSpec::Grid { count: 1, size: t },
            None => self.clusters.clone(),
        };
        Ok(Platform::shared(&spec, self.backend)?)
    }
}

/// Runs the kernels of a matrix that is one tile directly, without graph or runtime: on the calling
/// thread when small, else on the platform's first CPU cluster with all its cores (holding the
/// platform's run lock). `None` when the platform has no CPU cluster.
pub(crate) fn direct<R: Send>(
    platform: &Platform,
    flops: f64,
    f: impl FnOnce(Backend, Par) -> R + Send,
) -> Option<R> {
    let cluster = platform.clusters().first()?;
    let backend = platform.backend();
    if flops < ON_CALLER_FLOPS {
        return Some(f(backend, Par::Seq));
    }
    let _busy = platform.lock_run();
    Some(cluster.run(false, || f(backend, hetla_kernels::par_for(cluster.size()))))
}

/// Below this many flops a one-tile kernel ([`direct`]) or an O(n^2) step of a solve
/// ([`on_all_cores`]) runs on the calling thread: handing it to a pool costs more than it gains (a
/// thread wake-up is several microseconds).
const ON_CALLER_FLOPS: f64 = 4.0e6;

/// Runs an O(n^2 k) step of a solve (the triangular solves, a residual) on every core of the
/// platform's clusters at once (rayon's global pool, `Par` over all of them, holding the platform's
/// run lock), or on the calling thread when it is small: unlike a factorisation it has no graph to
/// spread over the clusters, and one cluster of a 2x1 platform would leave half the cores idle.
pub(crate) fn on_all_cores<R: Send>(
    platform: &Platform,
    flops: f64,
    f: impl FnOnce(Backend, Par) -> R + Send,
) -> R {
    let cores: usize = platform.clusters().iter().map(|c| c.size()).sum();
    if flops < ON_CALLER_FLOPS || cores < 2 {
        return f(platform.backend(), Par::Seq);
    }
    let _busy = platform.lock_run();
    f(platform.backend(), hetla_kernels::par_for(cores))
}

/// The public setters of a builder's [`RunConfig`] (held in its field `run`): backend, clusters,
/// threads, scheduler, platform, and the platform a run uses.
macro_rules! run_options {
    () => {
        /// Kernel backend (ignored when a platform is given: it has its own).
        pub fn backend(mut self, backend: hetla_kernels::Backend) -> Self {
            self.run.backend = backend;
            self
        }

        /// How cores are grouped into clusters (ignored when a platform is given).
        pub fn clusters(mut self, spec: hetla_clusters::ClusterSpec) -> Self {
            self.run.clusters = spec;
            self.run.clusters_set = true;
            self
        }

        /// One cluster of `threads` cores: every kernel runs on all of them, one at a time.
        pub fn threads(mut self, threads: usize) -> Self {
            self.run.threads = Some(threads);
            self
        }

        /// The scheduling policy.
        pub fn scheduler(mut self, scheduler: hetla_runtime::SchedulerKind) -> Self {
            self.run.scheduler = scheduler;
            self.run.scheduler_set = true;
            self
        }

        /// How runs group cores into clusters when no platform is given: the one set, else this
        /// builder's default.
        pub fn cluster_spec(&self) -> &hetla_clusters::ClusterSpec {
            &self.run.clusters
        }

        /// The scheduling policy runs use: the one set, else this builder's default.
        pub fn scheduler_kind(&self) -> hetla_runtime::SchedulerKind {
            self.run.scheduler
        }

        /// Runs on this platform (its clusters, backend and models).
        pub fn platform(mut self, platform: std::sync::Arc<hetla_runtime::Platform>) -> Self {
            self.run.platform = Some(platform);
            self
        }

        /// The platform a run uses: the one given, or the process-wide one of the options' cluster
        /// spec and backend ([`Platform::shared`](hetla_runtime::Platform::shared), built on first
        /// use).
        pub fn resolve_platform(&self) -> $crate::Result<std::sync::Arc<hetla_runtime::Platform>> {
            self.run.resolve_platform()
        }
    };
}
pub(crate) use run_options;

/// The setter of a builder's progress timeout (its `run`'s), for the builders with distributed runs
/// (Cholesky, LU, QR).
macro_rules! progress_timeout {
    () => {
        /// Distributed runs only: how long a rank waits for tiles from another with nothing else
        /// happening, or for every rank at a collective step of the call, before it presumes a rank
        /// dead and ends with an error (default: ten minutes).
        pub fn progress_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.run.progress_timeout = Some(timeout);
            self
        }
    };
}
pub(crate) use progress_timeout;

/// The setter of a builder's tensor math (its `run`'s), for the factorisations whose trailing
/// updates are products (Cholesky, LU).
macro_rules! tensor_math {
    () => {
        /// How GPUs compute the products of single-precision tiles (default
        /// [`TensorMath::Off`](crate::TensorMath::Off)): with
        /// [`TensorMath::Tf32`](crate::TensorMath::Tf32) or
        /// [`TensorMath::Bf16`](crate::TensorMath::Bf16), the trailing GEMMs of an f32 (c32)
        /// factorisation run on tensor cores with their operands rounded to TF32 (BF16), the
        /// products accumulated in f32 ([`crate::TensorMath`]); the panels, SYRK and TRSM stay in
        /// f32, and CPU cores always compute in f32. f64 and c64 factorisations are never touched:
        /// a mixed solve (`solve_refined`) factors in single precision with it, then refines to
        /// double accuracy, which is what it is for. An emulated device rounds the operands as a
        /// GPU does.
        pub fn tensor_math(mut self, math: crate::TensorMath) -> Self {
            self.run.tensor_math = math;
            self
        }
    };
}
pub(crate) use tensor_math;

/// A builder's `tuned_for(n, precision)`: itself with the configuration `hetla tune` saved on this
/// machine for its factorisation (the [`Family`](crate::Family) `$family`) near order `n` when its
/// user set none ([`RunConfig::tuned`]), else itself. The builder has fields `run` ([`RunConfig`])
/// and `tile` (`Option<usize>`).
macro_rules! tuned_for {
    ($family:expr) => {
        /// This builder with the configuration tuned on this machine for order `n` in `precision`
        /// when its user set none (see `RunConfig::tuned`), else itself.
        fn tuned_for(
            &self,
            n: usize,
            precision: hetla_kernels::Precision,
        ) -> std::borrow::Cow<'_, Self> {
            match self.run.tuned($family, n, precision, self.tile.is_some()) {
                Some(t) => {
                    let mut tuned = self.clone();
                    tuned.tile = Some(t.tile);
                    tuned.run.clusters = t.clusters;
                    tuned.run.scheduler = t.scheduler;
                    std::borrow::Cow::Owned(tuned)
                }
                None => std::borrow::Cow::Borrowed(self),
            }
        }

        /// This builder as a family's run of `job` configures it: on its platform, in its tile,
        /// with its scheduler (as the setters would).
        pub(crate) fn for_job(job: &$crate::family::room::Job<'_>) -> Self {
            let mut builder = Self::default();
            builder.run.platform = Some(job.platform.clone());
            builder.run.scheduler = job.scheduler;
            builder.run.scheduler_set = true;
            builder.tile = Some(job.shape.tile);
            builder
        }

        /// The clusters and the scheduler a user who sets none gets.
        pub(crate) fn family_defaults()
        -> (hetla_clusters::ClusterSpec, hetla_runtime::SchedulerKind) {
            let builder = Self::default();
            (builder.run.clusters, builder.run.scheduler)
        }
    };
}
pub(crate) use tuned_for;

/// [`Tuned::lookup`] for a run whose user set nothing (`untouched`) of a matrix of more than one
/// tile (order above 512): a user who sets nothing gets the shape measured fastest here.
pub(crate) fn tuned_if(
    untouched: bool,
    backend: Backend,
    factorization: Family,
    n: usize,
    precision: Precision,
) -> Option<Tuned> {
    if !untouched || n <= SINGLE_TILE_UP_TO {
        return None;
    }
    Tuned::lookup(backend, &factorization, n, precision)
}
