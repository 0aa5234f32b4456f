// Calls every operation of the service through the TypeScript client that openapi-generator
// (typescript-fetch) made from openapi/openapi.json, and prints what each answered as one JSON
// object; the test judges it. Arguments: the service's base URL and its admin token.
import {
    Configuration, HealthApi, MetricsApi, QuotasApi, ResolveQuotaTypeEnum, ResponseError, ThrottleApi, VolumesApi,
} from "./client";

declare const process: { argv: string[]; exitCode?: number };

const [basePath, token] = process.argv.slice(2);
const MAX_QUOTA = 9007199254740991; // the document's maximum of every quota, 2^53 - 1
const anonymous = new Configuration({ basePath });
const admin = new Configuration({ basePath, accessToken: token });

// The status of a call that should fail, with the problem's content type, e.g. "401 application/problem+json".
async function status(call: () => Promise<unknown>): Promise<string> {
    try {
        await call();
        return "succeeded";
    } catch (error) {
        if (!(error instanceof ResponseError)) throw error;
        return `${error.response.status} ${error.response.headers.get("content-type") ?? ""}`;
    }
}

async function main(): Promise<void> {
    const health = new HealthApi(anonymous);
    const reader = new QuotasApi(anonymous);
    const quotas = new QuotasApi(admin);
    const report: Record<string, unknown> = {};

    report.healthz = (await health.healthz()).status;
    report.readyz = (await health.readyzRaw()).raw.status;
    report.metrics = (await new MetricsApi(anonymous).metrics()).includes("kafka_throttle_factor");
    report.throttle_factor = (await new ThrottleApi(anonymous).throttleFactor()).factor;
    report.volumes = (await new VolumesApi(anonymous).volumes()).volumes.length;
    report.default_produce = (await reader.quotaTable()).defaults.produce;

    const two = { produce: 2097152, fetch: 4194304 };
    const override = await quotas.putOverride({ quotaLimitsBody: two, user: "alice", clientId: "<default>" });
    report.override_level = override.level;
    report.override_limits = [override.limits.produce, override.limits.fetch];

    const group = await quotas.putGroup({
        name: "analytics",
        groupBody: { users: ["bob", "carol"], clientIds: ["etl"], limits: { produce: 5242880, request: 50 } },
    });
    report.group = [group.name, group.users, group.clientIds, group.limits.produce, group.limits.request];

    const table = await reader.quotaTable();
    report.table_overrides = table.overrides.length;
    report.table_groups = table.groups.length;
    const carol = await reader.resolveQuota({ type: ResolveQuotaTypeEnum.Produce, user: "carol", clientId: "x" });
    report.resolved_carol = [carol.level, carol.group, carol.limit];
    const alice = await reader.resolveQuota({ type: ResolveQuotaTypeEnum.Fetch, user: "alice", clientId: "app" });
    report.resolved_alice = [alice.level, alice.limit];

    report.put_without_token = await status(() => reader.putOverride({ quotaLimitsBody: two, user: "dave" }));
    report.put_below_floor = await status(() => quotas.putOverride({ quotaLimitsBody: { produce: 1 }, user: "dave" }));

    // The largest quota the document allows, and a number a float32 would round, read back.
    await quotas.putOverride({ quotaLimitsBody: { produce: MAX_QUOTA, fetch: 123456789 }, user: "max" });
    const max = (await reader.quotaTable()).overrides.find((o) => o.entity.user === "max")!;
    report.max_quota = [max.limits.produce, max.limits.fetch];
    report.max_quota_exact = max.limits.produce === MAX_QUOTA && max.limits.fetch === 123456789;
    await quotas.deleteOverride({ user: "max" });

    await quotas.deleteOverride({ user: "alice", clientId: "<default>" });
    await quotas.deleteGroup({ name: "analytics" });
    report.delete_override_again = await status(() => quotas.deleteOverride({ user: "alice", clientId: "<default>" }));
    report.delete_group_again = await status(() => quotas.deleteGroup({ name: "analytics" }));
    const after = await reader.quotaTable();
    report.overrides_after = after.overrides.length;
    report.groups_after = after.groups.length;

    console.log(JSON.stringify(report));
}

main().catch((error) => {
    console.error(error);
    process.exitCode = 1;
});
