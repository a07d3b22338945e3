//! The real executor's [`Carrier`]: the copies, allocations and releases the engine's data registry
//! decides, carried out on the platform's devices.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, mpsc};
use std::time::Instant;

use hetla_factorizations::{Mode, TaskId, TileRef};
use hetla_kernels::{AnyMat, DeviceSpan, KernelError, Precision, TensorMath};

use super::gate::HostWriteGate;
use crate::data::{DataRegistry, HOST, Handle, MemoryNode, Step, Transfer};
use crate::devices::{Device, Launched};
use crate::engine::Carrier;
use crate::inflight::{Deferred, InFlight};
use crate::run::Workload;
use crate::sync::lock;
use crate::trace::{PieceEvent, TransferEvent};

/// The real executor's [`Carrier`]: copies between host memory and devices, registered under the
/// registry's lock and carried out after it by the thread that caused them (see
/// [`crate::inflight`]), traced with wall times.
pub(super) struct Devices<'a> {
    pub(super) work: &'a dyn Workload,
    /// Device of memory node `i + 1`.
    pub(super) devices: Vec<&'a dyn Device>,
    pub(super) inflight: InFlight,
    /// Per device, the thread that carries out the write-backs from it while the run goes on (gone
    /// once the workers are done: write-backs are then carried out at once).
    pub(super) behind: Mutex<Vec<mpsc::Sender<(TaskId, Deferred)>>>,
    pub(super) transfers: Mutex<Vec<TransferEvent>>,
    /// The pieces of the clusters' kernels, each worker's added after each of its tasks.
    pub(super) pieces: Mutex<Vec<PieceEvent>>,
    pub(super) start: Instant,
    /// The gate every write into host memory waits for, while an input check reads it beside the
    /// run ([`super::execute_checked`]).
    pub(super) gate: Option<&'a HostWriteGate>,
    /// How the devices compute the products of single-precision tiles
    /// ([`RunOptions::tensor_math`](crate::RunOptions::tensor_math)).
    pub(super) math: TensorMath,
}

impl<'a> Devices<'a> {
    /// The carrier of a run of `work` on `devices` (memory nodes 1, 2, ...), nothing in flight, its
    /// clock started now (restarted once the placed tiles are on their devices); with `gate`, its
    /// copies into host memory wait for it; its kernels' products computed with `math`.
    pub(super) fn new(
        work: &'a dyn Workload,
        devices: Vec<&'a dyn Device>,
        (gate, math): (Option<&'a HostWriteGate>, TensorMath),
    ) -> Self {
        Self {
            work,
            devices,
            inflight: InFlight::default(),
            behind: Mutex::new(Vec::new()),
            transfers: Mutex::new(Vec::new()),
            pieces: Mutex::new(Vec::new()),
            start: Instant::now(),
            gate,
            math,
        }
    }
}

impl Carrier for Devices<'_> {
    fn carry_out(
        &self,
        steps: Vec<Step>,
        _: &DataRegistry,
        _: f64,
    ) -> Result<Vec<Deferred>, KernelError> {
        let mut deferred: Vec<Deferred> = Vec::new();
        let carry_out = || -> Result<(), KernelError> {
            for step in steps {
                match step {
                    Step::Release { handle, node } => {
                        // A write-back before an eviction: carried out now, before the
                        // replica goes (rare; everything else waits for the lock's end).
                        if deferred.iter().any(|d| d.copy.handle == handle) {
                            self.complete(std::mem::take(&mut deferred))?;
                        }
                        self.inflight.wait_replica(handle, node);
                        self.device(node).release(handle);
                    }
                    Step::Allocate { handle, tile, node } => {
                        let ((rows, cols), precision) = match self.work.device_home(tile) {
                            Some(home) => {
                                ((home.span().rows, home.span().cols), home.span().precision)
                            }
                            None => self
                                .work
                                .host_tile(tile)
                                .map_or(((0, 0), Precision::D), |t| (t.shape(), t.precision())),
                        };
                        self.device(node)
                            .allocate(handle, (precision, rows, cols))?;
                    }
                    Step::Copy(copy) => deferred.push(self.inflight.register(copy)),
                }
            }
            Ok(())
        };
        match carry_out() {
            Ok(()) => Ok(deferred),
            Err(error) => {
                deferred.iter().for_each(|d| self.inflight.done(d));
                Err(error)
            }
        }
    }

    fn complete(&self, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        let mut copies = deferred.into_iter();
        for d in copies.by_ref() {
            self.inflight.wait_turn(&d);
            let start = self.now();
            let copied = self.copy(d.copy);
            let end = self.now();
            self.inflight.done(&d);
            if let Err(error) = copied {
                copies.for_each(|d| self.inflight.done(&d));
                return Err(error);
            }
            lock(&self.transfers).push(TransferEvent {
                transfer: d.copy,
                start,
                end,
            });
        }
        Ok(())
    }

