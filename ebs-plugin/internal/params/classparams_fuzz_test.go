package params

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// checkRefusal checks that err is a params.Error naming a key of raw (or the key a cross-field rule names).
func checkRefusal(t *testing.T, raw map[string]string, err error, ruleKeys ...string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("%q: error %v is not a params.Error", raw, err)
	}
	if _, ok := raw[pe.Key]; !ok && !strings.Contains(strings.Join(ruleKeys, "\n"), pe.Key) {
		t.Fatalf("%q: error %v names %q, which is neither a given key nor a rule's", raw, err, pe.Key)
	}
}

// FuzzParseModify checks VolumeAttributesClass parameters (ControllerModifyVolume, and CreateVolume's
// mutable_parameters with createTime): no panic; a refusal names the key; the same parameters always give the
// same answer; what is accepted is a known volume type, positive numbers, never both iops and iopsPerGB, only
// the mutable keys at create time, every tagSpecification_N in key order, and no deletion of the driver's
// own tags.
func FuzzParseModify(f *testing.F) {
	f.Add("type=gp3\niops=4000\nthroughput=250", false)
	f.Add("volumeType=io2\niopspergb=50\nallowautoiopsincreaseonmodify=true", false)
	f.Add("tagSpecification_1=team=storage\ntagSpecification_2=pvc={{ .PVCName }}\ntagDeletion_1=old", false)
	f.Add("tagDeletion_1=CSIVolumeName", false)
	f.Add("iops=3000\niopspergb=10", false)
	f.Add("iopspergb=10", true)
	f.Add("csi.storage.k8s.io/pvc/name=c\ncsi.storage.k8s.io/pvc/namespace=n\ncsi.storage.k8s.io/pv/name=p", true)
	f.Add("iops=-1\nthroughput=x", false)
	f.Add("type=gp3\nvolumeType=io2", false)
	f.Fuzz(func(t *testing.T, text string, createTime bool) {
		raw := testutil.FuzzMap(text)
		m, err := ParseModify(raw, createTime)
		if again, err2 := ParseModify(raw, createTime); !reflect.DeepEqual(m, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseModify(%q) gave %+v, %v, then %+v, %v", raw, m, err, again, err2)
		}
		if err != nil {
			checkRefusal(t, raw, err, KeyIOPS)
			return
		}
		if m.VolumeType != "" && !volumeTypes[m.VolumeType] || m.IOPS < 0 || m.IOPSPerGB < 0 || m.Throughput < 0 || m.IOPS > 0 && m.IOPSPerGB > 0 {
			t.Fatalf("ParseModify(%q) accepted %+v", raw, m)
		}
		if createTime && (m.IOPSPerGB != 0 || m.AllowIOPSIncreaseOnModifySet || len(m.TagDeletions) > 0) {
			t.Fatalf("ParseModify(%q, createTime) accepted an immutable parameter: %+v", raw, m)
		}
		tags := 0
		for k := range raw {
			if strings.HasPrefix(k, TagSpecificationPrefix) {
				tags++
			}
		}
		if len(m.TagSpecs) != tags {
			t.Fatalf("ParseModify(%q) kept %d of %d tag specifications", raw, len(m.TagSpecs), tags)
		}
		for _, k := range m.TagDeletions {
			if k == "" || IsReservedTagKey(k) {
				t.Fatalf("ParseModify(%q) deletes the tag %q", raw, k)
			}
		}
	})
}

// FuzzParseSnapshot checks VolumeSnapshotClass parameters: no panic; a refusal names the key; the same
// parameters always give the same answer; an accepted lock is complete (a mode, exactly one of duration and
// expiry, cool-off with compliance only), an Outpost is an ARN, and fast snapshot restore names zones.
func FuzzParseSnapshot(f *testing.F) {
	f.Add("fastSnapshotRestoreAvailabilityZones=us-east-1a, us-east-1b\ntagSpecification_1=k=v")
	f.Add("outpostarn=arn:aws:outposts:us-east-1:123456789012:outpost/op-1")
	f.Add("lockMode=compliance\nlockDuration=7\nlockCoolOffPeriod=24")
	f.Add("lockMode=governance\nlockExpirationDate=2030-01-02T15:04:05Z")
	f.Add("lockDuration=7")
	f.Add("lockMode=governance\nlockDuration=1\nlockExpirationDate=2030-01-02T15:04:05Z")
	f.Add("csi.storage.k8s.io/volumesnapshot/name=s\ncsi.storage.k8s.io/volumesnapshot/namespace=n\ncsi.storage.k8s.io/volumesnapshotcontent/name=c")
	f.Add("lockMode=governance\nlockmode=compliance\nlockDuration=1")
	f.Add("fastSnapshotRestoreAvailabilityZones=a\nfastsnapshotrestoreavailabilityzones=b")
	f.Fuzz(func(t *testing.T, text string) {
		raw := testutil.FuzzMap(text)
		s, err := ParseSnapshot(raw)
		if again, err2 := ParseSnapshot(raw); !reflect.DeepEqual(s, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseSnapshot(%q) gave %+v, %v, then %+v, %v", raw, s, err, again, err2)
		}
		if err != nil {
			checkRefusal(t, raw, err, KeyLockMode, KeyLockDuration, KeyLockCoolOffPeriod)
			return
		}
		if s.LockMode != "" && s.LockMode != "governance" && s.LockMode != "compliance" ||
			(s.LockDurationDays > 0 || s.LockExpirationDate != nil || s.LockCoolOffHours > 0) && s.LockMode == "" ||
			s.LockMode != "" && (s.LockDurationDays > 0) == (s.LockExpirationDate != nil) ||
			s.LockCoolOffHours > 0 && s.LockMode != "compliance" {
			t.Fatalf("ParseSnapshot(%q) accepted the lock %+v", raw, s)
		}
		if s.OutpostARN != "" && !strings.HasPrefix(s.OutpostARN, "arn:") {
			t.Fatalf("ParseSnapshot(%q) accepted the Outpost %q", raw, s.OutpostARN)
		}
		for _, z := range s.FSRZones {
			if z == "" || strings.TrimSpace(z) != z || strings.Contains(z, ",") {
				t.Fatalf("ParseSnapshot(%q) accepted the zones %q", raw, s.FSRZones)
			}
		}
	})
}

// FuzzParseExtraTags checks --extra-tags: no panic; a refusal is a params.Error; every accepted tag is a
// valid user tag, and parsing the tags written back as one flag gives them again.
func FuzzParseExtraTags(f *testing.F) {
	f.Add("team=storage,cost-center=42", "")
	f.Add("owner={{ .PVCNamespace }}", "team=x")
	f.Add("CSIVolumeName=x", "")
	f.Add("k", " , ")
	f.Add("a={{ .Bad", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		tags, err := ParseExtraTags(a, b)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ParseExtraTags(%q, %q): error %v is not a params.Error", a, b, err)
			}
			return
		}
		var specs []string
		for k, v := range tags {
			if ValidateUserTag(k, v) != nil || strings.TrimSpace(k) != k || strings.TrimSpace(v) != v {
				t.Fatalf("ParseExtraTags(%q, %q) accepted %q=%q", a, b, k, v)
			}
			specs = append(specs, k+"="+v)
		}
		if !strings.Contains(strings.Join(specs, ""), ",") {
			again, err := ParseExtraTags(strings.Join(specs, ","))
			if err != nil || !reflect.DeepEqual(again, tags) {
				t.Fatalf("ParseExtraTags(%q) of %q = %q, %v", strings.Join(specs, ","), tags, again, err)
			}
		}
	})
}
