package portalsim_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

func doReq(client *http.Client, req *http.Request) (answer, error) {
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func itoa(n int) string { return strconv.Itoa(n) }

// newClient is a client of the test's own, closed when the test ends.
func newClient(t *testing.T) *http.Client {
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	return client
}
