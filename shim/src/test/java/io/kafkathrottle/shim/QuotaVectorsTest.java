package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;

import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** The resolution vectors the service's tests check too (tests/quota_vectors.json). */
class QuotaVectorsTest {
    private static final JsonNode VECTORS = load();

    private static JsonNode load() {
        try {
            return new ObjectMapper().readTree(Path.of(System.getProperty("quota.vectors", "../tests/quota_vectors.json")).toFile());
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the shared quota vectors", e);
        }
    }

    private static QuotaTable table(String name) {
        return QuotaTable.fromJson(VECTORS.get("tables").get(name));
    }

    @TestFactory
    Stream<DynamicTest> sharedResolutionVectors() {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode vector : VECTORS.get("cases")) {
            tests.add(DynamicTest.dynamicTest(vector.get("name").asText(), () -> {
                QuotaTable table = table(vector.get("table").asText());
                ClientQuotaType type = QuotaTypes.fromWire(vector.get("type").asText());
                Resolution resolution = QuotaResolver.resolve(table, vector.get("user").asText(), vector.get("client_id").asText(), type,
                        vector.get("factor").asDouble());
                JsonNode expected = vector.get("expected");
                assertEquals(expected.get("level").asText(), resolution.level(), "level");
                assertEquals(number(expected.get("base_limit")), resolution.baseLimit(), "base_limit");
                assertEquals(number(expected.get("limit")), resolution.limit(), "limit");
                assertEquals(expected.get("factor").asDouble(), resolution.factor(), "factor");
                Map<String, String> tags = new HashMap<>();
                expected.get("tags").properties().forEach(e -> tags.put(e.getKey(), e.getValue().asText()));
                assertEquals(tags, resolution.tags(), "tags");
                // What the broker asks later with those tags must give the same limit.
                assertEquals(resolution.limit(), QuotaResolver.limitForTags(table, type, resolution.tags(), vector.get("factor").asDouble()),
                        "limit looked up by tags");
            }));
        }
        assertTrue(tests.size() >= 27, "the shared vectors went missing");
        return tests.stream();
    }

    @Test
    void limitByTagsAgreesWithResolutionOnRandomTables() {
        Random random = new Random(7);
        String[] users = {"alice", "bob", "carol", "<default>"};
        String[] clients = {"app-1", "app-2", "etl", "<default>"};
        int checked = 0;
        int collisions = 0;
        for (int round = 0; round < 300; round++) {
            Map<EntityKey, Map<ClientQuotaType, Double>> overrides = new HashMap<>();
            for (int i = 0; i < 6; i++) {
                String user = random.nextInt(3) == 0 ? null : users[random.nextInt(users.length)];
                String client = user != null && random.nextBoolean() ? null : clients[random.nextInt(clients.length)];
                Map<ClientQuotaType, Double> limits = new java.util.EnumMap<>(ClientQuotaType.class);
                limits.put(ClientQuotaType.values()[random.nextInt(2)], 1000.0 * (1 + random.nextInt(50)));
                overrides.put(new EntityKey(user, client), limits);
            }
            Map<String, QuotaTable.Group> groups = new HashMap<>();
            if (random.nextBoolean()) {
                groups.put("g", new QuotaTable.Group("g", java.util.Set.of("bob"), java.util.Set.of("etl"),
                        Map.of(ClientQuotaType.PRODUCE, 7777.0)));
            }
            Map<ClientQuotaType, Double> defaults = random.nextBoolean() ? Map.of(ClientQuotaType.PRODUCE, 1e7) : Map.of();
            QuotaTable table = new QuotaTable(new java.util.EnumMap<>(ClientQuotaType.class) {
                {
                    putAll(defaults);
                }
            }, overrides, groups, java.util.Set.of("ops"), java.util.EnumSet.of(ClientQuotaType.PRODUCE), QuotaTable.DEFAULT_FLOORS);
            double factor = new double[] {1.0, 0.5, 0.0}[random.nextInt(3)];
            for (String user : new String[] {"alice", "bob", "carol", "dave", "ops"}) {
                for (String client : new String[] {"app-1", "app-2", "etl", "other", ""}) {
                    for (ClientQuotaType type : new ClientQuotaType[] {ClientQuotaType.PRODUCE, ClientQuotaType.FETCH}) {
                        Resolution resolution = QuotaResolver.resolve(table, user, client, type, factor);
                        Resolution emptyClient = QuotaResolver.resolve(table, user, "", type, factor);
                        if (!client.isEmpty() && emptyClient.tags().equals(resolution.tags()) && !emptyClient.level().equals(resolution.level())) {
                            // Kafka's tag scheme gives both the same tags; the empty client id's limit wins (documented)
                            assertEquals(emptyClient.limit(), QuotaResolver.limitForTags(table, type, resolution.tags(), factor));
                            collisions++;
                            checked++;
                            continue;
                        }
                        assertEquals(resolution.limit(), QuotaResolver.limitForTags(table, type, resolution.tags(), factor),
                                () -> user + "/" + client + " " + type + " " + resolution);
                        checked++;
                    }
                }
            }
        }
        assertEquals(300 * 5 * 5 * 2, checked);
        assertTrue(collisions < checked / 20, "collisions are the rare case: " + collisions);
    }

    @Test
    void tagsThatNoClientResolvesToAnyMoreHaveNoLimit() {
        QuotaTable table = table("levels");
        // alice/app-1 takes its fetch quota from the (user) level, so these tags are not in use
        assertNull(QuotaResolver.limitForTags(table, ClientQuotaType.FETCH, Map.of("user", "alice", "client-id", "app-1"), 1.0));
        assertNull(QuotaResolver.limitForTags(table, ClientQuotaType.PRODUCE, Map.of("user", "", "client-id", "", "quota-group", "gone"), 1.0));
    }

    private static Double number(JsonNode node) {
        return node == null || node.isNull() ? null : node.asDouble();
    }

    @Test
    void theTableBeforeTheServiceAnswersHasTheServicesDefaults() {
        QuotaTable empty = QuotaTable.empty();
        JsonNode defaults = VECTORS.get("shim_defaults");
        defaults.get("floors").properties()
                .forEach(e -> assertEquals(e.getValue().asDouble(), empty.floors.get(QuotaTypes.fromWire(e.getKey())), "floor " + e.getKey()));
        List<String> factorTypes = new ArrayList<>();
        defaults.get("factor_types").forEach(t -> factorTypes.add(t.asText()));
        assertEquals(factorTypes, empty.factorTypes.stream().map(QuotaTypes::wireName).toList());
        List<String> precedence = new ArrayList<>();
        VECTORS.get("precedence").forEach(level -> precedence.add(level.asText()));
        assertEquals(precedence, QuotaTable.DEFAULT_PRECEDENCE.stream().map(level -> level.wireName).toList());
    }

    @Test
    void stateNamesAreTheServices() {
        for (JsonNode state : VECTORS.get("states")) {
            assertEquals(state.get("state").asText(), QuotaView.starting(state.get("factor").asDouble(), QuotaWindow.KAFKA_DEFAULT, 0L).state(),
                    state.toString());
        }
    }

    @Test
    void resolutionFollowsThePrecedenceTheTableSends() {
        com.fasterxml.jackson.databind.node.ObjectNode json = VECTORS.get("tables").get("levels").deepCopy();
        // A table that puts the default user before the user's own levels: the shim obeys it.
        json.putArray("precedence").add("default user").add("user").add("defaults").add("unlimited");
        QuotaTable table = QuotaTable.fromJson(json);
        assertEquals("default user", QuotaResolver.resolve(table, "alice", "app-1", ClientQuotaType.FETCH, 1.0).level());
        assertEquals("user", QuotaResolver.resolve(QuotaTable.fromJson(VECTORS.get("tables").get("levels")), "alice", "app-1", ClientQuotaType.FETCH,
                1.0).level());
        json.putArray("precedence").add("user").add("nonsense");
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> QuotaTable.fromJson(json));
        json.putArray("precedence");
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> QuotaTable.fromJson(json));
    }
}
