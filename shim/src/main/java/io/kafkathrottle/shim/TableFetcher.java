package io.kafkathrottle.shim;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Optional;
import java.util.zip.GZIPInputStream;

import com.fasterxml.jackson.databind.ObjectMapper;

/** One conditional, optionally long-polling GET of the quota table. Runs on the poller thread only. */
final class TableFetcher {
    sealed interface Outcome permits Changed, NotModified, Failed {
    }

    /**
     * A new table. {@code remaining} is how long it stays valid, measured on the service's clock
     * (valid_until minus the response's Date), so that clock skew between hosts does not matter.
     */
    record Changed(ServiceTable table, String etag, Duration remaining) implements Outcome {
    }

    /**
     * Nothing the shim acts on changed. {@code remaining} is how long the table now stays valid,
     * from the {@code Throttle-Valid-Until} header (the service renews the validity every round),
     * measured on the service's clock; null when the answer carries none.
     */
    record NotModified(Duration remaining) implements Outcome {
    }

    record Failed(String reason) implements Outcome {
    }

    static final String VALID_UNTIL_HEADER = "Throttle-Valid-Until";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final ShimConfig config;
    private final HttpClient client;

    TableFetcher(ShimConfig config) {
        this.config = config;
        HttpClient.Builder builder = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(config.requestTimeout);
        if (config.sslContext != null) {
            builder.sslContext(config.sslContext);
        }
        this.client = builder.build();
    }

    /** The HTTP client, shared with the node's {@link VolumeReporter} (one connection pool per feed). */
    HttpClient client() {
        return client;
    }

    Outcome fetch(String etag, Duration wait) throws InterruptedException {
        URI uri = wait.isZero() || etag == null ? config.quotasUri
                : URI.create(config.quotasUri + "?wait=" + BigDecimal.valueOf(wait.toMillis(), 3).stripTrailingZeros().toPlainString());
        HttpRequest.Builder request = HttpRequest.newBuilder(uri).GET().timeout(config.requestTimeout.plus(etag == null ? Duration.ZERO : wait))
                .header("Accept", "application/json").header("Accept-Encoding", "gzip"); // a large table comes gzipped
        if (etag != null) {
            request.header("If-None-Match", etag);
        }
        if (config.token != null) {
            request.header("Authorization", "Bearer " + config.token.value());
        }
        HttpResponse<byte[]> response;
        try {
            response = client.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (HttpTimeoutException e) {
            return new Failed("no answer from " + config.quotasUri + " within " + config.requestTimeout.toMillis() + " ms");
        } catch (IOException e) {
            return new Failed("cannot reach " + config.quotasUri + ": " + describe(e));
        }
        if (response.statusCode() == 304) {
            return new NotModified(remaining(response, null));
        }
        if (response.statusCode() != 200) {
            return new Failed(config.quotasUri + " answered HTTP " + response.statusCode());
        }
        ServiceTable table;
        try {
            table = ServiceTable.fromJson(JSON.readTree(body(response)), config.brokerId);
        } catch (IOException | IllegalArgumentException e) {
            return new Failed(config.quotasUri + " sent an unusable quota table: " + e.getMessage());
        }
        return new Changed(table, response.headers().firstValue("ETag").orElse(null), remaining(response, table.validUntil()));
    }

    /**
     * How long what the answer gives stays valid, on the service's clock: until its
     * {@code Throttle-Valid-Until} header, the service's current word on the validity (on a 200
     * the same instant as the body's), else until {@code bodyValidUntil}; null when neither says.
     */
    private static Duration remaining(HttpResponse<?> response, Instant bodyValidUntil) {
        return validUntilHeader(response).or(() -> Optional.ofNullable(bodyValidUntil))
                .map(until -> Duration.between(serverNow(response), until)).orElse(null);
    }

    /** The body, inflated when the service sent it gzipped. */
    private static InputStream body(HttpResponse<byte[]> response) throws IOException {
        InputStream raw = new ByteArrayInputStream(response.body());
        boolean gzipped = response.headers().firstValue("Content-Encoding").map(coding -> coding.trim().equalsIgnoreCase("gzip")).orElse(false);
        return gzipped ? new GZIPInputStream(raw) : raw;
    }

    private static Instant serverNow(HttpResponse<?> response) {
        return serverDate(response).orElseGet(Instant::now);
    }

    private static Optional<Instant> validUntilHeader(HttpResponse<?> response) {
        return response.headers().firstValue(VALID_UNTIL_HEADER).flatMap(text -> {
            try {
                return Optional.of(Instant.parse(text));
            } catch (DateTimeParseException e) {
                return Optional.empty();
            }
        });
    }

    private static Optional<Instant> serverDate(HttpResponse<?> response) {
        return response.headers().firstValue("Date").flatMap(text -> {
            try {
                return Optional.of(ZonedDateTime.parse(text, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant());
            } catch (DateTimeParseException e) {
                return Optional.empty();
            }
        });
    }

    private static String describe(Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null && cause.getMessage() == null) {
            cause = cause.getCause();
        }
        String message = cause.getMessage();
        return cause.getClass().getSimpleName() + (message == null ? "" : " (" + message + ")");
    }
}
