//! The emulated device's streams and events: work queued on a stream runs in order on a thread of
//! its own, and an event fires with its result, as CUDA streams and events do.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

use hetla_kernels::KernelError;

use super::device::Pending;
use crate::sync::lock;

/// The completion of work queued on an emulated stream, with its result (a copy: `Ok(0.0)`; a
/// kernel: its seconds or its error). Cloning shares it.
#[derive(Clone)]
pub(super) struct Event(Arc<EventState>);

/// An event's result once it has happened, and the condition its waiters sleep on.
#[derive(Default)]
struct EventState {
    result: Mutex<Option<Result<f64, KernelError>>>,
    happened: Condvar,
}

impl Event {
    pub(super) fn new() -> Self {
        Self(Arc::default())
    }

    /// An event that has already happened.
    pub(super) fn happened() -> Self {
        let event = Self::new();
        event.fire(Ok(0.0));
        event
    }

    pub(super) fn fire(&self, result: Result<f64, KernelError>) {
        *lock(&self.0.result) = Some(result);
        self.0.happened.notify_all();
    }

    pub(super) fn is_done(&self) -> bool {
        lock(&self.0.result).is_some()
    }

    pub(super) fn wait(&self) -> Result<f64, KernelError> {
        let mut state = lock(&self.0.result);
        loop {
            if let Some(result) = &*state {
                return result.clone();
            }
            state = self
                .0
                .happened
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Pending for Event {
    fn is_done(&self) -> bool {
        Event::is_done(self)
    }

    fn wait(self: Box<Self>) -> Result<f64, KernelError> {
        Event::wait(&self)
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// An emulated stream: a thread that runs the work queued on it in order, started on first use and
/// joined when the device is dropped.
pub(super) struct Stream {
    name: &'static str,
    queue: Mutex<Option<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)>>,
}

impl Stream {
    pub(super) fn new(name: &'static str) -> Self {
        Self {
            name,
            queue: Mutex::new(None),
        }
    }

    /// Queues `work`; `done` fires with its result (a panic becomes an error), so that no waiter
    /// hangs.
    pub(super) fn submit(
        &self,
        done: Event,
        work: impl FnOnce() -> Result<f64, KernelError> + Send + 'static,
    ) -> Result<(), KernelError> {
        let name = self.name;
        let job: Job = Box::new(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                .unwrap_or_else(|_| {
                    Err(KernelError::Gpu {
                        message: format!("work on the emulated {name} stream panicked"),
                    })
                });
            done.fire(result);
        });
        let mut queue = lock(&self.queue);
        if queue.is_none() {
            let (send, receive) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("emulated-{name}"))
                .spawn(move || receive.into_iter().for_each(|job| job()))
                .map_err(|e| KernelError::Gpu {
                    message: format!("starting the emulated {name} stream: {e}"),
                })?;
            *queue = Some((send, thread));
        }
        let (send, _) = queue.as_ref().expect("started above");
        send.send(job).map_err(|_| KernelError::Gpu {
            message: format!("the emulated {name} stream has stopped"),
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some((send, thread)) = self.queue.get_mut().ok().and_then(Option::take) {
            drop(send);
            let _ = thread.join();
        }
    }
}
