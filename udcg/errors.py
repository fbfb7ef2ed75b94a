"""Typed errors. Anything a user can fix is an InputError: the CLI prints it on one line, exit code 2.
A fault of the machine (a full disk) is an EnvironmentFault, exit code 1."""

from __future__ import annotations


class UdcgError(Exception):
    """Base class for every error udcg raises on purpose."""


class InputError(UdcgError):
    """Bad input the user can fix. The message names file, line/record, field and the fix."""

    exit_code = 2


class BackendError(UdcgError):
    """A model backend failed (after retries) in a way the caller should see."""

    exit_code = 1


class EnvironmentFault(UdcgError):
    """The machine failed, not the input: a full disk, an I/O error, a quota. The message says what
    failed, where, what was kept and how to resume; exit code 1 (bad input is 2)."""

    exit_code = 1
