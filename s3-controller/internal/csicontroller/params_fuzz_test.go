package csicontroller

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// checkVolumePrefix is what s3-node and Mountpoint require of the prefix attribute and DeleteVolume of the
// prefix in an ID: non-empty, ending with '/', not starting with one, no empty, "." or ".." segment, no
// control character.
func checkVolumePrefix(t *testing.T, what, p string) {
	t.Helper()
	if p == "" || !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		t.Fatalf("%s: prefix %q", what, p)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			t.Fatalf("%s: prefix %q has the segment %q", what, p, seg)
		}
	}
}

// FuzzCreateVolumeParams reads a dynamic S3 class's parameters and CreateVolume's name the way CreateVolume
// does: no panic; a refusal names the parameter or the name; an accepted volume gets a prefix s3-node mounts
// that ends with the volume's own name (so two volumes never share keys) and an ID that DeleteVolume reads
// back as the same bucket, prefix and object policy.
func FuzzCreateVolumeParams(f *testing.F) {
	f.Add("bucketName=b", "pvc-0f1e")
	f.Add("bucketName=b\nprefix=${pvc.namespace}/${pvc.name}\ndeleteObjectsOnDelete=true\ncsi.storage.k8s.io/pvc/name=c\ncsi.storage.k8s.io/pvc/namespace=n", "pvc-1")
	f.Add("bucketName=b\nprefix=team/\nauthenticationSource=pod\nmountpointEnv.HTTPS_PROXY=p", "pvc-1")
	f.Add("bucketName=b\nprefix=${pv.name}/../x", "pvc-1")
	f.Add("bucketName=b\nprefix=${other}", "pvc-1")
	f.Add("bucketName=b:c", "pvc-1")
	f.Add("bucketName=b\nunknown=1", "pvc-1")
	f.Add("bucketName=b", "..")
	f.Add("bucketName=b", "pv\n1")
	f.Add("bucketName=b\nprefix=${pvc.name}\ncsi.storage.k8s.io/pvc/name=${pv.name}", "pvc-1")
	f.Fuzz(func(t *testing.T, text, name string) {
		params := testutil.FuzzMap(text)
		p, err := parseParams(params)
		if err != nil {
			if !strings.Contains(err.Error(), "parameter") {
				t.Fatalf("parseParams(%q) = %v: the error names no parameter", params, err)
			}
			return
		}
		prefix, err := expandPrefix(p.prefixTmpl, name, params)
		if again, err2 := expandPrefix(p.prefixTmpl, name, params); again != prefix || (err == nil) != (err2 == nil) {
			t.Fatalf("expandPrefix(%q, %q, %q) gave %q, %v, then %q, %v", p.prefixTmpl, name, params, prefix, err, again, err2)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "parameter") && !strings.Contains(err.Error(), "name") {
				t.Fatalf("expandPrefix(%q, %q): %v: the error names neither the parameter nor the name", p.prefixTmpl, name, err)
			}
			return
		}
		what := "class " + text + " volume " + name
		checkVolumePrefix(t, what, prefix)
		if !strings.HasSuffix(prefix, "/"+name+"/") && prefix != name+"/" {
			t.Fatalf("%s: prefix %q does not end with the volume's name", what, prefix)
		}
		id := volumeID{Bucket: p.bucket, Prefix: prefix, DeleteObjects: p.deleteObjects}
		got, err := parseVolumeID(id.String())
		if err != nil || got != id {
			t.Fatalf("%s: ID %q read back as %+v, %v", what, id.String(), got, err)
		}
	})
}

// FuzzParseVolumeID reads DeleteVolume's and ValidateVolumeCapabilities' volume IDs, which any caller of the
// controller sends: no panic; an ID the controller never made is errNotDynamic, which DeleteVolume takes as
// "nothing of ours to delete"; an accepted ID is one String writes, with a prefix that stays inside one
// volume's keys.
func FuzzParseVolumeID(f *testing.F) {
	for _, s := range []string{"dp1:keep:b:pvc-1/", "dp1:delete:b:team/pvc-1/", "dp1:delete:b:", "dp1:delete:b:/", "dp1:x:b:p/",
		"dp1:keep::p/", "dp1:keep:b", "b/static-handle", "dp1:delete:b:a/../", "dp1:delete:b:a//b/", "dp1:keep:0:\x02/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		v, err := parseVolumeID(id)
		if err != nil {
			if !errors.Is(err, errNotDynamic) && !strings.Contains(err.Error(), "volume ID") {
				t.Fatalf("parseVolumeID(%q) = %v: the error names no volume ID", id, err)
			}
			if errors.Is(err, errNotDynamic) && strings.HasPrefix(id, idVersion+":") && strings.Count(id, ":") >= 3 {
				t.Fatalf("parseVolumeID(%q): a malformed dynamic ID taken as not ours", id)
			}
			return
		}
		if v.String() != id {
			t.Fatalf("parseVolumeID(%q) = %+v, which writes as %q", id, v, v.String())
		}
		if validateBucket(v.Bucket) != nil {
			t.Fatalf("parseVolumeID(%q) accepted the bucket %q", id, v.Bucket)
		}
		checkVolumePrefix(t, "ID "+id, v.Prefix)
	})
}
