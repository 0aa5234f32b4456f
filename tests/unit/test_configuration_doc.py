"""docs/configuration.md holds the configuration table the settings model generates."""

from pathlib import Path

from devtools.config_table import END_MARKER, START_MARKER, configuration_table

README = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_readme_configuration_table_matches_the_settings_model():
    text = README.read_text()
    start = text.index("\n", text.index(START_MARKER)) + 1
    end = text.index(END_MARKER)
    assert text[start:end].strip() == configuration_table().strip()
