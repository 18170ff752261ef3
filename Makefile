# gpupool: `make run` and `make test` are the only commands a new machine needs.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
SHARED ?= ../shared
# The public traces, where the binary looks for them: $GPUPOOL_TRACES, then ../shared/traces, then the cache that
# scripts/fetch-traces.sh fills (make traces).
TRACES_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpupool/traces
TRACES := $(or $(GPUPOOL_TRACES),$(wildcard $(SHARED)/traces),$(TRACES_CACHE))
TRACE_DIR := $(TRACES)/alibaba-gpu-2023
DEV_DATA ?= gpupool-dev
DEV_LISTEN ?= 127.0.0.1:7070

.PHONY: all deps configure build run sim claims traces package test bench fuzz fuzz-http soak clean

all: build

deps:
	@echo "==> checking build dependencies (scripts/install-deps.sh)"
	@scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	@echo "==> configuring $(BUILD_DIR) with CMake"
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: deps $(BUILD_DIR)/CMakeCache.txt
	@echo "==> building $(BUILD_DIR)/gpupool, tests and benchmarks ($(JOBS) jobs)"
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@echo "==> starting dev mode: the server and one agent with fake GPUs (data in $(DEV_DATA); Ctrl-C stops)"
	@$(BUILD_DIR)/gpupool dev --data $(DEV_DATA) --listen $(DEV_LISTEN)

# The FGD protocol table (the main job before dev mode existed).
sim: build
	@if [ -f $(TRACE_DIR)/openb_node_list_gpu_node.csv ]; then \
	  echo "==> simulating the FGD protocol on the Alibaba GPU 2023 trace ($(TRACE_DIR))"; \
	  $(BUILD_DIR)/gpupool sim fgd --nodes $(TRACE_DIR)/openb_node_list_gpu_node.csv \
	    --pods $(TRACE_DIR)/openb_pod_list_default.csv --policy all --seeds 42-51 \
	    --compare $(TRACE_DIR)/fgd-expected-results/fgd_policy_summary.csv; \
	else \
	  echo "==> $(TRACE_DIR) not found (make traces fetches it): simulating a generated cluster and workload"; \
	  $(BUILD_DIR)/gpupool sim fgd --generate --policy all --seeds 42-51; \
	fi

# Fetches the public traces into $GPUPOOL_TRACES or the cache (verified by SHA-256; only what is missing), unless
# ../shared/traces is beside the checkout.
traces:
	@if [ -z "$(GPUPOOL_TRACES)" ] && [ -d "$(SHARED)/traces" ]; then \
	  echo "==> using the traces in $(SHARED)/traces"; \
	else \
	  echo "==> fetching the public traces into $(TRACES) (scripts/fetch-traces.sh)"; \
	  scripts/fetch-traces.sh "$(TRACES)"; \
	fi

# Every claim of the requirements, measured by its scenario against its baseline; fetches the public traces first
# when neither $GPUPOOL_TRACES nor ../shared/traces has them (scripts/claims.sh).
claims: build
	@echo "==> measuring the claims (scripts/claims.sh)"
	@scripts/claims.sh $(BUILD_DIR)/gpupool $(SHARED)

