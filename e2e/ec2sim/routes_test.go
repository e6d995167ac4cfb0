package ec2sim

import (
	"net/http"
	"reflect"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestRoutesAnswerOnlyTheirOwnBody sends each endpoint beside EC2's POST / a request and compares the whole
// answer, so an endpoint that also ran the EC2 Query path (and appended its error XML) fails. The steps run in
// order: a GET shows what the POST before it set.
func TestRoutesAnswerOnlyTheirOwnBody(t *testing.T) {
	s := startServer(t, nil)
	// The request ID is the only part of an error answer that changes from one request to the next.
	requestIDs := regexp.MustCompile(`<RequestID>[0-9a-f-]+</RequestID>`)
	const (
		jsonType  = "application/json"
		textType  = "text/plain; charset=utf-8"
		xmlType   = "text/xml;charset=UTF-8"
		faults    = `{"actions":["CreateVolume"],"throttleRate":0.5,"latency":1000,"budget":3}` + "\n"
		quotas    = `{"storageGiB":{"io2":4096},"snapshots":10}` + "\n"
		notPosted = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<Response><Errors><Error><Code>InvalidHttpRequest</Code><Message>EC2 Query requests must be POSTed to /.</Message></Error></Errors><RequestID>ID</RequestID></Response>`
	)
	steps := []struct {
		name, method, path, body string
		want                     httpAnswer
	}{
		{"faults start empty", http.MethodGet, "/debug/faults", "", httpAnswer{200, jsonType, "{}\n"}},
		{"set faults", http.MethodPost, "/debug/faults", faults, httpAnswer{200, jsonType, faults}},
		{"get faults", http.MethodGet, "/debug/faults", "", httpAnswer{200, jsonType, faults}},
		{"faults out of range", http.MethodPost, "/debug/faults", `{"throttleRate":2}`, httpAnswer{400, textType, "faults: throttleRate 2 is not in [0, 1]\n"}},
		{"faults unchanged", http.MethodGet, "/debug/faults", "", httpAnswer{200, jsonType, faults}},
		{"clear faults with PUT", http.MethodPut, "/debug/faults", "{}", httpAnswer{200, jsonType, "{}\n"}},
		{"delete faults", http.MethodDelete, "/debug/faults", "", httpAnswer{405, textType, "Method Not Allowed\n"}},
		{"set quotas", http.MethodPost, "/debug/quotas", quotas, httpAnswer{200, jsonType, quotas}},
		{"get quotas", http.MethodGet, "/debug/quotas", "", httpAnswer{200, jsonType, quotas}},
		{"unknown quota field", http.MethodPost, "/debug/quotas", `{"volumes":3}`, httpAnswer{400, textType, `quotas: json: unknown field "volumes"` + "\n"}},
		{"quotas unchanged", http.MethodGet, "/debug/quotas", "", httpAnswer{200, jsonType, quotas}},
		{"empty state", http.MethodGet, "/debug/state", "", httpAnswer{200, jsonType, `{"volumes":[],"attachments":[],"snapshots":[]}` + "\n"}},
		{"state is read-only", http.MethodPost, "/debug/state", "{}", httpAnswer{405, textType, "Method Not Allowed\n"}},
		{"GET / is EC2's error", http.MethodGet, "/", "", httpAnswer{400, xmlType, notPosted}},
		{"unknown path", http.MethodGet, "/debug/nothing", "", httpAnswer{404, textType, "404 page not found\n"}},
		{"POST elsewhere than /", http.MethodPost, "/ec2", "Action=DescribeVolumes", httpAnswer{404, textType, "404 page not found\n"}},
	}
	for _, st := range steps {
		got := httpResponse(t, s, st.method, st.path, st.body)
		got.body = requestIDs.ReplaceAllString(got.body, "<RequestID>ID</RequestID>")
		if got != st.want {
			t.Errorf("%s: %s %s answered\n%d %s %q\nwant\n%d %s %q", st.name, st.method, st.path,
				got.status, got.contentType, got.body, st.want.status, st.want.contentType, st.want.body)
		}
	}
	if q := s.Quotas(); q.StorageGiB["io2"] != 4096 || q.Snapshots != 10 {
		t.Errorf("quotas in force %+v", q)
	}
	if f := s.Faults(); !reflect.DeepEqual(f, Faults{}) {
		t.Errorf("faults in force %+v, want none", f)
	}

	// None of the above is an EC2 request: the only one counted is the EC2 call that follows them.
	if _, err := newClient(t, s).DescribeAvailabilityZones(ctxT(t), &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatal(err)
	}
	m, err := scrape(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`ec2sim_requests_total{action="DescribeAvailabilityZones",code="OK"} 1`}
	if got := requestSamples(m); !reflect.DeepEqual(got, want) {
		t.Errorf("ec2sim_requests_total samples %q, want %q", got, want)
	}
}
