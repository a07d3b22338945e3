//! The hardware topology: packages, NUMA nodes, L3 and L2 caches, cores and their logical CPUs,
//! each object described by its cpuset (a sorted list of logical CPU numbers).
//!
//! One flat description serves every source: Linux sysfs (always built), hwloc (feature `hwloc`)
//! and hand-made topologies ([`Topology::synthetic`]) that let tests build clusters for machines
//! they do not run on. Cores are kept in *hierarchy order* (package, then NUMA node, then L3, then
//! L2, then first logical CPU), so that cutting the list into consecutive runs gives clusters whose
//! cores share caches and memory.

use std::fmt;

use crate::level::Level;

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

/// The CPUs of a machine as a hierarchy of cpusets. Only logical CPUs this process may use appear
/// (see [`Topology::restrict`]); objects left without CPUs are dropped.
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
    /// A topology from its objects' cpusets. Levels may be empty where the source has no such
    /// information (a level then cannot be used in a cluster spec). Cores are sorted into hierarchy
    /// order; every cpuset is sorted and deduplicated.
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

    /// A regular machine: `packages` packages, each with `l3_per_package` L3 caches (one NUMA node
    /// per L3), each shared by `cores_per_l3` cores with a private L2 and `threads_per_core`
    /// hyperthreads. Logical CPUs are numbered core after core.
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

    /// The same topology with only the logical CPUs in `allowed`; objects left empty are dropped.
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

    /// The same topology without its last `count` cores (in hierarchy order): the cores that GPU
    /// host threads reserve before clusters are formed.
    pub fn without_last_cores(&self, count: usize) -> Self {
        let keep = self.cores.len().saturating_sub(count);
        let allowed: Vec<usize> = self.cores[..keep].concat();
        self.restrict(&allowed)
    }

    /// Where the description came from.
    pub fn source(&self) -> TopologySource {
        self.source
    }

    /// The objects of one level, each a cpuset, in hierarchy order (empty when the source had no
    /// information on that level).
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

/// Sorts each set, drops empty ones and duplicates (a cache shared by several CPUs is listed once
/// per CPU by sysfs), and orders the sets by their first CPU.
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
