"""The ``throttle-report`` console script. PySpark comes only with the ``[report]`` extra (the
service does not need it): without it, one line says how to install it, not a traceback."""

from __future__ import annotations

import sys

INSTALL_HINT = "throttle-report needs PySpark, which the service's package leaves out: pip install 'kafka-throttle-service[report]'"


def main() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        raise SystemExit(1) from None
    from spark.cli import main as report

    report()
