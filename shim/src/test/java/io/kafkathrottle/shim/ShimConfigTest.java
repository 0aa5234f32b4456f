package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShimConfigTest {
    private static Map<String, Object> with(String... pairs) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ShimConfig.URL, "http://throttle-service:8080/");
        for (int i = 0; i < pairs.length; i += 2) {
            if (pairs[i + 1] == null) {
                configs.remove(pairs[i]);
            } else {
                configs.put(pairs[i], pairs[i + 1]);
            }
        }
        return configs;
    }

    private static String rejected(Map<String, Object> configs) {
        return assertThrows(ConfigException.class, () -> new ServiceQuotaCallback().configure(configs)).getMessage();
    }

    @Test
    void defaults() {
        ShimConfig config = ShimConfig.parse(with());
        assertEquals("http://throttle-service:8080/quotas", config.quotasUri.toString());
        assertEquals(Duration.ofSeconds(5), config.pollInterval);
        assertEquals(Duration.ofSeconds(30), config.longPollWait);
        assertEquals(Duration.ofSeconds(10), config.requestTimeout);
        assertEquals(1.0, config.fallbackFactor);
        assertEquals(Duration.ofMillis(100), config.volumeSampleInterval);
    }

    @Test
    void theVolumeSampleIntervalIsRefusedOutsideItsRangeWithTheRangeNamed() {
        assertEquals(Duration.ofMillis(10), ShimConfig.parse(with(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "10")).volumeSampleInterval);
        assertEquals(Duration.ofMinutes(1), ShimConfig.parse(with(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "60000")).volumeSampleInterval);
        String low = rejected(with(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "9"));
        assertTrue(low.contains(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS) && low.contains("9") && low.contains("at least 10"), low);
        String high = rejected(with(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "60001"));
        assertTrue(high.contains("60001") && high.contains("no more than 60000"), high);
    }

    @Test
    void aNodeReportsItsVolumesUnderItsOwnNodeId() {
        assertEquals("http://throttle-service:8080/nodes/1001/volumes", ShimConfig.parse(with("node.id", "1001")).nodeVolumesUri.toString());
        assertEquals("http://throttle-service:8080/quotas", ShimConfig.parse(with("node.id", "1001")).quotasUri.toString());
    }

    @Test
    void aMissingUrlStopsTheBroker() {
        String message = rejected(with(ShimConfig.URL, null));
        assertTrue(message.contains(ShimConfig.URL), message);
    }

    @Test
    void badValuesNameTheKeyAndTheValue() {
        String[][] cases = {
            {ShimConfig.URL, "ftp://host/x"},
            {ShimConfig.URL, "throttle-service:8080"},
            {ShimConfig.POLL_INTERVAL_MS, "-5"},
            {ShimConfig.POLL_INTERVAL_MS, "soon"},
            {ShimConfig.LONG_POLL_WAIT_MS, "301000"},
            {ShimConfig.REQUEST_TIMEOUT_MS, "10"},
            {ShimConfig.FALLBACK_FACTOR, "1.5"},
            {ShimConfig.TRUSTSTORE_TYPE, "PEMish"},
            {ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "often"},
        };
        for (String[] bad : cases) {
            String message = rejected(with(bad[0], bad[1]));
            assertTrue(message.contains(bad[0]) && message.contains(bad[1]), message);
        }
    }

    @Test
    void aMisspelledKeyUnderThePrefixIsNotReadAndTheSettingKeepsItsDefault() {
        // Named in a WARN (UnreadKeysWarningTest); the broker starts, as Kafka's own unknown configurations let it.
        assertEquals(Duration.ofMillis(5_000), ShimConfig.parse(with(ShimConfig.PREFIX + "pol.interval.ms", "100")).pollInterval);
    }

    @Test
    void anUnreadableOrInvalidTrustStoreIsAnError(@TempDir Path dir) throws Exception {
        String missing = rejected(with(ShimConfig.TRUSTSTORE_LOCATION, dir.resolve("none.p12").toString()));
        assertTrue(missing.contains(ShimConfig.TRUSTSTORE_LOCATION) && missing.contains("none.p12"), missing);
        Path garbage = Files.writeString(dir.resolve("garbage.p12"), "not a key store");
        String invalid = rejected(with(ShimConfig.TRUSTSTORE_LOCATION, garbage.toString()));
        assertTrue(invalid.contains("cannot load it as a PKCS12 trust store"), invalid);
    }

    @Test
    void theReadmeTableListsEveryPropertyWithItsDefault() throws Exception {
        String readme = Files.readString(Path.of(System.getProperty("shim.doc", "../docs/shim.md")));
        String table = readme.substring(readme.indexOf("<!-- shim-configuration-table"), readme.indexOf("<!-- /shim-configuration-table"));
        java.util.Set<String> documented = new java.util.TreeSet<>();
        java.util.regex.Matcher rows = java.util.regex.Pattern.compile("\\| `([a-z.]+)` \\| ([^|]+) \\|").matcher(table);
        while (rows.find()) {
            String name = rows.group(1);
            documented.add(name);
            Object value = ShimConfig.DEFINITION.configKeys().get(name) == null ? null : ShimConfig.DEFINITION.configKeys().get(name).defaultValue;
            String shown = rows.group(2).trim();
            if (value != null && value != org.apache.kafka.common.config.ConfigDef.NO_DEFAULT_VALUE) {
                assertEquals(value.toString(), shown, name);
            }
        }
        assertEquals(new java.util.TreeSet<>(ShimConfig.DEFINITION.names()), documented);
    }

    @Test
    void theTokenIsNeverPrinted() {
        ShimConfig config = ShimConfig.parse(with(ShimConfig.TOKEN, "s3cret-token-value"));
        assertEquals("s3cret-token-value", config.token.value());
        assertFalse(config.token.toString().contains("s3cret"));
    }
}
