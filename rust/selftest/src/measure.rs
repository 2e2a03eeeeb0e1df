// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Measurements for `make bench` (not pass/fail checks):
//! - `memcpy`: the guest's memory copy bandwidth, the ceiling of soft RDMA;
//! - `memory PEER_IP`: kernel memory rrdma (and the provider) use per region
//!   and per connection, from `/proc/meminfo` (`Slab` + `VmallocUsed`, which
//!   excludes the region pages themselves);
//! - `udp-echo PORT` / `udp-ping PEER:PORT SIZE COUNT`: the round trip of
//!   the guests' own network, the floor under every RDMA latency.
//!
//! Each prints one JSON object on stdout. The kernel memory, vmalloc by
//! caller and rrdma's registrations are read for `scale` as well.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrdma::Rrdma;

/// Copies 64 MiB buffers for about a second; bytes/s of the best pass.
pub(crate) fn memcpy() -> io::Result<()> {
    const LEN: usize = 64 << 20;
    let src = vec![0x5au8; LEN];
    let mut dst = vec![0u8; LEN];
    let mut best = 0.0f64;
    let start = Instant::now();
    let mut passes = 0;
    while start.elapsed() < Duration::from_secs(1) || passes < 3 {
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        best = best.max(LEN as f64 / t.elapsed().as_secs_f64());
        passes += 1;
    }
    println!(
        "{{\"memcpy_mbps\": {:.1}, \"passes\": {passes}}}",
        best / 1e6
    );
    Ok(())
}

fn meminfo_kib(key: &str) -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .ok_or_else(|| io::Error::other(format!("no {key} in /proc/meminfo")))
}

/// Bytes of `vmalloc` areas by the function that allocated them
/// (`/proc/vmallocinfo`): where a provider keeps its queues.
pub(crate) fn vmalloc_by_caller() -> HashMap<String, u64> {
    let mut m = HashMap::new();
    let text = std::fs::read_to_string("/proc/vmallocinfo").unwrap_or_default();
    for l in text.lines() {
        let mut w = l.split_whitespace().skip(1);
        let (Some(size), Some(caller)) = (w.next(), w.next()) else {
            continue;
        };
        let caller = caller.split('+').next().unwrap_or(caller);
        *m.entry(caller.to_string()).or_insert(0) += size.parse::<u64>().unwrap_or(0);
    }
    m
}

/// Bytes of slab pages by cache (`/proc/slabinfo`: slabs times pages per
/// slab; root only). kmalloc above 8 KiB bypasses the caches: it counts in
/// `Slab` of `/proc/meminfo` but in no cache here.
pub(crate) fn slab_by_cache() -> HashMap<String, u64> {
    let mut m = HashMap::new();
    let text = std::fs::read_to_string("/proc/slabinfo").unwrap_or_default();
    for l in text.lines().skip(2) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let num = |i: usize| w.get(i).and_then(|v| v.parse::<u64>().ok());
        if let (Some(name), Some(pages), Some(slabs)) = (w.first(), num(5), num(14)) {
            m.insert(name.to_string(), slabs * pages * 4096);
        }
    }
    m
}

