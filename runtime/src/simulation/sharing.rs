//! A GPU running several kernels at once, as the simulator models it (the real device's pool of
//! compute streams, `HETLA_GPU_STREAMS`).
//!
//! *Sharing rule.* A GPU of `S` compute streams runs up to `S` kernels at once. A kernel alone runs
//! at its modelled rate `r` (its flops over its modelled duration); the GPU's full rate `R` in a
//! precision is the highest rate any of the run's kernels reaches on it (its largest GEMM's, as
//! calibrated). A kernel's *occupancy* is `u = min(1, r / R)`, the part of the GPU it keeps busy
//! alone (a POTRF of 1024 fills a tenth of an H100, a GEMM of 4096 all of it; a kernel without
//! flops, such as a row interchange, counts as filling it). Kernels running at once each progress
//! at their own rate while their occupancies add up to at most 1, and all slow down by the sum
//! beyond it: the GPU never does more than `R` together, and no kernel runs faster than alone.
//! *Priority:* a step's panel work ([`Op::on_critical_path`](hetla_kernels::Op::on_critical_path),
//! the kernels a real device puts on its stream of greatest priority) takes its share first; the
//! others share what it leaves. With one stream every kernel has the GPU to itself (occupancy 1),
//! as before pools existed.
//!
//! The bounds follow the same rule: a kernel of occupancy `u` and duration `d` takes `u d` of its
//! GPU's time in the area bound (the GPU does at most `R` at any moment), and still `d` on a path.
//!
//! [`Shared`] is one GPU's running set on the virtual clock: its kernels' remaining work in seconds
//! alone, advanced at the shared speed between two changes of the set, and their ends, which every
//! change moves (the event loop ignores an end it has since moved).

use std::collections::HashMap;

use hetla_factorizations::TaskId;
use hetla_kernels::Precision;

use crate::perfmodel::{KernelKey, ResourceClass};

/// How kernels share the GPUs of a run. A GPU of `S` compute streams runs up to `S` kernels at
/// once; a kernel's *occupancy* is its modelled rate over the GPU's full rate in its precision (the
/// highest rate of the run's kernels on it), at most 1, and 1 for a kernel without flops. Kernels
/// at once each run at their own rate while their occupancies fit in 1, else share what is left, a
/// step's panel work first: the GPU never does more than its full rate together, no kernel runs
/// faster than alone. In the bounds a kernel takes its occupancy times its duration of its GPU's
/// time (area) and its whole duration on a path. One stream: every occupancy is 1.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSharing {
    streams: usize,
    /// The full rate, in flop/s, of each GPU class in each precision.
    full: HashMap<ResourceClass, Vec<(Precision, f64)>>,
}

impl GpuSharing {
    /// The sharing of GPUs of `streams` compute streams among the kernels `keys` whose durations on
    /// each class are `duration`'s: the full rate of each GPU class in `classes` is the highest
    /// rate among them.
    pub fn new<'k>(
        streams: usize,
        keys: impl IntoIterator<Item = &'k KernelKey>,
        classes: &[ResourceClass],
        duration: impl Fn(&KernelKey, &ResourceClass) -> Option<f64>,
    ) -> Self {
        let mut full: HashMap<ResourceClass, Vec<(Precision, f64)>> = HashMap::new();
        let gpus: Vec<&ResourceClass> = classes
            .iter()
            .filter(|c| matches!(c, ResourceClass::Gpu { .. }))
            .collect();
        if streams > 1 && !gpus.is_empty() {
            let mut seen = std::collections::HashSet::new();
            for key in keys.into_iter().filter(|k| seen.insert(*k)) {
                for &class in &gpus {
                    if let Some(rate) = rate(key, duration(key, class)) {
                        let rates = full.entry(class.clone()).or_default();
                        match rates.iter_mut().find(|(p, _)| *p == key.precision) {
                            Some((_, best)) => *best = best.max(rate),
                            None => rates.push((key.precision, rate)),
                        }
                    }
                }
            }
        }
        Self { streams, full }
    }

    /// One kernel at a time on every GPU: every kernel has its GPU to itself.
    pub fn alone() -> Self {
        Self {
            streams: 1,
            full: HashMap::new(),
        }
    }

    /// The compute streams of each GPU: the kernels it runs at once at most.
    pub fn streams(&self) -> usize {
        self.streams
    }

    /// The part of its resource a kernel `key` of `seconds` on `class` keeps busy alone: its rate
    /// over the GPU's full rate on a GPU of several streams, else 1 (a CPU cluster, a GPU of one
    /// stream, a kernel without flops or a rate unknown).
    pub fn occupancy(&self, key: &KernelKey, class: &ResourceClass, seconds: f64) -> f64 {
        if self.streams <= 1 {
            return 1.0;
        }
        let full = (self.full.get(class).into_iter().flatten())
            .find(|(p, _)| *p == key.precision)
            .map(|&(_, full)| full);
        match (rate(key, Some(seconds)), full) {
            (Some(rate), Some(full)) if full > 0.0 => (rate / full).min(1.0),
            _ => 1.0,
        }
    }
}

