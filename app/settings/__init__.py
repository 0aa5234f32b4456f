from app.settings.loading import ConfigurationError, Problem, load_settings
from app.settings.model import Settings

__all__ = ["ConfigurationError", "Problem", "Settings", "load_settings"]
