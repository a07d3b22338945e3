//! The input every makespan bound shares: tasks with a type and their predecessors, and resource
//! classes with a count and a duration per task type.

use crate::error::BoundsError;

/// A kind of resource: `count` identical resources, each running a task of type `k` in
/// `durations[k]` (any unit, the same for every class; hetla uses milliseconds so the LP
/// coefficients stay well scaled), or unable to run it (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    /// A name for reports ("10-core cluster", "K40m").
    pub name: String,
    /// How many resources of this class there are. A class with none runs nothing.
    pub count: usize,
    /// Duration of one task of each type on one resource of this class, `None` when the class
    /// cannot run that type.
    pub durations: Vec<Option<f64>>,
    /// The part of its resource a task of each type keeps busy, in (0, 1], for resources that run
    /// several tasks at once sharing one rate (a GPU of several compute streams): such a task takes
    /// `occupancy * duration` of its resource's time in the area bound and its whole duration on a
    /// path. Empty: every task has its resource to itself (occupancy 1).
    pub occupancy: Vec<f64>,
}

impl Class {
    /// A class of `count` resources with the given duration per task type, each task holding its
    /// resource alone.
    pub fn new(name: impl Into<String>, count: usize, durations: Vec<Option<f64>>) -> Self {
        Self {
            name: name.into(),
            count,
            durations,
            occupancy: Vec::new(),
        }
    }

    /// The class whose tasks of type `k` keep `occupancy[k]` of their resource busy
    /// ([`Class::occupancy`]).
    pub fn with_occupancy(mut self, occupancy: Vec<f64>) -> Self {
        self.occupancy = occupancy;
        self
    }
}

/// A task graph with typed tasks and the resource classes that may run them, checked once so that
/// every bound can rely on it: tasks are in topological order, every duration is finite and
/// non-negative, and every task has at least one class with resources that can run it.
#[derive(Debug, Clone)]
pub struct Instance {
    types: Vec<usize>,
    predecessors: Vec<Vec<usize>>,
    classes: Vec<Class>,
    type_count: usize,
}

impl Instance {
    /// Task `i` has type `types[i]` and waits for `predecessors[i]` (each smaller than `i`);
    /// `classes[r].durations[k]` is the duration of type `k` on class `r`.
    pub fn new(
        types: Vec<usize>,
        predecessors: Vec<Vec<usize>>,
        classes: Vec<Class>,
    ) -> Result<Self, BoundsError> {
        if types.len() != predecessors.len() {
            return Err(BoundsError::LengthMismatch {
                durations: types.len(),
                tasks: predecessors.len(),
            });
        }
        let type_count = types.iter().max().map_or(0, |&k| k + 1);
        for (r, class) in classes.iter().enumerate() {
            if class.durations.len() < type_count {
                return Err(BoundsError::MissingDurations {
                    class: r,
                    given: class.durations.len(),
                    types: type_count,
                });
            }
            for (k, d) in class.durations.iter().enumerate() {
                if let Some(d) = *d
                    && (!d.is_finite() || d < 0.0)
                {
                    return Err(BoundsError::InvalidClassDuration {
                        class: r,
                        task_type: k,
                        value: d,
                    });
                }
            }
            let occupancies = class.occupancy.len();
            if occupancies != 0 && occupancies < type_count {
                return Err(BoundsError::MissingDurations {
                    class: r,
                    given: occupancies,
                    types: type_count,
                });
            }
            if let Some((k, &u)) =
                (class.occupancy.iter().enumerate()).find(|&(_, &u)| !(u > 0.0 && u <= 1.0))
            {
                return Err(BoundsError::InvalidOccupancy {
                    class: r,
                    task_type: k,
                    value: u,
                });
            }
        }
        for (task, preds) in predecessors.iter().enumerate() {
            if let Some(&p) = preds.iter().find(|&&p| p >= task) {
                return Err(BoundsError::NotTopological {
                    task,
                    predecessor: p,
                });
            }
        }
        let instance = Self {
            types,
            predecessors,
            classes,
            type_count,
        };
        for (task, &k) in instance.types.iter().enumerate() {
            if instance.fastest(k).is_none() {
                return Err(BoundsError::NoClassCanRun { task, task_type: k });
            }
        }
        Ok(instance)
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Number of task types (one more than the largest type used).
    pub fn type_count(&self) -> usize {
        self.type_count
    }

    /// The type of each task.
    pub fn types(&self) -> &[usize] {
        &self.types
    }

    /// The predecessors of each task.
    pub fn predecessors(&self) -> &[Vec<usize>] {
        &self.predecessors
    }

    /// Number of dependency edges.
    pub fn edge_count(&self) -> usize {
        self.predecessors.iter().map(Vec::len).sum()
    }

    /// The resource classes.
    pub fn classes(&self) -> &[Class] {
        &self.classes
    }

    /// Duration of type `k` on class `r`, or `None` when the class cannot run it or has no
    /// resources.
    pub fn duration(&self, k: usize, r: usize) -> Option<f64> {
        let class = &self.classes[r];
        if class.count == 0 {
            return None;
        }
        class.durations[k]
    }

    /// The time a task of type `k` takes from a resource of class `r` in the area bound: its
    /// duration times its occupancy, or `None` as [`Instance::duration`].
    pub fn occupied(&self, k: usize, r: usize) -> Option<f64> {
        let occupancy = self.classes[r].occupancy.get(k).copied().unwrap_or(1.0);
        self.duration(k, r).map(|d| d * occupancy)
    }

    /// The classes that can run type `k`, with their durations.
    pub fn allowed(&self, k: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        (0..self.classes.len()).filter_map(move |r| self.duration(k, r).map(|d| (r, d)))
    }

    /// The shortest duration of type `k` over the classes that can run it.
    pub fn fastest(&self, k: usize) -> Option<f64> {
        self.allowed(k).map(|(_, d)| d).min_by(f64::total_cmp)
    }

    /// Number of tasks of each type.
    pub fn tasks_per_type(&self) -> Vec<usize> {
        let mut counts = vec![0; self.type_count];
        for &k in &self.types {
            counts[k] += 1;
        }
        counts
    }
}
