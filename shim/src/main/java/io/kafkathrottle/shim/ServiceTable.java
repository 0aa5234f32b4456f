package io.kafkathrottle.shim;

import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.Set;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * One answer of GET /quotas: the table and the factor in force, valid until {@code validUntil}
 * (null: the service set no expiry), and whether the factor is enforced: {@code enforced} false
 * is shadow mode (no broker applies it); with canary brokers only they apply it. A service that
 * does not say (one from before enforcement was decided centrally) enforces everywhere.
 * {@code mutationFactor} scales controller-mutation quotas while a metadata volume is in breach
 * (0: its hard limit); a service from before metadata limits sends none, which means 1.
 * {@code reportOn} says when this node reports its volumes at once ({@link ReportLevels}; null: the body has none, or
 * an unusable one, which {@code reportOnProblem} describes: the table is used all the same, the reports go at the poll
 * interval).
 */
record ServiceTable(QuotaTable table, double factor, String state, String source, Instant validUntil, boolean enforced,
        Set<Integer> canaryBrokers, double mutationFactor, ReportLevels reportOn, String reportOnProblem) {

    /** Whether the shim of broker {@code brokerId} applies the factor. */
    boolean enforcesOn(int brokerId) {
        return enforced && (canaryBrokers.isEmpty() || canaryBrokers.contains(brokerId));
    }

    static ServiceTable fromJson(JsonNode json) {
        return fromJson(json, ShimConfig.UNKNOWN_BROKER);
    }

    /** The table of a GET /quotas answer, with the take-hold levels of node {@code nodeId}. */
    static ServiceTable fromJson(JsonNode json, int nodeId) {
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("expected a JSON object");
        }
        JsonNode factor = json.get("factor");
        if (factor == null || !factor.isNumber() || factor.asDouble() < 0 || factor.asDouble() > 1) {
            throw new IllegalArgumentException("'factor' must be a number in [0, 1], got " + factor);
        }
        JsonNode mutation = json.get("mutation_factor");
        if (mutation != null && !mutation.isNull() && (!mutation.isNumber() || !(mutation.asDouble() >= 0) || mutation.asDouble() > 1)) {
            throw new IllegalArgumentException("'mutation_factor' must be a number in [0, 1], got " + mutation);
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
        JsonNode enforced = json.get("enforced");
        if (enforced != null && !enforced.isNull() && !enforced.isBoolean()) {
            throw new IllegalArgumentException("'enforced' must be true or false, got " + enforced);
        }
        Set<Integer> canary = new TreeSet<>();
        JsonNode brokers = json.get("canary_brokers");
        if (brokers != null && !brokers.isNull()) {
            if (!brokers.isArray()) {
                throw new IllegalArgumentException("'canary_brokers' must be a list of broker ids, got " + brokers);
            }
            for (JsonNode broker : brokers) {
                if (!broker.isIntegralNumber() || broker.asLong() < 0 || broker.asLong() > Integer.MAX_VALUE) {
                    throw new IllegalArgumentException("'canary_brokers' must be a list of broker ids, got " + brokers);
                }
                canary.add(broker.asInt());
            }
        }
        ReportLevels reportOn = null;
        String reportOnProblem = null;
        try {
            reportOn = ReportLevels.fromJson(json.get("report_on"), nodeId);
        } catch (IllegalArgumentException e) {
            reportOnProblem = e.getMessage();
        }
        return new ServiceTable(QuotaTable.fromJson(json), factor.asDouble(), json.path("state").asText("?"), json.path("source").asText("?"),
                until, enforced == null || enforced.isNull() || enforced.asBoolean(), Set.copyOf(canary),
                mutation == null || mutation.isNull() ? 1.0 : mutation.asDouble(), reportOn, reportOnProblem);
    }
}
