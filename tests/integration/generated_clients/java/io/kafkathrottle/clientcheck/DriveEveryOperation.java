package io.kafkathrottle.clientcheck;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kafkathrottle.client.ApiClient;
import io.kafkathrottle.client.ApiException;
import io.kafkathrottle.client.api.HealthApi;
import io.kafkathrottle.client.api.MetricsApi;
import io.kafkathrottle.client.api.QuotasApi;
import io.kafkathrottle.client.api.ThrottleApi;
import io.kafkathrottle.client.api.VolumesApi;
import io.kafkathrottle.client.model.GroupBody;
import io.kafkathrottle.client.model.GroupModel;
import io.kafkathrottle.client.model.OverrideModel;
import io.kafkathrottle.client.model.QuotaLimitsBody;
import io.kafkathrottle.client.model.QuotaTableModel;
import io.kafkathrottle.client.model.ResolutionModel;
import java.util.List;
import java.util.Map;

/**
 * Calls every operation of the service through the Java client that openapi-generator made from
 * openapi/openapi.json (library native: java.net.http.HttpClient, as a user's generated client
 * would), and prints what each answered as one JSON object; the test judges it. Arguments: the
 * service's base URL and its admin token.
 */
public final class DriveEveryOperation {
    /** The document's maximum of every quota, 2^53 - 1. */
    private static final double MAX_QUOTA = 9007199254740991.0;

    public static void main(String[] args) throws Exception {
        ApiClient client = new ApiClient();
        client.updateBaseUri(args[0]);
        Map<String, String> admin = Map.of("Authorization", "Bearer " + args[1]);
        HealthApi health = new HealthApi(client);
        QuotasApi quotas = new QuotasApi(client);
        ObjectMapper json = new ObjectMapper();
        ObjectNode report = json.createObjectNode();

        report.put("healthz", health.healthz().getStatus());
        report.put("readyz", health.readyzWithHttpInfo().getStatusCode());
        report.put("metrics", new MetricsApi(client).metrics().contains("kafka_throttle_factor"));
        report.put("throttle_factor", new ThrottleApi(client).throttleFactor(null).getFactor());
        report.put("volumes", new VolumesApi(client).volumes().getVolumes().size());
        report.put("default_produce", quotas.quotaTable(null).getDefaults().getProduce());

        QuotaLimitsBody two = new QuotaLimitsBody().produce(2097152.0).fetch(4194304.0);
        OverrideModel override = quotas.putOverride(two, "alice", "<default>", admin);
        report.put("override_level", override.getLevel());
        report.set("override_limits", json.valueToTree(List.of(override.getLimits().getProduce(), override.getLimits().getFetch())));

        GroupBody body = new GroupBody()
                .users(List.of("bob", "carol"))
                .clientIds(List.of("etl"))
                .limits(new QuotaLimitsBody().produce(5242880.0).request(50.0));
        GroupModel group = quotas.putGroup("analytics", body, admin);
        report.set("group", json.valueToTree(List.of(group.getName(), group.getUsers(), group.getClientIds(),
                group.getLimits().getProduce(), group.getLimits().getRequest())));

        QuotaTableModel table = quotas.quotaTable(null);
        report.put("table_overrides", table.getOverrides().size());
        report.put("table_groups", table.getGroups().size());
        ResolutionModel carol = quotas.resolveQuota("produce", "carol", "x");
        report.set("resolved_carol", json.valueToTree(List.of(carol.getLevel(), carol.getGroup(), carol.getLimit())));
        ResolutionModel alice = quotas.resolveQuota("fetch", "alice", "app");
        report.set("resolved_alice", json.valueToTree(List.of(alice.getLevel(), alice.getLimit())));

        report.put("put_without_token", status(() -> quotas.putOverride(two, "dave", null)));
        report.put("put_below_floor", status(() -> quotas.putOverride(new QuotaLimitsBody().produce(1.0), "dave", null, admin)));

        // The largest quota the document allows, and a number a float32 would round, read back
        // from the table as every shim and client reads it.
        quotas.putOverride(new QuotaLimitsBody().produce(MAX_QUOTA).fetch(123456789.0), "max", null, admin);
        OverrideModel max = quotas.quotaTable(null).getOverrides().stream()
                .filter(o -> "max".equals(o.getEntity().getUser())).findFirst().orElseThrow();
        report.set("max_quota", json.valueToTree(List.of(max.getLimits().getProduce(), max.getLimits().getFetch())));
        report.put("max_quota_exact", max.getLimits().getProduce() == MAX_QUOTA && max.getLimits().getFetch() == 123456789.0);
        quotas.deleteOverride("max", null, admin);

        quotas.deleteOverride("alice", "<default>", admin);
        quotas.deleteGroup("analytics", admin);
        report.put("delete_override_again", status(() -> quotas.deleteOverride("alice", "<default>", admin)));
        report.put("delete_group_again", status(() -> quotas.deleteGroup("analytics", admin)));
        QuotaTableModel after = quotas.quotaTable(null);
        report.put("overrides_after", after.getOverrides().size());
        report.put("groups_after", after.getGroups().size());

        System.out.println(json.writeValueAsString(report));
    }

    interface Call {
        void run() throws ApiException;
    }

    /** The status of a call that should fail, with the problem's content type, e.g. "401 application/problem+json". */
    private static String status(Call call) {
        try {
            call.run();
            return "succeeded";
        } catch (ApiException e) {
            return e.getCode() + " " + e.getResponseHeaders().firstValue("content-type").orElse("");
        }
    }
}
