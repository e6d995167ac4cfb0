package params

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

func TestParseVolume(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		block   bool
		wantErr string // substring naming the key, "" for success
		check   func(t *testing.T, v *Volume)
	}{
		{name: "defaults are gp3 and ext4", in: nil, check: func(t *testing.T, v *Volume) {
			if v.VolumeType != "gp3" || v.FsType != "ext4" {
				t.Errorf("got type %q fstype %q", v.VolumeType, v.FsType)
			}
		}},
		{name: "keys are case-insensitive", in: map[string]string{"Type": "IO2", "IOPS": "5000", "Encrypted": "true"}, check: func(t *testing.T, v *Volume) {
			if v.VolumeType != "io2" || v.IOPS != 5000 || !v.Encrypted {
				t.Errorf("got %+v", v)
			}
		}},
		{name: "kms key forces encryption", in: map[string]string{"kmsKeyId": "arn:aws:kms:k"}, check: func(t *testing.T, v *Volume) {
			if !v.Encrypted {
				t.Error("not encrypted")
			}
		}},
		{name: "xfs with block size", in: map[string]string{KeyFsType: "xfs", "blockSize": "4096"}, check: func(t *testing.T, v *Volume) {
			if v.Format.BlockSize != "4096" || v.Format.Context()[ContextBlockSize] != "4096" {
				t.Errorf("got %+v", v.Format)
			}
		}},
		{name: "tag specs ordered by key", in: map[string]string{"tagSpecification_2": "b=2", "tagSpecification_1": "a=1"}, check: func(t *testing.T, v *Volume) {
			if strings.Join(v.TagSpecs, ",") != "a=1,b=2" {
				t.Errorf("got %v", v.TagSpecs)
			}
		}},
		{name: "deprecated fstype warns", in: map[string]string{"fstype": "xfs"}, check: func(t *testing.T, v *Volume) {
			if len(v.Warnings) != 1 || v.FsType != "ext4" {
				t.Errorf("got %+v", v)
			}
		}},
		{name: "unknown key", in: map[string]string{"foo": "bar"}, wantErr: `"foo"="bar"`},
		{name: "unknown type", in: map[string]string{"type": "gp9"}, wantErr: `"type"="gp9"`},
		{name: "bad iops", in: map[string]string{"iops": "-3"}, wantErr: `"iops"="-3"`},
		{name: "iops and iopsPerGB", in: map[string]string{"type": "io1", "iops": "100", "iopsPerGB": "10"}, wantErr: "mutually exclusive"},
		{name: "io1 without iops", in: map[string]string{"type": "io1"}, wantErr: "need iops"},
		{name: "throughput on gp2", in: map[string]string{"type": "gp2", "throughput": "200"}, wantErr: "throughput"},
		{name: "negative iops", in: map[string]string{"type": "io2", "iops": "-100"}, wantErr: `"iops"`},
		{name: "empty iops", in: map[string]string{"type": "gp3", "iops": ""}, wantErr: `"iops"`},
		{name: "fstype is case-sensitive", in: map[string]string{KeyFsType: "XFS"}, wantErr: `"XFS"`},
		{name: "non-alphanumeric block size", in: map[string]string{"blockSize": "4096 -O x"}, wantErr: "alphanumeric"},
		{name: "inode count on xfs", in: map[string]string{KeyFsType: "xfs", "numberOfInodes": "100"}, wantErr: `not supported for filesystem "xfs"`},
		{name: "format option on block", in: map[string]string{"blockSize": "4096"}, block: true, wantErr: "block volumes"},
		{name: "cluster size without bigalloc", in: map[string]string{"ext4ClusterSize": "16384"}, wantErr: "ext4BigAlloc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolume(tc.in, tc.block)
			if tc.wantErr != "" {
				var pe *Error
				if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a params.Error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, v)
		})
	}
}

