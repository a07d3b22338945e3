//! The hardware topology: packages, NUMA nodes, L3 and L2 caches, cores and their logical
//! CPUs, each object described by its cpuset (a sorted list of logical CPU numbers).
//!
//! One flat description serves every source: Linux sysfs (always built), hwloc (feature
//! `hwloc`) and hand-made topologies ([`Topology::synthetic`]) that let tests build
//! clusters for machines they do not run on. Cores are kept in *hierarchy order*
//! (package, then NUMA node, then L3, then L2, then first logical CPU), so that cutting
//! the list into consecutive runs gives clusters whose cores share caches and memory.

use std::fmt;
use std::path::Path;

use crate::{ClusterError, parse_cpu_list};

/// A sorted list of logical CPU numbers.
pub type CpuSet = Vec<usize>;

/// Where a topology came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologySource {
    /// Linux sysfs (`/sys/devices/system/cpu`, `/sys/devices/system/node`).
    Sysfs,
    /// The hwloc library.
    Hwloc,
    /// Built by hand ([`Topology::synthetic`] or [`Topology::from_parts`]).
    Manual,
}

/// A level of the hierarchy at which cores can be grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// A processor package (socket).
    Package,
    /// A NUMA node.
    Numa,
    /// A level-3 cache.
    L3,
    /// A level-2 cache.
    L2,
    /// A core (its hyperthreads together).
    Core,
}

impl Level {
    /// Every level, outermost first.
    pub const ALL: [Level; 5] = [
        Level::Package,
        Level::Numa,
        Level::L3,
        Level::L2,
        Level::Core,
    ];

    /// The word used in cluster specs ("package", "numa", "l3", "l2", "core").
    pub fn name(self) -> &'static str {
        match self {
            Level::Package => "package",
            Level::Numa => "numa",
            Level::L3 => "l3",
            Level::L2 => "l2",
            Level::Core => "core",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The CPUs of a machine as a hierarchy of cpusets. Only logical CPUs this process may use
/// appear (see [`Topology::restrict`]); objects left without CPUs are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    source: TopologySource,
    packages: Vec<CpuSet>,
    numa_nodes: Vec<CpuSet>,
    l3: Vec<CpuSet>,
    l2: Vec<CpuSet>,
    cores: Vec<CpuSet>,
}

impl Topology {
    /// A topology from its objects' cpusets. Levels may be empty where the source has no
    /// such information (a level then cannot be used in a cluster spec). Cores are sorted
    /// into hierarchy order; every cpuset is sorted and deduplicated.
    pub fn from_parts(
        source: TopologySource,
        packages: Vec<CpuSet>,
        numa_nodes: Vec<CpuSet>,
        l3: Vec<CpuSet>,
        l2: Vec<CpuSet>,
        cores: Vec<CpuSet>,
    ) -> Self {
        let mut topology = Self {
            source,
            packages: normalise(packages),
            numa_nodes: normalise(numa_nodes),
            l3: normalise(l3),
            l2: normalise(l2),
            cores: normalise(cores),
        };
        topology.sort_cores();
        topology
    }

    /// A regular machine: `packages` packages, each with `l3_per_package` L3 caches (one
    /// NUMA node per L3), each shared by `cores_per_l3` cores with a private L2 and
    /// `threads_per_core` hyperthreads. Logical CPUs are numbered core after core.
    pub fn synthetic(
        packages: usize,
        l3_per_package: usize,
        cores_per_l3: usize,
        threads_per_core: usize,
    ) -> Self {
        let core_cpus =
            |core: usize| (core * threads_per_core..(core + 1) * threads_per_core).collect();
        let cores: Vec<CpuSet> = (0..packages * l3_per_package * cores_per_l3)
            .map(core_cpus)
            .collect();
        let group = |size: usize| -> Vec<CpuSet> {
            cores.chunks(size.max(1)).map(|c| c.concat()).collect()
        };
        let l3 = group(cores_per_l3);
        let packages_sets = group(l3_per_package * cores_per_l3);
        Self::from_parts(
            TopologySource::Manual,
            packages_sets,
            l3.clone(),
            l3,
            cores.clone(),
            cores,
        )
    }

    /// The topology of this machine, restricted to the CPUs this process may use: from
    /// hwloc with the `hwloc` feature, from Linux sysfs otherwise. Where neither works (not
    /// Linux, no sysfs), one package with one core per available CPU.
    pub fn detect() -> Result<Self, ClusterError> {
        #[cfg(feature = "hwloc")]
        let topology = crate::hwloc::detect()?;
        #[cfg(not(feature = "hwloc"))]
        let topology = Self::from_sysfs(Path::new("/sys/devices/system"))
            .unwrap_or_else(|_| Self::flat(&crate::available_cpus()));
        Ok(topology.restrict(&crate::available_cpus()))
    }

    /// One package, one core per CPU in `cpus`, no cache or NUMA information.
    pub fn flat(cpus: &[usize]) -> Self {
        let cores: Vec<CpuSet> = cpus.iter().map(|&c| vec![c]).collect();
        Self::from_parts(
            TopologySource::Manual,
            vec![cpus.to_vec()],
            vec![],
            vec![],
            vec![],
            cores,
        )
    }

