package io.kafkathrottle.shim;

/**
 * Where a quota can come from, under the names the service's table uses. The service states
 * the resolution order and sends it in every table ({@code precedence}); the shim follows it.
 * The declaration order here is only the order before the first table arrives, pinned to the
 * service's by the shared vectors (tests/quota_vectors.json).
 */
enum QuotaLevel {
    EXCLUDED("excluded principal"),
    USER_CLIENT("user, client-id"),
    USER_DEFAULT_CLIENT("user, default client-id"),
    USER("user"),
    GROUP("group"),
    DEFAULT_USER_CLIENT("default user, client-id"),
    DEFAULT_USER_DEFAULT_CLIENT("default user, default client-id"),
    DEFAULT_USER("default user"),
    CLIENT("client-id"),
    DEFAULT_CLIENT("default client-id"),
    DEFAULTS("defaults"),
    UNLIMITED("unlimited");

    final String wireName;

    QuotaLevel(String wireName) {
        this.wireName = wireName;
    }

    static QuotaLevel fromWire(String name) {
        for (QuotaLevel level : values()) {
            if (level.wireName.equals(name)) {
                return level;
            }
        }
        throw new IllegalArgumentException("unknown precedence level '" + name + "'");
    }
}
