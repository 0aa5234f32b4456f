package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A key the shim does not read in a broker's configuration, under the service's prefix (client.quota.callback.static.*)
 * or a misspelt one under the shim's own: one WARN per process names it and the shim key it most likely means. The shim's logger is on at WARN in this
 * build (pom.xml), and slf4j-simple writes to whatever System.err is when it logs, so the test reads what was logged.
 */
class UnreadKeysWarningTest {
    private static final String WARNING = "Throttle service shim: ignoring ";
    private final ByteArrayOutputStream captured = new ByteArrayOutputStream();
    private PrintStream originalErr;

    @BeforeEach
    void captureLog() {
        ShimConfig.forgetWarnings();
        originalErr = System.err;
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    }

    @AfterEach
    void restoreLog() {
        System.setErr(originalErr);
        ShimConfig.forgetWarnings();
    }

    private List<String> warnings() {
        return captured.toString(StandardCharsets.UTF_8).lines().filter(line -> line.contains(WARNING)).toList();
    }

    private static Map<String, Object> broker(String... pairs) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ShimConfig.URL, "http://throttle-service:8080");
        configs.put("node.id", "2");
        for (int i = 0; i < pairs.length; i += 2) {
            configs.put(pairs[i], pairs[i + 1]);
        }
        return configs;
    }

    /** A combined node configures the callback twice (broker and controller): still one WARN, which is returned. */
    private String theOneWarningOfACombinedNode(Map<String, Object> configs) {
        new ServiceQuotaCallback().configureUnstarted(configs);
        new ServiceQuotaCallback().configureUnstarted(configs);
        List<String> warnings = warnings();
        assertEquals(1, warnings.size(), captured.toString(StandardCharsets.UTF_8));
        return warnings.get(0);
    }

    @Test
    void theServicesTokenKeyOnABrokerIsNamedOnceWithTheKeyTheShimReads() {
        Map<String, Object> configs = broker("client.quota.callback.static.token", "node-token");
        String warning = theOneWarningOfACombinedNode(configs);
        assertTrue(warning.contains("WARN"), warning);
        assertTrue(warning.contains("client.quota.callback.static.token (did you mean client.quota.callback.service.token?)"), warning);
        assertTrue(!warning.contains("node-token"), "the value is a secret: " + warning);
        // The key under the service's prefix is not read: the shim has no token.
        assertEquals(null, ShimConfig.parse(configs).token);
    }

    @Test
    void everyUnreadKeyIsInTheOneWarningWithASuggestionWhereOneIsClose() {
        new ServiceQuotaCallback().configureUnstarted(broker(
                "client.quota.callback.static.fallback.factor", "0.0",
                "client.quota.callback.static.url", "http://x:8080",
                "client.quota.callback.static.produce", "1048576"));
        List<String> warnings = warnings();
        assertEquals(1, warnings.size(), captured.toString(StandardCharsets.UTF_8));
        String warning = warnings.get(0);
        assertTrue(warning.contains("client.quota.callback.static.fallback.factor (did you mean client.quota.callback.service.fallback.factor?)"), warning);
        assertTrue(warning.contains("client.quota.callback.static.url (did you mean client.quota.callback.service.url?)"), warning);
        // A setting of the service alone: named, nothing suggested.
        assertTrue(warning.contains("client.quota.callback.static.produce,") || warning.contains("client.quota.callback.static.produce:"), warning);
        assertTrue(!warning.contains("static.produce (did you mean"), warning);

        // A new key later (another callback instance) gets its own WARN; the ones already named do not come back.
        new ServiceQuotaCallback().configureUnstarted(broker(
                "client.quota.callback.static.url", "http://x:8080",
                "client.quota.callback.static.request.timeout.ms", "2000"));
        List<String> after = warnings();
        assertEquals(2, after.size(), captured.toString(StandardCharsets.UTF_8));
        assertTrue(after.get(1).contains("static.request.timeout.ms (did you mean client.quota.callback.service.request.timeout.ms?)"), after.get(1));
        assertTrue(!after.get(1).contains("static.url"), after.get(1));
    }

    @Test
    void aConfigurationWithoutSuchKeysLogsNoWarning() {
        new ServiceQuotaCallback().configureUnstarted(broker(ShimConfig.TOKEN, "node-token"));
        assertEquals(List.of(), warnings());
    }

    @Test
    void aMisspeltShimKeyIsNamedOnceWithTheKeyItMeansAndTheBrokerStarts() {
        Map<String, Object> configs = broker("client.quota.callback.service.tokne", "node-token", "client.quota.callback.service.color", "blue");
        String warning = theOneWarningOfACombinedNode(configs);
        assertTrue(warning.contains("client.quota.callback.service.tokne (did you mean client.quota.callback.service.token?)"), warning);
        // Nothing close: named, and the keys the shim knows are listed.
        assertTrue(warning.contains("client.quota.callback.service.color,") || warning.contains("client.quota.callback.service.color:"), warning);
        assertTrue(warning.contains(ShimConfig.TOKEN) && warning.contains(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS), warning);
        assertTrue(!warning.contains("node-token") && !warning.contains("blue"), "values are not logged: " + warning);
        // The misspelt key is not read: the shim has no token, and its own keys are still checked.
        assertEquals(null, ShimConfig.parse(configs).token);
        String message = assertThrows(ConfigException.class,
                () -> new ServiceQuotaCallback().configureUnstarted(broker("client.quota.callback.service.tokne", "x", ShimConfig.FALLBACK_FACTOR, "2"))).getMessage();
        assertTrue(message.contains(ShimConfig.FALLBACK_FACTOR), message);
    }

    @Test
    void suggestionsComeFromTheShimsOwnKeys() {
        assertEquals(Optional.of(ShimConfig.TOKEN), ShimConfig.suggestion("client.quota.callback.static.token"));
        assertEquals(Optional.of(ShimConfig.POLL_INTERVAL_MS), ShimConfig.suggestion("client.quota.callback.service.poll.interval"));
        assertEquals(Optional.empty(), ShimConfig.suggestion("client.quota.callback.static.excluded.principal.name.list"));
        assertEquals(3, ShimConfig.editDistance("kitten", "sitting"));
        assertEquals(1, ShimConfig.editDistance("tokne", "token"));
    }
}
