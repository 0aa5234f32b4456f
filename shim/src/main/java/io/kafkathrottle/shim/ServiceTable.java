package io.kafkathrottle.shim;

import java.time.Instant;
import java.time.format.DateTimeParseException;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * One answer of GET /quotas: the table and the factor in force, valid until {@code validUntil}
 * (null: the service set no expiry).
 */
record ServiceTable(QuotaTable table, double factor, String state, String source, Instant validUntil) {

    static ServiceTable fromJson(JsonNode json) {
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("expected a JSON object");
        }
        JsonNode factor = json.get("factor");
        if (factor == null || !factor.isNumber() || factor.asDouble() < 0 || factor.asDouble() > 1) {
            throw new IllegalArgumentException("'factor' must be a number in [0, 1], got " + factor);
        }
        JsonNode validUntil = json.get("valid_until");
        Instant until = null;
        if (validUntil != null && !validUntil.isNull()) {
            try {
                until = Instant.parse(validUntil.asText());
            } catch (DateTimeParseException e) {
                throw new IllegalArgumentException("'valid_until' is not an ISO-8601 instant: " + validUntil);
            }
        }
        return new ServiceTable(QuotaTable.fromJson(json), factor.asDouble(), json.path("state").asText("?"), json.path("source").asText("?"),
                until);
    }
}
