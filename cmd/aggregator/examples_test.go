package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// exampleSources are the portals of `portalsim -demo` (on its default
// ports) that examples/watches.yaml watches: caba, which gains an
// infraction, and three others.
func exampleSources() string {
	urls := map[string]string{}
	var js []portalsim.Jurisdiction
	for i, j := range portalsim.DemoAll() {
		urls[j.ID] = fmt.Sprintf("http://127.0.0.1:%d", 9101+i)
		switch j.ID {
		case "caba", "cordoba", "mendoza", "santafe":
			js = append(js, j)
		}
	}
	return portalsim.AggregatorYAML(js, urls)
}

// TestExampleWatches: examples/watches.yaml is valid with its secrets set,
// refused without them, turns watches on for its API key, and its sources
// are the demo portals as portalsim describes them (go test
// ./cmd/aggregator -run TestExampleWatches -update regenerates them).
func TestExampleWatches(t *testing.T) {
	t.Parallel()
	file := filepath.Join("..", "..", "examples", "watches.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := exampleSources()
	head, _, found := bytes.Cut(data, []byte("\nsources:\n"))
	if *update {
		if !found {
			t.Fatal("watches.yaml: no sources: section to replace")
		}
		data = append(append(head, '\n'), want...)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.HasSuffix(data, []byte("\n"+want)) {
		t.Error("examples/watches.yaml: its sources are not the demo portals'; regenerate them: go test ./cmd/aggregator -run TestExampleWatches -update")
	}
	env := map[string]string{
		"AGGREGATOR_ADMIN_TOKEN": "t", "FLEET_CO_KEY": "k",
		"FLEET_CO_WHSEC":        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"WEBHOOK_SECRET":        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
		"AGGREGATOR_MEMORY_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
	}
	cfg, err := config.Parse(data, file, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	if cfg.Watches == nil || len(cfg.Server.APIKeys) != 1 || cfg.Server.APIKeys[0].WebhookSecret != env["FLEET_CO_WHSEC"] || cfg.Memory.Key == "" {
		t.Errorf("want watches on, one API key with its webhook secret, a memory key: %+v", cfg.Server.APIKeys)
	}
	if _, err := config.Parse(data, file, nil); err == nil {
		t.Error("parsed with no secret set: want every unset secret refused")
	}
}
