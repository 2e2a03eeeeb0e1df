# SPDX-License-Identifier: GPL-2.0
#
# rrdma top-level Makefile.
#
#   make KDIR=<kernel build dir>   build rrdma.ko (and rrdma_kunit.ko) in place
#   make check                     everything: set-up, kernels, builds, host
#                                  tests, KUnit and guest tests on 7.3, and on
#                                  6.12 under KASAN, lockdep and kmemleak
#   make check-full                the same, plus the 6.12 base kernel
#   make demo                      two guests: serve, write/read, verify, bench, ext4 on rrdmab0
#   make bench                     rrdma against perftest on siw and rxe, with
#                                  a ratio table, JSON report and PNG plot
#   make blkbench                  rrdma-blk against nvme-rdma and RNBD with
#                                  fio on siw and rxe, with a ratio table and
#                                  the serving guest's CPU per I/O
#   make floor                     the two-guest setup's round trip (ICMP,
#                                  UDP, perftest) beside rrdma's READ
#   make connstress                many connections importing right after
#                                  perftest load (CONNSTRESS_N, default 200)
#   make scale                     cost as one file's regions, exports,
#                                  imports and connections grow, siw and
#                                  rxe (SCALE_MAX, SCALE_CONNS)
#   make flood                     connect floods while the exporter's
#                                  accepts fail, debug 6.12, siw and rxe
#                                  (FLOOD_ROUNDS, FLOOD_SECONDS)
#   make faults                    the fault suite: a checksummed workload
#                                  through network, host, process, device
#                                  and module faults, siw and rxe, 7.3 and
#                                  debug 6.12, with a table (FAULTS_SECONDS)
#   make fuzz                      the ioctl fuzzer, 30 min per provider on
#                                  debug 6.12 (FUZZ_SECONDS)
#   make profile                   perf profiles of the initiator's CPU in
#                                  rrdma bench (ioctl and io_uring), 7.3
#   make profile-lat               where a 4 KiB READ's CPU time goes, rrdma
#                                  beside ib_read_lat, one guest, siw and
#                                  rxe (BENCH_* as for bench)
#   make lint                      checkpatch, rustfmt, clippy
#   make install                   rrdma.ko (of `make KDIR=...`, or MODULE=)
#                                  into /lib/modules/KVER/updates, the udev
#                                  rule, the CLI and its man pages (of
#                                  `make userspace`) and the UAPI header;
#                                  DESTDIR, PREFIX and
#                                  INSTALL_MOD_PATH honoured
#   make install-lib               librrdma (shared and static), its
#                                  header rrdma.h with the UAPI header,
#                                  pkg-config file and man pages (of
#                                  `make userspace`); make install does it too
#   make uninstall                 removes what make install put
#                                  (make uninstall-lib: the library's)
#   make dkms                      the module's sources into
#                                  /usr/src/rrdma-VERSION with dkms.conf
#                                  (DESTDIR honoured), and without DESTDIR
#                                  `dkms install` for the running kernel
#
# Knobs: KERNELS (check: 7.3, kernels: 6.12 7.3), VARIANT=base|debug (debug
# kernels: KASAN, lockdep, kmemleak, debug objects), LLVM (overrides the
# kernel's clang that scripts/preflight.sh finds for KDIR), RRDMA_CACHE
# (kernel build cache, default ~/.cache/rrdma).

KDIR ?= /lib/modules/$(shell uname -r)/build
KERNELS ?=
VARIANT ?= base
export KERNELS VARIANT

.PHONY: install install-lib uninstall uninstall-lib dkms modules-dkms all modules clean check check-full demo bench blkbench floor connstress scale flood faults fuzz profile profile-lat lint userspace kernels

all: modules

# kbuild's arguments for KDIR's kernel are the preflight's (its compiler:
# LLVM=1, LLVM=-N or CC=gcc-N; RUSTC= if set), then an LLVM= given to
# this make.
modules:
	@args=$$(scripts/preflight.sh "$(KDIR)") || exit 1; \
	echo "make -C $(KDIR) M=$(CURDIR) $$args $(if $(filter command line,$(origin LLVM)),LLVM=$(LLVM)) modules"; \
	$(MAKE) -C $(KDIR) M=$(CURDIR) $$args $(if $(filter command line,$(origin LLVM)),LLVM=$(LLVM)) modules

