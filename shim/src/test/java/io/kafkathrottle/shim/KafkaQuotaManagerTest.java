package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.internals.Plugin;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.QuotaType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.ObjectMapper;

import kafka.server.ClientQuotaManager;
import scala.Option;

/**
 * The shim's decisions run through Kafka 4.1's own produce quota manager (kafka.server
 * .ClientQuotaManager with the shim as its callback: Kafka's sensors, sample windows, padding of
 * young sensors and throttle times) on a simulated clock. One producer connection: it sends what
 * it has buffered (at most 64 KiB a request, a request every 5 to 20 ms, seeded) while its
 * connection is not muted, and a throttled response mutes it for the throttle time, as KIP-219
 * brokers do. (Without the jitter the simulation keeps step for ever, and whatever a saturated
 * sensor let through 11 s ago repeats: Kafka's window, not the shim.) The default produce
 * quota is 4 MiB/s per broker; the floor 64 KiB/s.
 */
class KafkaQuotaManagerTest {
    private static final double MIB = 1024 * 1024;
    private static final double BASE = 4 * MIB;
    private static final double FLOOR = 65536;
    private static final long STEP_MS = 5;
    private static final int MAX_GAP_MS = 15; // a request every 5 to 20 ms: real producers do not keep step
    private static final double BATCH = 65536;
    private static final double BUFFER = 2 * MIB;
    private static final double QUARTER_SPAN_S = 3.0; // (1 / 0.8 - 1) x Kafka's 12 s: the most history may add

    private Broker broker;

    @AfterEach
    void close() {
        if (broker != null) {
            broker.close();
        }
    }

    private static double effective(double factor) {
        return factor >= 1.0 ? BASE : Math.max(BASE * factor, FLOOR);
    }

    @Test
    void alongARampTheProducerSlowsInStepWithTheFactorAndIsFreedAtOnceWhenThePauseEnds() {
        // Just under the quota while OPEN, so the sensor's window is flat when THROTTLE begins; from
        // then on more than the quota.
        broker = new Broker(0.98 * BASE);
        broker.factor(1.0);
        broker.run(30);
        double open = broker.rate(20, 30);
        assertEquals(0.98 * BASE, open, 0.02 * BASE);

        broker.offer(5 * MIB);
        double throttleFrom = broker.seconds();
        List<double[]> steps = new ArrayList<>(); // {from, factor}
        for (int step = 1; step <= 19; step++) { // 0.95 down to 0.05, a change every 2 s
            double factor = 1.0 - 0.05 * step;
            steps.add(new double[] {broker.seconds(), factor});
            broker.factor(factor);
            broker.run(2);
        }
        double pauseFrom = broker.seconds();
        StringBuilder table = new StringBuilder();
        for (double[] step : steps) {
            double measured = broker.rate(step[0], step[0] + 2);
            table.append(String.format("%n  %5.1f s  factor %.2f  quota %.2f MiB/s  measured %.2f MiB/s", step[0] - throttleFrom, step[1],
                    effective(step[1]) / MIB, measured / MIB));
        }
        for (double[] step : steps) {
            double quota = effective(step[1]);
            // Past one span of Kafka's window into THROTTLE, and well above the floor: near it, a
            // fresh epoch's own allowance (10 windows of the floor, as in a pause) outweighs 2 s of quota.
            if (step[0] - throttleFrom >= 12 && quota >= 4 * FLOOR) {
                double measured = broker.rate(step[0], step[0] + 2);
                assertEquals(quota, measured, 0.25 * quota, "factor " + step[1] + table);
            }
        }
        double admitted = broker.bytes(throttleFrom, pauseFrom);
        assertTrue(admitted <= 0.6 * open * (pauseFrom - throttleFrom), "admitted " + admitted / MIB + " MiB" + table);

        broker.factor(0.0);
        broker.run(6);
        double paused = broker.rate(pauseFrom + 2, pauseFrom + 6);
        assertEquals(FLOOR, paused, 0.5 * FLOOR, "paused: held to the floor, and given it");
        for (double[] throttle : broker.throttles) {
            if (throttle[0] >= pauseFrom) {
                // 64 KiB at the floor is a second, and a young sensor's sample boundary up to another: no more.
                assertTrue(throttle[1] <= 2.0, "throttles in a pause do not add up: " + throttle[1]);
            }
        }
        double freed = broker.seconds();
        broker.factor(1.0);
        broker.run(10);
        double recovered = broker.backAbove(0.5 * open, freed);
        // A request let in at the floor just before may still be served: 64 KiB at 64 KiB/s.
        assertTrue(recovered - freed <= 2.0, "back above half the OPEN rate " + (recovered - freed) + " s after the pause ended");
        for (double[] throttle : broker.throttles) {
            assertTrue(throttle[1] <= QUARTER_SPAN_S + 1.0, "a throttle of " + throttle[1] + " s at " + (throttle[0] - throttleFrom) + " s");
            if (throttle[0] < freed) {
                assertTrue(throttle[0] + throttle[1] <= freed + QUARTER_SPAN_S, "a throttle outlived the pause by more than 3 s");
            }
        }
    }

