#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot one or two QEMU (TCG) guests from a cached kernel and run a guest test.

The initramfs carries busybox, the kernel's modules, rrdma's modules and
static binaries, the test scripts, and the `rdma` tool, perftest, rping and
(for `make profile` and `--tool perf` only) perf with their shared libraries and the rxe/siw
verbs providers.  Two guests are
linked by a QEMU socket netdev (virtio-net) over one TCP connection on
127.0.0.1 that this script opens and hands to both QEMUs, with Nagle's
algorithm off on both ends; their addresses (10.99.0.1 and 10.99.0.2) exist
only on that virtual wire.

Why the script opens the link: with `-netdev socket,listen=`, QEMU does not
set TCP_NODELAY on the socket it accepts.  On loopback the MSS is 64 KiB, so
Nagle held every frame behind an unacknowledged one until the host's delayed
ACK (40 ms) fired: every exchange of more than one frame each way (a 4 KiB
RDMA READ is three) waited ~40 ms, while a ping (one frame) took 2 ms.
`--link qemu-listen` restores QEMU's own listen/connect link, to measure that
(`make floor` runs both).

Two guests also get a QMP socket each and a third serial port to the host,
on which a guest may ask `pause a|b MS`: this script stops that guest's
QEMU, waits MS milliseconds and continues it (the fault suite's paused
peer).  Each pause is a result line.

Each guest writes result lines to its second serial port:
    RRDMA-TEST: ok NAME
    RRDMA-TEST: not ok NAME # WHY
    RRDMA-GUEST-DONE
