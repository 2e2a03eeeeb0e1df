// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What a work completion means: the `enum ib_wc_status` values rrdma
//! tells apart, their names for log lines, and the errno an operation
//! completes with.

use super::errno::{Errno, EACCES, ECANCELED, ECONNABORTED, ECONNRESET, EIO};

/// `IB_WC_SUCCESS`.
pub const SUCCESS: u32 = 0;
/// `IB_WC_LOC_QP_OP_ERR`: siw reports every transmit failure so (a
/// socket the peer reset, its link gone) and drops the connection.
pub const LOC_QP_OP_ERR: u32 = 2;
/// `IB_WC_LOC_PROT_ERR`.
pub const LOC_PROT_ERR: u32 = 4;
/// `IB_WC_WR_FLUSH_ERR`.
pub const WR_FLUSH_ERR: u32 = 5;
/// `IB_WC_BAD_RESP_ERR`: the responder's answer did not fit the
/// request (out of sequence, wrong opcode): the transport failed.
pub const BAD_RESP_ERR: u32 = 7;
/// `IB_WC_REM_INV_REQ_ERR`.
pub const REM_INV_REQ_ERR: u32 = 9;
/// `IB_WC_REM_ACCESS_ERR`.
pub const REM_ACCESS_ERR: u32 = 10;
/// `IB_WC_REM_OP_ERR`.
pub const REM_OP_ERR: u32 = 11;
/// `IB_WC_RETRY_EXC_ERR`.
pub const RETRY_EXC_ERR: u32 = 12;
/// `IB_WC_RNR_RETRY_EXC_ERR`.
pub const RNR_RETRY_EXC_ERR: u32 = 13;

/// What a work completion status means, in the words of the kernel's
/// `ib_wc_status_msg()` (`enum ib_wc_status` order), for log lines.
pub fn status_name(status: u32) -> &'static str {
    const NAMES: [&str; 22] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "WR flushed",
        "memory bind operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "operation aborted",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    ];
    NAMES
        .get(status as usize)
        .copied()
        .unwrap_or("unrecognized status")
}

/// The errno an operation completes with, given its work completion status
/// (`None`: success).
pub fn to_errno(status: u32) -> Option<Errno> {
    Some(match status {
        SUCCESS => return None,
        REM_ACCESS_ERR | REM_INV_REQ_ERR | LOC_PROT_ERR => EACCES,
        WR_FLUSH_ERR => ECANCELED,
        // siw's transmit failure (its socket broke) is a local QP
        // operation error: the connection failed under the operation.
        RETRY_EXC_ERR | RNR_RETRY_EXC_ERR | BAD_RESP_ERR | LOC_QP_OP_ERR => ECONNRESET,
        REM_OP_ERR => ECONNABORTED,
        _ => EIO,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wc_status_names_follow_the_enum() {
        assert_eq!(status_name(SUCCESS), "success");
        assert_eq!(status_name(1), "local length error");
        assert_eq!(status_name(LOC_PROT_ERR), "local protection error");
        assert_eq!(status_name(WR_FLUSH_ERR), "WR flushed");
        assert_eq!(status_name(REM_ACCESS_ERR), "remote access error");
        assert_eq!(status_name(RNR_RETRY_EXC_ERR), "RNR retry counter exceeded");
        assert_eq!(status_name(21), "general error");
        assert_eq!(status_name(22), "unrecognized status");
        assert_eq!(status_name(u32::MAX), "unrecognized status");
    }

    #[test]
    fn completion_statuses() {
        assert_eq!(to_errno(SUCCESS), None);
        assert_eq!(to_errno(REM_ACCESS_ERR), Some(EACCES));
        assert_eq!(to_errno(WR_FLUSH_ERR), Some(ECANCELED));
        assert_eq!(to_errno(RETRY_EXC_ERR), Some(ECONNRESET));
        assert_eq!(to_errno(BAD_RESP_ERR), Some(ECONNRESET));
        assert_eq!(to_errno(LOC_QP_OP_ERR), Some(ECONNRESET));
        assert_eq!(status_name(LOC_QP_OP_ERR), "local QP operation error");
        assert_eq!(to_errno(99), Some(EIO));
    }
}
