package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.ObjectMapper;

/** Shadow mode and canary brokers in the shim: what it applies, what it would apply, its JMX metrics, its fallback. */
class EnforcementTest {
    private static final ClientQuotaType PRODUCE = ClientQuotaType.PRODUCE;
    private static final String DEFAULTS = "{\"produce\": 1048576}";
    private static final String NONE = "[]";
    /** The 64 KiB/s floor in a fresh epoch, a tick (of Kafka's default window) old: 10.75 / 10.5 of it. */
    private static final double FRESH_FLOOR = 65536.0 * 10.75 / 10.5;
    private static final int BROKER = 41; // unlike any other test's, for the MBean's name

    private final AtomicLong nanos = new AtomicLong(1_000_000_000L);
    private StubService service;
    private ServiceQuotaCallback callback;

    @BeforeEach
    void start() throws Exception {
        service = new StubService();
    }

    @AfterEach
    void stop() {
        if (callback != null) {
            callback.close();
        }
        service.close();
    }

    private Map<String, Object> settings(int brokerId) {
        Map<String, Object> configs = new HashMap<>();
        configs.put("node.id", Integer.toString(brokerId));
        configs.put(ShimConfig.URL, service.url());
        configs.put(ShimConfig.POLL_INTERVAL_MS, "100");
        configs.put(ShimConfig.LONG_POLL_WAIT_MS, "2000");
        configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "1000");
        configs.put(ShimConfig.FALLBACK_FACTOR, "0.0");
        return configs;
    }

    /** A callback on broker {@code brokerId} whose feed starts no thread: the test hands it tables. */
    private QuotaFeed unstarted(int brokerId) {
        callback = new ServiceQuotaCallback(nanos::get);
        return callback.configureUnstarted(settings(brokerId));
    }

    private static ServiceTable parsed(String json) throws Exception {
        return ServiceTable.fromJson(new ObjectMapper().readTree(json));
    }

    private static ServiceTable table(double factor, boolean enforced, String canary) throws Exception {
        return parsed(StubService.table(factor, DEFAULTS, NONE, null, enforced, canary));
    }

    private Double limit(String user, ClientQuotaType type) {
        return callback.quotaLimit(type, callback.quotaMetricTags(type, new KafkaPrincipal(KafkaPrincipal.USER_TYPE, user), "app"));
    }

    private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 5 s: " + what);
            }
            Thread.sleep(10);
        }
    }

    @Test
    void theBrokerIdComesFromNodeIdOrBrokerIdAndIsUnknownWithout() {
        assertEquals(3, ShimConfig.brokerId(Map.of("node.id", "3", "broker.id", "9")));
        assertEquals(9, ShimConfig.brokerId(Map.of("broker.id", 9)));
        assertEquals(ShimConfig.UNKNOWN_BROKER, ShimConfig.brokerId(Map.of()));
        assertEquals(ShimConfig.UNKNOWN_BROKER, ShimConfig.brokerId(Map.of("node.id", "x")));
    }

    @Test
    void aTableSaysOnWhichBrokersTheFactorIsEnforced() throws Exception {
        ServiceTable older = parsed(StubService.table(0.5, DEFAULTS, NONE, null));
        assertTrue(older.enforcesOn(1), "a service that does not say enforces everywhere");
        assertFalse(table(0.5, false, "[]").enforcesOn(1), "shadow: nobody enforces");
        assertFalse(table(0.5, false, "[1]").enforcesOn(1), "shadow keeps a canary list for later, nobody enforces");
        ServiceTable canary = table(0.5, true, "[1, 3]");
        assertEquals(Set.of(1, 3), canary.canaryBrokers());
        assertTrue(canary.enforcesOn(1) && canary.enforcesOn(3));
        assertFalse(canary.enforcesOn(2) || canary.enforcesOn(ShimConfig.UNKNOWN_BROKER));
        assertThrows(IllegalArgumentException.class, () -> table(0.5, true, "[\"1\"]"));
        assertThrows(IllegalArgumentException.class, () -> table(0.5, true, "[-1]"));
        String plain = StubService.table(0.5, DEFAULTS, NONE, null);
        assertThrows(IllegalArgumentException.class, () -> parsed(plain.substring(0, plain.length() - 1) + ", \"enforced\": \"no\"}"));
    }

    @Test
    void inShadowTheQuotasApplyUnscaledAndKafkasOwnQuotasStillHold() throws Exception {
        QuotaFeed feed = unstarted(1);
        feed.onTable(table(0.0, false, "[]"), null);
        QuotaView view = callback.view();
        assertEquals(1.0, view.factor, "shadow applies no factor");
        assertEquals(0.0, view.wouldFactor, "but knows the pause it would apply");
        assertFalse(view.enforcing);
        assertEquals(1048576.0, limit("alice", PRODUCE), "the table's quota, unscaled");
        ClientQuotaEntity.ConfigEntity bob = new ClientQuotaEntity.ConfigEntity() {
            @Override
            public String name() {
                return "bob";
            }

            @Override
            public ClientQuotaEntity.ConfigEntityType entityType() {
                return ClientQuotaEntity.ConfigEntityType.USER;
            }
        };
        callback.updateQuota(PRODUCE, () -> java.util.List.of(bob), 200_000);
        assertEquals(200_000.0, limit("bob", PRODUCE), "a kafka-configs quota still holds in shadow");
    }

    @Test
    void switchingToEnforceAppliesTheFactorAtOnceAndBackToShadowLiftsIt() throws Exception {
        QuotaFeed feed = unstarted(1);
        feed.onTable(table(0.0, false, "[]"), null);
        callback.quotaResetRequired(PRODUCE);
        feed.onTable(table(0.0, true, "[]"), null);
        assertTrue(callback.quotaResetRequired(PRODUCE), "Kafka is asked to re-read the limits");
        assertTrue(callback.view().enforcing);
        assertEquals(FRESH_FLOOR, limit("alice", PRODUCE), 1e-6, "enforced: the pause, from fresh sensors");
        feed.onTable(table(0.0, false, "[]"), null);
        assertTrue(callback.quotaResetRequired(PRODUCE));
        assertEquals(1048576.0, limit("alice", PRODUCE), "shadow again: unscaled");
    }

    @Test
    void withCanaryBrokersOnlyTheListedBrokersEnforce() throws Exception {
        QuotaFeed feed = unstarted(2);
        feed.onTable(table(0.5, true, "[1]"), null);
        assertFalse(callback.view().enforcing, "broker 2 is not a canary");
        assertEquals(1048576.0, limit("alice", PRODUCE));
        assertEquals(0.5, callback.view().wouldFactor);
        feed.onTable(table(0.5, true, "[1, 2]"), null);
        assertTrue(callback.view().enforcing, "broker 2 named");
        assertEquals(0.5, callback.view().factor);
    }

    @Test
    void anUnreachableServiceKeepsTheShadowTableWhileValidThenTheFallbackAppliesWhateverTheMode() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NONE, Instant.now().plusSeconds(30), false, "[]"));
        callback = new ServiceQuotaCallback(nanos::get);
        callback.configure(settings(BROKER));
        eventually(() -> callback.view().mode == QuotaView.Mode.SERVICE, "the shadow table"); // a first poll may time out on a busy machine
        assertFalse(callback.view().enforcing);
        service.failing(true);
        eventually(() -> callback.view().mode == QuotaView.Mode.KEPT, "the service seen unreachable");
        assertFalse(callback.view().enforcing, "the kept table keeps its enforcement");
        assertEquals(1048576.0, limit("alice", PRODUCE));
        nanos.addAndGet(Duration.ofSeconds(32).toNanos()); // past valid_until
        assertEquals(QuotaView.Mode.FALLBACK, callback.view().mode);
        assertTrue(callback.view().enforcing, "the fallback applies whatever the mode was");
        assertEquals(FRESH_FLOOR, limit("alice", PRODUCE), 1e-6, "fallback 0.0 pauses, though the service was in shadow");
    }

    @Test
    void jmxShowsTheAppliedAndWouldApplyFactorsAndWhetherTheBrokerEnforces() throws Exception {
        service.table(StubService.table(0.25, DEFAULTS, NONE, Instant.now().plusSeconds(60), false, "[]"));
        callback = new ServiceQuotaCallback(nanos::get);
        callback.configure(settings(BROKER));
        eventually(() -> callback.view().mode == QuotaView.Mode.SERVICE, "the shadow table"); // a first poll may time out on a busy machine
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName name = new ObjectName("io.kafkathrottle.shim:type=Enforcement,broker=" + BROKER);
        assertEquals(1.0, server.getAttribute(name, "AppliedFactor"));
        assertEquals(0.25, server.getAttribute(name, "WouldApplyFactor"));
        assertEquals(false, server.getAttribute(name, "Enforcing"));
        assertEquals(BROKER, server.getAttribute(name, "BrokerId"));
        service.table(StubService.table(0.25, DEFAULTS, NONE, Instant.now().plusSeconds(60), true, "[" + BROKER + "]"));
        eventually(() -> callback.view().enforcing, "the switch to enforce on this canary");
        assertEquals(0.25, server.getAttribute(name, "AppliedFactor"));
        assertEquals(true, server.getAttribute(name, "Enforcing"));
        callback.close();
        callback = null;
        assertFalse(server.isRegistered(name), "closing the last instance unregisters the metrics");
    }
}