The kernel console (first serial port) is scanned for KUnit KTAP results and
for kernel reports (BUG:, WARNING:, Oops, KASAN, lockdep); any report fails
the run.  Results are appended to --results as `PASS|FAIL LABEL: NAME` lines.
"""

import argparse
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from guestlog import TIMESTAMP, console_results

REPO = Path(__file__).resolve().parent.parent

# Userspace RDMA tools copied into the guest with their libraries.
HOST_TOOLS = ["ip", "tc", "rdma", "ib_write_bw", "ib_read_bw", "ib_read_lat", "ib_write_lat",
              "ib_send_lat", "rping", "ibv_devices", "ibv_devinfo"]
# Only for `make profile` (--test profile) and `make profile-lat` (--tool
# perf): perf, about 25 MiB with its libraries, which every other guest
# would carry for nothing.
PROFILE_TOOLS = ["perf"]
# Tools of one test only, with their libraries: fio for the block device's
# tests (80 MiB with its libraries, which every other guest would carry
# for nothing).
TEST_TOOLS = {"profile": PROFILE_TOOLS, "blk": ["fio", "mkfs.ext4"], "blkbench": ["fio"],
              "demo": ["mkfs.ext4"], "capi": PROFILE_TOOLS,
              "scale": ["cmtime"]}
PROVIDERS = ["/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
             "/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so"]
PROVIDER_CONF = ["/etc/libibverbs.d/rxe.driver", "/etc/libibverbs.d/siw.driver"]
# Kernel modules the tests load (with their dependencies via modules.dep).
GUEST_MODULES = ["rdma_rxe", "siw", "sch_netem"]

def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] guest.py: {msg}", file=sys.stderr, flush=True)


def ldd_libs(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def copy_into(root, src, dst=None):
    dst = root / (dst or src).lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


def build_initramfs(args, work):
    root = work / "root"
    for d in ["bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "etc",
              "lib/rrdma", "tests", "run", "var"]:
        (root / d).mkdir(parents=True, exist_ok=True)
    bb = shutil.which("busybox") or "/bin/busybox"
    shutil.copy2(bb, root / "bin/busybox")
    # Host RDMA tools with their shared libraries and the verbs providers.
    libs = set()
    for tool in HOST_TOOLS:
        path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
        if not path:
            sys.exit(f"guest.py: {tool} missing on the host: run scripts/setup.sh")
        copy_into(root, path, "/usr/bin/" + tool)
        libs.update(ldd_libs(path))
    for tool in TEST_TOOLS.get(args.test, []) + args.tools:
        path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
        if not path:
            sys.exit(f"guest.py: {tool} missing on the host: run scripts/setup.sh")
        copy_into(root, path, "/usr/bin/" + tool)
        libs.update(ldd_libs(path))
    for prov in PROVIDERS:
        copy_into(root, prov)
        libs.update(ldd_libs(prov))
    for conf in PROVIDER_CONF:
        copy_into(root, conf)
    for lib in libs:
        copy_into(root, lib)
    # Kernel modules from the kernel build's modules_install tree.
    modinst = Path(args.kdir) / "modinst/lib/modules"
    shutil.copytree(modinst, root / "lib/modules", symlinks=True)
    # rrdma: modules, static binaries, tests.
    for ko in Path(args.modules).glob("*.ko"):
        shutil.copy2(ko, root / "lib/rrdma" / ko.name)
    for b in Path(args.bindir).iterdir():
        if b.is_file() and os.access(b, os.X_OK):
            shutil.copy2(b, root / "usr/bin" / b.name)
    shutil.copytree(REPO / "tests/guest", root / "tests/guest")
    init = root / "init"
    init.write_text(INIT)
    init.chmod(0o755)
    cpio = work / "initramfs.cpio"
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    with open(cpio, "wb") as f:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files.encode(),
                       stdout=f, check=True)
    return cpio


INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Debug kernels: no periodic kmemleak scan.  One takes tens of seconds of
# both vCPUs under TCG and KASAN and would stall whatever test runs then
# (operations time out); the scans at the end below find the same leaks.
[ -e /sys/kernel/debug/kmemleak ] && echo scan=off > /sys/kernel/debug/kmemleak
arg() { sed -n "s/.*rrdma\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
export RRDMA_ROLE=$(arg role) RRDMA_TEST=$(arg test) RRDMA_ARG=$(arg arg)
export RRDMA_SELF=$(arg self) RRDMA_PEER=$(arg peer)
exec 9>/dev/ttyS1
echo "RRDMA-GUEST-START role=$RRDMA_ROLE test=$RRDMA_TEST" >&9
( cd /tests/guest && sh ./$RRDMA_TEST.sh )
rc=$?
# Debug kernels: report leaks on the console, where the harness sees them.
# A scan reports an object only if it was unreferenced and unchanged since
# the previous scan and is older than kmemleak's minimum age (5 s): the
# first scan an object sees never reports it, so scan twice, 6 s apart
# (tests/guest/lib.sh kmemleak_scan).
if [ -e /sys/kernel/debug/kmemleak ]; then
	( cd /tests/guest && . ./lib.sh && kmemleak_scan )
	cat /sys/kernel/debug/kmemleak
fi
echo "RRDMA-GUEST-DONE rc=$rc" >&9
sync
reboot -f
"""


def wire():
    """The two ends of the guests' link: a connected TCP pair on 127.0.0.1,
    Nagle off on both (see the module docstring)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    a = socket.socket()
    a.connect(lst.getsockname())
    b, _ = lst.accept()
    lst.close()
    for end in (a, b):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return a, b


def qemu_listen_wire():
    """QEMU's own link (listen= on a, connect= on b): Nagle stays on at
    a's end.  Only to measure the difference (`--link qemu-listen`)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"listen=127.0.0.1:{port}", f"connect=127.0.0.1:{port}"


def netdev(net):
    """The -netdev socket option for one end: a socket or QEMU's own."""
    return net if isinstance(net, str) else f"fd={net.fileno()}"


