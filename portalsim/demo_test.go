package portalsim_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	js := portalsim.Demo()
	want := map[string]func(portalsim.Fault) bool{
		"caba":    func(f portalsim.Fault) bool { return f.Mode == portalsim.Healthy },
		"cordoba": func(f portalsim.Fault) bool { return f.Mode == portalsim.Slow && f.Latency == 800*time.Millisecond },
		"mendoza": func(f portalsim.Fault) bool {
			return f.Mode == portalsim.Flaky && f.FailRate == 0.5 && f.RetryAfter > 0
		},
		"pba":     func(f portalsim.Fault) bool { return f.Mode == portalsim.Throttle && f.RetryAfter > 0 },
		"rosario": func(f portalsim.Fault) bool { return f.Mode == portalsim.Down },
		"salta":   func(f portalsim.Fault) bool { return f.Mode == portalsim.Hang },
	}
	shapes := make(map[portalsim.Shape]bool)
	ids := make(map[string]bool)
	for _, j := range js {
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", j.ID, err)
		}
		if ids[j.ID] {
			t.Errorf("duplicate id %s", j.ID)
		}
		ids[j.ID] = true
		shapes[j.Shape] = true
		if ok, listed := want[j.ID]; listed && !ok(j.Fault) {
			t.Errorf("%s: fault %v is not its demo behaviour", j.ID, j.Fault)
		}
		plates := make(map[string]bool)
		for _, r := range j.Records {
			plates[r.Domain] = true
			if r.CUIT == portalsim.DemoCUITClean || r.Domain == portalsim.DemoPlateClean {
				t.Errorf("%s: record %s belongs to the clean plate or CUIT", j.ID, r.ID)
			}
		}
		if !plates[portalsim.DemoPlate] {
			t.Errorf("%s has no record for %s", j.ID, portalsim.DemoPlate)
		}
	}
	for id := range want {
		if !ids[id] {
			t.Errorf("the demo lacks %s", id)
		}
	}
	if len(shapes) < 3 {
		t.Errorf("the demo speaks %d shapes, want at least 3", len(shapes))
	}
}

