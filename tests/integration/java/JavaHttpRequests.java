import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * Sends requests with {@code java.net.http.HttpClient} as a Java application would: the default
 * client (HTTP/2 preferred, so an {@code Upgrade: h2c} on every http:// request).
 *
 * <p>{@code JavaHttpRequests <base url> <bearer token>}; reads one request a line from stdin,
 * {@code METHOD<TAB>path[<TAB>JSON body]}, and prints one line per answer:
 * {@code status<TAB>etag<TAB>content length<TAB>body}.
 */
public class JavaHttpRequests {
    public static void main(String[] args) throws Exception {
        URI base = URI.create(args[0]);
        String token = args[1];
        HttpClient client = HttpClient.newHttpClient();
        BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = lines.readLine(); line != null; line = lines.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            String[] parts = line.split("\t", 3);
            HttpRequest.BodyPublisher body = parts.length == 3
                    ? HttpRequest.BodyPublishers.ofString(parts[2])
                    : HttpRequest.BodyPublishers.noBody();
            HttpRequest.Builder request = HttpRequest.newBuilder(base.resolve(parts[1]))
                    .timeout(Duration.ofSeconds(20))
                    .header("Authorization", "Bearer " + token)
                    .method(parts[0], body);
            if (parts.length == 3) {
                request.header("Content-Type", "application/json");
            }
            HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
            System.out.println(response.statusCode()
                    + "\t" + response.headers().firstValue("etag").orElse("")
                    + "\t" + response.headers().firstValue("content-length").orElse("")
                    + "\t" + response.body().replace("\n", " "));
        }
    }
}
