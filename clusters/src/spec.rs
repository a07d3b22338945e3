//! Cluster specifications: how the cores a run may use are grouped into clusters.
//!
//! Forms (case-insensitive):
//! - `NxM`: N clusters of M cores ("2x10", "4x16", "1x2", "2x1"). Cores are taken in hierarchy
//!   order, M consecutive cores per cluster, so a cluster's cores share caches and a NUMA node
//!   whenever M fits in them. Cores beyond N*M stay unused.
//! - a level, `package`, `numa`, `l3`, `l2` or `core`: one cluster per object of that level, with
//!   all its cores.
//! - explicit lists of logical CPUs, one cluster per comma-separated list, lists separated by `/`
//!   or `;` ("0-3/4-7"), or, when every list is a plain range, by commas ("0-3,4-7").
//! - `auto`: one cluster per L3 cache when the machine has several, else one per NUMA node when it
//!   has several, else one cluster with every core. A shared L3 is where a cluster's kernels find
//!   their data (Cojean et al. (2016) groups the cores of a cache domain).
//! - `none`: no CPU cluster at all; the run uses its GPUs only.
//!
//! A cluster uses one logical CPU per core (the first of its hyperthreads), except with explicit
//! lists, which name logical CPUs directly.

use std::fmt;
use std::str::FromStr;

use crate::{ClusterError, Level, Topology, format_cpu_list, parse_cpu_list};

/// How to group cores into clusters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClusterSpec {
    /// `count` clusters of `size` cores.
    Grid {
        /// Number of clusters.
        count: usize,
        /// Cores per cluster.
        size: usize,
    },
    /// One cluster per object of a topology level.
    Level(Level),
    /// Explicit clusters, each a list of logical CPUs.
    Lists(Vec<Vec<usize>>),
    /// One cluster per L3, else per NUMA node, else one cluster (see the module doc).
    #[default]
    Auto,
    /// No CPU cluster (GPU-only runs).
    None,
}

impl FromStr for ClusterSpec {
    type Err = ClusterError;

    fn from_str(text: &str) -> Result<Self, ClusterError> {
        let s = text.trim().to_ascii_lowercase();
        let unknown = |reason: &str| ClusterError::Spec {
            spec: text.to_owned(),
            reason: reason.to_owned(),
        };
        if s.is_empty() {
            return Err(unknown("empty spec"));
        }
        if s == "auto" {
            return Ok(Self::Auto);
        }
        if s == "none" {
            return Ok(Self::None);
        }
        if let Some(level) = Level::ALL.into_iter().find(|l| l.name() == s) {
            return Ok(Self::Level(level));
        }
        if let Some((n, m)) = s.split_once('x') {
            let parse = |v: &str, what: &str| {
                v.trim().parse::<usize>().map_err(|_| {
                    unknown(&format!("{what} in NxM must be a whole number, got {v:?}"))
                })
            };
            let (count, size) = (parse(n, "N")?, parse(m, "M")?);
            if count == 0 || size == 0 {
                return Err(ClusterError::ZeroSized {
                    spec: text.to_owned(),
                });
            }
            return Ok(Self::Grid { count, size });
        }
        if s.starts_with(|c: char| c.is_ascii_digit()) {
            let lists: Vec<&str> = if s.contains(['/', ';']) {
                s.split(['/', ';']).collect()
            } else if s.split(',').all(|part| part.contains('-')) {
                s.split(',').collect()
            } else {
                vec![s.as_str()]
            };
            let mut clusters = Vec::new();
            for list in lists {
                if list.trim().is_empty() {
                    return Err(ClusterError::ZeroSized {
                        spec: text.to_owned(),
                    });
                }
                clusters.push(parse_cpu_list(list.trim())?);
            }
            return Ok(Self::Lists(clusters));
        }
        Err(unknown(
            "expected NxM (\"2x10\"), a level (package, numa, l3, l2, core), CPU lists (\"0-3/4-7\"), auto or none",
        ))
    }
}

impl fmt::Display for ClusterSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Grid { count, size } => write!(f, "{count}x{size}"),
            Self::Level(level) => write!(f, "{level}"),
            Self::Lists(lists) => {
                let lists: Vec<String> = lists.iter().map(|l| format_cpu_list(l)).collect();
                f.write_str(&lists.join("/"))
            }
            Self::Auto => f.write_str("auto"),
            Self::None => f.write_str("none"),
        }
    }
}

impl ClusterSpec {
    /// The clusters this spec makes on `topology`, each a sorted list of logical CPUs, in hierarchy
    /// order. Errors: more cores asked than the topology has, CPUs outside it, overlapping lists, a
    /// level the topology does not describe. `none` makes no cluster.
    pub fn resolve(&self, topology: &Topology) -> Result<Vec<Vec<usize>>, ClusterError> {
        if *self == Self::None {
            return Ok(Vec::new());
        }
        let cores = topology.cores();
        let first_cpu_of_cores = |cpus: &[usize]| -> Vec<usize> {
            cores
                .iter()
                .filter(|core| core.iter().any(|c| cpus.contains(c)))
                .map(|core| core[0])
                .collect()
        };
        let clusters = match self {
            Self::Grid { count, size } => {
                // A product past usize (from a spec of two huge numbers) asks for more than any
                // machine has all the same.
                let asked = count.saturating_mul(*size);
                if asked > cores.len() {
                    return Err(ClusterError::TooManyCores {
                        spec: self.to_string(),
                        asked,
                        available: cores.len(),
                    });
                }
                cores[..asked]
                    .chunks(*size)
                    .map(|chunk| chunk.iter().map(|core| core[0]).collect())
                    .collect()
            }
            Self::Level(level) => {
                let objects = topology.level(*level);
                if objects.is_empty() {
                    return Err(ClusterError::MissingLevel { level: *level });
                }
                objects.iter().map(|o| first_cpu_of_cores(o)).collect()
            }
            Self::Lists(lists) => {
                let known = topology.cpus();
                let mut seen = Vec::new();
                for list in lists {
                    if list.is_empty() {
                        return Err(ClusterError::ZeroSized {
                            spec: self.to_string(),
                        });
                    }
                    for &cpu in list {
                        if known.binary_search(&cpu).is_err() {
                            return Err(ClusterError::UnavailableCpu {
                                cpu,
                                available: format_cpu_list(&known),
                            });
                        }
                        if seen.contains(&cpu) {
                            return Err(ClusterError::Overlap { cpu });
                        }
                        seen.push(cpu);
                    }
                }
                lists.clone()
            }
            Self::None => Vec::new(),
            Self::Auto => {
                let level = [Level::L3, Level::Numa]
                    .into_iter()
                    .find(|&l| topology.level(l).len() > 1);
                match level {
                    Some(level) => return Self::Level(level).resolve(topology),
                    None => vec![cores.iter().map(|core| core[0]).collect()],
                }
            }
        };
        let mut clusters: Vec<Vec<usize>> = clusters;
        clusters.retain(|c| !c.is_empty());
        if clusters.is_empty() {
            return Err(ClusterError::ZeroSized {
                spec: self.to_string(),
            });
        }
        for c in &mut clusters {
            c.sort_unstable();
        }
        Ok(clusters)
    }
}
