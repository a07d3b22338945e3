//! Topology discovery through hwloc (feature `hwloc`).

use hwlocality::Topology as HwTopology;
use hwlocality::object::types::ObjectType;

use crate::{ClusterError, CpuSet, Topology, TopologySource};

/// The machine's topology as hwloc sees it (all CPUs; the caller restricts it).
pub(crate) fn detect() -> Result<Topology, ClusterError> {
    let topology = HwTopology::new().map_err(|e| ClusterError::Topology {
        reason: format!("hwloc: {e}"),
    })?;
    let sets = |kind: ObjectType| -> Vec<CpuSet> {
        topology
            .objects_with_type(kind)
            .filter_map(|object| object.cpuset())
            .map(|set| set.iter_set().map(usize::from).collect())
            .collect()
    };
    Ok(Topology::from_parts(
        TopologySource::Hwloc,
        sets(ObjectType::Package),
        sets(ObjectType::NUMANode),
        sets(ObjectType::L3Cache),
        sets(ObjectType::L2Cache),
        sets(ObjectType::Core),
    ))
}
