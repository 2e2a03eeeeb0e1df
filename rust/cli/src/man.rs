// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma man DIR` (hidden): the man pages, generated from the same
//! definitions as `--help` (clap_mangen): `rrdma.1`, and `rrdma-CMD.1`
//! for each command. `make userspace` writes them to `build/man`, and
//! `make install` installs them.

use std::fs;
use std::io;
use std::path::Path;

/// Writes `cmd`'s page as `NAME.1` in `dir` (its synopsis `BIN ...`),
/// then its subcommands'.
fn write_page(cmd: &clap::Command, name: &str, bin: &str, dir: &Path) -> io::Result<usize> {
    let cmd = cmd
        .clone()
        .display_name(name.to_owned())
        .bin_name(bin.to_owned())
        .version(env!("CARGO_PKG_VERSION"));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .source(concat!("rrdma ", env!("CARGO_PKG_VERSION")))
        .render(&mut page)?;
    fs::write(dir.join(format!("{name}.1")), page)?;
    let mut n = 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let s = sub.get_name();
        n += write_page(sub, &format!("{name}-{s}"), &format!("{bin} {s}"), dir)?;
    }
    Ok(n)
}

/// Writes the pages of `cmd` (the whole CLI) into `dir`; returns how many.
pub fn write_all(cmd: clap::Command, dir: &Path) -> io::Result<usize> {
    fs::create_dir_all(dir)?;
    write_page(&cmd, "rrdma", "rrdma", dir)
}
