import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
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
 * A long-lived CreateTopics probe with the Java Admin API, which speaks the versions whose
 * controller-mutation quota is strict (KIP-599). One JVM, one new Admin client per request (a
 * client refused with a throttle time holds back its next request to that node for that time,
 * KIP-219). Reads one request per line on stdin,
 * {@code <retry on quota violation: true|false> <timeout ms> <topic>...} (one partition each, in
 * one CreateTopics), prints one line per topic, {@code <topic> CREATED},
 * {@code <topic> THROTTLING_QUOTA_EXCEEDED <throttle ms>} or {@code <topic> FAILED <exception>},
 * then {@code END}.
 *
 * <p>{@code MutationProbe <bootstrap>}
 */
public class MutationProbe {
    public static void main(String[] args) throws Exception {
        BufferedReader input = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = input.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            Properties properties = new Properties();
            properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
            properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "mutation-probe");
            CreateTopicsOptions options = new CreateTopicsOptions().retryOnQuotaViolation(Boolean.parseBoolean(words[0]))
                    .timeoutMs(Integer.parseInt(words[1]));
            List<NewTopic> topics = new ArrayList<>();
            for (String name : Arrays.asList(words).subList(2, words.length)) {
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
        }
    }
}