func TestRenderTags(t *testing.T) {
	data := VolumeTemplateData{PVCName: "data-db-0", PVCNamespace: "prod", PVName: "pvc-1"}
	tests := []struct {
		spec, key, value, wantErr string
	}{
		{spec: "owner={{ .PVCNamespace }}", key: "owner", value: "prod"},
		{spec: "app={{ .PVCName | field \"-\" 1 }}", key: "app", value: "db"},
		{spec: "up={{ .PVCNamespace | toUpper }}", key: "up", value: "PROD"},
		{spec: "s={{ substring 0 4 .PVName }}", key: "s", value: "pvc-"},
		// Upstream's order: the searched string comes last, so a pipe asks "does the name contain db".
		{spec: "c={{ .PVCName | contains \"db\" }}", key: "c", value: "true"},
		{spec: "c={{ contains \"db\" .PVCName }}", key: "c", value: "true"},
		{spec: "c={{ contains .PVCName \"db\" }}", key: "c", value: "false"},
		{spec: "docs={{ .PVCNamespace | contains \"prod\" }}", key: "docs", value: "true"},
		{spec: "i={{ .PVCName | index \"-\" }}", key: "i", value: "4"},
		{spec: "i={{ index \"x\" .PVCName }}", key: "i", value: "-1"},
		{spec: "l={{ .PVCName | lastIndex \"-\" }}", key: "l", value: "7"},
		{spec: "l={{ lastIndex \"x\" .PVCName }}", key: "l", value: "-1"},
		// substring clamps: negative start reads from 0, a negative or long end reads to the end.
		{spec: "s={{ substring 3 99 .PVName }}", key: "s", value: "-1"},
		{spec: "s={{ substring -2 3 .PVName }}", key: "s", value: "pvc"},
		{spec: "s={{ substring 2 -1 .PVName }}", key: "s", value: "c-1"},
		{spec: "s={{ substring -5 -5 .PVName }}", key: "s", value: "pvc-1"},
		{spec: "s={{ substring 9 12 .PVName }}", key: "s", value: ""},
		{spec: "s={{ substring 3 1 .PVName }}", key: "s", value: ""},
		{spec: "b={{ .PVCNamespace | contains \"prod\" }}-{{ .PVCName | field \"-\" 2 | toUpper }}", key: "b", value: "true-0"},
		{spec: "x={{ .PVCName | field \"-\" 3 }}", wantErr: "out of range"},
		{spec: "literal=a=b", key: "literal", value: "a=b"},
		{spec: "x={{ js .PVCName }}", wantErr: "disabled"},
		{spec: "x={{ call .PVCName }}", wantErr: "disabled"},
		{spec: "x={{ .Nope }}", wantErr: "template failed"},
		{spec: "x={{ .PVCName", wantErr: "bad template"},
		{spec: "novalue", wantErr: "key=value"},
		{spec: "CSIVolumeName=x", wantErr: "reserved"},
		{spec: "kubernetes.io/cluster/x=owned", wantErr: "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			k, v, err := RenderTag(tc.spec, data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || k != tc.key || v != tc.value {
				t.Fatalf("got %q=%q, %v; want %q=%q", k, v, err, tc.key, tc.value)
			}
		})
	}
}

