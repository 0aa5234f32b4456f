import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;

/**
 * Creates topics (one partition each) in one CreateTopics request with the Java Admin API, which
 * speaks the strict controller-mutation quota's versions (KIP-599), and prints one line per topic:
 * {@code <topic> CREATED}, {@code <topic> THROTTLING_QUOTA_EXCEEDED <throttle ms>} or
 * {@code <topic> FAILED <exception>}.
 *
 * <p>{@code CreateTopicsProbe <bootstrap> <retry on quota violation: true|false> <timeout ms> <topic>...}
 */
public class CreateTopicsProbe {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "create-topics-probe");
        CreateTopicsOptions options = new CreateTopicsOptions().retryOnQuotaViolation(Boolean.parseBoolean(args[1]))
                .timeoutMs(Integer.parseInt(args[2]));
        List<NewTopic> topics = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            topics.add(new NewTopic(args[i], Optional.of(1), Optional.empty()));
        }
        try (Admin admin = Admin.create(properties)) {
            Map<String, KafkaFuture<Void>> results = admin.createTopics(topics, options).values();
            for (NewTopic topic : topics) {
                try {
                    results.get(topic.name()).get();
                    System.out.println(topic.name() + " CREATED");
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof ThrottlingQuotaExceededException throttled) {
                        System.out.println(topic.name() + " THROTTLING_QUOTA_EXCEEDED " + throttled.throttleTimeMs());
                    } else {
                        System.out.println(topic.name() + " FAILED " + e.getCause());
                    }
                }
            }
        }
    }
}
