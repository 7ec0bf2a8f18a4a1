# shellcheck shell=bash
# A PostgreSQL server on loopback for the store tests. Meant to be sourced by .ci/run, as root
# on Debian:
#
#   source .ci/postgres.sh
#
# Installs the Debian package `postgresql` if its server binaries are missing, creates the
# newest version's cluster `main` (or $ZSL_CI_PG_CLUSTER) if it does not exist
# (pg_createcluster), starts it listening on 127.0.0.1 only (pg_ctlcluster, no systemd needed),
# creates (or updates) the role and database `zsl_test`, then exports
#
#   ZSL_TEST_POSTGRES_URL=postgresql://zsl_test:<password>@127.0.0.1:<port>/zsl_test
#   ZSL_REQUIRE_POSTGRES=1   (the PostgreSQL half of the store suite fails instead of skipping)
#
# Idempotent: sourcing it again reuses the running cluster and gives the role a fresh
# password. Any failure prints one "error: .ci/postgres.sh: ..." line and returns 1, which
# stops .ci/run (set -e). Stop the cluster afterwards with: pg_ctlcluster <version> main stop
#
# When it starts the cluster (it was not running), it sets (not exported)
#
#   ZSL_CI_PG_STARTED="<version> <cluster>"
#
# as soon as the server is up, so that the sourcing script can stop it on EXIT/TERM/INT, even
# when a later step here fails (.ci/run does: pg_ctlcluster --force $ZSL_CI_PG_STARTED stop).
# A cluster that was already running is left running.

_zsl_pg_fail() {
  echo "error: .ci/postgres.sh: $*" >&2
  return 1
}

_zsl_pg_setup() {
  local version port status password url cluster="${ZSL_CI_PG_CLUSTER:-main}"
  if [ "$(id -u)" != 0 ]; then
    _zsl_pg_fail "must run as root (it installs and starts PostgreSQL)"
    return 1
  fi

  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
      _zsl_pg_fail "no PostgreSQL server and no apt-get to install one"
      return 1
    fi
    echo ".ci/postgres.sh: installing postgresql" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends postgresql >/dev/null; then
      apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null \
        || { _zsl_pg_fail "apt-get install postgresql failed"; return 1; }
    fi
  fi
  version="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -n | tail -n 1)"
  if [ ! -x "/usr/lib/postgresql/$version/bin/pg_ctl" ] || ! command -v pg_lsclusters >/dev/null
  then
    _zsl_pg_fail "no server binaries in /usr/lib/postgresql/$version/bin or no pg_lsclusters"
    return 1
  fi

  if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c {f = 1} END {exit !f}'
  then
    if ! pg_createcluster "$version" "$cluster" >/dev/null; then
      _zsl_pg_fail "pg_createcluster $version $cluster failed"
      return 1
    fi
  fi
  status="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c {print $4}')"
  if [ "$status" != "online" ]; then
    # Set before starting: a start that fails half-way still gets a stop attempt.
    ZSL_CI_PG_STARTED="$version $cluster"
    # Options bypass systemd (absent in CI containers); loopback only, whatever the config says.
    if ! pg_ctlcluster -o "-c listen_addresses=127.0.0.1" "$version" "$cluster" start; then
      _zsl_pg_fail "pg_ctlcluster $version $cluster start failed;" \
        "see /var/log/postgresql/postgresql-$version-$cluster.log"
      return 1
    fi
  fi
  port="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c {print $3}')"
  [ -n "$port" ] || { _zsl_pg_fail "cannot read the port of cluster $version/$cluster"; return 1; }

  # A fresh password on every run: hex only, so it needs no quoting in SQL or the URL.
  password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres >/dev/null <<SQL \
    || { _zsl_pg_fail "could not create the role zsl_test on port $port"; return 1; }
DO \$\$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'zsl_test') THEN
    ALTER ROLE zsl_test LOGIN PASSWORD '$password';
  ELSE
    CREATE ROLE zsl_test LOGIN PASSWORD '$password';
  END IF;
END
\$\$;
SQL
  local exists
  exists="$(runuser -u postgres -- psql -X -tA -p "$port" -d postgres \
    -c "SELECT 1 FROM pg_database WHERE datname = 'zsl_test'")" || exists=""
  if [ "$exists" != 1 ]; then
    runuser -u postgres -- createdb -p "$port" -O zsl_test zsl_test \
      || { _zsl_pg_fail "could not create the database zsl_test"; return 1; }
  fi

  url="postgresql://zsl_test:$password@127.0.0.1:$port/zsl_test"
  # The tests connect over TCP with the password, exactly as they will: check that here.
  PGCONNECT_TIMEOUT=10 psql -X -tA "$url" -c "SELECT 1" >/dev/null \
    || { _zsl_pg_fail "cannot log in as zsl_test at 127.0.0.1:$port"; return 1; }
  export ZSL_TEST_POSTGRES_URL="$url"
  export ZSL_REQUIRE_POSTGRES=1
  echo ".ci/postgres.sh: PostgreSQL $version on 127.0.0.1:$port, database zsl_test" >&2
}

_zsl_pg_setup || return 1 2>/dev/null || exit 1
unset -f _zsl_pg_setup _zsl_pg_fail
