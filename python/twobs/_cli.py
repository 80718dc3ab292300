"""The ``twobs`` command a wheel installs: the command line of the engine in
the package's extension, the same program as the ``twobs`` binary."""

import sys

from . import _twobs


def main() -> None:
    """Runs ``twobs`` on the process's arguments and exits with its status."""
    sys.stdout.flush()
    sys.exit(_twobs.command_line(sys.argv))
