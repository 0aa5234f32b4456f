package io.kafkathrottle.shim;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * A stand-in for the service's GET /quotas on a JDK HttpServer: ETag, If-None-Match → 304,
 * ?wait= held until the table changes, and a switch that makes it answer 503. It also takes node
 * volume reports (PUT /nodes/{id}/volumes), recording each and answering with a status the test
 * sets (404 by default, as a service without a node token), optionally only after a hold.
 */
final class StubService implements AutoCloseable {
    record Seen(String query, String ifNoneMatch, String authorization, String acceptEncoding) {
    }

    record NodeReport(String method, String path, String authorization, String contentType, String body) {
    }

    final List<Seen> requests = new CopyOnWriteArrayList<>();
    final List<NodeReport> nodeReports = new CopyOnWriteArrayList<>();
    private int nodeStatus = 404;
    private String nodeRetryAfter;
    private long nodeHoldMs;
    private final HttpServer server;
    private String body;
    private int generation;
    private boolean failing;
    private Instant validUntilHeader; // sent on every answer when set, as the service does
    private boolean gzip; // tables gzipped for requests that accept it, as the service does with large ones

    StubService() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread thread = new Thread(r, "stub-service");
            thread.setDaemon(true);
            return thread;
        }));
        server.createContext("/quotas", this::handle);
        server.createContext("/nodes/", this::handleNodeReport);
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** The service renewing its table's validity: answers (304s too) carry Throttle-Valid-Until. */
    synchronized void validUntilHeader(Instant validUntil) {
        validUntilHeader = validUntil;
    }

    /** How node reports are answered: the status, a Retry-After header (null: none), and how long each is held first. */
    synchronized void nodeAnswer(int status, String retryAfter, long holdMs) {
        nodeStatus = status;
        nodeRetryAfter = retryAfter;
        nodeHoldMs = holdMs;
    }

    private void handleNodeReport(HttpExchange exchange) throws IOException {
        String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        nodeReports.add(new NodeReport(exchange.getRequestMethod(), exchange.getRequestURI().getPath(),
                exchange.getRequestHeaders().getFirst("Authorization"), exchange.getRequestHeaders().getFirst("Content-Type"), body));
        int status;
        String retryAfter;
        long hold;
        synchronized (this) {
            status = nodeStatus;
            retryAfter = nodeRetryAfter;
            hold = nodeHoldMs;
        }
        if (hold > 0) {
            try {
                Thread.sleep(hold);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (retryAfter != null) {
            exchange.getResponseHeaders().set("Retry-After", retryAfter);
        }
        if (status == 204) {
            exchange.sendResponseHeaders(204, -1);
            exchange.close();
            return;
        }
        byte[] problem = ("{\"title\": \"refused\", \"status\": " + status + "}").getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "application/problem+json");
        exchange.sendResponseHeaders(status, problem.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(problem);
        }
    }

    synchronized void gzip(boolean value) {
        gzip = value;
    }

    synchronized void table(String json) {
        body = json;
        generation++;
        notifyAll();
    }

    synchronized void failing(boolean value) {
        failing = value;
        notifyAll();
    }

    /** A table in the service's JSON shape, with its enforcement ({@code enforced}, the canary brokers as a JSON list). */
    static String table(double factor, String defaults, String overrides, Instant validUntil, boolean enforced, String canaryBrokers) {
        String table = table(factor, defaults, overrides, validUntil);
        return table.substring(0, table.length() - 1) + ", \"enforced\": " + enforced + ", \"canary_brokers\": " + canaryBrokers + "}";
    }

    /** The same table with a mutation factor (the metadata volumes'), as a service with metadata limits sends it. */
    static String withMutationFactor(String table, double mutationFactor) {
        return table.substring(0, table.length() - 1) + ", \"mutation_factor\": " + mutationFactor + "}";
    }

    /** A table in the service's JSON shape. */
    static String table(double factor, String defaults, String overrides, Instant validUntil) {
        String precedence = QuotaTable.DEFAULT_PRECEDENCE.stream().map(level -> "\"" + level.wireName + "\"").collect(Collectors.joining(", "));
        return "{\"defaults\": " + defaults + ", \"overrides\": " + overrides + ", \"groups\": [], \"excluded_principals\": [\"User:ops\"],"
                + " \"precedence\": [" + precedence + "], \"factor\": " + factor + ", \"factor_types\": [\"produce\"],"
                + " \"floors\": {\"produce\": 65536, \"fetch\": 65536, \"request\": 1, \"controller_mutation\": 1},"
                + " \"state\": \"" + (factor >= 1 ? "OPEN" : factor <= 0 ? "PAUSE" : "THROTTLE") + "\", \"source\": \"observed\","
                + " \"valid_until\": " + (validUntil == null ? "null" : "\"" + validUntil + "\"") + "}";
    }

    private void handle(HttpExchange exchange) throws IOException {
        String query = exchange.getRequestURI().getQuery();
        String ifNoneMatch = exchange.getRequestHeaders().getFirst("If-None-Match");
        String acceptEncoding = exchange.getRequestHeaders().getFirst("Accept-Encoding");
        requests.add(new Seen(query, ifNoneMatch, exchange.getRequestHeaders().getFirst("Authorization"), acceptEncoding));
        long waitMs = query != null && query.startsWith("wait=") ? (long) (Double.parseDouble(query.substring(5)) * 1000) : 0;
        String answer;
        String etag;
        synchronized (this) {
            long deadline = System.currentTimeMillis() + waitMs;
            while (!failing && ifNoneMatch != null && ifNoneMatch.equals(etag()) && System.currentTimeMillis() < deadline) {
                try {
                    wait(Math.max(1, deadline - System.currentTimeMillis()));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (failing || body == null) {
                exchange.sendResponseHeaders(503, -1);
                exchange.close();
                return;
            }
            answer = body;
            etag = etag();
            if (validUntilHeader != null) {
                exchange.getResponseHeaders().set(TableFetcher.VALID_UNTIL_HEADER, validUntilHeader.toString());
            }
        }
        exchange.getResponseHeaders().set("ETag", etag);
        if (etag.equals(ifNoneMatch)) {
            exchange.sendResponseHeaders(304, -1);
            exchange.close();
            return;
        }
        byte[] bytes = answer.getBytes(StandardCharsets.UTF_8);
        boolean compress;
        synchronized (this) {
            compress = gzip && acceptEncoding != null && acceptEncoding.contains("gzip");
        }
        if (compress) {
            java.io.ByteArrayOutputStream packed = new java.io.ByteArrayOutputStream();
            try (java.util.zip.GZIPOutputStream out = new java.util.zip.GZIPOutputStream(packed)) {
                out.write(bytes);
            }
            bytes = packed.toByteArray();
            exchange.getResponseHeaders().set("Content-Encoding", "gzip");
        }
        exchange.getResponseHeaders().set("Content-Type", "application/json");
        exchange.sendResponseHeaders(200, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    private String etag() {
        return "\"g" + generation + "\"";
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
