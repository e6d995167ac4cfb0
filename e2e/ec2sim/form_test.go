package ec2sim

import (
	"reflect"
	"strings"
	"testing"
)

func TestFormDecodesNumberedLists(t *testing.T) {
	body := "Action=DescribeVolumes&VolumeId.2=vol-b&VolumeId.1=vol-a&VolumeId.10=vol-j&VolumeId.0=bad&VolumeId.01=bad&VolumeId.x=bad" +
		"&Filter.2.Name=tag%3AK&Filter.2.Value.1=v1&Filter.2.Value.2=v2&Filter.1.Name=status&Filter.1.Value.1=available" +
		"&TagSpecification.1.ResourceType=volume&TagSpecification.1.Tag.2.Key=b&TagSpecification.1.Tag.2.Value=2&TagSpecification.1.Tag.1.Key=a&TagSpecification.1.Tag.1.Value=1"
	f, err := decodeForm(body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.list("VolumeId"), []string{"vol-a", "vol-b", "vol-j"}; !reflect.DeepEqual(got, want) {
		t.Errorf("VolumeId list %v, want %v", got, want)
	}
	filters, aerr := f.filters()
	if aerr != nil {
		t.Fatal(aerr)
	}
	want := []filter{{Name: "status", Values: []string{"available"}}, {Name: "tag:K", Values: []string{"v1", "v2"}}}
	if !reflect.DeepEqual(filters, want) {
		t.Errorf("filters %+v, want %+v", filters, want)
	}
	tags, aerr := f.tagSpecs("volume")
	if aerr != nil {
		t.Fatal(aerr)
	}
	if want := []tag{{"a", "1"}, {"b", "2"}}; !reflect.DeepEqual(tags, want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	if _, aerr := f.tagSpecs("snapshot"); aerr == nil || aerr.Code != "InvalidParameterValue" {
		t.Errorf("tag spec for the wrong resource type: %v", aerr)
	}
}

func TestFormRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, body, key string
		call            func(*form, string) *apiError
		wantCode        string
		wantInMessage   string
	}{
		{"integer", "Size=ten", "Size", func(f *form, k string) *apiError { _, _, e := f.integer(k); return e }, "InvalidParameterValue", "size"},
		{"boolean", "Encrypted=yes", "Encrypted", func(f *form, k string) *apiError { _, e := f.boolean(k); return e }, "InvalidParameterValue", "encrypted"},
		{"filter without name", "Filter.1.Value.1=x", "", func(f *form, _ string) *apiError { _, e := f.filters(); return e }, "MissingParameter", "Filter.Name"},
		{"tag without key", "Tag.1.Value=x", "Tag", func(f *form, k string) *apiError { _, e := f.tags(k); return e }, "MissingParameter", "Tag.Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decodeForm(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			e := tt.call(f, tt.key)
			if e == nil || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantInMessage) {
				t.Errorf("got %v, want %s naming %q", e, tt.wantCode, tt.wantInMessage)
			}
		})
	}
	if _, err := decodeForm("a=%zz"); err == nil {
		t.Error("bad escape decoded")
	}
}

// FuzzDecodeForm checks that no body makes the decoder or the list readers panic, and that list readers only
// return what the body holds.
func FuzzDecodeForm(f *testing.F) {
	for _, seed := range []string{
		"",
		"Action=CreateVolume&AvailabilityZone=us-east-1a&ClientToken=tok-abc&Size=10&TagSpecification.1.ResourceType=volume&TagSpecification.1.Tag.1.Key=CSIVolumeName&TagSpecification.1.Tag.1.Value=pvc-1&Version=2016-11-15&VolumeType=gp3",
		"Action=DescribeVolumes&Filter.1.Name=tag%3ACSIVolumeName&Filter.1.Value.1=pvc-1&Version=2016-11-15&VolumeId.1=vol-0123",
		"VolumeId.999999999999=x&VolumeId.-1=y&VolumeId.=z&VolumeId..1=w",
		"Filter.1.Value.1=a&Filter.1=b&Filter.1.=c&Filter..Name=d",
		"%zz=1",
		"a=1&a=2&;b",
		"Tag.1.Key=&Tag.1.Value=v&Tag.2.Key=k",
		strings.Repeat("VolumeId.1=", 100),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fm, err := decodeForm(body)
		if err != nil {
			return
		}
		for _, prefix := range []string{"VolumeId", "Filter", "TagSpecification", "Tag", "Value", ""} {
			for _, v := range fm.list(prefix) {
				if len(v) > len(body) {
					t.Fatalf("list value %q longer than the body", v)
				}
			}
			for _, g := range fm.group(prefix) {
				_ = g.list("Value")
				_, _ = g.tags("Tag")
			}
		}
		_, _ = fm.filters()
		_, _ = fm.tagSpecs("volume")
		_, _ = fm.tags("Tag")
		_, _, _ = fm.integer("Size")
		_, _ = fm.boolean("DryRun")
		_, _ = readPaging(fm, 5, 500, false)
		_ = tokenParams(fm)
	})
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"pvc-*", "pvc-1", true}, {"pvc-?", "pvc-12", false}, {"*-1", "pvc-1", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"exact", "exact", true}, {"exact", "exactly", false},
	}
	for _, tt := range tests {
		if got := wildcardMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
}
