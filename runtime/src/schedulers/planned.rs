//! Static allocations: tasks grouped, each group run in a fixed order by one worker of the
//! processor it was allotted to, with optional work stealing (Eyraud-Dubois and Lambert (2018)).
//!
//! A [`StaticPlan`] says which *processor* (a set of workers, typically those of one memory node,
//! whose speeds a partitioning algorithm merged) owns each *group* of tasks, and in which order a
//! group's tasks run. The [`Planned`] scheduler hands a worker the next task of the group it is
//! working on, and when that group is done, the next group of its processor's queue. A group is run
//! by one worker from start to end, so a chain of tasks writing the same tile never crosses workers
//! while it runs.
//!
//! - **Stealing** (optional, EffectiveSteal): a worker whose processor has no group left takes the
//!   not-yet-started group of another processor whose first task needs the fewest copies to its
//!   memory node (the transfer estimate, 0 when everything is there, which ends the search); ties
//!   go to the processor with the longest queue, and the group it would run last. Without stealing,
//!   the allocation is enforced to the end.
//! - **Prefetch**: [`Planned::lookahead`] gives a worker's next tasks in plan order (the rest of
//!   its group, then the next groups of its processor); the executors copy their inputs ahead
//!   (Eyraud-Dubois and Lambert (2018) prefetches two tasks ahead), only tiles that are safe to
//!   copy early (no task of the run writes them, or the task is ready).
//! - **Releases**: a plan may name, for a task, accesses to drop from the worker's memory node
//!   after it (written back first when that replica is the last copy). The maximum re-use ordering
//!   of Dongarra et al. (2007) uses this to keep exactly its buffers on a device.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use hetla_factorizations::TaskId;

use super::context::SchedContext;
use super::scheduler::Scheduler;
use crate::sync::lock;
use crate::workers::WorkerId;

/// A static allocation of groups of tasks to processors (see the module documentation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StaticPlan {
    /// Each group's tasks, in the order they run.
    pub groups: Vec<Vec<TaskId>>,
    /// The processor that owns each group.
    pub owner: Vec<usize>,
    /// The workers of each processor (indices into the run's workers).
    pub processors: Vec<Vec<WorkerId>>,
    /// Whether idle workers steal groups of other processors (EffectiveSteal).
    pub steal: bool,
    /// Whether the executors prefetch the inputs of the next planned tasks.
    pub prefetch: bool,
    /// `(task, access index)`: after `task`, drop that access's tile from the memory node of the
    /// worker that ran it.
    pub releases: Vec<(TaskId, usize)>,
}

impl StaticPlan {
    /// Checks that the plan covers each of `tasks` tasks exactly once and names existing processors
    /// and workers; says what is wrong otherwise.
    pub fn check(&self, tasks: usize, workers: usize) -> Result<(), String> {
        if self.owner.len() != self.groups.len() {
            return Err(format!(
                "{} owners for {} groups",
                self.owner.len(),
                self.groups.len()
            ));
        }
        let mut seen = vec![false; tasks];
        for &t in self.groups.iter().flatten() {
            if t.0 >= tasks || std::mem::replace(&mut seen[t], true) {
                return Err(format!("task {t} is out of range or in two groups"));
            }
        }
        if let Some(t) = seen.iter().position(|s| !s) {
            return Err(format!("task {t} is in no group"));
        }
        if let Some(&p) = self.owner.iter().find(|&&p| p >= self.processors.len()) {
            return Err(format!("group owner {p} is not a processor"));
        }
        if self.processors.iter().flatten().any(|&w| w.0 >= workers) {
            return Err(format!(
                "a processor names a worker beyond the {workers} workers"
            ));
        }
        Ok(())
    }
}

struct State {
    /// Not-yet-started groups of each processor, in plan order.
    queues: Vec<VecDeque<usize>>,
    /// Each worker's group and the position of its next task.
    current: Vec<Option<(usize, usize)>>,
    /// Whether each task was pushed (is ready).
    ready: Vec<bool>,
}

