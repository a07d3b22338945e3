//! The mixed (iterative) bound: the area bound made aware of the graph's paths.
//!
//! LP over per-task fractions x(i, r) >= 0 with sum_r x(i, r) = 1: the area constraints sum_i x(i,
//! r) p(i, r) u(i, r) <= M_r T (u: the task's occupancy of its resource, 1 unless the class shares
//! its resources, [`crate::Class::occupancy`]), and for some paths P the path constraint sum_{i in
//! P} d_i <= T with d_i = sum_r x(i, r) p(i, r). Every path constraint holds in any schedule, so
//! the optimum is a lower bound whatever set of paths is used; using all of them would give the
//! strongest. Constraint generation gets there without listing them: start with the critical path,
//! solve, find the longest path under the current durations d_i, and if it is longer than T
//! (relative tolerance 1e-9) add it and re-solve from the previous optimum (microlp's dual simplex
//! keeps the basis). When no path is longer than T the fractions satisfy every path constraint, so
//! T is the optimum of the LP with all paths. T never decreases, and it is at least the area bound
//! and the critical path.
//!
//! Formulation. For a task the classes can run, one of them (the one with the most throughput,
//! count / duration, which takes most tasks at the optimum) is its reference class; the LP
//! variables are the fractions y(i, r) on the other classes, and x(i, ref) = 1 - sum y. With two
//! classes, the usual case (CPU clusters and GPUs), every task has one variable bounded by [0, 1]
//! and no row of its own, so the LP has one row per class and one per path: small bases and cheap
//! re-solves even at 11,480 tasks. A task with three or more classes adds the row sum y <= 1; a
//! task with one class has a fixed duration and no variable.

use std::collections::HashSet;

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem, Solution, Variable};

use crate::critical_path::critical_path;
use crate::error::BoundsError;
use crate::instance::Instance;
use crate::lp::optimum;

/// Relative amount by which a path may exceed T before it is added as a constraint.
pub const PATH_TOLERANCE: f64 = 1e-9;

/// The mixed bound, the fractional allocation that reaches it, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct MixedBound {
    /// The bound T on the makespan.
    pub makespan: f64,
    /// Number of LP solves (the first one, plus one per path added after it).
    pub iterations: usize,
    /// The path constraints of the final LP, in the order they were added; the first is the
    /// critical path.
    pub paths: Vec<Vec<usize>>,
    /// Fractions x(i, r), task-major: `fractions[i * classes + r]`.
    fractions: Vec<f64>,
    classes: usize,
}

impl MixedBound {
    /// Fraction of task `task` placed on class `class` by the LP (a relaxation: a task may be split
    /// between classes, and the placement is not a schedule).
    pub fn fraction(&self, task: usize, class: usize) -> f64 {
        self.fractions[task * self.classes + class]
    }
}

/// One LP variable: the fraction of a task on a non-reference class.
struct Share {
    class: usize,
    var: Variable,
    /// Duration on that class minus duration on the reference class.
    delta: f64,
    /// The task's time on that class in the area rows (its duration times its occupancy).
    area: f64,
}

/// Each task's reference class and duration there, and its variables.
struct Layout {
    reference: Vec<(usize, f64)>,
    /// Each task's time on its reference class in the area rows.
    reference_area: Vec<f64>,
    /// Shares of task i: `shares[first[i]..first[i + 1]]`.
    first: Vec<usize>,
    shares: Vec<Share>,
}

impl Layout {
    fn shares(&self, task: usize) -> &[Share] {
        &self.shares[self.first[task]..self.first[task + 1]]
    }

    /// Durations d_i = p(i, ref) + sum delta y under an LP solution.
    fn durations(&self, solution: &Solution) -> Vec<f64> {
        (0..self.reference.len())
            .map(|i| {
                self.reference[i].1
                    + self
                        .shares(i)
                        .iter()
                        .map(|s| s.delta * solution.var_value(s.var))
                        .sum::<f64>()
            })
            .collect()
    }

    /// The constraint sum_{i in path} d_i <= T as (expression, right-hand side).
    fn path_row(&self, path: &[usize], t: Variable) -> (LinearExpr, f64) {
        let mut expr = LinearExpr::empty();
        let mut fixed = 0.0;
        for &i in path {
            fixed += self.reference[i].1;
            for s in self.shares(i) {
                expr.add(s.var, s.delta);
            }
        }
        expr.add(t, -1.0);
        (expr, -fixed)
    }
}

