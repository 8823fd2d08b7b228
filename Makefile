# The two commands: `make demo` (set up, build, run the main job) and `make test` (set up, build,
# run every test through ctest). `make build` leaves build/bin/shardsim.
BUILD ?= build
SAN_BUILD ?= build-sanitize
JOBS ?= $(shell nproc)
DEMO_MODEL ?= llama3-70b
DEMO_CLUSTER ?= dgx-h100:64
DEMO_TOKENS ?= 4M
DEMO_SEQ ?= 8192

.PHONY: demo test build setup test-sanitize clean validate accuracy

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/bin/shardsim plan --model $(DEMO_MODEL) --cluster $(DEMO_CLUSTER) --global-batch-tokens $(DEMO_TOKENS) --seq-len $(DEMO_SEQ)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(SAN_BUILD)/build.ninja:
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHARDSIM_SANITIZE=ON \
	  -DSHARDSIM_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"

# Leak checking is on by default; shardsim-runtime turns it off for itself (OpenMPI keeps
# allocations until exit), which an ASAN_OPTIONS set here would override. -g1 keeps file and line
# in the sanitizers' stack traces at half the debug information's cost. The tests named in
# tests/sanitize_skip.txt (each with its reason) run in `make test` only.
SAN_SKIP := $(shell grep -v '^\#' tests/sanitize_skip.txt | cut -d' ' -f1 | paste -sd'|')
test-sanitize: setup $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E '^($(SAN_SKIP))$$'

# The validation suite: calibrate this machine, validate every plan of validation/suite/plans.txt,
# write validate-results/summary.md. HOSTFILE=hosts.txt runs it over those hosts.
validate: build
	bash scripts/validate_suite.sh $(BUILD) validate-results $(HOSTFILE)

# Accuracy against the published runs of tests/data/measured_runs.json (docs/accuracy.md): the
# catalogue's errors, the presets' (fitted defaults), then the per-system fit and its test-split
# errors; clusters in build/accuracy.
accuracy: build
	bash bench/accuracy.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
