// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A minimal rdma_cm client on the kernel's user CM ABI
//! (`/dev/infiniband/rdma_cm`, `include/uapi/rdma/rdma_user_cm.h`),
//! without librdmacm: the selftest is a static binary. It sends connect
//! requests with any private data and reads what comes back; it never
//! creates a queue pair (IB CM takes the QP number from the request), so
//! it works on InfiniBand and RoCE (rxe), not on iWARP, whose CM needs a
//! real QP.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const CMD_CREATE_ID: u32 = 0;
const CMD_DESTROY_ID: u32 = 1;
const CMD_RESOLVE_ROUTE: u32 = 4;
const CMD_CONNECT: u32 = 6;
const CMD_GET_EVENT: u32 = 12;
const CMD_RESOLVE_ADDR: u32 = 21;

const PS_TCP: u16 = 0x0106;
const QPT_RC: u8 = 2;
const MAX_PRIVATE_DATA: usize = 256;

pub(crate) const EV_ADDR_RESOLVED: u32 = 0;
pub(crate) const EV_ROUTE_RESOLVED: u32 = 2;
pub(crate) const EV_CONNECT_RESPONSE: u32 = 5;
pub(crate) const EV_REJECTED: u32 = 8;

#[repr(C)]
struct Hdr {
    cmd: u32,
    inlen: u16,
    outlen: u16,
}

#[repr(C)]
struct CreateId {
    uid: u64,
    response: u64,
    ps: u16,
    qp_type: u8,
    reserved: [u8; 5],
}

#[repr(C)]
struct DestroyId {
    response: u64,
    id: u32,
    reserved: u32,
}

#[repr(C, align(8))]
struct SockaddrStorage([u8; 128]);

#[repr(C)]
struct ResolveAddr {
    id: u32,
    timeout_ms: u32,
    src_size: u16,
    dst_size: u16,
    reserved: u32,
    src: SockaddrStorage,
    dst: SockaddrStorage,
}

#[repr(C)]
struct ResolveRoute {
    id: u32,
    timeout_ms: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ConnParam {
    qp_num: u32,
    qkey: u32,
    private_data: [u8; MAX_PRIVATE_DATA],
    private_data_len: u8,
    srq: u8,
    responder_resources: u8,
    initiator_depth: u8,
    flow_control: u8,
    retry_count: u8,
    rnr_retry_count: u8,
    valid: u8,
}

#[repr(C)]
struct Connect {
    conn_param: ConnParam,
    id: u32,
    reserved: u32,
    ece: [u32; 2],
}

#[repr(C)]
struct GetEvent {
    response: u64,
}

/// `struct rdma_ucm_event_resp`: its union is the larger UD parameters
/// (304 bytes); only the connection parameters are read here.
#[repr(C)]
struct EventResp {
    uid: u64,
    id: u32,
    event: u32,
    status: u32,
    conn: ConnParam,
    rest_of_union: [u8; 304 - 272],
    reserved: u32,
    ece: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<CreateId>() == 24);
const _: () = assert!(core::mem::size_of::<ResolveAddr>() == 272);
const _: () = assert!(core::mem::size_of::<ConnParam>() == 272);
const _: () = assert!(core::mem::size_of::<Connect>() == 288);
const _: () = assert!(core::mem::size_of::<EventResp>() == 336);

/// What a connect request came back with.
pub(crate) struct Event {
    pub(crate) event: u32,
    pub(crate) status: i32,
    pub(crate) private_data: Vec<u8>,
}

/// An open user CM file; ids made on it die with it.
pub(crate) struct Ucma {
    f: File,
}

/// The QP number the next request claims (there is no QP behind it).
static NEXT_QPN: AtomicU32 = AtomicU32::new(0x1000);

/// A command struct of the user CM ABI, written to the file as bytes.
///
/// # Safety
///
/// The type is `repr(C)` with integer and byte-array fields only and no
/// padding, so every byte of a value is initialized.
unsafe trait Plain: Sized {}
// SAFETY: each is `repr(C)`, made of integers and byte arrays, and its
// fields leave no padding (the size asserts above pin the layouts).
unsafe impl Plain for Hdr {}
// SAFETY: as above.
unsafe impl Plain for CreateId {}
// SAFETY: as above.
unsafe impl Plain for DestroyId {}
// SAFETY: as above.
unsafe impl Plain for ResolveAddr {}
// SAFETY: as above.
unsafe impl Plain for ResolveRoute {}
// SAFETY: as above.
unsafe impl Plain for Connect {}
// SAFETY: as above.
unsafe impl Plain for GetEvent {}

fn as_bytes<T: Plain>(v: &T) -> &[u8] {
    // SAFETY: `T: Plain`: every byte of `*v` is initialized, and the slice
    // borrows `v` for its lifetime.
    unsafe { core::slice::from_raw_parts((v as *const T).cast(), core::mem::size_of::<T>()) }
}

impl Ucma {
    pub(crate) fn open() -> io::Result<Self> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/infiniband/rdma_cm")?;
        Ok(Self { f })
    }

