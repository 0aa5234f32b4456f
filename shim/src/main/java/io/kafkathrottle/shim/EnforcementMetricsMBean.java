package io.kafkathrottle.shim;

/**
 * What one broker's shim applies and would apply, as JMX attributes of
 * {@code io.kafkathrottle.shim:type=Enforcement,broker=<broker id>}.
 */
public interface EnforcementMetricsMBean {
    /** The factor the shim applies to the factor's quota types: the decision's when enforcing, 1.0 in shadow, the fallback without a table. */
    double getAppliedFactor();

    /** The factor the decision asks for: what the shim would apply if it enforced. */
    double getWouldApplyFactor();

    /**
     * The metadata volumes' factor the shim applies to controller-mutation quotas: the decision's
     * when enforcing, 1.0 in shadow and without a valid table; 0.0 is the hard limit (mutations refused).
     */
    double getAppliedMutationFactor();

    /** The mutation factor the decision asks for: what the shim would apply if it enforced. */
    double getWouldApplyMutationFactor();

    /** Whether the shim enforces: false in shadow mode and on brokers outside the canary list. */
    boolean isEnforcing();

    /** The broker id the shim learned from the broker's configuration (-1: unknown). */
    int getBrokerId();
}
