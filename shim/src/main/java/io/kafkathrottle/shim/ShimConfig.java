package io.kafkathrottle.shim;

import java.io.InputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The shim's broker configuration: every key under {@value #PREFIX}. Bad values throw
 * {@link ConfigException} from {@code configure}, which stops the broker at start-up; keys it does not read are named in
 * one WARN.
 */
final class ShimConfig {
    private static final Logger LOG = LoggerFactory.getLogger(ShimConfig.class);
    static final String PREFIX = "client.quota.callback.service.";
    /** The service's own settings (app/settings/model.py): a broker configuration may carry them, the shim reads none. */
    static final String SERVICE_SETTINGS_PREFIX = "client.quota.callback.static.";
    static final String URL = PREFIX + "url";
    static final String POLL_INTERVAL_MS = PREFIX + "poll.interval.ms";
    static final String LONG_POLL_WAIT_MS = PREFIX + "long.poll.wait.ms";
    static final String REQUEST_TIMEOUT_MS = PREFIX + "request.timeout.ms";
    static final String FALLBACK_FACTOR = PREFIX + "fallback.factor";
    static final String TOKEN = PREFIX + "token";
    static final String TRUSTSTORE_LOCATION = PREFIX + "ssl.truststore.location";
    static final String TRUSTSTORE_PASSWORD = PREFIX + "ssl.truststore.password";
    static final String TRUSTSTORE_TYPE = PREFIX + "ssl.truststore.type";
    static final String VOLUME_SAMPLE_INTERVAL_MS = PREFIX + "volume.sample.interval.ms";

    /** The service's own upper bound for ?wait= (app/api/conditional.py). */
    static final long MAX_LONG_POLL_WAIT_MS = 300_000;

    static final ConfigDef DEFINITION = new ConfigDef()
            .define(URL, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, ShimConfig::validateUrl, Importance.HIGH,
                    "Base URL of the throttle service, http or https (the shim polls <url>/quotas).")
            .define(POLL_INTERVAL_MS, Type.LONG, 5_000L, Range.atLeast(100), Importance.MEDIUM,
                    "Pause between polls when long-polling is off, and before retrying after a failed poll.")
            .define(LONG_POLL_WAIT_MS, Type.LONG, 30_000L, Range.between(0, MAX_LONG_POLL_WAIT_MS), Importance.MEDIUM,
                    "How long the service may hold a poll open until the table changes (?wait=); 0 turns long-polling off.")
            .define(REQUEST_TIMEOUT_MS, Type.LONG, 10_000L, Range.atLeast(100), Importance.MEDIUM,
                    "Time allowed for one poll on top of the long-poll wait; also how long broker start-up waits for the first table.")
            .define(FALLBACK_FACTOR, Type.DOUBLE, 1.0, Range.between(0.0, 1.0), Importance.HIGH,
                    "Throttle factor applied while no valid table is known (service unreachable at start, or the last table expired)."
                            + " 1.0 fails open; 0.0 is the fail-safe choice.")
            .define(TOKEN, Type.PASSWORD, null, Importance.LOW,
                    "Bearer token sent with every poll and volume report, if set: the service's node token (throttle.service.node.token)."
                            + " With it the poll keeps its connection at the service's connection cap.")
            .define(TRUSTSTORE_LOCATION, Type.STRING, null, Importance.LOW,
                    "Trust store for an https service URL; unset: the JVM's default trust store.")
            .define(TRUSTSTORE_PASSWORD, Type.PASSWORD, null, Importance.LOW, "Password of the trust store.")
            .define(TRUSTSTORE_TYPE, Type.STRING, "PKCS12", ConfigDef.ValidString.in("PKCS12", "JKS"), Importance.LOW,
                    "Format of the trust store file.")
            .define(VOLUME_SAMPLE_INTERVAL_MS, Type.LONG, 100L, Range.between(10, 60_000), Importance.LOW,
                    "How often the shim reads its log dirs' file stores (a statvfs each) to report at once when a volume crosses"
                            + " a level the service named (report_on in GET /quotas); the reports otherwise go every poll interval.");