/// Flop/s of kernel `key` lasting `seconds`, when both are positive.
fn rate(key: &KernelKey, seconds: Option<f64>) -> Option<f64> {
    let (flops, seconds) = (key.flops(), seconds?);
    (flops > 0.0 && seconds > 0.0).then(|| flops / seconds)
}

/// A kernel running on a shared GPU.
#[derive(Debug, Clone)]
struct Running {
    task: TaskId,
    /// When it began (its inputs had arrived).
    began: f64,
    /// Seconds it would still take alone.
    left: f64,
    occupancy: f64,
    /// A step's panel work, served first.
    urgent: bool,
}

/// A kernel's start on a shared GPU: seconds alone, occupancy, and whether it is urgent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Kernel {
    pub seconds: f64,
    pub occupancy: f64,
    pub urgent: bool,
}

/// One GPU's kernels running at once on the virtual clock.
#[derive(Debug, Clone, Default)]
pub(super) struct Shared {
    running: Vec<Running>,
    /// When the running set last changed (the remaining work is as of then).
    since: f64,
}

impl Shared {
    /// How fast the urgent kernels and the others progress relative to alone: the urgent ones share
    /// the GPU among themselves, the others what they leave.
    fn speeds(&self) -> (f64, f64) {
        let sum = |urgent: bool| -> f64 {
            (self.running.iter())
                .filter(|k| k.urgent == urgent)
                .map(|k| k.occupancy)
                .sum()
        };
        let (urgent, rest) = (sum(true), sum(false));
        let room = (1.0 - urgent).max(0.0);
        let others = if rest <= room { 1.0 } else { room / rest };
        (1.0 / urgent.max(1.0), others)
    }

    fn speed_of(k: &Running, (urgent, others): (f64, f64)) -> f64 {
        if k.urgent { urgent } else { others }
    }

    /// Advances every running kernel's remaining work to `now`.
    fn advance(&mut self, now: f64) {
        let (elapsed, speeds) = ((now - self.since).max(0.0), self.speeds());
        for k in &mut self.running {
            k.left = (k.left - elapsed * Self::speed_of(k, speeds)).max(0.0);
        }
        self.since = now;
    }

    /// Kernel `task` begins at `now`; returns every running kernel's new end (`None`: stalled
    /// behind urgent kernels that fill the GPU, until the next change).
    pub(super) fn begin(
        &mut self,
        task: TaskId,
        now: f64,
        kernel: Kernel,
    ) -> Vec<(TaskId, Option<f64>)> {
        self.advance(now);
        self.running.push(Running {
            task,
            began: now,
            left: kernel.seconds,
            occupancy: kernel.occupancy,
            urgent: kernel.urgent,
        });
        self.ends(now)
    }

    /// Kernel `task` ends at `now`; returns when it began and the other kernels' new ends.
    pub(super) fn end(&mut self, task: TaskId, now: f64) -> (f64, Vec<(TaskId, Option<f64>)>) {
        self.advance(now);
        let i = self
            .running
            .iter()
            .position(|k| k.task == task)
            .expect("a shared GPU ends only a kernel it runs");
        let began = self.running.swap_remove(i).began;
        (began, self.ends(now))
    }

