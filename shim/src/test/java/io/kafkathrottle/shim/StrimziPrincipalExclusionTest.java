package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.apache.kafka.server.quota.ClientQuotaType.PRODUCE;

import java.io.InputStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import javax.net.ssl.SSLSession;

import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SslAuthenticationContext;
import org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder;
import org.apache.kafka.common.security.ssl.SslPrincipalMapper;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Strimzi's own clients are excluded by the names their certificates give them. Strimzi signs
 * its components' certificates with the subject CN=&lt;name&gt;,O=io.strimzi; a broker with TLS
 * client authentication and Kafka's default principal builder names such a client
 * User:CN=&lt;name&gt;,O=io.strimzi. Here a certificate of that subject is made with keytool, the
 * principal is built from it by Kafka's own DefaultKafkaPrincipalBuilder (as a broker does on a
 * TLS connection), and the shim, given the service's table with the excluded principals the
 * Kubernetes kit lists for the cluster my-cluster (deploy/kubernetes/overlays/replicated),
 * leaves that principal unthrottled while a PAUSE holds everyone else to the floor.
 */
class StrimziPrincipalExclusionTest {
    private static final String CLUSTER = "my-cluster";
    /** What deploy/kubernetes/overlays/replicated sets for my-cluster (tests/unit/test_kubernetes.py holds it to this). */
    private static final List<String> STRIMZI_PRINCIPALS = List.of(
            "User:CN=" + CLUSTER + "-kafka,O=io.strimzi",
            "User:CN=" + CLUSTER + "-entity-topic-operator,O=io.strimzi",
            "User:CN=" + CLUSTER + "-entity-user-operator,O=io.strimzi",
            "User:CN=" + CLUSTER + "-cruise-control,O=io.strimzi");

    private StubService service;
    private ServiceQuotaCallback callback;

    @AfterEach
    void stop() {
        if (callback != null) {
            callback.close();
        }
        if (service != null) {
            service.close();
        }
    }

    /** A self-signed certificate with this subject, made as an operator would, with keytool. */
    private static X509Certificate certificate(Path dir, String subject) throws Exception {
        Path keytool = Path.of(System.getProperty("java.home"), "bin", "keytool");
        Path store = dir.resolve("strimzi.p12");
        run(keytool.toString(), "-genkeypair", "-alias", "component", "-keyalg", "EC", "-dname", subject, "-validity", "2",
                "-keystore", store.toString(), "-storetype", "PKCS12", "-storepass", "store-pass");
        KeyStore keyStore = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(store)) {
            keyStore.load(in, "store-pass".toCharArray());
        }
        return (X509Certificate) keyStore.getCertificate("component");
    }

    private static void run(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes());
        assertTrue(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0, String.join(" ", command) + ": " + output);
    }

    /** The principal a broker's default principal builder gives a TLS client presenting this certificate. */
    private static KafkaPrincipal principalOf(X509Certificate certificate) throws Exception {
        SSLSession session = (SSLSession) Proxy.newProxyInstance(SSLSession.class.getClassLoader(), new Class<?>[] {SSLSession.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "getPeerPrincipal" -> certificate.getSubjectX500Principal();
                    case "getPeerCertificates" -> new java.security.cert.Certificate[] {certificate};
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        DefaultKafkaPrincipalBuilder builder = new DefaultKafkaPrincipalBuilder(null, SslPrincipalMapper.fromRules("DEFAULT"));
        return builder.build(new SslAuthenticationContext(session, InetAddress.getLoopbackAddress(), "TLS-9093"));
    }

    private static String json(List<String> strings) {
        return strings.stream().map(value -> "\"" + value + "\"").collect(Collectors.joining(", ", "[", "]"));
    }

    private Double limit(KafkaPrincipal principal) {
        return callback.quotaLimit(PRODUCE, callback.quotaMetricTags(PRODUCE, principal, "client-1"));
    }

    @Test
    void theBrokersCertificateGivesTheFullStrimziNameAndTheShimExcludesIt(@TempDir Path dir) throws Exception {
        KafkaPrincipal broker = principalOf(certificate(dir, "CN=" + CLUSTER + "-kafka, O=io.strimzi"));
        assertEquals(KafkaPrincipal.USER_TYPE, broker.getPrincipalType());
        assertEquals("CN=my-cluster-kafka,O=io.strimzi", broker.getName());
        assertTrue(STRIMZI_PRINCIPALS.contains(broker.toString()), broker + " is in the kit's list");

        service = new StubService();
        String paused = StubService.table(0.0, "{\"produce\": 1048576}", "[]", Instant.now().plusSeconds(60))
                .replace("\"excluded_principals\": [\"User:ops\"]", "\"excluded_principals\": " + json(STRIMZI_PRINCIPALS));
        service.table(paused);
        callback = new ServiceQuotaCallback(System::nanoTime);
        Map<String, Object> configs = new HashMap<>();
        configs.put(ShimConfig.URL, service.url());
        configs.put(ShimConfig.POLL_INTERVAL_MS, "100");
        configs.put(ShimConfig.LONG_POLL_WAIT_MS, "2000");
        configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "1000");
        configs.put(ShimConfig.FALLBACK_FACTOR, "1.0");
        callback.configure(configs);

        KafkaPrincipal producer = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "CN=app,O=example");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (limit(producer) == null || limit(producer) > 65536.0 * 2) { // the fallback (1.0, unlimited) until the PAUSE table arrives
            assertTrue(System.nanoTime() < deadline, "the shim never took the service's table");
            Thread.sleep(20);
        }
        assertNull(limit(broker), "the brokers' own principal is never throttled, even in a PAUSE");
        assertNotNull(limit(producer));
    }

    @Test
    void theShortNameMatchesNoStrimziClient(@TempDir Path dir) throws Exception {
        KafkaPrincipal topicOperator = principalOf(certificate(dir, "CN=" + CLUSTER + "-entity-topic-operator,O=io.strimzi"));
        assertEquals("User:CN=my-cluster-entity-topic-operator,O=io.strimzi", topicOperator.toString());
        // The shim compares names exactly: the short form the kit once listed excludes nobody.
        QuotaTable shortForm = QuotaTable.fromJson(new com.fasterxml.jackson.databind.ObjectMapper().readTree(
                "{\"excluded_principals\": [\"User:CN=my-cluster-entity-topic-operator\"], \"factor_types\": [\"produce\"]}"));
        QuotaTable fullForm = QuotaTable.fromJson(new com.fasterxml.jackson.databind.ObjectMapper().readTree(
                "{\"excluded_principals\": " + json(STRIMZI_PRINCIPALS) + ", \"factor_types\": [\"produce\"]}"));
        assertEquals(QuotaLevel.UNLIMITED.wireName, QuotaResolver.resolve(shortForm, topicOperator.getName(), "", PRODUCE, 0.0).level());
        assertEquals(QuotaLevel.EXCLUDED.wireName, QuotaResolver.resolve(fullForm, topicOperator.getName(), "", PRODUCE, 0.0).level());
    }
}
