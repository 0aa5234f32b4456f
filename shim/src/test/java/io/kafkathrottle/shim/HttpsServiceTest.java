package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;

/** An https service URL with the shim's trust store, against a JDK HttpsServer. */
class HttpsServiceTest {
    private static void keytool(String... args) throws Exception {
        String[] command = new String[args.length + 1];
        command[0] = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
        System.arraycopy(args, 0, command, 1, args.length);
        // Its output goes to a file, read once it exited; one that hangs fails within a minute.
        Path log = Files.createTempFile("keytool", ".log");
        try {
            Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            boolean exited = process.waitFor(60, TimeUnit.SECONDS);
            if (!exited) {
                process.destroyForcibly().waitFor();
            }
            String output = new String(Files.readAllBytes(log), StandardCharsets.UTF_8);  // malformed bytes replaced
            assertTrue(exited, "keytool still running after 60 s:\n" + output);
            assertEquals(0, process.exitValue(), output);
        } finally {
            Files.deleteIfExists(log);
        }
    }

    @Test
    void theShimTrustsTheServiceThroughItsTrustStoreAndNothingElse(@TempDir Path dir) throws Exception {
        Path keystore = dir.resolve("service.p12");
        Path cert = dir.resolve("service.crt");
        Path truststore = dir.resolve("shim-trust.p12");
        keytool("-genkeypair", "-alias", "service", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1",
                "-validity", "2", "-storetype", "PKCS12", "-keystore", keystore.toString(), "-storepass", "changeit");
        keytool("-exportcert", "-alias", "service", "-keystore", keystore.toString(), "-storepass", "changeit", "-rfc", "-file", cert.toString());
        keytool("-importcert", "-noprompt", "-alias", "service", "-file", cert.toString(), "-storetype", "PKCS12", "-keystore",
                truststore.toString(), "-storepass", "trustpass");

        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(keystore)) {
            keys.load(in, "changeit".toCharArray());
        }
        KeyManagerFactory keyManagers = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keyManagers.init(keys, "changeit".toCharArray());
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keyManagers.getKeyManagers(), null, null);
        HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setHttpsConfigurator(new HttpsConfigurator(context));
        byte[] body = StubService.table(0.5, "{\"produce\": 1000000}", "[]", Instant.now().plusSeconds(60)).getBytes(StandardCharsets.UTF_8);
        server.createContext("/quotas", exchange -> {
            exchange.getResponseHeaders().set("ETag", "\"t\"");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        String url = "https://127.0.0.1:" + server.getAddress().getPort();
        try {
            Map<String, Object> configs = new HashMap<>();
            configs.put(ShimConfig.URL, url);
            configs.put(ShimConfig.LONG_POLL_WAIT_MS, "0");
            configs.put(ShimConfig.REQUEST_TIMEOUT_MS, "2000");
            ServiceQuotaCallback untrusting = new ServiceQuotaCallback();
            untrusting.configure(configs);
            assertEquals(QuotaView.Mode.FALLBACK, untrusting.view().mode, "the JVM's default trust store does not know this certificate");
            untrusting.close();

            configs.put(ShimConfig.TRUSTSTORE_LOCATION, truststore.toString());
            configs.put(ShimConfig.TRUSTSTORE_PASSWORD, "trustpass");
            ServiceQuotaCallback trusting = new ServiceQuotaCallback();
            trusting.configure(configs);
            assertEquals(QuotaView.Mode.SERVICE, trusting.view().mode);
            assertTrue(trusting.view().factor == 0.5);
            trusting.close();
        } finally {
            server.stop(0);
        }
    }
}
