package io.kafkathrottle.shim;

import java.util.Map;

import org.apache.kafka.server.quota.ClientQuotaType;

/**
 * The quota of one client for one type, as the service's {@code /quotas/resolve} answers it.
 *
 * @param baseLimit the configured quota before the factor; null: unlimited
 * @param factor    the factor applied to this type (1.0 when it does not apply)
 * @param limit     the limit the broker enforces; null: unlimited
 * @param tags      metric tags: clients with equal tags share one quota
 */
record Resolution(ClientQuotaType type, String level, EntityKey entity, String group, Double baseLimit, double factor, Double limit,
        Map<String, String> tags) {
}
