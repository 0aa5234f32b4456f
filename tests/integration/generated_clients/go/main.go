// Calls every operation of the service through the Go client that openapi-generator made from
// openapi/openapi.json, and prints what each answered as one JSON object; the test judges it.
// Arguments: the service's base URL and its admin token.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	client "github.com/kafkathrottle/throttleclient"
)

// The document's maximum of every quota, 2^53 - 1.
const maxQuota = 9007199254740991.0

func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(baseURL, token string) error {
	configuration := client.NewConfiguration()
	configuration.Servers = client.ServerConfigurations{{URL: strings.TrimSuffix(baseURL, "/")}}
	api := client.NewAPIClient(configuration)
	reader := context.Background()
	admin := context.WithValue(reader, client.ContextAccessToken, token)
	report := map[string]any{}

	health, _, err := api.HealthAPI.Healthz(reader).Execute()
	if err != nil {
		return err
	}
	report["healthz"] = health.Status
	_, response, err := api.HealthAPI.Readyz(reader).Execute()
	if err != nil {
		return err
	}
	report["readyz"] = response.StatusCode
	metrics, _, err := api.MetricsAPI.Metrics(reader).Execute()
	if err != nil {
		return err
	}
	report["metrics"] = strings.Contains(metrics, "kafka_throttle_factor")
	decision, _, err := api.ThrottleAPI.ThrottleFactor(reader).Execute()
	if err != nil {
		return err
	}
	report["throttle_factor"] = decision.Factor
	volumes, _, err := api.VolumesAPI.Volumes(reader).Execute()
	if err != nil {
		return err
	}
	report["volumes"] = len(volumes.Volumes)
	table, _, err := api.QuotasAPI.QuotaTable(reader).Execute()
	if err != nil {
		return err
	}
	report["default_produce"] = table.Defaults.GetProduce()

	two := client.QuotaLimitsBody{Produce: client.PtrFloat64(2097152), Fetch: client.PtrFloat64(4194304)}
	override, _, err := api.QuotasAPI.PutOverride(admin).QuotaLimitsBody(two).User("alice").ClientId("<default>").Execute()
	if err != nil {
		return err
	}
	report["override_level"] = override.Level
	report["override_limits"] = []float64{override.Limits.GetProduce(), override.Limits.GetFetch()}

	body := client.GroupBody{
		Users:     []string{"bob", "carol"},
		ClientIds: []string{"etl"},
		Limits:    client.QuotaLimitsBody{Produce: client.PtrFloat64(5242880), Request: client.PtrFloat64(50)},
	}
	group, _, err := api.QuotasAPI.PutGroup(admin, "analytics").GroupBody(body).Execute()
	if err != nil {
		return err
	}
	report["group"] = []any{group.Name, group.Users, group.ClientIds, group.Limits.GetProduce(), group.Limits.GetRequest()}

	table, _, err = api.QuotasAPI.QuotaTable(reader).Execute()
	if err != nil {
		return err
	}
	report["table_overrides"] = len(table.Overrides)
	report["table_groups"] = len(table.Groups)
	carol, _, err := api.QuotasAPI.ResolveQuota(reader).Type_("produce").User("carol").ClientId("x").Execute()
	if err != nil {
		return err
	}
	report["resolved_carol"] = []any{carol.Level, carol.Group.Get(), carol.GetLimit()}
	alice, _, err := api.QuotasAPI.ResolveQuota(reader).Type_("fetch").User("alice").ClientId("app").Execute()
	if err != nil {
		return err
	}
	report["resolved_alice"] = []any{alice.Level, alice.GetLimit()}

	_, response, err = api.QuotasAPI.PutOverride(reader).QuotaLimitsBody(two).User("dave").Execute()
	report["put_without_token"] = status(response, err)
	below := client.QuotaLimitsBody{Produce: client.PtrFloat64(1)}
	_, response, err = api.QuotasAPI.PutOverride(admin).QuotaLimitsBody(below).User("dave").Execute()
	report["put_below_floor"] = status(response, err)

	// The largest quota the document allows, and a number a float32 would round, read back from
	// the table as every shim and client reads it.
	largest := client.QuotaLimitsBody{Produce: client.PtrFloat64(maxQuota), Fetch: client.PtrFloat64(123456789)}
	if _, _, err = api.QuotasAPI.PutOverride(admin).QuotaLimitsBody(largest).User("max").Execute(); err != nil {
		return err
	}
	table, _, err = api.QuotasAPI.QuotaTable(reader).Execute()
	if err != nil {
		return err
	}
	for _, o := range table.Overrides {
		if o.Entity.GetUser() == "max" {
			report["max_quota"] = []float64{o.Limits.GetProduce(), o.Limits.GetFetch()}
			report["max_quota_exact"] = o.Limits.GetProduce() == maxQuota && o.Limits.GetFetch() == 123456789
		}
	}
	if _, err = api.QuotasAPI.DeleteOverride(admin).User("max").Execute(); err != nil {
		return err
	}

	if _, err = api.QuotasAPI.DeleteOverride(admin).User("alice").ClientId("<default>").Execute(); err != nil {
		return err
	}
	if _, err = api.QuotasAPI.DeleteGroup(admin, "analytics").Execute(); err != nil {
		return err
	}
	response, err = api.QuotasAPI.DeleteOverride(admin).User("alice").ClientId("<default>").Execute()
	report["delete_override_again"] = status(response, err)
	response, err = api.QuotasAPI.DeleteGroup(admin, "analytics").Execute()
	report["delete_group_again"] = status(response, err)
	table, _, err = api.QuotasAPI.QuotaTable(reader).Execute()
	if err != nil {
		return err
	}
	report["overrides_after"] = len(table.Overrides)
	report["groups_after"] = len(table.Groups)

	line, err := json.Marshal(report)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// The status of a call that should fail, with the problem's content type, e.g. "401 application/problem+json".
func status(response *http.Response, err error) string {
	var failure *client.GenericOpenAPIError
	if err == nil {
		return "succeeded"
	}
	if !errors.As(err, &failure) || response == nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %s", response.StatusCode, response.Header.Get("Content-Type"))
}
