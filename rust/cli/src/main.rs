// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma`: command-line front end of `/dev/rrdma`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rrdma::{InfoReport, Rrdma};

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
}

fn print_info(report: &InfoReport) {
    println!(
        "rrdma ABI {}, features {:#x}",
        report.abi_version, report.features
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
