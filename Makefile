# bothy: a daemonless, rootless sandbox. `make help` lists the targets.

SHELL      := /bin/bash
GO         ?= go
TAGS       := containers_image_openpgp exclude_graphdriver_btrfs seccomp
BIN        := $(CURDIR)/bin
CACHE      ?= $(if $(filter 0,$(shell id -u)),/var/cache/bothy,$(HOME)/.cache/bothy)
TEST_USER  ?= bothy-test
DEB_SUITE  ?= bookworm
DEB_MIRROR ?= http://deb.debian.org/debian
PACKAGES   := gcc make git libseccomp-dev pkg-config uidmap busybox-static mmdebstrap crun runc \
              slirp4netns passt nftables iperf3 iproute2 hyperfine util-linux curl bzip2 e2fsprogs user-mode-linux \
              slurmctld slurmd slurm-client munge jq \
              python3-pytest python3-pyflakes python3-mypy python3-venv python3-pip python3-setuptools python3-wheel
# Debian's python3, which has python3-pytest, runs the Python client's tests
# (python/); not whatever python3 comes first on PATH.
PYTHON     ?= /usr/bin/python3
# What only `make bench` needs: Debian's podman (with conmon and the CNI
# plugins) for the rows that compare bothy with what a user would otherwise run.
BENCH_PACKAGES := podman
GOFLAGS_BUILD := -trimpath -tags "$(TAGS)"

export GOFLAGS := -buildvcs=false

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# $(call apt-install,PACKAGES): install those of PACKAGES that are missing (as root).
apt-install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "setup: installing $$missing" >&2; \
		if [ "$$(id -u)" != 0 ]; then echo "setup: run as root to install: $$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

.PHONY: setup
setup: ## Install the Debian packages the build and tests need (idempotent).
	@$(call apt-install,$(PACKAGES))
	@# Rootless networking (pasta, slirp4netns) opens /dev/net/tun as the
	@# user: most distributions ship it 0666, some 0600 (docs/operator.md).
	@if [ -c /dev/net/tun ] && [ "$$(stat -c %a /dev/net/tun)" != 666 ]; then \
		if [ "$$(id -u)" = 0 ]; then chmod 0666 /dev/net/tun; \
		else echo "setup: /dev/net/tun is not 0666: rootless networking needs it (as root: chmod 0666 /dev/net/tun)" >&2; fi; \
	fi
	@$(GO) mod download

.PHONY: build
build: setup $(BIN)/bothy $(BIN)/bothy-images $(BIN)/bothy-init $(BIN)/bothy-executor $(BIN)/bothy-plugin $(BIN)/default-image.oci.tar ## Build the binaries and the embedded default image.

GO_SOURCES := $(shell find . -name '*.go' -not -path './bin/*' 2>/dev/null) go.mod go.sum

# The CLI links neither containers/image nor libcontainer, and no C: it
# runs `bothy --help` in about 4.5 ms instead of 8.5. pull, push, save, load and build run in
# bothy-images, the same CLI built with containers/image (bothy_images tag).
$(BIN)/bothy: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $@ ./cmd/bothy

$(BIN)/bothy-images: $(GO_SOURCES)
	$(GO) build -trimpath -tags "$(TAGS) bothy_images" -o $@ ./cmd/bothy

# The launcher, container init and helpers (internal/ipc lists them):
# libcontainer clones this binary into a sealed memfd at every start, so it
# carries nothing but them. It is
# linked statically (libseccomp and libc included): with no dynamic loader
# to run, each of its two executions per start is about 0.3 ms shorter.
$(BIN)/bothy-init: $(GO_SOURCES)
	$(GO) build -trimpath -tags "$(TAGS) netgo osusergo" -ldflags "-s -w -linkmode external -extldflags -static" -o $@ ./cmd/bothy-init

$(BIN)/bothy-executor: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/bothy-executor

# The services of the plugins that link heavy libraries (go-rod, zmq4), in
# a binary of their own: the executor, which every sandbox starts, stays
# without them (about 1 ms less at each start, 9.0 MB instead of 14.0).
$(BIN)/bothy-plugin: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/bothy-plugin

# The default image: Debian (bash, coreutils, python3) from Debian's archive,
# made once with mmdebstrap and cached, packed into an OCI archive.
DPKG_EXCLUDES := --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
                 --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
                 --dpkgopt='path-exclude=/usr/share/info/*'
$(CACHE)/default-rootfs.tar:
	@mkdir -p $(CACHE)
	mmdebstrap --quiet --format=tar --variant=minbase --include=bash,coreutils,python3,procps,ca-certificates,less \
		$(DPKG_EXCLUDES) $(DEB_SUITE) $(CACHE)/.default-rootfs.partial.tar $(DEB_MIRROR)
	mv $(CACHE)/.default-rootfs.partial.tar $@

