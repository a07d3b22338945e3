//! Scheduling policies: which worker runs a ready task, and in which order. One file a policy
//! behind one interface ([`Scheduler`]); the executors do not know which runs.
//!
//! The executor calls [`Scheduler::push`] when a task becomes ready (all its predecessors done),
//! [`Scheduler::pop`] when a worker wants work, and [`Scheduler::done`] when a worker finished a
//! task. Calls come from every worker thread at once, so schedulers synchronise internally. Times
//! are seconds since the start of the run, from the executor's clock (real or simulated). What a
//! policy may know of the run is its [`SchedContext`].
//!
//! - [`Mct`] (default, `mct.rs`): on push, the task goes to the worker with the minimum expected
//!   completion time; each worker pops its own queue by priority. An uncalibrated (operation,
//!   shape, class) goes to the least-loaded worker of a class that lacks samples, so that it gets
//!   measured.
//! - [`Dmda`] (`dmda.rs`, StarPU's policy of that name): MCT's queues with every transfer charged
//!   in full. MCT and dmda share their completion arithmetic (`helper_mct.rs`, as StarPU's policies
//!   share `helper_mct`) and differ in their score only.
//! - [`Eager`] (`eager.rs`): one central queue ordered by priority.
//! - [`WorkStealing`] (`work_stealing.rs`): per-worker deques with stealing.
//! - [`Planned`] (`planned.rs`): a [`StaticPlan`] computed before the run.
//!
//! Priorities are bottom levels: a task's flops plus the largest bottom level among its successors,
//! so that the critical path runs first.

mod context;
mod dmda;
mod eager;
mod helper_mct;
mod kind;
mod mct;
mod planned;
mod queue;
mod scheduler;
mod work_stealing;

pub use context::{Estimate, ModelTable, SchedContext, TaskInfo, TransferEstimate};
pub use dmda::{DMDA_BETA, Dmda};
pub use eager::Eager;
pub use kind::SchedulerKind;
pub use mct::Mct;
pub use planned::{Planned, StaticPlan};
pub use scheduler::Scheduler;
pub use work_stealing::WorkStealing;
