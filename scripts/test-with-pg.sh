#!/usr/bin/env bash
# Runs ctest labels with a throw-away PostgreSQL cluster for the store's `postgres` tests
# (docs/store.md "PostgreSQL test cluster"): starts scripts/pg-cluster.sh, exports its PG*
# variables and SVATTN_PG_REQUIRED=1 (a missing server then fails those tests, never skips them),
# runs ctest, and stops the cluster on every exit path.
#
#   scripts/test-with-pg.sh BUILD_DIR LABEL_REGEX JOBS [TIMEOUT_S]
#
# (make test: 'unit|torch|postgres'; make test-slow: 'slow', whose PostgreSQL instances need the
# cluster too; TIMEOUT_S per test, default 900.)
#
# SVATTN_NO_POSTGRES=1 runs the labels without a cluster and without the `postgres` label (a
# machine without PostgreSQL; say so when reporting results).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?build directory}
labels=${2:?ctest label regex}
jobs=${3:-2}
timeout=${4:-900}

if [ "${SVATTN_NO_POSTGRES:-0}" = "1" ]; then
  echo "test: SVATTN_NO_POSTGRES=1: the PostgreSQL tests are not run" >&2
  labels=$(echo "$labels" | sed -e 's/|postgres//' -e 's/postgres|//')
  cd "$build" && exec ctest -L "$labels" --output-on-failure -j "$jobs" --timeout "$timeout"
fi

if [ "$(cd "$build" && ctest -N -L postgres | sed -n 's/^Total Tests: //p')" = "0" ]; then
  echo "test: the build has no PostgreSQL tests (libpq-dev missing at configure time?)" >&2
  exit 1
fi

export SVATTN_PG_REQUIRED=1
cluster=""
stop_cluster() {
  if [ -n "$cluster" ]; then bash scripts/pg-cluster.sh stop "$cluster" || true; fi
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM
if lines=$(bash scripts/pg-cluster.sh start); then
  eval "$lines"
  cluster=$SVATTN_PG_DIR
else
  echo "test: the PostgreSQL test cluster did not start: the postgres tests will fail" >&2
  export PGHOST=/nonexistent/svattn-pg-cluster-did-not-start
fi
(cd "$build" && ctest -L "$labels" --output-on-failure -j "$jobs" --timeout "$timeout")
