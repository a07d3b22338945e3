//! The critical-path bound: no schedule finishes before its longest chain of tasks.

use crate::error::BoundsError;
use crate::instance::Instance;

/// The longest path of a task graph and its length.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticalPath {
    /// Sum of the durations along the path: a lower bound on the makespan.
    pub length: f64,
    /// The tasks of one longest path, first to last (empty for an empty graph).
    pub path: Vec<usize>,
}

/// The longest path of the graph whose task `i` lasts `durations[i]` and waits for the tasks
/// `predecessors[i]`. Tasks must be numbered topologically (each predecessor has a smaller index),
/// which graphs built in sequential order are. Linear in tasks + edges.
pub fn critical_path(
    durations: &[f64],
    predecessors: &[Vec<usize>],
) -> Result<CriticalPath, BoundsError> {
    if durations.len() != predecessors.len() {
        return Err(BoundsError::LengthMismatch {
            durations: durations.len(),
            tasks: predecessors.len(),
        });
    }
    // finish[i]: the earliest time task i can end; via[i]: the predecessor that forces it.
    let mut finish = vec![0.0_f64; durations.len()];
    let mut via = vec![None; durations.len()];
    for (task, (&d, preds)) in durations.iter().zip(predecessors).enumerate() {
        if !d.is_finite() || d < 0.0 {
            return Err(BoundsError::InvalidDuration { task, value: d });
        }
        let mut start = 0.0;
        for &p in preds {
            if p >= task {
                return Err(BoundsError::NotTopological {
                    task,
                    predecessor: p,
                });
            }
            if finish[p] > start || via[task].is_none() && finish[p] == start {
                start = finish[p];
                via[task] = Some(p);
            }
        }
        finish[task] = start + d;
    }
    let Some(last) = (0..finish.len()).max_by(|&a, &b| finish[a].total_cmp(&finish[b])) else {
        return Ok(CriticalPath {
            length: 0.0,
            path: Vec::new(),
        });
    };
    let mut path = vec![last];
    while let Some(p) = via[*path.last().expect("path starts non-empty")] {
        path.push(p);
    }
    path.reverse();
    Ok(CriticalPath {
        length: finish[last],
        path,
    })
}

impl Instance {
    /// The critical-path bound: the longest path with every task at the fastest duration any class
    /// with resources offers it.
    pub fn critical_path(&self) -> CriticalPath {
        let fastest: Vec<f64> = (0..self.type_count())
            .map(|k| self.fastest(k).unwrap_or(0.0))
            .collect();
        let durations: Vec<f64> = self.types().iter().map(|&k| fastest[k]).collect();
        critical_path(&durations, self.predecessors())
            .expect("an Instance is topological with valid durations")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diamond_takes_the_longer_branch() {
        // 0 -> {1, 2} -> 3, branch 2 is longer.
        let d = [1.0, 2.0, 5.0, 1.0];
        let preds = vec![vec![], vec![0], vec![0], vec![1, 2]];
        let cp = critical_path(&d, &preds).unwrap();
        assert_eq!(cp.length, 7.0);
        assert_eq!(cp.path, [0, 2, 3]);
    }

    #[test]
    fn independent_tasks_give_the_longest_one() {
        let cp = critical_path(&[3.0, 9.0, 4.0], &[vec![], vec![], vec![]]).unwrap();
        assert_eq!((cp.length, cp.path), (9.0, vec![1]));
        assert_eq!(critical_path(&[], &[]).unwrap().length, 0.0);
    }

    #[test]
    fn invalid_inputs_are_errors() {
        assert!(matches!(
            critical_path(&[1.0], &[]),
            Err(BoundsError::LengthMismatch { .. })
        ));
        assert_eq!(
            critical_path(&[1.0, 1.0], &[vec![1], vec![]]),
            Err(BoundsError::NotTopological {
                task: 0,
                predecessor: 1
            })
        );
        assert!(matches!(
            critical_path(&[1.0, -2.0], &[vec![], vec![0]]),
            Err(BoundsError::InvalidDuration { task: 1, .. })
        ));
    }
}
