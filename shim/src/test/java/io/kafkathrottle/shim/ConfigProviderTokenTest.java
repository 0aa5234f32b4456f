package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;

import kafka.server.KafkaConfig;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Strimzi kit never writes the node token into the Kafka resource: it sets
 * client.quota.callback.service.token to a config provider's reference
 * (${secrets:kafka/throttle-service-node-token:token}, deploy/strimzi/kafka.yaml). This shows
 * that a broker hands the quota callback the resolved value: the broker's configuration is
 * built as a broker builds it (KafkaConfig.fromProps) with a config provider, and the callback
 * is created as Kafka's QuotaFactory creates it (KafkaConfig.getConfiguredInstance of
 * client.quota.callback.class). Kafka's FileConfigProvider stands in for Strimzi's
 * KubernetesSecretConfigProvider: both are resolved by the same ConfigProvider mechanism.
 */
class ConfigProviderTokenTest {
    /** A callback that keeps what Kafka configured it with. */
    public static final class Recording implements ClientQuotaCallback {
        static volatile Map<String, ?> configured;

        @Override
        public void configure(Map<String, ?> configs) {
            configured = configs;
        }

        @Override
        public Map<String, String> quotaMetricTags(ClientQuotaType quotaType, KafkaPrincipal principal, String clientId) {
            return Map.of();
        }

        @Override
        public Double quotaLimit(ClientQuotaType quotaType, Map<String, String> metricTags) {
            return null;
        }

        @Override
        public void updateQuota(ClientQuotaType quotaType, ClientQuotaEntity quotaEntity, double newValue) {
        }

        @Override
        public void removeQuota(ClientQuotaType quotaType, ClientQuotaEntity quotaEntity) {
        }

        @Override
        public boolean quotaResetRequired(ClientQuotaType quotaType) {
            return false;
        }

        @Override
        public boolean updateClusterMetadata(Cluster cluster) {
            return false;
        }

        @Override
        public void close() {
        }
    }

    @Test
    void theBrokerGivesTheCallbackTheTokenTheProviderResolves(@TempDir Path dir) throws Exception {
        Path secret = dir.resolve("node-token.properties");
        Files.writeString(secret, "token=a-node-token-from-a-secret\n");
        Properties props = new Properties();
        props.put("process.roles", "broker");
        props.put("node.id", "3");
        props.put("controller.quorum.voters", "1000@localhost:9093");
        props.put("controller.listener.names", "CONTROLLER");
        props.put("listeners", "PLAINTEXT://localhost:9092");
        props.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
        props.put("log.dirs", dir.resolve("logs").toString());
        props.put("config.providers", "secrets");
        props.put("config.providers.secrets.class", "org.apache.kafka.common.config.provider.FileConfigProvider");
        props.put("client.quota.callback.class", Recording.class.getName());
        props.put(ShimConfig.TOKEN, "${secrets:" + secret + ":token}");

        KafkaConfig config = KafkaConfig.fromProps(props);
        ClientQuotaCallback callback = config.getConfiguredInstance("client.quota.callback.class", ClientQuotaCallback.class);

        assertNotNull(callback);
        assertEquals("a-node-token-from-a-secret", Recording.configured.get(ShimConfig.TOKEN));
    }
}
