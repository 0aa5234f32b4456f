"""The HTML page: tables, SVG charts, axis ticks and units, drawn from the report's plain data (no Spark)."""
