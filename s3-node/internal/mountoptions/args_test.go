package mountoptions

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "all three forms, dashes or not", in: []string{"region us-west-2", "prefix=some/prefix/", "allow-delete", "--uid=1000", "--gid 2000"},
			want: []string{"--allow-delete", "--gid=2000", "--prefix=some/prefix/", "--region=us-west-2", "--uid=1000"}},
		{name: "blanks skipped, spaces trimmed", in: []string{"", "  ", "  metadata-ttl   indefinite  "}, want: []string{"--metadata-ttl=indefinite"}},
		{name: "same value twice is one", in: []string{"allow-other", "--allow-other"}, want: []string{"--allow-other"}},
		{name: "foreground help version dropped", in: []string{"-f", "foreground", "--help", "-h", "--version", "-v", "read-only"}, want: []string{"--read-only"}},
		{name: "S3-compatible endpoints", in: []string{"endpoint-url http://minio:9000", "force-path-style", "no-sign-request"},
			want: []string{"--endpoint-url=http://minio:9000", "--force-path-style", "--no-sign-request"}},
		{name: "value with = inside", in: []string{"otlp-endpoint=http://x:4318/?a=b"}, want: []string{"--otlp-endpoint=http://x:4318/?a=b"}},
		{name: "fstab -o refused", in: []string{"-o allow_other"}, wantErr: `"-o allow_other" is not supported`},
		{name: "o alone refused", in: []string{"o"}, wantErr: "is not supported"},
		{name: "ca-bundle refused", in: []string{"ca-bundle /etc/ssl/ca.pem"}, wantErr: `"ca-bundle /etc/ssl/ca.pem" is not supported`},
		{name: "unknown option named", in: []string{"allow-delete", "auto-unmount"}, wantErr: `mount option "auto-unmount" (--auto-unmount) is not allowed`},
		{name: "profile refused", in: []string{"profile=other"}, wantErr: "(--profile) is not allowed"},
		{name: "flag with value", in: []string{"allow-delete=true"}, wantErr: "--allow-delete takes no value"},
		{name: "value missing", in: []string{"region"}, wantErr: "--region needs a value"},
		{name: "conflicting values", in: []string{"region a", "region b"}, wantErr: `given twice, with "a" and "b"`},
		{name: "control character", in: []string{"prefix a\x00b"}, wantErr: "control character"},
		{name: "bad name", in: []string{"--re$gion=x"}, wantErr: "only letters"},
		{name: "dashes only", in: []string{"--"}, wantErr: "has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.List(), tt.want) {
				t.Fatalf("Parse(%q) = %q, want %q", tt.in, got.List(), tt.want)
			}
		})
	}
}

// FuzzParse checks that no input panics and that what Parse accepts is allow-listed and survives being
// parsed again from its own output (the form sent to the mounter).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"region us-west-2", "prefix=a/", "-o x", "--allow-delete", "uid 1000", " = ", "-", "--a b=c"} {
		f.Add(s, "allow-other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		args, err := Parse([]string{a, b})
		if err != nil {
			return
		}
		for k := range args {
			if _, ok := allowed[k]; !ok {
				t.Fatalf("Parse(%q, %q) accepted %q", a, b, k)
			}
		}
		again, err := Parse(args.List())
		if err != nil {
			t.Fatalf("re-parsing %q: %v", args.List(), err)
		}
		if !reflect.DeepEqual(again, args) {
			t.Fatalf("re-parse of %q = %q", args.List(), again.List())
		}
	})
}
