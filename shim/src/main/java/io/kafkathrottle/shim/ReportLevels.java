package io.kafkathrottle.shim;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * When the service wants this node's volume report at once ({@code report_on} in GET /quotas): the data limit's levels,
 * the metadata limit's (null: none set), the share of a volume's total that its usable bytes may move by before a report,
 * the service's shortest interval between two reports of a node, and the time-to-full take-hold levels of this node's
 * dirs (usable bytes, by log dir).
 *
 * <p>A level is compared with usable bytes (bytes kind) or usable / total (ratio kind); a volume crosses it downward at
 * the level and upward above the level plus the hysteresis.
 */
final class ReportLevels {
    /** One limit's levels (hard first, then soft) and hysteresis, in its kind's unit. */
    record Limit(boolean ratio, double[] levels, double hysteresis) {
    }

    final Limit data;
    final Limit metadata;
    final double moveShare;
    final long minIntervalMs;
    /** How many reports in a row the service takes before min_interval_ms paces them (1 when it does not say). */
    final int burst;
    /** This node's take-hold levels, by log dir as the shim names it (absolute, normalised). */
    final Map<String, Long> takeHold;

    ReportLevels(Limit data, Limit metadata, double moveShare, long minIntervalMs, Map<String, Long> takeHold) {
        this(data, metadata, moveShare, minIntervalMs, 1, takeHold);
    }

    ReportLevels(Limit data, Limit metadata, double moveShare, long minIntervalMs, int burst, Map<String, Long> takeHold) {
        this.data = data;
        this.metadata = metadata;
        this.moveShare = moveShare;
        this.minIntervalMs = minIntervalMs;
        this.burst = burst;
        this.takeHold = Map.copyOf(takeHold);
    }

    /**
     * The {@code report_on} object of a table, for node {@code nodeId} (only its take-hold levels are kept); null when the
     * body has none (a service from before it). Throws IllegalArgumentException naming what is wrong.
     */
    static ReportLevels fromJson(JsonNode reportOn, int nodeId) {
        if (reportOn == null || reportOn.isNull() || reportOn.isMissingNode()) {
            return null;
        }
        if (!reportOn.isObject()) {
            throw new IllegalArgumentException("'report_on' must be an object, got " + brief(reportOn));
        }
        Limit data = limit(reportOn, "report_on");
        JsonNode metadataNode = reportOn.get("metadata");
        Limit metadata = metadataNode == null || metadataNode.isNull() ? null : limit(metadataNode, "report_on.metadata");
        JsonNode move = reportOn.get("move_share");
        if (move == null || !move.isNumber() || !(move.asDouble() > 0) || move.asDouble() > 1) {
            throw new IllegalArgumentException("'report_on.move_share' must be a number in (0, 1], got " + brief(move));
        }
        JsonNode interval = reportOn.get("min_interval_ms");
        if (interval == null || !interval.isIntegralNumber() || interval.asLong() < 0 || interval.asLong() > 3_600_000) {
            throw new IllegalArgumentException("'report_on.min_interval_ms' must be an integer in [0, 3600000], got " + brief(interval));
        }
        JsonNode burstNode = reportOn.get("burst");
        int burst = 1; // a service that does not say takes one report per interval
        if (burstNode != null && !burstNode.isNull()) {
            if (!burstNode.isIntegralNumber() || burstNode.asLong() < 1 || burstNode.asLong() > 1000) {
                throw new IllegalArgumentException("'report_on.burst' must be an integer in [1, 1000], got " + brief(burstNode));
            }
            burst = burstNode.asInt();
        }
        Map<String, Long> takeHold = new HashMap<>();
        JsonNode all = reportOn.get("take_hold");
        if (all != null && !all.isNull()) {
            if (!all.isObject()) {
                throw new IllegalArgumentException("'report_on.take_hold' must be an object, got " + brief(all));
            }
            JsonNode mine = all.get(Integer.toString(nodeId));
            if (mine != null && !mine.isNull()) {
                if (!mine.isObject()) {
                    throw new IllegalArgumentException("'report_on.take_hold." + nodeId + "' must be an object, got " + brief(mine));
                }
                for (Map.Entry<String, JsonNode> entry : mine.properties()) {
                    JsonNode level = entry.getValue();
                    if (!level.isIntegralNumber() || level.asLong() < 0) {
                        throw new IllegalArgumentException("'report_on.take_hold." + nodeId + "' levels must be byte counts, got "
                                + brief(level));
                    }
                    takeHold.put(normalised(entry.getKey()), level.asLong());
                }
            }
        }
        return new ReportLevels(data, metadata, move.asDouble(), interval.asLong(), burst, takeHold);
    }

    private static Limit limit(JsonNode node, String where) {
        if (!node.isObject()) {
            throw new IllegalArgumentException("'" + where + "' must be an object, got " + brief(node));
        }
        String kind = node.path("kind").asText("");
        boolean ratio;
        if ("min-available-ratio".equals(kind)) {
            ratio = true;
        } else if ("min-available-bytes".equals(kind)) {
            ratio = false;
        } else {
            throw new IllegalArgumentException("'" + where + ".kind' must be min-available-bytes or min-available-ratio, got "
                    + brief(node.get("kind")));
        }
        JsonNode levels = node.get("levels");
        if (levels == null || !levels.isArray() || levels.isEmpty()) {
            throw new IllegalArgumentException("'" + where + ".levels' must be a list of at least one level, got " + brief(levels));
        }
        double[] values = new double[levels.size()];
        for (int i = 0; i < values.length; i++) {
            JsonNode level = levels.get(i);
            if (!level.isNumber() || !Double.isFinite(level.asDouble()) || level.asDouble() < 0) {
                throw new IllegalArgumentException("'" + where + ".levels' must be numbers of at least 0, got " + brief(levels));
            }
            values[i] = level.asDouble();
        }
        JsonNode hysteresis = node.get("hysteresis");
        if (hysteresis == null || !hysteresis.isNumber() || !(hysteresis.asDouble() >= 0) || !Double.isFinite(hysteresis.asDouble())) {
            throw new IllegalArgumentException("'" + where + ".hysteresis' must be a number of at least 0, got " + brief(hysteresis));
        }
        return new Limit(ratio, values, hysteresis.asDouble());
    }

    /** A log dir as the shim names its own (NodeVolumes: absolute, normalised); as given when it is not a path here. */
    private static String normalised(String logDir) {
        try {
            return Path.of(logDir).toAbsolutePath().normalize().toString();
        } catch (InvalidPathException e) {
            return logDir;
        }
    }

    private static String brief(JsonNode node) {
        String text = String.valueOf(node);
        return text.length() > 100 ? text.substring(0, 100) + "..." : text;
    }
}
