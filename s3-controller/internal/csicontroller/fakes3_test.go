package csicontroller

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// fakeS3 is an in-memory S3 speaking the wire protocol (path style) for the three calls the service makes,
// so the tests run the real SDK client, its error decoding included.
type fakeS3 struct {
	mu      sync.Mutex
	buckets map[string]map[string]bool // bucket -> keys
	// status forces an HTTP status for every request on a bucket (403, 500...).
	status map[string]int
	// deletes counts DeleteObjects calls.
	deletes int
}

// newFakeS3 starts the server and returns it with a client for it.
func newFakeS3(t *testing.T, buckets ...string) (*fakeS3, *s3.Client, string) {
	f := &fakeS3{buckets: map[string]map[string]bool{}, status: map[string]int{}}
	for _, b := range buckets {
		f.buckets[b] = map[string]bool{}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
	})
	return f, c, srv.URL
}

func (f *fakeS3) put(bucket string, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.buckets[bucket][k] = true
	}
}

func (f *fakeS3) keys(bucket string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k := range f.buckets[bucket] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bucket := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
	if st := f.status[bucket]; st != 0 {
		s3Error(w, st, "Forced", "forced status")
		return
	}
	objs, ok := f.buckets[bucket]
	if !ok {
		s3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && q.Get("list-type") == "2":
		max, _ := strconv.Atoi(q.Get("max-keys"))
		var keys []string
		for k := range objs {
			if strings.HasPrefix(k, q.Get("prefix")) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		truncated := max > 0 && len(keys) > max
		if truncated {
			keys = keys[:max]
		}
		var b strings.Builder
		fmt.Fprintf(&b, `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>%s</Name><KeyCount>%d</KeyCount><IsTruncated>%t</IsTruncated>`, bucket, len(keys), truncated)
		for _, k := range keys {
			fmt.Fprintf(&b, "<Contents><Key>%s</Key><Size>1</Size></Contents>", k)
		}
		b.WriteString("</ListBucketResult>")
		_, _ = w.Write([]byte(b.String()))
	case r.Method == http.MethodPost && q.Has("delete"):
		f.deletes++
		var req struct {
			Objects []struct{ Key string } `xml:"Object"`
		}
		if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
			s3Error(w, http.StatusBadRequest, "MalformedXML", err.Error())
			return
		}
		for _, o := range req.Objects {
			delete(objs, o.Key)
		}
		_, _ = w.Write([]byte(`<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>`))
	default:
		s3Error(w, http.StatusNotImplemented, "NotImplemented", r.Method+" "+r.URL.String())
	}
}

func s3Error(w http.ResponseWriter, st int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(st)
	_, _ = fmt.Fprintf(w, "<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}
