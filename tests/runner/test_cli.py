"""The runner's options: the maintenance commands are shell-style strings, from flags or env."""

from __future__ import annotations

import argparse

import pytest

from runner.cli import add_arguments, config_from_options

BASE = ["--worker", "rack-7", "--api", "http://lab/api/", "--token", "t"]


def parse(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return vars(parser.parse_args([*BASE, *argv]))


def test_the_maintenance_commands_are_split_like_a_shell_would():
    config = config_from_options(
        parse(
            "--verify-cmd",
            'dut-check --host "$HOST" --quick',
            "--repair-cmd",
            "sh -c 'servo reset && reimage'",
            "--",
            "./run_test.sh",
        )
    )
    assert list(config.command) == ["./run_test.sh"]
    assert list(config.verify_command) == ["dut-check", "--host", "$HOST", "--quick"]
    assert list(config.repair_command) == ["sh", "-c", "servo reset && reimage"]


def test_the_maintenance_commands_default_to_the_environment(monkeypatch):
    monkeypatch.setenv("SCHEDSITE_VERIFY_CMD", "dut-check --quick")
    monkeypatch.delenv("SCHEDSITE_REPAIR_CMD", raising=False)
    config = config_from_options(parse("--", "./run_test.sh"))
    assert list(config.verify_command) == ["dut-check", "--quick"]
    assert list(config.repair_command) == []  # none: repair jobs fail, naming the option


def test_an_unclosed_quote_stops_the_runner_naming_the_option():
    with pytest.raises(SystemExit, match="--repair-cmd"):
        config_from_options(parse("--repair-cmd", "reimage 'eve", "--", "./run_test.sh"))
