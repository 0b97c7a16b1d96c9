"""The inventory as files: read hosts from CSV or YAML, write them back the same way.

CSV: a header `hostname,worker,labels,build`, labels separated by spaces or ';'. YAML: the
lab file's `hosts:` list (docs/ui.md#inventory). Both read into lab-file host entries.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable

import yaml

from hosts.models import Host
from schedsite.errors import InvalidInput

CSV_COLUMNS = ("hostname", "worker", "labels", "build")
# The lab file's host keys this import reads; others (status, lock) are the hosts' own business.
YAML_KEYS = ("hostname", "worker", "labels", "current_build")
LABEL_SEPARATORS = re.compile(r"[\s;]+")
# A cell a spreadsheet would run as a formula (OWASP "CSV injection"). Only a build can start
# so: hostnames, workers and labels start with a letter or digit. The export quotes it with a
# leading apostrophe, which spreadsheets show as text, and the import takes the apostrophe off.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
MAX_ROWS = 5000

Parsed = tuple[list[object], list[str], list[str]]  # entries, where each is, notes


def guess_format(text: str, filename: str = "") -> str:
    """ "csv" or "yaml": by the file's extension, else by its first line."""
    name = filename.lower()
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    if name.endswith(".csv"):
        return "csv"
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "csv" if first.strip().lower().startswith("hostname,") else "yaml"


def _too_many(n: int) -> None:
    if n > MAX_ROWS:
        raise InvalidInput(f"the file has {n} hosts; import at most {MAX_ROWS} at a time")


def _csv_entry(row: dict[str, str]) -> dict[str, object]:
    """A CSV row as a lab-file host entry; a column the file lacks is left out of it."""
    entry: dict[str, object] = {"hostname": (row.get("hostname") or "").strip()}
    if "worker" in row:
        entry["worker"] = (row["worker"] or "").strip() or None
    if "labels" in row:
        entry["labels"] = [name for name in LABEL_SEPARATORS.split(row["labels"] or "") if name]
    if "build" in row:
        entry["current_build"] = _formula_unquoted((row["build"] or "").strip())
    return entry


def read_csv(text: str) -> Parsed:
    """Hosts from CSV; a bad header is an InvalidInput, a bad row is the row's problem."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [(name or "").strip().lower() for name in reader.fieldnames or []]
    if "hostname" not in header:
        raise InvalidInput(f"the first line must be the header {','.join(CSV_COLUMNS)}")
    unknown = [name for name in header if name not in CSV_COLUMNS]
    if unknown:
        raise InvalidInput(
            f"unknown column {', '.join(unknown)}: the columns are {','.join(CSV_COLUMNS)}"
        )
    reader.fieldnames = header
    entries: list[object] = []
    wheres: list[str] = []
    for row in reader:
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue  # a blank line
        if None in row:
            entries.append(None)  # more cells than columns: shown as the row's error
        else:
            entries.append(_csv_entry(row))
        wheres.append(f"line {reader.line_num}")
        _too_many(len(entries))
    return entries, wheres, []


def read_yaml(text: str) -> Parsed:
    """Hosts from a lab file's `hosts:` list (or a bare list of host entries)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"not valid YAML: {exc}") from exc
    notes = []
    if isinstance(data, dict):
        others = sorted(key for key, value in data.items() if key != "hosts" and value)
        if others:
            notes.append(
                f"Not imported here: {', '.join(map(str, others))} "
                "(manage.py import_lab reads a whole lab file)."
            )
        data = data.get("hosts")
    if not isinstance(data, list):
        raise InvalidInput("the YAML must hold a hosts: list (the lab file's format)")
    _too_many(len(data))
    ignored = sorted({str(key) for e in data if isinstance(e, dict) for key in e} - set(YAML_KEYS))
    if ignored:
        notes.append(
            f"Ignored keys: {', '.join(ignored)} — this page sets labels, worker and build only."
        )
    entries: list[object] = [
        {key: e[key] for key in YAML_KEYS if key in e} if isinstance(e, dict) else e for e in data
    ]
    return entries, [f"hosts[{i}]" for i in range(len(data))], notes


def read(text: str, fmt: str) -> Parsed:
    """Hosts from CSV or YAML text."""
    return read_csv(text) if fmt == "csv" else read_yaml(text)


# --- export ---------------------------------------------------------------------------------


def host_entry(host: Host) -> dict[str, object]:
    """A host as a lab-file entry (labels, worker and build: what the import reads)."""
    return {
        "hostname": host.hostname,
        "worker": host.worker.name if host.worker else None,
        "labels": host.label_names,
        "current_build": host.current_build,
    }


def write_csv(hosts: Iterable[Host]) -> str:
    """Hosts as CSV, labels separated by spaces; read_csv reads it back unchanged."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for host in hosts:
        e = host_entry(host)
        writer.writerow(
            [
                e["hostname"],
                e["worker"] or "",
                " ".join(e["labels"]),  # type: ignore[arg-type]
                _formula_quoted(e["current_build"]),  # type: ignore[arg-type]
            ]
        )
    return out.getvalue()


def _formula_quoted(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA_START) else cell


def _formula_unquoted(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_START) else cell


def write_yaml(hosts: Iterable[Host]) -> str:
    """Hosts as a lab file's `hosts:` list; read_yaml (and import_lab) read it back."""
    return yaml.safe_dump({"hosts": [host_entry(h) for h in hosts]}, sort_keys=False)
