package io.kafkathrottle.shim;

import java.util.Arrays;
import java.util.Map;

import org.apache.kafka.server.quota.ClientQuotaType;

/**
 * What the broker's quota managers see at one moment: the table (the service's, merged with
 * Kafka's own quotas), the factor in force, where it came from, when it expires, and the quota
 * epoch of each type. Immutable; the callback swaps whole views.
 *
 * <p>Epochs exist because Kafka judges a new quota against the bytes already recorded in its
 * window (11 s by default) and serves the resulting throttle time without an upper bound: a
 * producer that wrote 100 MB/s and meets a paused 64 KiB/s quota would be muted for half an
 * hour, long after the pause ended. When the factor of a type falls below {@value #EPOCH_DROP}
 * of the highest factor seen in the current epoch (and always on a pause), the shim starts a new
 * epoch: the epoch is a metric tag, so Kafka starts fresh sensors with an empty window. Within
 * an epoch the history can add at most (1 / 0.8 − 1) × 11 s = 2.75 s of throttle.
 */
final class QuotaView {
    enum Mode {
        /** No answer from the service yet: the fallback factor, Kafka's own quotas. */
        STARTING,
        /** A valid table from the service. */
        SERVICE,
        /** The service is unreachable; its last table is kept until it expires. */
        KEPT,
        /** No valid table: the fallback factor over the last table's quotas, if any. */
        FALLBACK
    }

    static final double EPOCH_DROP = 0.8;
    static final long NO_EXPIRY = Long.MIN_VALUE;
    private static final int TYPES = ClientQuotaType.values().length;

    final Mode mode;
    final ServiceTable service; // the last table the service sent; null before the first
    final QuotaTable table; // the service's table (or an empty one) merged with Kafka's quotas
    final double factor;
    final long expiresAtNanos; // NO_EXPIRY: does not expire
    private final long[] epochs;
    private final double[] epochFactors; // the highest factor seen in each type's current epoch
    private final String[] epochTags;

    private QuotaView(Mode mode, ServiceTable service, QuotaTable table, double factor, long expiresAtNanos, long[] epochs, double[] epochFactors) {
        this.mode = mode;
        this.service = service;
        this.table = table;
        this.factor = factor;
        this.expiresAtNanos = expiresAtNanos;
        this.epochs = epochs;
        this.epochFactors = epochFactors;
        this.epochTags = Arrays.stream(epochs).mapToObj(Long::toString).toArray(String[]::new);
    }

    static QuotaView starting(double fallbackFactor) {
        QuotaTable empty = QuotaTable.empty();
        double[] factors = new double[TYPES];
        for (ClientQuotaType type : ClientQuotaType.values()) {
            factors[type.ordinal()] = applied(empty, fallbackFactor, type);
        }
        return new QuotaView(Mode.STARTING, null, empty, fallbackFactor, NO_EXPIRY, new long[TYPES], factors);
    }

    /** The view after a new table from the service. */
    QuotaView withService(ServiceTable next, long expiresAtNanos, Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas) {
        return successor(Mode.SERVICE, next, next.table().withKafkaQuotas(kafkaQuotas), next.factor(), expiresAtNanos);
    }

    /** The same view with Kafka's own quotas changed. */
    QuotaView withKafkaQuotas(Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas) {
        QuotaTable base = service == null ? QuotaTable.empty() : service.table();
        return successor(mode, service, base.withKafkaQuotas(kafkaQuotas), factor, expiresAtNanos);
    }

    QuotaView kept() {
        return successor(Mode.KEPT, service, table, factor, expiresAtNanos);
    }

    QuotaView fallback(double fallbackFactor) {
        return successor(Mode.FALLBACK, service, table, fallbackFactor, NO_EXPIRY);
    }

    boolean expired(long nowNanos) {
        return expiresAtNanos != NO_EXPIRY && nowNanos - expiresAtNanos >= 0;
    }

    double factorFor(ClientQuotaType type) {
        return applied(table, factor, type);
    }

    /** The factor a table's quotas of this type are scaled by. */
    private static double applied(QuotaTable table, double factor, ClientQuotaType type) {
        return table.factorTypes.contains(type) ? Math.min(factor, 1.0) : 1.0;
    }

    String epochTag(ClientQuotaType type) {
        return epochTags[type.ordinal()];
    }

    /** Whether any quota limit of this type may differ between the two views. */
    boolean differsFor(ClientQuotaType type, QuotaView other) {
        return factorFor(type) != other.factorFor(type) || epochs[type.ordinal()] != other.epochs[type.ordinal()]
                || !table.sameFor(type, other.table);
    }

    String state() {
        return factor >= 1.0 ? "OPEN" : factor <= 0.0 ? "PAUSE" : "THROTTLE";
    }

    private QuotaView successor(Mode nextMode, ServiceTable nextService, QuotaTable nextTable, double nextFactor, long nextExpiry) {
        long[] nextEpochs = epochs.clone();
        double[] nextEpochFactors = epochFactors.clone();
        for (ClientQuotaType type : ClientQuotaType.values()) {
            int i = type.ordinal();
            double scaled = applied(nextTable, nextFactor, type);
            boolean paused = scaled <= 0.0 && epochFactors[i] > 0.0;
            if (paused || scaled < EPOCH_DROP * epochFactors[i]) {
                nextEpochs[i] = epochs[i] + 1;
                nextEpochFactors[i] = scaled;
            } else {
                nextEpochFactors[i] = Math.max(epochFactors[i], scaled);
            }
        }
        return new QuotaView(nextMode, nextService, nextTable, nextFactor, nextExpiry, nextEpochs, nextEpochFactors);
    }
}
