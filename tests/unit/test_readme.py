"""The README's configuration table is the one the settings model generates."""

from pathlib import Path

from app.settings.reference import configuration_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_configuration_table_matches_the_settings_model():
    text = README.read_text()
    start = text.index("<!-- configuration-table")
    start = text.index("\n", start) + 1
    end = text.index("<!-- /configuration-table -->")
    assert text[start:end].strip() == configuration_table().strip()
