"""The analysis of the history in Spark: gaps, violation episodes, time in states, brokers, fill forecasts and the chart series."""
