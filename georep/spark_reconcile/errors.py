"""Errors of the export and the reconciliation: operating errors, each with a message
an operator can act on. The commands print the message and exit non-zero; they never
dump a stack trace for these."""

from __future__ import annotations


class ReconcileError(Exception):
    """Base of the subsystem's operating errors."""


class InputError(ReconcileError):
    """The reconciliation's input is unusable: missing or unreadable files, missing
    columns, mixed or unknown schema versions, no rows."""


class ExportError(ReconcileError):
    """The export could not read a cluster (admin REST or broker unreachable, a topic
    pattern matching nothing, an answer it does not understand)."""
