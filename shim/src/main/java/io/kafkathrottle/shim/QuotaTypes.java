package io.kafkathrottle.shim;

import java.util.Locale;

import org.apache.kafka.server.quota.ClientQuotaType;

/** Kafka's quota types under the names the service's JSON uses. */
final class QuotaTypes {
    private QuotaTypes() {
    }

    static String wireName(ClientQuotaType type) {
        return type.name().toLowerCase(Locale.ROOT);
    }

    static ClientQuotaType fromWire(String name) {
        for (ClientQuotaType type : ClientQuotaType.values()) {
            if (wireName(type).equals(name)) {
                return type;
            }
        }
        throw new IllegalArgumentException("unknown quota type '" + name + "'");
    }
}
