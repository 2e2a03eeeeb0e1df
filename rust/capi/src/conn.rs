// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `struct rrdma_listener` and `struct rrdma_conn`: listening, accepting,
//! connecting and disconnecting.

use core::ffi::c_int;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use rrdma_lib::{ConnectOptions, Connection, Keepalive, Listener};

use crate::device::{device, rrdma};
use crate::{einval, fail, fail_null, timeout};

/// A listening endpoint of a `struct rrdma`.
pub struct rrdma_listener {
    listener: Listener<'static>,
    pub(crate) owner: &'static rrdma,
}

/// A connection of a `struct rrdma` to a peer.
pub struct rrdma_conn {
    pub(crate) conn: Connection<'static>,
    pub(crate) owner: &'static rrdma,
}

/// CONNECT's options beyond the address (`rrdma_connect`); all zero is
/// the module's defaults.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rrdma_connect_opts {
    /// `RRDMA_CONNECT_NO_KEEPALIVE`, `RRDMA_CONNECT_RECONNECT`.
    pub flags: u32,
    /// Keepalive interval in ms (100 to 65535); 0: the module's. Must be 0
    /// with `RRDMA_CONNECT_NO_KEEPALIVE`.
    pub keepalive_ms: u16,
    /// Intervals without an answer before the peer is gone (2 to 255); 0:
    /// the module's. Must be 0 with `RRDMA_CONNECT_NO_KEEPALIVE`.
    pub keepalive_misses: u16,
    /// Must be zero (room for later options).
    pub reserved: [u32; 2],
}

/// The socket address at `addr`, `len` bytes: `AF_INET` or `AF_INET6`.
///
/// # Safety
///
/// `addr` must be NULL or valid for reads of `len` bytes.
unsafe fn sockaddr(addr: *const libc::sockaddr, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    if addr.is_null() || len < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: the family is within `len` readable bytes; unaligned is
    // allowed.
    let family = unsafe { addr.cast::<libc::sa_family_t>().read_unaligned() };
    match c_int::from(family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: a whole sockaddr_in is readable; unaligned is allowed.
            let a = unsafe { addr.cast::<libc::sockaddr_in>().read_unaligned() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddrV4::new(ip, u16::from_be(a.sin_port)).into())
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: a whole sockaddr_in6 is readable; unaligned is allowed.
            let a = unsafe { addr.cast::<libc::sockaddr_in6>().read_unaligned() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            let port = u16::from_be(a.sin6_port);
            Some(SocketAddrV6::new(ip, port, a.sin6_flowinfo, a.sin6_scope_id).into())
        }
        _ => None,
    }
}

/// Listens on `addr` (`AF_INET` or `AF_INET6`, port required; any address
/// listens on every device). The kernel accepts each connection request
/// itself; `rrdma_accept` takes the established ones. `backlog`: 0 for the
/// default (16), at most 256.
///
/// Errors: `EINVAL`, `EADDRINUSE`, `EADDRNOTAVAIL`, `ENODEV`, `ENOSPC`.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed; `addr` NULL or
/// valid for `addrlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn rrdma_listen(
    dev: *mut rrdma,
    addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
    backlog: u32,
) -> *mut rrdma_listener {
    // SAFETY: by the caller's promises; the object count keeps `dev` open.
    let (Some(owner), Some(sa)) = (unsafe { device(dev) }, unsafe { sockaddr(addr, addrlen) })
    else {
        return fail_null(einval());
    };
    match owner.dev.listen(sa, backlog) {
        Ok(listener) => {
            owner.hold();
            Box::into_raw(Box::new(rrdma_listener { listener, owner }))
        }
        Err(e) => fail_null(e),
    }
}

/// Takes the next established connection of `l`, waiting at most
/// `timeout_ms` (0: at most 1 ms). NULL with `ETIMEDOUT` when none came
/// in time; `EINTR` on a signal; `EINVAL` once the listener is closed.
/// The connection outlives the listener.
///
/// # Safety
///
/// `l` must be NULL or a live listener.
#[no_mangle]
pub unsafe extern "C" fn rrdma_accept(
    l: *mut rrdma_listener,
    timeout_ms: c_int,
) -> *mut rrdma_conn {
    // SAFETY: by the caller's promise.
    let Some(l) = (unsafe { l.as_ref() }) else {
        return fail_null(einval());
    };
    match l.listener.accept(timeout(timeout_ms)) {
        Ok(Some(conn)) => {
            l.owner.hold();
            Box::into_raw(Box::new(rrdma_conn {
                conn,
                owner: l.owner,
            }))
        }
        Ok(None) => fail_null(std::io::Error::from_raw_os_error(libc::ETIMEDOUT)),
        Err(e) => fail_null(e),
    }
}

