"""Write the committed OpenAPI document: ``python -m devtools.openapi [PATH]``.

The app generates the document; ``openapi/openapi.json`` is its committed copy, and a test
fails when the two differ."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"


def openapi_document() -> dict[str, Any]:
    from app.server.app import create_app
    from app.settings import load_settings

    settings = load_settings(environ={}, storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.05")
    return create_app(settings, observe=False).openapi()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