def qemu_cmd(args, initrd, work, role, net, self_ip, peer_ip):
    kimg = Path(args.kdir) / "arch/x86/boot/bzImage"
    # watchdog_thresh=60: the debug kernel's soft-lockup detector reports a
    # CPU that ran kernel code for 2 x 60 s without scheduling, not 2 x 10
    # s.  Under TCG, KASAN and a guest sharing its host core, legitimate
    # loops run 100 times slower than on hardware: siw's transmit thread,
    # which sends every queued work request before it yields, took 23 s
    # for a few hundred of them under the attack suite's load.  A runaway
    # loop still shows, within two minutes.
    append = (f"console=ttyS0 panic=-1 watchdog_thresh=60 rrdma.role={role} rrdma.test={args.test} "
              f"rrdma.arg={args.arg or '-'} rrdma.self={self_ip} rrdma.peer={peer_ip} "
              f"{args.append}").rstrip()
    # la57=off: with 5-level paging a timer IRQ during early boot can trip
    # KASAN ("wild-memory-access" in identify_boot_cpu) before any of our
    # code runs; 4-level paging avoids that flake.
    cmd = ["qemu-system-x86_64", "-machine", "q35", "-cpu", "max,la57=off", "-smp", str(args.smp),
           "-m", str(args.memory), "-display", "none", "-no-reboot", "-nodefaults",
           "-kernel", str(kimg), "-initrd", str(initrd), "-append", append,
           "-serial", f"file:{work}/console-{role}.log",
           "-serial", f"file:{work}/results-{role}.log"]
    if net:
        cmd += ["-netdev", f"socket,id=n0,{netdev(net)}",
                "-device", f"virtio-net-pci,netdev=n0,mac=52:54:00:99:00:0{1 if role == 'a' else 2}",
                "-qmp", f"unix:{work}/qmp-{role}.sock,server=on,wait=off",
                "-chardev", f"socket,id=host,path={work}/host-{role}.sock,server=on,wait=off",
                "-serial", "chardev:host"]
    return cmd


def qmp(work, role, command):
    """Runs one QMP command on guest ROLE's QEMU."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(work / f"qmp-{role}.sock"))
        f = s.makefile("rw")
        f.readline()
        for cmd in ("qmp_capabilities", command):
            f.write(json.dumps({"execute": cmd}) + "\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    raise OSError("QMP closed")
                msg = json.loads(line)
                if "return" in msg or "error" in msg:
                    break
            if "error" in msg:
                raise OSError(f"QMP {cmd}: {msg['error']}")


def host_channel(work, role, done):
    """Serves guest ROLE's requests on its third serial port; appends a
    (status, text) result per request to DONE."""
    path = str(work / f"host-{role}.sock")
    s = socket.socket(socket.AF_UNIX)
    for _ in range(600):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    else:
        return
    buf = b""
    with s:
        while True:
            data = s.recv(4096)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                words = line.decode(errors="replace").split()
                if len(words) != 3 or words[0] != "pause" or words[1] not in ("a", "b") \
                        or not words[2].isdigit():
                    done.append(("FAIL", f"host request from {role} understood # {words}"))
                    continue
                target, ms = words[1], int(words[2])
                t0 = time.monotonic()
                try:
                    qmp(work, target, "stop")
                    time.sleep(ms / 1000)
                    qmp(work, target, "cont")
                    took = (time.monotonic() - t0) * 1000
                    log(f"{target} paused for {took:.0f} ms, as {role} asked")
                    done.append(("PASS", f"host paused {target} for {ms} ms, as {role} asked"))
                except OSError as e:
                    done.append(("FAIL", f"host paused {target} for {ms} ms # {e}"))


# How long a guest may take to reach its test (RRDMA-GUEST-START): a debug
# kernel boots in about 20 s under TCG.  A QEMU TCG guest now and then
# hangs in early boot, before any of our code (seen once in a 7.3 guest,
# at 1 s, after "e820: register RAM buffer"), or crashes (QEMU 7.2
# segfaulted at 0.5 s of a 7.3 guest's boot, enumerating PCI): then every
# guest of the run is killed and the run starts again, once, with a result
# line saying so.  A QEMU that dies after the guest reached its test fails
# the run.
# RRDMA_BOOT_LIMIT (seconds) changes the limit, to test the retry.
BOOT_LIMIT = int(os.environ.get("RRDMA_BOOT_LIMIT", "180"))


def launch(args, work, initrd, roles):
    """Starts the guests of one run; returns their processes and the host
    channels' results list."""
    ends = {}
    if args.guests == 2:
        ends = dict(zip(roles, wire() if args.link == "nodelay" else qemu_listen_wire()))
    procs = {}
    for role in roles:
        net = ends.get(role)
        self_ip, peer_ip = ("10.99.0.1", "10.99.0.2") if role == "a" else ("10.99.0.2", "10.99.0.1")
        cmd = qemu_cmd(args, initrd, work, role, net, self_ip, peer_ip)
        fds = (net.fileno(),) if isinstance(net, socket.socket) else ()
        procs[role] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, pass_fds=fds)
        if role == "a" and isinstance(net, str):
            # QEMU must listen before b connects: wait for a's first output.
            for _ in range(200):
                log = work / "console-a.log"
                if log.exists() and log.stat().st_size:
                    break
                time.sleep(0.05)
    # Each QEMU holds its own end now.
    for end in ends.values():
        if isinstance(end, socket.socket):
            end.close()
    host_results = []
    if args.guests == 2:
        for role in roles:
            threading.Thread(target=host_channel, args=(work, role, host_results),
                             daemon=True).start()
    return procs, host_results