/// The keys whose bytes grew the most from `before` to `after`, at most
/// `n`, in KiB per `per` objects: `key KiB, ...`.
pub(crate) fn growth(
    before: &HashMap<String, u64>,
    after: &HashMap<String, u64>,
    per: usize,
    n: usize,
) -> String {
    let mut v: Vec<(u64, &String)> = after
        .iter()
        .map(|(k, &b)| (b.saturating_sub(before.get(k).copied().unwrap_or(0)), k))
        .filter(|(d, _)| *d > 0)
        .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.iter()
        .take(n)
        .map(|(d, k)| format!("{k} {:.1} KiB", *d as f64 / 1024.0 / per.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the kernel's memory is at one moment: `Slab` and `VmallocUsed`,
/// vmalloc by caller and slab by cache.
pub(crate) struct Profile {
    slab_kib: u64,
    vmalloc_kib: u64,
    vmalloc: HashMap<String, u64>,
    slabs: HashMap<String, u64>,
}

impl Profile {
    /// The profile now, after deferred frees settled.
    pub(crate) fn take() -> io::Result<Self> {
        std::thread::sleep(Duration::from_millis(300));
        Ok(Self {
            slab_kib: meminfo_kib("Slab")?,
            vmalloc_kib: meminfo_kib("VmallocUsed")?,
            vmalloc: vmalloc_by_caller(),
            slabs: slab_by_cache(),
        })
    }

    /// KiB of `Slab` and `VmallocUsed` together.
    pub(crate) fn kib(&self) -> u64 {
        self.slab_kib + self.vmalloc_kib
    }

    /// The growth from `self` to `later` per `per` objects, by part: slab
    /// (and the caches that grew most) and vmalloc (VmallocUsed has no
    /// guard pages; vmallocinfo's callers include one page each). The
    /// caches' sum is not set against `Slab`: the kernel's counters of the
    /// latter are per CPU and lag.
    pub(crate) fn growth(&self, later: &Self, per: usize) -> String {
        let kib = |a: u64, b: u64| b.saturating_sub(a) as f64 / per.max(1) as f64;
        let slab = kib(self.slab_kib, later.slab_kib);
        // A kernel without CONFIG_SLUB_DEBUG has no /proc/slabinfo.
        let by_cache = if later.slabs.is_empty() {
            String::new()
        } else {
            format!(" (caches {})", growth(&self.slabs, &later.slabs, per, 6))
        };
        format!(
            "slab {slab:.1} KiB{by_cache}, vmalloc {:.1} KiB ({})",
            kib(self.vmalloc_kib, later.vmalloc_kib),
            growth(&self.vmalloc, &later.vmalloc, per, 4)
        )
    }
}

pub(crate) fn kernel_kib() -> io::Result<u64> {
    // Let deferred frees (RCU, workqueues) settle first.
    std::thread::sleep(Duration::from_millis(300));
    Ok(meminfo_kib("Slab")? + meminfo_kib("VmallocUsed")?)
}

/// Kernel memory per region (64 MiB) and per connection (16 of them, to
/// `peer`'s `rrdma serve` on port 7471).
pub(crate) fn memory(peer: &str) -> io::Result<()> {
    let dev = Rrdma::open()?;
    const REGION_MB: u64 = 64;
    let base = kernel_kib()?;
    let region = dev.create_region(4096, REGION_MB * 256)?;
    let with_region = kernel_kib()?;
    drop(region);
    let addr: SocketAddr = format!("{peer}:7471").parse().map_err(io::Error::other)?;
    const CONNS: u64 = 16;
    let before = kernel_kib()?;
    let mut conns = Vec::new();
    for _ in 0..CONNS {
        conns.push(dev.connect(addr, Duration::from_secs(10))?);
    }
    let after = kernel_kib()?;
    drop(conns);
    let region_kib = with_region.saturating_sub(base);
    let per_conn = after.saturating_sub(before) as f64 / CONNS as f64;
    println!(
        "{{\"region_mib\": {REGION_MB}, \"region_overhead_kib\": {region_kib}, \"region_overhead_pct\": {:.4}, \"connections\": {CONNS}, \"per_connection_kib\": {per_conn:.1}}}",
        region_kib as f64 * 100.0 / (REGION_MB * 1024) as f64
    );
    Ok(())
}

/// `udp-echo PORT`: sends every datagram back to its sender, until killed
/// (the peer of [`udp_ping`]).
pub(crate) fn udp_echo(port: &str) -> io::Result<()> {
    let sock = std::net::UdpSocket::bind(format!("0.0.0.0:{port}"))?;
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = sock.recv_from(&mut buf)?;
        sock.send_to(&buf[..n], from)?;
    }
}

/// `udp-ping PEER:PORT SIZE COUNT`: round trips of `SIZE`-byte datagrams
/// to [`udp_echo`], one at a time; prints p50/p99/max in microseconds.
/// A lost datagram (1 s without an answer) counts as a failure.
pub(crate) fn udp_ping(peer: &str, size: usize, count: usize) -> io::Result<()> {
    if count == 0 {
        return Err(io::Error::other("COUNT must be at least 1"));
    }
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    sock.connect(peer)?;
    sock.set_read_timeout(Some(Duration::from_secs(1)))?;
    let out = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let mut rtts = Vec::with_capacity(count);
    // A few unmeasured exchanges first (ARP, caches).
    for i in 0..count + 5 {
        let t = Instant::now();
        sock.send(&out)?;
        let n = sock.recv(&mut buf)?;
        if n != size {
            return Err(io::Error::other(format!(
                "echo of {size} bytes came back as {n}"
            )));
        }
        if i >= 5 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    rtts.sort_by(f64::total_cmp);
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q).round() as usize];
    println!(
        "{{\"size\": {size}, \"count\": {count}, \"p50_us\": {:.0}, \"p99_us\": {:.0}, \"max_us\": {:.0}}}",
        at(0.5),
        at(0.99),
        at(1.0)
    );
    Ok(())
}

/// Registrations (MRs) of rrdma's on this host (`rdma resource show mr`).
pub(crate) fn rrdma_mrs() -> Result<usize, String> {
    let out = std::process::Command::new("rdma")
        .args(["resource", "show", "mr"])
        .output()
        .map_err(|e| format!("rdma: {e}"))?;
    if !out.status.success() {
        return Err("rdma resource show mr failed".into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().filter(|l| l.contains("comm [rrdma]")).count())
}
