package io.kafkathrottle.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.strimzi.api.kafka.model.common.UnknownPropertyPreserving;
import io.strimzi.api.kafka.model.kafka.Kafka;
import io.strimzi.api.kafka.model.kafka.KafkaClusterSpec;
import io.strimzi.api.kafka.model.nodepool.KafkaNodePool;
import io.strimzi.api.kafka.model.nodepool.ProcessRoles;
import io.strimzi.api.kafka.model.topic.KafkaTopic;
import io.strimzi.api.kafka.model.user.KafkaUser;
import io.strimzi.api.kafka.model.user.acl.StrimziAclOperation;
import io.strimzi.api.kafka.model.user.acl.AclRule;
import io.strimzi.api.kafka.model.user.acl.AclRuleGroupResource;
import io.strimzi.api.kafka.model.user.acl.AclRuleTopicResource;
import io.strimzi.api.kafka.model.user.KafkaUserAuthorizationSimple;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.junit.jupiter.api.Test;

/**
 * The resources of deploy/strimzi/ as Strimzi's Cluster and User Operators read them: each
 * document bound to Strimzi's own model classes, and no property left over that the model does
 * not know (Strimzi keeps such properties aside and warns; here they fail). The broker image
 * recipe is held to the built shim: the jar it copies, where Strimzi's image loads jars from,
 * and the callback class and properties the Kafka resource names.
 */
