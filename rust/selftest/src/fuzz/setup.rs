// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The fuzzer's set-up, made in order before the random calls: a
//! listening file with an exported region, and a client file connected to
//! it that imports the export and moves data both ways, then posts a few
//! operations whose completions the random reads (or the end's drain)
//! collect.

use rrdma::abi::uapi::{self, Connect, Export, Import, Listen, Op, Submit};

use super::{errno, sys, Fuzz, Target, PORT_BASE};

impl Fuzz {
    /// The set-up the random calls build on, made in order before they
    /// start: a listening file with an exported region, and a client file
    /// connected to it that imports the export, has a region of the same
    /// block size and completes one READ and one WRITE, then SUBMITs 8
    /// more without reading their completions. Both files are pinned.
    /// Returns what failed.
    pub(super) fn setup(&self) -> Result<(), String> {
        let open = || {
            // SAFETY: a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    c"/dev/rrdma".as_ptr(),
                    libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
                )
            };
            if self.note("open", Target::NoFd, sys(i64::from(fd))) {
                Ok(fd)
            } else {
                Err(format!("open: errno {}", errno()))
            }
        };
        let call = |name: &'static str, fd: i32, cmd: u32, b: &mut [u8]| {
            if self.ioctl(name, fd, cmd, b.as_mut_ptr() as u64) {
                Ok(())
            } else {
                Err(format!("{name}: errno {}", errno()))
            }
        };
        let ip = *self.addrs.first().ok_or("no address")?;
        let (l, c) = (open()?, open()?);
        {
            let mut p = self.pool.lock().unwrap();
            self.add_fd(&mut p, l, None);
            self.add_fd(&mut p, c, None);
            p.pinned.extend([l, c]);
        }
        let mut regions = Vec::new();
        for fd in [l, c] {
            let (h, _) = self
                .region_for(fd, 4096, 64)
                .ok_or_else(|| format!("REGION_CREATE: errno {}", errno()))?;
            regions.push(h);
        }
        let mut e = Export::zeroed();
        e.region = regions[0];
        e.access = uapi::ACCESS_READ | uapi::ACCESS_WRITE;
        let mut b = e.encode();
        call("EXPORT", l, uapi::IOCTL_EXPORT, &mut b)?;
        let token = Export::decode(&b).token;
        self.pool.lock().unwrap().tokens.push((l, token));
        let mut a = Listen::zeroed();
        a.addr.family = uapi::AF_INET;
        a.addr.port = PORT_BASE;
        a.addr.addr[..4].copy_from_slice(&ip);
        let mut b = a.encode();
        call("LISTEN", l, uapi::IOCTL_LISTEN, &mut b)?;
        let lh = Listen::decode(&b).handle;
        self.record(l, lh, |p| {
            p.listeners.push((l, lh));
            p.ports.push((PORT_BASE, l));
        });
        let mut a = Connect::zeroed();
        a.addr.family = uapi::AF_INET;
        a.addr.port = PORT_BASE;
        a.addr.addr[..4].copy_from_slice(&ip);
        a.timeout_ms = 10_000;
        let mut b = a.encode();
        call("CONNECT", c, uapi::IOCTL_CONNECT, &mut b)?;
        let ch = Connect::decode(&b).handle;
        self.new_conn(c, ch);
        self.pool.lock().unwrap().peers.insert((c, ch), l);
        let mut a = Import::zeroed();
        a.conn = ch;
        a.token = token;
        a.timeout_ms = 10_000;
        let mut b = a.encode();
        call("IMPORT", c, uapi::IOCTL_IMPORT, &mut b)?;
        let o = Import::decode(&b);
        self.record(c, o.handle, |p| {
            p.imports.push((c, o.handle, o.nblocks, o.block_size))
        });
        for opcode in [uapi::OP_WRITE, uapi::OP_READ] {
            let mut op = Op::zeroed();
            op.opcode = opcode;
            op.remote = o.handle;
            op.local = regions[1];
            op.count = 4;
            let mut b = op.encode();
            call("RW_SYNC", c, uapi::IOCTL_RW_SYNC, &mut b)?;
        }
        let mut ops = Vec::new();
        let mut built = Vec::new();
        for i in 0..8u32 {
            let mut op = Op::zeroed();
            op.opcode = [uapi::OP_WRITE, uapi::OP_READ][i as usize % 2];
            op.remote = o.handle;
            op.local = regions[1];
            op.remote_block = u64::from(i);
            op.local_block = u64::from(i);
            op.count = 1;
            op.user_data = self.track.user_data();
            built.push((op.user_data, op.opcode, Some(u64::from(o.block_size))));
            ops.extend_from_slice(&op.encode());
        }
        let mut a = Submit::zeroed();
        a.ops = ops.as_ptr() as u64;
        a.count = 8;
        a.op_size = Op::SIZE as u32;
        let mut b = a.encode();
        self.track.announce(&built);
        let (target, n) = self.ioctl_ret("SUBMIT", c, uapi::IOCTL_SUBMIT, b.as_mut_ptr() as u64);
        self.posted(target, n, &built);
        if n != 8 {
            return Err(format!("SUBMIT: {n} of 8 posted, errno {}", errno()));
        }
        Ok(())
    }
}
