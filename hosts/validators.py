"""Validators for names that appear in URLs, labels and lab files."""

from __future__ import annotations

from django.core.validators import RegexValidator

hostname_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z",
    "Use letters, digits, '.', '-' and '_' (starting with a letter or digit).",
)
worker_name_validator = hostname_validator
# The names the UI's own routes take (/hosts/new/, /hosts/import/, /workers/new/): a host or
# worker so named could never be reached at its page.
reserved_name_validator = RegexValidator(
    r"^(?:new|import)\Z",
    "'new' and 'import' name pages of their own; choose another name.",
    inverse_match=True,
)
NAME_VALIDATORS = (hostname_validator, reserved_name_validator)


def name_validator(value: str) -> None:
    """Check a hostname or worker name: its characters, and that no page of the UI owns it."""
    for validator in NAME_VALIDATORS:
        validator(value)


# Labels are 'key:value' or bare words; commas and spaces are reserved (jobs store their label
# set as a comma-delimited key).
label_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._:/=+-]*\Z",
    "Use letters, digits and . _ : / = + - (no spaces or commas).",
)
# Starts with a letter or digit, so that no name is blank once trimmed.
policy_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9 ._:/=+-]*\Z",
    "Start with a letter or digit; then letters, digits, spaces and . _ : / = + -",
)
