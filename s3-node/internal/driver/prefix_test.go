package driver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A dynamically provisioned volume's prefix attribute becomes Mountpoint's --prefix; a user's prefix
// mount option is a prefix inside it; anything that could reach outside the volume is refused by name.
func TestPublishPrefixAttribute(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attr     string
		flags    []string
		wantArg  string // "" means no --prefix sent
		wantErr  string
		wantCode codes.Code
	}{
		{name: "no attribute, no option", wantArg: ""},
		{name: "static volume with a prefix option is unchanged", flags: []string{"prefix data/"}, wantArg: "--prefix=data/"},
		{name: "attribute alone", attr: "team/pvc-1/", wantArg: "--prefix=team/pvc-1/"},
		{name: "user prefix is inside the volume's", attr: "team/pvc-1/", flags: []string{"prefix logs/"}, wantArg: "--prefix=team/pvc-1/logs/"},
		{name: "user prefix without a slash is refused", attr: "team/pvc-1/", flags: []string{"prefix logs"}, wantCode: codes.InvalidArgument, wantErr: `mount option prefix="logs"`},
		{name: "absolute user prefix is refused", attr: "team/pvc-1/", flags: []string{"prefix /x/"}, wantCode: codes.InvalidArgument, wantErr: "inside the volume's"},
		{name: "unterminated attribute is refused", attr: "team/pvc-1", wantCode: codes.InvalidArgument, wantErr: `volume attribute prefix="team/pvc-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			req := r.publishReq("w1", tc.flags...)
			if tc.attr != "" {
				req.VolumeContext["prefix"] = tc.attr
			}
			_, err := r.d.NodePublishVolume(context.Background(), req)
			if tc.wantErr != "" {
				if status.Code(err) != tc.wantCode || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %s saying %q", err, tc.wantCode, tc.wantErr)
				}
				if r.sentCount() != 0 {
					t.Fatalf("a refused publish sent %d messages", r.sentCount())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			args := r.sent[0].Args
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--prefix") })
			got := ""
			if i >= 0 {
				got = args[i]
			}
			if got != tc.wantArg {
				t.Errorf("args %q: prefix %q, want %q", args, got, tc.wantArg)
			}
		})
	}
}
