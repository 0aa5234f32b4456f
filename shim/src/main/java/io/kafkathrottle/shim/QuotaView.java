package io.kafkathrottle.shim;

import java.util.Map;

import org.apache.kafka.server.quota.ClientQuotaType;

/**
 * What the broker's quota managers see at one moment: the table (the service's, merged with
 * Kafka's own quotas), the factor in force, where it came from, when it expires, whether this
 * broker enforces the service's factor (in shadow it applies 1.0 and keeps the factor it would
 * have applied), and for each
 * quota type its {@link FactorTrack}: the quota epoch (a metric tag, so a new epoch means fresh
 * Kafka sensors) and the factor Kafka's sensors are given, as of the view's time. Immutable; the
 * feed swaps whole views, on every change and, while some type's Kafka factor moves with time,
 * every quarter of a quota sample.
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

    static final long NO_EXPIRY = Long.MIN_VALUE;
    private static final ClientQuotaType[] TYPES = ClientQuotaType.values();

    final Mode mode;
    final ServiceTable service; // the last table the service sent; null before the first
    final QuotaTable table; // the service's table (or an empty one) merged with Kafka's quotas
    final double factor; // the factor this broker applies
    final double wouldFactor; // the factor the decision asks for: equal to factor unless in shadow
    final double mutationFactor; // the metadata volumes' factor this broker applies to controller mutations
    final double wouldMutationFactor; // and the one the decision asks for
    final boolean enforcing; // false in shadow: the service's table says this broker does not enforce
    final long expiresAtNanos; // NO_EXPIRY: does not expire
    final QuotaWindow window;
    private final FactorTrack[] tracks;
    private final double[] kafkaFactors; // each type's factor for Kafka's sensors, as of the view's time
    private final double[] floorGrowths; // and how far each type's floor has grown
    private final String[] epochTags;

    private QuotaView(Mode mode, ServiceTable service, QuotaTable table, double wouldFactor, double wouldMutationFactor, boolean enforcing,
            long expiresAtNanos, QuotaWindow window, FactorTrack[] tracks, long asOfNanos) {
        this.mode = mode;
        this.service = service;
        this.table = table;
        this.wouldFactor = wouldFactor;
        this.wouldMutationFactor = wouldMutationFactor;
        this.enforcing = enforcing;
        this.factor = enforcing ? wouldFactor : 1.0;
        this.mutationFactor = enforcing ? wouldMutationFactor : 1.0;
        this.expiresAtNanos = expiresAtNanos;
        this.window = window;
        this.tracks = tracks;
        this.kafkaFactors = new double[TYPES.length];
        this.floorGrowths = new double[TYPES.length];
        this.epochTags = new String[TYPES.length];
        for (int i = 0; i < TYPES.length; i++) {
            kafkaFactors[i] = tracks[i].kafkaFactor(asOfNanos, window);
            floorGrowths[i] = tracks[i].floorGrowth(asOfNanos, window);
            epochTags[i] = Long.toString(tracks[i].epoch);
        }
    }

    static QuotaView starting(double fallbackFactor, QuotaWindow window, long nowNanos) {
        QuotaTable empty = QuotaTable.empty();
        FactorTrack[] tracks = new FactorTrack[TYPES.length];
        for (ClientQuotaType type : TYPES) {
            // Controller mutations are a token bucket in Kafka, the other types a sample window.
            tracks[type.ordinal()] = FactorTrack.starting(applied(empty, fallbackFactor, 1.0, type), type != ClientQuotaType.CONTROLLER_MUTATION);
        }
        return new QuotaView(Mode.STARTING, null, empty, fallbackFactor, 1.0, true, NO_EXPIRY, window, tracks, nowNanos);
    }

    /** The view after a new table from the service, on broker {@code brokerId} (which may be in shadow). */
    QuotaView withService(ServiceTable next, long expiresAtNanos, Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas, int brokerId,
            long nowNanos) {
        return successor(Mode.SERVICE, next, next.table().withKafkaQuotas(kafkaQuotas), next.factor(), next.mutationFactor(),
                next.enforcesOn(brokerId), expiresAtNanos, nowNanos);
    }

    /** The same view with Kafka's own quotas changed. */
    QuotaView withKafkaQuotas(Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas, long nowNanos) {
        QuotaTable base = service == null ? QuotaTable.empty() : service.table();
        return successor(mode, service, base.withKafkaQuotas(kafkaQuotas), wouldFactor, wouldMutationFactor, enforcing, expiresAtNanos, nowNanos);
    }

    /** The service unreachable: its last table, and its enforcement, are kept until they expire. */
    QuotaView kept(long nowNanos) {
        return successor(Mode.KEPT, service, table, wouldFactor, wouldMutationFactor, enforcing, expiresAtNanos, nowNanos);
    }

    /**
     * No valid table: the fallback applies, whatever the enforcement was (the operator chose it for
     * outages). Nothing is known of the metadata volumes then: the mutation factor is 1.
     */
    QuotaView fallback(double fallbackFactor, long nowNanos) {
        return successor(Mode.FALLBACK, service, table, fallbackFactor, 1.0, true, NO_EXPIRY, nowNanos);
    }

    /** The same decisions with Kafka's factors as of {@code nowNanos}. */
    QuotaView at(long nowNanos) {
        return new QuotaView(mode, service, table, wouldFactor, wouldMutationFactor, enforcing, expiresAtNanos, window, tracks, nowNanos);
    }

    /** Whether some type's Kafka factor or floor is different at {@code nowNanos} than in this view. */
    boolean movesBy(long nowNanos) {
        for (int i = 0; i < TYPES.length; i++) {
            if (tracks[i].kafkaFactor(nowNanos, window) != kafkaFactors[i] || tracks[i].floorGrowth(nowNanos, window) != floorGrowths[i]) {
                return true;
            }
        }
        return false;
    }

    boolean expired(long nowNanos) {
        return expiresAtNanos != NO_EXPIRY && nowNanos - expiresAtNanos >= 0;
    }

    /** The factor this type's quotas are scaled by in the decision (1.0 for a type the factor does not apply to). */
    double factorFor(ClientQuotaType type) {
        return tracks[type.ordinal()].factor();
    }

    /** The factor this type's quotas are scaled by for Kafka's sensors now (see {@link FactorTrack}). */
    double kafkaFactor(ClientQuotaType type) {
        return kafkaFactors[type.ordinal()];
    }

    /** How many times the floor this type's quotas have for Kafka's sensors now (see {@link FactorTrack#floorGrowth}). */
    double floorGrowth(ClientQuotaType type) {
        return floorGrowths[type.ordinal()];
    }

    /**
     * Whether controller mutations are at the metadata volumes' hard limit (mutation factor 0):
     * Kafka is then given the refusing rate ({@link QuotaResolver#REFUSING_MUTATION_RATE}), not the floor.
     */
    boolean refusesMutations() {
        return mutationFactor <= 0.0;
    }

    /**
     * The factor a table's quotas of this type are scaled by: the factor for the table's factor
     * types; for controller mutations also the mutation factor, whichever is lower.
     */
    private static double applied(QuotaTable table, double factor, double mutationFactor, ClientQuotaType type) {
        double scaled = table.factorTypes.contains(type) ? Math.min(factor, 1.0) : 1.0;
        return type == ClientQuotaType.CONTROLLER_MUTATION ? Math.min(scaled, mutationFactor) : scaled;
    }

    String epochTag(ClientQuotaType type) {
        return epochTags[type.ordinal()];
    }

    /** Whether any quota limit of this type may differ between the two views. */
    boolean differsFor(ClientQuotaType type, QuotaView other) {
        int i = type.ordinal();
        return kafkaFactors[i] != other.kafkaFactors[i] || floorGrowths[i] != other.floorGrowths[i] || tracks[i].epoch != other.tracks[i].epoch
                || !table.sameFor(type, other.table)
                || type == ClientQuotaType.CONTROLLER_MUTATION && refusesMutations() != other.refusesMutations();
    }

    /** The state of the factor this broker applies. */
    String state() {
        return stateOf(factor);
    }

    /** The state of the factor the decision asks for (the same as {@link #state} unless in shadow). */
    String wouldState() {
        return stateOf(wouldFactor);
    }

    static String stateOf(double factor) {
        return factor >= 1.0 ? "OPEN" : factor <= 0.0 ? "PAUSE" : "THROTTLE";
    }

    private QuotaView successor(Mode nextMode, ServiceTable nextService, QuotaTable nextTable, double nextWould, double nextWouldMutation,
            boolean nextEnforcing, long nextExpiry, long nowNanos) {
        double nextFactor = nextEnforcing ? nextWould : 1.0;
        double nextMutation = nextEnforcing ? nextWouldMutation : 1.0;
        FactorTrack[] next = new FactorTrack[TYPES.length];
        for (ClientQuotaType type : TYPES) {
            next[type.ordinal()] = tracks[type.ordinal()].next(applied(nextTable, nextFactor, nextMutation, type), nowNanos, window);
        }
        return new QuotaView(nextMode, nextService, nextTable, nextWould, nextWouldMutation, nextEnforcing, nextExpiry, window, next, nowNanos);
    }
}
