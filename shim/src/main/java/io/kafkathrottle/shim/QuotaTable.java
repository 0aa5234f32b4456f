package io.kafkathrottle.shim;

import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import org.apache.kafka.server.quota.ClientQuotaType;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Everything needed to resolve the quota of any (user, client id, type): the table part of the
 * service's {@code GET /quotas}, possibly merged with the quotas Kafka itself holds. Immutable.
 */
final class QuotaTable {
    /** The service's default floors (throttle.service.quota.floor.*), used before any table arrived. */
    static final Map<ClientQuotaType, Double> DEFAULT_FLOORS = floors(65536.0, 65536.0, 1.0, 1.0);
    /** The resolution order before any table arrived (every table from the service carries its own). */
    static final List<QuotaLevel> DEFAULT_PRECEDENCE = List.of(QuotaLevel.values());

    record Group(String name, Set<String> users, Set<String> clientIds, Map<ClientQuotaType, Double> limits) {
    }

    final Map<ClientQuotaType, Double> defaults;
    final Map<EntityKey, Map<ClientQuotaType, Double>> overrides;
    final Map<String, Group> groups;
    final Set<String> excluded; // user names, without "User:"
    final Set<ClientQuotaType> factorTypes;
    final Map<ClientQuotaType, Double> floors;
    final List<QuotaLevel> precedence;
    final Map<String, String> userGroups;
    final Map<String, String> clientGroups;

    QuotaTable(Map<ClientQuotaType, Double> defaults, Map<EntityKey, Map<ClientQuotaType, Double>> overrides, Map<String, Group> groups,
            Set<String> excluded, Set<ClientQuotaType> factorTypes, Map<ClientQuotaType, Double> floors) {
        this(defaults, overrides, groups, excluded, factorTypes, floors, DEFAULT_PRECEDENCE);
    }

    QuotaTable(Map<ClientQuotaType, Double> defaults, Map<EntityKey, Map<ClientQuotaType, Double>> overrides, Map<String, Group> groups,
            Set<String> excluded, Set<ClientQuotaType> factorTypes, Map<ClientQuotaType, Double> floors, List<QuotaLevel> precedence) {
        this.defaults = Collections.unmodifiableMap(defaults);
        this.overrides = Collections.unmodifiableMap(overrides);
        this.groups = Collections.unmodifiableMap(groups);
        this.excluded = Collections.unmodifiableSet(excluded);
        this.factorTypes = Collections.unmodifiableSet(factorTypes);
        this.floors = Collections.unmodifiableMap(floors);
        this.precedence = List.copyOf(precedence);
        Map<String, String> byUser = new HashMap<>();
        Map<String, String> byClient = new HashMap<>();
        for (Group group : groups.values()) {
            group.users().forEach(user -> byUser.put(user, group.name()));
            group.clientIds().forEach(client -> byClient.put(client, group.name()));
        }
        this.userGroups = byUser;
        this.clientGroups = byClient;
    }

    /** The table before the service has answered: no quotas of its own, produce scaled by the factor. */
    static QuotaTable empty() {
        return new QuotaTable(new EnumMap<>(ClientQuotaType.class), Map.of(), Map.of(), Set.of(), EnumSet.of(ClientQuotaType.PRODUCE),
                DEFAULT_FLOORS);
    }

    /** Parses the table part of GET /quotas; throws IllegalArgumentException on a malformed table. */
    static QuotaTable fromJson(JsonNode json) {
        Map<EntityKey, Map<ClientQuotaType, Double>> overrides = new HashMap<>();
        for (JsonNode override : array(json, "overrides")) {
            JsonNode entity = required(override, "entity");
            EntityKey key = new EntityKey(text(entity.get("user")), text(entity.get("client_id")));
            overrides.put(key, limits(required(override, "limits")));
        }
        Map<String, Group> groups = new HashMap<>();
        for (JsonNode group : array(json, "groups")) {
            String name = required(group, "name").asText();
            groups.put(name, new Group(name, strings(group, "users"), strings(group, "client_ids"), limits(required(group, "limits"))));
        }
        Set<String> excluded = new HashSet<>();
        for (String principal : strings(json, "excluded_principals")) {
            excluded.add(principal.startsWith("User:") ? principal.substring("User:".length()) : principal);
        }
        EnumSet<ClientQuotaType> factorTypes = EnumSet.noneOf(ClientQuotaType.class);
        for (String type : strings(json, "factor_types")) {
            factorTypes.add(QuotaTypes.fromWire(type));
        }
        Map<ClientQuotaType, Double> floors = new EnumMap<>(DEFAULT_FLOORS);
        if (json.hasNonNull("floors")) {
            floors.putAll(limits(json.get("floors")));
        }
        List<QuotaLevel> precedence = DEFAULT_PRECEDENCE;
        if (json.hasNonNull("precedence")) {
            precedence = new ArrayList<>();
            for (JsonNode level : array(json, "precedence")) {
                precedence.add(QuotaLevel.fromWire(level.asText()));
            }
            if (precedence.isEmpty()) {
                throw new IllegalArgumentException("'precedence' lists no level");
            }
        }
        JsonNode defaults = json.get("defaults");
        return new QuotaTable(defaults == null || defaults.isNull() ? new EnumMap<>(ClientQuotaType.class) : limits(defaults), overrides, groups,
                excluded, factorTypes, floors, precedence);
    }