func TestDemoPlatesHaveArgentineFormats(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^([A-Z]{3}[0-9]{3}|[A-Z]{2}[0-9]{3}[A-Z]{2}|[0-9]{3}[A-Z]{3}|[A-Z][0-9]{3}[A-Z]{3})$`)
	for _, p := range []string{portalsim.DemoPlate, portalsim.DemoPlateOld, portalsim.DemoPlateMoto, portalsim.DemoPlateClean} {
		if !format.MatchString(p) {
			t.Errorf("%s is not an Argentine plate", p)
		}
	}
}

func TestDemoCUITsAreValid(t *testing.T) {
	t.Parallel()
	// Validate checks every record's CUIT: a record per CUIT says whether
	// its check digit is right.
	tests := []struct {
		cuit  string
		valid bool
	}{
		{portalsim.DemoCUIT, true},      // 5·2+4·0+3·1+2·2+7·3+6·4+5·5+4·6+3·7+2·8 = 148; 148 % 11 = 5; 11-5 = 6
		{portalsim.DemoCUITFleet, true}, // 15+0+21+2+14+18+20+20+18+14 = 142; 142 % 11 = 10; 11-10 = 1
		{portalsim.DemoCUITClean, true}, // 10+28+6+6+28+30+30+28+24+18 = 208; 208 % 11 = 10; 11-10 = 1
		{"20-00000006-0", true},         // 10+12 = 22; 22 % 11 = 0; 11 → 0
		{"20-12345678-5", false},
		{"20-00000001-0", false}, // 10+2 = 12; 12 % 11 = 1; 11-1 = 10: no valid check digit
		{"20-00000001-1", false},
		{"20-1234567-6", false}, // ten digits
	}
	for _, tt := range tests {
		j := portalsim.Jurisdiction{ID: "x", Shape: portalsim.ShapeActas, Records: []portalsim.Record{
			{ID: "1", Date: "2026-01-01T00:00:00", Amount: "1.00", CUIT: tt.cuit},
		}}
		err := j.Validate()
		if tt.valid && err != nil {
			t.Errorf("%s: %v, want valid", tt.cuit, err)
		}
		if !tt.valid && !errors.Is(err, portalsim.ErrInvalidJurisdiction) {
			t.Errorf("%s: Validate() = %v, want a wrong check digit", tt.cuit, err)
		}
	}
	if got := strings.ReplaceAll(portalsim.DemoCUIT, "-", "")[2:10]; got != portalsim.DemoDNI {
		t.Errorf("DemoCUIT carries DNI %s, want DemoDNI %s", got, portalsim.DemoDNI)
	}
}

func TestJurisdictionValidate(t *testing.T) {
	t.Parallel()
	j := portalsim.Jurisdiction{
		Shape: "xml",
		Fault: portalsim.Fault{Mode: "broken"},
		Records: []portalsim.Record{
			{ID: "1", Date: "14/03/2026", Amount: "1,5"},
			{ID: "1", Date: "2026-03-14T09:12:00", Amount: "10"},
			{Date: "2026-03-14T09:12:00", Amount: "10."},
		},
	}
	err := j.Validate()
	if !errors.Is(err, portalsim.ErrInvalidJurisdiction) {
		t.Fatalf("Validate() = %v, want ErrInvalidJurisdiction", err)
	}
	for _, s := range []string{"id is empty", `unknown shape "xml"`, "unknown mode", "record 0: date", "record 0: amount",
		`record 1: duplicate id "1"`, "record 2: id is empty", `record 2: amount "10."`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Validate() = %q, want it to report %q", err, s)
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("New(invalid jurisdiction) did not panic")
		}
	}()
	portalsim.New(j)
}

func TestShapesAreValid(t *testing.T) {
	t.Parallel()
	for _, s := range portalsim.Shapes() {
		if !s.Valid() {
			t.Errorf("%s is not valid", s)
		}
	}
	if portalsim.Shape("fax").Valid() {
		t.Errorf("an unknown shape is valid")
	}
}

func TestDialectDemo(t *testing.T) {
	t.Parallel()
	js := portalsim.DialectDemo()
	want := map[string]portalsim.Shape{"neuquen": portalsim.ShapeSOAP, "tucuman": portalsim.ShapeHTML,
		"chubut": portalsim.ShapePaged, "entrerios": portalsim.ShapeOAuth2, "misiones": portalsim.ShapeSession}
	if len(js) != len(want) {
		t.Fatalf("%d jurisdictions, want %d", len(js), len(want))
	}
	used := make(map[string]bool)
	for _, j := range portalsim.Demo() {
		used[j.ID] = true
	}
	for _, j := range js {
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", j.ID, err)
		}
		if want[j.ID] != j.Shape || used[j.ID] || j.Fault.Mode != "" && j.Fault.Mode != portalsim.Healthy {
			t.Errorf("%s: shape %s, fault %v; want %s, healthy, an id Demo does not use", j.ID, j.Shape, j.Fault, want[j.ID])
		}
		byPlate, byCUIT, threeDecimals := 0, 0, false
		for _, r := range j.Records {
			if r.Domain == portalsim.DemoPlate {
				byPlate++
			}
			if r.CUIT == portalsim.DemoCUIT {
				byCUIT++
			}
			if _, frac, _ := strings.Cut(r.Amount, "."); len(frac) == 3 {
				threeDecimals = true
			}
			if r.Domain == portalsim.DemoPlateClean || r.CUIT == portalsim.DemoCUITClean {
				t.Errorf("%s: record %s belongs to the clean plate or CUIT", j.ID, r.ID)
			}
		}
		if byPlate == 0 || byCUIT == 0 {
			t.Errorf("%s: %d records for DemoPlate, %d for DemoCUIT", j.ID, byPlate, byCUIT)
		}
		if j.ID == "chubut" && (byPlate < 7 || j.Paging.Size != 3) {
			t.Errorf("chubut: %d records for DemoPlate in pages of %d, want at least 3 pages", byPlate, j.Paging.Size)
		}
		if j.ID != "entrerios" && !threeDecimals {
			t.Errorf("%s has no amount with three decimals", j.ID)
		}
	}
	if all := portalsim.DemoAll(); len(all) != len(portalsim.Demo())+len(js)+len(portalsim.RealDemo()) {
		t.Errorf("DemoAll has %d jurisdictions", len(all))
	}
}

func TestNewJurisdictionWritesDefaults(t *testing.T) {
	t.Parallel()
	recs := []portalsim.Record{{ID: "1", Date: "2026-01-01T00:00:00", Amount: "1.00"}}
	for _, s := range portalsim.Shapes() {
		j := portalsim.NewJurisdiction(s, "x", "X", recs)
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if j.Shape != s || len(j.Records) != 1 || j.Paging.Size != portalsim.DefaultPageSize || j.Paging.Style != portalsim.PagePages ||
			j.OAuth2.ClientID != portalsim.DemoClientID || j.OAuth2.TokenTTL != portalsim.DefaultTokenTTL || j.Session.TTL != portalsim.DefaultSessionTTL {
			t.Errorf("%s: %+v", s, j)
		}
	}
	recs[0].ID = "changed"
	if j := portalsim.NewJurisdiction(portalsim.ShapeSOAP, "x", "X", recs[:0]); len(j.Records) != 0 {
		t.Errorf("records %v", j.Records)
	}
	bad := portalsim.NewJurisdiction(portalsim.ShapePaged, "x", "X", nil)
	bad.Paging = portalsim.Paging{Style: "scroll", Size: 1000}
	bad.OAuth2 = portalsim.OAuth2{Scopes: []string{"a b"}, TokenTTL: -1}
	bad.Session.TTL = -1
	err := bad.Validate()
	for _, s := range []string{`unknown style "scroll"`, "size 1000", `scope "a b"`, "token_ttl -1ns", "ttl -1ns"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Validate() = %v, want it to report %s", err, s)
		}
	}
	for _, s := range portalsim.LosslessShapes() {
		if !s.Valid() || s == portalsim.ShapeInfracciones {
			t.Errorf("lossless shape %s", s)
		}
	}
}

func TestRealDemo(t *testing.T) {
	t.Parallel()
	js := portalsim.RealDemo()
	want := map[string]portalsim.Shape{"sanjuan": portalsim.ShapeDataJSON, "saopaulo": portalsim.ShapeDetran,
		"montevideo": portalsim.ShapeErrorFlag, "cdmx": portalsim.ShapeEnvelope}
	if len(js) != len(want) {
		t.Fatalf("%d jurisdictions, want %d", len(js), len(want))
	}
	used := make(map[string]bool)
	for _, j := range append(portalsim.Demo(), portalsim.DialectDemo()...) {
		used[j.ID] = true
	}
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	c := parseS12(t, portalsim.AggregatorYAML(js, sim.URLs()))
	for i, j := range js {
		if want[j.ID] != j.Shape || used[j.ID] || j.Fault.Mode != "" && j.Fault.Mode != portalsim.Healthy {
			t.Errorf("%s: shape %s, fault %v; want %s, healthy, an id the other demos do not use", j.ID, j.Shape, j.Fault, want[j.ID])
		}
		byPlate, byCUIT := 0, 0
		for _, r := range j.Records {
			if r.Domain == portalsim.DemoPlate {
				byPlate++
			}
			if r.CUIT == portalsim.DemoCUIT {
				byCUIT++
			}
			if r.Domain == portalsim.DemoPlateClean || r.CUIT == portalsim.DemoCUITClean {
				t.Errorf("%s: record %s belongs to the clean plate or CUIT", j.ID, r.ID)
			}
		}
		// Its mapping reads every record of DemoPlate.
		got := newS12Mapper(t, c.Sources[i]).lookup("by_domain", portalsim.DemoPlate)
		if byCUIT == 0 || got.kind != "ok" || len(got.infractions) != byPlate || byPlate == 0 {
			t.Errorf("%s: %d records for DemoPlate, %d for DemoCUIT; its mapping reads %s with %d (%s)", j.ID, byPlate, byCUIT, got.kind, len(got.infractions), got.detail)
		}
	}
}
