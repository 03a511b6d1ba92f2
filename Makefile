# Two entry points on a fresh Debian 12 machine:
#   make run    install missing packages, build Release, run the main job
#   make test   install missing packages, build, run the fast test labels (unit, torch) and the
#               store's PostgreSQL tests against a throw-away cluster (scripts/test-with-pg.sh)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
RUN_OUT ?= out/run

.PHONY: all deps configure build run test test-slow bench clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash scripts/run-main.sh $(BUILD) $(RUN_OUT)

test: build
	@bash scripts/test-with-pg.sh $(BUILD) 'unit|torch|postgres' $(JOBS)

test-slow: build
	@bash scripts/test-with-pg.sh $(BUILD) slow $(JOBS) 3600

bench: build
	@bash scripts/run-bench.sh $(BUILD)

clean:
	rm -rf $(BUILD)
