//! The network between the nodes of a simulated distributed run.

use hetla_factorizations::TileRef;

use super::links::Busy;
use super::model::MessageEvent;
use crate::link::LinkRate;

/// The network between nodes: every pair of nodes has a link of one rate, and each node's NIC sends
/// one message at a time and receives one at a time (a non-blocking switch: a pair's link only
/// carries what its sender's NIC sends, so the NICs are what messages contend for).
pub(super) struct Network {
    pub(super) rate: LinkRate,
    pub(super) sending: Vec<Busy>,
    pub(super) receiving: Vec<Busy>,
    pub(super) events: Vec<MessageEvent>,
}

impl Network {
    /// Books a message of `bytes` from `from` to `to`, ready to leave at `ready`, in the earliest
    /// interval both NICs are free; returns its arrival.
    pub(super) fn send(
        &mut self,
        tile: TileRef,
        from: usize,
        to: usize,
        bytes: usize,
        ready: f64,
    ) -> f64 {
        let seconds = self.rate.seconds(bytes);
        let mut start = ready;
        while let Some(end) = self.sending[from]
            .conflict(start, seconds)
            .or_else(|| self.receiving[to].conflict(start, seconds))
        {
            start = end;
        }
        let end = start + seconds;
        self.sending[from].insert(start, end);
        self.receiving[to].insert(start, end);
        self.events.push(MessageEvent {
            tile,
            from,
            to,
            bytes,
            start,
            end,
        });
        end
    }
}
