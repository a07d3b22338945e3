//! The platform: the workers a run may use (CPU clusters and devices), the kernel backend, and the
//! performance models learned on them.
//!
//! Building a platform starts the clusters' pinned pools once; every factorisation and solve run
//! with it reuses them, also after a failed run.
//!
//! Devices (GPUs, emulated devices) come first: each reserves one core for its worker's host
//! thread, the last cores of the topology, and the clusters are cut from the cores left
//! ([`reserve_host_cores`], the rule modelled platforms follow too). A device packs and unpacks its
//! copies on its host thread's core plus a share of the cores no cluster uses. Worker order: the
//! clusters, then the devices; device `i` is memory node `i + 1`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use hetla_clusters::{ClusterSpec, CopyThreads, CpuCluster, Topology, format_cpu_list};
use hetla_kernels::{Backend, HostRange, PinnedRanges};

use crate::data::MemoryNode;
use crate::devices::Device;
use crate::link::{LinkModel, LinkRate};
use crate::perfmodel::PerfModels;
use crate::sync::lock;
use crate::workers::WorkerInfo;
use crate::{Error, Result};

/// The link model of a device until `hetla calibrate` has measured it: 10 us and 10 GB/s each way,
/// the order of a PCIe 3 x16 link.
pub const DEFAULT_LINK: LinkModel = LinkModel {
    h2d: LinkRate {
        latency_us: 10.0,
        gb_per_s: 10.0,
    },
    d2h: LinkRate {
        latency_us: 10.0,
        gb_per_s: 10.0,
    },
    p2p: None,
    host_shared_by: 1,
};

/// Seconds one copy of `bytes` from `from` to `to` takes on idle links, where `links[i]` is the
/// link of memory node `i + 1`, by the one rule of real runs and simulations.
pub fn copy_seconds(links: &[LinkModel], from: MemoryNode, to: MemoryNode, bytes: usize) -> f64 {
    crate::link::copy_seconds(|node| links[node.0 - 1], from, to, bytes)
}

/// A device worker: the device, and the logical CPU its host thread is pinned to.
#[derive(Clone)]
pub struct DeviceWorker {
    /// The device.
    pub device: Arc<dyn Device>,
    /// The logical CPU of its host thread.
    pub core: usize,
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

/// Runs a small product on every thread of the cluster, so that per-thread state the kernels
/// allocate lazily (the `gemm` crate's packing slab, tens of MiB per thread) is allocated when the
/// platform is built, not inside the first factorisation.
fn warm_up(cluster: &CpuCluster) {
    const B: usize = 256;
    let a = faer::Mat::<f64>::zeros(B, B);
    cluster.pool().broadcast(|_| {
        let mut c = faer::Mat::<f64>::zeros(B, B);
        // Faer is always built and is what the slab belongs to; this cannot fail.
        let _ = Backend::Faer.gemm_sub(a.as_ref(), a.as_ref(), c.as_mut(), hetla_kernels::Par::Seq);
    });
}

/// CPU clusters and devices, the CPU kernel backend and the performance models.
pub struct Platform {
    backend: Backend,
    spec: ClusterSpec,
    topology: Topology,
    clusters: Vec<CpuCluster>,
    devices: Vec<DeviceWorker>,
    /// Held by each run: a platform runs one graph at a time (its pools and device memory hold one
    /// run's workers and replicas; the shared default platform may be called from several user
    /// threads).
    run_lock: Mutex<()>,
    /// The buffers callers keep between their runs on this platform, one of each type
    /// ([`Platform::keep`]).
    kept: Mutex<Vec<Box<dyn std::any::Any + Send>>>,
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

/// The process-wide platforms, one per (cluster spec, backend), built on first use.
static SHARED: Mutex<Vec<(ClusterSpec, Backend, Arc<Platform>)>> = Mutex::new(Vec::new());

impl Platform {
    /// The process-wide platform of `spec` and `backend` (CPU clusters, models from the default
    /// store): built on first use, then shared by every call that names no platform (`solve_spd`,
    /// `Cholesky::new()`), so pools are started and models read once per process, not at every
    /// call.
    pub fn shared(spec: &ClusterSpec, backend: Backend) -> Result<Arc<Platform>> {
        let mut shared = lock(&SHARED);
        if let Some((_, _, p)) = shared.iter().find(|(s, b, _)| s == spec && *b == backend) {
            return Ok(p.clone());
        }
        let platform = Arc::new(Platform::new(spec, backend)?);
        shared.push((spec.clone(), backend, platform.clone()));
        Ok(platform)
    }

