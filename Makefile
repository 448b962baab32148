# proxybench: `make run` runs the default scenario end to end, `make test` passes the whole suite
# (what CI runs), `make test-fast` the unit and codec tests for the edit loop.
# Both install what is missing first (nginx, wrk and a C toolchain from Debian's packages, Rust
# via rustup).

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get
BIN := target/release/proxybench
CARGO ?= cargo

.PHONY: run test test-fast bench bench-deps soak fuzz fuzz-build fuzz-smoke deps test-deps build dist lint clean image image-musl k8s-build k8s-up k8s-down test-k8s

## deps: install nginx, wrk, a C toolchain (ring builds C) and Rust when absent
deps:
	@need=""; \
	 [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need="$$need nginx"; \
	 command -v wrk >/dev/null 2>&1 || need="$$need wrk"; \
	 command -v cc >/dev/null 2>&1 || need="$$need gcc libc6-dev"; \
	 command -v $(CARGO) >/dev/null 2>&1 || command -v curl >/dev/null 2>&1 || need="$$need curl ca-certificates"; \
	 if [ -n "$$need" ]; then \
	   echo "installing from Debian packages:$$need"; \
	   $(APT) install -y -qq $$need >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq $$need; }; \
	 fi
	@command -v $(CARGO) >/dev/null 2>&1 || { \
	   echo "installing Rust (rustup, stable)"; \
	   curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --component clippy,rustfmt; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy

## test-deps: what the tests use besides nginx: haproxy and caddy (the other proxies under test),
## openssl and curl (the TLS trust tests compare with them), prometheus (it scrapes
## --metrics-listen in the metrics tests), python3, pgrep and setsid (bench/soak.sh), xmllint
## (libxml2-utils: JUnit files validated against their schema) and chromium (report.html opened
## in a real headless browser)
test-deps: deps
	@need=""; \
	 [ -x /usr/sbin/haproxy ] || command -v haproxy >/dev/null 2>&1 || need="$$need haproxy"; \
	 command -v caddy >/dev/null 2>&1 || need="$$need caddy"; \
	 command -v openssl >/dev/null 2>&1 || need="$$need openssl"; \
	 command -v curl >/dev/null 2>&1 || need="$$need curl ca-certificates"; \
	 command -v python3 >/dev/null 2>&1 || need="$$need python3"; \
	 command -v pgrep >/dev/null 2>&1 || need="$$need procps"; \
	 command -v setsid >/dev/null 2>&1 || need="$$need util-linux"; \
	 command -v xmllint >/dev/null 2>&1 || need="$$need libxml2-utils"; \
	 [ -x /usr/bin/chromium ] || need="$$need chromium"; \
	 if [ -n "$$need" ]; then \
	   echo "installing from Debian packages:$$need"; \
	   $(APT) install -y -qq $$need >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq $$need; }; \
	 fi
# Prometheus alone, without its recommended node exporter (a second daemon nothing here uses).
	@command -v prometheus >/dev/null 2>&1 || { \
	   echo "installing from Debian packages: prometheus"; \
	   $(APT) install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq --no-install-recommends prometheus; }; }

## build: the release binary
build: deps
	$(CARGO) build --release --locked

## dist: the binary to copy elsewhere, in target/dist/: proxybench without its debug info (its
## symbol table kept, so perf still names every function) and proxybench.debug, the line tables
## split out, which gdb and perf find through the binary's debuglink when it lies beside it
dist: build
	@mkdir -p target/dist
	objcopy --only-keep-debug $(BIN) target/dist/proxybench.debug
	objcopy --strip-debug --add-gnu-debuglink=target/dist/proxybench.debug $(BIN) target/dist/proxybench
	@ls -l $(BIN) target/dist/proxybench target/dist/proxybench.debug

## run: the default scenario, end to end; results land in results/
run: build
	$(BIN) run

## lint: formatting and clippy, warnings are errors
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release --locked -- -D warnings

## test: the whole suite (lint, unit tests, end-to-end tests against real nginx, a 60 s soak),
## a few seconds of coverage-guided fuzzing per parser (fuzz-smoke), then the Kubernetes tests on a
## real local cluster (test-k8s)
test: lint test-deps
	$(CARGO) test --workspace --release --locked --no-fail-fast
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory test-k8s

