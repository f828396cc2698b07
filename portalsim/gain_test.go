package portalsim_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// A record with After appears that long after its portal started: before,
// neither lookups nor its voucher know it.
func TestRecordAppearsAfter(t *testing.T) {
	t.Parallel()
	js := portalsim.WithGain(portalsim.Demo(), 300*time.Millisecond)
	var caba portalsim.Jurisdiction
	for _, j := range js {
		if j.ID == "caba" {
			caba = j
		}
	}
	if n := len(caba.Records); n != len(portalsim.Demo()[0].Records)+1 {
		t.Fatalf("caba has %d records with the gain, want one more than the demo's", n)
	}
	p := portalsim.New(caba)
	t.Cleanup(p.Close)
	lookup := func() (bool, bool) {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v2/actas?dominio="+portalsim.DemoPlate, nil))
		v := httptest.NewRecorder()
		p.ServeHTTP(v, httptest.NewRequest(http.MethodGet, "/api/v2/actas/"+portalsim.DemoGainID+"/boleta", nil))
		return strings.Contains(w.Body.String(), portalsim.DemoGainID), v.Code == http.StatusOK
	}
	if listed, voucher := lookup(); listed || voucher {
		t.Errorf("before its time: listed %v, voucher %v", listed, voucher)
	}
	time.Sleep(350 * time.Millisecond)
	if listed, voucher := lookup(); !listed || !voucher {
		t.Errorf("after its time: listed %v, voucher %v", listed, voucher)
	}
	if got := portalsim.WithGain(portalsim.Demo(), 0); len(got[0].Records) != len(portalsim.Demo()[0].Records) {
		t.Error("WithGain(0) gains something")
	}
	bad := caba
	bad.Records = append(bad.Records[:0:0], bad.Records...)
	bad.Records[0].After = "soon"
	if err := bad.Validate(); !errors.Is(err, portalsim.ErrInvalidJurisdiction) || !strings.Contains(err.Error(), `after "soon"`) {
		t.Errorf("Validate of a bad after: %v", err)
	}
}
