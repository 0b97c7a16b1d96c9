"""What the benchmark commands share: how they print a result and stop a server they started."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess


def print_result(result: dict, *, as_json: bool, width: int) -> None:
    """One JSON line, or one `key: value` line per figure with the keys right-aligned."""
    if as_json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>{width}}: {value}")


def stop_process_group(proc: subprocess.Popen) -> None:
    """Stop a server started in its own process group: TERM, and KILL after 30 seconds."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


ShapeOptions = tuple[tuple[str, type, str | None], ...]


def add_shape_options(
    parser: argparse.ArgumentParser, options: ShapeOptions, defaults: object
) -> None:
    """One --flag per (name, type, help) of a simulation's shape, defaulting to `defaults`'."""
    for name, kind, text in options:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=kind, default=getattr(defaults, name), help=text)


def shape_from_options(options: ShapeOptions, args: argparse.Namespace, shape: type) -> object:
    """The simulation's shape from the parsed flags of `add_shape_options`."""
    return shape(**{name: getattr(args, name) for name, _, _ in options})
