package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import javax.management.MBeanServer;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.internals.Plugin;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.ObjectMapper;

import kafka.server.ControllerMutationQuota;
import kafka.server.ControllerMutationQuotaManager;
import scala.Option;

/**
 * The metadata volumes' mutation factor on controller-mutation quotas (KIP-599), in the shim and
 * through Kafka 4.1's own ControllerMutationQuotaManager (token bucket, strict quota, throttle
 * times) on a simulated clock.
 */
class MutationFactorTest {
    private static final ClientQuotaType MUTATION = ClientQuotaType.CONTROLLER_MUTATION;
    private static final ClientQuotaType PRODUCE = ClientQuotaType.PRODUCE;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String MUTATION_DEFAULTS = "{\"produce\": 1048576, \"controller_mutation\": 10}";
    private static final String PRODUCE_ONLY = "{\"produce\": 1048576}";
    private static final int NODE = 1001; // a controller-only node, unlike any other test's id

    private final SimulatedTime time = new SimulatedTime();
    private ServiceQuotaCallback callback;
    private QuotaFeed feed;
    private final List<AutoCloseable> closing = new java.util.ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable resource : closing) {
            resource.close();
        }
        if (callback != null) {
            callback.close();
        }
    }

    private void shim() {
        callback = new ServiceQuotaCallback(time::nanoseconds);
        Map<String, Object> configs = new HashMap<>();
        configs.put("node.id", Integer.toString(NODE));
        configs.put("process.roles", "controller");
        configs.put(ShimConfig.URL, "http://127.0.0.1:9");
        feed = callback.configureUnstarted(configs);
    }

    private void table(double factor, String defaults, double mutationFactor) {
        table(StubService.withMutationFactor(StubService.table(factor, defaults, "[]", null), mutationFactor));
    }

    private void table(String json) {
        try {
            feed.onTable(ServiceTable.fromJson(JSON.readTree(json)), null);
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
    }

    private Double mutationLimit() {
        return callback.quotaLimit(MUTATION, callback.quotaMetricTags(MUTATION, new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "alice"), "admin"));
    }

    private static String withMutationsScaled(String table) {
        return table.replace("\"factor_types\": [\"produce\"]", "\"factor_types\": [\"produce\", \"controller_mutation\"]");
    }

    @Test
    void aMutationFactorScalesControllerMutationQuotasDownToTheFloorAndLeavesProduceAlone() {
        shim();
        table(1.0, MUTATION_DEFAULTS, 1.0);
        assertEquals(10.0, mutationLimit());
        table(1.0, MUTATION_DEFAULTS, 0.5);
        assertEquals(5.0, mutationLimit());
        table(1.0, MUTATION_DEFAULTS, 0.05);
        assertEquals(1.0, mutationLimit(), "held at the floor (floors.controller_mutation)");
        assertEquals(1.0, callback.view().factorFor(PRODUCE), "produce is not scaled by the mutation factor");
        assertEquals(1048576.0, callback.quotaLimit(PRODUCE, callback.quotaMetricTags(PRODUCE, new KafkaPrincipal("User", "alice"), "app")));
    }

    @Test
    void theLowerOfTheFactorAndTheMutationFactorAppliesWhenTheTableScalesMutationsToo() {
        shim();
        table(withMutationsScaled(StubService.withMutationFactor(StubService.table(0.3, MUTATION_DEFAULTS, "[]", null), 0.5)));
        assertEquals(3.0, mutationLimit());
        table(withMutationsScaled(StubService.withMutationFactor(StubService.table(0.8, MUTATION_DEFAULTS, "[]", null), 0.5)));
        assertEquals(5.0, mutationLimit());
        table(StubService.withMutationFactor(StubService.table(0.3, MUTATION_DEFAULTS, "[]", null), 0.5));
        assertEquals(5.0, mutationLimit(), "the factor scales mutations only when factor_types names them");
    }

    @Test
    void aTableWithoutAMutationFactorMeansOne() throws Exception {
        shim();
        table(StubService.table(1.0, MUTATION_DEFAULTS, "[]", null));
        assertEquals(1.0, callback.view().mutationFactor);
        assertEquals(10.0, mutationLimit());
        assertEquals(1.0, ServiceTable.fromJson(JSON.readTree("{\"factor\": 1.0, \"mutation_factor\": null}")).mutationFactor());
        for (String bad : new String[] {"-0.1", "1.5", "\"0.5\"", "true"}) {
            assertThrows(IllegalArgumentException.class, () -> ServiceTable.fromJson(JSON.readTree("{\"factor\": 1.0, \"mutation_factor\": " + bad + "}")),
                    bad);
        }
    }

    @Test
    void withoutAConfiguredMutationQuotaUnlimitedStaysUnlimitedUntilTheHardLimitRefuses() {
        shim();
        table(1.0, PRODUCE_ONLY, 0.5);
        assertNull(mutationLimit(), "Kafka's default: unlimited, as a produce quota that is not set");
        table(1.0, PRODUCE_ONLY, 0.0);
        assertEquals(QuotaResolver.REFUSING_MUTATION_RATE, mutationLimit());
        table(1.0, MUTATION_DEFAULTS, 0.0);
        assertEquals(QuotaResolver.REFUSING_MUTATION_RATE, mutationLimit(), "a configured quota too");
        KafkaPrincipal operator = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "ops"); // the table's excluded principal
        assertNull(callback.quotaLimit(MUTATION, callback.quotaMetricTags(MUTATION, operator, "admin")), "an excluded principal stays unlimited");
    }

    @Test
    void aDataPauseHoldsMutationsAtTheFloorAndOnlyTheMutationFactorsHardLimitRefuses() {
        shim();
        table(withMutationsScaled(StubService.withMutationFactor(StubService.table(0.0, MUTATION_DEFAULTS, "[]", null), 1.0)));
        assertEquals(1.0, mutationLimit(), "today's behaviour: a PAUSE holds mutations at the floor");
        callback.quotaResetRequired(MUTATION);
        table(withMutationsScaled(StubService.withMutationFactor(StubService.table(0.0, MUTATION_DEFAULTS, "[]", null), 0.0)));
        assertTrue(callback.quotaResetRequired(MUTATION), "the same factor 0 for the track, but Kafka must re-read the bound");
        assertEquals(QuotaResolver.REFUSING_MUTATION_RATE, mutationLimit());
    }

    @Test
    void aChangeOfTheMutationFactorResetsOnlyControllerMutationQuotas() {
        shim();
        table(1.0, MUTATION_DEFAULTS, 1.0);
        for (ClientQuotaType type : ClientQuotaType.values()) {
            callback.quotaResetRequired(type);
        }
        table(1.0, MUTATION_DEFAULTS, 0.5);
        assertTrue(callback.quotaResetRequired(MUTATION));
        for (ClientQuotaType type : new ClientQuotaType[] {PRODUCE, ClientQuotaType.FETCH, ClientQuotaType.REQUEST}) {
            assertFalse(callback.quotaResetRequired(type), type.name());
        }
    }

    @Test
    void inShadowOrOffTheCanaryListTheMutationFactorIsOnlyWhatWouldApply() throws Exception {
        shim();
        String hardLimit = StubService.withMutationFactor(StubService.table(1.0, MUTATION_DEFAULTS, "[]", null, false, "[]"), 0.0);
        table(hardLimit);
        assertEquals(10.0, mutationLimit(), "shadow mode: unscaled");
        assertEquals(0.0, callback.view().wouldMutationFactor);
        assertEquals(1.0, callback.view().mutationFactor);
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        feed.metrics().register();
        closing.add(() -> feed.metrics().unregister());
        assertEquals(0.0, server.getAttribute(EnforcementMetrics.name(NODE), "WouldApplyMutationFactor"));
        assertEquals(1.0, server.getAttribute(EnforcementMetrics.name(NODE), "AppliedMutationFactor"));

        table(StubService.withMutationFactor(StubService.table(1.0, MUTATION_DEFAULTS, "[]", null, true, "[1, 2]"), 0.0));
        assertEquals(10.0, mutationLimit(), "a controller's node id is not in the canary list");
        table(StubService.withMutationFactor(StubService.table(1.0, MUTATION_DEFAULTS, "[]", null, true, "[1, " + NODE + "]"), 0.0));
        assertEquals(QuotaResolver.REFUSING_MUTATION_RATE, mutationLimit(), "a controller's node id counts as its broker id");
        assertEquals(0.0, server.getAttribute(EnforcementMetrics.name(NODE), "AppliedMutationFactor"));
    }

    @Test
    void withoutAValidTableTheMutationFactorIsOne() {
        shim();
        table(1.0, MUTATION_DEFAULTS, 0.0);
        assertEquals(0.0, callback.view().mutationFactor);
        assertEquals(1.0, callback.view().fallback(0.0, time.nanoseconds()).mutationFactor);
    }

    /** Kafka's controller-mutation quota manager asking {@code quotaCallback}, with one admin client (user alice). */
    private ControllerMutationQuotaManager kafka(ClientQuotaCallback quotaCallback) {
        Metrics metrics = new Metrics(new MetricConfig(), List.of(), time);
        ControllerMutationQuotaManager manager = new ControllerMutationQuotaManager(new ClientQuotaManagerConfig(11, 1), metrics, time,
                "simulated-", Option.apply(Plugin.wrapInstance(quotaCallback, metrics, "client.quota.callback.class")));
        closing.add(metrics::close);
        closing.add(manager::shutdown);
        return manager;
    }

    private static ControllerMutationQuota strict(ControllerMutationQuotaManager manager) {
        return manager.newStrictQuotaFor(new Session(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "alice"), InetAddress.getLoopbackAddress()),
                "admin");
    }

    /** A callback with one fixed controller-mutation quota for everybody: what Kafka does with a bound. */
    private static final class FixedQuota implements ClientQuotaCallback {
        private final double quota;

        FixedQuota(double quota) {
            this.quota = quota;
        }

        @Override
        public Map<String, String> quotaMetricTags(ClientQuotaType type, KafkaPrincipal principal, String clientId) {
            return Map.of("user", "", "client-id", "");
        }

        @Override
        public Double quotaLimit(ClientQuotaType type, Map<String, String> tags) {
            return quota;
        }

        @Override
        public void updateQuota(ClientQuotaType type, ClientQuotaEntity entity, double value) {
        }

        @Override
        public void removeQuota(ClientQuotaType type, ClientQuotaEntity entity) {
        }

        @Override
        public boolean quotaResetRequired(ClientQuotaType type) {
            return false;
        }

        @Override
        public boolean updateClusterMetadata(Cluster cluster) {
            return false;
        }

        @Override
        public void configure(Map<String, ?> configs) {
        }

        @Override
        public void close() {
        }
    }

    @Test
    void kafkasTokenBucketAtAQuotaOfZeroAdmitsOneRequestThenRefusesWithANegativeThrottleTime() {
        // The evidence for not giving Kafka 0: debt / 0 is infinite, Math.round gives Long.MAX_VALUE,
        // and Kafka casts it to an int.
        ControllerMutationQuotaManager manager = kafka(new FixedQuota(0.0));
        strict(manager).record(1); // a bucket not in debt admits whatever comes
        time.sleep(1_000);
        ControllerMutationQuota second = strict(manager);
        ThrottlingQuotaExceededException refused = assertThrows(ThrottlingQuotaExceededException.class, () -> second.record(1));
        assertTrue(refused.throttleTimeMs() < 0, "throttle " + refused.throttleTimeMs() + " ms");
        assertTrue(second.throttleTime() < 0, "response throttle " + second.throttleTime() + " ms");
    }

    @Test
    void atTheHardLimitKafkaAdmitsOneRequestAndRefusesTheRestWithAFiniteThrottleOfAHundredSecondsAPartition() {
        shim();
        ControllerMutationQuotaManager manager = kafka(callback);
        table(1.0, PRODUCE_ONLY, 0.0);
        strict(manager).record(1); // the fresh bucket holds 11 windows of the refusing rate: 0.11 partitions, not in debt
        ControllerMutationQuota second = strict(manager);
        ThrottlingQuotaExceededException refused = assertThrows(ThrottlingQuotaExceededException.class, () -> second.record(1));
        assertEquals(89_000, refused.throttleTimeMs(), 10, "(1 - 0.11) partitions of debt at 0.01 a second");
        assertEquals(refused.throttleTimeMs(), second.throttleTime());
        assertTrue(refused.throttleTimeMs() > 60_000, "longer than an Admin client's default API timeout");
        time.sleep(30_000);
        assertThrows(ThrottlingQuotaExceededException.class, () -> strict(manager).record(1), "still refused 30 s later");
        time.sleep(60_000);
        strict(manager).record(1); // the debt is paid: one more is admitted
        ThrottlingQuotaExceededException again = assertThrows(ThrottlingQuotaExceededException.class, () -> strict(manager).record(1));
        assertTrue(again.throttleTimeMs() > 90_000, "throttle " + again.throttleTimeMs() + " ms");

        table(1.0, PRODUCE_ONLY, 1.0);
        assertTrue(callback.quotaResetRequired(MUTATION));
        manager.updateQuotaMetricConfigs(Option.empty()); // what Kafka does when the callback asks for a reset
        time.sleep(10);
        strict(manager).record(100); // unlimited again: the debt is forgiven at once
    }

    @Test
    void theRefusingRateKeepsTheThrottleFiniteForTheLargestRequestAControllerTakes() {
        shim();
        ControllerMutationQuotaManager manager = kafka(callback);
        table(1.0, PRODUCE_ONLY, 0.0);
        strict(manager).record(10_000); // ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
        ControllerMutationQuota next = strict(manager);
        ThrottlingQuotaExceededException refused = assertThrows(ThrottlingQuotaExceededException.class, () -> next.record(1));
        assertTrue(refused.throttleTimeMs() > 0, "throttle " + refused.throttleTimeMs() + " ms");
        assertEquals(999_989_000, refused.throttleTimeMs(), 100, "(10,000 - 0.11) partitions at 0.01 a second: 11.6 days");
        assertTrue(next.throttleTime() > 0);
    }
}
