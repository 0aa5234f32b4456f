import java.io.BufferedReader;
import java.io.InputStreamReader;
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
 * A long-lived CreateTopics probe for tests that time a recovery: one JVM, one new Admin client
 * per request (a client refused with a throttle time holds back its next request to that node
 * for that time, KIP-219). Reads one request per line on stdin (topic names, one partition each,
 * in one CreateTopics, never retried on quota violations), prints one line per topic,
 * {@code <topic> CREATED}, {@code <topic> THROTTLING_QUOTA_EXCEEDED <throttle ms>} or
 * {@code <topic> FAILED <exception>}, then {@code END}.
 *
 * <p>{@code MutationProbe <bootstrap>}
 */
public class MutationProbe {
    public static void main(String[] args) throws Exception {
        BufferedReader input = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = input.readLine()) != null) {
            Properties properties = new Properties();
            properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
            properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "mutation-probe");
            CreateTopicsOptions options = new CreateTopicsOptions().retryOnQuotaViolation(false).timeoutMs(15000);
            List<NewTopic> topics = new ArrayList<>();
            for (String name : line.trim().split("\\s+")) {
                topics.add(new NewTopic(name, Optional.of(1), Optional.empty()));
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
            System.out.println("END");
            System.out.flush();
        }
    }
}