    /** The service's base URL, without a trailing slash. */
    final URI serviceUri;
    final URI quotasUri;
    /** Where this node reports its volumes: {@code <url>/nodes/<node id>/volumes}. */
    final URI nodeVolumesUri;
    final Duration pollInterval;
    /** How often the node's file stores are sampled while the service says what to report on. */
    final Duration volumeSampleInterval;
    final Duration longPollWait;
    final Duration requestTimeout;
    final double fallbackFactor;
    final Password token;
    final SSLContext sslContext; // null: the JVM default
    /** Kafka's window for the byte-rate and request quotas (the broker's own settings). */
    final QuotaWindow window;
    /** The settings that make two callback instances share a poller (see QuotaFeed): equal maps, one poller. */
    final Map<String, String> identity;
    /** This broker's id, from the broker's own node.id (KRaft) or broker.id; {@value #UNKNOWN_BROKER} when neither is set. */
    final int brokerId;

    static final int UNKNOWN_BROKER = -1;
    /** This node's roles and log dirs, which the shim reports with their volumes' sizes. */
    final NodeVolumes volumes;

    private ShimConfig(AbstractConfig config, QuotaWindow window, Map<String, String> identity, int brokerId, NodeVolumes volumes) {
        String base = config.getString(URL).strip();
        base = base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
        this.serviceUri = URI.create(base);
        this.quotasUri = URI.create(base + "/quotas");
        this.nodeVolumesUri = URI.create(base + "/nodes/" + brokerId + "/volumes");
        this.pollInterval = Duration.ofMillis(config.getLong(POLL_INTERVAL_MS));
        this.volumeSampleInterval = Duration.ofMillis(config.getLong(VOLUME_SAMPLE_INTERVAL_MS));
        this.longPollWait = Duration.ofMillis(config.getLong(LONG_POLL_WAIT_MS));
        this.requestTimeout = Duration.ofMillis(config.getLong(REQUEST_TIMEOUT_MS));
        this.fallbackFactor = config.getDouble(FALLBACK_FACTOR);
        this.token = config.getPassword(TOKEN);
        String location = config.getString(TRUSTSTORE_LOCATION);
        this.sslContext = location == null ? null
                : sslContext(location, config.getPassword(TRUSTSTORE_PASSWORD), config.getString(TRUSTSTORE_TYPE));
        this.window = window;
        this.identity = identity;
        this.brokerId = brokerId;
        this.volumes = volumes;
    }

    /**
     * Parses the broker's configuration; throws ConfigException naming the key on any bad value. A key under either prefix
     * that the shim does not read stops nothing: it is named in one WARN (see {@link #warnUnread}), as Kafka names a
     * configuration it was given and does not know.
     */
    static ShimConfig parse(Map<String, ?> brokerConfigs) {
        warnUnread(brokerConfigs.keySet());
        AbstractConfig parsed = new AbstractConfig(DEFINITION, brokerConfigs, false);
        QuotaWindow window = QuotaWindow.fromBrokerConfig(brokerConfigs);
        Map<String, String> identity = new TreeMap<>();
        parsed.values().forEach((key, value) -> identity.put(key, value instanceof Password p ? p.value() : String.valueOf(value)));
        identity.put(QuotaWindow.SAMPLES_CONFIG, Integer.toString(window.samples()));
        identity.put(QuotaWindow.SIZE_CONFIG, Long.toString(window.sampleNanos()));
        int brokerId = brokerId(brokerConfigs);
        identity.put("node.id", Integer.toString(brokerId));
        return new ShimConfig(parsed, window, Collections.unmodifiableMap(identity), brokerId, NodeVolumes.fromNodeConfig(brokerConfigs));
    }

    /** The unread keys this process already warned about: one WARN per key and process, not per callback instance. */
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    /** Whether the shim reads the key: its own settings are under {@value #PREFIX}, and nothing under the service's. */
    static boolean unread(String key) {
        return key.startsWith(PREFIX) ? !DEFINITION.names().contains(key) : key.startsWith(SERVICE_SETTINGS_PREFIX);
    }

