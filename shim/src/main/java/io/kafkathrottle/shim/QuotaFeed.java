package io.kafkathrottle.shim;

import java.time.Duration;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

import org.apache.kafka.server.quota.ClientQuotaType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The poller of one broker JVM: polls {@code GET <url>/quotas} (ETag, long-poll) on a daemon
 * thread, keeps the current {@link QuotaView} (the service's table, Kafka's own quotas, expiry,
 * the quota epochs) and tells every callback instance of each new view. A second daemon thread
 * re-publishes the view every quarter of a quota sample while some type's Kafka factor moves
 * with time ({@link FactorTrack}), so that Kafka re-reads the bounds.
 *
 * <p>Shared: a combined KRaft node (process.roles=broker,controller) configures the callback
 * twice, once for the broker's quota managers and once for the controller's. Instances with the
 * same settings share one feed, so the node polls once, keeps one set of epochs and logs each
 * change once. Reference-counted: the last instance to close stops the threads. The feed also
 * runs the node's {@link VolumeReporter}, so a node reports its volumes once whatever its roles.
 */
final class QuotaFeed {
    /** Told of each new view, on the thread that published it; must only set flags. */
    interface Listener {
        void changed(QuotaView previous, QuotaView next);
    }

    static final LongSupplier SYSTEM_CLOCK = System::nanoTime;
    /** The shortest wait a table's validity brings a long-poll down to: at most a poll a second. */
    static final Duration SHORTEST_CAPPED_WAIT = Duration.ofSeconds(1);
    private static final Logger LOG = LoggerFactory.getLogger(ServiceQuotaCallback.class);
    private static final Map<Map<String, String>, QuotaFeed> FEEDS = new HashMap<>(); // guarded by itself

    private final ShimConfig config;
    private final LongSupplier nanoTime;
    private final TableFetcher fetcher;
    private final VolumeReporter reporter;
    private final Object lock = new Object();
    private final Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas = new HashMap<>(); // guarded by lock
    private final List<Listener> listeners = new CopyOnWriteArrayList<>();
    private final AtomicBoolean errorReported = new AtomicBoolean();
    private final EnforcementMetrics metrics;
    private volatile QuotaView view;
    private volatile boolean running;
    private Thread poller;
    private Thread ticker;
    private String etag; // the poller thread's
    private String reportOnProblem; // the last unusable report_on logged (the poller thread's)
    private int users; // guarded by FEEDS

    private QuotaFeed(ShimConfig config, LongSupplier nanoTime) {
        this.config = config;
        this.nanoTime = nanoTime;
        this.fetcher = new TableFetcher(config);
        this.reporter = new VolumeReporter(config, fetcher.client());
        this.view = QuotaView.starting(config.fallbackFactor, config.window, nanoTime.getAsLong());
        this.metrics = new EnforcementMetrics(this::view, config.brokerId);
    }

    /**
     * The feed for these settings, started (its first table fetched) if this is its first user.
     * {@code nanoTime} is the clock of a feed this call starts.
     */
    static QuotaFeed acquire(ShimConfig config, LongSupplier nanoTime, Listener listener) {
        synchronized (FEEDS) {
            QuotaFeed feed = FEEDS.get(config.identity);
            boolean first = feed == null;
            if (first) {
                feed = new QuotaFeed(config, nanoTime);
                FEEDS.put(config.identity, feed);
            }
            feed.users++;
            feed.listeners.add(listener);
            if (first) {
                feed.start(); // under the registry's lock: a second instance waits for the first table too
            }
            return feed;
        }
    }

    /** A feed that is not shared and starts no thread: tests hand it tables and ticks themselves. */
    static QuotaFeed unstarted(ShimConfig config, LongSupplier nanoTime, Listener listener) {
        QuotaFeed feed = new QuotaFeed(config, nanoTime);
        feed.users = 1;
        feed.listeners.add(listener);
        return feed;
    }

    /** Ends one instance's use; the last stops the threads. Once per listener. */
    void release(Listener listener) {
        synchronized (FEEDS) {
            if (!listeners.remove(listener)) {
                return;
            }
            if (--users > 0) {
                return;
            }
            FEEDS.remove(config.identity, this);
        }
        stop();
    }

    /** The view in force now; an expired table is noticed here. */
    QuotaView view() {
        QuotaView current = view;
        long now = nanoTime.getAsLong();
        if (current.expired(now)) {
            synchronized (lock) {
                if (view == current) {
                    publish(current.fallback(config.fallbackFactor, now));
                    LOG.warn("Throttle service shim: the last quota table expired; fallback factor {} ({}) applies until {} answers",
                            config.fallbackFactor, view.state(), config.quotasUri);
                }
                return view;
            }
        }
        return current;
    }

    /** The node's volume reporter (for tests). */
    VolumeReporter reporter() {
        return reporter;
    }

    /** The feed's JMX metrics (for tests). */
    EnforcementMetrics metrics() {
        return metrics;
    }