def boot_hang(work, roles, procs, start):
    """Waits until every guest reached its test; returns the role of one
    that did not, with why: still running after BOOT_LIMIT, or its QEMU
    killed by a signal in boot (QEMU 7.2's TCG once segfaulted while the
    guest enumerated PCI, 2026-12-02); None if all did."""
    while True:
        waiting = [r for r in roles
                   if "RRDMA-GUEST-START" not in ((work / f"results-{r}.log").read_text(errors="replace")
                                                  if (work / f"results-{r}.log").exists() else "")]
        for r in waiting:
            rc = procs[r].poll()
            if rc is not None and rc < 0:
                return r, f"qemu exited {rc} in boot"
        # One that exited otherwise without starting fails on its own, later.
        waiting = [r for r in waiting if procs[r].poll() is None]
        if not waiting:
            return None
        if time.monotonic() - start > BOOT_LIMIT:
            return waiting[0], "hung in boot"
        time.sleep(1)


def run(args):
    roles = ["a", "b"] if args.guests == 2 else ["a"]
    retried = None
    for attempt in range(2):
        work = Path(tempfile.mkdtemp(prefix="rrdma-guest-", dir=args.workdir))
        initrd = build_initramfs(args, work)
        start = time.monotonic()
        procs, host_results = launch(args, work, initrd, roles)
        hung = boot_hang(work, roles, procs, start)
        if hung is None or attempt == 1:
            break
        hung, why = hung
        console = (work / f"console-{hung}.log").read_text(errors="replace").strip().splitlines()
        retried = f"guest {hung} {why} at: {TIMESTAMP.sub('', console[-1]) if console else '-'}"
        log(f"{retried}; starting the run again")
        for p in procs.values():
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    if retried:
        host_results.append(("PASS", f"guests booted, once more ({retried})"))
    timed_out = False
    for role, p in procs.items():
        left = max(1.0, args.timeout - (time.monotonic() - start))
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            p.kill()
            p.wait()
    elapsed = time.monotonic() - start
    return collect(args, work, roles, procs, timed_out, elapsed, host_results)