    /// The end of each running kernel at the current speeds, from `now`.
    fn ends(&self, now: f64) -> Vec<(TaskId, Option<f64>)> {
        let speeds = self.speeds();
        (self.running.iter())
            .map(|k| {
                let speed = Self::speed_of(k, speeds);
                (k.task, (speed > 0.0).then(|| now + k.left / speed))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_kernels::Op;

    fn gpu() -> ResourceClass {
        ResourceClass::Gpu { name: "g".into() }
    }

    fn kernel(seconds: f64, occupancy: f64) -> Kernel {
        Kernel {
            seconds,
            occupancy,
            urgent: false,
        }
    }

    /// A step's panel kernel.
    fn panel(seconds: f64, occupancy: f64) -> Kernel {
        Kernel {
            urgent: true,
            ..kernel(seconds, occupancy)
        }
    }

    type Ends = Vec<(TaskId, Option<f64>)>;

    /// Kernels 0 and 1 begun at `a.0` and `b.0` on an idle GPU: every end once both run, then the
    /// other's once the first of them has ended.
    fn two(a: (f64, Kernel), b: (f64, Kernel)) -> (Ends, Ends) {
        let mut gpu = Shared::default();
        gpu.begin(TaskId(0), a.0, a.1);
        let ends = gpu.begin(TaskId(1), b.0, b.1);
        let (first, at) = (ends.iter())
            .filter_map(|&(task, end)| Some((task, end?)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .expect("a kernel runs");
        let (_, after) = gpu.end(first, at);
        (ends, after)
    }

    #[test]
    fn kernels_share_the_gpu_by_occupancy_and_panel_kernels_take_their_share_first() {
        let (k, p) = (kernel, panel);
        // (kernel 0 and when it begins, kernel 1 and when, the two ends, the one end left once
        // the first has ended).
        #[rustfmt::skip]
        let cases = [
            // Two kernels of a quarter each: neither slows down.
            ((0.0, k(2.0, 0.25)), (1.0, k(2.0, 0.25)), [Some(2.0), Some(3.0)], (1, 3.0)),
            // Two full kernels of 2 s: together at half speed, so both end at 4 s.
            ((0.0, k(2.0, 1.0)), (0.0, k(2.0, 1.0)), [Some(4.0), Some(4.0)], (1, 4.0)),
            // 2 s and 1 s begun at 0 and 1: the first does 1 s alone, then both at half speed;
            // the second's 1 s takes 2 s (ends at 3), as does the first's last second.
            ((0.0, k(2.0, 1.0)), (1.0, k(1.0, 1.0)), [Some(3.0), Some(3.0)], (1, 3.0)),
            // Occupancies 0.75 and 0.75: speed 1 / 1.5.
            ((0.0, k(1.0, 0.75)), (0.0, k(1.0, 0.75)), [Some(1.5), Some(1.5)], (1, 1.5)),
            // A full GEMM of 2 s, then at 1 s a panel kernel of 1 s at 0.5: the panel keeps its
            // own rate, the GEMM runs at half until the panel ends at 2 s, then alone: 0.5 s.
            ((0.0, k(2.0, 1.0)), (1.0, p(1.0, 0.5)), [Some(3.0), Some(2.0)], (0, 2.5)),
            // A panel kernel that fills the GPU stalls the others until it ends.
            ((0.0, k(2.0, 0.5)), (1.0, p(1.0, 1.0)), [None, Some(2.0)], (0, 3.0)),
        ];
        for (a, b, ends, (left, end)) in cases {
            let ends = vec![(TaskId(0), ends[0]), (TaskId(1), ends[1])];
            let after = vec![(TaskId(left), Some(end))];
            assert_eq!(two(a, b), (ends, after), "{a:?} then {b:?}");
        }
    }

    #[test]
    fn occupancy_is_a_kernels_rate_over_the_gpus_full_rate_in_its_precision() {
        let potrf = KernelKey::square(Op::Potrf, 1024);
        let gemm = KernelKey::square(Op::GemmNt, 1024);
        let sgemm = gemm.clone().in_precision(Precision::S);
        // The GEMM at 10x the POTRF's rate; the f32 GEMM at 2x the f64 one.
        let duration = |key: &KernelKey, _: &ResourceClass| {
            Some(key.flops() / if key.op == Op::Potrf { 1e12 } else { 1e13 }).map(|s| {
                if key.precision == Precision::S {
                    s / 2.0
                } else {
                    s
                }
            })
        };
        let keys = [potrf.clone(), gemm.clone(), sgemm.clone()];
        let sharing = GpuSharing::new(
            4,
            &keys,
            &[gpu(), ResourceClass::CpuCluster { cores: 2 }],
            duration,
        );
        let occupancy =
            |key: &KernelKey| sharing.occupancy(key, &gpu(), duration(key, &gpu()).unwrap());
        assert!((occupancy(&potrf) - 0.1).abs() < 1e-12);
        assert_eq!(occupancy(&gemm), 1.0);
        assert_eq!(occupancy(&sgemm), 1.0);
        // A CPU cluster, or a GPU of one stream: a kernel has its resource to itself.
        let cpu = ResourceClass::CpuCluster { cores: 2 };
        assert_eq!(sharing.occupancy(&potrf, &cpu, 1.0), 1.0);
        let one = GpuSharing::new(1, &keys, &[gpu()], duration);
        assert_eq!(one.occupancy(&potrf, &gpu(), 1e-3), 1.0);
    }
}