    /// Reads the topology from a sysfs tree (`root` is normally `/sys/devices/system`):
    /// `cpu/online`, `cpuN/topology/{physical_package_id,thread_siblings_list}`,
    /// `cpuN/cache/indexK/{level,type,shared_cpu_list}` and `node/nodeN/cpulist`.
    pub fn from_sysfs(root: &Path) -> Result<Self, ClusterError> {
        let read = |p: &Path| -> Result<String, ClusterError> {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .map_err(|e| ClusterError::Topology {
                    reason: format!("cannot read {}: {e}", p.display()),
                })
        };
        let list = |p: &Path| -> Result<CpuSet, ClusterError> { Ok(parse_cpu_list(&read(p)?)?) };
        let online = list(&root.join("cpu/online"))?;
        let (mut packages, mut numa, mut l3, mut l2, mut cores) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut package_of: Vec<(usize, usize)> = Vec::new();
        for &cpu in &online {
            let dir = root.join(format!("cpu/cpu{cpu}"));
            let package: usize = read(&dir.join("topology/physical_package_id"))?
                .parse()
                .unwrap_or(0);
            package_of.push((package, cpu));
            cores.push(list(&dir.join("topology/thread_siblings_list"))?);
            for index in 0.. {
                let cache = dir.join(format!("cache/index{index}"));
                if !cache.exists() {
                    break;
                }
                let kind = read(&cache.join("type"))?;
                if kind == "Instruction" {
                    continue;
                }
                match read(&cache.join("level"))?.as_str() {
                    "3" => l3.push(list(&cache.join("shared_cpu_list"))?),
                    "2" => l2.push(list(&cache.join("shared_cpu_list"))?),
                    _ => {}
                }
            }
        }
        package_of.sort_unstable();
        for chunk in package_of.chunk_by(|a, b| a.0 == b.0) {
            packages.push(chunk.iter().map(|&(_, cpu)| cpu).collect());
        }
        if let Ok(entries) = std::fs::read_dir(root.join("node")) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("node") && name[4..].parse::<usize>().is_ok() {
                    let cpus = list(&entry.path().join("cpulist"))?;
                    if !cpus.is_empty() {
                        numa.push(cpus);
                    }
                }
            }
        }
        Ok(Self::from_parts(
            TopologySource::Sysfs,
            packages,
            numa,
            l3,
            l2,
            cores,
        ))
    }

    /// The same topology with only the logical CPUs in `allowed`; objects left empty are
    /// dropped.
    pub fn restrict(&self, allowed: &[usize]) -> Self {
        let keep = |sets: &[CpuSet]| -> Vec<CpuSet> {
            sets.iter()
                .map(|s| s.iter().copied().filter(|c| allowed.contains(c)).collect())
                .collect()
        };
        Self::from_parts(
            self.source,
            keep(&self.packages),
            keep(&self.numa_nodes),
            keep(&self.l3),
            keep(&self.l2),
            keep(&self.cores),
        )
    }

    /// The same topology without its last `count` cores (in hierarchy order): the cores
    /// that GPU host threads reserve before clusters are formed.
    pub fn without_last_cores(&self, count: usize) -> Self {
        let keep = self.cores.len().saturating_sub(count);
        let allowed: Vec<usize> = self.cores[..keep].concat();
        self.restrict(&allowed)
    }

    /// Where the description came from.
    pub fn source(&self) -> TopologySource {
        self.source
    }

    /// The objects of one level, each a cpuset, in hierarchy order (empty when the source
    /// had no information on that level).
    pub fn level(&self, level: Level) -> &[CpuSet] {
        match level {
            Level::Package => &self.packages,
            Level::Numa => &self.numa_nodes,
            Level::L3 => &self.l3,
            Level::L2 => &self.l2,
            Level::Core => &self.cores,
        }
    }

    /// The cores in hierarchy order, each as the cpuset of its hyperthreads.
    pub fn cores(&self) -> &[CpuSet] {
        &self.cores
    }

    /// Every logical CPU of the topology, sorted.
    pub fn cpus(&self) -> CpuSet {
        let mut all = self.cores.concat();
        all.sort_unstable();
        all
    }

    /// Index of the object of `level` holding `cpu` (objects missing: 0).
    fn position(&self, level: Level, cpu: usize) -> usize {
        self.level(level)
            .iter()
            .position(|s| s.binary_search(&cpu).is_ok())
            .unwrap_or(0)
    }

    fn sort_cores(&mut self) {
        let mut keyed: Vec<([usize; 5], CpuSet)> = std::mem::take(&mut self.cores)
            .into_iter()
            .map(|core| {
                let first = core[0];
                let key = [
                    self.position(Level::Package, first),
                    self.position(Level::Numa, first),
                    self.position(Level::L3, first),
                    self.position(Level::L2, first),
                    first,
                ];
                (key, core)
            })
            .collect();
        keyed.sort();
        self.cores = keyed.into_iter().map(|(_, core)| core).collect();
    }
}

/// Sorts each set, drops empty ones and duplicates (a cache shared by several CPUs is
/// listed once per CPU by sysfs), and orders the sets by their first CPU.
fn normalise(mut sets: Vec<CpuSet>) -> Vec<CpuSet> {
    for s in &mut sets {
        s.sort_unstable();
        s.dedup();
    }
    sets.retain(|s| !s.is_empty());
    sets.sort();
    sets.dedup();
    sets
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let threads = self.cpus().len();
        writeln!(
            f,
            "{} package(s), {} NUMA node(s), {} L3, {} L2, {} core(s), {} logical CPU(s) (from {:?})",
            self.packages.len(),
            self.numa_nodes.len(),
            self.l3.len(),
            self.l2.len(),
            self.cores.len(),
            threads,
            self.source
        )?;
        for level in Level::ALL {
            let sets: Vec<String> = self
                .level(level)
                .iter()
                .map(|s| crate::format_cpu_list(s))
                .collect();
            writeln!(f, "  {:<8} {}", level.name(), sets.join(" | "))?;
        }
        Ok(())
    }
}