    /// The clusters `spec` makes on this machine's topology, with `backend` kernels and models from
    /// the default store.
    pub fn new(spec: &ClusterSpec, backend: Backend) -> Result<Self> {
        Self::with_store(spec, backend, ModelStore::Default)
    }

    /// As [`Platform::new`], with the performance models kept in `store`.
    pub fn with_store(spec: &ClusterSpec, backend: Backend, store: ModelStore) -> Result<Self> {
        Self::with_devices(spec, backend, store, Vec::new())
    }

    /// CPU clusters `spec` makes from the cores left after each device reserved one, and the
    /// devices (see the module doc). `spec` may be `none` when there are devices.
    pub fn with_devices(
        spec: &ClusterSpec,
        backend: Backend,
        store: ModelStore,
        devices: Vec<Arc<dyn Device>>,
    ) -> Result<Self> {
        backend.ensure_available()?;
        let topology = Topology::detect()?;
        let cores = topology.cores().len();
        let HostCores {
            per_device: host_cores,
            reserved,
            left,
        } = reserve_host_cores(&topology, spec, devices.len());
        let cpu_sets = spec
            .resolve(&left)
            .map_err(|e| match reserved {
                0 => Error::from(e),
                _ => Error::InvalidOption {
                    option: "clusters",
                    reason: format!(
                        "{e}; {reserved} of the {cores} cores are reserved for the host threads of the {} GPU workers (use fewer cores, fewer GPUs, or --clusters none)",
                        devices.len()
                    ),
                },
            })?;
        if cpu_sets.is_empty() && devices.is_empty() {
            return Err(Error::InvalidOption {
                option: "clusters",
                reason: format!(
                    "{spec} makes no CPU cluster and there is no GPU: nothing could run a task"
                ),
            });
        }
        let copy_cores = copy_cores(&topology, &cpu_sets, &host_cores, wanted_copy_cores());
        // Any cluster shape works with either backend: kernels run as sequential pieces on
        // the cluster's own pool threads (OpenBLAS set to one thread), so clusters running
        // at once never share a library thread count (hetla-kernels' `split`).
        let clusters = cpu_sets
            .into_iter()
            .enumerate()
            .map(|(i, cpus)| CpuCluster::new(cpus, &format!("hetla-c{i}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for cluster in &clusters {
            warm_up(cluster);
        }
        // A core a cluster lends packs only while that cluster is idle (`CopyThreads`).
        for (i, (device, cores)) in devices.iter().zip(copy_cores).enumerate() {
            if cores.len() > 1 {
                let (mut own, mut lent) = (Vec::new(), Vec::new());
                for cpu in cores {
                    match clusters.iter().find(|c| c.cpus().contains(&cpu)) {
                        Some(cluster) => lent.push((cpu, cluster.lender())),
                        None => own.push(cpu),
                    }
                }
                device.set_copy_threads(Arc::new(CopyThreads::new(
                    &own,
                    &lent,
                    &format!("hetla-g{i}"),
                )?));
            }
        }
        let devices: Vec<DeviceWorker> = devices
            .into_iter()
            .enumerate()
            .map(|(i, device)| DeviceWorker {
                device,
                core: host_cores[i],
            })
            .collect();
        let workers = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| WorkerInfo::cpu_cluster(i, c.cpus().to_vec()))
            .chain(
                devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| WorkerInfo::device(i, d.device.name(), d.core)),
            )
            .collect();
        let model_file = match store {
            ModelStore::Default => PerfModels::default_dir(),
            ModelStore::Dir(dir) => Some(dir),
            ModelStore::None => None,
        }
        .map(|dir| PerfModels::file_in(&dir, backend.name()));
        let models = match &model_file {
            // Models that cannot be read cost speed, never the run.
            Some(path) => PerfModels::load(path).unwrap_or_else(|e| {
                eprintln!("warning: {e}; starting from empty models");
                PerfModels::new()
            }),
            None => PerfModels::new(),
        };
        Ok(Self {
            backend,
            spec: spec.clone(),
            topology,
            clusters,
            devices,
            run_lock: Mutex::new(()),
            kept: Mutex::new(Vec::new()),
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

    /// The device workers (worker `clusters().len() + i` is device `i`).
    pub fn devices(&self) -> &[DeviceWorker] {
        &self.devices
    }

    /// The most kernels one of its devices runs at once (1 without devices).
    pub fn compute_streams(&self) -> usize {
        (self.devices.iter())
            .map(|d| d.device.compute_streams())
            .max()
            .unwrap_or(1)
    }

    /// Page-locks host memory `ranges` for the platform's devices (through its first device:
    /// page-locking is process-wide), so that their copies of the tiles in it go straight from and
    /// into it with no staging pass, until the returned guard is dropped. Without a device nothing
    /// is locked; when locking fails, what was locked is unlocked and the reason kept
    /// ([`PageLock::failed`]): copies then go through staging as before, and a run never fails for
    /// it.
    ///
    /// # Safety
    /// `ranges` must be memory of this process that stays allocated while the guard lives.
    pub unsafe fn page_lock(&self, ranges: &[HostRange]) -> PageLock {
        let start = std::time::Instant::now();
        let mut lock = PageLock {
            device: self.devices.first().map(|d| d.device.clone()),
            locked: Vec::new(),
            already: 0,
            failed: None,
            seconds: 0.0,
        };
        if let Some(device) = lock.device.clone() {
            for &range in ranges.iter().filter(|r| r.len > 0) {
                // Locked already (a buffer kept locked across runs): nothing to do, nor undo.
                if PinnedRanges::global().covers(&range) {
                    lock.already += range.len;
                    continue;
                }
                // SAFETY: the caller keeps `ranges` allocated while the guard lives, and the guard
                // unlocks them when dropped.
                match unsafe { device.page_lock(range) } {
                    Ok(()) => lock.locked.push(range),
                    Err(error) => {
                        lock.unlock();
                        lock.failed = Some(error.to_string());
                        break;
                    }
                }
            }
        }
        lock.seconds = start.elapsed().as_secs_f64();
        lock
    }

    /// Keeps `buffer` for a later run on this platform, replacing the buffer of its type kept
    /// before (buffers of other types stay: a Cholesky's tile-major copy and an LDL^T factor's
    /// workspace are kept side by side); they are freed with the platform. A factorisation keeps
    /// its work buffer so that the next one on the same platform need not map and fault in fresh
    /// memory.
    pub fn keep<B: std::any::Any + Send>(&self, buffer: B) {
        let mut kept = lock(&self.kept);
        kept.retain(|b| !b.is::<B>());
        kept.push(Box::new(buffer));
    }

    /// Takes back the `B` that [`Platform::keep`] kept, if any (leaving those of other types).
    pub fn reclaim<B: std::any::Any + Send>(&self) -> Option<B> {
        let mut kept = lock(&self.kept);
        let at = kept.iter().position(|b| b.is::<B>())?;
        kept.swap_remove(at).downcast::<B>().ok().map(|b| *b)
    }

    /// Waits until no other run uses the devices, and keeps them for the caller.
    pub fn lock_run(&self) -> MutexGuard<'_, ()> {
        lock(&self.run_lock)
    }

    /// The link model of the device on `node`: calibrated, else [`DEFAULT_LINK`].
    pub fn link(&self, node: MemoryNode) -> LinkModel {
        self.devices
            .get(node.0.wrapping_sub(1))
            .and_then(|d| self.lock_models().link(d.device.name()).copied())
            .unwrap_or(DEFAULT_LINK)
    }

    /// The link model of every device, in device order (see [`Platform::link`]).
    pub fn links(&self) -> Vec<LinkModel> {
        (1..=self.devices.len())
            .map(|node| self.link(MemoryNode(node)))
            .collect()
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

    /// Adds the samples learned since the last save to the platform's store (merged under a lock
    /// with what other processes saved, see [`PerfModels::save`]); returns the file, or `None` when
    /// the store is [`ModelStore::None`].
    pub fn save_models(&self) -> Result<Option<PathBuf>> {
        let Some(path) = &self.model_file else {
            return Ok(None);
        };
        for warning in self.lock_models().save(path, self.backend.name())? {
            eprintln!("warning: {warning}");
        }
        Ok(Some(path.clone()))
    }

    fn lock_models(&self) -> std::sync::MutexGuard<'_, PerfModels> {
        // A panic while the lock was held cannot leave the map half-updated in a way that
        // matters (each update is one entry): keep using it.
        lock(&self.models)
    }
}

/// Where devices' host threads run, and the cores left for the CPU clusters.
#[derive(Debug, Clone)]
pub struct HostCores {
    /// The CPU (the first of its core) each device's host thread is pinned to, in device order.
    pub per_device: Vec<usize>,
    /// How many cores were reserved: the last ones of the topology.
    pub reserved: usize,
    /// The topology the clusters are cut from.
    pub left: Topology,
}

/// The one rule for host cores, on real machines and modelled ones (StarPU's): each of `devices`
/// reserves one core for its host thread, the last cores of `topology`; at least one core stays for
/// the clusters unless `spec` is `none`; when there are more devices than cores to reserve, their
/// host threads share the reserved cores (the first core when none can be reserved).
pub fn reserve_host_cores(topology: &Topology, spec: &ClusterSpec, devices: usize) -> HostCores {
    let cores = topology.cores();
    let spare = if *spec == ClusterSpec::None {
        cores.len()
    } else {
        cores.len().saturating_sub(1)
    };
    let reserved = devices.min(spare);
    let mut host: Vec<usize> = cores[cores.len() - reserved..]
        .iter()
        .map(|core| core[0])
        .collect();
    if host.is_empty() && devices > 0 {
        host.push(cores[0][0]);
    }
    HostCores {
        per_device: (0..devices).map(|i| host[i % host.len()]).collect(),
        reserved,
        left: topology.without_last_cores(reserved),
    }
}

/// Host memory page-locked for a platform's devices by [`Platform::page_lock`], unlocked when
/// dropped.
pub struct PageLock {
    device: Option<Arc<dyn Device>>,
    locked: Vec<HostRange>,
    already: usize,
    failed: Option<String>,
    seconds: f64,
}

impl PageLock {
    /// Bytes locked.
    pub fn bytes(&self) -> usize {
        self.locked.iter().map(|r| r.len).sum()
    }

    /// Bytes of the ranges asked for that were page-locked already (and are left so).
    pub fn already(&self) -> usize {
        self.already
    }

    /// Why locking failed (nothing is locked then).
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Seconds the locking took.
    pub fn seconds(&self) -> f64 {
        self.seconds
    }

    fn unlock(&mut self) {
        if let Some(device) = &self.device {
            for range in self.locked.drain(..) {
                if let Err(error) = device.page_unlock(range) {
                    eprintln!("warning: unlocking host memory: {error}");
                }
            }
        }
    }
}

impl Drop for PageLock {
    fn drop(&mut self) {
        self.unlock();
    }
}

/// The environment variable that sets how many cores each GPU packs and unpacks its copies on (its
/// host thread's core included), overriding [`copy_cores`]'s rule.
pub const COPY_CORES_VAR: &str = "HETLA_GPU_COPY_CORES";

/// The most cores a device borrows from the clusters to pack its copies on. Packing is a
/// memory-bound copy into page-locked staging: on the first real GPU (an H200 beside 16 Xeon cores,
/// n = 8192, a 1x15 cluster beside the GPU, `scripts/gpu-check.sh copies`) the factorisation took
/// 0.189 s packing on the host core alone, 0.118 s on 4 cores and 0.103 s on 8 (0.094 s GPU-only,
/// packing on all 16); at n = 16384 the host core alone made the run 2x slower than the GPU alone
/// although the cluster ran no task.
pub const MAX_BORROWED_COPY_CORES: usize = 8;

/// The logical CPUs each device packs its copies on: its host thread's core and, dealt in turn, the
/// cores that neither a cluster nor a host thread uses (all of them with `--clusters none`). When
/// that makes fewer than each device's share of the clusters' cores, up to
/// `MAX_BORROWED_COPY_CORES` (8), cores of the clusters are borrowed (dealt in turn, so devices
/// borrow different ones); a borrowed core packs only while its cluster has no kernel to run
/// ([`CopyThreads`]: a packing thread on one core of a k-core kernel would stall all k). `wanted`
/// ([`COPY_CORES_VAR`]) sets the count instead. Real platforms and modelled ones (a simulation of
/// the staged data path, [`crate::Staging`]) follow this rule, but the model packs at the rate of
/// all of them at every copy: while a lending cluster is busy, a real GPU packs slower than
/// modelled.
pub fn copy_cores(
    topology: &Topology,
    clusters: &[Vec<usize>],
    host_cores: &[usize],
    wanted: Option<usize>,
) -> Vec<Vec<usize>> {
    let busy = |cpu: &usize| {
        clusters
            .iter()
            .flatten()
            .chain(host_cores)
            .any(|c| c == cpu)
    };
    let idle: Vec<usize> = topology
        .cores()
        .iter()
        .filter(|core| !core.iter().any(busy))
        .map(|core| core[0])
        .collect();
    let lent: Vec<usize> = clusters.iter().flatten().copied().collect();
    let devices = host_cores.len();
    (0..devices)
        .map(|i| {
            let mut cores: Vec<usize> = std::iter::once(host_cores[i])
                .chain(idle.iter().copied().skip(i).step_by(devices))
                .collect();
            let share = (lent.len() / devices.max(1)).min(MAX_BORROWED_COPY_CORES);
            let count = wanted.unwrap_or(cores.len().max(share)).max(1);
            let borrowed = lent
                .iter()
                .cycle()
                .skip(i * count)
                .take(lent.len())
                .copied();
            for cpu in borrowed {
                if cores.len() >= count {
                    break;
                }
                if !cores.contains(&cpu) {
                    cores.push(cpu);
                }
            }
            cores.truncate(count);
            cores
        })
        .collect()
}

/// [`COPY_CORES_VAR`]'s count, when set to a positive number (anything else is ignored, with a
/// warning: a tuning knob must not stop a run).
pub fn wanted_copy_cores() -> Option<usize> {
    let value = std::env::var(COPY_CORES_VAR).ok()?;
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            eprintln!(
                "warning: {COPY_CORES_VAR}={value:?} is not a positive number of cores; using the default rule"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept buffers: one of each type, a later one replacing its type's only, each taken back by
    /// its own type and then gone.
    #[test]
    fn a_platform_keeps_one_buffer_of_each_type() {
        let platform =
            Platform::new(&ClusterSpec::Grid { count: 1, size: 1 }, Backend::Faer).unwrap();
        platform.keep(vec![1.0f64; 3]);
        platform.keep(String::from("first"));
        platform.keep(String::from("second"));
        assert_eq!(platform.reclaim::<u32>(), None);
        assert_eq!(platform.reclaim::<String>().as_deref(), Some("second"));
        assert_eq!(platform.reclaim::<String>(), None);
        assert_eq!(platform.reclaim::<Vec<f64>>(), Some(vec![1.0; 3]));
        assert_eq!(platform.reclaim::<Vec<f64>>(), None);
    }

    #[test]
    fn devices_pack_on_their_host_core_and_a_share_of_the_idle_ones() {
        let topology = Topology::detect().unwrap();
        let first: Vec<usize> = topology.cores().iter().map(|c| c[0]).collect();
        let last = *first.last().unwrap();
        // No cluster: one device gets every core, its host core first.
        let one = copy_cores(&topology, &[], &[last], None);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0][0], last);
        assert_eq!(one[0].len(), first.len());
        // Two devices sharing the idle cores: no core twice.
        let two = copy_cores(&topology, &[], &[last, last], None);
        let mut all: Vec<usize> = two.iter().flat_map(|c| c[1..].to_vec()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), first.len() - 1);
    }

