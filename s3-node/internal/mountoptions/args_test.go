package mountoptions

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/mountpointopts"
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
		{name: "fstab -o refused", in: []string{"-o allow_other"}, wantErr: `"-o allow_other" (-o) is not supported`},
		{name: "o alone refused", in: []string{"o"}, wantErr: "is not supported"},
		{name: "ca-bundle refused", in: []string{"ca-bundle /etc/ssl/ca.pem"}, wantErr: `"ca-bundle /etc/ssl/ca.pem" (--ca-bundle) is not supported`},
		{name: "unknown option named", in: []string{"allow-delete", "no-such-option"}, wantErr: `mount option "no-such-option" (--no-such-option) is not a Mountpoint option`},
		{name: "auto-unmount refused with mount-s3's reason", in: []string{"auto-unmount"}, wantErr: `"auto-unmount" (--auto-unmount) is not supported: the node mounts Mountpoint on a FUSE file descriptor`},
		{name: "profile passes as upstream", in: []string{"profile=other"}, want: []string{"--profile=other"}},
		{name: "issue's options pass", in: []string{"upload-checksums off", "incremental-upload", "cache-xz=c--usw2-az1--x-s3", "log-metrics",
			"transfer-acceleration", "dual-stack", "requester-pays", "expected-bucket-owner 111122223333", "no-log", "log-directory /tmp",
			"bucket-type directory", "negative-metadata-ttl 60"},
			want: []string{"--bucket-type=directory", "--cache-xz=c--usw2-az1--x-s3", "--dual-stack", "--expected-bucket-owner=111122223333",
				"--incremental-upload", "--log-directory=/tmp", "--log-metrics", "--negative-metadata-ttl=60", "--no-log", "--requester-pays",
				"--transfer-acceleration", "--upload-checksums=off"}},
		{name: "short aliases become long names", in: []string{"-d", "-l /tmp", "l=/tmp"}, want: []string{"--debug", "--log-directory=/tmp"}},
		{name: "run-as-user dropped as upstream", in: []string{"run-as-user 1000", "-V"}, want: []string{}},
		{name: "bind repeats", in: []string{"bind eth0", "bind=eth1", "--bind eth0"}, want: []string{"--bind=eth0", "--bind=eth1"}},
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
			if !reflect.DeepEqual(got.List(), tt.want) && (len(tt.want) > 0 || len(got) > 0) {
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
			if o, long, ok := lookup(k); !ok || long != k || o.Node == mountpointopts.Refuse || o.Node == mountpointopts.Drop {
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

// TestParseFollowsMountpointsList walks every option of mount-s3's list (and the CSI driver's own) in each
// of upstream's forms and checks the node's decision against the list's policy.
func TestParseFollowsMountpointsList(t *testing.T) {
	for _, o := range mountpointopts.All() {
		forms := []string{o.Arg(), strings.TrimLeft(o.Arg(), "-")}
		if o.Value {
			forms = append(forms, o.Flag()+" "+o.Example)
		}
		for _, item := range forms {
			t.Run(item, func(t *testing.T) {
				got, err := Parse([]string{item})
				switch o.Node {
				case mountpointopts.Refuse:
					if err == nil || !strings.Contains(err.Error(), o.Flag()) || !strings.Contains(err.Error(), o.Reason) {
						t.Fatalf("Parse(%q) = %v, %v; want a refusal naming %s with %q", item, got, err, o.Flag(), o.Reason)
					}
				case mountpointopts.Drop:
					if err != nil || len(got) != 0 {
						t.Fatalf("Parse(%q) = %v, %v; want it dropped", item, got, err)
					}
				default:
					if err != nil {
						t.Fatalf("Parse(%q): %v", item, err)
					}
					if want := []string{o.Arg()}; !reflect.DeepEqual(got.List(), want) {
						t.Fatalf("Parse(%q) = %q, want %q", item, got.List(), want)
					}
				}
			})
		}
	}
}
