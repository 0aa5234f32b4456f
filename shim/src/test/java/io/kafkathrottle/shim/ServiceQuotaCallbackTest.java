package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ServiceQuotaCallbackTest {
    private static final ClientQuotaType PRODUCE = ClientQuotaType.PRODUCE;
    private static final ClientQuotaType FETCH = ClientQuotaType.FETCH;
    private static final String DEFAULTS = "{\"produce\": 1048576}";
    private static final String NO_OVERRIDES = "[]";
    /** The 64 KiB/s floor in a fresh epoch, a tick (of Kafka's default window) old: 10.75 / 10.5 of it. */
    private static final double FRESH_FLOOR = 65536.0 * 10.75 / 10.5;

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

    private ServiceQuotaCallback configure(Map<String, Object> extra) {
        callback = new ServiceQuotaCallback(nanos::get);
        callback.configure(settings(extra));
        return callback;
    }

    private Map<String, Object> settings(Map<String, Object> extra) {
        Map<String, Object> configs = new HashMap<>();
        configs.put("broker.id", "1"); // the broker's own settings are passed too and ignored
        configs.put(ShimConfig.URL, service.url());
        configs.put(ShimConfig.POLL_INTERVAL_MS, "100");
        configs.put(ShimConfig.LONG_POLL_WAIT_MS, "2000");
        configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "1000");
        configs.put(ShimConfig.FALLBACK_FACTOR, "0.0");
        configs.putAll(extra);
        return configs;
    }

    private static ServiceTable parsed(String json) throws Exception {
        return ServiceTable.fromJson(new com.fasterxml.jackson.databind.ObjectMapper().readTree(json));
    }

    private static KafkaPrincipal user(String name) {
        return new KafkaPrincipal(KafkaPrincipal.USER_TYPE, name);
    }

    private Double limit(String user, String client, ClientQuotaType type) {
        return callback.quotaLimit(type, callback.quotaMetricTags(type, user(user), client));
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
    void theFirstTableIsInForceWhenConfigureReturns() {
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        assertEquals(QuotaView.Mode.SERVICE, callback.view().mode);
        assertEquals(524288.0, limit("alice", "app", PRODUCE));
        assertNull(limit("alice", "app", FETCH), "fetch is not scaled and has no quota");
    }

    @Test
    void pollsSendTheEtagAndTheLongPollWaitAndATokenWhenSet() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of(ShimConfig.TOKEN, "s3cret-token"));
        eventually(() -> service.requests.size() >= 2, "a second poll");
        StubService.Seen first = service.requests.get(0);
        StubService.Seen second = service.requests.get(1);
        assertNull(first.ifNoneMatch(), "the first poll has nothing to compare");
        assertNull(first.query(), "the first poll does not wait");
        assertEquals("\"g1\"", second.ifNoneMatch());
        assertEquals("wait=2", second.query());
        assertEquals("Bearer s3cret-token", second.authorization());
    }

    @Test
    void aTableSentGzippedIsInflatedAndEveryPollAcceptsGzip() throws Exception {
        service.gzip(true);
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        assertEquals(524288.0, limit("alice", "app", PRODUCE), "the gzipped table's factor 0.5 applied");
        eventually(() -> service.requests.size() >= 2, "a second poll");
        assertTrue(service.requests.stream().allMatch(seen -> "gzip".equals(seen.acceptEncoding())), "every poll accepts gzip");
    }

    @Test
    void aLongPollIsHeldForAtMostHalfOfWhatIsLeftOfTheTablesValidity() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(4)));
        configure(Map.of(ShimConfig.LONG_POLL_WAIT_MS, "10000"));
        eventually(() -> service.requests.size() >= 2, "a long-poll");
        double wait = Double.parseDouble(service.requests.get(1).query().substring("wait=".length()));
        assertTrue(wait >= 1.0 && wait <= 2.5, "held at most half of the 4-5 s left of the table (Date has whole seconds), not 10 s: " + wait);
    }

    @Test
    void theLongPollWaitIsCappedByTheValidityLeftButNeverBelowASecond() {
        long now = 5_000_000_000L;
        Duration thirty = Duration.ofSeconds(30);
        assertEquals(thirty, QuotaFeed.longPollWait(thirty, QuotaView.NO_EXPIRY, now), "a table without expiry");
        assertEquals(thirty, QuotaFeed.longPollWait(thirty, now + Duration.ofMinutes(5).toNanos(), now), "plenty of validity left");
        assertEquals(Duration.ofSeconds(4), QuotaFeed.longPollWait(thirty, now + Duration.ofSeconds(8).toNanos(), now));
        assertEquals(Duration.ofSeconds(1), QuotaFeed.longPollWait(thirty, now + Duration.ofMillis(500).toNanos(), now), "nearly expired");
        assertEquals(Duration.ofSeconds(1), QuotaFeed.longPollWait(thirty, now - Duration.ofSeconds(3).toNanos(), now), "expired");
        assertEquals(Duration.ZERO, QuotaFeed.longPollWait(Duration.ZERO, now + Duration.ofSeconds(8).toNanos(), now), "no long-poll");
    }

    @Test
    void aLongPollDeliversAChangeAtOnceAndFlagsAResetForTheTypesItAffects() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        eventually(() -> service.requests.size() >= 2, "a poll waiting for a change");
        callback.quotaResetRequired(PRODUCE); // the first table's flags
        callback.quotaResetRequired(FETCH);
        assertFalse(callback.quotaResetRequired(PRODUCE));
        long before = System.nanoTime();
        service.table(StubService.table(0.25, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        eventually(() -> callback.view().factor == 0.25, "the new factor");
        assertTrue(System.nanoTime() - before < Duration.ofMillis(1500).toNanos(), "a long-poll answers on change, not at its end");
        assertTrue(callback.quotaResetRequired(PRODUCE), "produce limits changed");
        assertFalse(callback.quotaResetRequired(PRODUCE), "a reset is asked for once");
        assertFalse(callback.quotaResetRequired(FETCH), "fetch is not scaled: nothing changed");
        assertEquals(FRESH_FLOOR, limit("alice", "app", PRODUCE), 1e-6, "a fall to a quarter starts fresh sensors, given the floor at first");
        nanos.addAndGet(Duration.ofSeconds(11).toNanos());
        callback.feed().tick();
        assertTrue(callback.quotaResetRequired(PRODUCE), "the fresh sensors' bound grew with their age");
        assertEquals(262144.0, limit("alice", "app", PRODUCE), "a young sensor's whole window at the new factor");
    }

    @Test
    void whileKafkasBoundMovesWithTimeEachTickAsksForAResetAndOnceItSettlesNoneAreAsked() throws Exception {
        callback = new ServiceQuotaCallback(nanos::get);
        QuotaFeed feed = callback.configureUnstarted(settings(Map.of())); // no threads: this test ticks
        feed.onTable(parsed(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, null)), null);
        callback.quotaResetRequired(PRODUCE); // the first table's flags
        callback.quotaResetRequired(FETCH);
        feed.onTable(parsed(StubService.table(0.9, DEFAULTS, NO_OVERRIDES, null)), null);
        assertFalse(callback.quotaResetRequired(PRODUCE), "Kafka's bound has not moved yet");
        assertEquals(1048576.0, limit("alice", "app", PRODUCE), "Kafka's window still holds a whole span at 1.0");
        nanos.addAndGet(Duration.ofMillis(5750).toNanos());
        feed.tick();
        assertTrue(callback.quotaResetRequired(PRODUCE));
        assertEquals(1048576.0 * 0.95, limit("alice", "app", PRODUCE), 1.0, "half of Kafka's window forgotten");
        nanos.addAndGet(Duration.ofMillis(250).toNanos());
        feed.tick();
        assertTrue(callback.quotaResetRequired(PRODUCE), "moved on");
        assertFalse(callback.quotaResetRequired(FETCH), "fetch is not scaled");
        nanos.addAndGet(Duration.ofSeconds(6).toNanos());
        feed.tick();
        assertTrue(callback.quotaResetRequired(PRODUCE));
        assertEquals(1048576.0 * 0.9, limit("alice", "app", PRODUCE), 1.0, "the whole window at 0.9");
        nanos.addAndGet(Duration.ofSeconds(1).toNanos());
        feed.tick();
        assertFalse(callback.quotaResetRequired(PRODUCE), "settled: nothing more to tell Kafka");
    }

    @Test
    void twoInstancesWithTheSameSettingsShareOnePollerAndEachGetsItsOwnResets() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        ServiceQuotaCallback broker = callback;
        ServiceQuotaCallback controller = new ServiceQuotaCallback(nanos::get);
        try {
            controller.configure(settings(Map.of()));
            assertSame(broker.feed(), controller.feed(), "a combined node's two instances read one feed");
            eventually(() -> service.requests.size() >= 2, "the long-poll waiting");
            Thread.sleep(300);
            assertEquals(2, service.requests.size(), "one poll waiting, not one per instance");
            broker.quotaResetRequired(PRODUCE);
            controller.quotaResetRequired(PRODUCE);
            service.table(StubService.table(0.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
            eventually(() -> controller.view().factor == 0.0, "the pause");
            eventually(() -> broker.quotaResetRequired(PRODUCE), "the broker's quota managers reset");
            eventually(() -> controller.quotaResetRequired(PRODUCE), "and the controller's, though the broker's asked first");
            assertEquals(broker.quotaMetricTags(PRODUCE, user("alice"), "app"), controller.quotaMetricTags(PRODUCE, user("alice"), "app"),
                    "one set of epochs");
        } finally {
            controller.close();
        }
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        eventually(() -> broker.view().factor == 0.5, "the remaining instance still polls");
        broker.close();
        callback = null;
        Thread.sleep(300);
        int afterClose = service.requests.size();
        service.table(StubService.table(0.25, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        Thread.sleep(500);
        assertEquals(afterClose, service.requests.size(), "the last close stops polling");
    }

    @Test
    void anUnchangedTableFlagsNoReset() throws Exception {
        String table = StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60));
        service.table(table);
        configure(Map.of());
        callback.quotaResetRequired(PRODUCE);
        service.table(table.replace("\"source\": \"observed\"", "\"source\": \"observed\" ")); // a new ETag, same quotas
        eventually(() -> service.requests.size() >= 3, "the re-sent table");
        assertFalse(callback.quotaResetRequired(PRODUCE));
    }

    @Test
    void clientsSharingAQuotaGetIdenticalTagsAndExcludedPrincipalsTheirOwn() {
        String overrides = "[{\"entity\": {\"user\": \"alice\", \"client_id\": null}, \"limits\": {\"produce\": 2000000}}]";
        service.table(StubService.table(1.0, DEFAULTS, overrides, Instant.now().plusSeconds(60)));
        configure(Map.of());
        Map<String, String> a1 = callback.quotaMetricTags(PRODUCE, user("alice"), "app-1");
        Map<String, String> a2 = callback.quotaMetricTags(PRODUCE, user("alice"), "app-2");
        Map<String, String> b1 = callback.quotaMetricTags(PRODUCE, user("bob"), "app-1");
        Map<String, String> c1 = callback.quotaMetricTags(PRODUCE, user("carol"), "app-9");
        Map<String, String> ops = callback.quotaMetricTags(PRODUCE, user("ops"), "app-1");
        assertEquals(a1, a2, "alice's clients share her (user) quota");
        assertEquals(b1, c1, "clients under the defaults share one quota");
        assertNotEquals(a1, b1);
        assertEquals("ops", ops.get("user"));
        assertEquals("app-1", ops.get("client-id"));
        assertEquals(2000000.0, callback.quotaLimit(PRODUCE, a1));
        assertEquals(1048576.0, callback.quotaLimit(PRODUCE, b1));
        assertNull(callback.quotaLimit(PRODUCE, ops), "excluded principals are never throttled");
    }

    @Test
    void anUnreachableServiceKeepsTheLastTableUntilItExpiresThenTheFallbackApplies() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(30)));
        configure(Map.of());
        Map<String, String> before = callback.quotaMetricTags(PRODUCE, user("alice"), "app");
        assertEquals(1048576.0, callback.quotaLimit(PRODUCE, before));
        callback.quotaResetRequired(PRODUCE);
        service.failing(true);
        eventually(() -> callback.view().mode == QuotaView.Mode.KEPT, "the service seen unreachable");
        assertEquals(1048576.0, limit("alice", "app", PRODUCE), "the last table is kept while it is valid");
        assertFalse(callback.quotaResetRequired(PRODUCE));
        nanos.addAndGet(Duration.ofSeconds(32).toNanos()); // past valid_until (the Date header is whole seconds)
        assertTrue(callback.quotaResetRequired(PRODUCE), "expiry is noticed when Kafka asks, and changes produce limits");
        assertEquals(QuotaView.Mode.FALLBACK, callback.view().mode);
        assertEquals(FRESH_FLOOR, limit("alice", "app", PRODUCE), 1e-6, "fallback 0.0 pauses: the base quota down to the floor");
        assertNull(callback.quotaLimit(PRODUCE, before), "the sensor from before the pause belongs to a past epoch");
        service.failing(false);
        eventually(() -> callback.view().mode == QuotaView.Mode.SERVICE, "the service back");
        assertEquals(1048576.0, limit("alice", "app", PRODUCE));
    }

    @Test
    void anUnreachableServiceAtStartMeansTheFallbackOverKafkasOwnQuotas() {
        service.failing(true);
        configure(Map.of(ShimConfig.FALLBACK_FACTOR, "0.5"));
        assertEquals(QuotaView.Mode.FALLBACK, callback.view().mode);
        assertNull(limit("alice", "app", PRODUCE), "no quota known: unlimited stays unlimited at 0.5");
        callback.updateQuota(PRODUCE, entity(ClientQuotaEntity.ConfigEntityType.USER, "alice"), 4_000_000);
        assertEquals(2_000_000.0, limit("alice", "app", PRODUCE), "kafka-configs' quota, scaled by the fallback factor");
    }

    @Test
    void kafkasOwnQuotasFillInWhereTheServiceTableHasNothingMoreSpecific() {
        String overrides = "[{\"entity\": {\"user\": \"<default>\", \"client_id\": null}, \"limits\": {\"produce\": 5000000}},"
                + " {\"entity\": {\"user\": \"bob\", \"client_id\": null}, \"limits\": {\"produce\": 3000000}}]";
        service.table(StubService.table(1.0, DEFAULTS, overrides, Instant.now().plusSeconds(60)));
        configure(Map.of());
        callback.updateQuota(PRODUCE, entity(ClientQuotaEntity.ConfigEntityType.USER, "alice"), 1_000_000);
        callback.updateQuota(PRODUCE, entity(ClientQuotaEntity.ConfigEntityType.USER, "bob"), 9_000_000);
        callback.updateQuota(FETCH, entity(ClientQuotaEntity.ConfigEntityType.DEFAULT_USER, ""), 7_000_000);
        assertEquals(1_000_000.0, limit("alice", "app", PRODUCE), "Kafka's (user) beats the table's (default user)");
        assertEquals(3_000_000.0, limit("bob", "app", PRODUCE), "on the same entity and type the table wins");
        assertEquals(5_000_000.0, limit("carol", "app", PRODUCE));
        assertEquals(7_000_000.0, limit("carol", "app", FETCH), "a type the table does not set");
        assertTrue(callback.quotaResetRequired(FETCH));
        callback.removeQuota(PRODUCE, entity(ClientQuotaEntity.ConfigEntityType.USER, "alice"));
        assertEquals(5_000_000.0, limit("alice", "app", PRODUCE));
    }

    @Test
    void aPauseStartsANewEpochSoKafkaForgetsTheBytesOfTheOpenWindow() throws Exception {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        Map<String, String> open = callback.quotaMetricTags(PRODUCE, user("alice"), "app");
        service.table(StubService.table(0.9, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        eventually(() -> callback.view().factor == 0.9, "a small step down");
        assertEquals(open, callback.quotaMetricTags(PRODUCE, user("alice"), "app"), "a small step keeps the sensors");
        service.table(StubService.table(0.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        eventually(() -> callback.view().factor == 0.0, "the pause");
        Map<String, String> paused = callback.quotaMetricTags(PRODUCE, user("alice"), "app");
        assertNotEquals(open.get(ServiceQuotaCallback.EPOCH_TAG), paused.get(ServiceQuotaCallback.EPOCH_TAG));
        assertEquals(FRESH_FLOOR, callback.quotaLimit(PRODUCE, paused), 1e-6, "the floor, in a fresh epoch");
        assertEquals(open.get(ServiceQuotaCallback.EPOCH_TAG), callback.quotaMetricTags(FETCH, user("alice"), "app").get(
                ServiceQuotaCallback.EPOCH_TAG), "fetch is not scaled, so its epoch stays");
    }

    @Test
    void callbackMethodsNeverThrow() {
        service.table(StubService.table(1.0, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(60)));
        configure(Map.of());
        assertNull(callback.quotaLimit(PRODUCE, Map.of()));
        assertNull(callback.quotaLimit(PRODUCE, Map.of("unexpected", "tags")));
        assertEquals("", callback.quotaMetricTags(PRODUCE, null, null).get("user"));
        callback.updateQuota(PRODUCE, List::of, 1.0); // an entity with no parts is not an entity
        assertFalse(callback.updateClusterMetadata(null));
    }

    private static ClientQuotaEntity entity(ClientQuotaEntity.ConfigEntityType type, String name) {
        ClientQuotaEntity.ConfigEntity part = new ClientQuotaEntity.ConfigEntity() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public ClientQuotaEntity.ConfigEntityType entityType() {
                return type;
            }
        };
        return () -> List.of(part);
    }

    @Test
    void each304RenewsTheTablesValidityFromItsHeaderSoAnIdleServiceNeverLetsItExpire() throws Exception {
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(30)));
        configure(Map.of(ShimConfig.LONG_POLL_WAIT_MS, "100")); // long-polls time out at once: 304 after 304
        long expiresBefore = callback.view().expiresAtNanos;
        service.validUntilHeader(Instant.now().plusSeconds(600));
        // Waits on the renewal itself: a request the stub has counted may not be answered yet.
        eventually(() -> callback.view().expiresAtNanos - expiresBefore > Duration.ofSeconds(500).toNanos(),
                "a 304 carrying the renewed validity renews the table's");
        nanos.addAndGet(Duration.ofSeconds(60).toNanos()); // past the valid_until of the table's body
        assertEquals(QuotaView.Mode.SERVICE, callback.view().mode, "still the service's table: its validity was renewed");
        assertEquals(524288.0, limit("alice", "app", PRODUCE));
    }

    @Test
    void a200CarryingAValidityHeaderIsValidUntilTheHeaderSays() throws Exception {
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(30)));
        service.validUntilHeader(Instant.now().plusSeconds(600));
        configure(Map.of());
        nanos.addAndGet(Duration.ofSeconds(60).toNanos()); // past the valid_until of the table's body
        assertEquals(QuotaView.Mode.SERVICE, callback.view().mode, "valid until the header's instant");
        nanos.addAndGet(Duration.ofSeconds(560).toNanos());
        assertEquals(QuotaView.Mode.FALLBACK, callback.view().mode, "and no longer");
    }

    @Test
    void a304WithoutAValidityHeaderKeepsTheTablesOwnExpiry() throws Exception {
        service.table(StubService.table(0.5, DEFAULTS, NO_OVERRIDES, Instant.now().plusSeconds(30)));
        configure(Map.of(ShimConfig.LONG_POLL_WAIT_MS, "100"));
        long expiresBefore = callback.view().expiresAtNanos;
        int polled = service.requests.size();
        eventually(() -> service.requests.size() > polled + 2, "a few plain 304s");
        assertEquals(expiresBefore, callback.view().expiresAtNanos);
        nanos.addAndGet(Duration.ofSeconds(32).toNanos());
        assertEquals(QuotaView.Mode.FALLBACK, callback.view().mode);
    }
}
