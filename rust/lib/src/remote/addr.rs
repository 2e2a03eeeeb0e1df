// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Socket addresses to and from the ABI's.

use std::net::{IpAddr, SocketAddr};

use rrdma_abi::uapi::{Addr, AF_INET, AF_INET6};

/// Converts a socket address to the ABI's.
pub fn to_addr(sa: SocketAddr) -> Addr {
    let mut a = Addr {
        port: sa.port(),
        ..Addr::zeroed()
    };
    match sa.ip() {
        IpAddr::V4(v4) => {
            a.family = AF_INET;
            a.addr[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            a.family = AF_INET6;
            a.addr = v6.octets();
            if let SocketAddr::V6(s) = sa {
                a.scope_id = s.scope_id();
            }
        }
    }
    a
}

/// Converts the ABI's address to a socket address.
pub fn from_addr(a: &Addr) -> Option<SocketAddr> {
    match a.family {
        AF_INET => {
            let o: [u8; 4] = a.addr[..4].try_into().ok()?;
            Some(SocketAddr::from((o, a.port)))
        }
        AF_INET6 => Some(SocketAddr::from((a.addr, a.port))),
        _ => None,
    }
}
