"""PySpark batch reports on the service's history of observations (``throttle-report``)."""
