package io.kafkathrottle.shim;

import java.util.Map;

import org.apache.kafka.server.quota.ClientQuotaType;

/**
 * Quota resolution, the same rules as the service's app/quotas/resolution.py (the shared vectors
 * in tests/quota_vectors.json keep the two in step). Pure, allocation-light: Kafka asks on
 * every request.
 *
 * <p>The order is the table's {@code precedence}, as the service sends it; each type is resolved
 * on its own. Excluded principals never throttled, with tags of their own.
 */
final class QuotaResolver {
    static final String USER_TAG = "user";
    static final String CLIENT_ID_TAG = "client-id";
    static final String GROUP_TAG = "quota-group";
    private static final Map<String, String> SHARED_TAGS = Map.of(USER_TAG, "", CLIENT_ID_TAG, "");
    /**
     * The controller-mutation quota (partitions per second) Kafka is given at the metadata volumes'
     * hard limit. Kafka 4.1's token bucket admits a request while it is not in debt and refuses the
     * rest with a throttle of debt / quota: a quota of 0 makes that infinite, which Kafka rounds to
     * Long.MAX_VALUE and casts to a negative int. At this rate a debt of d partitions is refused
     * for 100 d seconds: longer than an Admin client's default API timeout (60 s), so it gives up
     * with THROTTLING_QUOTA_EXCEEDED instead of retrying into an admission, and finite (at most
     * 11.6 days, under 2^31 ms) for the 10,000 partitions a controller takes in one request.
     * See docs/shim.md.
     */
    static final double REFUSING_MUTATION_RATE = 0.01;

    private QuotaResolver() {
    }

    static Resolution resolve(QuotaTable table, String user, String clientId, ClientQuotaType type, double factor) {
        boolean named = !user.isEmpty();
        boolean hasClient = !clientId.isEmpty();
        for (QuotaLevel level : table.precedence) {
            Resolution found = switch (level) {
                case EXCLUDED -> table.excluded.contains(user)
                        ? new Resolution(type, level.wireName, null, null, null, 1.0, null, Map.of(USER_TAG, user, CLIENT_ID_TAG, clientId))
                        : null;
                case USER_CLIENT -> named && hasClient ? override(table, user, clientId, user, clientId, type, factor) : null;
                case USER_DEFAULT_CLIENT -> named ? override(table, user, EntityKey.DEFAULT, user, clientId, type, factor) : null;
                case USER -> named ? override(table, user, null, user, clientId, type, factor) : null;
                case GROUP -> group(table, user, clientId, type, factor);
                case DEFAULT_USER_CLIENT -> hasClient ? override(table, EntityKey.DEFAULT, clientId, user, clientId, type, factor) : null;
                case DEFAULT_USER_DEFAULT_CLIENT -> override(table, EntityKey.DEFAULT, EntityKey.DEFAULT, user, clientId, type, factor);
                case DEFAULT_USER -> override(table, EntityKey.DEFAULT, null, user, clientId, type, factor);
                case CLIENT -> hasClient ? override(table, null, clientId, user, clientId, type, factor) : null;
                case DEFAULT_CLIENT -> override(table, null, EntityKey.DEFAULT, user, clientId, type, factor);
                case DEFAULTS -> table.defaults.containsKey(type)
                        ? withFactor(table, type, level.wireName, null, null, table.defaults.get(type), factor, SHARED_TAGS)
                        : null;
                case UNLIMITED -> withFactor(table, type, level.wireName, null, null, null, factor, SHARED_TAGS);
            };
            if (found != null) {
                return found;
            }
        }
        return withFactor(table, type, QuotaLevel.UNLIMITED.wireName, null, null, null, factor, SHARED_TAGS);
    }

    /**
     * The limit of a quota metric with these tags (without the shim's epoch tag), or null when no
     * client resolves to them any more. Tags of the (user, client-id) shape name exactly one
     * pair, so that pair is resolved; the other shapes look up the entity that gives them.
     * Where Kafka's tag scheme itself lets two levels share tags (an empty client id under a
     * (user, default client-id) quota and the (user) level), the empty client id's answer wins.
     */
    static Double limitForTags(QuotaTable table, ClientQuotaType type, Map<String, String> tags, double factor) {
        return limitForTags(table, type, tags, factor, 1.0);
    }

    /**
     * The same with the floor raised {@code floorGrowth} times: Kafka's bound in a fresh quota
     * epoch (see {@link FactorTrack#floorGrowth}).
     */
    static Double limitForTags(QuotaTable table, ClientQuotaType type, Map<String, String> tags, double factor, double floorGrowth) {
        Double[] base = baseForTags(table, type, tags);
        return base == null ? null : applyFactor(table, type, base[0], factor, floorGrowth)[1];
    }

    /**
     * The bound Kafka's sensors with these tags are given (without the shim's epoch tag), or null
     * when no client resolves to them any more. {@code typeFactor} is this type's factor as the
     * view decided it (1 for a type the table does not scale; for controller mutations the lower of
     * the factor and the mutation factor). With {@code refusingMutations} (the metadata volumes'
     * hard limit) a controller-mutation quota is the refusing rate, or the configured one if lower.
     */
    static Double kafkaLimit(QuotaTable table, ClientQuotaType type, Map<String, String> tags, double typeFactor, double floorGrowth,
            boolean refusingMutations) {
        Double[] base = baseForTags(table, type, tags);
        if (base == null) {
            return null;
        }
        if (type == ClientQuotaType.CONTROLLER_MUTATION) {
            if (refusingMutations) {
                return base[0] == null ? REFUSING_MUTATION_RATE : Math.min(base[0], REFUSING_MUTATION_RATE);
            }
            return scaled(table.floors.get(type) * floorGrowth, base[0], typeFactor)[1];
        }
        return applyFactor(table, type, base[0], typeFactor, floorGrowth)[1];
    }