/// The scheduler that follows a [`StaticPlan`].
pub struct Planned {
    plan: Arc<StaticPlan>,
    /// The processor of each worker (`None`: the worker gets no group).
    processor_of: Vec<Option<usize>>,
    state: Mutex<State>,
}

impl Planned {
    /// A scheduler for `plan` on `workers` workers and `tasks` tasks.
    pub fn new(plan: Arc<StaticPlan>, workers: usize, tasks: usize) -> Self {
        let mut processor_of = vec![None; workers];
        for (p, members) in plan.processors.iter().enumerate() {
            for &w in members {
                processor_of[w] = Some(p);
            }
        }
        let mut queues = vec![VecDeque::new(); plan.processors.len()];
        for (g, &p) in plan.owner.iter().enumerate() {
            queues[p].push_back(g);
        }
        Self {
            plan,
            processor_of,
            state: Mutex::new(State {
                queues,
                current: vec![None; workers],
                ready: vec![false; tasks],
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// EffectiveSteal: the not-yet-started group of another processor whose first task needs the
    /// fewest copies to `worker`'s node; removed from its queue.
    fn steal(&self, state: &mut State, worker: WorkerId, ctx: &SchedContext<'_>) -> Option<usize> {
        let mine = self.processor_of[worker];
        let mut best: Option<(f64, usize, usize, usize)> = None; // cost, -len, queue, pos
        'search: for (p, queue) in state.queues.iter().enumerate() {
            if Some(p) == mine {
                continue;
            }
            for (pos, &g) in queue.iter().enumerate().rev() {
                let Some(&first) = self.plan.groups[g].first() else {
                    continue;
                };
                if !ctx.can_run(first, worker) {
                    continue;
                }
                let cost = ctx.transfer_estimate(first, worker);
                let better =
                    best.is_none_or(|(c, len, _, _)| cost < c || (cost == c && queue.len() > len));
                if better {
                    best = Some((cost, queue.len(), p, pos));
                }
                if cost == 0.0 {
                    break 'search;
                }
            }
        }
        let (_, _, p, pos) = best?;
        state.queues[p].remove(pos)
    }

    /// The next `depth` tasks `worker` will run if the plan holds: the rest of its group, then the
    /// groups at the front of its processor's queue.
    pub fn lookahead(&self, worker: WorkerId, depth: usize) -> Vec<TaskId> {
        if !self.plan.prefetch {
            return Vec::new();
        }
        let state = self.lock();
        let mut next = Vec::with_capacity(depth);
        if let Some((g, pos)) = state.current[worker] {
            next.extend(self.plan.groups[g][pos..].iter().take(depth));
        }
        if let Some(p) = self.processor_of[worker] {
            for &g in &state.queues[p] {
                if next.len() >= depth {
                    break;
                }
                let room = depth - next.len();
                next.extend(self.plan.groups[g].iter().take(room));
            }
        }
        next
    }
}

impl Scheduler for Planned {
    fn push(&self, task: TaskId, _origin: Option<WorkerId>, _now: f64, _ctx: &SchedContext<'_>) {
        self.lock().ready[task] = true;
    }

    fn pop(&self, worker: WorkerId, _now: f64, ctx: &SchedContext<'_>) -> Option<TaskId> {
        let mut state = self.lock();
        loop {
            if let Some((g, pos)) = state.current[worker] {
                if let Some(&task) = self.plan.groups[g].get(pos) {
                    if !state.ready[task] {
                        return None;
                    }
                    state.current[worker] = Some((g, pos + 1));
                    return Some(task);
                }
                state.current[worker] = None;
            }
            let own = self.processor_of[worker].and_then(|p| state.queues[p].pop_front());
            let next = match own {
                Some(g) => g,
                None if self.plan.steal => self.steal(&mut state, worker, ctx)?,
                None => return None,
            };
            state.current[worker] = Some((next, 0));
        }
    }

    fn lookahead(&self, worker: WorkerId, depth: usize) -> Vec<TaskId> {
        Planned::lookahead(self, worker, depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workers::WorkerInfo;

    fn ids<const N: usize>(tasks: [usize; N]) -> Vec<TaskId> {
        tasks.map(TaskId).to_vec()
    }

    fn ctx(workers: &[WorkerInfo], tasks: usize) -> SchedContext<'_> {
        SchedContext::uniform(workers, tasks, Default::default())
    }

    fn two_workers() -> Vec<WorkerInfo> {
        (0..2)
            .map(|i| WorkerInfo::cpu_cluster(i, vec![i]))
            .collect()
    }

    #[test]
    fn groups_run_in_order_on_their_processor_and_wait_for_readiness() {
        let workers = two_workers();
        let c = ctx(&workers, 4);
        let plan = StaticPlan {
            groups: vec![ids([1, 0]), ids([2, 3])],
            owner: vec![0, 1],
            processors: vec![vec![WorkerId(0)], vec![WorkerId(1)]],
            steal: false,
            prefetch: true,
            releases: vec![],
        };
        assert!(plan.check(4, 2).is_ok());
        let s = Planned::new(Arc::new(plan), 2, 4);
        for t in 0..4 {
            s.push(TaskId(t), None, 0.0, &c);
        }
        assert_eq!(s.lookahead(WorkerId(0), 3), ids([1, 0]));
        assert_eq!(s.pop(WorkerId(0), 0.0, &c), Some(TaskId(1)));
        assert_eq!(s.pop(WorkerId(0), 0.0, &c), Some(TaskId(0)));
        assert_eq!(
            s.pop(WorkerId(0), 0.0, &c),
            None,
            "no stealing: group 1 stays with worker 1"
        );
        assert_eq!(s.pop(WorkerId(1), 0.0, &c), Some(TaskId(2)));
        // Worker 1's next task is not ready yet: it waits.
        let s2 = Planned::new(
            Arc::new(StaticPlan {
                groups: vec![ids([0, 1])],
                owner: vec![0],
                processors: vec![vec![WorkerId(0)]],
                ..Default::default()
            }),
            1,
            2,
        );
        let one = &workers[..1];
        let c1 = ctx(one, 2);
        s2.push(TaskId(0), None, 0.0, &c1);
        assert_eq!(s2.pop(WorkerId(0), 0.0, &c1), Some(TaskId(0)));
        assert_eq!(s2.pop(WorkerId(0), 0.0, &c1), None);
        s2.push(TaskId(1), None, 0.0, &c1);
        assert_eq!(s2.pop(WorkerId(0), 0.0, &c1), Some(TaskId(1)));
    }

    #[test]
    fn an_idle_worker_steals_a_whole_unstarted_group() {
        let workers = two_workers();
        let c = ctx(&workers, 6);
        let plan = StaticPlan {
            groups: vec![ids([0, 1]), ids([2, 3]), ids([4, 5])],
            owner: vec![0, 0, 0],
            processors: vec![vec![WorkerId(0)], vec![WorkerId(1)]],
            steal: true,
            prefetch: true,
            releases: vec![],
        };
        let s = Planned::new(Arc::new(plan), 2, 6);
        for t in 0..6 {
            s.push(TaskId(t), None, 0.0, &c);
        }
        assert_eq!(s.pop(WorkerId(0), 0.0, &c), Some(TaskId(0)));
        // Worker 1 owns nothing: it steals the group processor 0 would run last.
        assert_eq!(s.pop(WorkerId(1), 0.0, &c), Some(TaskId(4)));
        assert_eq!(s.pop(WorkerId(1), 0.0, &c), Some(TaskId(5)));
        assert_eq!(s.pop(WorkerId(0), 0.0, &c), Some(TaskId(1)));
        assert_eq!(s.pop(WorkerId(0), 0.0, &c), Some(TaskId(2)));
        assert_eq!(
            s.pop(WorkerId(1), 0.0, &c),
            None,
            "group 1 is started: not stealable"
        );
        let bad = StaticPlan {
            groups: vec![ids([0, 0])],
            owner: vec![0],
            processors: vec![vec![WorkerId(0)]],
            ..Default::default()
        };
        assert!(bad.check(1, 1).unwrap_err().contains("two groups"));
    }
}