$(BIN)/default-image.oci.tar: $(CACHE)/default-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -name bothy-default:latest -cmd /bin/bash -o $@

# The browser plugin's test image: the default image's packages plus what
# the browser recipe installs (Debian's chromium and a font), made once and
# cached like the default rootfs.
BROWSER_PACKAGES := chromium,fonts-liberation
$(CACHE)/browser-rootfs.tar:
	@mkdir -p $(CACHE)
	mmdebstrap --quiet --format=tar --variant=minbase --include=bash,coreutils,python3,procps,ca-certificates,less,$(BROWSER_PACKAGES) \
		$(DPKG_EXCLUDES) $(DEB_SUITE) $(CACHE)/.browser-rootfs.partial.tar $(DEB_MIRROR)
	mv $(CACHE)/.browser-rootfs.partial.tar $@

$(BIN)/browser-image.oci.tar: $(CACHE)/browser-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -name bothy-browser:latest -cmd /bin/bash -o $@

# The Jupyter plugin's test image: the default image's packages plus
# Debian's IPython kernel and matplotlib (a figure comes back as a PNG).
# 1.2 GB unpacked, by their dependencies alone (mmdebstrap installs no
# recommends): debugpy (ipykernel) brings gdb through pydevd, scipy
# brings pythran with g++ and boost.
JUPYTER_PACKAGES := bash,coreutils,python3,procps,ca-certificates,python3-ipykernel,python3-matplotlib
$(CACHE)/jupyter-rootfs.tar:
	@mkdir -p $(CACHE)
	mmdebstrap --quiet --format=tar --variant=minbase --include=$(JUPYTER_PACKAGES) \
		$(DPKG_EXCLUDES) $(DEB_SUITE) $(CACHE)/.jupyter-rootfs.partial.tar $(DEB_MIRROR)
	mv $(CACHE)/.jupyter-rootfs.partial.tar $@

$(BIN)/jupyter-image.oci.tar: $(CACHE)/jupyter-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -name bothy-jupyter:latest -cmd /bin/bash -o $@

# The VS Code plugin's test image: the default image with the vscode recipe
# (Debian's nodejs, npm and git; code-server from the npm registry),
# installed by bothy build itself, which carries the host's CA certificates
# into the build (a host behind a TLS-intercepting proxy needs them), on the
# host's network (the bridge needs forwarding on the uplink). Made once and
# cached (about 30 minutes on a loaded 2-core machine: apt's 550 packages,
# then code-server's native modules compiled by node-gyp). The recipe
# before plugins/vscode/relocate.sh made vscode-image.oci.tar, whose VS
# Code lacked its modules (the workbench page never answered): where that
# image is cached, this one is made from it by relocate.sh alone (40 s),
# which is what the recipe's last step does.
VSCODE_IMAGE = $(CACHE)/vscode-image-2.oci.tar
$(VSCODE_IMAGE): | $(BIN)/bothy $(BIN)/bothy-images $(BIN)/bothy-executor $(BIN)/bothy-plugin $(BIN)/bothy-init $(BIN)/default-image.oci.tar
	@mkdir -p $(CACHE)
	rm -rf $(CACHE)/.vscode-build
	if [ -f $(CACHE)/vscode-image.oci.tar ]; then \
		$(BIN)/bothy --root $(CACHE)/.vscode-build build --base oci-archive:$(CACHE)/vscode-image.oci.tar \
			--setup plugins/vscode/relocate.sh --build-network host --format json > $(CACHE)/.vscode-build.json; \
	else \
		$(BIN)/bothy --root $(CACHE)/.vscode-build build --plugins vscode --build-network host --format json > $(CACHE)/.vscode-build.json; \
	fi
	$(BIN)/bothy --root $(CACHE)/.vscode-build save --quiet \
		"$$(python3 -c 'import json, sys; print(json.load(sys.stdin)["names"][0])' < $(CACHE)/.vscode-build.json)" $(CACHE)/.vscode-image.partial.tar
	rm -rf $(CACHE)/.vscode-build $(CACHE)/.vscode-build.json
	mv $(CACHE)/.vscode-image.partial.tar $@