    #[test]
    fn a_device_beside_clusters_borrows_its_share_of_their_cores_to_pack_on() {
        // A modelled 16-core machine: a 1x15 cluster on cores 0-14, the GPU's host thread on 15.
        let cluster: Vec<usize> = (0..15).collect();
        let topology = Topology::flat(&(0..16).collect::<Vec<_>>());
        let cores = copy_cores(&topology, std::slice::from_ref(&cluster), &[15], None);
        assert_eq!(cores, vec![vec![15, 0, 1, 2, 3, 4, 5, 6]]);
        // Two devices borrow different cores, their share of the 14 cluster cores each.
        let two = copy_cores(&topology, &[(0..14).collect()], &[14, 15], None);
        assert_eq!(two[0].len(), 7);
        assert_eq!(two[1].len(), 7);
        assert!(two[0][1..].iter().all(|c| !two[1][1..].contains(c)));
        // The count asked for, whatever the rule would give: 1 is the host core alone.
        assert_eq!(
            copy_cores(&topology, std::slice::from_ref(&cluster), &[15], Some(1)),
            vec![vec![15]]
        );
        assert_eq!(
            copy_cores(&topology, &[], &[15], Some(3)),
            vec![vec![15, 0, 1]]
        );
        let eight = copy_cores(&topology, std::slice::from_ref(&cluster), &[15], Some(8));
        assert_eq!(eight, vec![vec![15, 0, 1, 2, 3, 4, 5, 6]]);
    }
}
