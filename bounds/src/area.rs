//! The area bound: however tasks are placed, every class must do its share of the work with its
//! resources, so the makespan is at least the smallest T for which the work can be shared out with
//! no class busy longer than T per resource.
//!
//! LP over n(k, r) >= 0, the number of tasks of type k given to class r: sum_r n(k, r) = N_k for
//! every type, sum_k n(k, r) p(k, r) u(k, r) <= M_r T for every class; minimise T, where u is a
//! task's occupancy of its resource (1 unless the class shares its resources among tasks running at
//! once, [`crate::Class::occupancy`]). The counts are fractional: they are a relaxation, not a
//! schedule.

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem};

use crate::error::BoundsError;
use crate::instance::Instance;
use crate::lp::optimum;

/// The area bound and the fractional split of each task type among the classes that reaches it.
#[derive(Debug, Clone, PartialEq)]
pub struct AreaBound {
    /// The bound T on the makespan.
    pub makespan: f64,
    /// `counts[k][r]`: how many tasks of type `k` class `r` takes (fractional; a relaxation, not a
    /// schedule).
    pub counts: Vec<Vec<f64>>,
}

impl Instance {
    /// Solves the area LP.
    pub fn area(&self) -> Result<AreaBound, BoundsError> {
        let classes = self.classes().len();
        let per_type = self.tasks_per_type();
        let mut lp = Problem::new(OptimizationDirection::Minimize);
        let t = lp.add_var(1.0, (0.0, f64::INFINITY));
        // vars[k][r]: the LP variable n(k, r), when class r can run type k.
        let vars: Vec<Vec<Option<microlp::Variable>>> = per_type
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                (0..classes)
                    .map(|r| {
                        self.duration(k, r)
                            .filter(|_| n > 0)
                            .map(|_| lp.add_var(0.0, (0.0, n as f64)))
                    })
                    .collect()
            })
            .collect();
        for (k, &n) in per_type.iter().enumerate() {
            if n > 0 {
                let all: LinearExpr = vars[k].iter().flatten().map(|&v| (v, 1.0)).collect();
                lp.add_constraint(all, ComparisonOp::Eq, n as f64);
            }
        }
        for r in 0..classes {
            let mut work = LinearExpr::empty();
            for (k, row) in vars.iter().enumerate() {
                if let (Some(v), Some(d)) = (row[r], self.occupied(k, r)) {
                    work.add(v, d);
                }
            }
            work.add(t, -(self.classes()[r].count as f64));
            lp.add_constraint(work, ComparisonOp::Le, 0.0);
        }
        let solution = optimum(lp.solve())?;
        let counts = vars
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.map_or(0.0, |v| solution.var_value(v)))
                    .collect()
            })
            .collect();
        Ok(AreaBound {
            makespan: solution.var_value(t),
            counts,
        })
    }
}
