package sources

import (
	"testing"

	"github.com/multas/aggregator"
)

func TestCompileTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		base    string
		path    string
		op      aggregator.Operation
		v       values
		want    string
		wantErr bool
	}{
		{
			name: "path and query escaping",
			base: "http://portal", path: "/a/{domain}?dominio={domain}",
			op: aggregator.ByDomain, v: values{paramDomain: "AB 1/2&x=y"},
			want: "http://portal/a/AB%201%2F2&x=y?dominio=AB+1%2F2%26x%3Dy",
		},
		{
			name: "id and kind",
			base: "https://portal/api/", path: "/personas/{id_kind}/{id}",
			op: aggregator.ByID, v: values{paramID: "20123456786", paramIDKind: "cuit"},
			want: "https://portal/api/personas/cuit/20123456786",
		},
		{
			name: "voucher",
			base: "http://portal", path: "/actas/{infraction_id}/boleta",
			op: aggregator.Voucher, v: values{paramInfractionID: "Q-1/2"},
			want: "http://portal/actas/Q-1%2F2/boleta",
		},
		{name: "missing placeholder", base: "http://p", path: "/actas", op: aggregator.ByDomain, wantErr: true},
		{name: "unknown placeholder", base: "http://p", path: "/{plate}/{domain}", op: aggregator.ByDomain, wantErr: true},
		{name: "placeholder of another operation", base: "http://p", path: "/{domain}/{id}", op: aggregator.ByDomain, wantErr: true},
		{name: "id_kind outside by_id", base: "http://p", path: "/{infraction_id}/{id_kind}", op: aggregator.Voucher, wantErr: true},
		{name: "unterminated", base: "http://p", path: "/{domain", op: aggregator.ByDomain, wantErr: true},
		{name: "stray brace", base: "http://p", path: "/}{domain}", op: aggregator.ByDomain, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := compileTemplate(tt.base, tt.path, tt.op)
			if tt.wantErr {
				if err == nil {
					t.Errorf("compileTemplate(%q) succeeded, want an error", tt.path)
				}
				return
			}
			if err != nil {
				t.Fatalf("compileTemplate(%q): %v", tt.path, err)
			}
			if got := tmpl.expand(tt.v); got != tt.want {
				t.Errorf("expand = %q, want %q", got, tt.want)
			}
		})
	}
}