    fn cmd<T: Plain>(&self, cmd: u32, body: &T, outlen: usize) -> io::Result<()> {
        let hdr = Hdr {
            cmd,
            inlen: core::mem::size_of::<T>() as u16,
            outlen: outlen as u16,
        };
        let mut buf = as_bytes(&hdr).to_vec();
        buf.extend_from_slice(as_bytes(body));
        (&self.f).write_all(&buf)
    }

    fn create_id(&self, uid: u64) -> io::Result<u32> {
        let mut id = 0u32;
        let c = CreateId {
            uid,
            response: &mut id as *mut u32 as u64,
            ps: PS_TCP,
            qp_type: QPT_RC,
            reserved: [0; 5],
        };
        self.cmd(CMD_CREATE_ID, &c, 4)?;
        Ok(id)
    }

    fn destroy_id(&self, id: u32) {
        let mut events = 0u32;
        let c = DestroyId {
            response: &mut events as *mut u32 as u64,
            id,
            reserved: 0,
        };
        let _ = self.cmd(CMD_DESTROY_ID, &c, 4);
    }

    /// The next event, waiting at most `wait`.
    fn event(&self, wait: Duration) -> io::Result<Event> {
        let mut p = libc::pollfd {
            fd: self.f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) };
        if n <= 0 {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no rdma_cm event"));
        }
        // SAFETY: all-zero bytes are a valid `EventResp` (integers and
        // arrays only).
        let mut r: EventResp = unsafe { core::mem::zeroed() };
        let c = GetEvent {
            response: &mut r as *mut EventResp as u64,
        };
        self.cmd(CMD_GET_EVENT, &c, core::mem::size_of::<EventResp>())?;
        let len = usize::from(r.conn.private_data_len);
        Ok(Event {
            event: r.event,
            status: r.status as i32,
            private_data: r.conn.private_data[..len].to_vec(),
        })
    }

    fn expect(&self, want: u32, what: &str, wait: Duration) -> io::Result<()> {
        let e = self.event(wait)?;
        if e.event != want {
            return Err(io::Error::other(format!(
                "{what}: event {} (status {})",
                e.event, e.status
            )));
        }
        Ok(())
    }

    /// Sends one connect request to `dst` carrying `pdata`, and returns the
    /// answer's event (REJECTED with the peer's private data, or
    /// CONNECT_RESPONSE when it accepted). The id is destroyed before
    /// returning, which rejects an accepted connection.
    pub(crate) fn request(
        &self,
        dst: SocketAddrV4,
        pdata: &[u8],
        wait: Duration,
    ) -> io::Result<Event> {
        let id = self.create_id(0x4057_11e0)?;
        let res = self.connect(id, dst, pdata, wait);
        self.destroy_id(id);
        res
    }

    /// As [`Ucma::request`], but the id stays until the file closes: an
    /// accepted connection is never completed (no RTU) nor rejected.
    pub(crate) fn request_and_go_silent(
        &self,
        dst: SocketAddrV4,
        pdata: &[u8],
        wait: Duration,
    ) -> io::Result<Event> {
        let id = self.create_id(0x4057_11e1)?;
        self.connect(id, dst, pdata, wait)
    }

    fn connect(
        &self,
        id: u32,
        dst: SocketAddrV4,
        pdata: &[u8],
        wait: Duration,
    ) -> io::Result<Event> {
        if pdata.len() > MAX_PRIVATE_DATA {
            return Err(io::Error::other("private data too long"));
        }
        {
            let mut dst_ss = SockaddrStorage([0; 128]);
            dst_ss.0[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            dst_ss.0[2..4].copy_from_slice(&dst.port().to_be_bytes());
            dst_ss.0[4..8].copy_from_slice(&dst.ip().octets());
            let r = ResolveAddr {
                id,
                timeout_ms: 2000,
                src_size: 0,
                dst_size: core::mem::size_of::<libc::sockaddr_in>() as u16,
                reserved: 0,
                src: SockaddrStorage([0; 128]),
                dst: dst_ss,
            };
            self.cmd(CMD_RESOLVE_ADDR, &r, 0)?;
            self.expect(EV_ADDR_RESOLVED, "resolve address", wait)?;
            self.cmd(
                CMD_RESOLVE_ROUTE,
                &ResolveRoute {
                    id,
                    timeout_ms: 2000,
                },
                0,
            )?;
            self.expect(EV_ROUTE_RESOLVED, "resolve route", wait)?;
            let mut p = ConnParam {
                // IB CM refuses a request from a QP number it still
                // knows from this host (a stale connection): a fresh one
                // for every request.
                qp_num: NEXT_QPN.fetch_add(1, Ordering::Relaxed),
                qkey: 0,
                private_data: [0; MAX_PRIVATE_DATA],
                private_data_len: pdata.len() as u8,
                srq: 0,
                responder_resources: 1,
                initiator_depth: 1,
                flow_control: 0,
                retry_count: 3,
                rnr_retry_count: 3,
                valid: 1,
            };
            p.private_data[..pdata.len()].copy_from_slice(pdata);
            let c = Connect {
                conn_param: p,
                id,
                reserved: 0,
                ece: [0; 2],
            };
            self.cmd(CMD_CONNECT, &c, 0)?;
            self.event(wait)
        }
    }
}
