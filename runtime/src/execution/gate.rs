//! The gate on a run's writes into host memory while an input check reads it beside the run
//! ([`execute_checked`](super::execute_checked)).

use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::sync::lock;

/// What the check beside the run decided (`Pending` until it returns).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Pending,
    Open,
    Refused(String),
}

/// Closed until the check beside the run returns: then open (its input is fine) or refused (why).
/// Every write into the workload's host memory waits for it: a CPU worker before its first task, a
/// copy from a device before it writes.
pub(super) struct HostWriteGate {
    verdict: Mutex<(Verdict, Option<Instant>)>,
    decided: Condvar,
}

impl HostWriteGate {
    pub(super) fn new() -> Self {
        Self {
            verdict: Mutex::new((Verdict::Pending, None)),
            decided: Condvar::new(),
        }
    }

    /// Decides the gate once (a later call changes nothing): `Ok` opens it, `Err(why)` refuses it.
    pub(super) fn decide(&self, outcome: Result<(), String>) {
        let mut verdict = lock(&self.verdict);
        if verdict.0 == Verdict::Pending {
            *verdict = (
                match outcome {
                    Ok(()) => Verdict::Open,
                    Err(why) => Verdict::Refused(why),
                },
                Some(Instant::now()),
            );
            self.decided.notify_all();
        }
    }

    /// When the gate was decided, if it was.
    pub(super) fn decided_at(&self) -> Option<Instant> {
        lock(&self.verdict).1
    }

    /// Waits until the gate is decided: `Ok` when open, why it was refused otherwise.
    pub(super) fn wait(&self) -> Result<(), String> {
        let mut verdict = lock(&self.verdict);
        while verdict.0 == Verdict::Pending {
            verdict = self
                .decided
                .wait(verdict)
                .unwrap_or_else(|e| e.into_inner());
        }
        match &verdict.0 {
            Verdict::Refused(why) => Err(why.clone()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_holds_its_waiters_until_decided_and_keeps_its_first_verdict() {
        let gate = HostWriteGate::new();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| gate.wait());
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!waiter.is_finished(), "a pending gate let a writer through");
            gate.decide(Err("entry (3, 1) is NaN".into()));
            assert_eq!(waiter.join().unwrap(), Err("entry (3, 1) is NaN".into()));
        });
        let decided = gate.decided_at();
        assert!(decided.is_some());
        gate.decide(Ok(()));
        assert_eq!(gate.wait(), Err("entry (3, 1) is NaN".into()));
        assert_eq!(gate.decided_at(), decided);
        let open = HostWriteGate::new();
        open.decide(Ok(()));
        assert_eq!(open.wait(), Ok(()));
    }
}
