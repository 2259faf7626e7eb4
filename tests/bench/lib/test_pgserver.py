"""bench/lib/pgserver.py: a throwaway server is durable unless asked, and a non-durable one says so."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.bench.smoke import bench_lib

pgserver = bench_lib("pgserver")
ON = {
    "server_version": "15.18",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


def test_a_durable_server_keeps_initdbs_settings() -> None:
    options = pgserver.server_options(5432, Path("/tmp/s"), True, 200)

    assert "fsync" not in options and "synchronous_commit" not in options
    assert "full_page_writes" not in options and "max_connections=200" in options


def test_a_nondurable_server_turns_all_three_off() -> None:
    options = pgserver.server_options(5432, Path("/tmp/s"), False, 200)

    for name in ("fsync", "synchronous_commit", "full_page_writes"):
        assert f"-c {name}=off" in options


def test_durability_of_a_durable_server() -> None:
    entry = pgserver.durability_of(ON)

    assert entry["durable"] is True and entry["fsync"] == "on"
    assert entry["label"] == (
        "PostgreSQL 15.18: fsync=on, synchronous_commit=on, full_page_writes=on"
    )


@pytest.mark.parametrize(
    ("setting", "value"),
    [("fsync", "off"), ("synchronous_commit", "off"), ("full_page_writes", "off")],
)
def test_any_setting_off_is_labelled_nondurable(setting: str, value: str) -> None:
    entry = pgserver.durability_of({**ON, setting: value})

    assert entry["durable"] is False
    assert "NON-DURABLE: " in entry["label"] and f"{setting}=off" in entry["label"]


def test_a_local_synchronous_commit_still_flushes_the_wal() -> None:
    assert pgserver.durability_of({**ON, "synchronous_commit": "local"})["durable"] is True


def test_the_nondurable_flag_is_refused_beside_a_given_server() -> None:
    parser = argparse.ArgumentParser()
    pgserver.add_arguments(parser)
    args = parser.parse_args(["--postgres-nondurable"])
    assert args.postgres_nondurable is True

    pgserver.check(parser, True, None)  # a throwaway server: fine
    with pytest.raises(SystemExit):
        pgserver.check(parser, True, "postgresql://somewhere/db")