/// Stops listening and frees `l`; connections it gave stay.
///
/// # Safety
///
/// `l` must be NULL or a live listener, not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_listener_close(l: *mut rrdma_listener) -> c_int {
    if l.is_null() {
        return fail(einval());
    }
    // SAFETY: from `Box::into_raw`, by the caller's promise.
    let l = unsafe { Box::from_raw(l) };
    let owner = l.owner;
    drop(l);
    owner.release();
    0
}

/// Connects to the listener at `addr` (`AF_INET` or `AF_INET6`), waiting at
/// most `timeout_ms` (0 or negative: the module's default, 5 s) until it
/// is established. `opts` NULL: keepalive as the module says, no
/// reconnect; unknown flags, non-zero `reserved`, or keepalive fields with
/// `RRDMA_CONNECT_NO_KEEPALIVE` are `EINVAL`.
///
/// Errors: `ECONNREFUSED`, `ETIMEDOUT`, `EHOSTUNREACH`, `ENODEV` (no RDMA
/// device owns the route), `EADDRNOTAVAIL`, `EINTR`, `EINVAL`, `ENOSPC`.
///
/// # Safety
///
/// `dev` must be NULL or from `rrdma_open` and not closed; `addr` NULL or
/// valid for `addrlen` bytes; `opts` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rrdma_connect(
    dev: *mut rrdma,
    addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
    timeout_ms: c_int,
    opts: *const rrdma_connect_opts,
) -> *mut rrdma_conn {
    // SAFETY: by the caller's promises; the object count keeps `dev` open.
    let (Some(owner), Some(sa)) = (unsafe { device(dev) }, unsafe { sockaddr(addr, addrlen) })
    else {
        return fail_null(einval());
    };
    let opts = if opts.is_null() {
        rrdma_connect_opts {
            flags: 0,
            keepalive_ms: 0,
            keepalive_misses: 0,
            reserved: [0; 2],
        }
    } else {
        // SAFETY: valid, by the caller's promise; unaligned is allowed.
        unsafe { opts.read_unaligned() }
    };
    let (no_keepalive, reconnect) = (
        rrdma_lib::abi::uapi::CONNECT_NO_KEEPALIVE,
        rrdma_lib::abi::uapi::CONNECT_RECONNECT,
    );
    let fields = opts.keepalive_ms != 0 || opts.keepalive_misses != 0;
    if opts.flags & !(no_keepalive | reconnect) != 0
        || opts.reserved != [0; 2]
        || (opts.flags & no_keepalive != 0 && fields)
    {
        return fail_null(einval());
    }
    let keepalive = if opts.flags & no_keepalive != 0 {
        Keepalive::Off
    } else if fields {
        Keepalive::Every {
            interval: Duration::from_millis(u64::from(opts.keepalive_ms)),
            misses: opts.keepalive_misses,
        }
    } else {
        Keepalive::Module
    };
    let options = ConnectOptions {
        keepalive,
        reconnect: opts.flags & reconnect != 0,
    };
    let t = match timeout(timeout_ms) {
        Some(d) if !d.is_zero() => d,
        _ => Duration::from_secs(5),
    };
    match owner.dev.connect_opts(sa, t, options) {
        Ok(conn) => {
            owner.hold();
            Box::into_raw(Box::new(rrdma_conn { conn, owner }))
        }
        Err(e) => fail_null(e),
    }
}

/// Disconnects and frees `c`, whatever the result: operations in flight
/// on it complete with an error (`ECANCELED`), and its imports fail from
/// then on (unimport them too).
///
/// # Safety
///
/// `c` must be NULL or a live connection, not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn rrdma_disconnect(c: *mut rrdma_conn) -> c_int {
    if c.is_null() {
        return fail(einval());
    }
    // SAFETY: from `Box::into_raw`, by the caller's promise.
    let c = unsafe { Box::from_raw(c) };
    let owner = c.owner;
    let r = c.conn.disconnect();
    owner.release();
    r.map_or_else(fail, |()| 0)
}
