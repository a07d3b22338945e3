//! The topology of this machine: from hwloc (feature `hwloc`) or Linux sysfs.

use std::path::Path;

use crate::cpulist::{available_cpus, parse_cpu_list};
use crate::error::ClusterError;
use crate::topology::{CpuSet, Topology, TopologySource};

impl Topology {
    /// The topology of this machine, restricted to the CPUs this process may use: from hwloc with
    /// the `hwloc` feature, from Linux sysfs otherwise. Where neither works (not Linux, no sysfs),
    /// one package with one core per available CPU.
    pub fn detect() -> Result<Self, ClusterError> {
        #[cfg(feature = "hwloc")]
        let topology = crate::hwloc::detect()?;
        #[cfg(not(feature = "hwloc"))]
        let topology = Self::from_sysfs(Path::new("/sys/devices/system"))
            .unwrap_or_else(|_| Self::flat(&available_cpus()));
        Ok(topology.restrict(&available_cpus()))
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
}
