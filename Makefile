# tfcluster: build, test, install, package. The scripts these targets call are the real commands.
#
#   make                      build the plugin (target/release/libtfcluster.so)
#   make install              install it into Slurm's plugin directory, a plugstack.conf.d
#                             snippet under $(PREFIX)/share/tfcluster (activates nothing; it
#                             turns isolate=yes on) and the man page spank-tfcluster(8)
#   make install-config       also put the snippet in $(SYSCONFDIR)/slurm/plugstack.conf.d/
#                             unless the admin already has one there (never overwritten)
#   make deb                  a Debian package for the Slurm release the plugin was built for
#   make dist                 the source tarball (target/dist/tfcluster-VERSION.tar.gz): the
#                             spec at its top and every crate vendored, for `rpmbuild -ta`
#   make rpm                  the RPM (RHEL family) from that tarball, with `rpmbuild -ta`,
#                             for the Slurm whose development files are installed
#   make test | demo | bench  README's commands
#
# Variables: PREFIX (/usr), DESTDIR, SYSCONFDIR (/etc), SLURM_PLUGIN_DIR (detected from the
# installed Slurm, only by the targets that install), PLUGIN (the .so to install; default the
# release build, which these targets bring up to date first).

PREFIX ?= /usr
SYSCONFDIR ?= /etc
DESTDIR ?=
SLURM_PLUGIN_DIR ?= $(shell packaging/slurm-plugin-dir.sh)
PLUGIN ?= target/release/libtfcluster.so

PLUGIN_PATH = $(SLURM_PLUGIN_DIR)/spank_tfcluster.so
SHARE := $(PREFIX)/share/tfcluster
MAN8 := $(PREFIX)/share/man/man8
SNIPPET := $(SYSCONFDIR)/slurm/plugstack.conf.d/tfcluster.conf

.PHONY: all build install install-config uninstall deb dist rpm test demo bench fuzz clean FORCE

all: build

build:
	cargo build --release

# The release build is always handed to cargo, which rebuilds it only if a source changed; a
# PLUGIN given on the command line is used as it is.
ifeq ($(PLUGIN),target/release/libtfcluster.so)
$(PLUGIN): FORCE
	cargo build --release
endif

install: $(PLUGIN)
	@test -n "$(SLURM_PLUGIN_DIR)" || { echo "set SLURM_PLUGIN_DIR" >&2; exit 1; }
	install -D -m 0755 $(PLUGIN) $(DESTDIR)$(PLUGIN_PATH)
	install -d $(DESTDIR)$(SHARE)
	printf '# tfcluster: link or copy into %s/slurm/plugstack.conf.d/ to enable\n# isolate=yes: a firewall per step keeps other users from its TensorFlow servers (needs libnftables; restart slurmd after enabling it)\n# optional: a missing or mismatched plugin file never fails jobs that do not use --tf-cluster (spank-tfcluster(8))\noptional %s isolate=yes\n' \
		'$(SYSCONFDIR)' '$(PLUGIN_PATH)' > $(DESTDIR)$(SHARE)/tfcluster.conf
	install -m 0644 plugstack.conf.example $(DESTDIR)$(SHARE)/plugstack.conf.example
	install -D -m 0644 packaging/spank-tfcluster.8 $(DESTDIR)$(MAN8)/spank-tfcluster.8

install-config: install
	@if [ -e $(DESTDIR)$(SNIPPET) ]; then \
		echo "keeping the existing $(DESTDIR)$(SNIPPET)"; \
	else \
		install -D -m 0644 $(DESTDIR)$(SHARE)/tfcluster.conf $(DESTDIR)$(SNIPPET); \
	fi

uninstall:
	@test -n "$(SLURM_PLUGIN_DIR)" || { echo "set SLURM_PLUGIN_DIR" >&2; exit 1; }
	rm -f $(DESTDIR)$(PLUGIN_PATH) $(DESTDIR)$(SHARE)/tfcluster.conf $(DESTDIR)$(SHARE)/plugstack.conf.example \
		$(DESTDIR)$(MAN8)/spank-tfcluster.8
	-rmdir $(DESTDIR)$(SHARE)

deb: $(PLUGIN)
	bash packaging/build-deb.sh $(PLUGIN)

DIST_DIR ?= target/dist

dist:
	@bash packaging/dist.sh $(DIST_DIR)

rpm:
	bash packaging/build-rpm.sh

test:
	bash tests/run.sh

demo:
	bash tests/demo.sh

bench:
	bash benches/run.sh

# Coverage-guided fuzzing of every parser and of whole plans, FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 120
fuzz:
	bash fuzz/run.sh $(FUZZ_SECONDS)

clean:
	cargo clean
	rm -rf fuzz/target
