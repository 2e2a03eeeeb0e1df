// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Where `rrdma bench` posts operations and reaps their completions: the
//! `SUBMIT` ioctl or an io_uring ring.

use std::io;
use std::time::Duration;

use rrdma::abi::errno::EAGAIN;
use rrdma::abi::uapi::{Completion, Op};
use rrdma::{Rrdma, UringEngine};

use super::bench::Engine;

/// How long the SQ thread of `--engine uring-sqpoll` stays awake without
/// SQEs (it spins meanwhile): long enough for the gaps of one run.
const SQPOLL_IDLE: Duration = Duration::from_millis(100);
/// How long a wait for completions lasts before the run gives up: a
/// failed connection completes what it held (keepalive finds a silent
/// peer), so this only stops a run that would otherwise never end. 10 s
/// was too short for a debug kernel's siw, which moves about 45 KB/s: a
/// uring bench with 16 operations of up to 64 KiB in flight once waited
/// longer (2026-12-01).
const REAP_PATIENCE: Duration = Duration::from_secs(60);

/// Where `bench` posts operations and reaps their completions.
pub(super) enum Queue {
    /// `SUBMIT`, and completions by read(2).
    Ioctl(Vec<Completion>),
    /// io_uring commands.
    Uring(Box<UringEngine>),
}

impl Queue {
    pub(super) fn new(dev: &Rrdma, engine: Engine, depth: u64) -> io::Result<Self> {
        Ok(match engine {
            Engine::Ioctl => Queue::Ioctl(vec![Completion::zeroed(); depth as usize]),
            Engine::Uring => Queue::Uring(Box::new(UringEngine::new(
                dev,
                depth.next_power_of_two() as u32,
            )?)),
            Engine::UringIopoll => Queue::Uring(Box::new(UringEngine::with_iopoll(
                dev,
                depth.next_power_of_two() as u32,
            )?)),
            Engine::UringSqpoll => Queue::Uring(Box::new(UringEngine::with_sqpoll(
                dev,
                depth.next_power_of_two() as u32,
                SQPOLL_IDLE,
            )?)),
        })
    }

    /// Posts what it can of `ops`, front first; returns how many.
    pub(super) fn post(&mut self, dev: &Rrdma, ops: &[Op], in_flight: u64) -> io::Result<usize> {
        match self {
            Queue::Ioctl(_) => match dev.submit(ops) {
                Err(e) if in_flight > 0 && rrdma::errno(&e) == Some(EAGAIN.get()) => Ok(0),
                r => r,
            },
            // Queued in the submission ring; `reap` submits them.
            Queue::Uring(eng) => Ok(eng.push(ops)),
        }
    }

    /// Waits ([`REAP_PATIENCE`] at most) for completions and appends them
    /// to `out` as (user_data, 0 or -errno).
    pub(super) fn reap(&mut self, dev: &Rrdma, out: &mut Vec<(u64, i32)>) -> io::Result<()> {
        match self {
            Queue::Ioctl(comps) => {
                let n = dev.completions(comps, Some(REAP_PATIENCE))?;
                out.extend(comps[..n].iter().map(|c| (c.user_data, c.status)));
            }
            Queue::Uring(eng) => {
                eng.submit(1, REAP_PATIENCE)?;
                let mut cs = Vec::new();
                eng.reap(&mut cs);
                out.extend(cs.iter().map(|c| (c.user_data, c.res.min(0))));
            }
        }
        if out.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no completion within {} s", REAP_PATIENCE.as_secs()),
            ));
        }
        Ok(())
    }
}
