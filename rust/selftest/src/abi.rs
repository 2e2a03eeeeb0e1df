// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest abi`: the ioctl ABI against bad input, through GET_INFO
//! and every command: framing, sizes, reserved fields, pointers, overflow.

use std::io;

use rrdma::abi::errno::{E2BIG, EFAULT, EINVAL, ENOTTY, EOVERFLOW};
use rrdma::abi::ioctl::{ioc, iowr, IOC_READ, IOC_WRITE};
use rrdma::abi::uapi::{self, DeviceInfo, Info, IOCTL_MAGIC};
use rrdma::Rrdma;

use crate::{expect_errno, expect_ok, map_anon, Tap, ALL_IOCTLS};

/// Issues GET_INFO with a caller struct of `size` bytes (a longer struct's
/// tail given by `tail`).
fn get_info_sized(dev: &Rrdma, info: &Info, size: usize, tail: u8) -> io::Result<Vec<u8>> {
    let mut buf = vec![tail; size.max(Info::SIZE)];
    buf[..Info::SIZE].copy_from_slice(&info.encode());
    dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0, size), &mut buf)?;
    Ok(buf)
}

pub(crate) fn abi_checks(dev: &Rrdma, t: &mut Tap) {
    let page = 4096usize;
    let z = Info::zeroed();

    t.check(
        "valid GET_INFO reports ABI version 1",
        (|| {
            let out = expect_ok(dev.get_info_raw(&z))?;
            (out.abi_version == uapi::ABI_VERSION)
                .then_some(())
                .ok_or(format!("abi_version {}", out.abi_version))
        })(),
    );
    t.check("unknown command number is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(
            dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0x7f, Info::SIZE), &mut b),
            ENOTTY,
        )
    });
    t.check("foreign ioctl type is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(dev.ioctl_bytes(iowr(b'T', 0, Info::SIZE), &mut b), ENOTTY)
    });
    t.check("GET_INFO with wrong direction is ENOTTY", {
        let mut b = [0u8; Info::SIZE];
        expect_errno(
            dev.ioctl_bytes(ioc(IOC_WRITE, IOCTL_MAGIC, 0, Info::SIZE), &mut b),
            ENOTTY,
        )
        .and_then(|_| {
            expect_errno(
                dev.ioctl_bytes(ioc(IOC_READ, IOCTL_MAGIC, 0, Info::SIZE), &mut b),
                ENOTTY,
            )
        })
    });
    t.check(
        "struct shorter than version 1 is EINVAL",
        expect_errno(get_info_sized(dev, &z, Info::SIZE - 8, 0), EINVAL),
    );
    t.check(
        "zero-sized struct is EINVAL",
        expect_errno(get_info_sized(dev, &z, 0, 0), EINVAL),
    );
    t.check(
        "longer struct with zero tail is accepted",
        (|| {
            let buf = expect_ok(get_info_sized(dev, &z, Info::SIZE + 24, 0))?;
            if buf[Info::SIZE..].iter().any(|&b| b != 0) {
                return Err("tail modified".into());
            }
            let out = Info::decode(buf[..Info::SIZE].try_into().unwrap());
            (out.abi_version == uapi::ABI_VERSION)
                .then_some(())
                .ok_or("no answer".into())
        })(),
    );
    t.check(
        "longer struct with non-zero tail is E2BIG",
        expect_errno(get_info_sized(dev, &z, Info::SIZE + 24, 1), E2BIG),
    );
    t.check(
        "far longer struct (4 KiB) with non-zero last byte is E2BIG",
        {
            let mut buf = vec![0u8; 4096];
            buf[..Info::SIZE].copy_from_slice(&z.encode());
            buf[4095] = 1;
            expect_errno(dev.ioctl_bytes(iowr(IOCTL_MAGIC, 0, 4096), &mut buf), E2BIG)
        },
    );
    for bit in [0u32, 1, 7, 31] {
        t.check(
            &format!("flags bit {bit} is EINVAL"),
            expect_errno(
                dev.get_info_raw(&Info {
                    flags: 1 << bit,
                    ..z
                }),
                EINVAL,
            ),
        );
    }
    t.check(
        "reserved field is EINVAL",
        expect_errno(dev.get_info_raw(&Info { reserved: 1, ..z }), EINVAL),
    );
    t.check(
        "output fields are ignored on input",
        expect_ok(dev.get_info_raw(&Info {
            abi_version: 99,
            features: !0,
            device_count: 7,
            ..z
        }))
        .map(|_| ()),
    );
    t.check(
        "device capacity without array is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_capacity: 1,
                device_entry_size: DeviceInfo::SIZE as u32,
                ..z
            }),
            EINVAL,
        ),
    );

    let mut entries = vec![0u8; 16 * page];
    let arr = Info {
        devices: entries.as_mut_ptr() as u64,
        device_entry_size: DeviceInfo::SIZE as u32,
        device_capacity: 4,
        ..z
    };
    t.check(
        "entry size below version 1 is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: DeviceInfo::SIZE as u32 - 8,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "entry size above 4096 is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: 4097,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "entry size u32::MAX is EINVAL",
        expect_errno(
            dev.get_info_raw(&Info {
                device_entry_size: u32::MAX,
                ..arr
            }),
            EINVAL,
        ),
    );
    t.check(
        "array range wrapping the address space is EOVERFLOW",
        expect_errno(
            dev.get_info_raw(&Info {
                devices: u64::MAX - 64,
                ..arr
            }),
            EOVERFLOW,
        ),
    );
    t.check(
        "capacity u32::MAX at a high address is EOVERFLOW",
        expect_errno(
            dev.get_info_raw(&Info {
                devices: u64::MAX - (1 << 40),
                device_capacity: u32::MAX,
                device_entry_size: 4096,
                ..z
            }),
            EOVERFLOW,
        ),
    );

    // Pointers: the argument itself.
    // SAFETY: invalid addresses; the kernel must fail, not write.
    t.check(
        "NULL argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, 0) }, EFAULT),
    );
    // SAFETY: as above.
    t.check(
        "kernel-address argument is EFAULT",
        expect_errno(
            unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, 0xffff_ffff_8100_0000) },
            EFAULT,
        ),
    );
    let ro = map_anon(page, libc::PROT_READ);
    // SAFETY: read-only page: the kernel's write back must fail.
    t.check(
        "read-only argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, ro) }, EFAULT),
    );
    let none = map_anon(page, libc::PROT_NONE);
    // SAFETY: inaccessible page.
    t.check(
        "unmapped (PROT_NONE) argument is EFAULT",
        expect_errno(unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, none) }, EFAULT),
    );
    // Every command: a bad argument pointer is EFAULT, whatever the command
    // would have checked next.
    for (name, cmd) in ALL_IOCTLS {
        // SAFETY: invalid addresses; the kernel must fail, not write.
        t.check(
            &format!("{name}: NULL argument is EFAULT"),
            expect_errno(unsafe { dev.ioctl_raw(cmd, 0) }, EFAULT),
        );
        // SAFETY: as above.
        t.check(
            &format!("{name}: inaccessible argument is EFAULT"),
            expect_errno(unsafe { dev.ioctl_raw(cmd, none) }, EFAULT),
        );
    }
    // An argument whose first bytes are readable but whose tail runs into an
    // inaccessible page.
    let two = map_anon(2 * page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: valid mapping of two pages, second one made inaccessible.
    unsafe { libc::mprotect((two + page as u64) as *mut _, page, libc::PROT_NONE) };
    // SAFETY: the first 16 bytes are ours; the rest faults.
    t.check(
        "argument running into an inaccessible page is EFAULT",
        expect_errno(
            unsafe { dev.ioctl_raw(uapi::IOCTL_GET_INFO, two + page as u64 - 16) },
            EFAULT,
        ),
    );

    // Pointers: the device array (only matters when devices exist).
    let count = dev.get_info_raw(&z).map(|i| i.device_count).unwrap_or(0);
    if count > 0 {
        t.check(
            "NULL-page device array is EFAULT",
            expect_errno(
                dev.get_info_raw(&Info {
                    devices: 4096,
                    ..arr
                }),
                EFAULT,
            ),
        );
        t.check(
            "read-only device array is EFAULT",
            expect_errno(dev.get_info_raw(&Info { devices: ro, ..arr }), EFAULT),
        );
        t.check(
            "kernel-address device array is EFAULT",
            expect_errno(
                dev.get_info_raw(&Info {
                    devices: 0xffff_ffff_8100_0000,
                    ..arr
                }),
                EFAULT,
            ),
        );
        t.check(
            "larger entry stride is zero-filled past version 1",
            (|| {
                entries.fill(0xaa);
                let stride = 256usize;
                let out = expect_ok(dev.get_info_raw(&Info {
                    device_entry_size: stride as u32,
                    devices: entries.as_mut_ptr() as u64,
                    ..arr
                }))?;
                let n = (out.device_count as usize).min(4);
                for i in 0..n {
                    let e = &entries[i * stride..(i + 1) * stride];
                    if e[DeviceInfo::SIZE..].iter().any(|&b| b != 0) {
                        return Err(format!("entry {i} tail not zeroed"));
                    }
                    if e[0] == 0 || e[0] == 0xaa {
                        return Err(format!("entry {i} has no name"));
                    }
                }
                if entries[n * stride] != 0xaa {
                    return Err("wrote past the last entry".into());
                }
                Ok(())
            })(),
        );
        t.check(
            "capacity smaller than device count writes only capacity entries",
            (|| {
                entries.fill(0xaa);
                let out = expect_ok(dev.get_info_raw(&Info {
                    device_capacity: 1,
                    devices: entries.as_mut_ptr() as u64,
                    ..arr
                }))?;
                if out.device_count != count {
                    return Err(format!("device_count {} != {count}", out.device_count));
                }
                (entries[DeviceInfo::SIZE] == 0xaa)
                    .then_some(())
                    .ok_or("wrote past capacity".into())
            })(),
        );
    }
}
