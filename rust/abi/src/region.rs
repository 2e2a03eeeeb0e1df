// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rules for regions: creation arguments and mappings.

use super::blocks::Geometry;
use super::errno::{Errno, EINVAL, ENXIO, EPERM};
use super::uapi::{RegionCreate, RegionRegister};

/// Checks a `REGION_CREATE` argument; returns the region's geometry.
pub fn validate_create(req: &RegionCreate, max_bytes: u64) -> Result<Geometry, Errno> {
    if req.flags != 0 || req.reserved != 0 {
        return Err(EINVAL);
    }
    Geometry::new(req.block_size, req.nblocks, max_bytes)
}

/// Checks a `REGION_REGISTER` argument for pages of `page_size` bytes;
/// returns the region's geometry. The memory must start on a page and be
/// whole pages (`EINVAL`): a peer granted its last page could otherwise
/// reach the caller's bytes past the region.
pub fn validate_register(
    req: &RegionRegister,
    page_size: u64,
    max_bytes: u64,
) -> Result<Geometry, Errno> {
    // A page size is a power of two.
    let in_page = page_size - 1;
    if req.flags != 0 || req.reserved != 0 || req.addr & in_page != 0 {
        return Err(EINVAL);
    }
    let geometry = Geometry::new(req.block_size, req.nblocks, max_bytes)?;
    if geometry.bytes() & in_page != 0 || req.addr.checked_add(geometry.bytes()).is_none() {
        return Err(EINVAL);
    }
    Ok(geometry)
}

/// What the kernel knows of a mapping request (`struct vm_area_struct`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapRequest {
    /// Byte offset requested (`vm_pgoff << PAGE_SHIFT`).
    pub offset: u64,
    /// Length of the mapping in bytes.
    pub len: u64,
    /// Whether the mapping is shared (`VM_SHARED`).
    pub shared: bool,
    /// Whether execution is requested (`VM_EXEC`).
    pub exec: bool,
}

/// Checks a mapping of a region whose mmap offset is `region_offset` and
/// whose mapped size is `region_len` (its pages, rounded up).
///
/// Only the whole region at its exact offset may be mapped (`EINVAL`
/// otherwise), shared (`EINVAL` for private: a private copy would silently
/// stop being the registered memory), and never executable (`EPERM`).
pub fn check_map(req: &MapRequest, region_offset: u64, region_len: u64) -> Result<(), Errno> {
    if req.offset != region_offset {
        return Err(ENXIO);
    }
    if req.len != region_len || !req.shared {
        return Err(EINVAL);
    }
    if req.exec {
        return Err(EPERM);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> RegionCreate {
        RegionCreate {
            block_size: 4096,
            nblocks: 4,
            ..RegionCreate::zeroed()
        }
    }

    #[test]
    fn create_rules() {
        assert_eq!(
            validate_create(&req(), 1 << 30).map(|g| g.bytes()),
            Ok(16384)
        );
        assert_eq!(
            validate_create(&RegionCreate { flags: 1, ..req() }, 1 << 30),
            Err(EINVAL)
        );
        assert_eq!(
            validate_create(
                &RegionCreate {
                    reserved: 1,
                    ..req()
                },
                1 << 30
            ),
            Err(EINVAL)
        );
        assert_eq!(
            validate_create(
                &RegionCreate {
                    block_size: 1000,
                    ..req()
                },
                1 << 30
            ),
            Err(EINVAL)
        );
        assert!(validate_create(
            &RegionCreate {
                nblocks: 1 << 20,
                ..req()
            },
            1 << 30
        )
        .is_err());
    }

    #[test]
    fn register_rules() {
        let r = RegionRegister {
            addr: 1 << 20,
            block_size: 4096,
            nblocks: 4,
            ..RegionRegister::zeroed()
        };
        let v = |r: RegionRegister| validate_register(&r, 4096, 1 << 30).map(|g| g.bytes());
        assert_eq!(v(r), Ok(16384));
        assert_eq!(v(RegionRegister { flags: 1, ..r }), Err(EINVAL));
        assert_eq!(v(RegionRegister { reserved: 1, ..r }), Err(EINVAL));
        assert_eq!(v(RegionRegister { addr: 512, ..r }), Err(EINVAL));
        assert_eq!(v(RegionRegister { nblocks: 0, ..r }), Err(EINVAL));
        assert_eq!(
            v(RegionRegister {
                block_size: 1000,
                ..r
            }),
            Err(EINVAL)
        );
        // Not whole pages: 7 blocks of 512 bytes.
        let small = RegionRegister {
            block_size: 512,
            nblocks: 7,
            ..r
        };
        assert_eq!(v(small), Err(EINVAL));
        assert_eq!(
            v(RegionRegister {
                nblocks: 8,
                ..small
            }),
            Ok(4096)
        );
        // The end past the address space.
        assert_eq!(
            v(RegionRegister {
                addr: u64::MAX - 4095,
                ..r
            }),
            Err(EINVAL)
        );
        assert!(v(RegionRegister {
            nblocks: 1 << 20,
            ..r
        })
        .is_err());
    }

    #[test]
    fn map_rules() {
        let m = MapRequest {
            offset: 1 << 20,
            len: 8192,
            shared: true,
            exec: false,
        };
        assert_eq!(check_map(&m, 1 << 20, 8192), Ok(()));
        assert_eq!(
            check_map(&MapRequest { offset: 0, ..m }, 1 << 20, 8192),
            Err(ENXIO)
        );
        assert_eq!(
            check_map(&MapRequest { len: 4096, ..m }, 1 << 20, 8192),
            Err(EINVAL)
        );
        assert_eq!(
            check_map(&MapRequest { len: 12288, ..m }, 1 << 20, 8192),
            Err(EINVAL)
        );
        assert_eq!(
            check_map(&MapRequest { shared: false, ..m }, 1 << 20, 8192),
            Err(EINVAL)
        );
        assert_eq!(
            check_map(&MapRequest { exec: true, ..m }, 1 << 20, 8192),
            Err(EPERM)
        );
    }
}
