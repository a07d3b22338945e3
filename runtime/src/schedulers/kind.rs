//! The policies by name, as options and the command line give them.

use std::fmt;
use std::str::FromStr;

use super::dmda::{DMDA_BETA, Dmda};
use super::eager::Eager;
use super::mct::Mct;
use super::scheduler::Scheduler;
use super::work_stealing::WorkStealing;

/// The policies hetla has, by name (serialised by it: "mct", "dmda", "eager", "ws").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// Minimum completion time with performance models.
    #[default]
    Mct,
    /// StarPU's dmda: minimum completion time with each transfer as a penalty.
    Dmda,
    /// A central priority queue.
    Eager,
    /// Per-worker deques with stealing.
    #[serde(rename = "ws")]
    WorkStealing,
}

impl SchedulerKind {
    /// Every policy.
    pub const ALL: [SchedulerKind; 4] = [Self::Mct, Self::Dmda, Self::Eager, Self::WorkStealing];

    /// The name used on the command line ("mct", "eager", "ws").
    pub fn name(self) -> &'static str {
        match self {
            Self::Mct => "mct",
            Self::Dmda => "dmda",
            Self::Eager => "eager",
            Self::WorkStealing => "ws",
        }
    }

    /// A fresh scheduler of this kind for `workers` workers (dmda with beta [`DMDA_BETA`];
    /// [`Dmda::new`] takes another).
    pub fn build(self, workers: usize) -> Box<dyn Scheduler> {
        self.build_with_beta(workers, DMDA_BETA)
    }

    /// As [`SchedulerKind::build`], with dmda's transfer weight `beta`.
    pub fn build_with_beta(self, workers: usize, beta: f64) -> Box<dyn Scheduler> {
        match self {
            Self::Mct => Box::new(Mct::new(workers)),
            Self::Dmda => Box::new(Dmda::new(workers, beta)),
            Self::Eager => Box::new(Eager::default()),
            Self::WorkStealing => Box::new(WorkStealing::new(workers)),
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchedulerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mct" => Ok(Self::Mct),
            "dmda" => Ok(Self::Dmda),
            "eager" => Ok(Self::Eager),
            "ws" | "work-stealing" | "workstealing" => Ok(Self::WorkStealing),
            _ => Err(format!(
                "unknown scheduler {s:?}; expected mct, dmda, eager or ws"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_named_and_parsed_back() {
        for kind in SchedulerKind::ALL {
            assert_eq!(kind.name().parse::<SchedulerKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
        assert_eq!("DMDA".parse::<SchedulerKind>(), Ok(SchedulerKind::Dmda));
        assert_eq!(
            "work-stealing".parse::<SchedulerKind>(),
            Ok(SchedulerKind::WorkStealing)
        );
        assert!(
            "heft"
                .parse::<SchedulerKind>()
                .unwrap_err()
                .contains("mct, dmda")
        );
    }
}
