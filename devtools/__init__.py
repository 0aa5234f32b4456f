"""What only developers use, kept out of the service's package and image: the local Kafka
cluster for tests and ``make run`` (devcluster), the local stack, the demo, and the writers of
the committed OpenAPI document and configuration table."""