## test-fast: the edit loop's tier: every crate's unit tests (--lib) plus the test binaries that
## need no nginx and no timing: the response codec over real loopback sockets (load: responses),
## the scenario parser's errors and fuzz regressions (scenario: scenario_errors, fuzz_regressions) and
## the results directory with its charts (report: results). No end-to-end scenario, no soak, no
## fuzz smoke, no lint. With a warm build it takes about 10 s; after an edit, rebuilding the
## changed crate and its dependents dominates. `make test` stays the whole suite.
FAST_TESTS := --lib --test responses --test scenario_errors --test fuzz_regressions --test results
test-fast: deps
	$(CARGO) test --workspace --release --locked $(FAST_TESTS)

## bench-deps: what the benchmarks compare with besides wrk: h2load (bench/vs-h2load.sh,
## bench/backend-h2.sh)
bench-deps: test-deps
	@command -v h2load >/dev/null 2>&1 || { \
	   echo "installing from Debian packages: nghttp2-client"; \
	   $(APT) install -y -qq nghttp2-client >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq nghttp2-client; }; }

## bench: side-by-side performance scripts (proxybench vs wrk and h2load, backend vs nginx); not the soak
bench: build bench-deps
	@for s in bench/*.sh; do [ "$$s" = bench/soak.sh ] && continue; echo "== $$s"; bash "$$s" || exit 1; done

## soak: 30 minutes of open-loop load through nginx reloaded every minute (SOAK_SECONDS,
## SOAK_RATE, RELOAD_EVERY change it); prints RSS and fds of the load and the backend
soak: build test-deps
	bash bench/soak.sh

## fuzz-build: the coverage-guided engine, libFuzzer (built from the libfuzzer-sys crate's
## source, so a C++ compiler: g++ is installed when absent) linked with the targets into
## proxybench-fuzz-libfuzzer. Stable rustc instruments it with LLVM's SanitizerCoverage
## (-C passes=sancov-module, -C llvm-args): edge counters, the PC table and comparison tracing,
## plus debug assertions and overflow checks. Built for the host target by name, so build
## scripts and proc macros stay uninstrumented and the instrumented artifacts live apart from
## the release build's, in target/<host>/release/.
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks
FUZZ_DIR = $(abspath $(or $(CARGO_TARGET_DIR),target))
FUZZ_HOST = $$(rustc -vV | sed -n 's/^host: //p')
FUZZ_ENGINE = $(FUZZ_DIR)/$(FUZZ_HOST)/release/proxybench-fuzz-libfuzzer
fuzz-build: deps
	@command -v c++ >/dev/null 2>&1 || { \
	   echo "installing from Debian packages: g++"; \
	   $(APT) install -y -qq g++ >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq g++; }; }
	RUSTFLAGS="$(FUZZ_RUSTFLAGS)" $(CARGO) build --release --locked -p proxybench-fuzz \
	  --features libfuzzer --bin proxybench-fuzz-libfuzzer --target $(FUZZ_HOST)

## fuzz: every parser fuzzed from its corpus for FUZZ_SECONDS each (default 60); what the engine
## finds stays in target/fuzz/corpus/ for the next run, crashes go to crates/fuzz/crashes/
FUZZ_SECONDS ?= 60
fuzz: fuzz-build
	$(CARGO) run --release --locked -p proxybench-fuzz --bin proxybench-fuzz -- all \
	  --seconds $(FUZZ_SECONDS) --engine $(FUZZ_ENGINE) --work $(FUZZ_DIR)/fuzz

## fuzz-smoke: make test's part: FUZZ_SMOKE_SECONDS (default 3) per parser from the checked-in
## corpus alone, and the planted-bug target (a panic, a broken invariant behind six comparisons,
## a hang, memory growth), as the ignored tests of crates/fuzz/tests/engine.rs
fuzz-smoke: fuzz-build
	PROXYBENCH_FUZZ_ENGINE=$(FUZZ_ENGINE) $(CARGO) test --workspace --release --locked \
	  --test engine -- --ignored engine_

## image: OCI image tarballs without Docker (proxybench; nginx, haproxy and caddy with busybox; pause)
## in target/image/.
## The binary is built for the whole workspace, so its dependencies' features are the ones
## `cargo test --workspace` unifies (rustix's fs, fastrand's default): after make test's first
## half it is already up to date, where `cargo build` of the cli alone rebuilt every crate (3 min).
image: deps
	@need=""; \
	 [ -x /usr/sbin/haproxy ] || need="$$need haproxy"; \
	 [ -x /usr/bin/caddy ] || need="$$need caddy"; \
	 if [ -n "$$need" ]; then \
	   echo "installing from Debian packages (their binaries go into the images):$$need"; \
	   $(APT) install -y -qq $$need >/dev/null 2>&1 || { $(APT) update -qq && $(APT) install -y -qq $$need; }; \
	 fi
	$(CARGO) build --release --locked --workspace
	bash k8s/image.sh

## image-musl: the proxybench image from a static musl build instead (a second full release build;
## needs the rustup target and musl-tools, installed when absent). The default image is the glibc
## binary with its libraries: the same binary, and the same allocator, as local runs.
MUSL := x86_64-unknown-linux-musl
image-musl: deps
	@rustup target list --installed | grep -qx $(MUSL) || rustup target add $(MUSL)
	@command -v musl-gcc >/dev/null 2>&1 || $(APT) install -y -qq musl-tools
	$(CARGO) build --release --locked -p proxybench --target $(MUSL)
	PROXYBENCH_IMAGE_BIN=$${CARGO_TARGET_DIR:-target}/$(MUSL)/release/proxybench bash k8s/image.sh proxybench

## k8s-build: the local test cluster's parts: Debian packages (etcd, containerd, runc, CNI plugins,
## iptables, nftables) and Kubernetes $(K8S_VERSION) (kube-proxy included) and metrics-server built
## from their Go modules once (about 6 min cold on 2 cores), cached under ~/.cache/proxybench/k8s/
K8S_VERSION ?= v1.34.4
export K8S_VERSION
k8s-build:
	bash k8s/build.sh

## k8s-up: a real two-node cluster on a host-only network (docs/test-cluster.md); the last line it
## prints is `export KUBECONFIG=...`. k8s-down removes it and everything it made, and returns
## once every process it started has exited.
k8s-up: k8s-build image
	@bash k8s/cluster.sh up

k8s-down:
	@bash k8s/cluster.sh down

## test-k8s: the Kubernetes tests (ignored tests named k8s_*) against a local cluster it starts
## and always tears down, even when the tests fail; k8s/smoke.sh first, and k8s/check-clean.sh
## after the teardown against a baseline taken before `up`. The exit status is the tests' (or 1
## when the smoke test or the clean check fails). When a cluster is already running
## (make k8s-up) it loads the fresh images into it, uses it and leaves it up.
K8S_TESTS := --ignored k8s_ --test-threads=1
test-k8s: deps k8s-build image
	@D=$${PROXYBENCH_K8S_DIR:-$$HOME/.cache/proxybench/k8s-run}; \
	 B=$$(mktemp "$${TMPDIR:-/tmp}/proxybench-k8s-baseline.XXXXXX"); \
	 trap 'exit 130' INT TERM; \
	 if bash k8s/cluster.sh status >/dev/null 2>&1; then \
	   echo "test-k8s: using the cluster already running in $$D (left running)"; \
	   rm -f "$$B"; \
	   bash k8s/load-images.sh >/dev/null || exit 1; \
	 else \
	   [ ! -d "$$D" ] || bash k8s/cluster.sh down || exit 1; \
	   bash k8s/check-clean.sh save "$$B" >/dev/null; \
	   trap 'rc=$$?; bash k8s/cluster.sh down && bash k8s/check-clean.sh "$$B" || rc=1; rm -f "$$B"; exit $$rc' EXIT; \
	   bash k8s/cluster.sh up || exit 1; \
	 fi; \
	 bash k8s/smoke.sh || exit 1; \
	 export PROXYBENCH_TEST_KUBECONFIG=$$D/admin.kubeconfig; \
	 export PROXYBENCH_TEST_KUBECTL=$${K8S_CACHE:-$$HOME/.cache/proxybench/k8s}/$(K8S_VERSION)/kubectl; \
	 export PROXYBENCH_TEST_IMAGE=$$(awk '$$1 == "proxybench" { print $$2 }' $${PROXYBENCH_IMAGE_DIR:-target/image}/names); \
	 export PROXYBENCH_TEST_NGINX_IMAGE=$$(awk '$$1 == "nginx" { print $$2 }' $${PROXYBENCH_IMAGE_DIR:-target/image}/names); \
	 export PROXYBENCH_TEST_HAPROXY_IMAGE=$$(awk '$$1 == "haproxy" { print $$2 }' $${PROXYBENCH_IMAGE_DIR:-target/image}/names); \
	 export PROXYBENCH_TEST_CADDY_IMAGE=$$(awk '$$1 == "caddy" { print $$2 }' $${PROXYBENCH_IMAGE_DIR:-target/image}/names); \
	 echo "test-k8s: KUBECONFIG=$$PROXYBENCH_TEST_KUBECONFIG images $$PROXYBENCH_TEST_IMAGE $$PROXYBENCH_TEST_NGINX_IMAGE"; \
	 $(CARGO) test --workspace --release --locked --no-fail-fast -- $(K8S_TESTS)

clean:
	$(CARGO) clean
	rm -rf results
