package limits

import (
	"strings"
	"testing"
)

func loadTable(t *testing.T) *Table {
	t.Helper()
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestEmbeddedTableRows(t *testing.T) {
	tab := loadTable(t)
	// 1,108 lines less five comment lines and the header.
	if tab.Len() != 1102 {
		t.Errorf("embedded table has %d types, want 1102", tab.Len())
	}
	tests := []struct {
		typ    string
		want   Limit
		listed bool
	}{
		{typ: "g5.48xlarge", want: Limit{Attachments: 9, Kind: Shared, EBSCards: 1}, listed: true},
		{typ: "m7i.large", want: Limit{Attachments: 32, Kind: Dedicated, EBSCards: 1}, listed: true},
		{typ: "c8gb.48xlarge", want: Limit{Attachments: 128, Kind: Dedicated, EBSCards: 2}, listed: true},
		{typ: "t2.micro", want: Limit{Attachments: 39, Kind: Xen, EBSCards: 1}, listed: true},
		{typ: "trn1.32xlarge", want: Limit{Attachments: 28, Kind: Shared, EBSCards: 1}, listed: true},
		// m5.large is not listed: it has the plain Nitro shared limit.
		{typ: "m5.large", want: Limit{Attachments: 27, Kind: Shared, EBSCards: 1}},
		{typ: "", want: Limit{Attachments: 27, Kind: Shared, EBSCards: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			got, listed := tab.Lookup(tc.typ)
			if got != tc.want || listed != tc.listed {
				t.Fatalf("Lookup(%q) = %+v, %v; want %+v, %v", tc.typ, got, listed, tc.want, tc.listed)
			}
		})
	}
}

func TestParseRefusesMalformedTables(t *testing.T) {
	const hdr = "# comment\n" + header + "\n"
	tests := []struct {
		name, in, want string
	}{
		{name: "no header", in: "# only comments\n", want: "no header"},
		{name: "wrong header", in: "type\tlimit\n", want: "header"},
		{name: "missing column", in: hdr + "m7i.large\t32\tdedicated\n", want: "3 fields"},
		{name: "zero limit", in: hdr + "m7i.large\t0\tdedicated\t1\n", want: "max_attachments"},
		{name: "unknown kind", in: hdr + "m7i.large\t32\tspecial\t1\n", want: "type \"special\""},
		{name: "zero cards", in: hdr + "m7i.large\t32\tdedicated\t0\n", want: "ebs_cards"},
		{name: "duplicate", in: hdr + "m7i.large\t32\tdedicated\t1\nm7i.large\t32\tdedicated\t1\n", want: "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	tab, err := Parse(strings.NewReader(hdr + "x1.big\t7\tshared\t3\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := tab.Lookup("x1.big"); !ok || l.Attachments != 7 || l.EBSCards != 3 {
		t.Fatalf("got %+v %v, want 3 cards of 7", l, ok)
	}
}

func TestMaxVolumes(t *testing.T) {
	tab := loadTable(t)
	auto := Settings{AttachLimit: -1, Reserved: -1}
	tests := []struct {
		name string
		node Node
		set  Settings
		want int64
	}{
		// g5.48xlarge attaches 9 in all, shared: upstream's old flat 27 let the scheduler place 26 volumes.
		{name: "g5.48xlarge: shared 9 less the root", node: Node{InstanceType: "g5.48xlarge", ENIs: 1}, set: auto, want: 8},
		{name: "g5.48xlarge: launch volumes and extra ENIs share the 9", node: Node{InstanceType: "g5.48xlarge", LaunchVolumes: 2, ENIs: 4}, set: auto, want: 3},
		{name: "g5.48xlarge: never below 1", node: Node{InstanceType: "g5.48xlarge", ENIs: 15}, set: auto, want: 1},
		// m7i.large has 32 dedicated to EBS: ENIs take none of them.
		{name: "m7i.large: dedicated 32 less the root", node: Node{InstanceType: "m7i.large", ENIs: 1}, set: auto, want: 31},
		{name: "m7i.large: ENIs do not count on dedicated", node: Node{InstanceType: "m7i.large", ENIs: 3}, set: auto, want: 31},
		{name: "m5.large: unlisted, shared 27 less the root", node: Node{InstanceType: "m5.large", ENIs: 1}, set: auto, want: 26},
		{name: "m5.large: extra ENIs share the limit", node: Node{InstanceType: "m5.large", LaunchVolumes: 2, ENIs: 3}, set: auto, want: 22},
		{name: "trn1.32xlarge: shared 28", node: Node{InstanceType: "trn1.32xlarge", ENIs: 8}, set: auto, want: 20},
		{name: "t2.micro: xen 39, ENIs do not count", node: Node{InstanceType: "t2.micro", ENIs: 3}, set: auto, want: 38},
		// Two EBS cards of 128 each: attaches without an EbsCardIndex all land on the first card, so one card
		// counts (upstream's 127), and no more than the 127 device names.
		{name: "c8gb.48xlarge: one card of 128 less the root", node: Node{InstanceType: "c8gb.48xlarge", ENIs: 2}, set: auto, want: 127},
		{name: "c8gb.48xlarge: no more than the device names", node: Node{InstanceType: "c8gb.48xlarge"}, set: Settings{AttachLimit: -1, Reserved: 0}, want: 127},
		{name: "c8gb.metal-48xl: one card of 78", node: Node{InstanceType: "c8gb.metal-48xl", LaunchVolumes: 1}, set: auto, want: 76},
		{name: "unknown type: Nitro default 27 shared", node: Node{InstanceType: "zz9.plural", ENIs: 2}, set: auto, want: 25},
		{name: "unknown metadata counts the root and one ENI", node: Node{InstanceType: "m7i.large", LaunchVolumes: -1}, set: auto, want: 31},
		{name: "--volume-attach-limit wins", node: Node{InstanceType: "g5.48xlarge", LaunchVolumes: 5, ENIs: 4}, set: Settings{AttachLimit: 11, Reserved: -1}, want: 11},
		// 0 is reported as is, as upstream; Kubernetes reads it as unlimited.
		{name: "--volume-attach-limit=0 is honoured", node: Node{InstanceType: "m7i.large", ENIs: 1}, set: Settings{AttachLimit: 0, Reserved: -1}, want: 0},
		{name: "reserved flag replaces the mapping count", node: Node{InstanceType: "m7i.large", LaunchVolumes: 9, ENIs: 1}, set: Settings{AttachLimit: -1, Reserved: 4}, want: 28},
		{name: "reserved 0 holds back nothing, not even the root", node: Node{InstanceType: "m7i.large", LaunchVolumes: 9}, set: Settings{AttachLimit: -1, Reserved: 0}, want: 32},
		{name: "reserved flag and ENIs on shared", node: Node{InstanceType: "m5.large", LaunchVolumes: 9, ENIs: 3}, set: Settings{AttachLimit: -1, Reserved: 4}, want: 21},
		{name: "reserved beyond the limit still leaves 1", node: Node{InstanceType: "m7i.large"}, set: Settings{AttachLimit: -1, Reserved: 1000}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tab.MaxVolumes(tc.node, tc.set); got.MaxVolumes != tc.want {
				t.Fatalf("MaxVolumes = %+v, want %d", got, tc.want)
			}
		})
	}
}
