package io.kafkathrottle.shim;

import java.time.Duration;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link ClientQuotaCallback} that applies the throttle service's decisions in a broker.
 *
 * <p>A daemon thread polls {@code GET <url>/quotas} (ETag, long-poll) and swaps in an immutable
 * {@link QuotaView}; the methods Kafka calls on every request only read that view, never block
 * and never do I/O. Expiry of the last table is judged when the view is read, so no timer is
 * needed. One log line per change of state.
 */
public final class ServiceQuotaCallback implements ClientQuotaCallback {
    static final String EPOCH_TAG = "throttle-epoch";
    private static final Logger LOG = LoggerFactory.getLogger(ServiceQuotaCallback.class);

    private final LongSupplier nanoTime;
    private final Object lock = new Object();
    private final AtomicBoolean[] resetRequired = new AtomicBoolean[ClientQuotaType.values().length];
    private final Map<EntityKey, Map<ClientQuotaType, Double>> kafkaQuotas = new HashMap<>(); // guarded by lock
    private final AtomicBoolean errorReported = new AtomicBoolean();
    private volatile QuotaView view = QuotaView.starting(1.0);
    private volatile boolean running;
    private ShimConfig config;
    private TableFetcher fetcher;
    private Thread poller;
    private String etag;

    public ServiceQuotaCallback() {
        this(System::nanoTime);
    }

    ServiceQuotaCallback(LongSupplier nanoTime) {
        this.nanoTime = nanoTime;
        for (int i = 0; i < resetRequired.length; i++) {
            resetRequired[i] = new AtomicBoolean();
        }
    }