    /**
     * The base quota behind a metric's tags as a one-element array (its element null: unlimited),
     * or null when no client resolves to these tags any more. Tags of the (user, client-id) shape
     * name exactly one pair, so that pair is resolved; the other shapes look up the entity that
     * gives them. Where Kafka's tag scheme itself lets two levels share tags (an empty client id
     * under a (user, default client-id) quota and the (user) level), the empty client id's answer wins.
     */
    private static Double[] baseForTags(QuotaTable table, ClientQuotaType type, Map<String, String> tags) {
        String groupName = tags.get(GROUP_TAG);
        if (groupName != null) {
            QuotaTable.Group group = table.groups.get(groupName);
            Double base = group == null ? null : group.limits().get(type);
            return base == null ? null : new Double[] {base};
        }
        String user = tags.getOrDefault(USER_TAG, "");
        String clientId = tags.getOrDefault(CLIENT_ID_TAG, "");
        if (!user.isEmpty() && table.excluded.contains(user)) {
            return null;
        }
        if (!user.isEmpty()) {
            Resolution resolution = resolve(table, user, clientId, type, 1.0);
            if (resolution.tags().equals(tags)) {
                return new Double[] {resolution.baseLimit()};
            }
            if (!clientId.isEmpty()) {
                return null;
            }
            return namedOrDefault(table, new EntityKey(user, null), new EntityKey(EntityKey.DEFAULT, null), type);
        }
        if (!clientId.isEmpty()) {
            return namedOrDefault(table, new EntityKey(null, clientId), new EntityKey(null, EntityKey.DEFAULT), type);
        }
        // Every client matches (default client-id) before the defaults, so when it sets this type,
        // only empty client ids (tagged like the defaults) can be here.
        Double base = value(table, null, EntityKey.DEFAULT, type);
        return new Double[] {base != null ? base : table.defaults.get(type)};
    }

    /**
     * {factor applied, effective limit}. A throttled limit never falls below the floor (Kafka
     * divides by it), nor is raised above the base by it; unlimited stays unlimited unless the
     * factor is 0, where a pause must pause.
     */
    static Double[] applyFactor(QuotaTable table, ClientQuotaType type, Double base, double factor) {
        return applyFactor(table, type, base, factor, 1.0);
    }

    private static Double[] applyFactor(QuotaTable table, ClientQuotaType type, Double base, double factor, double floorGrowth) {
        if (!table.factorTypes.contains(type)) {
            return new Double[] {1.0, base};
        }
        return scaled(table.floors.get(type) * floorGrowth, base, factor);
    }

    /** {factor applied, effective limit} of a quota the factor applies to (see {@link #applyFactor}). */
    private static Double[] scaled(double floor, Double base, double factor) {
        if (factor >= 1.0) {
            return new Double[] {1.0, base};
        }
        if (base == null) {
            return new Double[] {factor, factor <= 0.0 ? floor : null};
        }
        return new Double[] {factor, Math.max(base * factor, Math.min(floor, base))};
    }

    /** The base of the named entity's quota, else of its kind's default entity (as {base}); null: neither sets one. */
    private static Double[] namedOrDefault(QuotaTable table, EntityKey named, EntityKey fallback, ClientQuotaType type) {
        Double base = value(table, named.user(), named.clientId(), type);
        if (base == null) {
            base = value(table, fallback.user(), fallback.clientId(), type);
        }
        return base == null ? null : new Double[] {base};
    }

    private static Double value(QuotaTable table, String user, String clientId, ClientQuotaType type) {
        Map<ClientQuotaType, Double> limits = table.overrides.get(new EntityKey(user, clientId));
        return limits == null ? null : limits.get(type);
    }

    private static Resolution override(QuotaTable table, String entityUser, String entityClient, String user, String clientId,
            ClientQuotaType type, double factor) {
        EntityKey entity = new EntityKey(entityUser, entityClient);
        Map<ClientQuotaType, Double> limits = table.overrides.get(entity);
        Double base = limits == null ? null : limits.get(type);
        if (base == null) {
            return null;
        }
        Map<String, String> tags;
        if (entity.userLevel()) {
            tags = Map.of(USER_TAG, user, CLIENT_ID_TAG, "");
        } else if (entity.clientLevel()) {
            tags = Map.of(USER_TAG, "", CLIENT_ID_TAG, clientId);
        } else {
            tags = Map.of(USER_TAG, user, CLIENT_ID_TAG, clientId);
        }
        return withFactor(table, type, entity.level(), entity, null, base, factor, tags);
    }

    private static Resolution group(QuotaTable table, String user, String clientId, ClientQuotaType type, double factor) {
        String name = table.userGroups.get(user);
        if (name == null) {
            name = table.clientGroups.get(clientId);
        }
        if (name == null) {
            return null;
        }
        Double base = table.groups.get(name).limits().get(type);
        if (base == null) {
            return null;
        }
        Map<String, String> tags = Map.of(USER_TAG, "", CLIENT_ID_TAG, "", GROUP_TAG, name);
        return withFactor(table, type, QuotaLevel.GROUP.wireName, null, name, base, factor, tags);
    }

    private static Resolution withFactor(QuotaTable table, ClientQuotaType type, String level, EntityKey entity, String group, Double base,
            double factor, Map<String, String> tags) {
        Double[] applied = applyFactor(table, type, base, factor);
        return new Resolution(type, level, entity, group, base, applied[0], applied[1], tags);
    }
}
