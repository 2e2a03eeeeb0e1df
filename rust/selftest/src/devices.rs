// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `rrdma-selftest devices` and `absent`: GET_INFO lists the named devices,
//! usable and with an active port, or no longer lists them.

use rrdma::abi::uapi;
use rrdma::Rrdma;

use crate::Tap;

fn parse_node(s: &str) -> Option<u32> {
    match s {
        "rnic" => Some(uapi::node_type::RNIC),
        "ib_ca" => Some(uapi::node_type::IB_CA),
        _ => None,
    }
}

pub(crate) fn device_checks(dev: &Rrdma, t: &mut Tap, specs: &[String]) {
    let report = dev.info();
    for spec in specs {
        let (name, node) = spec.split_once(':').unwrap_or((spec, ""));
        t.check(
            &format!("GET_INFO lists {name} usable, port ACTIVE, node type {node}"),
            (|| {
                let report = report
                    .as_ref()
                    .map_err(|e| format!("GET_INFO failed: {e}"))?;
                let d = report
                    .devices
                    .iter()
                    .find(|d| d.name == name)
                    .ok_or(format!("{name} not listed"))?;
                if let Some(nt) = parse_node(node) {
                    if d.node_type != nt {
                        return Err(format!("node type {}", d.node_type_name()));
                    }
                }
                if !d.usable {
                    return Err("not usable".into());
                }
                if d.port_state != uapi::port_state::ACTIVE {
                    return Err(format!("port {}", d.port_state_name()));
                }
                if d.port_count != 1 || d.link_layer != uapi::link_layer::ETHERNET {
                    return Err(format!(
                        "ports {} link {}",
                        d.port_count,
                        d.link_layer_name()
                    ));
                }
                Ok(())
            })(),
        );
    }
}

pub(crate) fn absent_checks(dev: &Rrdma, t: &mut Tap, names: &[String]) {
    let report = dev.info();
    for name in names {
        t.check(
            &format!("GET_INFO no longer lists {name}"),
            match &report {
                Err(e) => Err(format!("GET_INFO failed: {e}")),
                Ok(r) if r.devices.iter().any(|d| &d.name == name) => Err("still listed".into()),
                Ok(_) => Ok(()),
            },
        );
    }
}