    /**
     * This table with quotas Kafka holds (kafka-configs, via updateQuota) filling in what the table
     * does not set: per entity and type, the table's value wins; precedence then picks the most
     * specific entity as usual, so a Kafka quota for a user beats the table's default-user quota.
     */
    QuotaTable withKafkaQuotas(Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas) {
        if (kafkaQuotas.isEmpty()) {
            return this;
        }
        Map<EntityKey, Map<ClientQuotaType, Double>> merged = new HashMap<>();
        kafkaQuotas.forEach((entity, limits) -> merged.put(entity, new EnumMap<>(limits)));
        overrides.forEach((entity, limits) -> merged.computeIfAbsent(entity, e -> new EnumMap<>(ClientQuotaType.class)).putAll(limits));
        return new QuotaTable(defaults, merged, groups, excluded, factorTypes, floors, precedence);
    }

    /** Whether every quota of this type resolves the same in both tables (for the same factor). */
    boolean sameFor(ClientQuotaType type, QuotaTable other) {
        return Objects.equals(defaults.get(type), other.defaults.get(type))
                && excluded.equals(other.excluded)
                && factorTypes.contains(type) == other.factorTypes.contains(type)
                && Objects.equals(floors.get(type), other.floors.get(type))
                && precedence.equals(other.precedence)
                && projection(type).equals(other.projection(type))
                && groupProjection(type).equals(other.groupProjection(type));
    }

    private Map<EntityKey, Double> projection(ClientQuotaType type) {
        Map<EntityKey, Double> values = new HashMap<>();
        overrides.forEach((entity, limits) -> {
            Double value = limits.get(type);
            if (value != null) {
                values.put(entity, value);
            }
        });
        return values;
    }

    private Map<String, Group> groupProjection(ClientQuotaType type) {
        // Membership matters even for groups without this type: a member stops at its group's level.
        Map<String, Group> values = new HashMap<>();
        groups.forEach((name, group) -> {
            Double value = group.limits().get(type);
            Map<ClientQuotaType, Double> limit = new EnumMap<>(ClientQuotaType.class);
            if (value != null) {
                limit.put(type, value);
            }
            values.put(name, new Group(name, group.users(), group.clientIds(), limit));
        });
        return values;
    }

    private static Map<ClientQuotaType, Double> floors(double produce, double fetch, double request, double mutation) {
        Map<ClientQuotaType, Double> floors = new EnumMap<>(ClientQuotaType.class);
        floors.put(ClientQuotaType.PRODUCE, produce);
        floors.put(ClientQuotaType.FETCH, fetch);
        floors.put(ClientQuotaType.REQUEST, request);
        floors.put(ClientQuotaType.CONTROLLER_MUTATION, mutation);
        return Collections.unmodifiableMap(floors);
    }

    static Map<ClientQuotaType, Double> limits(JsonNode node) {
        if (!node.isObject()) {
            throw new IllegalArgumentException("limits must be an object, got " + node);
        }
        Map<ClientQuotaType, Double> limits = new EnumMap<>(ClientQuotaType.class);
        for (Map.Entry<String, JsonNode> field : node.properties()) {
            if (field.getValue().isNull()) {
                continue;
            }
            if (!field.getValue().isNumber() || !(field.getValue().asDouble() > 0) || Double.isInfinite(field.getValue().asDouble())) {
                throw new IllegalArgumentException("quota " + field.getKey() + " must be a number > 0, got " + field.getValue());
            }
            limits.put(QuotaTypes.fromWire(field.getKey()), field.getValue().asDouble());
        }
        return limits;
    }

    private static String text(JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (!node.isTextual() || node.asText().isEmpty()) {
            throw new IllegalArgumentException("entity names must be non-empty strings, got " + node);
        }
        return node.asText();
    }

    private static JsonNode required(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException("missing field '" + field + "'");
        }
        return value;
    }

    private static Iterable<JsonNode> array(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) {
            return Set.of();
        }
        if (!value.isArray()) {
            throw new IllegalArgumentException("'" + field + "' must be an array");
        }
        return value;
    }

    private static Set<String> strings(JsonNode node, String field) {
        Set<String> values = new HashSet<>();
        for (JsonNode value : array(node, field)) {
            values.add(value.asText());
        }
        return values;
    }
}
