"""Hypothesis profiles for every test folder (unit, report, integration).

CI sets ``CI`` (``.ci/run`` runs with ``CI=true``): there a property-based test must pass or
fail the same way on every run and every fresh clone, and fail in bounded time. So the ``ci``
profile is derandomized (the examples follow from the test alone), keeps no example database
between runs, and does not shrink (Hypothesis gives shrinking up to five minutes per failure);
a failure prints its blob, which ``@reproduce_failure`` replays. Found failures are pinned with
``@example`` in the test itself, so CI runs them every time.

Elsewhere the ``explore`` profile draws new examples on every run and keeps the failing ones in
``.hypothesis/`` (git-ignored), shrinking them to the smallest. ``HYPOTHESIS_PROFILE`` picks one
explicitly."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import Phase, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],  # no Phase.shrink
    print_blob=True,
)
settings.register_profile("explore", print_blob=True)


def hypothesis_profile(environ: Mapping[str, str]) -> str:
    """The profile for an environment: ``HYPOTHESIS_PROFILE`` if set, else ``ci`` where ``CI``
    is set to anything but an empty string, 0 or false."""
    if environ.get("HYPOTHESIS_PROFILE"):
        return environ["HYPOTHESIS_PROFILE"]
    return "ci" if environ.get("CI", "").strip().lower() not in ("", "0", "false") else "explore"


settings.load_profile(hypothesis_profile(os.environ))
