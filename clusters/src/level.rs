//! The levels of the memory hierarchy at which cores can be grouped.

use std::fmt;

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
