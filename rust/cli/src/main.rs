// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma`: command-line front end of `/dev/rrdma`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use rrdma::{Access, InfoReport, Rrdma};

mod args;
mod disk;
mod man;
mod serve;
mod stats;
mod status;
mod transfer;

use args::TargetArgs;

/// Export access on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum AccessArg {
    /// Read-only: the NIC refuses the peer's writes.
    Ro,
    /// Read and write.
    Rw,
}

#[derive(Parser)]
#[command(name = "rrdma", version, about = "Remote memory blocks over RDMA")]
struct Cli {
    /// Device node to use.
    #[arg(long, global = true, default_value = rrdma::DEFAULT_PATH)]
    device: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the module's ABI version, features and RDMA devices.
    Info {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show the host's rrdma connections, exports with their importers,
    /// imports and disks (all with CAP_NET_ADMIN; else the caller's own,
    /// and the disks).
    Status {
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Create (or register) a region, listen, export it and print its
    /// token(s).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0:7471")]
        listen: SocketAddr,
        /// Block size in bytes.
        #[arg(long, default_value_t = 4096)]
        block_size: u32,
        /// Number of blocks.
        #[arg(long, default_value_t = 1024)]
        blocks: u64,
        /// Export access; repeat for several exports of the region.
        #[arg(long, value_enum, default_values_t = vec![AccessArg::Rw])]
        access: Vec<AccessArg>,
        /// TCP port of a line-based control channel that hands out the
        /// tokens (tests and demos on a private network only).
        #[arg(long)]
        control: Option<u16>,
        /// Keep at most this many connections: a new one closes the
        /// oldest (0: no limit).
        #[arg(long, default_value_t = 0)]
        max_conns: usize,
        /// Export this process's own memory (anonymous, registered with
        /// REGION_REGISTER) instead of a region the module allocates.
        #[arg(long)]
        user_memory: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read remote blocks to a file or stdout.
    Read {
        #[command(flatten)]
        target: TargetArgs,
        /// First remote block.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Number of blocks (default: to the end of the region).
        #[arg(long)]
        count: Option<u64>,
        /// Output file ("-": stdout).
        #[arg(long, short, default_value = "-")]
        output: String,
        /// Draw a progress bar on stderr even if it is not a terminal.
        #[arg(long)]
        progress: bool,
        /// Print a JSON summary on stderr.
        #[arg(long)]
        json: bool,
    },
    /// Write a file or stdin to remote blocks (the last one zero-padded).
    Write {
        #[command(flatten)]
        target: TargetArgs,
        /// First remote block.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Input file ("-": stdin).
        #[arg(long, short, default_value = "-")]
        input: String,
        /// Draw a progress bar on stderr even if it is not a terminal.
        #[arg(long)]
        progress: bool,
        /// Print a JSON summary.
        #[arg(long)]
        json: bool,
    },
    /// Write a pattern to remote blocks, read it back and compare checksums.
    Verify {
        #[command(flatten)]
        target: TargetArgs,
        /// First remote block.
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Number of blocks (default: to the end of the region).
        #[arg(long)]
        count: Option<u64>,
        /// Pattern seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Draw a progress bar on stderr even if it is not a terminal.
        #[arg(long)]
        progress: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Map a peer's export as a block device /dev/rrdmabN (root); it
    /// stays, with a connection of its own (which reconnects), until
    /// `rrdma unmap N`.
    Map {
        #[command(flatten)]
        target: TargetArgs,
        /// A read-only disk.
        #[arg(long)]
        ro: bool,
    },
    /// Remove block device /dev/rrdmabN (root).
    Unmap {
        /// N of /dev/rrdmabN.
        index: u32,
        /// Even while it is open or mounted (its users get I/O errors).
        #[arg(long)]
        force: bool,
    },
    /// Write the man pages into DIR (`make userspace`).
    #[command(hide = true)]
    Man {
        /// Where the pages go.
        dir: std::path::PathBuf,
    },
    /// Measure bandwidth (or latency) with perftest's columns.
    Bench {
        #[command(flatten)]
        target: TargetArgs,
        /// Operation.
        #[arg(long, value_parser = ["read", "write"], default_value = "read")]
        op: String,
        /// Bytes per operation (a multiple of the block size); repeatable.
        #[arg(long, default_values_t = vec![4096u64])]
        size: Vec<u64>,
        /// Operations in flight.
        #[arg(long, default_value_t = 16)]
        depth: u32,
        /// Seconds per size (ignored with --iters).
        #[arg(long, default_value_t = 2.0)]
        duration: f64,
        /// Operations per size instead of a duration.
        #[arg(long)]
        iters: Option<u64>,
        /// Latency: one operation at a time, each timed (synchronous,
        /// RW_SYNC, with `--engine ioctl`; else one io_uring command).
        #[arg(long)]
        latency: bool,
        /// How operations reach the kernel: SUBMIT ioctls and read(2), or
        /// io_uring commands (`uring-iopoll`: on a polled ring;
        /// `uring-sqpoll`: issued by the kernel's SQ thread).
        #[arg(long, value_enum, default_value = "ioctl")]
        engine: transfer::Engine,
        /// Queue pairs: that many connections, each driven by its own
        /// thread with `depth` operations in flight (perftest's `-q`).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
        /// Threads sharing one connection, each with its own io_uring ring
        /// (an io_uring engine): the connection's data lanes carry them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        threads: u32,
        /// Writes complete once sent (RRDMA_OP_F_SENT), not once placed;
        /// each queue ends its run with a fence, which the time includes.
        #[arg(long)]
        sent: bool,
        /// With --sent, a fence after every this many writes of a queue too.
        #[arg(long, default_value_t = 0, requires = "sent")]
        fence_every: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Names of the feature bits `GET_INFO` reports.
fn feature_names(features: u64) -> String {
    let known = [
        (rrdma::abi::uapi::FEATURE_REGIONS, "regions"),
        (rrdma::abi::uapi::FEATURE_REMOTE, "remote"),
        (rrdma::abi::uapi::FEATURE_KEEPALIVE, "keepalive"),
        (rrdma::abi::uapi::FEATURE_RECONNECT, "reconnect"),
        (rrdma::abi::uapi::FEATURE_URING, "io_uring"),
        (rrdma::abi::uapi::FEATURE_URING_IOPOLL, "io_uring-iopoll"),
        (rrdma::abi::uapi::FEATURE_REGISTER, "register"),
        (rrdma::abi::uapi::FEATURE_WRITE_SENT, "write-sent"),
        (rrdma::abi::uapi::FEATURE_BLK, "blk"),
        (rrdma::abi::uapi::FEATURE_STATUS, "status"),
        (rrdma::abi::uapi::FEATURE_CAPS, "caps"),
    ];
    let mut names: Vec<String> = known
        .iter()
        .filter(|(bit, _)| features & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let unknown = known.iter().fold(features, |f, (bit, _)| f & !bit);
    if unknown != 0 {
        names.push(format!("unknown {unknown:#x}"));
    }
    names.join(", ")
}

fn print_info(report: &InfoReport) {
    println!(
        "rrdma ABI {}, features {:#x} ({})",
        report.abi_version,
        report.features,
        feature_names(report.features)
    );
    if report.devices.is_empty() {
        println!("no RDMA devices (add one with `rdma link add NAME type siw|rxe netdev IFACE`)");
        return;
    }
    println!(
        "{:<16} {:>5}  {:<6} {:<11} {:>5}  {:<12} USABLE",
        "DEVICE", "INDEX", "NODE", "LINK", "PORTS", "PORT1"
    );
    for d in &report.devices {
        println!(
            "{:<16} {:>5}  {:<6} {:<11} {:>5}  {:<12} {}",
            d.name,
            d.index,
            d.node_type_name(),
            d.link_layer_name(),
            d.port_count,
            d.port_state_name(),
            if d.usable { "yes" } else { "no" }
        );
    }
}

fn run(cli: Cli) -> std::io::Result<()> {
    if let Command::Man { dir } = &cli.command {
        let n = man::write_all(Cli::command(), dir)?;
        println!("{n} man pages in {}", dir.display());
        return Ok(());
    }
    let dev = Rrdma::open_path(&cli.device)?;
    match cli.command {
        Command::Info { json } => {
            let report = dev.info()?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?
                );
            } else {
                print_info(&report);
            }
        }
        Command::Status { json } => {
            let report = dev.status()?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?
                );
            } else {
                status::print(&report);
            }
        }
        Command::Serve {
            listen,
            block_size,
            blocks,
            access,
            control,
            max_conns,
            user_memory,
            json,
        } => {
            let access = access
                .iter()
                .map(|a| match a {
                    AccessArg::Ro => Access::ReadOnly,
                    AccessArg::Rw => Access::ReadWrite,
                })
                .collect();
            serve::serve(
                &dev,
                &serve::ServeArgs {
                    listen,
                    block_size,
                    blocks,
                    access,
                    control,
                    max_conns,
                    user_memory,
                    json,
                },
            )?;
        }
        Command::Read {
            target,
            first,
            count,
            output,
            progress,
            json,
        } => {
            let mut out: Box<dyn std::io::Write> = if output == "-" {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(std::io::BufWriter::new(std::fs::File::create(&output)?))
            };
            let n = transfer::read(&dev, &target.target(), first, count, &mut out, progress)?;
            if json {
                eprintln!(
                    "{}",
                    serde_json::json!({"op": "read", "first": first, "blocks": n})
                );
            }
        }
        Command::Write {
            target,
            first,
            input,
            progress,
            json,
        } => {
            let mut inp: Box<dyn std::io::Read> = if input == "-" {
                Box::new(std::io::stdin().lock())
            } else {
                Box::new(std::fs::File::open(&input)?)
            };
            let n = transfer::write(&dev, &target.target(), first, &mut inp, progress)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"op": "write", "first": first, "blocks": n})
                );
            } else {
                println!("wrote {n} blocks from block {first}");
            }
        }
        Command::Verify {
            target,
            first,
            count,
            seed,
            progress,
            json,
        } => {
            let v = transfer::verify(&dev, &target.target(), first, count, seed, progress)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&v).map_err(std::io::Error::other)?
                );
            } else {
                println!(
                    "verify: {} blocks of {} bytes ({} bytes): written {} read {}: {}",
                    v.blocks,
                    v.block_size,
                    v.bytes,
                    v.written_checksum,
                    v.read_checksum,
                    if v.ok { "OK" } else { "MISMATCH" }
                );
            }
            if !v.ok {
                return Err(std::io::Error::other(
                    "data read back differs from data written",
                ));
            }
        }
        Command::Map { target, ro } => disk::map(&dev, &target.target(), ro)?,
        Command::Unmap { index, force } => disk::unmap(&dev, index, force)?,
        // Written above, before the device is opened.
        Command::Man { .. } => {}
        Command::Bench {
            target,
            op,
            size,
            depth,
            duration,
            iters,
            latency,
            engine,
            queues,
            threads,
            sent,
            fence_every,
            json,
        } => {
            let mut results = Vec::new();
            for s in size {
                let a = transfer::BenchArgs {
                    write: op == "write",
                    size: s,
                    depth,
                    duration: Duration::from_secs_f64(duration),
                    iters,
                    latency,
                    engine,
                    queues,
                    threads,
                    sent,
                    fence_every,
                };
                let r = transfer::bench(cli.device.as_ref(), &dev, &target.target(), &a)?;
                if !json {
                    transfer::print_bench(&r);
                }
                results.push(r);
            }
            if json {
                // One line, for scripts (make bench).
                println!(
                    "{}",
                    serde_json::to_string(&results).map_err(std::io::Error::other)?
                );
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rrdma: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::feature_names;

    #[test]
    fn feature_bits_are_named() {
        assert_eq!(feature_names(0), "");
        assert_eq!(feature_names(1), "regions");
        assert_eq!(feature_names(3), "regions, remote");
        assert_eq!(feature_names(1 | 1 << 40), "regions, unknown 0x10000000000");
    }
}
