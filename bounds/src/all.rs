//! The three bounds of one instance together.

use crate::area::AreaBound;
use crate::critical_path::CriticalPath;
use crate::error::BoundsError;
use crate::instance::Instance;
use crate::mixed::MixedBound;

/// The three makespan bounds of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    /// The critical path.
    pub critical_path: CriticalPath,
    /// The area bound.
    pub area: AreaBound,
    /// The mixed bound.
    pub mixed: MixedBound,
}

impl Instance {
    /// Computes the critical-path, area and mixed bounds.
    pub fn bounds(&self) -> Result<Bounds, BoundsError> {
        Ok(Bounds {
            critical_path: self.critical_path(),
            area: self.area()?,
            mixed: self.mixed()?,
        })
    }
}
