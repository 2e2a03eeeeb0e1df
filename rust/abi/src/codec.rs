// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Byte-level encoding of ABI structs, without `unsafe`.
//!
//! ABI structs cross the user/kernel boundary as bytes. Decoding them field
//! by field from a byte array (native endianness, as the C header implies)
//! avoids transmutes and makes every byte of a struct, padding included,
//! explicit. `abi_struct!` generates the code; it is textually scoped
//! (`#[macro_use]`) and names `super::codec`, so it expands the same in this
//! crate and inside the kernel module's `abi` module.

/// A fixed-size field of an ABI struct.
pub trait Field: Sized + Copy {
    /// Size of the field in bytes.
    const SIZE: usize;
    /// Reads the field from `b[..Self::SIZE]`.
    fn get(b: &[u8]) -> Self;
    /// Writes the field to `b[..Self::SIZE]`.
    fn put(&self, b: &mut [u8]);
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_ne_bytes(a)
            }
            fn put(&self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, i32, i64);

impl<T: Field + Default, const N: usize> Field for [T; N] {
    const SIZE: usize = T::SIZE * N;
    fn get(b: &[u8]) -> Self {
        let mut out = [T::default(); N];
        for (i, v) in out.iter_mut().enumerate() {
            *v = T::get(&b[i * T::SIZE..]);
        }
        out
    }
    fn put(&self, b: &mut [u8]) {
        for (i, v) in self.iter().enumerate() {
            v.put(&mut b[i * T::SIZE..]);
        }
    }
}

/// Declares a `#[repr(C)]` ABI struct mirroring the UAPI header.
///
/// Each field states its byte offset; the macro checks at compile time that
/// the offsets, the field sizes and the total size agree with the Rust
/// layout, so a mistake in the mirror does not build. It generates `SIZE`,
/// `zeroed()`, `decode()` and `encode()`.
macro_rules! abi_struct {
    (
        $(#[$m:meta])*
        pub struct $name:ident (size = $size:expr) {
            $( $(#[$fm:meta])* $field:ident : $ty:ty = $off:expr ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        const _: () = {
            assert!(core::mem::size_of::<$name>() == $size);
            assert!($size % 8 == 0);
            $( assert!(core::mem::offset_of!($name, $field) == $off); )*
            // Fields must tile the struct: no implicit padding anywhere.
            assert!(0 $( + <$ty as super::codec::Field>::SIZE )* == $size);
        };

        impl $name {
            /// Size of the struct in bytes, as in the C header.
            pub const SIZE: usize = $size;

            /// The all-zero value.
            pub fn zeroed() -> Self {
                Self::decode(&[0u8; $size])
            }

            /// Decodes the struct from its bytes.
            pub fn decode(b: &[u8; $size]) -> Self {
                Self { $( $field: <$ty as super::codec::Field>::get(&b[$off..]), )* }
            }

            /// Encodes the struct into its bytes.
            pub fn encode(&self) -> [u8; $size] {
                let mut b = [0u8; $size];
                $( super::codec::Field::put(&self.$field, &mut b[$off..]); )*
                b
            }
        }
    };
}
