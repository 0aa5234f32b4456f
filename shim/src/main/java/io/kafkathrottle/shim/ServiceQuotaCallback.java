package io.kafkathrottle.shim;

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
 * <p>The {@link QuotaFeed} it shares with any other instance in the JVM (a combined KRaft node
 * builds two) polls the service and swaps in immutable {@link QuotaView}s; the methods Kafka
 * calls on every request only read the view, never block and never do I/O. Each instance keeps
 * its own reset flags, one per quota type, for the quota managers that ask it.
 */
public final class ServiceQuotaCallback implements ClientQuotaCallback {
    static final String EPOCH_TAG = "throttle-epoch";
    private static final Logger LOG = LoggerFactory.getLogger(ServiceQuotaCallback.class);

    private final LongSupplier nanoTime;
    private final AtomicBoolean[] resetRequired = new AtomicBoolean[ClientQuotaType.values().length];
    private final AtomicBoolean errorReported = new AtomicBoolean();
    private final QuotaFeed.Listener listener = this::changed;
    private volatile QuotaFeed feed;

    public ServiceQuotaCallback() {
        this(QuotaFeed.SYSTEM_CLOCK);
    }

    ServiceQuotaCallback(LongSupplier nanoTime) {
        this.nanoTime = nanoTime;
        for (int i = 0; i < resetRequired.length; i++) {
            resetRequired[i] = new AtomicBoolean();
        }
    }

    @Override
    public void configure(Map<String, ?> configs) {
        feed = QuotaFeed.acquire(ShimConfig.parse(configs), nanoTime, listener);
    }

    /** Configures this instance on a feed of its own that starts no thread (tests drive it). */
    QuotaFeed configureUnstarted(Map<String, ?> configs) {
        feed = QuotaFeed.unstarted(ShimConfig.parse(configs), nanoTime, listener);
        return feed;
    }

    @Override
    public Map<String, String> quotaMetricTags(ClientQuotaType quotaType, KafkaPrincipal principal, String clientId) {
        String user = principal == null ? "" : principal.getName();
        String client = clientId == null ? "" : clientId;
        try {
            QuotaView current = feed.view();
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
            QuotaView current = feed.view();
            if (!current.epochTag(quotaType).equals(metricTags.get(EPOCH_TAG))) {
                return null; // a sensor of a past epoch: no client uses these tags any more
            }
            Map<String, String> tags = new HashMap<>(metricTags);
            tags.remove(EPOCH_TAG);
            return QuotaResolver.kafkaLimit(current.table, quotaType, tags, current.kafkaFactor(quotaType), current.floorGrowth(quotaType),
                    current.refusesMutations());
        } catch (RuntimeException e) {
            reportError("quotaLimit", e);
            return null;
        }
    }

    @Override
    public boolean quotaResetRequired(ClientQuotaType quotaType) {
        try {
            feed.view();
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
            feed.updateKafkaQuota(quotaType, entityKey(quotaEntity), newValue);
        } catch (RuntimeException e) {
            reportError("updateQuota", e);
        }
    }

    @Override
    public void removeQuota(ClientQuotaType quotaType, ClientQuotaEntity quotaEntity) {
        try {
            feed.removeKafkaQuota(quotaType, entityKey(quotaEntity));
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
        QuotaFeed current = feed;
        if (current != null) {
            current.release(listener);
        }
    }

    /** The view in force now (for tests and diagnostics). */
    QuotaView view() {
        return feed.view();
    }

    /** The feed this instance reads (for tests). */
    QuotaFeed feed() {
        return feed;
    }

    /** Flags a reset for every quota type whose limits may differ in the new view. */
    private void changed(QuotaView previous, QuotaView next) {
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
