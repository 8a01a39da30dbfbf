# tfcluster: build, test, install, package. The scripts these targets call are the real commands.
#
#   make                      build the plugin (target/release/libtfcluster.so)
#   make install              install it into Slurm's plugin directory and a plugstack.conf.d
#                             snippet under $(PREFIX)/share/tfcluster (activates nothing)
#   make install-config       also put the snippet in $(SYSCONFDIR)/slurm/plugstack.conf.d/
#                             unless the admin already has one there (never overwritten)
#   make deb                  a Debian package for the Slurm release the plugin was built for
#   make test | demo | bench  README's commands
#
# Variables: PREFIX (/usr), DESTDIR, SYSCONFDIR (/etc), SLURM_PLUGIN_DIR (detected from the
# installed Slurm), PLUGIN (the .so to install; default the release build).

PREFIX ?= /usr
SYSCONFDIR ?= /etc
DESTDIR ?=
SLURM_PLUGIN_DIR ?= $(shell packaging/slurm-plugin-dir.sh)
PLUGIN ?= target/release/libtfcluster.so

PLUGIN_PATH := $(SLURM_PLUGIN_DIR)/spank_tfcluster.so
SHARE := $(PREFIX)/share/tfcluster
SNIPPET := $(SYSCONFDIR)/slurm/plugstack.conf.d/tfcluster.conf

.PHONY: all build install install-config uninstall deb test demo bench clean

all: build

build:
	cargo build --release

$(PLUGIN):
	cargo build --release

install: $(PLUGIN)
	@test -n "$(SLURM_PLUGIN_DIR)" || { echo "set SLURM_PLUGIN_DIR" >&2; exit 1; }
	install -D -m 0755 $(PLUGIN) $(DESTDIR)$(PLUGIN_PATH)
	install -d $(DESTDIR)$(SHARE)
	printf '# tfcluster: link or copy into %s/slurm/plugstack.conf.d/ to enable\nrequired %s\n' \
		'$(SYSCONFDIR)' '$(PLUGIN_PATH)' > $(DESTDIR)$(SHARE)/tfcluster.conf
	install -m 0644 plugstack.conf.example $(DESTDIR)$(SHARE)/plugstack.conf.example

install-config: install
	@if [ -e $(DESTDIR)$(SNIPPET) ]; then \
		echo "keeping the existing $(DESTDIR)$(SNIPPET)"; \
	else \
		install -D -m 0644 $(DESTDIR)$(SHARE)/tfcluster.conf $(DESTDIR)$(SNIPPET); \
	fi

uninstall:
	rm -f $(DESTDIR)$(PLUGIN_PATH) $(DESTDIR)$(SHARE)/tfcluster.conf $(DESTDIR)$(SHARE)/plugstack.conf.example
	-rmdir $(DESTDIR)$(SHARE)

deb: $(PLUGIN)
	bash packaging/build-deb.sh $(PLUGIN)

test:
	bash tests/run.sh

demo:
	bash tests/demo.sh

bench:
	bash benches/run.sh

clean:
	cargo clean