# DKMS's build (dkms.conf): DKMS appends LLVM=1 for every clang-built
# kernel, which a host with only a versioned clang-N cannot take; the
# preflight's choice wins.
modules-dkms:
	@args=$$(scripts/preflight.sh "$(KDIR)") || exit 1; \
	echo "make -C $(KDIR) M=$(CURDIR) $$args modules"; \
	$(MAKE) -C $(KDIR) M=$(CURDIR) $$args modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean 2>/dev/null || true
	rm -rf build
	cd rust && cargo clean

userspace:
	@scripts/build-userspace.sh

# Installs what is built; builds nothing (a root `make install` runs no
# compiler).  depmod runs when installing into the running system's tree.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_MOD_PATH ?= $(DESTDIR)
UDEVDIR ?= /etc/udev/rules.d
MODULE ?= rrdma.ko
BINDIR ?= build/bin
MANDIR ?= build/man
KREL = $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)
LIBDIR ?= $(PREFIX)/lib
LIBBUILD ?= build/lib
VERSION_RRDMA = $(shell sed -n 's/^version = "\(.*\)"/\1/p' rust/Cargo.toml)
SOLIB = librrdma.so.$(VERSION_RRDMA)
INSTALLED = $(INSTALL_MOD_PATH)/lib/modules/$(KREL)/updates/rrdma.ko \
	$(DESTDIR)$(UDEVDIR)/60-rrdma.rules $(DESTDIR)$(PREFIX)/bin/rrdma
INSTALLED_LIB = $(DESTDIR)$(PREFIX)/include/linux/rrdma.h $(DESTDIR)$(PREFIX)/include/rrdma.h \
	$(DESTDIR)$(LIBDIR)/$(SOLIB) $(DESTDIR)$(LIBDIR)/librrdma.so.0 \
	$(DESTDIR)$(LIBDIR)/librrdma.so $(DESTDIR)$(LIBDIR)/librrdma.a \
	$(DESTDIR)$(LIBDIR)/pkgconfig/rrdma.pc
MAN1 = $(DESTDIR)$(PREFIX)/share/man/man1
MAN3 = $(DESTDIR)$(PREFIX)/share/man/man3