# The VS Code plugin's test image in make test (vscode-lite): Debian's
# nodejs alone (not Debian's npm, nor a compiler), then code-server from
# the npm registry without its install scripts, so without VS Code's
# server modules, which the full image above compiles
# (scripts/vscode-lite-hook.sh says what and why). code-server starts and
# serves its login; its workbench page needs the full image. About a
# minute to make from scratch; cached like the other rootfs tarballs, with
# no prerequisite (a fresh clone's files are newer than the cache): a
# change to the hook renames the tarball (vscode-lite-rootfs-2.tar…).
VSCODE_LITE_PACKAGES := bash,coreutils,procps,ca-certificates,nodejs
$(CACHE)/vscode-lite-rootfs.tar:
	@mkdir -p $(CACHE)
	mmdebstrap --quiet --format=tar --variant=minbase --include=$(VSCODE_LITE_PACKAGES) \
		$(DPKG_EXCLUDES) --customize-hook='$(CURDIR)/scripts/vscode-lite-hook.sh "$$1"' \
		$(DEB_SUITE) $(CACHE)/.vscode-lite-rootfs.partial.tar $(DEB_MIRROR)
	mv $(CACHE)/.vscode-lite-rootfs.partial.tar $@

$(BIN)/vscode-lite-image.oci.tar: $(CACHE)/vscode-lite-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -name bothy-vscode-lite:latest -cmd /bin/bash -o $@

# The images the tests use besides the default one.
.PHONY: test-images
test-images: $(BIN)/browser-image.oci.tar $(BIN)/jupyter-image.oci.tar $(BIN)/vscode-lite-image.oci.tar

.PHONY: vscode-image
vscode-image: $(VSCODE_IMAGE)

# VS Code's full test (sandbox TestVSCode, build tag vscode: the workbench)
# is not in make test: its image takes 15-30 minutes to build, beyond CI's
# budget (make test runs TestVSCodeLite on the vscode-lite image). By hand:
.PHONY: test-vscode
test-vscode: build $(VSCODE_IMAGE) test-user ## Build the vscode test image (cached) and run TestVSCode as root and as $(TEST_USER).
	@d=$(BIN)/tests-vscode; rm -rf $$d && mkdir -p $$d; \
	$(GO) test -c -trimpath -tags "$(TAGS) vscode" -o $$d/sandbox.test ./sandbox && chmod -R a+rX $(BIN) && \
	TEST_RUN=TestVSCode ./scripts/run-tests.sh $$d "" $(TEST_ENV) && \
	if [ "$$(id -u)" = 0 ]; then TEST_RUN=TestVSCode ./scripts/run-tests.sh $$d $(TEST_USER) $(TEST_ENV); fi

$(BIN)/busybox.oci.tar: internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs busybox -name busybox:latest -o $@

# The throughput benchmark's image: Debian with iperf3 (make bench only).
$(CACHE)/iperf-rootfs.tar:
	@mkdir -p $(CACHE)
	mmdebstrap --quiet --format=tar --variant=minbase --include=iperf3 \
		$(DPKG_EXCLUDES) $(DEB_SUITE) $(CACHE)/.iperf-rootfs.partial.tar $(DEB_MIRROR)
	mv $(CACHE)/.iperf-rootfs.partial.tar $@

$(BIN)/iperf-image.oci.tar: $(CACHE)/iperf-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -name iperf:latest -cmd iperf3 -o $@

# A ≥ 500 MB image for the preparation benchmark: the default rootfs plus
# incompressible data.
$(BIN)/big-image.oci.tar: $(CACHE)/default-rootfs.tar internal/testimage/testimage.go
	@mkdir -p $(BIN)
	$(GO) run ./internal/tools/mkimage -rootfs $< -pad-mb 400 -name big:latest -o $@

.PHONY: demo
demo: build ## Run a real sandbox on the embedded default image and show a few commands.
	@./scripts/demo.sh

# Tests run twice: as root, and as an unprivileged user (created if missing) with
# the same compiled test binaries, so nothing that needs privilege is skipped.
TEST_PKGS = $$($(GO) list ./... | grep -v /internal/tools/)
TEST_ENV   = PYTHON=$(PYTHON) BOTHY_EXECUTOR=$(BIN)/bothy-executor BOTHY_INIT=$(BIN)/bothy-init BOTHY_DEFAULT_IMAGE=$(BIN)/default-image.oci.tar BOTHY_BIN=$(BIN)/bothy BOTHY_IMAGES=$(BIN)/bothy-images \
             BOTHY_BROWSER_IMAGE=$(BIN)/browser-image.oci.tar \
             BOTHY_JUPYTER_IMAGE=$(BIN)/jupyter-image.oci.tar \
             BOTHY_VSCODE_IMAGE=$(VSCODE_IMAGE) \
             BOTHY_VSCODE_LITE_IMAGE=$(BIN)/vscode-lite-image.oci.tar

