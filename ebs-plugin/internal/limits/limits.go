// Package limits knows how many EBS volumes an EC2 instance type can attach, from EC2's per-type table
// (DescribeInstanceTypes EbsInfo), and turns that into the CSI max_volumes_per_node the node reports.
package limits

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// tableTSV is EC2's table, copied from the reference data; it is read-only and parsed into a Table by Load.
//
//go:embed ebs-volume-limits.tsv
var tableTSV []byte

// Kind says what shares an instance type's attachment slots.
type Kind string

// Kinds, as written in the table's type column.
const (
	// Shared: EBS volumes, network interfaces and NVMe instance-store volumes take slots from one limit.
	Shared Kind = "shared"
	// Dedicated: the limit counts EBS volumes only.
	Dedicated Kind = "dedicated"
	// Xen: pre-Nitro; EBS volumes only (40 device names minus the root).
	Xen Kind = "xen"
)

const (
	// DefaultAttachments is the limit of a type the table does not list: Nitro, shared, 28 slots less the
	// primary network interface every instance has.
	DefaultAttachments = 27
	header             = "instance_type\tmax_attachments\ttype\tebs_cards"
)

// Limit is one instance type's row.
type Limit struct {
	// Attachments is the limit per EBS card.
	Attachments int
	Kind        Kind
	// EBSCards is how many EBS cards the type has (1 on all but the largest types); each card has its own
	// Attachments slots.
	EBSCards int
}

// Table maps instance types to their limits. It is immutable once built and safe for concurrent use.
type Table struct {
	byType map[string]Limit
}

// Load parses the embedded table. It fails only if the embedded data is malformed, which a unit test rules out.
func Load() (*Table, error) { return Parse(bytes.NewReader(tableTSV)) }

// Parse reads a table: '#' comment lines, the header, then one tab-separated row per instance type.
func Parse(r io.Reader) (*Table, error) {
	t := &Table{byType: map[string]Limit{}}
	sc := bufio.NewScanner(r)
	line, sawHeader := 0, false
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if !sawHeader {
			if text != header {
				return nil, fmt.Errorf("limits table line %d: header %q, want %q", line, text, header)
			}
			sawHeader = true
			continue
		}
		name, l, err := parseRow(text)
		if err != nil {
			return nil, fmt.Errorf("limits table line %d: %w", line, err)
		}
		if _, dup := t.byType[name]; dup {
			return nil, fmt.Errorf("limits table line %d: instance type %q listed twice", line, name)
		}
		t.byType[name] = l
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("limits table: %w", err)
	}
	if !sawHeader {
		return nil, fmt.Errorf("limits table: no header %q", header)
	}
	return t, nil
}

func parseRow(text string) (string, Limit, error) {
	f := strings.Split(text, "\t")
	if len(f) != 4 {
		return "", Limit{}, fmt.Errorf("%d fields, want 4", len(f))
	}
	if f[0] == "" {
		return "", Limit{}, fmt.Errorf("empty instance_type")
	}
	att, err := strconv.Atoi(f[1])
	if err != nil || att < 1 {
		return "", Limit{}, fmt.Errorf("%s: max_attachments %q is not a positive integer", f[0], f[1])
	}
	kind := Kind(f[2])
	switch kind {
	case Shared, Dedicated, Xen:
	default:
		return "", Limit{}, fmt.Errorf("%s: type %q, want shared, dedicated or xen", f[0], f[2])
	}
	cards, err := strconv.Atoi(f[3])
	if err != nil || cards < 1 {
		return "", Limit{}, fmt.Errorf("%s: ebs_cards %q is not a positive integer", f[0], f[3])
	}
	return f[0], Limit{Attachments: att, Kind: kind, EBSCards: cards}, nil
}

// Lookup returns the type's limit, or the Nitro default (27 shared, one card) and false for a type the
// table does not list: new types are Nitro, and the shared default never over-schedules them.
func (t *Table) Lookup(instanceType string) (Limit, bool) {
	if l, ok := t.byType[instanceType]; ok {
		return l, true
	}
	return Limit{Attachments: DefaultAttachments, Kind: Shared, EBSCards: 1}, false
}

// Len is the number of instance types listed.
func (t *Table) Len() int { return len(t.byType) }
