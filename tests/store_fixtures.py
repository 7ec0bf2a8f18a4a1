"""Store test fixtures: ``store_url`` runs a test on SQLite and on a real PostgreSQL server.

PostgreSQL comes from ``ZSL_TEST_POSTGRES_URL`` (a role that may create schemas;
``.ci/postgres.sh`` sets it), else from a throwaway cluster this module starts once per test
session with the server binaries found on the machine (Debian: ``/usr/lib/postgresql/*/bin``), listening on
127.0.0.1 at a free port; run as root, the server runs as user ``postgres``. Without either the
PostgreSQL half is skipped with the reason, unless ``ZSL_REQUIRE_POSTGRES=1``, which turns the
skip into a failure. Each test gets a fresh schema (cheaper than a database), named in the URL's
``search_path``.
"""

from __future__ import annotations

import atexit
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from sqlalchemy import Engine, make_url, text

from harness.store import make_engine

POSTGRES_URL_ENV = "ZSL_TEST_POSTGRES_URL"
REQUIRE_ENV = "ZSL_REQUIRE_POSTGRES"
BACKENDS = ["sqlite", "postgresql"]


class _Server:
    """The session's PostgreSQL: an admin URL, or why there is none."""

    admin_url: str | None = None
    reason: str | None = None  # why there is no server: a skip
    failure: str | None = None  # why the server that should be there is not: a failure
    engine: Engine | None = None
    cleanup: ClassVar[list[list[str]]] = []
    tmp: Path | None = None


def _bindir() -> Path | None:
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_cluster(bindir: Path) -> str:
    """initdb + pg_ctl start in a fresh temp dir; the admin URL (a superuser with a password)."""
    as_user: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="zsl-test-pg-"))
    _Server.tmp = tmp
    if os.geteuid() == 0:  # initdb refuses root: the server runs as postgres, in a dir it owns
        if shutil.which("runuser") is None:
            raise RuntimeError("running as root, but runuser is missing to drop to postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(tmp, user="postgres", group="postgres")
    password = secrets.token_hex(16)
    pwfile = tmp / "pw"
    pwfile.write_text(password + "\n")
    if as_user:
        shutil.chown(pwfile, user="postgres", group="postgres")
    data, log = tmp / "data", tmp / "server.log"
    subprocess.run(
        [
            *as_user,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "zsl",
            "--pwfile",
            str(pwfile),
            "--auth=scram-sha-256",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    pwfile.unlink()
    port = _free_port()
    # Durability off: the tests kill clients, never the server; fsync only slows them down.
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={tmp} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=60"
    )
    started = subprocess.run(
        [
            *as_user,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
        capture_output=True,
        text=True,
    )
    _Server.cleanup.append(
        [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
    )
    if started.returncode != 0:
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {tail}")
    return f"postgresql://zsl:{password}@127.0.0.1:{port}/postgres"


@atexit.register
def _stop_cluster() -> None:
    for argv in _Server.cleanup:
        subprocess.run(argv, capture_output=True, check=False)
    _Server.cleanup.clear()
    if _Server.tmp is not None:
        shutil.rmtree(_Server.tmp, ignore_errors=True)


def postgres_admin_engine() -> Engine:
    """An AUTOCOMMIT engine on the session's PostgreSQL; skips (or fails) the test without one."""
    required = os.environ.get(REQUIRE_ENV, "").strip() == "1"
    if _Server.failure is not None:
        pytest.fail(_Server.failure)
    if _Server.engine is None and _Server.reason is None:
        url = os.environ.get(POSTGRES_URL_ENV, "").strip()
        if not url:
            bindir = _bindir()
            if bindir is None:
                _Server.reason = (
                    "no PostgreSQL: set ZSL_TEST_POSTGRES_URL or install the server "
                    "(Debian package postgresql; .ci/postgres.sh does both)"
                )
            else:
                try:
                    url = _start_cluster(bindir)
                except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
                    detail = getattr(err, "stderr", "") or ""
                    _Server.failure = f"cannot start PostgreSQL from {bindir}: {err} {detail}"
                    pytest.fail(_Server.failure)
        if url:
            engine = make_engine(url, isolation_level="AUTOCOMMIT")
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            except Exception as err:
                _Server.failure = f"cannot connect to the test PostgreSQL: {err}"
                pytest.fail(_Server.failure)
            _Server.admin_url = url
            _Server.engine = engine
    if _Server.engine is None:
        if required:
            pytest.fail(f"{REQUIRE_ENV}=1 but {_Server.reason}")
        pytest.skip(_Server.reason or "no PostgreSQL")
    return _Server.engine


def postgres_admin_url() -> str:
    """The session PostgreSQL's admin URL (password included); skips or fails like the engine."""
    postgres_admin_engine()
    assert _Server.admin_url is not None
    return _Server.admin_url


def _url_in_schema(admin_url: str, schema: str) -> str:
    url = make_url(admin_url)
    options = url.query.get("options", "")
    options = f"{options} -csearch_path={schema}".strip() if isinstance(options, str) else options
    return url.update_query_dict({"options": options}).render_as_string(hide_password=False)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty store: a SQLite file, or a fresh schema on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'zsl.sqlite3'}"
        return
    admin = postgres_admin_engine()
    schema = f"zsl_test_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    assert _Server.admin_url is not None
    yield _url_in_schema(_Server.admin_url, schema)
    with admin.connect() as conn:
        conn.execute(text("SET lock_timeout = '20s'"))
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


def backend_of(url: str) -> str:
    return make_url(url).get_backend_name()