    /** A quota Kafka holds (kafka-configs) was set. */
    void updateKafkaQuota(ClientQuotaType type, EntityKey entity, double value) {
        synchronized (lock) {
            kafkaQuotas.computeIfAbsent(entity, e -> new EnumMap<>(ClientQuotaType.class)).put(type, value);
            publish(view.withKafkaQuotas(kafkaQuotas, nanoTime.getAsLong()));
        }
    }

    /** A quota Kafka holds (kafka-configs) was removed. */
    void removeKafkaQuota(ClientQuotaType type, EntityKey entity) {
        synchronized (lock) {
            Map<ClientQuotaType, Double> limits = kafkaQuotas.get(entity);
            if (limits != null) {
                limits.remove(type);
                if (limits.isEmpty()) {
                    kafkaQuotas.remove(entity);
                }
            }
            publish(view.withKafkaQuotas(kafkaQuotas, nanoTime.getAsLong()));
        }
    }

    /** Re-publishes the view if some type's Kafka factor has moved with time since it was made. */
    void tick() {
        QuotaView current = view();
        long now = nanoTime.getAsLong();
        if (current.movesBy(now)) {
            synchronized (lock) {
                if (view == current) {
                    publish(current.at(now));
                }
            }
        }
    }

    private void start() {
        LOG.info("Throttle service shim: polling {} for broker {} (long-poll wait {} ms, fallback factor {}, Kafka quota window {} x {} ms)",
                config.quotasUri, config.brokerId, config.longPollWait.toMillis(), config.fallbackFactor, config.window.samples(),
                config.window.sampleNanos() / 1_000_000);
        metrics.register();
        running = true;
        try {
            // The first table before the broker serves clients, so they start under the right quotas.
            pollOnce();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        poller = daemon(this::pollLoop, "throttle-service-shim-poller");
        ticker = daemon(this::tickLoop, "throttle-service-shim-ticker");
        reporter.start();
    }

    private void stop() {
        running = false;
        metrics.unregister();
        reporter.stop();
        for (Thread thread : new Thread[] {poller, ticker}) {
            if (thread != null) {
                thread.interrupt();
                try {
                    thread.join(1_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    private static Thread daemon(Runnable body, String name) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    private void pollLoop() {
        while (running) {
            try {
                boolean again = pollOnce();
                if (!again) {
                    Thread.sleep(config.pollInterval.toMillis());
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                reportError("poll", e);
                try {
                    Thread.sleep(config.pollInterval.toMillis());
                } catch (InterruptedException interrupted) {
                    return;
                }
            }
        }
    }

    private void tickLoop() {
        long period = config.window.tickNanos();
        while (running) {
            try {
                Thread.sleep(period / 1_000_000, (int) (period % 1_000_000));
            } catch (InterruptedException e) {
                return;
            }
            try {
                tick();
            } catch (RuntimeException e) {
                reportError("tick", e);
            }
        }
    }

    /** One poll and its effect on the view; true when the next poll may follow at once (a long-poll). */
    private boolean pollOnce() throws InterruptedException {
        boolean longPoll = !config.longPollWait.isZero();
        TableFetcher.Outcome outcome = fetcher.fetch(etag, longPollWait(config.longPollWait, view.expiresAtNanos, nanoTime.getAsLong()));
        if (outcome instanceof TableFetcher.Changed changed) {
            onTable(changed.table(), changed.remaining());
            etag = changed.etag();
            return longPoll && etag != null;
        }
        if (outcome instanceof TableFetcher.Failed failed) {
            etag = null; // the next answer must be a whole table, to learn its validity afresh
            onFailure(failed.reason());
            return false;
        }
        if (outcome instanceof TableFetcher.NotModified notModified && notModified.remaining() != null) {
            onRenewed(notModified.remaining());
        }
        view(); // a 304: nothing new, but the table may have expired meanwhile
        return longPoll;
    }

    /**
     * How long the next long-poll may be held: the configured wait, but at most half of what is
     * left of the table's validity (and at least {@link #SHORTEST_CAPPED_WAIT}). The service
     * renews the validity every round and tells it in its answers; a poll held past the table's
     * expiry would let the fallback apply while the service still holds the same factor.
     */
    static Duration longPollWait(Duration configured, long expiresAtNanos, long nowNanos) {
        if (configured.isZero() || expiresAtNanos == QuotaView.NO_EXPIRY) {
            return configured;
        }
        long cap = Math.max((expiresAtNanos - nowNanos) / 2, SHORTEST_CAPPED_WAIT.toNanos());
        return configured.toNanos() <= cap ? configured : Duration.ofNanos(cap);
    }

    /** A new table from the service, valid for {@code remaining} (null: no expiry). */
    void onTable(ServiceTable table, Duration remaining) {
        long now = nanoTime.getAsLong();
        long expiresAt = remaining == null ? QuotaView.NO_EXPIRY : now + remaining.toNanos();
        synchronized (lock) {
            QuotaView previous = view;
            QuotaView next = previous.withService(table, expiresAt, kafkaQuotas, config.brokerId, now);
            publish(next);
            if (previous.mode != QuotaView.Mode.SERVICE) {
                LOG.info("Throttle service shim: table from {}: factor {} ({}, source {}), {} overrides, {} groups{}", config.quotasUri,
                        next.factor, next.state(), table.source(), table.table().overrides.size(), table.table().groups.size(),
                        remaining == null ? "" : ", valid for " + remaining.toMillis() + " ms");
            } else if (!previous.state().equals(next.state()) || !previous.service.source().equals(table.source())) {
                LOG.info("Throttle service shim: factor {} ({}, source {}), was {} ({}, source {})", next.factor, next.state(), table.source(),
                        previous.factor, previous.state(), previous.service.source());
            }
            logEnforcement(previous, next);
            logMutationFactor(previous, next);
        }
        reporter.levels(table.reportOn());
        String problem = table.reportOnProblem();
        if (problem != null && !problem.equals(reportOnProblem)) {
            LOG.warn("Throttle service shim: {} sent an unusable report_on ({}); node {} reports its volumes every poll interval"
                    + " (logged once until it changes)", config.quotasUri, problem, config.brokerId);
        }
        reportOnProblem = problem;
    }

    /** One line per change of the mutation factor the decision asks for (the metadata volumes'). */
    private void logMutationFactor(QuotaView previous, QuotaView next) {
        if (previous.wouldMutationFactor == next.wouldMutationFactor) {
            return;
        }
        String hard = next.wouldMutationFactor <= 0.0 ? " (metadata hard limit: partition mutations refused)" : "";
        if (next.enforcing) {
            LOG.info("Throttle service shim: mutation factor {}{} on node {}, was {}", next.wouldMutationFactor, hard, config.brokerId,
                    previous.wouldMutationFactor);
        } else {
            LOG.info("Throttle service shim: shadow on node {}: would apply mutation factor {}{}, was {}; applying mutation quotas unscaled",
                    config.brokerId, next.wouldMutationFactor, hard, previous.wouldMutationFactor);
        }
    }

    /** One line per change of enforcement, and in shadow one per change of what would apply. */
    private void logEnforcement(QuotaView previous, QuotaView next) {
        boolean wasShadow = previous.mode == QuotaView.Mode.SERVICE && !previous.enforcing;
        boolean sameReason = wasShadow && previous.service.enforced() == next.service.enforced()
                && previous.service.canaryBrokers().equals(next.service.canaryBrokers());
        if (!next.enforcing && (!sameReason || previous.wouldFactor != next.wouldFactor)) {
            LOG.info("Throttle service shim: shadow on broker {} ({}): would apply factor {} ({}, source {}); applying quotas unscaled",
                    config.brokerId, next.service.enforced() ? "not a canary broker " + next.service.canaryBrokers() : "shadow mode",
                    next.wouldFactor, next.wouldState(), next.service.source());
        } else if (next.enforcing && wasShadow) {
            LOG.info("Throttle service shim: enforcing on broker {}: factor {} ({}, source {})", config.brokerId, next.factor, next.state(),
                    next.service.source());
        }
    }

    /** A 304 that says how long the table the shim holds stays valid now. */
    void onRenewed(Duration remaining) {
        ServiceTable table;
        synchronized (lock) {
            table = view.service;
        }
        if (table != null) {
            onTable(table, remaining);
        }
    }

    private void onFailure(String reason) {
        synchronized (lock) {
            QuotaView current = view;
            long now = nanoTime.getAsLong();
            if (current.mode == QuotaView.Mode.SERVICE && current.expiresAtNanos != QuotaView.NO_EXPIRY) {
                publish(current.kept(now));
                long left = Duration.ofNanos(current.expiresAtNanos - now).toMillis();
                LOG.warn("Throttle service shim: {}; keeping the last table (factor {}, {}) for up to {} ms", reason, current.factor,
                        current.state(), Math.max(left, 0));
            } else if (current.mode == QuotaView.Mode.SERVICE || current.mode == QuotaView.Mode.STARTING) {
                publish(current.fallback(config.fallbackFactor, now));
                LOG.warn("Throttle service shim: {}; fallback factor {} ({}) applies until it answers", reason, config.fallbackFactor,
                        view.state());
            }
        }
        view();
    }

    /** Swaps in the next view (under the lock) and tells every instance. */
    private void publish(QuotaView next) {
        QuotaView previous = view;
        view = next;
        for (Listener listener : listeners) {
            listener.changed(previous, next);
        }
    }

    private void reportError(String where, RuntimeException error) {
        if (errorReported.compareAndSet(false, true)) {
            LOG.error("Throttle service shim: unexpected error in {} (reported once; the broker carries on)", where, error);
        }
    }
}
