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

/// Names of the feature bits `GET_INFO` reports.
fn feature_names(features: u64) -> String {
    let known = [(rrdma::abi::uapi::FEATURE_REGIONS, "regions")];
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

#[cfg(test)]
mod tests {
    use super::feature_names;

    #[test]
    fn feature_bits_are_named() {
        assert_eq!(feature_names(0), "");
        assert_eq!(feature_names(1), "regions");
        assert_eq!(feature_names(1 | 1 << 40), "regions, unknown 0x10000000000");
    }
}