func TestParseModify(t *testing.T) {
	tests := []struct {
		name       string
		in         map[string]string
		createTime bool
		wantErr    string
	}{
		{name: "type iops throughput", in: map[string]string{"type": "gp3", "iops": "4000", "throughput": "300"}},
		{name: "keys are exact", in: map[string]string{"IOPS": "4000"}, wantErr: `"IOPS"`},
		{name: "deletion of reserved tag", in: map[string]string{"tagDeletion_1": "CSIVolumeName"}, wantErr: "reserved"},
		{name: "deletion at create time is unknown", in: map[string]string{"tagDeletion_1": "a"}, createTime: true, wantErr: "unknown"},
		{name: "iopspergb not mutable at create", in: map[string]string{"iopspergb": "10"}, createTime: true, wantErr: "not a mutable"},
		{name: "bad type", in: map[string]string{"type": "fast"}, wantErr: `"type"="fast"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModify(tc.in, tc.createTime)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseSnapshot(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		wantErr string
	}{
		{name: "fsr zones", in: map[string]string{"fastSnapshotRestoreAvailabilityZones": "us-east-1a, us-east-1b"}},
		{name: "governance lock", in: map[string]string{"lockMode": "governance", "lockDuration": "2"}},
		{name: "lock without mode", in: map[string]string{"lockDuration": "2"}, wantErr: "lockMode"},
		{name: "both duration and date", in: map[string]string{"lockMode": "governance", "lockDuration": "2", "lockExpirationDate": "2030-01-01T00:00:00Z"}, wantErr: "exactly one"},
		{name: "cool-off on governance", in: map[string]string{"lockMode": "governance", "lockDuration": "2", "lockCoolOffPeriod": "1"}, wantErr: "compliance"},
		{name: "bad arn", in: map[string]string{"outpostArn": "op-1"}, wantErr: "ARN"},
		{name: "unknown", in: map[string]string{"color": "red"}, wantErr: `"color"="red"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSnapshot(tc.in)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseExtraTags(t *testing.T) {
	tests := []struct {
		name    string
		flags   []string
		want    map[string]string
		wantErr string
	}{
		{name: "one flag, trimmed", flags: []string{"team=storage, env = dev "}, want: map[string]string{"team": "storage", "env": "dev"}},
		// Repeated --extra-tags merge as upstream's map flag does; a later key wins.
		{name: "repeated flags merge", flags: []string{"team=storage,env=dev", "env=prod", "owner=me"},
			want: map[string]string{"team": "storage", "env": "prod", "owner": "me"}},
		{name: "empty flag and empty pairs", flags: []string{"", "a=1,,"}, want: map[string]string{"a": "1"}},
		// Literal, as upstream's: what looks like a template is kept as written, broken or not.
		{name: "value looking like a template is literal", flags: []string{"ns={{ .PVCNamespace | toUpper }}", "x={{ .PVCName"},
			want: map[string]string{"ns": "{{ .PVCNamespace | toUpper }}", "x": "{{ .PVCName"}},
		{name: "reserved key", flags: []string{"ok=1", "ebs.csi.aws.com/x=1"}, wantErr: "reserved"},
		{name: "no value", flags: []string{"team"}, wantErr: "key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExtraTags(tc.flags...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// Upstream's order for a new volume's and snapshot's tags: the driver's own, the cluster ID's, --extra-tags
// as written (never templated: a value fit for a volume's template data used to fail every snapshot), then the
// class's rendered tags. Before, the cluster ID's KubernetesCluster overrode the user's, and --extra-tags were
// rendered as templates.
func TestTagPrecedence(t *testing.T) {
	flags := TagFlags{ClusterID: "prod", Extra: map[string]string{
		"team": "storage", "tier": "flag", "KubernetesCluster": "mine", "owner": "{{ .PVCNamespace }}",
	}}
	vp := &Volume{PVCName: "data", PVCNamespace: "db", PVName: "pv-1", IOPSPerGB: 10}
	class := map[string]string{"tier": "class", "Name": "named-by-class"}
	got := VolumeTags("pv-1", vp, flags, class)
	want := map[string]string{
		TagCSIVolumeName: "pv-1", TagCluster: "true", TagPVCName: "data", TagPVCNamespace: "db", TagPVName: "pv-1",
		"kubernetes.io/cluster/prod": "owned", TagClusterName: "prod", "KubernetesCluster": "mine", "Name": "named-by-class",
		"team": "storage", "tier": "class", "owner": "{{ .PVCNamespace }}", TagIOPSPerGB: "10",
	}
	if !maps.Equal(got, want) {
		t.Errorf("volume tags\n got %v\nwant %v", got, want)
	}
	got = SnapshotTags("snap-1", flags, map[string]string{"tier": "snapclass"})
	want = map[string]string{
		TagCSIVolumeSnapshotName: "snap-1", TagCluster: "true", "kubernetes.io/cluster/prod": "owned", TagClusterName: "prod",
		"Name": "prod-dynamic-snap-1", "KubernetesCluster": "mine", "team": "storage", "tier": "snapclass", "owner": "{{ .PVCNamespace }}",
	}
	if !maps.Equal(got, want) {
		t.Errorf("snapshot tags\n got %v\nwant %v", got, want)
	}
}

func FuzzParseVolume(f *testing.F) {
	f.Add("type", "io2", "iops", "3000", false)
	f.Add("csi.storage.k8s.io/fstype", "xfs", "blockSize", "4096", false)
	f.Add("tagSpecification_1", "a={{ .PVCName }}", "iopsPerGB", "50", true)
	f.Add("ext4ClusterSize", "16384", "ext4BigAlloc", "true", false)
	f.Add("type", "gp3", "Type", "io2", false)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, block bool) {
		raw := map[string]string{k1: v1, k2: v2}
		v, err := ParseVolume(raw, block)
		if again, err2 := ParseVolume(raw, block); !reflect.DeepEqual(v, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseVolume(%q) gave %+v, %v, then %+v, %v", raw, v, err, again, err2)
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a params.Error", err)
			}
			return
		}
		if v.IOPS < 0 || v.Throughput < 0 || (v.IOPS > 0 && v.IOPSPerGB > 0) {
			t.Fatalf("accepted inconsistent %+v", v)
		}
		if _, err := FormatFromContext(v.Format.Context(), v.FsType); err != nil && !block {
			t.Fatalf("context round trip: %v", err)
		}
	})
}

func FuzzRenderTag(f *testing.F) {
	f.Add("owner={{ .PVCNamespace }}")
	f.Add("a={{ .PVCName | field \"-\" 1 }}")
	f.Add("x={{ range .PVName }}{{ end }}")
	f.Add("k={{ substring 0 2 .PVName | toUpper }}")
	f.Fuzz(func(t *testing.T, spec string) {
		k, v, err := RenderTag(spec, VolumeTemplateData{PVCName: "a-b", PVCNamespace: "ns", PVName: "pv"})
		if err != nil {
			return
		}
		if k == "" || IsReservedTagKey(k) || len(v) > maxTagValueLen {
			t.Fatalf("accepted %q=%q", k, v)
		}
	})
}
