package io.kafkathrottle.shim;

/**
 * A KIP-55 quota entity: a user and/or a client id, each a name, {@link #DEFAULT} (Kafka's
 * default entity of that kind), or null (not part of the entity).
 */
record EntityKey(String user, String clientId) {
    /** Kafka's name for the default entity, as the service's JSON writes it. */
    static final String DEFAULT = "<default>";

    EntityKey {
        if (user == null && clientId == null) {
            throw new IllegalArgumentException("an entity names a user, a client id, or both");
        }
    }

    /** The KIP-55 level this entity defines, as the service names it. */
    String level() {
        if (user != null && !DEFAULT.equals(user)) {
            if (clientId == null) {
                return "user";
            }
            return DEFAULT.equals(clientId) ? "user, default client-id" : "user, client-id";
        }
        if (user != null) {
            if (clientId == null) {
                return "default user";
            }
            return DEFAULT.equals(clientId) ? "default user, default client-id" : "default user, client-id";
        }
        return DEFAULT.equals(clientId) ? "default client-id" : "client-id";
    }

    /** Whether quotas at this level are shared per user only (client-id tag empty). */
    boolean userLevel() {
        return user != null && clientId == null;
    }

    /** Whether quotas at this level are shared per client id only (user tag empty). */
    boolean clientLevel() {
        return user == null;
    }
}