    @Override
    public void configure(Map<String, ?> configs) {
        config = ShimConfig.parse(configs);
        fetcher = new TableFetcher(config);
        synchronized (lock) {
            view = QuotaView.starting(config.fallbackFactor).withKafkaQuotas(kafkaQuotas);
        }
        LOG.info("Throttle service shim: polling {} (long-poll wait {} ms, fallback factor {})", config.quotasUri,
                config.longPollWait.toMillis(), config.fallbackFactor);
        running = true;
        try {
            // The first table before the broker serves clients, so they start under the right quotas.
            pollOnce();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        poller = new Thread(this::pollLoop, "throttle-service-shim-poller");
        poller.setDaemon(true);
        poller.start();
    }

    @Override
    public Map<String, String> quotaMetricTags(ClientQuotaType quotaType, KafkaPrincipal principal, String clientId) {
        String user = principal == null ? "" : principal.getName();
        String client = clientId == null ? "" : clientId;
        try {
            QuotaView current = currentView();
            Map<String, String> tags = new HashMap<>(QuotaResolver.resolve(current.table, user, client, quotaType, current.factor).tags());
            tags.put(EPOCH_TAG, current.epochTag(quotaType));
            return tags;
        } catch (RuntimeException e) {
            reportError("quotaMetricTags", e);
            return Map.of(QuotaResolver.USER_TAG, user, QuotaResolver.CLIENT_ID_TAG, client);
        }
    }

    @Override
    public Double quotaLimit(ClientQuotaType quotaType, Map<String, String> metricTags) {
        try {
            QuotaView current = currentView();
            if (!current.epochTag(quotaType).equals(metricTags.get(EPOCH_TAG))) {
                return null; // a sensor of a past epoch: no client uses these tags any more
            }
            Map<String, String> tags = new HashMap<>(metricTags);
            tags.remove(EPOCH_TAG);
            return QuotaResolver.limitForTags(current.table, quotaType, tags, current.factor);
        } catch (RuntimeException e) {
            reportError("quotaLimit", e);
            return null;
        }
    }

    @Override
    public boolean quotaResetRequired(ClientQuotaType quotaType) {
        try {
            currentView();
            AtomicBoolean flag = resetRequired[quotaType.ordinal()];
            return flag.get() && flag.getAndSet(false);
        } catch (RuntimeException e) {
            reportError("quotaResetRequired", e);
            return false;
        }
    }

    @Override
    public void updateQuota(ClientQuotaType quotaType, ClientQuotaEntity quotaEntity, double newValue) {
        try {
            synchronized (lock) {
                kafkaQuotas.computeIfAbsent(entityKey(quotaEntity), e -> new EnumMap<>(ClientQuotaType.class)).put(quotaType, newValue);
                publish(view.withKafkaQuotas(kafkaQuotas));
            }
        } catch (RuntimeException e) {
            reportError("updateQuota", e);
        }
    }

    @Override
    public void removeQuota(ClientQuotaType quotaType, ClientQuotaEntity quotaEntity) {
        try {
            synchronized (lock) {
                EntityKey key = entityKey(quotaEntity);
                Map<ClientQuotaType, Double> limits = kafkaQuotas.get(key);
                if (limits != null) {
                    limits.remove(quotaType);
                    if (limits.isEmpty()) {
                        kafkaQuotas.remove(key);
                    }
                }
                publish(view.withKafkaQuotas(kafkaQuotas));
            }
        } catch (RuntimeException e) {
            reportError("removeQuota", e);
        }
    }

    @Override
    public boolean updateClusterMetadata(Cluster cluster) {
        return false; // quotas do not depend on partition leadership
    }

    @Override
    public void close() {
        running = false;
        Thread thread = poller;
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The view in force now (for tests and diagnostics). */
    QuotaView view() {
        return currentView();
    }

    private QuotaView currentView() {
        QuotaView current = view;
        if (current.expired(nanoTime.getAsLong())) {
            synchronized (lock) {
                if (view == current) {
                    publish(current.fallback(config.fallbackFactor));
                    LOG.warn("Throttle service shim: the last quota table expired; fallback factor {} ({}) applies until {} answers",
                            config.fallbackFactor, view.state(), config.quotasUri);
                }
                return view;
            }
        }
        return current;
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

    /** One poll and its effect on the view; true when the next poll may follow at once (a long-poll). */
    private boolean pollOnce() throws InterruptedException {
        boolean longPoll = !config.longPollWait.isZero();
        TableFetcher.Outcome outcome = fetcher.fetch(etag, config.longPollWait);
        if (outcome instanceof TableFetcher.Changed changed) {
            onTable(changed);
            etag = changed.etag();
            return longPoll && etag != null;
        }
        if (outcome instanceof TableFetcher.Failed failed) {
            etag = null; // the next answer must be a whole table, to learn its validity afresh
            onFailure(failed.reason());
            return false;
        }
        currentView(); // a 304: nothing new, but the table may have expired meanwhile
        return longPoll;
    }

    private void onTable(TableFetcher.Changed changed) {
        ServiceTable table = changed.table();
        long expiresAt = changed.remaining() == null ? QuotaView.NO_EXPIRY : nanoTime.getAsLong() + changed.remaining().toNanos();
        synchronized (lock) {
            QuotaView previous = view;
            QuotaView next = previous.withService(table, expiresAt, kafkaQuotas);
            publish(next);
            if (previous.mode != QuotaView.Mode.SERVICE) {
                LOG.info("Throttle service shim: table from {}: factor {} ({}, source {}), {} overrides, {} groups{}", config.quotasUri,
                        table.factor(), next.state(), table.source(), table.table().overrides.size(), table.table().groups.size(),
                        changed.remaining() == null ? "" : ", valid for " + changed.remaining().toMillis() + " ms");
            } else if (!previous.state().equals(next.state()) || !previous.service.source().equals(table.source())) {
                LOG.info("Throttle service shim: factor {} ({}, source {}), was {} ({}, source {})", table.factor(), next.state(), table.source(),
                        previous.factor, previous.state(), previous.service.source());
            }
        }
    }

    private void onFailure(String reason) {
        synchronized (lock) {
            QuotaView current = view;
            if (current.mode == QuotaView.Mode.SERVICE && current.expiresAtNanos != QuotaView.NO_EXPIRY) {
                publish(current.kept());
                long left = Duration.ofNanos(current.expiresAtNanos - nanoTime.getAsLong()).toMillis();
                LOG.warn("Throttle service shim: {}; keeping the last table (factor {}, {}) for up to {} ms", reason, current.factor,
                        current.state(), Math.max(left, 0));
            } else if (current.mode == QuotaView.Mode.SERVICE || current.mode == QuotaView.Mode.STARTING) {
                publish(current.fallback(config.fallbackFactor));
                LOG.warn("Throttle service shim: {}; fallback factor {} ({}) applies until it answers", reason, config.fallbackFactor,
                        view.state());
            }
        }
        currentView();
    }

    /** Swaps in the next view and flags a reset for every quota type whose limits may change. */
    private void publish(QuotaView next) {
        QuotaView previous = view;
        view = next;
        for (ClientQuotaType type : ClientQuotaType.values()) {
            if (next.differsFor(type, previous)) {
                resetRequired[type.ordinal()].set(true);
            }
        }
    }

    private void reportError(String where, RuntimeException error) {
        if (errorReported.compareAndSet(false, true)) {
            LOG.error("Throttle service shim: unexpected error in {} (reported once; the broker carries on)", where, error);
        }
    }

    private static EntityKey entityKey(ClientQuotaEntity entity) {
        String user = null;
        String client = null;
        for (ClientQuotaEntity.ConfigEntity part : entity.configEntities()) {
            switch (part.entityType()) {
                case USER -> user = part.name();
                case DEFAULT_USER -> user = EntityKey.DEFAULT;
                case CLIENT_ID -> client = part.name();
                case DEFAULT_CLIENT_ID -> client = EntityKey.DEFAULT;
                default -> throw new IllegalArgumentException("unexpected quota entity part " + part.entityType());
            }
        }
        return new EntityKey(user, client);
    }
}
