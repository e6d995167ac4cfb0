package params

import (
	"strings"
	"testing"
)

func TestCheckMergedIOPS(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		cur     ModifyCurrent
		wantErr []string // fragments of the error, nil for success
	}{
		{name: "type only, gp3 3000 IOPS on 2 GiB to io2 exceeds 1000/GiB", in: map[string]string{"type": "io2"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 2, IOPS: 3000}, wantErr: []string{`"type"="io2"`, "2000", "current 3000 IOPS"}},
		{name: "type only, gp3 3000 IOPS on 10 GiB to io1 exceeds 50/GiB", in: map[string]string{"type": "io1"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 10, IOPS: 3000}, wantErr: []string{`"type"="io1"`, "500"}},
		{name: "type only, gp3 3000 IOPS on 100 GiB to io2 is fine", in: map[string]string{"type": "io2"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 100, IOPS: 3000}},
		{name: "type only, gp2 with too few IOPS for io1", in: map[string]string{"type": "io1"},
			cur: ModifyCurrent{VolumeType: "standard", SizeGiB: 100, IOPS: 0}, wantErr: []string{`"type"`, "at least 100"}},
		{name: "iops beyond io2 maximum on the current type", in: map[string]string{"iops": "300000"},
			cur: ModifyCurrent{VolumeType: "io2", SizeGiB: 1000, IOPS: 3000}, wantErr: []string{`"iops"="300000"`, "256000"}},
		{name: "iops beyond io1 per-GiB on the current size", in: map[string]string{"iops": "6000"},
			cur: ModifyCurrent{VolumeType: "io1", SizeGiB: 100, IOPS: 3000}, wantErr: []string{`"iops"="6000"`, "5000 for this 100 GiB"}},
		{name: "iops below io2 minimum", in: map[string]string{"iops": "50", "type": "io2"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 100, IOPS: 3000}, wantErr: []string{`"iops"="50"`, "at least 100"}},
		{name: "iops and type together judged on the new type", in: map[string]string{"iops": "20000", "type": "io2"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 100, IOPS: 3000}},
		{name: "iops on gp3 left to EC2", in: map[string]string{"iops": "90000"},
			cur: ModifyCurrent{VolumeType: "gp3", SizeGiB: 100, IOPS: 3000}},
		{name: "type to gp3 from io2 not checked", in: map[string]string{"type": "gp3"},
			cur: ModifyCurrent{VolumeType: "io2", SizeGiB: 1, IOPS: 50000}},
		{name: "iopsPerGB above io1 ratio", in: map[string]string{"iopspergb": "60"},
			cur: ModifyCurrent{VolumeType: "io1", SizeGiB: 100, IOPS: 3000}, wantErr: []string{`"iopspergb"="60"`, "50 IOPS per GiB"}},
		{name: "iopsPerGB within io2 ratio", in: map[string]string{"iopspergb": "500"},
			cur: ModifyCurrent{VolumeType: "io2", SizeGiB: 100, IOPS: 3000}},
		{name: "throughput only on io2 not re-checked", in: map[string]string{"throughput": "200"},
			cur: ModifyCurrent{VolumeType: "io2", SizeGiB: 1, IOPS: 50000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseModify(tt.in, false)
			if err != nil {
				t.Fatal(err)
			}
			err = m.CheckMergedIOPS(tt.cur)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %q", tt.wantErr)
			}
			for _, f := range tt.wantErr {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not contain %q", err, f)
				}
			}
		})
	}
}
