//! The critical path against brute force on random small DAGs.

use hetla_bounds::critical_path;
use proptest::prelude::*;

/// Longest path by enumerating every path into every task (exponential; tiny graphs only).
fn brute_force(d: &[f64], preds: &[Vec<usize>]) -> f64 {
    fn longest_ending_at(t: usize, d: &[f64], preds: &[Vec<usize>]) -> f64 {
        d[t] + preds[t]
            .iter()
            .map(|&p| longest_ending_at(p, d, preds))
            .fold(0.0, f64::max)
    }
    (0..d.len())
        .map(|t| longest_ending_at(t, d, preds))
        .fold(0.0, f64::max)
}

proptest! {
    #[test]
    fn matches_brute_force_and_the_path_is_a_chain(
        tasks in prop::collection::vec((0.0f64..10.0, prop::collection::vec(any::<prop::sample::Index>(), 0..3)), 0..12)
    ) {
        let durations: Vec<f64> = tasks.iter().map(|t| t.0).collect();
        let preds: Vec<Vec<usize>> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| if i == 0 { vec![] } else { t.1.iter().map(|x| x.index(i)).collect() })
            .collect();
        let cp = critical_path(&durations, &preds).unwrap();
        prop_assert!((cp.length - brute_force(&durations, &preds)).abs() < 1e-9);
        let along: f64 = cp.path.iter().map(|&t| durations[t]).sum();
        prop_assert!((along - cp.length).abs() < 1e-9);
        for w in cp.path.windows(2) {
            prop_assert!(preds[w[1]].contains(&w[0]));
        }
    }
}