class StrimziResourcesTest {
    private static final Path STRIMZI = Path.of(System.getProperty("strimzi.dir"));
    private static final Path SHIM_JAR = Path.of(System.getProperty("shim.jar"));
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory())
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    private static final String SHIM_PREFIX = "client.quota.callback.service.";

    /** Every *.yaml of deploy/strimzi/, in name order: a file added there is read too. */
    private static List<Path> files() throws Exception {
        try (var listing = Files.list(STRIMZI)) {
            return listing.filter(path -> path.getFileName().toString().endsWith(".yaml")).sorted().toList();
        }
    }

    private static List<JsonNode> documents(String file) throws Exception {
        try (var parser = YAML.getFactory().createParser(STRIMZI.resolve(file).toFile())) {
            List<JsonNode> nodes = new ArrayList<>();
            YAML.readValues(parser, JsonNode.class).forEachRemaining(nodes::add);
            return nodes;
        }
    }

    /** The resources of this kind in every file of deploy/strimzi/. */
    private static <T extends HasMetadata> List<T> read(Class<T> type) throws Exception {
        List<T> found = new ArrayList<>();
        for (Path file : files()) {
            found.addAll(read(file.getFileName().toString(), type));
        }
        return found;
    }

    private static <T extends HasMetadata> List<T> read(String file, Class<T> type) throws Exception {
        List<T> found = new ArrayList<>();
        for (JsonNode node : documents(file)) {
            if (node.get("kind").asText().equals(type.getSimpleName())) {
                found.add(bind(node, type));
            }
        }
        return found;
    }

    /** The document as Strimzi's model reads it, in the API version Strimzi stores and serves first. */
    private static <T extends HasMetadata> T bind(JsonNode node, Class<T> type) throws Exception {
        List<?> versions = (List<?>) type.getField("VERSIONS").get(null);
        assertEquals("kafka.strimzi.io/" + versions.get(0), node.get("apiVersion").asText());
        T resource = YAML.treeToValue(node, type);
        assertNoUnknownProperties(resource, type.getSimpleName());
        return resource;
    }

    /**
     * Every property Strimzi's model kept aside as unknown, and every one it requires that is
     * missing, anywhere in the resource.
     */
    static List<String> unknownProperties(Object value, String path, Map<Object, Boolean> seen) throws Exception {
        List<String> unknown = new ArrayList<>();
        if (value == null || seen.put(value, true) != null) {
            return unknown;
        }
        if (value instanceof Collection<?> items) {
            int i = 0;
            for (Object item : items) {
                unknown.addAll(unknownProperties(item, path + "[" + i++ + "]", seen));
            }
            return unknown;
        }
        String pkg = value.getClass().getPackageName();
        if (!pkg.startsWith("io.strimzi.") && !pkg.startsWith("io.fabric8.")) {
            return unknown; // strings, numbers, the free-form config map
        }
        if (value instanceof UnknownPropertyPreserving preserving && preserving.getAdditionalProperties() != null) {
            preserving.getAdditionalProperties().keySet().forEach(key -> unknown.add(path + "." + key));
        }
        for (Method getter : value.getClass().getMethods()) {
            boolean isGetter = getter.getParameterCount() == 0 && getter.getName().startsWith("get")
                    && !Modifier.isStatic(getter.getModifiers()) && getter.getDeclaringClass() != Object.class
                    && !getter.getName().equals("getAdditionalProperties");
            if (isGetter && !getter.getReturnType().isPrimitive()) {
                Object child = getter.invoke(value);
                JsonProperty property = getter.getAnnotation(JsonProperty.class);
                if (child == null && property != null && property.required()) {
                    unknown.add(path + "." + getter.getName().substring(3) + " (required, missing)");
                }
                if (child instanceof Map<?, ?> map && !getter.getName().equals("getConfig")) {
                    for (var entry : map.entrySet()) {
                        unknown.addAll(unknownProperties(entry.getValue(), path + "." + entry.getKey(), seen));
                    }
                } else if (!(child instanceof Map)) {
                    unknown.addAll(unknownProperties(child, path + "." + getter.getName().substring(3), seen));
                }
            }
        }
        return unknown;
    }

    private static void assertNoUnknownProperties(Object resource, String name) throws Exception {
        List<String> unknown = unknownProperties(resource, name, new IdentityHashMap<>());
        assertTrue(unknown.isEmpty(), "properties Strimzi does not know or misses: " + unknown);
    }

    private static Kafka kafka() throws Exception {
        List<Kafka> clusters = read("kafka.yaml", Kafka.class);
        assertEquals(1, clusters.size());
        return clusters.get(0);
    }

    private static final Map<String, Class<? extends HasMetadata>> MODEL = Map.of(
            "Kafka", Kafka.class, "KafkaNodePool", KafkaNodePool.class, "KafkaTopic", KafkaTopic.class, "KafkaUser", KafkaUser.class);

    @Test
    void everyStrimziDocumentInTheKitIsReadByStrimzisModel() throws Exception {
        List<String> bound = new ArrayList<>();
        for (Path file : files()) {
            for (JsonNode node : documents(file.getFileName().toString())) {
                if (node.get("apiVersion").asText().startsWith("kafka.strimzi.io/")) {
                    Class<? extends HasMetadata> type = MODEL.get(node.get("kind").asText());
                    assertNotNull(type, file.getFileName() + ": a kind this check does not read: " + node.get("kind"));
                    bound.add(bind(node, type).getKind());
                }
            }
        }
        assertTrue(bound.containsAll(MODEL.keySet()), "read: " + bound);
    }

    @Test
    void theKafkaResourceAndItsNodePoolsAreWhatStrimzisModelKnows() throws Exception {
        Kafka kafka = kafka();
        List<KafkaNodePool> pools = read("kafka.yaml", KafkaNodePool.class);
        assertEquals(Set.of(Set.of(ProcessRoles.CONTROLLER), Set.of(ProcessRoles.BROKER)),
                pools.stream().map(pool -> Set.copyOf(pool.getSpec().getRoles())).collect(Collectors.toSet()));
        for (KafkaNodePool pool : pools) {
            assertEquals(kafka.getMetadata().getName(), pool.getMetadata().getLabels().get("strimzi.io/cluster"));
        }
        // Strimzi 1.2.0's default Kafka, which the broker image recipe builds on.
        assertEquals("4.3.1", kafka.getSpec().getKafka().getVersion());
    }

    @Test
    void aMisspeltPropertyFailsTheCheck() throws Exception {
        ObjectNode node = (ObjectNode) documents("kafka.yaml").get(2);
        ((ObjectNode) node.get("spec").get("kafka")).putObject("autorization").put("type", "simple");
        Kafka misspelt = YAML.treeToValue(node, Kafka.class);
        List<String> unknown = unknownProperties(misspelt, "Kafka", new IdentityHashMap<>());
        assertEquals(List.of("Kafka.Spec.Kafka.autorization"), unknown);
    }

    @Test
    void aMissingRequiredPropertyFailsTheCheck() throws Exception {
        ObjectNode node = (ObjectNode) documents("kafka.yaml").get(2);
        ((ObjectNode) node.get("spec").get("kafka")).remove("listeners");
        Kafka incomplete = YAML.treeToValue(node, Kafka.class);
        assertEquals(List.of("Kafka.Spec.Kafka.Listeners (required, missing)"),
                unknownProperties(incomplete, "Kafka", new IdentityHashMap<>()));
    }

    @Test
    void theBrokerConfigurationLoadsTheShimAndPassesStrimzisForbiddenOptions() throws Exception {
        Map<String, Object> config = kafka().getSpec().getKafka().getConfig();
        List<String> forbidden = Arrays.stream(KafkaClusterSpec.FORBIDDEN_PREFIXES.split(",\\s*")).toList();
        List<String> exceptions = Arrays.stream(KafkaClusterSpec.FORBIDDEN_PREFIX_EXCEPTIONS.split(",\\s*")).toList();
        for (String key : config.keySet()) {
            boolean dropped = forbidden.stream().anyMatch(key::startsWith) && !exceptions.contains(key);
            assertFalse(dropped, key + " is an option Strimzi drops from spec.kafka.config");
        }
        assertEquals("http://throttle-service.kafka.svc:8080", config.get(SHIM_PREFIX + "url"));
    }

    @Test
    void theNodeTokenComesFromASecretThroughStrimzisConfigProvider() throws Exception {
        Map<String, Object> config = kafka().getSpec().getKafka().getConfig();
        Matcher reference = Pattern.compile("\\$\\{(\\w+):([a-z0-9-]+)/([a-z0-9.-]+):([\\w.-]+)}")
                .matcher(String.valueOf(config.get(SHIM_PREFIX + "token")));
        assertTrue(reference.matches(), "the token is a config provider's reference, never the value: " + config.get(SHIM_PREFIX + "token"));
        String provider = reference.group(1);
        assertTrue(List.of(String.valueOf(config.get("config.providers")).split(",\\s*")).contains(provider));
        // Strimzi appends its own providers to the list and refuses a resource that reuses their
        // aliases (KafkaBrokerConfigurationBuilder.getConfigProviderAliases).
        assertFalse(Set.of("strimzienv", "strimzisecrets", "strimzifile", "strimzidir").contains(provider), provider + " is Strimzi's");
        assertEquals("io.strimzi.kafka.KubernetesSecretConfigProvider", config.get("config.providers." + provider + ".class"));
        assertEquals(List.of("kafka", "throttle-service-node-token", "token"),
                List.of(reference.group(2), reference.group(3), reference.group(4)));
    }

    @Test
    void theShimJarHoldsTheCallbackClassAndAcceptsEveryPropertyTheResourceSets() throws Exception {
        assertTrue(Files.isRegularFile(SHIM_JAR), "build the shim first: mvn -f shim/pom.xml package");
        Map<String, Object> config = kafka().getSpec().getKafka().getConfig();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {SHIM_JAR.toUri().toURL()}, getClass().getClassLoader())) {
            Class<?> callback = loader.loadClass((String) config.get("client.quota.callback.class"));
            assertTrue(ClientQuotaCallback.class.isAssignableFrom(callback));
            var definition = loader.loadClass("io.kafkathrottle.shim.ShimConfig").getDeclaredField("DEFINITION");
            definition.setAccessible(true);
            ConfigDef shimConfig = (ConfigDef) definition.get(null);
            Map<String, Object> shimProperties = config.entrySet().stream()
                    .filter(entry -> entry.getKey().startsWith(SHIM_PREFIX))
                    .collect(Collectors.toMap(Map.Entry::getKey, entry -> String.valueOf(entry.getValue())));
            assertTrue(shimConfig.names().containsAll(shimProperties.keySet()), "unknown to the shim: " + shimProperties.keySet());
            assertNotNull(shimConfig.parse(shimProperties)); // the shim's own validators
        }
    }

    @Test
    void theImageRecipeCopiesTheBuiltJarWhereStrimzisImageLoadsJars() throws Exception {
        String recipe = Files.readString(STRIMZI.resolve("Containerfile"));
        Matcher base = Pattern.compile("(?m)^FROM quay\\.io/strimzi/kafka:(\\S+)-kafka-(\\S+)$").matcher(recipe);
        assertTrue(base.find(), "the last stage starts from Strimzi's Kafka image");
        assertEquals(kafka().getSpec().getKafka().getVersion(), base.group(2));
        Matcher copy = Pattern.compile("(?m)^COPY --from=shim /src/target/(\\S+) /opt/kafka/libs/(\\S+)$").matcher(recipe);
        assertTrue(copy.find(), "the jar goes to /opt/kafka/libs/");
        assertEquals(SHIM_JAR.getFileName().toString(), copy.group(1));
        assertEquals(copy.group(1), copy.group(2));
        assertTrue(kafka().getSpec().getKafka().getImage().endsWith("-kafka-" + base.group(2)));
    }

    @Test
    void theServiceUserHasTheLeastAclsItNeeds() throws Exception {
        List<KafkaUser> users = read(KafkaUser.class);
        assertEquals(1, users.size());
        KafkaUserAuthorizationSimple authorization = (KafkaUserAuthorizationSimple) users.get(0).getSpec().getAuthorization();
        Map<String, Set<StrimziAclOperation>> byResource = authorization.getAcls().stream().collect(Collectors.toMap(
                rule -> rule.getResource() instanceof AclRuleTopicResource topic ? "topic:" + topic.getName()
                        : rule.getResource() instanceof AclRuleGroupResource group ? "group:" + group.getName() : rule.getResource().getType(),
                (AclRule rule) -> Set.copyOf(rule.getOperations())));
        assertEquals(Map.of(
                "cluster", Set.of(StrimziAclOperation.DESCRIBE),
                "topic:kafka-throttle-quotas", Set.of(StrimziAclOperation.CREATE, StrimziAclOperation.DESCRIBE, StrimziAclOperation.READ, StrimziAclOperation.WRITE),
                "topic:kafka-throttle-quotas-state", Set.of(StrimziAclOperation.CREATE, StrimziAclOperation.DESCRIBE, StrimziAclOperation.READ, StrimziAclOperation.WRITE),
                "group:kafka-throttle-quotas-state-decider", Set.of(StrimziAclOperation.READ),
                "topic:kafka-throttle-history", Set.of(StrimziAclOperation.CREATE, StrimziAclOperation.DESCRIBE, StrimziAclOperation.DESCRIBECONFIGS, StrimziAclOperation.WRITE)), byResource);
    }

    @Test
    void everyTopicOfTheKitIsTheClustersAndTheUserMayWriteIt() throws Exception {
        List<KafkaTopic> topics = read(KafkaTopic.class);
        assertFalse(topics.isEmpty());
        KafkaUser user = read(KafkaUser.class).get(0);
        for (KafkaTopic topic : topics) {
            assertEquals(kafka().getMetadata().getName(), topic.getMetadata().getLabels().get("strimzi.io/cluster"));
            String name = topic.getSpec().getTopicName() != null ? topic.getSpec().getTopicName() : topic.getMetadata().getName();
            boolean writable = ((KafkaUserAuthorizationSimple) user.getSpec().getAuthorization()).getAcls().stream()
                    .anyMatch(rule -> rule.getResource() instanceof AclRuleTopicResource resource
                            && resource.getName().equals(name)
                            && rule.getOperations().contains(StrimziAclOperation.WRITE));
            assertTrue(writable, "the KafkaUser may write the topic " + name);
        }
        // The history topic is kept by time, as the report reads it: a compacted one would keep
        // the latest row of each volume, which is no history.
        KafkaTopic retained = read("kafka-topic-history.yaml", KafkaTopic.class).get(0);
        assertEquals("delete", retained.getSpec().getConfig().get("cleanup.policy"));
        assertEquals("2592000000", String.valueOf(retained.getSpec().getConfig().get("retention.ms")));
    }

    @Test
    void aPropertyStrimzisModelCannotBindFailsTheRead() {
        assertThrows(Exception.class, () -> YAML.readValue("apiVersion: kafka.strimzi.io/v1\nkind: KafkaUser\nspec:\n  authentication:\n    type: scram-sha-1\n", KafkaUser.class));
    }
}