.PHONY: test
test: build test-bins test-user ## Set up, build, and pass every test as root and as an unprivileged user (as root, both at once).
	@./scripts/test-halves.sh "$(BIN)/tests" $(if $(filter 0,$(shell id -u)),$(TEST_USER),"") $(TEST_ENV)

# $(call test-name,PKG): a test binary's name, its package directory with
# _ for / ("module" for the module's root, whose test checks every package).
test-name = $$(echo $(1) | sed 's|^github.com/bothy-sandbox/bothy||; s|^/||; s|/|_|g; s|^$$|module|')

.PHONY: test-bins
test-bins: build test-images
	@rm -rf $(BIN)/tests && mkdir -p $(BIN)/tests
	@for p in $(TEST_PKGS); do \
		$(GO) test -c $(GOFLAGS_BUILD) -o $(BIN)/tests/$(call test-name,$$p).test $$p || exit 1; \
	done
	@install -m 755 python/tests/run-pytest.sh $(BIN)/tests/python.test
	@chmod -R a+rX $(BIN)

# The unprivileged user the tests' second half and the rootless benchmarks
# run as, set up in this one place: created if missing, with a subordinate id
# range and a delegated cgroup subtree, and the kernel's per-user key quota
# raised (every sandbox's init makes a session keyring, freed some minutes
# after it ends: the default 200 keys run out in the kill tests; see
# docs/operator.md). Without root, the caller is that user.
.PHONY: test-user
test-user: ## As root: create $(TEST_USER) with a subordinate id range and a delegated cgroup subtree (idempotent).
	@if [ "$$(id -u)" = 0 ]; then \
		id -u $(TEST_USER) >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $(TEST_USER); \
		grep -q "^$(TEST_USER):" /etc/subuid 2>/dev/null || usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $(TEST_USER); \
		./scripts/delegate-cgroups.sh $(TEST_USER) >/dev/null; \
		for k in maxkeys:20000 maxbytes:2000000; do \
			f=/proc/sys/kernel/keys/$${k%%:*}; [ "$$(cat $$f)" -ge "$${k#*:}" ] || echo "$${k#*:}" > $$f; \
		done; \
	fi

.PHONY: test-root
test-root: test-bins ## Run every test as the calling user (root in CI).
	@./scripts/run-tests.sh "$(BIN)/tests" "" $(TEST_ENV)

.PHONY: test-rootless
test-rootless: test-bins test-user ## Run every test as an unprivileged user ($(TEST_USER) when run as root, see test-user).
	@./scripts/run-tests.sh "$(BIN)/tests" $(if $(filter 0,$(shell id -u)),$(TEST_USER),"") $(TEST_ENV)

# One package, both ways, while working on it: make test-pkg PKG=./sandbox RUN=TestEscape
.PHONY: test-pkg
test-pkg: build test-images test-user ## Test one package (PKG=./dir, optional RUN=regexp) as root and as $(TEST_USER).
	@test -n "$(PKG)" || { echo "usage: make test-pkg PKG=./sandbox [RUN=TestName]" >&2; exit 2; }
	@d=$(BIN)/tests-pkg/$$(echo $(PKG) | tr -c 'a-zA-Z0-9\n' _); rm -rf $$d && mkdir -p $$d; \
	n=$(call test-name,$$($(GO) list $(PKG))); \
	$(GO) test -c $(GOFLAGS_BUILD) -o $$d/$$n.test $(PKG) && chmod -R a+rX $(BIN) && \
	TEST_RUN='$(RUN)' ./scripts/run-tests.sh $$d "" $(TEST_ENV) && \
	if [ "$$(id -u)" = 0 ]; then \
		TEST_RUN='$(RUN)' ./scripts/run-tests.sh $$d $(TEST_USER) $(TEST_ENV); \
	fi

# The Python client's pytest suite (python/tests) alone, both ways, as make
# test runs it (bin/tests/python.test): make test-python [RUN=pytest -k expression]
.PHONY: test-python
test-python: build test-images ## Test the Python client (python/) as root and as $(TEST_USER); optional RUN=pytest -k expression.
	@d=$(BIN)/tests-python; rm -rf $$d && mkdir -p $$d && install -m 755 python/tests/run-pytest.sh $$d/python.test && \
	chmod -R a+rX $(BIN) && \
	TEST_RUN='$(RUN)' ./scripts/run-tests.sh $$d "" $(TEST_ENV) && \
	if [ "$$(id -u)" = 0 ]; then \
		id -u $(TEST_USER) >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $(TEST_USER); \
		grep -q "^$(TEST_USER):" /etc/subuid 2>/dev/null || usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $(TEST_USER); \
		./scripts/delegate-cgroups.sh $(TEST_USER) >/dev/null; \
		TEST_RUN='$(RUN)' ./scripts/run-tests.sh $$d $(TEST_USER) $(TEST_ENV); \
	fi