def collect(args, work, roles, procs, timed_out, elapsed, host_results):
    label = args.label
    results = [(status, f"{label}: {text}") for status, text in host_results]
    for role in roles:
        who = f"{label}" + (f" [{role}]" if len(roles) > 1 else "")
        console = (work / f"console-{role}.log").read_text(errors="replace") \
            if (work / f"console-{role}.log").exists() else ""
        res = (work / f"results-{role}.log").read_text(errors="replace") \
            if (work / f"results-{role}.log").exists() else ""
        qemu_out = procs[role].stdout.read().decode(errors="replace") if procs[role].stdout else ""
        done = False
        for line in res.splitlines():
            line = line.strip()
            if line.startswith("RRDMA-TEST: ok "):
                results.append(("PASS", f"{who}: {line[len('RRDMA-TEST: ok '):]}"))
            elif line.startswith("RRDMA-TEST: not ok "):
                results.append(("FAIL", f"{who}: {line[len('RRDMA-TEST: not ok '):]}"))
            elif line.startswith("RRDMA-GUEST-DONE"):
                done = True
            elif line.startswith("RRDMA-TEST: skip "):
                results.append(("SKIP", f"{who}: {line[len('RRDMA-TEST: skip '):]}"))
        results += console_results(who, console, args.allow_log)
        if done:
            results.append(("PASS", f"{who}: guest ran to completion ({elapsed:.0f} s)"))
        else:
            why = "timed out" if timed_out else f"qemu exited {procs[role].returncode}"
            results.append(("FAIL", f"{who}: guest ran to completion # {why}; {qemu_out.strip()[:200]}"))
    keep = args.logdir
    if keep:
        dest = Path(keep) / re.sub(r"[^\w.-]+", "_", label)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(work, dest, ignore=shutil.ignore_patterns("root", "*.cpio", "*.sock"))
    shutil.rmtree(work, ignore_errors=True)
    with open(args.results, "a") as f:
        for status, name in results:
            f.write(f"{status} {name}\n")
    for status, name in results:
        print(f"{status} {name}")
    return 0 if all(s != "FAIL" for s, _ in results) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kdir", required=True, help="kernel build dir (bzImage, modinst/)")
    ap.add_argument("--modules", required=True, help="dir with rrdma.ko and rrdma_kunit.ko")
    ap.add_argument("--bindir", required=True, help="dir with rrdma's static binaries")
    ap.add_argument("--test", required=True, help="tests/guest/NAME.sh to run")
    ap.add_argument("--arg", help="argument for the test (rrdma.arg=)")
    ap.add_argument("--append", default="", help="more kernel command line (rrdma.NAME=VALUE)")
    ap.add_argument("--guests", type=int, default=1, choices=[1, 2])
    ap.add_argument("--link", default="nodelay", choices=["nodelay", "qemu-listen"],
                    help="two guests' link: our TCP pair without Nagle, or QEMU's listen/connect")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--memory", type=int, default=512)
    ap.add_argument("--smp", type=int, default=2, help="vCPUs per guest")
    ap.add_argument("--allow-log", help="regex of kernel log reports that do not fail the run "
                    "(bench: perftest's own crashes, which the kernel logs)")
    ap.add_argument("--tool", dest="tools", action="append", default=[],
                    help="one more host tool for the guest (perf for `make profile-lat`)")
    ap.add_argument("--label", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--logdir", help="keep console and result logs here")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    # A missing script would boot both guests for nothing and "pass".
    if not (REPO / "tests" / "guest" / f"{args.test}.sh").is_file():
        ap.error(f"no tests/guest/{args.test}.sh (--test takes the NAME)")
    # One guest run at a time on this machine, whatever started it (make
    # check, bench, flood, a helper): TCG guests that share two cores
    # miss their timeouts.  RRDMA_GUEST_LOCK="" runs without the lock.
    lock_path = os.environ.get("RRDMA_GUEST_LOCK", "/tmp/rrdma-guest.lock")
    if lock_path:
        # Read-only, as flock(1) opens it: a lock file another user left
        # (an earlier `sudo make check`) still locks.
        lock = os.open(lock_path, os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the other guest run to end ({lock_path})")
            fcntl.flock(lock, fcntl.LOCK_EX)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