# The C library alone: what a C program builds against (no kernel tree).
install-lib:
	@test -f "$(LIBBUILD)/$(SOLIB)" || { echo "make install-lib: $(LIBBUILD)/$(SOLIB) missing: run make userspace first" >&2; exit 1; }
	@test -f "$(MANDIR)/rrdma.3" || { echo "make install-lib: $(MANDIR)/rrdma.3 missing: run make userspace first" >&2; exit 1; }
	install -D -m 0644 include/uapi/rrdma.h "$(DESTDIR)$(PREFIX)/include/linux/rrdma.h"
	install -D -m 0644 include/rrdma.h "$(DESTDIR)$(PREFIX)/include/rrdma.h"
	install -D -m 0755 "$(LIBBUILD)/$(SOLIB)" "$(DESTDIR)$(LIBDIR)/$(SOLIB)"
	ln -sf "$(SOLIB)" "$(DESTDIR)$(LIBDIR)/librrdma.so.0"
	ln -sf librrdma.so.0 "$(DESTDIR)$(LIBDIR)/librrdma.so"
	install -m 0644 "$(LIBBUILD)/librrdma.a" "$(DESTDIR)$(LIBDIR)/librrdma.a"
	install -d "$(DESTDIR)$(LIBDIR)/pkgconfig"
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@VERSION@|$(VERSION_RRDMA)|' \
		rust/capi/rrdma.pc.in >"$(DESTDIR)$(LIBDIR)/pkgconfig/rrdma.pc"
	install -d "$(MAN3)"
	install -m 0644 $(MANDIR)/*.3 "$(MAN3)/"
	@if [ -z "$(DESTDIR)" ]; then ldconfig; fi

uninstall-lib:
	rm -f $(INSTALLED_LIB) "$(MAN3)"/rrdma*.3
	-rmdir "$(DESTDIR)$(LIBDIR)/pkgconfig" 2>/dev/null
	@if [ -z "$(DESTDIR)" ]; then ldconfig; fi

install:
	@test -n "$(KREL)" || { echo "make install: no kernel release in $(KDIR)/include/config (set KDIR)" >&2; exit 1; }
	@test -f "$(MODULE)" || { echo "make install: $(MODULE) missing: run make KDIR=$(KDIR) first" >&2; exit 1; }
	@test -x "$(BINDIR)/rrdma" || { echo "make install: $(BINDIR)/rrdma missing: run make userspace first" >&2; exit 1; }
	@test -f "$(MANDIR)/rrdma.1" || { echo "make install: $(MANDIR)/rrdma.1 missing: run make userspace first" >&2; exit 1; }
	@$(MAKE) --no-print-directory install-lib
	install -D -m 0644 "$(MODULE)" "$(INSTALL_MOD_PATH)/lib/modules/$(KREL)/updates/rrdma.ko"
	install -D -m 0644 udev/60-rrdma.rules "$(DESTDIR)$(UDEVDIR)/60-rrdma.rules"
	install -D -m 0755 "$(BINDIR)/rrdma" "$(DESTDIR)$(PREFIX)/bin/rrdma"
	install -d "$(MAN1)"
	install -m 0644 $(MANDIR)/*.1 "$(MAN1)/"
	@if [ -z "$(INSTALL_MOD_PATH)" ]; then depmod -a "$(KREL)"; else \
		echo "make install: staged in $(INSTALL_MOD_PATH): run depmod -a $(KREL) where it lands"; fi

uninstall:
	@test -n "$(KREL)" || { echo "make uninstall: no kernel release in $(KDIR)/include/config (set KDIR)" >&2; exit 1; }
	rm -f $(INSTALLED) "$(MAN1)"/rrdma.1 "$(MAN1)"/rrdma-*.1
	@$(MAKE) --no-print-directory uninstall-lib
	@if [ -z "$(INSTALL_MOD_PATH)" ]; then depmod -a "$(KREL)"; fi

# The sources DKMS builds from: what Kbuild compiles, this Makefile, the
# preflight and dkms.conf with the version filled in.
DKMS_SRC = $(DESTDIR)/usr/src/rrdma-$(VERSION_RRDMA)

dkms:
	@test -n "$(VERSION_RRDMA)" || { echo "make dkms: no version in rust/Cargo.toml" >&2; exit 1; }
	rm -rf "$(DKMS_SRC)"
	mkdir -p "$(DKMS_SRC)"
	tar -c --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod*' \
		--exclude='*.d' --exclude='*.rmeta' Kbuild Makefile include rust/module \
		rust/abi/src scripts/preflight.sh | tar -x -C "$(DKMS_SRC)"
	sed 's/@VERSION@/$(VERSION_RRDMA)/' dkms.conf >"$(DKMS_SRC)/dkms.conf"
	@if [ -z "$(DESTDIR)" ]; then dkms remove "rrdma/$(VERSION_RRDMA)" --all >/dev/null 2>&1; \
		dkms install "rrdma/$(VERSION_RRDMA)"; else \
		echo "make dkms: sources staged in $(DKMS_SRC)"; fi

kernels:
	scripts/setup.sh
	for k in $(or $(KERNELS),6.12 7.3); do scripts/kernel.sh $$k $(VARIANT) || exit 1; done

check:
	@scripts/check.sh

check-full:
	@KERNELS="6.12 7.3" DEBUG_REMOTE_PROVIDERS="siw rxe" DEBUG_SMALL_PROVIDERS="siw rxe" \
		DEBUG_BLK_PROVIDERS="siw rxe" \
		DEBUG_ATTACK_PROVIDERS="siw rxe" DEBUG_CAPI_PROVIDERS="siw rxe" \
		DEBUG_FUZZ_PROVIDERS="siw rxe" scripts/check.sh

demo:
	@scripts/demo.sh

bench:
	@scripts/bench.sh

floor:
	@scripts/floor.sh

blkbench:
	@scripts/blkbench.sh

connstress:
	@scripts/connstress.sh

scale:
	@scripts/scale.sh

flood:
	@scripts/flood.sh

faults:
	@scripts/faults.sh

fuzz:
	@scripts/fuzz.sh

profile:
	@scripts/profile.sh

profile-lat:
	@BENCH_PROFILE=1 BENCH_TOPOLOGIES="$${BENCH_TOPOLOGIES:-local}" \
		BENCH_TESTS="$${BENCH_TESTS:-read_lat}" BENCH_ROUNDS="$${BENCH_ROUNDS:-2}" \
		scripts/bench.sh

lint:
	@scripts/lint.sh