    fn complete_behind(&self, task: TaskId, deferred: Vec<Deferred>) -> Result<(), KernelError> {
        let mut inline = Vec::new();
        {
            let behind = lock(&self.behind);
            for d in deferred {
                // Memory node i + 1 is device i.
                let sender = d.copy.from.0.checked_sub(1).and_then(|i| behind.get(i));
                let sent = match sender {
                    Some(sender) => sender.send((task, d)).map_err(|mpsc::SendError((_, d))| d),
                    None => Err(d),
                };
                if let Err(d) = sent {
                    inline.push(d);
                }
            }
        }
        self.complete(inline)
    }

    fn settle(&self, accesses: &[(Handle, Mode)], node: MemoryNode) {
        self.inflight.wait_task(accesses, node);
    }
}

impl Devices<'_> {
    pub(super) fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    pub(super) fn device(&self, node: MemoryNode) -> &dyn Device {
        self.devices[node.0 - 1]
    }

    /// One copy between host memory and devices (device to device through a host buffer). A panic
    /// in the device code becomes an error, so that no worker thread dies while the others wait for
    /// its tasks.
    pub(super) fn copy(&self, copy: Transfer) -> Result<(), KernelError> {
        let no_storage = || KernelError::Gpu {
            message: format!(
                "tile ({}, {}) of matrix {} has no host storage to copy",
                copy.tile.row, copy.tile.col, copy.tile.matrix.0
            ),
        };
        let carry_out = || match (copy.from == HOST, copy.to == HOST) {
            (true, true) => Ok(()),
            (true, false) => match self.home_on(copy.tile, copy.to)? {
                // SAFETY: the workload's home of the tile is memory of this device holding it
                // (`DeviceHome::new`'s contract); the run writes it only by exports, made while
                // the home is invalid, so never while this import (from a valid home) goes on, and
                // it waits for its devices' uploads before it ends.
                Some(span) => unsafe { self.device(copy.to).import(copy.handle, &span) },
                None => {
                    let src = self.work.host_tile(copy.tile).ok_or_else(no_storage)?;
                    self.device(copy.to).upload(copy.handle, src)
                }
            },
            (false, true) => {
                if let Some(span) = self.home_on(copy.tile, copy.from)? {
                    // SAFETY: as for the import; the home is invalid (being copied into), so
                    // no task and no other copy uses it meanwhile.
                    return unsafe { self.device(copy.from).export(copy.handle, &span) };
                }
                self.host_writes_allowed()?;
                // SAFETY: the copy goes to host memory, so the host replica is invalid: no
                // task uses it (a task reads or writes a tile only where it is valid, and
                // this copy is made under the registry lock before anyone sees it valid).
                let dst = unsafe { self.work.host_tile_mut(copy.tile) }.ok_or_else(no_storage)?;
                self.device(copy.from).download(copy.handle, dst)
            }
            (false, false) => {
                let host = self.work.host_tile(copy.tile).ok_or_else(no_storage)?;
                let (rows, cols) = host.shape();
                let mut staged = AnyMat::zeros(host.precision(), rows, cols);
                self.device(copy.from)
                    .download(copy.handle, staged.as_mut())?;
                self.device(copy.to).upload(copy.handle, staged.as_ref())
            }
        };
        catch_unwind(AssertUnwindSafe(carry_out)).unwrap_or_else(|panic| {
            Err(KernelError::Gpu {
                message: format!("a copy panicked: {}", panic_message(&*panic)),
            })
        })
    }

    /// Waits until host memory may be written (the gate of an input check beside the run, if any):
    /// an error when the check refused the input.
    pub(super) fn host_writes_allowed(&self) -> Result<(), KernelError> {
        match self.gate.map(HostWriteGate::wait) {
            Some(Err(why)) => Err(KernelError::Gpu {
                message: format!("host memory is not written: the input check refused it ({why})"),
            }),
            _ => Ok(()),
        }
    }

    /// The block of `node`'s memory that is the home of `tile` (`None`: its home is host memory);
    /// an error for a home on another device (copies between devices go through host memory).
    fn home_on(&self, tile: TileRef, node: MemoryNode) -> Result<Option<DeviceSpan>, KernelError> {
        match self.work.device_home(tile) {
            None => Ok(None),
            Some(home) if home.node() == node => Ok(Some(*home.span())),
            Some(home) => Err(KernelError::Gpu {
                message: format!(
                    "tile ({}, {}) of matrix {} lives in the memory of node {} and cannot be \
                     copied to node {}",
                    tile.row,
                    tile.col,
                    tile.matrix.0,
                    home.node().0,
                    node.0
                ),
            }),
        }
    }

    /// Queues a task on a device's replicas: the reads, then the written tile.
    pub(super) fn launch_on_device(
        &self,
        task: TaskId,
        handles: &[(Handle, Mode)],
        device: &dyn Device,
    ) -> Result<Launched, KernelError> {
        let op = self.work.graph().task(task).op;
        let Some((&(write, Mode::ReadWrite | Mode::Write), reads)) = handles.split_last() else {
            return Err(KernelError::Operands {
                op,
                reason: "the last access must be the written tile".into(),
            });
        };
        let reads: Vec<Handle> = reads.iter().map(|&(h, _)| h).collect();
        let args = &self.work.kernel_args(task);
        device.launch_with(&crate::KernelCall {
            op,
            reads: &reads,
            write,
            args,
            math: self.math,
        })
    }
}

/// The message of a caught panic.
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a task panicked".to_owned()
    }
}