impl Instance {
    /// Computes the mixed bound by constraint generation (see the module documentation).
    pub fn mixed(&self) -> Result<MixedBound, BoundsError> {
        let classes = self.classes().len();
        let seed = self.critical_path();
        if self.is_empty() {
            return Ok(MixedBound {
                makespan: 0.0,
                iterations: 0,
                paths: Vec::new(),
                fractions: Vec::new(),
                classes,
            });
        }
        let mut lp = Problem::new(OptimizationDirection::Minimize);
        let t = lp.add_var(1.0, (0.0, f64::INFINITY));
        let layout = self.layout(&mut lp);
        self.add_area_rows(&mut lp, &layout, t);
        for i in 0..self.len() {
            let shares = layout.shares(i);
            if shares.len() >= 2 {
                let all: LinearExpr = shares.iter().map(|s| (s.var, 1.0)).collect();
                lp.add_constraint(all, ComparisonOp::Le, 1.0);
            }
        }
        let (row, rhs) = layout.path_row(&seed.path, t);
        lp.add_constraint(row, ComparisonOp::Le, rhs);
        let mut solution = optimum(lp.solve())?;
        let mut paths = vec![seed.path];
        let mut added: HashSet<Vec<usize>> = paths.iter().cloned().collect();
        loop {
            let makespan = solution.var_value(t);
            let durations = layout.durations(&solution);
            let longest = critical_path(&durations, self.predecessors())
                .expect("an Instance is topological with valid durations");
            // A path already in the LP can only look longer than T through rounding in the
            // solver; adding it again would change nothing.
            if longest.length <= makespan * (1.0 + PATH_TOLERANCE) || added.contains(&longest.path)
            {
                return Ok(MixedBound {
                    makespan,
                    iterations: paths.len(),
                    paths,
                    fractions: self.fractions(&layout, &solution),
                    classes,
                });
            }
            let (row, rhs) = layout.path_row(&longest.path, t);
            solution = optimum(solution.add_constraint(row, ComparisonOp::Le, rhs))?;
            added.insert(longest.path.clone());
            paths.push(longest.path);
        }
    }

    /// Chooses each task's reference class and creates the variables of the others.
    fn layout(&self, lp: &mut Problem) -> Layout {
        let mut reference = Vec::with_capacity(self.len());
        let mut reference_area = Vec::with_capacity(self.len());
        let mut first = Vec::with_capacity(self.len() + 1);
        let mut shares = Vec::new();
        first.push(0);
        for &k in self.types() {
            let throughput = |&(r, d): &(usize, f64)| self.classes()[r].count as f64 / d;
            let (ref_class, ref_duration) = self
                .allowed(k)
                .max_by(|a, b| throughput(a).total_cmp(&throughput(b)))
                .expect("an Instance has a class for every task");
            reference.push((ref_class, ref_duration));
            let area = |r| {
                self.occupied(k, r)
                    .expect("an allowed class has a duration")
            };
            reference_area.push(area(ref_class));
            for (r, d) in self.allowed(k).filter(|&(r, _)| r != ref_class) {
                shares.push(Share {
                    class: r,
                    var: lp.add_var(0.0, (0.0, 1.0)),
                    delta: d - ref_duration,
                    area: area(r),
                });
            }
            first.push(shares.len());
        }
        Layout {
            reference,
            reference_area,
            first,
            shares,
        }
    }

    /// sum_i x(i, r) p(i, r) u(i, r) <= M_r T for every class with resources (u: the occupancy).
    fn add_area_rows(&self, lp: &mut Problem, layout: &Layout, t: Variable) {
        for (r, class) in self.classes().iter().enumerate() {
            if class.count == 0 {
                continue;
            }
            let mut work = LinearExpr::empty();
            let mut fixed = 0.0;
            for (i, &(ref_class, _)) in layout.reference.iter().enumerate() {
                let ref_area = layout.reference_area[i];
                for s in layout.shares(i) {
                    if ref_class == r {
                        // x(i, r) = 1 - sum y: every share moves work away from r.
                        work.add(s.var, -ref_area);
                    } else if s.class == r {
                        work.add(s.var, s.area);
                    }
                }
                if ref_class == r {
                    fixed += ref_area;
                }
            }
            work.add(t, -(class.count as f64));
            lp.add_constraint(work, ComparisonOp::Le, -fixed);
        }
    }

    /// The fractions x(i, r) of a solution, task-major.
    fn fractions(&self, layout: &Layout, solution: &Solution) -> Vec<f64> {
        let classes = self.classes().len();
        let mut fractions = vec![0.0; self.len() * classes];
        for (i, &(ref_class, _)) in layout.reference.iter().enumerate() {
            let mut rest = 1.0;
            for s in layout.shares(i) {
                let y = solution.var_value(s.var);
                fractions[i * classes + s.class] = y;
                rest -= y;
            }
            fractions[i * classes + ref_class] = rest.max(0.0);
        }
        fractions
    }
}