    @Test
    void aChangeToHalfThrottlesWithinASecondAndHoldsTheProducerToHalfTheQuota() {
        broker = new Broker(3 * MIB);
        broker.factor(1.0);
        broker.run(30);
        assertEquals(0, broker.throttles.size(), "3 MiB/s is within the 4 MiB/s quota");
        double changed = broker.seconds();
        broker.factor(0.5);
        broker.run(32);
        double first = broker.throttles.isEmpty() ? Double.NaN : broker.throttles.get(0)[0];
        assertTrue(first - changed <= 1.0, "first throttle " + (first - changed) + " s after the change");
        double held = broker.rate(changed + 2, changed + 32);
        assertEquals(0.5 * BASE, held, 0.15 * 0.5 * BASE, "held over 30 s");
    }

    @Test
    void afterASteepDropWithoutAPauseEndsNoThrottleOutlivesItBeyondAQuarterSpan() {
        broker = new Broker(5 * MIB); // more than the quota: the sensor is full when the drop comes
        broker.factor(1.0);
        broker.run(30);
        double open = broker.rate(20, 30);
        assertEquals(BASE, open, 0.1 * BASE, "held to the quota while OPEN");
        double dropped = broker.seconds();
        broker.factor(0.2);
        broker.run(10);
        double held = broker.rate(dropped + 2, dropped + 10);
        assertEquals(0.2 * BASE, held, 0.25 * 0.2 * BASE, "the steep drop bites at once");
        double raised = broker.seconds();
        broker.factor(1.0);
        broker.run(10);
        double recovered = broker.backAbove(0.5 * open, raised);
        assertTrue(recovered - raised <= 2.0, "back above half the OPEN rate " + (recovered - raised) + " s after the factor rose");
        for (double[] throttle : broker.throttles) {
            if (throttle[0] < raised) {
                assertTrue(throttle[0] + throttle[1] <= raised + QUARTER_SPAN_S, "a throttle outlived the drop by " + (throttle[0] + throttle[1] - raised) + " s");
            }
        }
    }

    /** One broker's produce quota manager with the shim as its callback, and one producer connection to it. */
    private static final class Broker implements AutoCloseable {
        private static final ObjectMapper JSON = new ObjectMapper();
        private final SimulatedTime time = new SimulatedTime();
        private final long startNanos = time.nanoseconds();
        private final ServiceQuotaCallback callback = new ServiceQuotaCallback(time::nanoseconds);
        private final QuotaFeed feed = callback.configureUnstarted(Map.of(ShimConfig.URL, "http://127.0.0.1:9"));
        private final Metrics metrics = new Metrics(new MetricConfig(), List.of(), time);
        private final ClientQuotaManager manager = new ClientQuotaManager(new ClientQuotaManagerConfig(11, 1), metrics, QuotaType.PRODUCE, time,
                "simulated-", Option.apply(Plugin.wrapInstance((ClientQuotaCallback) callback, metrics, "client.quota.callback.class")));
        private final Session session = new Session(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "alice"), InetAddress.getLoopbackAddress());
        private double offered;
        private final List<double[]> delivered = new ArrayList<>(); // {second, bytes}
        final List<double[]> throttles = new ArrayList<>(); // {second, throttle seconds}
        private double buffered;
        private long mutedUntilMs;
        private long nextRequestMs;
        private final java.util.Random jitter = new java.util.Random(42);
        private long nextTickNanos = time.nanoseconds();

        Broker(double offered) {
            this.offered = offered;
        }

        void offer(double bytesPerSecond) {
            offered = bytesPerSecond;
        }

        double seconds() {
            return (time.nanoseconds() - startNanos) / 1e9;
        }

        /** The first instant after {@code from} (in steps of 50 ms, at most 10 s) at which the last half second's rate exceeds {@code threshold}. */
        double backAbove(double threshold, double from) {
            double at = from;
            while (rate(at - 0.5, at) <= threshold && at < from + 10) {
                at += 0.05;
            }
            return at;
        }

        /** The service publishes this factor (no expiry); the feed takes it at once, as a long-poll does. */
        void factor(double factor) {
            String table = StubService.table(factor, "{\"produce\": " + BASE + "}", "[]", null);
            try {
                feed.onTable(ServiceTable.fromJson(JSON.readTree(table)), null);
            } catch (java.io.IOException e) {
                throw new AssertionError(e);
            }
        }

        void run(double seconds) {
            long end = time.nanoseconds() + Math.round(seconds * 1e9);
            while (time.nanoseconds() < end) {
                time.sleep(STEP_MS);
                buffered = Math.min(buffered + offered * STEP_MS / 1000.0, BUFFER);
                if (time.nanoseconds() >= nextTickNanos) { // the feed's ticker
                    feed.tick();
                    nextTickNanos += QuotaWindow.KAFKA_DEFAULT.tickNanos();
                }
                long now = time.milliseconds();
                if (now >= mutedUntilMs && now >= nextRequestMs && buffered >= 1) {
                    nextRequestMs = now + jitter.nextInt(MAX_GAP_MS + 1);
                    double size = Math.min(buffered, BATCH);
                    buffered -= size;
                    int throttleMs = manager.recordAndGetThrottleTimeMs(session, "app", size, now);
                    delivered.add(new double[] {seconds(), size});
                    if (throttleMs > 0) {
                        throttles.add(new double[] {seconds(), throttleMs / 1000.0});
                        mutedUntilMs = now + throttleMs;
                    }
                }
            }
        }

        double bytes(double from, double to) {
            return delivered.stream().filter(d -> d[0] >= from && d[0] < to).mapToDouble(d -> d[1]).sum();
        }

        double rate(double from, double to) {
            return bytes(from, to) / (to - from);
        }

        @Override
        public void close() {
            manager.shutdown();
            metrics.close();
            callback.close();
        }
    }
}
