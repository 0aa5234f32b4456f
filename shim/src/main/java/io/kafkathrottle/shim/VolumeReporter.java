package io.kafkathrottle.shim;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Objects;
import java.util.Set;
import java.util.function.LongSupplier;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reports this node's volumes ({@link NodeVolumes}) to the service, {@code PUT <url>/nodes/{node
 * id}/volumes}, once per poll interval on a daemon thread of its own: never on a Kafka request
 * thread, never in the way of the quota long-poll (it shares the poller's HTTP client, on a
 * connection of its own). Whatever the service answers, the quotas keep being polled.
 *
 * <p>While the quota table says what to report on ({@code report_on}, {@link ReportLevels}), the
 * thread also reads the node's file stores every {@code volume.sample.interval.ms} and sends a
 * report at once when a volume crosses a level or moves ({@link ReportTrigger}). Without it (an
 * older service) nothing is sampled and the reports go at the poll interval only.
 *
 * <p>Each refusal is logged once per episode (until the answer changes), as are directories that
 * cannot be read. A 404 means the service takes no node reports (its node token is unset; an
 * older service answers 403 or 405): the shim says so once and asks again only every
 * {@link #NOT_TAKEN_RETRY}.
 */
final class VolumeReporter {
    /** How long the shim waits after a 404 (the service takes no node reports) before it tries again. */
    static final Duration NOT_TAKEN_RETRY = Duration.ofMinutes(5);
    private static final Logger LOG = LoggerFactory.getLogger(ServiceQuotaCallback.class);
    private static final int LOGGED_BODY_CHARS = 300;

    private final ShimConfig config;
    private final HttpClient client;
    private final NodeVolumes volumes;
    private final NodeVolumes.StoreLookup lookup;
    private final URI uri;
    private final LongSupplier nanoTime;
    private final Object wake = new Object(); // notified when the levels change
    private volatile boolean running;
    private volatile ReportLevels wanted; // the latest table's (set by the poller)
    private Thread thread;
    // The reporter thread's own (reportOnce and the loop run on it alone):
    private String episode; // the last refusal logged; null while reports are taken
    private Set<Path> unreadable = Set.of();
    private int leftOut;
    private NodeVolumes.Report lastReport; // the last one measured
    private final ReportTrigger trigger;
    private volatile long reports; // written by the reporter thread only
    private final long[] triggered = new long[ReportTrigger.Reason.values().length]; // reports sent per reason

    VolumeReporter(ShimConfig config, HttpClient client, NodeVolumes.StoreLookup lookup, LongSupplier nanoTime) {
        this.config = config;
        this.client = client;
        this.volumes = config.volumes;
        this.lookup = lookup;
        this.uri = config.nodeVolumesUri;
        this.nanoTime = nanoTime;
        this.trigger = new ReportTrigger(config.pollInterval, volumes.directories);
    }

    VolumeReporter(ShimConfig config, HttpClient client, NodeVolumes.StoreLookup lookup) {
        this(config, client, lookup, System::nanoTime);
    }

    VolumeReporter(ShimConfig config, HttpClient client) {
        this(config, client, Files::getFileStore);
    }

    /** What the latest quota table said to report on (null: nothing). */
    ReportLevels levels() {
        return wanted;
    }

    /** What the latest quota table says to report on (null: nothing; the poll interval only). Any thread. */
    void levels(ReportLevels levels) {
        if (levels != wanted) {
            wanted = levels;
            synchronized (wake) {
                wake.notifyAll();
            }
        }
    }

    void start() {
        if (config.brokerId == ShimConfig.UNKNOWN_BROKER) {
            LOG.warn("Throttle service shim: node.id is not set, so this node's volumes are not reported to {}", config.serviceUri);
            return;
        }
        LOG.info("Throttle service shim: reporting node {}'s volumes ({}, roles {}) to {} every {} ms", config.brokerId,
                volumes.directories.stream().map(d -> d.path().toString()).toList(), volumes.roles, uri, config.pollInterval.toMillis());
        running = true;
        thread = new Thread(this::loop, "throttle-service-shim-reporter-" + config.brokerId);
        thread.setDaemon(true);
        thread.start();
    }

    void stop() {
        running = false;
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** How many reports the service has taken (for tests and diagnostics). */
    long reportsTaken() {
        return reports;
    }

    /** How many reports were sent for {@code reason} (for tests and diagnostics). */
    long reportsSent(ReportTrigger.Reason reason) {
        synchronized (triggered) {
            return triggered[reason.ordinal()];
        }
    }

    private void loop() {
        int count = volumes.directories.size();
        long[] totals = new long[count];
        long[] usables = new long[count];
        long sampleNanos = config.volumeSampleInterval.toNanos();
        while (running) {
            try {
                step(totals, usables);
                long now = nanoTime.getAsLong();
                long waitNanos = trigger.nextWake(now, sampleNanos) - now;
                if (waitNanos > 0) {
                    synchronized (wake) {
                        if (wanted == trigger.levels()) { // else the levels changed meanwhile: judge them at once
                            wake.wait(waitNanos / 1_000_000, (int) (waitNanos % 1_000_000));
                        }
                    }
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                refused("error", "unexpected error " + e);
                try {
                    Thread.sleep(config.pollInterval.toMillis());
                } catch (InterruptedException interrupted) {
                    return;
                }
            }
        }
    }

    /** One turn of the reporter: take the latest levels, sample the file stores when they say to, and report if due. */
    void step(long[] totals, long[] usables) throws InterruptedException {
        ReportLevels levels = wanted;
        if (levels != trigger.levels()) {
            noteLevels(trigger.levels(), levels);
            trigger.levels(levels);
        }
        if (trigger.samples() && lastReport != null) {
            System.arraycopy(lastReport.totals(), 0, totals, 0, totals.length);
            NodeVolumes.sample(lastReport.stores(), usables);
        }
        ReportTrigger.Reason reason = trigger.evaluate(nanoTime.getAsLong(), totals, usables);
        if (reason == ReportTrigger.Reason.NONE) {
            return;
        }
        Duration next;
        try {
            next = reportOnce();
        } catch (RuntimeException e) {
            refused("error", "unexpected error " + e);
            next = config.pollInterval;
        }
        trigger.sent(nanoTime.getAsLong(), reason, lastReport, next);
        synchronized (triggered) {
            triggered[reason.ordinal()]++;
        }
    }

    /** One line when the service starts or stops saying what to report on (not at each change of its levels). */
    private void noteLevels(ReportLevels previous, ReportLevels next) {
        if (previous == null && next != null) {
            LOG.info("Throttle service shim: node {} samples its volumes every {} ms and reports at once when one crosses a level"
                    + " the service named or moves by more than {}% of its total (at most one report per {} ms)", config.brokerId,
                    config.volumeSampleInterval.toMillis(), next.moveShare * 100, next.minIntervalMs);
        } else if (previous != null && next == null) {
            LOG.info("Throttle service shim: the service names no levels to report on any longer; node {} reports every {} ms",
                    config.brokerId, config.pollInterval.toMillis());
        }
    }

    /** Measures and sends one report; returns how long to wait before the next. */
    Duration reportOnce() throws InterruptedException {
        NodeVolumes.Report report = volumes.measure(lookup);
        lastReport = report;
        noteUnreadable(report);
        HttpRequest.Builder request = HttpRequest.newBuilder(uri).PUT(HttpRequest.BodyPublishers.ofByteArray(report.body()))
                .timeout(config.requestTimeout).header("Content-Type", "application/json").header("Accept", "application/json");
        if (config.token != null) {
            request.header("Authorization", "Bearer " + config.token.value());
        }
        HttpResponse<String> response;
        try {
            response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
        } catch (HttpTimeoutException e) {
            refused("timeout", "no answer from " + uri + " within " + config.requestTimeout.toMillis() + " ms");
            return config.pollInterval;
        } catch (IOException e) {
            refused("unreachable", "cannot reach " + uri + ": " + e);
            return config.pollInterval;
        }
        int status = response.statusCode();
        if (status / 100 == 2) {
            reports++;
            if (episode != null) {
                LOG.info("Throttle service shim: {} takes node {}'s volume reports again", uri, config.brokerId);
                episode = null;
            }
            return config.pollInterval;
        }
        if (notTaken(status)) {
            if (!"not taken".equals(episode)) {
                LOG.info("Throttle service shim: {} takes no node volume reports (HTTP {}); asking again every {} min", uri, status,
                        NOT_TAKEN_RETRY.toMinutes());
                episode = "not taken";
            }
            return NOT_TAKEN_RETRY;
        }
        String body = response.body() == null ? "" : response.body().strip();
        refused(Integer.toString(status), "HTTP " + status + (body.isEmpty() ? ""
                : ": " + (body.length() > LOGGED_BODY_CHARS ? body.substring(0, LOGGED_BODY_CHARS) + "..." : body)));
        if (status == 429) {
            Duration retryAfter = retryAfter(response);
            return retryAfter.compareTo(config.pollInterval) > 0 ? retryAfter : config.pollInterval;
        }
        return config.pollInterval;
    }

    /**
     * Whether the answer says the service takes no node reports at all: 404 from a service without
     * a node token; 403 or 405 from a service from before node reports, which refuses writes it
     * does not know.
     */
    static boolean notTaken(int status) {
        return status == 404 || status == 403 || status == 405;
    }

    /** A refusal or failure, logged when it starts an episode (the first, or one unlike the last). */
    private void refused(String kind, String detail) {
        if (!kind.equals(episode)) {
            LOG.warn("Throttle service shim: node {}'s volume report not taken by {}: {} (logged once until the answer changes;"
                    + " quotas are polled as usual)", config.brokerId, uri, detail);
            episode = kind;
        }
    }

    private void noteUnreadable(NodeVolumes.Report report) {
        if (!report.unreadable().equals(unreadable)) {
            if (report.unreadable().isEmpty()) {
                LOG.info("Throttle service shim: every log dir of node {} can be read again", config.brokerId);
            } else {
                LOG.warn("Throttle service shim: cannot read the file store of {}; left out of node {}'s volume reports until it can",
                        report.unreadable(), config.brokerId);
            }
            unreadable = report.unreadable();
        }
        if (report.leftOut() != leftOut) {
            if (report.leftOut() > 0) {
                LOG.warn("Throttle service shim: node {} has more log dirs than one report holds ({} entries, {} bytes at most);"
                        + " {} left out", config.brokerId, NodeVolumes.MAX_ENTRIES, NodeVolumes.MAX_BODY_BYTES, report.leftOut());
            }
            leftOut = report.leftOut();
        }
    }

    /** Retry-After in seconds or as an HTTP date; zero when absent or unreadable. */
    static Duration retryAfter(HttpResponse<?> response) {
        String value = response.headers().firstValue("Retry-After").map(String::strip).orElse("");
        if (value.isEmpty()) {
            return Duration.ZERO;
        }
        try {
            return Duration.ofSeconds(Math.max(0, Long.parseLong(value)));
        } catch (NumberFormatException e) {
            try {
                Instant until = ZonedDateTime.parse(value, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant();
                Duration left = Duration.between(Instant.now(), until);
                return left.isNegative() ? Duration.ZERO : left;
            } catch (DateTimeParseException unreadable) {
                return Duration.ZERO;
            }
        }
    }

    @Override
    public String toString() {
        return "VolumeReporter[" + uri + ", " + Objects.toString(episode, "taken") + "]";
    }
}
