// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Validation of `RRDMA_IOCTL_GET_INFO` and the layout of its device list.

use super::errno::{Errno, EINVAL, EOVERFLOW};
use super::uapi::{Info, DEVICE_ENTRY_SIZE_MAX, DEVICE_INFO_SIZE_VER0};

/// A validated GET_INFO request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InfoRequest {
    /// User address of the device array (0: count only).
    pub devices: u64,
    /// Stride of the caller's entries.
    pub entry_size: u32,
    /// Entries the caller has room for.
    pub capacity: u32,
}

/// Checks the input fields of a GET_INFO argument.
///
/// Output-only fields are ignored on input; flags and reserved fields must
/// be zero; a device array needs a sane stride and an address range that
/// does not wrap.
pub fn validate_request(info: &Info) -> Result<InfoRequest, Errno> {
    if info.flags != 0 || info.reserved != 0 {
        return Err(EINVAL);
    }
    if info.device_capacity == 0 {
        return Ok(InfoRequest {
            devices: info.devices,
            entry_size: info.device_entry_size,
            capacity: 0,
        });
    }
    if info.devices == 0 {
        return Err(EINVAL);
    }
    if !(DEVICE_INFO_SIZE_VER0..=DEVICE_ENTRY_SIZE_MAX).contains(&info.device_entry_size) {
        return Err(EINVAL);
    }
    let bytes = u64::from(info.device_capacity)
        .checked_mul(u64::from(info.device_entry_size))
        .ok_or(EOVERFLOW)?;
    info.devices.checked_add(bytes).ok_or(EOVERFLOW)?;
    Ok(InfoRequest {
        devices: info.devices,
        entry_size: info.device_entry_size,
        capacity: info.device_capacity,
    })
}

/// Where entry `i` goes and how much of it this kernel fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntrySlot {
    /// User address of the entry.
    pub addr: u64,
    /// Bytes of the kernel's entry copied out.
    pub copy_len: usize,
    /// Bytes after those, up to the caller's stride, that are zeroed.
    pub zero_len: usize,
}

impl InfoRequest {
    /// The slot of entry `i`, or `None` past the caller's capacity.
    pub fn slot(&self, i: u32, kernel_entry_size: usize) -> Option<EntrySlot> {
        if i >= self.capacity {
            return None;
        }
        // Cannot overflow: validate_request() checked the whole range.
        let addr = self.devices + u64::from(i) * u64::from(self.entry_size);
        let stride = self.entry_size as usize;
        let copy_len = stride.min(kernel_entry_size);
        Some(EntrySlot {
            addr,
            copy_len,
            zero_len: stride - copy_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uapi::DeviceInfo;

    fn req(devices: u64, size: u32, cap: u32) -> Info {
        Info {
            devices,
            device_entry_size: size,
            device_capacity: cap,
            ..Info::zeroed()
        }
    }

    #[test]
    fn reserved_and_flags_must_be_zero() {
        assert_eq!(
            validate_request(&Info {
                flags: 1,
                ..Info::zeroed()
            }),
            Err(EINVAL)
        );
        assert_eq!(
            validate_request(&Info {
                reserved: 1,
                ..Info::zeroed()
            }),
            Err(EINVAL)
        );
        assert!(validate_request(&Info::zeroed()).is_ok());
    }

    #[test]
    fn output_fields_are_ignored_on_input() {
        let i = Info {
            abi_version: 9,
            features: 9,
            device_count: 9,
            ..Info::zeroed()
        };
        assert!(validate_request(&i).is_ok());
    }

    #[test]
    fn device_array_rules() {
        assert_eq!(validate_request(&req(0, 112, 1)), Err(EINVAL));
        assert_eq!(validate_request(&req(0x1000, 111, 1)), Err(EINVAL));
        assert_eq!(validate_request(&req(0x1000, 4097, 1)), Err(EINVAL));
        assert_eq!(
            validate_request(&req(u64::MAX - 100, 112, 1)),
            Err(EOVERFLOW)
        );
        assert_eq!(
            validate_request(&req(u64::MAX - 4096 * 9, 4096, u32::MAX)),
            Err(EOVERFLOW)
        );
        assert!(validate_request(&req(0x1000, 112, 4)).is_ok());
        assert!(validate_request(&req(0x1000, 4096, 4)).is_ok());
    }

    #[test]
    fn slots_follow_the_callers_stride() {
        let r = validate_request(&req(0x1000, 128, 3)).unwrap();
        let s = r.slot(2, DeviceInfo::SIZE).unwrap();
        assert_eq!(
            s,
            EntrySlot {
                addr: 0x1000 + 256,
                copy_len: 112,
                zero_len: 16
            }
        );
        assert_eq!(r.slot(3, DeviceInfo::SIZE), None);
        let r = validate_request(&req(0x1000, 112, 1)).unwrap();
        assert_eq!(
            r.slot(0, 200).unwrap(),
            EntrySlot {
                addr: 0x1000,
                copy_len: 112,
                zero_len: 0
            }
        );
    }
}
