//! The platform: the workers a run may use (CPU clusters now, GPUs later), the kernel
//! backend, and the performance models learned on them.
//!
//! Building a platform starts the clusters' pinned pools once; every factorisation and
//! solve run with it reuses them, also after a failed run.

use std::path::PathBuf;
use std::sync::Mutex;

use hetla_clusters::{ClusterSpec, CpuCluster, Topology, format_cpu_list};
use hetla_kernels::Backend;

use super::data::{HOST, MemoryNode};
use super::perfmodel::{PerfModels, ResourceClass};
use crate::{Error, Result};

/// The kind of a worker, for restricting tasks to kinds of resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A CPU cluster.
    Cpu,
    /// A GPU.
    Gpu,
}

/// What the scheduler and the reports know about a worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerInfo {
    /// A short name ("cpu0").
    pub name: String,
    /// The resource kind.
    pub kind: ResourceKind,
    /// The class its performance models are kept under.
    pub class: ResourceClass,
    /// The memory node its kernels work in.
    pub node: MemoryNode,
    /// Logical CPUs it uses (for a GPU, its host thread's core).
    pub cpus: Vec<usize>,
}

impl WorkerInfo {
    /// The worker of CPU cluster number `index`, on the host node, using `cpus`.
    pub fn cpu_cluster(index: usize, cpus: Vec<usize>) -> Self {
        Self {
            name: format!("cpu{index}"),
            kind: ResourceKind::Cpu,
            class: ResourceClass::CpuCluster { cores: cpus.len() },
            node: HOST,
            cpus,
        }
    }

    /// Cores of the worker's CPU cluster (1 for a GPU's host thread).
    pub fn cores(&self) -> usize {
        self.cpus.len().max(1)
    }
}

/// Where the performance models are read from and written to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelStore {
    /// `$HETLA_PERFMODEL_DIR`, else the user's cache directory.
    #[default]
    Default,
    /// This directory.
    Dir(PathBuf),
    /// Not persisted: models live only as long as the platform.
    None,
}

/// Runs a small product on every thread of the cluster, so that per-thread state the
/// kernels allocate lazily (the `gemm` crate's packing slab, tens of MiB per thread) is
/// allocated when the platform is built, not inside the first factorisation.
fn warm_up(cluster: &CpuCluster) {
    const B: usize = 256;
    let a = faer::Mat::<f64>::zeros(B, B);
    cluster.pool().broadcast(|_| {
        let mut c = faer::Mat::<f64>::zeros(B, B);
        // Faer is always built and is what the slab belongs to; this cannot fail.
        let _ = Backend::Faer.gemm_sub(a.as_ref(), a.as_ref(), c.as_mut(), hetla_kernels::Par::Seq);
    });
}

/// CPU clusters, their kernel backend and performance models.
pub struct Platform {
    backend: Backend,
    spec: ClusterSpec,
    topology: Topology,
    clusters: Vec<CpuCluster>,
    workers: Vec<WorkerInfo>,
    models: Mutex<PerfModels>,
    model_file: Option<PathBuf>,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platform")
            .field("backend", &self.backend)
            .field("spec", &self.spec.to_string())
            .field("workers", &self.workers)
            .finish()
    }
}

impl Platform {
    /// The clusters `spec` makes on this machine's topology, with `backend` kernels and
    /// models from the default store.
    pub fn new(spec: &ClusterSpec, backend: Backend) -> Result<Self> {
        Self::with_store(spec, backend, ModelStore::Default)
    }

    /// As [`Platform::new`], with the performance models kept in `store`.
    pub fn with_store(spec: &ClusterSpec, backend: Backend, store: ModelStore) -> Result<Self> {
        backend.ensure_available()?;
        let topology = Topology::detect()?;
        let cpu_sets = spec.resolve(&topology)?;
        // OpenBLAS's thread count is one setting for the whole process: two clusters of
        // several cores would fight over it. Single-core clusters all ask for 1.
        if backend == Backend::OpenBlas
            && cpu_sets.len() > 1
            && cpu_sets.iter().any(|c| c.len() > 1)
        {
            return Err(Error::InvalidOption {
                option: "clusters",
                reason: format!(
                    "{spec} makes several multi-core clusters, which the openblas backend cannot run at once (its thread count is process-wide); use one cluster (1xN), single-core clusters (Nx1), or the faer backend"
                ),
            });
        }
        let clusters = cpu_sets
            .into_iter()
            .enumerate()
            .map(|(i, cpus)| CpuCluster::new(cpus, &format!("hetla-c{i}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for cluster in &clusters {
            warm_up(cluster);
        }
        let workers = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| WorkerInfo::cpu_cluster(i, c.cpus().to_vec()))
            .collect();
        let model_file = match store {
            ModelStore::Default => PerfModels::default_dir(),
            ModelStore::Dir(dir) => Some(dir),
            ModelStore::None => None,
        }
        .map(|dir| PerfModels::file_in(&dir, backend.name()));
        let models = match &model_file {
            Some(path) => PerfModels::load(path)?,
            None => PerfModels::new(),
        };
        Ok(Self {
            backend,
            spec: spec.clone(),
            topology,
            clusters,
            workers,
            models: Mutex::new(models),
            model_file,
        })
    }

    /// The kernel backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The spec the clusters were built from.
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The topology the clusters were cut from.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The workers, in order.
    pub fn workers(&self) -> &[WorkerInfo] {
        &self.workers
    }

    /// The CPU clusters (worker i is cluster i).
    pub fn clusters(&self) -> &[CpuCluster] {
        &self.clusters
    }

    /// The clusters' cpusets as cpulists ("0-3").
    pub fn cpu_lists(&self) -> Vec<String> {
        self.clusters
            .iter()
            .map(|c| format_cpu_list(c.cpus()))
            .collect()
    }

    /// Where the models are persisted, if anywhere.
    pub fn model_file(&self) -> Option<&std::path::Path> {
        self.model_file.as_deref()
    }

    /// A copy of the current models.
    pub fn models(&self) -> PerfModels {
        self.lock_models().clone()
    }

    /// Runs `f` on the models (to record calibration samples).
    pub fn update_models<R>(&self, f: impl FnOnce(&mut PerfModels) -> R) -> R {
        f(&mut self.lock_models())
    }

    /// Writes the models to the platform's store; returns the file, or `None` when the
    /// store is [`ModelStore::None`].
    pub fn save_models(&self) -> Result<Option<PathBuf>> {
        let Some(path) = &self.model_file else {
            return Ok(None);
        };
        self.lock_models().save(path, self.backend.name())?;
        Ok(Some(path.clone()))
    }

    fn lock_models(&self) -> std::sync::MutexGuard<'_, PerfModels> {
        // A panic while the lock was held cannot leave the map half-updated in a way that
        // matters (each update is one entry): keep using it.
        self.models.lock().unwrap_or_else(|e| e.into_inner())
    }
}