# The Debian package (CPack): build/gpupool_VERSION_ARCH.deb; tests/package_test.sh checks what it holds.
package: build
	@echo "==> building the Debian package in $(BUILD_DIR) (CPack; man pages from --help by help2man)"
	@cd $(BUILD_DIR) && cpack -G DEB
	@ls $(BUILD_DIR)/*.deb

test: build
	@echo "==> running the test suite"
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	@echo "==> running benchmarks (Google Benchmark)"
	@$(BUILD_DIR)/gpupool_bench --benchmark_filter=-BM_Replay
	@for n in 100000 1000000; do \
	  echo "==> replaying $$n generated jobs on 10,000 GPUs (own process, for its peak memory)"; \
	  /usr/bin/time -f "wall %e s, max RSS %M KiB" $(BUILD_DIR)/gpupool_bench --benchmark_filter=BM_Replay/$$n/; \
	done
	@if [ -f $(TRACE_DIR)/openb_node_list_gpu_node.csv ]; then \
	  echo "==> timing the FGD protocol: 6 published policies x 10 seeds on the default trace"; \
	  /usr/bin/time -f "wall %e s, max RSS %M KiB" $(BUILD_DIR)/gpupool sim fgd \
	    --nodes $(TRACE_DIR)/openb_node_list_gpu_node.csv --pods $(TRACE_DIR)/openb_pod_list_default.csv \
	    --policy Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD --seeds 42-51 \
	    --compare $(TRACE_DIR)/fgd-expected-results/fgd_policy_summary.csv; \
	else \
	  echo "==> $(TRACE_DIR) not found: skipping the FGD protocol timing (it needs the trace)"; \
	fi
	@echo "==> what-if: a month of a 1,000-GPU pool's journal checked against a new configuration (bench/whatif; issue 20: goal under 30 s)"
	@$(BUILD_DIR)/gpupool_whatif_bench --binary $(BUILD_DIR)/gpupool
	@echo "==> server load: 32 clients, 10,000 nodes, 100,000 queued jobs, recovery after SIGKILL (bench/server_load)"
	@$(BUILD_DIR)/gpupool_server_load --binary $(BUILD_DIR)/gpupool --clients 32 --nodes 10000 --queued 100000 --seconds 20
	@echo "==> agent load: 1,000 simulated agents heartbeating every 5 s with job churn (bench/agent_load)"
	@$(BUILD_DIR)/gpupool_agent_load --binary $(BUILD_DIR)/gpupool --agents 1000 --seconds 60 --job-rate 20
	@echo "==> agent load: 10,000 simulated agents of protocol 2 (heartbeats, then a watch each) with job churn (bench/agent_load; issue 18: p99 under 10 ms, server CPU under one core)"
	@$(BUILD_DIR)/gpupool_agent_load --binary $(BUILD_DIR)/gpupool --agents 10000 --protocol 2 --seconds 60 --job-rate 20
	@echo "==> job lifecycle: a trivial job's submit -> started -> succeeded on an idle node, jobs/s through 1 and 100 agents, beside the figures before the watch (bench/lifecycle)"
	@$(BUILD_DIR)/gpupool_lifecycle --binary $(BUILD_DIR)/gpupool --runtimes process,oci --agents 100 --before bench/lifecycle/before.json $(if $(LIFECYCLE_ROOT),--work-root $(LIFECYCLE_ROOT))
	@echo "==> container start: 100 oci containers against 100 bare processes, and the agent's CPU per container (bench/container_start)"
	@$(BUILD_DIR)/gpupool_container_bench
	@echo "==> CUDA cap: the interposer's overhead per cuMemAlloc, cuMemFree and cuLaunchKernel against the fake libcuda (bench/cuda_cap)"
	@$(BUILD_DIR)/gpupool_cuda_cap_bench

# The API fuzzer (make fuzz-http), then libFuzzer on every parser of untrusted input (fuzz/), in a separate clang
# build (build-fuzz); FUZZ_SECONDS each (default 600). Installs clang 19 when missing (scripts/fuzz.sh). Both run;
# either one failing fails the target.
fuzz:
	@rc=0; $(MAKE) --no-print-directory fuzz-http || rc=1; \
	echo "==> fuzzing each parser of untrusted input for $${FUZZ_SECONDS:-600} s (scripts/fuzz.sh; clang build in build-fuzz)"; \
	JOBS=$(JOBS) scripts/fuzz.sh || rc=1; exit $$rc

# The API fuzzer (tests/http_fuzz_test.cc) on the ordinary build, no clang needed: HTTP_FUZZ_REQUESTS requests
# (default 100,000; make test sends 10,000) over every endpoint of docs/api/openapi.yaml against the real server;
# GPUPOOL_HTTP_FUZZ_SEED picks another seed.
HTTP_FUZZ_REQUESTS ?= 100000
fuzz-http: deps $(BUILD_DIR)/CMakeCache.txt
	@echo "==> building $(BUILD_DIR)/gpupool and its tests ($(JOBS) jobs)"
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target gpupool gpupool_tests
	@echo "==> fuzzing the HTTP API with $(HTTP_FUZZ_REQUESTS) requests (tests/http_fuzz_test.cc)"
	@GPUPOOL_HTTP_FUZZ_REQUESTS=$(HTTP_FUZZ_REQUESTS) $(BUILD_DIR)/gpupool_tests --gtest_filter='HttpFuzzTest.*'

# The fault-injection soak of the whole server (issue 22, docs/security.md): SOAK_SEEDS seeded fault schedules in
# process (tests/server_soak_test.cc; `make test` runs 200), then SOAK_KILLS SIGKILLs of the real binary under 16
# clients and a running agent (`make test` runs 5); each timed.
SOAK_SEEDS ?= 10000
SOAK_KILLS ?= 100
soak: build
	@echo "==> soaking the server in process: $(SOAK_SEEDS) fault seeds (ServerSoakTest; its servers' logs in $(BUILD_DIR)/soak.log)"
	@GPUPOOL_SOAK_SEEDS=$(SOAK_SEEDS) /usr/bin/time -a -o /dev/stdout -f "wall %e s, max RSS %M KiB" \
	  $(BUILD_DIR)/gpupool_tests --gtest_filter='ServerSoakTest.*' 2>$(BUILD_DIR)/soak.log
	@echo "==> soaking the server binary: $(SOAK_KILLS) SIGKILLs under 16 clients and an agent (ServerSoakProcessTest)"
	@GPUPOOL_SOAK_KILLS=$(SOAK_KILLS) /usr/bin/time -f "wall %e s, max RSS %M KiB" \
	  $(BUILD_DIR)/gpupool_tests --gtest_filter='ServerSoakProcessTest.*'

clean:
	rm -rf $(BUILD_DIR)
