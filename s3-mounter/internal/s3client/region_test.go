package s3client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// startIMDS serves f and points the SDK's IMDS client at it (enabled unless disabled).
func startIMDS(t *testing.T, f *testutil.FakeIMDS, disabled bool) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", fmt.Sprint(disabled))
}

func TestRegionIsChosenInMountpointsOrder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		flag         string
		env          map[string]string
		imdsDisabled bool
		want         string
		wantUser     bool
		wantIMDS     int
	}{
		{name: "--region wins", flag: "eu-west-1", env: map[string]string{"AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "eu-west-3"},
			want: "eu-west-1", wantUser: true},
		{name: "AWS_REGION before AWS_DEFAULT_REGION", env: map[string]string{"AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "eu-west-3"},
			want: "eu-west-2", wantUser: true},
		{name: "AWS_DEFAULT_REGION before IMDS, and correctable", env: map[string]string{"AWS_DEFAULT_REGION": "eu-west-3"},
			want: "eu-west-3"},
		{name: "the instance's region from IMDS", want: "ap-south-1", wantIMDS: 1},
		{name: "us-east-1 with IMDS disabled", imdsDisabled: true, want: "us-east-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"})
			imds := &testutil.FakeIMDS{Region: "ap-south-1"}
			startIMDS(t, imds, tc.imdsDisabled)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			rec := &recorder{}
			c := newTestClient(t, rec, Options{Region: tc.flag})
			if got := c.Region(); got.Name != tc.want || got.UserSpecified != tc.wantUser {
				t.Errorf("region %+v, want %s (user's choice: %v)", got, tc.want, tc.wantUser)
			}
			if n := imds.Lookups(); n != tc.wantIMDS {
				t.Errorf("IMDS asked %d times for the region, want %d", n, tc.wantIMDS)
			}
			if err := c.listEmpty(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			if got := signedRegion(rec.requests[0]); got != tc.want {
				t.Errorf("request signed for %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUnreachableIMDSFallsBackToUSEast1(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"})
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // a closed port refuses connections, as off EC2
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	c := newTestClient(t, &recorder{}, Options{})
	if got := c.Region(); got.Name != DefaultRegion || got.UserSpecified {
		t.Errorf("region %+v, want the default %s", got, DefaultRegion)
	}
}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/\d{8}/([^/]+)/s3/`)

// signedRegion is the region of a SigV4 request's credential scope.
func signedRegion(r *http.Request) string {
	m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return ""
	}
	return m[1]
}

// regionalBucket is an S3 endpoint for a bucket in one region: requests signed for another get the
// redirect answer given, requests signed for it succeed. It records the requests.
type regionalBucket struct {
	region string
	// redirect writes the answer to a request signed for the wrong region.
	redirect func(w http.ResponseWriter, bucketRegion string)
	recorder
}

func (b *regionalBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.requests = append(b.requests, r.Clone(context.Background()))
	b.mu.Unlock()
	if signedRegion(r) != b.region {
		b.redirect(w, b.region)
		return
	}
	if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<ListBucketResult><Name>bkt</Name><KeyCount>0</KeyCount><MaxKeys>0</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
	}
}

func errorXML(w http.ResponseWriter, status int, code, region string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>wrong region</Message><Region>%s</Region><RequestId>1</RequestId></Error>`, code, region)
}

// Each form of S3's region redirect, as S3 (and versitygw) send them.
var redirects = map[string]func(w http.ResponseWriter, bucketRegion string){
	"301 PermanentRedirect": func(w http.ResponseWriter, r string) {
		w.Header().Set("x-amz-bucket-region", r)
		errorXML(w, http.StatusMovedPermanently, "PermanentRedirect", r)
	},
	"400 AuthorizationHeaderMalformed": func(w http.ResponseWriter, r string) {
		errorXML(w, http.StatusBadRequest, "AuthorizationHeaderMalformed", r)
	},
	"301 with only x-amz-bucket-region (HeadBucket's)": func(w http.ResponseWriter, r string) {
		w.Header().Set("x-amz-bucket-region", r)
		w.WriteHeader(http.StatusMovedPermanently)
	},
}

func TestRedirectMovesAnInferredRegionToTheBucketsForGood(t *testing.T) {
	for name, redirect := range redirects {
		t.Run(name, func(t *testing.T) {
			isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_DEFAULT_REGION": "eu-west-3"})
			b := &regionalBucket{region: "us-west-2", redirect: redirect}
			c := newRegionalClient(t, b, Options{})
			if err := c.Validate(context.Background(), "some/prefix/"); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := c.Region(); got.Name != "us-west-2" {
				t.Errorf("region %+v after the redirect, want us-west-2", got)
			}
			// Later requests go to the bucket's region at once.
			if _, err := c.List(context.Background(), "", "/", "", 10); err != nil {
				t.Fatal(err)
			}
			var signed []string
			for _, r := range b.requests {
				signed = append(signed, signedRegion(r))
			}
			if want := "eu-west-3 us-west-2 us-west-2"; strings.Join(signed, " ") != want {
				t.Errorf("requests signed for %v, want %s", signed, want)
			}
			if p := b.requests[0].URL.Query().Get("prefix"); p != "some/prefix/" {
				t.Errorf("the check listed prefix %q, want the mounted prefix", p)
			}
		})
	}
}

func TestUsersRegionIsNotCorrected(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag string
		env  map[string]string
	}{
		{name: "--region", flag: "eu-west-1"},
		{name: "AWS_REGION", env: map[string]string{"AWS_REGION": "eu-west-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"})
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			b := &regionalBucket{region: "us-west-2", redirect: redirects["400 AuthorizationHeaderMalformed"]}
			c := newRegionalClient(t, b, Options{Region: tc.flag})
			err := c.Validate(context.Background(), "")
			if err == nil || !strings.Contains(err.Error(), "region us-west-2, not eu-west-1") {
				t.Fatalf("Validate: %v; want an error naming the bucket's region", err)
			}
			if b.count() != 1 {
				t.Errorf("%d requests, want 1: the user's region is not retried elsewhere", b.count())
			}
		})
	}
}

func TestOtherBadRequestsAreNotRedirects(t *testing.T) {
	isolate(t, map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_DEFAULT_REGION": "eu-west-3"})
	b := &regionalBucket{region: "us-west-2", redirect: func(w http.ResponseWriter, r string) {
		w.Header().Set("x-amz-bucket-region", r)
		errorXML(w, http.StatusBadRequest, "InvalidArgument", "")
	}}
	c := newRegionalClient(t, b, Options{})
	err := c.Validate(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("Validate: %v; want the server's InvalidArgument", err)
	}
	if b.count() != 1 || c.Region().Name != "eu-west-3" {
		t.Errorf("%d requests, region %s: an InvalidArgument moved the client", b.count(), c.Region().Name)
	}
}

func newRegionalClient(t *testing.T, b *regionalBucket, o Options) *Client {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	o.Bucket, o.EndpointURL, o.ForcePathStyle = "bkt", srv.URL, true
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