.PHONY: delegate-cgroups
delegate-cgroups: ## As root: give CGROUP_USER (default $(TEST_USER)) the cgroup subtree rootless limits need (idempotent).
	@./scripts/delegate-cgroups.sh $${CGROUP_USER:-$(TEST_USER)}

.PHONY: fuzz
fuzz: ## Run each fuzzer for FUZZTIME (default 20s).
	@./scripts/fuzz.sh $${FUZZTIME:-20s}

.PHONY: bench
# Rootless podman needs the user's subordinate id range, as test-user gives it.
# BASELINE=REV (a git revision) also measures that revision's CLI, run by run in turn with this one.
bench: build test-user test-images $(BIN)/busybox.oci.tar $(BIN)/big-image.oci.tar $(BIN)/iperf-image.oci.tar ## Print the benchmark table (bothy vs crun, runc and podman, root and rootless); BASELINE=REV adds that revision's bothy; BENCH_ONLY=pool takes only the warm-pool rows, BENCH_ONLY=tput only the TCP throughput rows, BENCH_ONLY=plugins only the plugins' (vscode's when make vscode-image has made its image), BENCH_ONLY=client only the Go and Python clients' round trips, BENCH_ONLY=cli only the CLI's start-to-ready (none, bridge, host) and run-to-exit rows (with BASELINE, the baseline's beside them).
	@( $(call apt-install,$(BENCH_PACKAGES)) ) || echo "bench: without $(BENCH_PACKAGES), the table says so" >&2
	@$(GO) build -tags "$(TAGS)" -o $(BIN)/bench ./internal/tools/bench && chmod a+rx $(BIN)/bench
	@if [ -n "$(BASELINE)" ]; then \
		rm -rf $(BIN)/baseline && mkdir -p $(BIN)/baseline && \
		git archive $(BASELINE) | tar -x -C $(BIN)/baseline && \
		cd $(BIN)/baseline && $(MAKE) --no-print-directory "$$PWD/bin/bothy" "$$PWD/bin/bothy-images" \
			"$$PWD/bin/bothy-init" "$$PWD/bin/bothy-executor" $$([ -d cmd/bothy-plugin ] && echo "$$PWD/bin/bothy-plugin") >/dev/null && \
			chmod -R a+rX $(BIN)/baseline; \
	fi
	@$(BIN)/bench -bin $(BIN) $(if $(BENCH_ONLY),-only $(BENCH_ONLY)) -vscode-image $(VSCODE_IMAGE) $(if $(BASELINE),-baseline $(BIN)/baseline/bin) $(if $(filter 0,$(shell id -u)),-user $(TEST_USER))

# A single-node Slurm cluster on this machine (as root), for trying bothy
# under Slurm by hand: internal/slurmtest starts one of its own.
SLURM_DIR ?= /var/tmp/bothy-slurm
.PHONY: slurm-cluster
slurm-cluster: build ## As root: start a single-node Slurm (munged, slurmctld, slurmd) under SLURM_DIR on loopback (idempotent); prints SLURM_CONF.
	@BOTHY=$(BIN)/bothy ./scripts/slurm-cluster.sh start $(SLURM_DIR)

.PHONY: slurm-cluster-stop
slurm-cluster-stop: ## Stop what slurm-cluster started, by pid.
	@./scripts/slurm-cluster.sh stop $(SLURM_DIR)

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## gofmt check and go vet; the Python client compiled, pyflakes-clean and mypy --strict for Python 3.9.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet -tags "$(TAGS)" ./...
	$(GO) vet -tags "$(TAGS) bothy_images" ./cmd/bothy
	@$(PYTHON) -c 'import pyflakes, mypy' 2>/dev/null || { echo "lint: $(PYTHON) lacks pyflakes or mypy: make setup (python3-pyflakes, python3-mypy)" >&2; exit 1; }
	$(PYTHON) -c 'import sys; [compile(open(f).read(), f, "exec") for f in sys.argv[1:]]' $$(git ls-files 'python/*.py')
	$(PYTHON) -m pyflakes $$(git ls-files 'python/*.py')
	$(PYTHON) -m mypy --strict --python-version 3.9 --cache-dir $(BIN)/.mypy-cache python/bothy

.PHONY: clean
clean: ## Remove build outputs (not the cache).
	rm -rf $(BIN)
