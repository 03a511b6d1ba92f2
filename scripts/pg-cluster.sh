#!/usr/bin/env bash
# Starts and stops a throw-away PostgreSQL cluster for the store's PostgreSQL tests
# (docs/store.md "PostgreSQL test cluster"). The server listens on a Unix socket under a temporary
# directory (and, with SVATTN_PG_TCP=1, also on 127.0.0.1), trusts local connections, and runs as
# a non-root user.
#
#   eval "$(scripts/pg-cluster.sh start)"     # prints export lines; sets SVATTN_PG_DIR, PGHOST, ...
#   psql -c 'select 1'                        # connects through the exported PG* variables
#   scripts/pg-cluster.sh status "$SVATTN_PG_DIR"
#   scripts/pg-cluster.sh stop "$SVATTN_PG_DIR"   # stops the server and deletes the directory
#
# Environment: PG_BIN (the server's bin directory; default: the newest /usr/lib/postgresql/*/bin),
# SVATTN_PG_USER (the user the server runs as when this runs as root; default postgres, else
# nobody), SVATTN_PG_PORT (names the socket file, and the TCP port; default 5432), SVATTN_PG_TCP=1
# (also listen on 127.0.0.1:PORT and export SVATTN_PG_TCP_URI), SVATTN_PG_KEEP=1 (stop keeps the
# directory). Needs the Debian package postgresql-15 (scripts/install-deps.sh).
set -euo pipefail

die() { echo "pg-cluster: $*" >&2; exit 2; }

find_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  local d
  d=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$d" ] || die "no PostgreSQL server found under /usr/lib/postgresql (install it with: scripts/install-deps.sh)"
  echo "$d"
}

# Runs a command as the cluster's owner (this user, or SVATTN_PG_USER when running as root).
as_owner() {
  # From / : the caller's directory may not be readable by the owner.
  if [ "$(id -u)" -eq 0 ]; then
    (cd / && runuser -u "$OWNER" -- "$@")
  else
    (cd / && "$@")
  fi
}

pick_owner() {
  if [ "$(id -u)" -ne 0 ]; then OWNER=$(id -un); return; fi
  if [ -n "${SVATTN_PG_USER:-}" ]; then OWNER=$SVATTN_PG_USER
  elif id postgres >/dev/null 2>&1; then OWNER=postgres
  else OWNER=nobody; fi
  id "$OWNER" >/dev/null 2>&1 || die "user '$OWNER' does not exist (SVATTN_PG_USER)"
  [ "$(id -u "$OWNER")" -ne 0 ] || die "the server must not run as root (SVATTN_PG_USER=$OWNER)"
}

check_dir() {
  [ -n "${1:-}" ] || die "give the cluster directory printed by 'start' (or \$SVATTN_PG_DIR)"
  [ -f "$1/cluster.env" ] || die "'$1' is not a cluster made by pg-cluster.sh (no cluster.env)"
}

cmd_start() {
  local bin port dir
  bin=$(find_bin)
  [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] || die "no initdb/pg_ctl in '$bin' (PG_BIN)"
  port=${SVATTN_PG_PORT:-5432}
  [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] ||
    die "SVATTN_PG_PORT must be a port number 1..65535, got '$port'"
  pick_owner
  dir=$(mktemp -d "${TMPDIR:-/tmp}/svattn-pg.XXXXXX")
  mkdir -p "$dir/socket"
  [ "$(id -u)" -ne 0 ] || chown -R "$OWNER" "$dir"
  chmod 700 "$dir"
  # A Unix socket path is limited to 107 bytes.
  [ ${#dir} -le 80 ] || die "temporary directory '$dir' is too long for a socket path (set TMPDIR)"
  if ! as_owner "$bin/initdb" -D "$dir/data" -U svattn --auth=trust -E UTF8 --no-locale \
      >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2; rm -rf "$dir"; die "initdb failed"
  fi
  local listen=""
  [ "${SVATTN_PG_TCP:-0}" != "1" ] || listen=127.0.0.1
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses='$listen' -k $dir/socket -p $port -c fsync=on" start >/dev/null; then
    cat "$dir/server.log" >&2; rm -rf "$dir"; die "the server did not start"
  fi
  as_owner "$bin/psql" -X -q -h "$dir/socket" -p "$port" -U svattn -d postgres \
    -c "CREATE DATABASE svattn" >/dev/null
  cat >"$dir/cluster.env" <<EOF
export SVATTN_PG_DIR='$dir'
export PGHOST='$dir/socket'
export PGPORT='$port'
export PGUSER='svattn'
export PGDATABASE='svattn'
export SVATTN_PG_URI='postgresql://svattn@/svattn?host=$dir/socket&port=$port'
EOF
  if [ -n "$listen" ]; then
    echo "export SVATTN_PG_TCP_URI='postgresql://svattn@127.0.0.1:$port/svattn'" >>"$dir/cluster.env"
  fi
  echo "PG_BIN='$bin'" >"$dir/bin.env"
  echo "OWNER='$OWNER'" >>"$dir/bin.env"
  cat "$dir/cluster.env"
  echo "pg-cluster: started PostgreSQL ($("$bin/postgres" --version)) as $OWNER on $dir/socket" >&2
}

cmd_status() {
  check_dir "${1:-${SVATTN_PG_DIR:-}}"
  local dir=${1:-$SVATTN_PG_DIR}
  # shellcheck disable=SC1091
  . "$dir/bin.env"
  as_owner "$PG_BIN/pg_ctl" -D "$dir/data" status
}

cmd_stop() {
  check_dir "${1:-${SVATTN_PG_DIR:-}}"
  local dir=${1:-$SVATTN_PG_DIR}
  # shellcheck disable=SC1091
  . "$dir/bin.env"
  if as_owner "$PG_BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
  if [ "${SVATTN_PG_KEEP:-0}" = "1" ]; then
    echo "pg-cluster: stopped; kept $dir" >&2
  else
    rm -rf "$dir"
    echo "pg-cluster: stopped and removed $dir" >&2
  fi
}

case "${1:-}" in
  start) cmd_start ;;
  status) cmd_status "${2:-}" ;;
  stop) cmd_stop "${2:-}" ;;
  *) die "usage: pg-cluster.sh start | status DIR | stop DIR" ;;
esac
