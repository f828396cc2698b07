package config

import (
	"strings"
	"testing"
	"time"
)

// whsec is a valid Standard Webhooks secret.
const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestWatchesValidation(t *testing.T) {
	t.Parallel()
	keys := `server: {api_keys: [{name: fleet, key: k1, rps: 5}]}
memory: {key: "` + memoryKey + `"}
`
	tests := []struct {
		name string
		data string
		want []want
	}{
		{"no api keys", doc(`memory: {key: "` + memoryKey + `"}
watches: {}`), []want{{"watches", "needs server.api_keys"}}},
		{"no memory key", doc(`server: {api_keys: [{name: fleet, key: k1, rps: 5}]}
watches: {min_interval: 1h}`), []want{{"watches", "needs memory.key"}}},
		{"neither", doc("watches: {}"), []want{{"watches", "needs server.api_keys"}, {"watches", "needs memory.key"}}},
		{"bounds", doc(keys + "watches: {min_interval: 0s, default_interval: -1s, budget_share: 0, max_per_key: 0}"), []want{
			{"watches.min_interval", "must be positive"}, {"watches.default_interval", "must be positive"},
			{"watches.budget_share", "above 0 and at most 1"}, {"watches.max_per_key", "at least 1"}}},
		{"share above one", doc(keys + "watches: {budget_share: 1.5}"), []want{{"watches.budget_share", "above 0 and at most 1"}}},
		{"default below min", doc(keys + "watches: {min_interval: 6h, default_interval: 1h}"), []want{
			{"watches.default_interval", "must not be below watches.min_interval (6h0m0s)"}}},
		{"unknown key", doc(keys + "watches: {intervall: 1h}"), []want{{"watches.intervall", "unknown key"}}},
		{"bad webhook secret", doc(`server: {api_keys: [{name: fleet, key: k1, rps: 5, webhook_secret: "nope"}]}`), []want{
			{"server.api_keys[0].webhook_secret", `want "whsec_"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tt.data, nil)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errs)
			}
			for i, w := range tt.want {
				if errs[i].Key != w.key || !strings.Contains(errs[i].Msg, w.msg) {
					t.Errorf("error %d: got %q, want %s: …%s…", i, errs[i].Error(), w.key, w.msg)
				}
			}
		})
	}
}

// The block's presence turns watches on, with the defaults of SPEC 15 for
// the keys it leaves out; without it (or with a null) they are off.
func TestWatchesDefaults(t *testing.T) {
	t.Parallel()
	keys := `server: {api_keys: [{name: fleet, key: k1, rps: 5, webhook_secret: "` + whsec + `"}]}
memory: {key: "` + memoryKey + `"}
`
	tests := []struct {
		name  string
		block string
		want  *Watches
	}{
		{"absent", "", nil},
		{"null", "watches:", nil},
		{"empty", "watches: {}", &Watches{Duration(6 * time.Hour), Duration(24 * time.Hour), 0.5, 10000}},
		{"partial", "watches: {min_interval: 1h, max_per_key: 3}", &Watches{Duration(time.Hour), Duration(24 * time.Hour), 0.5, 3}},
		{"full", "watches: {min_interval: 10m, default_interval: 1h, budget_share: 0.25, max_per_key: 7}",
			&Watches{Duration(10 * time.Minute), Duration(time.Hour), 0.25, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustParse(t, doc(keys+tt.block), nil)
			switch {
			case tt.want == nil && c.Watches != nil:
				t.Errorf("got %+v, want watches off", *c.Watches)
			case tt.want != nil && (c.Watches == nil || *c.Watches != *tt.want):
				t.Errorf("got %+v, want %+v", c.Watches, *tt.want)
			}
			if got := c.Server.APIKeys[0].WebhookSecret; got != whsec {
				t.Errorf("webhook_secret: got %q", got)
			}
		})
	}
}

// An API key's webhook_secret is a secret: an unset ${NAME} is an error
// naming it, and no message shows its value.
func TestWebhookSecretIsSecret(t *testing.T) {
	t.Parallel()
	errs := parseErrors(t, doc(`server: {api_keys: [{name: a, key: k1, rps: 1}, {name: b, key: k2, rps: 1, webhook_secret: "${FLEET_WHSEC}"}]}`), nil)
	if len(errs) != 1 || errs[0].Key != "server.api_keys[1].webhook_secret" || !strings.Contains(errs[0].Msg, "${FLEET_WHSEC}") {
		t.Errorf("got %v, want server.api_keys[1].webhook_secret naming ${FLEET_WHSEC}", errs)
	}
	bad := "not-a-whsec-but-secret"
	errs = parseErrors(t, doc(`server: {api_keys: [{name: a, key: k1, rps: 1, webhook_secret: "${S}"}]}`), env(map[string]string{"S": bad}))
	if len(errs) != 1 || strings.Contains(errs[0].Error(), bad) {
		t.Errorf("got %v, want one error that does not show the secret", errs)
	}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"server.api_keys[0].webhook_secret", true},
		{"server.api_keys[12].webhook_secret", true},
		{"server.api_keys[].webhook_secret", false},
		{"server.api_keys[0].webhook_secretx", false},
		{"server.api_keys[0].name", false},
		{"watches.min_interval", false},
	} {
		if got := secretKey(tt.path); got != tt.want {
			t.Errorf("secretKey(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}