    /**
     * Logs one WARN for the keys in the broker's configuration that the shim does not read and that this process has not
     * warned about yet, each with the shim key it most likely means: a misspelt shim key
     * ({@code client.quota.callback.service.tokne}), or one of the {@value #SERVICE_SETTINGS_PREFIX}* keys, the service's
     * own settings, such as {@code client.quota.callback.static.token}, which is most likely meant for the shim.
     */
    static void warnUnread(Set<String> brokerKeys) {
        List<String> fresh = new ArrayList<>();
        for (String key : new TreeSet<>(brokerKeys)) {
            if (unread(key) && WARNED.add(key)) {
                fresh.add(key + suggestion(key).map(s -> " (did you mean " + s + "?)").orElse(""));
            }
        }
        if (!fresh.isEmpty()) {
            LOG.warn("Throttle service shim: ignoring {}: the shim reads only the {}* keys it knows, {} ({}* are the throttle service's settings)",
                    String.join(", ", fresh), PREFIX, new TreeSet<>(DEFINITION.names()), SERVICE_SETTINGS_PREFIX);
        }
    }

    /** Forgets the keys warned about (tests only). */
    static void forgetWarnings() {
        WARNED.clear();
    }

    /**
     * The shim setting a key under either prefix most likely means: the one with the same name after its prefix, else the
     * closest within an edit distance of a fifth of the longer name (about the service's own cut-off for its settings).
     */
    static Optional<String> suggestion(String key) {
        String suffix = key.startsWith(PREFIX) ? key.substring(PREFIX.length())
                : key.startsWith(SERVICE_SETTINGS_PREFIX) ? key.substring(SERVICE_SETTINGS_PREFIX.length()) : key;
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (String name : new TreeSet<>(DEFINITION.names())) {
            String candidate = name.substring(PREFIX.length());
            int distance = editDistance(suffix, candidate);
            if (distance * 5 <= Math.max(suffix.length(), candidate.length()) && distance < bestDistance) {
                best = name;
                bestDistance = distance;
            }
        }
        return Optional.ofNullable(best);
    }

    /** Edit distance: insertions, deletions, substitutions and swaps of two neighbouring characters each count one. */
    static int editDistance(String a, String b) {
        int[][] d = new int[a.length() + 1][b.length() + 1];
        for (int i = 0; i <= a.length(); i++) {
            d[i][0] = i;
        }
        for (int j = 0; j <= b.length(); j++) {
            d[0][j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                d[i][j] = Math.min(d[i - 1][j - 1] + cost, Math.min(d[i - 1][j], d[i][j - 1]) + 1);
                if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
                    d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
                }
            }
        }
        return d[a.length()][b.length()];
    }

    /** The broker's id as Kafka passes it to configure: node.id under KRaft, broker.id otherwise. */
    static int brokerId(Map<String, ?> brokerConfigs) {
        for (String key : new String[] {"node.id", "broker.id"}) {
            Object value = brokerConfigs.get(key);
            if (value != null) {
                try {
                    int id = Integer.parseInt(value.toString().trim());
                    if (id >= 0) {
                        return id;
                    }
                } catch (NumberFormatException e) {
                    // Kafka itself refuses such a broker id; the shim only reports it as unknown
                }
            }
        }
        return UNKNOWN_BROKER;
    }

    private static void validateUrl(String name, Object value) {
        if (value == null) {
            throw new ConfigException(name, null, "an http:// or https:// URL of the throttle service is required");
        }
        try {
            URI uri = new URI(value.toString().trim());
            if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
                throw new ConfigException(name, value, "expected an http:// or https:// URL with a host, e.g. http://throttle-service:8080");
            }
            if (uri.getQuery() != null || uri.getFragment() != null) {
                throw new ConfigException(name, value, "the URL must not have a query or fragment");
            }
        } catch (URISyntaxException e) {
            throw new ConfigException(name, value, "not a URL: " + e.getReason());
        }
    }

    private static SSLContext sslContext(String location, Password password, String type) {
        Path path = Path.of(location);
        if (!Files.isReadable(path)) {
            throw new ConfigException(TRUSTSTORE_LOCATION, location, "no readable trust store file there");
        }
        try (InputStream in = Files.newInputStream(path)) {
            KeyStore store = KeyStore.getInstance(type);
            store.load(in, password == null ? null : password.value().toCharArray());
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(store);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, trust.getTrustManagers(), null);
            return context;
        } catch (Exception e) {
            throw new ConfigException(TRUSTSTORE_LOCATION, location, "cannot load it as a " + type + " trust store: " + e.getMessage());
        }
    }
}
