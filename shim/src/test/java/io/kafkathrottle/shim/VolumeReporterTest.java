package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** The shim's report of its node's volumes, against a loopback stand-in of the service. */
class VolumeReporterTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path temp;
    private final AtomicLong nanos = new AtomicLong(1_000_000_000L);
    private StubService service;
    private final List<ServiceQuotaCallback> callbacks = new java.util.ArrayList<>();

    @BeforeEach
    void start() throws Exception {
        service = new StubService();
        service.table(StubService.table(1.0, "{\"produce\": 1048576}", "[]", null));
    }

    @AfterEach
    void stop() {
        callbacks.forEach(ServiceQuotaCallback::close);
        service.close();
    }

    private Map<String, Object> settings(int nodeId, String roles) throws Exception {
        Map<String, Object> configs = new HashMap<>();
        configs.put("node.id", Integer.toString(nodeId));
        configs.put("process.roles", roles);
        configs.put("log.dirs", Files.createDirectories(temp.resolve("node-" + nodeId)).toString());
        configs.put(ShimConfig.URL, service.url());
        configs.put(ShimConfig.POLL_INTERVAL_MS, "100");
        configs.put(ShimConfig.LONG_POLL_WAIT_MS, "2000");
        configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "1000");
        configs.put(ShimConfig.TOKEN, "node-secret");
        return configs;
    }

    private VolumeReporter reporter(Map<String, Object> configs) {
        ShimConfig config = ShimConfig.parse(configs);
        return new VolumeReporter(config, new TableFetcher(config).client());
    }

    private ServiceQuotaCallback callback(Map<String, Object> configs) {
        ServiceQuotaCallback callback = new ServiceQuotaCallback(nanos::get);
        callback.configure(configs);
        callbacks.add(callback);
        return callback;
    }

    private static void eventually(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(10);
        }
    }

    @Test
    void aReportIsAPutOfTheNodesVolumesWithTheServiceTokenAsBearer() throws Exception {
        service.nodeAnswer(204, null, 0);
        Map<String, Object> configs = settings(1001, "controller");
        assertEquals(Duration.ofMillis(100), reporter(configs).reportOnce(), "the next report a poll interval later");
        StubService.NodeReport report = service.nodeReports.get(0);
        assertEquals("PUT", report.method());
        assertEquals("/nodes/1001/volumes", report.path());
        assertEquals("Bearer node-secret", report.authorization());
        assertEquals("application/json", report.contentType());
        JsonNode body = JSON.readTree(report.body());
        assertEquals("[\"controller\"]", body.get("roles").toString());
        JsonNode volume = body.get("volumes").get(0);
        assertEquals(configs.get("log.dirs"), volume.get("log_dir").asText());
        assertEquals(Files.getFileStore(temp).getTotalSpace(), volume.get("total_bytes").asLong());
        assertEquals("[\"metadata\"]", volume.get("holds").toString());
    }

    @Test
    void aServiceThatTakesNoReportsIsAskedAgainOnlyMuchLater() throws Exception {
        // 404: the service's node token is unset; 403 and 405: a service from before node reports.
        for (int status : new int[] {404, 403, 405}) {
            service.nodeAnswer(status, null, 0);
            assertEquals(VolumeReporter.NOT_TAKEN_RETRY, reporter(settings(1, "broker")).reportOnce(), "HTTP " + status);
        }
    }

    @Test
    void tooManyReportsWaitForRetryAfter() throws Exception {
        service.nodeAnswer(429, "30", 0);
        assertEquals(Duration.ofSeconds(30), reporter(settings(1, "broker")).reportOnce());
        service.nodeAnswer(429, null, 0);
        assertEquals(Duration.ofMillis(100), reporter(settings(1, "broker")).reportOnce(), "without Retry-After: the poll interval");
    }

    @Test
    void aRefusedReportIsTriedAgainAtThePollInterval() throws Exception {
        VolumeReporter reporter = reporter(settings(1, "broker"));
        for (int status : new int[] {401, 413, 422, 503}) {
            service.nodeAnswer(status, null, 0);
            assertEquals(Duration.ofMillis(100), reporter.reportOnce(), "HTTP " + status);
        }
        service.nodeAnswer(204, null, 0);
        reporter.reportOnce();
        assertEquals(1, reporter.reportsTaken());
    }

    @Test
    void anUnreachableServiceIsTriedAgainAtThePollInterval() throws Exception {
        Map<String, Object> configs = settings(1, "broker");
        configs.put(ShimConfig.URL, "http://127.0.0.1:1");
        assertEquals(Duration.ofMillis(100), reporter(configs).reportOnce());
    }

    @Test
    void theShimReportsEveryPollIntervalOnItsOwnThread() throws Exception {
        service.nodeAnswer(204, null, 0);
        callback(settings(2, "broker"));
        eventually(() -> service.nodeReports.size() >= 3, "three reports");
        assertTrue(service.nodeReports.stream().allMatch(report -> report.path().equals("/nodes/2/volumes")));
    }

    @Test
    void aReportTheServiceHoldsNeverDelaysTheQuotaLongPoll() throws Exception {
        service.nodeAnswer(204, null, 60_000); // the report hangs for longer than the test waits for anything
        Map<String, Object> configs = settings(3, "broker");
        configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "30000"); // the report is not given up while the test runs
        ServiceQuotaCallback callback = callback(configs);
        eventually(() -> !service.nodeReports.isEmpty(), "a report in flight");
        service.table(StubService.table(0.5, "{\"produce\": 1048576}", "[]", null));
        eventually(() -> callback.view().wouldFactor == 0.5, "the new table while the report hangs");
        assertEquals(0.5, callback.view().factorFor(ClientQuotaType.PRODUCE));
        assertEquals(1, service.nodeReports.size(), "the report still hangs: the poll did not wait for it");
    }

    @Test
    void aCombinedNodeReportsOncePerProcess() throws Exception {
        service.nodeAnswer(204, null, 0);
        Map<String, Object> configs = settings(4, "broker,controller");
        callback(configs); // the broker's quota managers
        callback(configs); // the controller's
        eventually(() -> service.nodeReports.size() >= 2, "reports");
        long reporters = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("throttle-service-shim-reporter-4")).count();
        assertEquals(1, reporters, "one reporter thread for the two callback instances");
        JsonNode body = JSON.readTree(service.nodeReports.get(0).body());
        assertEquals("[\"broker\",\"controller\"]", body.get("roles").toString());
        assertEquals("[\"data\",\"metadata\"]", body.get("volumes").get(0).get("holds").toString());
    }

    private VolumeReporter reporter(Map<String, Object> configs, MutableStore store) {
        ShimConfig config = ShimConfig.parse(configs);
        return new VolumeReporter(config, new TableFetcher(config).client(), directory -> store);
    }

    private static ReportLevels bytesLevel(long level) {
        return new ReportLevels(new ReportLevels.Limit(false, new double[] {level}, 0), null, 0.5, 250, Map.of());
    }

    @Test
    void aCrossingIsReportedWithinOneSampleIntervalNotAtThePollInterval() throws Exception {
        service.nodeAnswer(204, null, 0);
        Map<String, Object> configs = settings(5, "broker");
        configs.put(ShimConfig.POLL_INTERVAL_MS, "60000");
        configs.put(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "200");
        MutableStore store = new MutableStore("volume", 1_000_000, 500_000);
        VolumeReporter reporter = reporter(configs, store);
        reporter.levels(bytesLevel(100_000));
        reporter.start();
        try {
            eventually(() -> service.nodeReports.size() == 1, "the first report");
            eventually(() -> store.reads.get() >= 4, "samples of the healthy volume");
            assertEquals(1, service.nodeReports.size(), "no report while the volume stays above its levels");
            long crossed = System.nanoTime();
            store.usable.set(90_000);
            eventually(() -> service.nodeReports.size() == 2, "the crossing's report");
            long tookMs = (System.nanoTime() - crossed) / 1_000_000;
            // The next sample sees it (200 ms at most), the PUT on loopback takes milliseconds; a loaded machine gets slack.
            assertTrue(tookMs < 200 + 400, "reported " + tookMs + " ms after the crossing");
            JsonNode volume = JSON.readTree(service.nodeReports.get(1).body()).get("volumes").get(0);
            assertEquals(90_000, volume.get("usable_bytes").asLong());
            eventually(() -> reporter.reportsSent(ReportTrigger.Reason.CROSSING) == 1, "counted as a crossing's");
        } finally {
            reporter.stop();
        }
    }

    @Test
    void withoutReportOnTheReportsGoAtThePollIntervalAndNothingIsSampled() throws Exception {
        service.nodeAnswer(204, null, 0);
        Map<String, Object> configs = settings(6, "broker");
        configs.put(ShimConfig.POLL_INTERVAL_MS, "300");
        configs.put(ShimConfig.VOLUME_SAMPLE_INTERVAL_MS, "10");
        MutableStore store = new MutableStore("volume", 1_000_000, 500_000);
        VolumeReporter reporter = reporter(configs, store);
        long started = System.nanoTime();
        reporter.start();
        try {
            eventually(() -> service.nodeReports.size() >= 2, "two reports");
            store.usable.set(0); // a full disk between two reports waits for the poll interval, as before
            Thread.sleep(700);
            long due = reporter.reportsSent(ReportTrigger.Reason.DUE);
            long reads = store.reads.get();
            int sent = service.nodeReports.size();
            long elapsedMs = (System.nanoTime() - started) / 1_000_000;
            assertTrue(sent <= elapsedMs / 300 + 1, sent + " reports in " + elapsedMs + " ms");
            // One report may be in flight (read and received, not yet counted): the rest were counted at the poll interval.
            assertTrue(sent >= due && sent <= due + 1, sent + " reports sent, " + due + " at the poll interval");
            assertTrue(reads >= due && reads <= due + 1, "the file store read once per report, no sampling: " + reads + " reads, "
                    + due + " reports");
        } finally {
            reporter.stop();
        }
    }

    @Test
    void theTablesReportOnReachesTheReporterWithThisNodesTakeHoldLevels() throws Exception {
        service.nodeAnswer(204, null, 0);
        Map<String, Object> configs = settings(7, "broker");
        String dir = configs.get("log.dirs").toString();
        String table = StubService.table(1.0, "{\"produce\": 1048576}", "[]", null);
        service.table(table.substring(0, table.length() - 1) + ", \"report_on\": {\"kind\": \"min-available-bytes\", \"levels\": [100],"
                + " \"hysteresis\": 0, \"metadata\": null, \"move_share\": 0.01, \"min_interval_ms\": 250,"
                + " \"take_hold\": {\"7\": {" + JSON.writeValueAsString(dir) + ": 4096}}}}");
        ServiceQuotaCallback callback = callback(configs);
        eventually(() -> callback.feed().reporter().levels() != null, "the levels handed to the reporter");
        assertEquals(Map.of(dir, 4096L), callback.feed().reporter().levels().takeHold);
        service.table(table);
        eventually(() -> callback.feed().reporter().levels() == null, "a table without report_on: none");
    }
}
